// Energy per call (Note [energy per call] in src/tune/energy.cpp) on a simulated device: a clock
// that advances only when the meter sleeps or runs, and an energy counter that the device updates
// at fixed intervals while drawing an idle power plus a power per running candidate; and the
// energy policies (Note [energy policies] in src/tune/select.cpp) on fake candidates.

#include "tune/energy.hpp"

#include "fake_candidates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>

namespace {

using dnnx::AlgoInfo;
using dnnx::AlgoPolicy;
using dnnx::CandidateStatus;
using dnnx::Choice;
using dnnx::ErrorKind;
using dnnx::PolicyKind;
using dnnx::ProfileRow;
using dnnx::TuneOptions;
using dnnx::testing_fakes::Algo;
using dnnx::testing_fakes::fake_request;
using dnnx::testing_fakes::FakeBench;
using dnnx::testing_fakes::options_with;
using dnnx::tune::EnergyMeter;
using dnnx::tune::EnergyReading;
using dnnx::tune::MeterClock;

// A device whose energy counter holds what it drew up to its last update (every `update_s`),
// drawing `idle_w` at rest and idle_w plus a candidate's own extra power while it runs.
class SimulatedDevice {
 public:
  SimulatedDevice(double idle_w, double update_s) : idle_w_(idle_w), update_s_(update_s) {}

  // Advances the clock by `seconds` at `power` watts.
  void advance(double seconds, double power) {
    while (seconds > 0) {
      const double to_tick = next_tick_ - now_;
      const double step = std::min(seconds, to_tick);
      drawn_ += power * step;
      now_ += step;
      seconds -= step;
      if (now_ >= next_tick_ - 1e-12) {
        shown_ = drawn_;  // the board updates its counter
        next_tick_ += update_s_;
      }
    }
  }
  void idle(double seconds) { advance(seconds, idle_w_); }
  // `runs` calls of `call_s` seconds each, each adding `extra_w` over the idle draw.
  void run(long runs, double call_s, double extra_w) {
    advance(static_cast<double>(runs) * call_s, idle_w_ + extra_w);
  }

  double now() const { return now_; }
  double shown() const { return shown_; }
  double idle_w() const { return idle_w_; }

  MeterClock clock() {
    return {[this] { return now_; }, [this](double seconds) { idle(seconds); }};
  }

 private:
  double idle_w_;
  double update_s_;
  double now_ = 0;
  double drawn_ = 0;
  double shown_ = 0;
  double next_tick_ = 0.0371;  // not on a multiple of anything the meter uses
};

class SimulatedCounter final : public dnnx::detail::EnergyCounter {
 public:
  explicit SimulatedCounter(SimulatedDevice& device) : device_(device) {}
  std::string name() const override { return "simulated counter"; }
  double joules() override {
    ++reads;
    if (fail) throw dnnx::Error(ErrorKind::BackendFailure, "the counter is gone");
    // Reading the counter takes a little time, as a real read does.
    device_.idle(20e-6);
    return frozen ? 42.0 : device_.shown();
  }
  double clock_mhz() override { return 1755.0; }
  int reads = 0;
  bool fail = false;
  bool frozen = false;

 private:
  SimulatedDevice& device_;
};

// Each case: a candidate of `call_ms` per call adding `extra_w` over idle, on boards that update
// every 20 or 100 ms: the reading is call time x extra watts within 1.5%.
TEST(EnergyMeter, MeasuresTheEnergyCallsAddOverIdle) {
  struct Case {
    double call_ms, extra_w, update_s;
  };
  for (const Case c : {Case{0.05, 180.0, 0.1}, Case{0.8, 240.0, 0.02}, Case{7.0, 90.0, 0.05},
                       Case{40.0, 300.0, 0.1}}) {
    SimulatedDevice device(70.0, c.update_s);
    auto counter = std::make_shared<SimulatedCounter>(device);
    EnergyMeter meter(counter, 1000.0, 3, device.clock());
    long runs = 0;
    const EnergyReading reading = meter.measure(
        [&](long n) {
          runs += n;
          device.run(n, c.call_ms / 1e3, c.extra_w);
        },
        c.call_ms);
    const double expected = c.call_ms / 1e3 * c.extra_w;
    const std::string where =
        "call " + std::to_string(c.call_ms) + " ms, update " + std::to_string(c.update_s) + " s";
    EXPECT_NEAR(reading.joules_per_call, expected, 0.015 * expected) << where;
    EXPECT_NEAR(reading.idle_w, 70.0, 0.7) << where;
    EXPECT_GT(reading.power_w, 70.0) << where;
    // The loops' mean power, over seconds whose ends are estimates (half a step each).
    EXPECT_LE(reading.power_w, (70.0 + c.extra_w) * 1.015) << where;
    EXPECT_EQ(reading.clock_mhz, 1755.0) << where;
    EXPECT_EQ(reading.calls, runs) << where;
    // Three loops of at least a second each.
    EXPECT_GE(static_cast<double>(runs) * c.call_ms, 3 * 1000.0) << where;
    EXPECT_GE(reading.spread_joules, 0.0) << where;
  }
}

// The spread is that of the repeats: a board whose candidate draws a different power each loop
// shows it; the median is the middle loop's.
TEST(EnergyMeter, ReportsTheMedianAndTheSpreadOfItsLoops) {
  SimulatedDevice device(50.0, 0.05);
  auto counter = std::make_shared<SimulatedCounter>(device);
  EnergyMeter meter(counter, 500.0, 3, device.clock());
  const double powers[] = {100.0, 140.0, 120.0};
  // The loops run back to back; one ends with the first step after its window in which the
  // counter changes, and the next begins with the step after that (within a step of where the
  // meter puts the boundary: 10 ms of loops of 0.5 s).
  int loop = 0;
  double loop_begin = -1;
  bool ends = false;
  const EnergyReading reading = meter.measure(
      [&](long n) {
        if (loop_begin < 0) loop_begin = device.now();
        if (ends) {
          ++loop;
          loop_begin = device.now();
          ends = false;
        }
        const double start = device.now();
        const double shown = device.shown();
        device.run(n, 0.002, powers[std::min(loop, 2)]);
        ends = start - loop_begin >= 0.5 && device.shown() != shown;
      },
      2.0);
  EXPECT_EQ(loop, 2);
  EXPECT_NEAR(reading.joules_per_call, 0.002 * 120.0, 0.02 * 0.24);
  EXPECT_NEAR(reading.spread_joules, 0.002 * 40.0, 0.1 * 0.08);
}

// The loops run back to back: between the first loop's start and the last one's end the meter
// leaves no pause for an update (only its counter reads between steps), and the repeats take
// about their windows plus an update interval each.
TEST(EnergyMeter, RunsItsLoopsBackToBack) {
  SimulatedDevice device(60.0, 0.1);
  auto counter = std::make_shared<SimulatedCounter>(device);
  EnergyMeter meter(counter, 200.0, 3, device.clock());
  meter.idle_w();
  double first = -1, last_end = -1, longest_pause = 0;
  const EnergyReading reading = meter.measure(
      [&](long n) {
        if (first < 0) first = device.now();
        if (last_end >= 0) longest_pause = std::max(longest_pause, device.now() - last_end);
        device.run(n, 0.001, 150.0);
        last_end = device.now();
      },
      1.0);
  EXPECT_LT(longest_pause, 1e-3);
  EXPECT_LT(last_end - first, 3 * (0.2 + 0.1 + 0.01) + 1e-3);
  EXPECT_NEAR(reading.joules_per_call, 0.001 * 150.0, 0.015 * 0.15);
  EXPECT_LT(reading.spread_joules, 0.03 * 0.15);
}

// The idle baseline is measured once per meter, before the first candidate.
TEST(EnergyMeter, MeasuresIdleOnce) {
  SimulatedDevice device(65.0, 0.05);
  auto counter = std::make_shared<SimulatedCounter>(device);
  EnergyMeter meter(counter, 200.0, 1, device.clock());
  EXPECT_NEAR(meter.idle_w(), 65.0, 0.65);
  const double after_idle = device.now();
  meter.measure([&](long n) { device.run(n, 0.001, 10.0); }, 1.0);
  // One loop of at least 0.2 s and the waits for updates: no second idle window.
  EXPECT_LT(device.now() - after_idle, 0.2 + 3 * 0.05 + 0.05);
}

// Meters sharing baselines measure idle once per counter while it is fresh: a second meter of
// the same counter within max_age uses it, one after that or of another counter measures again.
TEST(EnergyMeter, SharesAFreshIdleBaseline) {
  SimulatedDevice device(65.0, 0.05);
  auto counter = std::make_shared<SimulatedCounter>(device);
  dnnx::tune::IdleBaselines shared(10.0);
  auto idle_window = [&](EnergyMeter& meter) {
    const double before = device.now();
    const double watts = meter.idle_w();
    EXPECT_NEAR(watts, 65.0, 0.65);
    return device.now() - before;
  };
  EnergyMeter first(counter, 200.0, 1, device.clock(), &shared);
  EXPECT_GE(idle_window(first), 0.2);  // measured
  EnergyMeter second(counter, 200.0, 1, device.clock(), &shared);
  EXPECT_EQ(idle_window(second), 0.0);  // the first one's
  device.idle(11.0);
  EnergyMeter stale(counter, 200.0, 1, device.clock(), &shared);
  EXPECT_GE(idle_window(stale), 0.2);  // older than 10 s: measured again
  EXPECT_TRUE(shared.fresh("simulated counter", device.now()).has_value());
  EXPECT_FALSE(shared.fresh("another counter", device.now()).has_value());
  EnergyMeter alone(counter, 200.0, 1, device.clock());
  EXPECT_GE(idle_window(alone), 0.2);  // shares nothing
}

TEST(EnergyMeter, ACounterThatDoesNotMoveOrFailsIsAnError) {
  SimulatedDevice device(65.0, 0.05);
  auto counter = std::make_shared<SimulatedCounter>(device);
  counter->frozen = true;
  EnergyMeter meter(counter, 100.0, 1, device.clock());
  try {
    meter.measure([&](long n) { device.run(n, 0.001, 10.0); }, 1.0);
    ADD_FAILURE() << "a frozen counter measured something";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported);
    EXPECT_NE(error.message().find("simulated counter"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("did not change"), std::string::npos) << error.message();
  }
  counter->frozen = false;
  counter->fail = true;
  EnergyMeter failing(counter, 100.0, 1, device.clock());
  try {
    failing.measure([&](long n) { device.run(n, 0.001, 10.0); }, 1.0);
    ADD_FAILURE() << "a failing counter measured something";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::BackendFailure);
  }
}

TEST(EnergyMeter, RejectsAWindowOrRepeatsOutOfRange) {
  SimulatedDevice device(65.0, 0.05);
  auto counter = std::make_shared<SimulatedCounter>(device);
  for (const double window : {0.0, 49.0, 60001.0, std::nan("")}) {
    try {
      EnergyMeter meter(counter, window, 3, device.clock());
      ADD_FAILURE() << "window " << window << " accepted";
    } catch (const dnnx::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find("energy_window_ms"), std::string::npos);
    }
  }
  for (const int repeats : {0, -1, 101}) {
    try {
      EnergyMeter meter(counter, 1000.0, repeats, device.clock());
      ADD_FAILURE() << "repeats " << repeats << " accepted";
    } catch (const dnnx::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find("energy_repeats"), std::string::npos);
    }
  }
}

// ---- the energy policies on fake candidates

// A source that reports each candidate's scripted joules per call, and counts the measurements.
struct ScriptedEnergy {
  std::map<std::string, double> joules;
  std::map<std::string, int> measured;
  std::string fails;  // an id whose measurement throws
  std::map<std::string, double> spreads;  // joules; 1% of the energy where not named

  dnnx::tune::EnergySource source() {
    return {[this](const AlgoInfo& algo, double call_ms) {
              ++measured[algo.id];
              EXPECT_GT(call_ms, 0.0) << algo.id;
              if (algo.id == fails)
                throw dnnx::Error(ErrorKind::BackendFailure, "the counter is gone");
              EnergyReading reading;
              reading.joules_per_call = joules.at(algo.id);
              const auto spread = spreads.find(algo.id);
              reading.spread_joules =
                  spread != spreads.end() ? spread->second : 0.01 * reading.joules_per_call;
              reading.power_w = 300;
              reading.clock_mhz = 1980;
              return reading;
            },
            "scripted counter"};
  }
};

Choice select_with(FakeBench& bench, const AlgoPolicy& policy, ScriptedEnergy* energy) {
  TuneOptions options = options_with(policy);
  return dnnx::tune::select(
      fake_request(), bench.candidates(), options, bench.run(), {}, dnnx::tune::FirstRun::warm, {},
      {}, energy != nullptr ? energy->source() : dnnx::tune::EnergySource{{}, "no counter here"});
}

const ProfileRow& row_named(const Choice& choice, const std::string& id) {
  for (const ProfileRow& row : choice.timings) {
    if (row.algo.id == id) return row;
  }
  throw std::runtime_error("no row " + id);
}

// fast: 1.0 ms and 4 mJ; lean: 1.5 ms and 3 mJ; slow: 3.0 ms (outside the final band of 2x,
// never measured) and 1 mJ.
FakeBench three() {
  FakeBench bench;
  bench.add(Algo("fast"), {1.0}).add(Algo("lean"), {1.5}).add(Algo("slow"), {3.0});
  return bench;
}
ScriptedEnergy three_energy() {
  return {{{"fast", 4e-3}, {"lean", 3e-3}, {"slow", 1e-3}}, {}, {}, {}};
}

TEST(EnergyPolicies, MinEnergyKeepsTheLeastEnergyAmongTheFinalContenders) {
  FakeBench bench = three();
  ScriptedEnergy energy = three_energy();
  const Choice choice = select_with(bench, AlgoPolicy::min_energy(), &energy);
  EXPECT_EQ(choice.algo.id, "lean");
  EXPECT_DOUBLE_EQ(choice.energy_j, 3e-3);
  EXPECT_DOUBLE_EQ(choice.time_ms, 1.5);
  EXPECT_EQ(choice.energy_meter, "scripted counter");
  EXPECT_EQ(choice.timings.front().algo.id, "lean");
  // The contenders were measured once each; the candidate outside the band never.
  EXPECT_EQ(energy.measured["fast"], 1);
  EXPECT_EQ(energy.measured["lean"], 1);
  EXPECT_EQ(energy.measured.count("slow"), 0u);
  EXPECT_DOUBLE_EQ(row_named(choice, "fast").energy_j, 4e-3);
  EXPECT_DOUBLE_EQ(row_named(choice, "fast").power_w, 300.0);
  EXPECT_TRUE(std::isnan(row_named(choice, "slow").energy_j));
  // The runner-up is the fastest other candidate, and what time alone keeps is named.
  EXPECT_EQ(choice.runner_up, "fast");
  EXPECT_EQ(choice.energy_fastest, "fast");
}

// Choice::energy_fastest is what exhaustive would keep, Note [host cost ties] applied: a
// candidate noted host_heavy and faster by less than host_tie is not it, though it has the least
// time among the measured contenders.
TEST(EnergyPolicies, TheFastestNamedIsWhatExhaustiveWouldKeep) {
  FakeBench bench;
  bench.add(Algo("heavy").note("host_heavy"), {0.99}).add(Algo("light"), {1.0});
  ScriptedEnergy energy{{{"heavy", 3e-3}, {"light", 4e-3}}, {}, {}, {}};
  const Choice choice = select_with(bench, AlgoPolicy::min_energy(), &energy);
  EXPECT_EQ(choice.algo.id, "heavy") << "it saves a quarter of light's energy";
  EXPECT_EQ(choice.energy_fastest, "light");
  FakeBench again;
  again.add(Algo("heavy").note("host_heavy"), {0.99}).add(Algo("light"), {1.0});
  EXPECT_EQ(select_with(again, AlgoPolicy::exhaustive(), nullptr).algo.id, "light");
}

TEST(EnergyPolicies, EnergyDelayWeighsTheTimeToo) {
  FakeBench bench = three();
  ScriptedEnergy energy = three_energy();
  // fast: 4 mJ x 1.0 ms = 4; lean: 3 mJ x 1.5 ms = 4.5.
  const Choice choice = select_with(bench, AlgoPolicy::energy_delay(), &energy);
  EXPECT_EQ(choice.algo.id, "fast");
  EXPECT_DOUBLE_EQ(choice.energy_j, 4e-3);
  // Exhaustive keeps the fastest and measures nothing.
  FakeBench again = three();
  ScriptedEnergy unused = three_energy();
  const Choice fastest = select_with(again, AlgoPolicy::exhaustive(), &unused);
  EXPECT_EQ(fastest.algo.id, "fast");
  EXPECT_TRUE(unused.measured.empty());
  EXPECT_TRUE(std::isnan(fastest.energy_j));
  EXPECT_TRUE(fastest.energy_meter.empty());
  EXPECT_TRUE(fastest.energy_fastest.empty());
}

TEST(EnergyPolicies, ASavingWithinTheSpreadKeepsTheFastest) {
  // lean saves 0.1 mJ of fast's 4: beyond spreads of 1% (0.04 mJ), within one of 0.2 mJ.
  auto pick = [](const AlgoPolicy& policy, double lean_j, double lean_spread_j) {
    FakeBench bench = three();
    ScriptedEnergy energy = three_energy();
    energy.joules["lean"] = lean_j;
    if (lean_spread_j >= 0) energy.spreads["lean"] = lean_spread_j;
    const Choice choice = select_with(bench, policy, &energy);
    EXPECT_EQ(energy.measured["fast"], 1);
    EXPECT_EQ(energy.measured["lean"], 1);
    EXPECT_DOUBLE_EQ(row_named(choice, "lean").energy_j, lean_j);
    return choice;
  };
  const Choice beyond = pick(AlgoPolicy::min_energy(), 3.9e-3, -1);
  EXPECT_EQ(beyond.algo.id, "lean");
  EXPECT_DOUBLE_EQ(beyond.energy_j, 3.9e-3);
  const Choice within = pick(AlgoPolicy::min_energy(), 3.9e-3, 0.2e-3);
  EXPECT_EQ(within.algo.id, "fast");
  EXPECT_DOUBLE_EQ(within.energy_j, 4e-3);
  EXPECT_DOUBLE_EQ(within.time_ms, 1.0);
  // energy_delay: fast 4 mJ x 1.0 ms = 4, lean 2.6 mJ x 1.5 ms = 3.9; the noise is the larger
  // spread times its call's time: 0.04 (fast's) against 0.1 mJ x 1.5 ms = 0.15.
  EXPECT_EQ(pick(AlgoPolicy::energy_delay(), 2.6e-3, -1).algo.id, "lean");
  EXPECT_EQ(pick(AlgoPolicy::energy_delay(), 2.6e-3, 0.1e-3).algo.id, "fast");
  // No spread (a single loop each): the least energy wins however small the difference.
  FakeBench bench = three();
  ScriptedEnergy energy = three_energy();
  energy.joules["lean"] = 3.999e-3;
  energy.spreads = {{"fast", 0.0}, {"lean", 0.0}};
  EXPECT_EQ(select_with(bench, AlgoPolicy::min_energy(), &energy).algo.id, "lean");
}

TEST(EnergyPolicies, WithoutACounterTheFastestIsKeptAndTheChoiceSaysWhy) {
  FakeBench bench = three();
  const Choice choice = select_with(bench, AlgoPolicy::min_energy(), nullptr);
  EXPECT_EQ(choice.algo.id, "fast");
  EXPECT_TRUE(std::isnan(choice.energy_j));
  EXPECT_EQ(choice.energy_meter, "no counter here");
}

TEST(EnergyPolicies, AFailedMeasurementLeavesTheOthersToChooseFrom) {
  FakeBench bench = three();
  ScriptedEnergy energy = three_energy();
  energy.fails = "lean";
  const Choice choice = select_with(bench, AlgoPolicy::min_energy(), &energy);
  EXPECT_EQ(choice.algo.id, "fast");
  EXPECT_NE(row_named(choice, "lean").detail.find("energy not measured: the counter is gone"),
            std::string::npos)
      << row_named(choice, "lean").detail;
  // Every contender failing keeps the fastest, and the meter says why.
  FakeBench again = three();
  ScriptedEnergy failing = three_energy();
  failing.fails = "fast";                 // fast's measurement throws
  failing.joules["lean"] = std::nan("");  // and lean's reads nothing
  const Choice kept = select_with(again, AlgoPolicy::min_energy(), &failing);
  EXPECT_EQ(kept.algo.id, "fast");
  EXPECT_TRUE(std::isnan(kept.energy_j));
  EXPECT_NE(kept.energy_meter.find("no contender's energy could be measured"), std::string::npos)
      << kept.energy_meter;
}

// The settling of late plans (Request::energy_kept) measures only when a late plan contends, and
// then every contender, the kept choice too; otherwise the kept choice keeps its recorded energy.
TEST(EnergyPolicies, TheSettlingOfLatePlansMeasuresOnlyWhenALatePlanContends) {
  const TuneOptions options = options_with(AlgoPolicy::min_energy());
  auto settle = [&](FakeBench& bench, ScriptedEnergy& energy, const std::string& kept,
                    double recorded_j) {
    dnnx::tune::Request request = fake_request();
    request.probe_at_once = true;
    ProfileRow row;
    row.algo = bench.candidates().front();
    EXPECT_EQ(row.algo.id, kept) << "the kept choice is listed first";
    row.energy_j = recorded_j;
    row.energy_spread_j = 1e-5;
    row.power_w = 250;
    row.clock_mhz = 1755;
    request.energy_kept = row;
    return dnnx::tune::select(request, bench.candidates(), options, bench.run(), {},
                              dnnx::tune::FirstRun::warm, {}, {}, energy.source());
  };
  {
    SCOPED_TRACE("a late plan outside the final band");
    FakeBench bench;
    bench.add(Algo("lean"), {1.5}).add(Algo("slow"), {3.5});
    ScriptedEnergy energy = three_energy();
    const Choice choice = settle(bench, energy, "lean", 2.9e-3);
    EXPECT_EQ(choice.algo.id, "lean");
    EXPECT_TRUE(energy.measured.empty()) << "nothing can change the choice";
    EXPECT_DOUBLE_EQ(choice.energy_j, 2.9e-3) << "the recorded energy";
    EXPECT_EQ(choice.energy_meter, "scripted counter");
    const ProfileRow& row = row_named(choice, "lean");
    EXPECT_DOUBLE_EQ(row.energy_j, 2.9e-3);
    EXPECT_DOUBLE_EQ(row.energy_spread_j, 1e-5);
    EXPECT_DOUBLE_EQ(row.power_w, 250.0);
    EXPECT_DOUBLE_EQ(row.clock_mhz, 1755.0);
    EXPECT_DOUBLE_EQ(row.median_ms, 1.5) << "timed again";
    EXPECT_EQ(bench.calls("slow"), 1) << "timed (abandoned on its first run), never measured";
  }
  {
    SCOPED_TRACE("a kept choice without a recorded energy");
    FakeBench bench;
    bench.add(Algo("lean"), {1.5}).add(Algo("slow"), {3.5});
    ScriptedEnergy energy = three_energy();
    const Choice choice = settle(bench, energy, "lean", std::nan(""));
    EXPECT_EQ(energy.measured["lean"], 1);
    EXPECT_DOUBLE_EQ(choice.energy_j, 3e-3);
  }
  {
    SCOPED_TRACE("a late plan within it");
    FakeBench bench;
    bench.add(Algo("lean"), {1.5}).add(Algo("fast"), {1.0});
    ScriptedEnergy energy = three_energy();
    const Choice choice = settle(bench, energy, "lean", 2.9e-3);
    EXPECT_EQ(choice.algo.id, "lean") << "3 mJ against the late plan's 4";
    EXPECT_EQ(energy.measured["lean"], 1) << "measured again beside the late plan";
    EXPECT_EQ(energy.measured["fast"], 1);
    EXPECT_DOUBLE_EQ(choice.energy_j, 3e-3);
  }
  {
    SCOPED_TRACE("a late plan so fast the kept choice falls outside the band");
    FakeBench bench;
    bench.add(Algo("slow"), {3.0}).add(Algo("fast"), {1.0});
    ScriptedEnergy energy = three_energy();
    const Choice choice = settle(bench, energy, "slow", 0.5e-3);
    EXPECT_EQ(choice.algo.id, "fast");
    EXPECT_EQ(energy.measured["fast"], 1);
    EXPECT_EQ(energy.measured.count("slow"), 0u);
    EXPECT_DOUBLE_EQ(choice.energy_j, 4e-3);
  }
}

TEST(EnergyPolicies, ParseAndPrintAndKeyTheirMeasurement) {
  EXPECT_EQ(AlgoPolicy::parse("min_energy").kind, PolicyKind::min_energy);
  EXPECT_EQ(AlgoPolicy::parse("ENERGY_DELAY:once").kind, PolicyKind::energy_delay);
  EXPECT_EQ(AlgoPolicy::parse("energy_delay:once").to_string(), "energy_delay:once");
  EXPECT_EQ(AlgoPolicy::min_energy().to_string(), "min_energy");
  EXPECT_TRUE(dnnx::timed_policy(PolicyKind::min_energy));
  EXPECT_TRUE(dnnx::timed_policy(PolicyKind::energy_delay));
  EXPECT_FALSE(dnnx::timed_policy(PolicyKind::heuristic));
  TuneOptions energy = options_with(AlgoPolicy::min_energy());
  const std::string key =
      dnnx::tune::make_key("conv", "desc", dnnx::Direction::fwd, energy, "fingerprint");
  EXPECT_NE(key.find("policy=min_energy"), std::string::npos) << key;
  EXPECT_NE(key.find("energy_window_ms=1000 energy_repeats=3"), std::string::npos) << key;
  energy.energy_window_ms = 250;
  EXPECT_NE(dnnx::tune::make_key("conv", "desc", dnnx::Direction::fwd, energy, "fingerprint"), key);
  // An exhaustive key does not change with the energy settings.
  TuneOptions exhaustive = options_with(AlgoPolicy::exhaustive());
  const std::string plain =
      dnnx::tune::make_key("conv", "desc", dnnx::Direction::fwd, exhaustive, "fingerprint");
  exhaustive.energy_window_ms = 250;
  EXPECT_EQ(dnnx::tune::make_key("conv", "desc", dnnx::Direction::fwd, exhaustive, "fingerprint"),
            plain);
  EXPECT_EQ(plain.find("energy"), std::string::npos) << plain;
}

}  // namespace
