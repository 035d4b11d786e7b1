#include "tune/energy.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

namespace dnnx::tune {

// Note [energy per call]
// A GPU's energy counter (NVML's total energy, millijoules) changes only when the board updates
// it, every 20-100 ms, and board power is averaged over that time, so no single sub-millisecond
// call can be measured. A candidate is measured over a loop instead: its runs back to back for at
// least a window (TuneOptions::energy_window_ms, a second by default: 10-50 updates), in steps of
// about step_ms, each of which ends when its runs have finished. The loop starts on an update
// (the counter polled until it changes) and ends on one (steps run past the window until the
// counter changes), so the energy read covers whole update intervals. The moment of an update is
// known only to lie between the read before it and the read that saw it: the estimate is the
// middle of the two, and at the loop's end the runs counted are those up to the middle of the last
// step, so what is left uncertain is half a step (of a call, for calls longer than step_ms) at
// either side of a window of a second. The idle power is measured the same way with nothing
// running and subtracted, so that what is reported is the energy the calls add, not the board's
// static draw over their time; once per meter (per search or profile), and the op layer's meters
// share it for 30 s per counter (IdleBaselines::process()): a tune of many layers measured it
// again for every layer-direction, a window and two updates each, a tenth of its energy time at
// short windows, while the board's idle draw hardly moves (an H200's read 123.08 and 123.10 W
// seven minutes and a whole search apart: docs/benchmarks.md, *GPU energy*).
//   joules per call = (energy over the loop - idle watts x the loop's seconds) / its runs.
// The loop runs `repeats` times (3 by default), back to back: each loop after the first starts
// on the update that ended the one before, and the last step of that loop, which the update fell
// in, counts half in each. (Waiting for the next update instead left the device idle for a whole
// update interval between loops: a large share of the time at short windows, and a device whose
// clocks may drop meanwhile.) The median is reported with the spread of the repeats (max - min),
// the loop's mean power and the clock after the last loop, so that a reading taken while the clocks
// moved can be told apart. Waiting for an update gives up after max_update_s: a counter that does
// not move cannot measure anything.
constexpr double step_ms = 10.0;
constexpr double poll_s = 0.001;
constexpr double max_update_s = 2.0;

MeterClock MeterClock::steady() {
  return {
      [] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
      },
      [](double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }};
}

std::optional<double> IdleBaselines::fresh(const std::string& counter, double now_s) const {
  std::lock_guard lock(mutex_);
  const auto found = baselines_.find(counter);
  if (found == baselines_.end() || now_s - found->second.at_s > max_age_s_) return std::nullopt;
  return found->second.watts;
}

void IdleBaselines::store(const std::string& counter, double watts, double now_s) {
  std::lock_guard lock(mutex_);
  baselines_[counter] = {watts, now_s};
}

IdleBaselines& IdleBaselines::process() {
  static auto* baselines = new IdleBaselines(30.0);  // never destroyed: meters may outlive statics
  return *baselines;
}

EnergyMeter::EnergyMeter(std::shared_ptr<EnergyCounter> counter, double window_ms, int repeats,
                         MeterClock clock, IdleBaselines* shared)
    : counter_(std::move(counter)),
      window_s_(window_ms / 1e3),
      repeats_(repeats),
      clock_(std::move(clock)),
      shared_(shared) {
  DNNX_CHECK_ARG(counter_ != nullptr, "an energy meter needs a counter");
  DNNX_CHECK_ARG(std::isfinite(window_ms) && window_ms >= TuneOptions::min_energy_window_ms &&
                     window_ms <= TuneOptions::max_energy_window_ms,
                 "energy_window_ms must be from ", TuneOptions::min_energy_window_ms, " to ",
                 TuneOptions::max_energy_window_ms, ", got ", window_ms);
  DNNX_CHECK_ARG(repeats >= 1 && repeats <= TuneOptions::max_energy_repeats,
                 "energy_repeats must be from 1 to ", TuneOptions::max_energy_repeats, ", got ",
                 repeats);
}

EnergyMeter::Edge EnergyMeter::next_update(double after_joules, double limit_s) {
  const double start = clock_.now_s();
  double before = start;  // the read before the update
  for (;;) {
    const double joules = counter_->joules();
    const double now = clock_.now_s();
    if (joules != after_joules) return {(before + now) / 2, joules};
    if (now - start > limit_s) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("the energy counter (", counter_->name(), ") did not change in ",
                                limit_s, " s; nothing can be measured on it"));
    }
    before = now;
    clock_.sleep_s(poll_s);
  }
}

double EnergyMeter::idle_w() {
  if (idle_w_) return *idle_w_;
  if (shared_ != nullptr) {
    idle_w_ = shared_->fresh(counter_->name(), clock_.now_s());
    if (idle_w_) return *idle_w_;
  }
  const Edge begin = next_update(counter_->joules(), max_update_s);
  clock_.sleep_s(window_s_);
  // The update that ends the window: polled from the value at its end.
  const Edge end = next_update(counter_->joules(), max_update_s);
  idle_w_ = (end.joules - begin.joules) / (end.seconds - begin.seconds);
  if (shared_ != nullptr) shared_->store(counter_->name(), *idle_w_, end.seconds);
  return *idle_w_;
}

EnergyReading EnergyMeter::measure(const std::function<void(long runs)>& run, double call_ms) {
  const double idle = idle_w();
  const long step = std::max(
      1L, static_cast<long>(
              std::llround(std::isfinite(call_ms) && call_ms > 0 ? step_ms / call_ms : 1.0)));
  std::vector<double> per_call;
  EnergyReading reading;
  reading.idle_w = idle;
  double joules_sum = 0, seconds_sum = 0;
  // The first loop starts on an update; each later one on the update that ended the loop before,
  // with the half of that loop's last step after it (Note [energy per call]).
  Edge begin = next_update(counter_->joules(), max_update_s);
  double carried = 0;  // runs of the previous loop's last step counted in this one
  for (int repeat = 0; repeat < repeats_; ++repeat) {
    long runs = 0;
    double now = clock_.now_s();
    while (now - begin.seconds < window_s_) {
      run(step);
      runs += step;
      now = clock_.now_s();
    }
    // Steps go on until the counter changes from its value at the window's end: that update
    // came during the last step, taken at its middle.
    const double at_window = counter_->joules();
    const double limit = clock_.now_s() + max_update_s;
    double joules = at_window;
    double step_start = 0, step_end = 0;
    do {
      step_start = clock_.now_s();
      if (step_start > limit) {
        detail::raise(ErrorKind::Unsupported,
                      detail::cat("the energy counter (", counter_->name(), ") did not change in ",
                                  max_update_s, " s of runs; nothing can be measured on it"));
      }
      run(step);
      runs += step;
      step_end = clock_.now_s();
      joules = counter_->joules();
    } while (joules == at_window);
    const Edge end{(step_start + step_end) / 2, joules};
    const double seconds = end.seconds - begin.seconds;
    const double counted = carried + static_cast<double>(runs) - 0.5 * static_cast<double>(step);
    const double used = end.joules - begin.joules;
    per_call.push_back((used - idle * seconds) / counted);
    joules_sum += used;
    seconds_sum += seconds;
    reading.calls += runs;
    begin = end;
    carried = 0.5 * static_cast<double>(step);
  }
  reading.clock_mhz = counter_->clock_mhz();
  std::sort(per_call.begin(), per_call.end());
  const std::size_t middle = per_call.size() / 2;
  reading.joules_per_call =
      per_call.size() % 2 == 1 ? per_call[middle] : (per_call[middle - 1] + per_call[middle]) / 2;
  reading.spread_joules = per_call.back() - per_call.front();
  reading.power_w = joules_sum / seconds_sum;
  return reading;
}

void record_energy(ProfileRow& row, const EnergyReading& reading) {
  row.energy_j = reading.joules_per_call;
  row.energy_spread_j = reading.spread_joules;
  row.power_w = reading.power_w;
  row.clock_mhz = reading.clock_mhz;
}

}  // namespace dnnx::tune
