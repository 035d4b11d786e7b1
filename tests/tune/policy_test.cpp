// The selection engine (src/tune/select.hpp) driven by fake candidates with scripted times, so
// every expectation is exact: which candidate wins, which ran, how often, and with what status.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>

#include "fake_candidates.hpp"
#include "tune/select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace dnnx {
// Readable policies in gtest failure messages.
void PrintTo(const AlgoPolicy& policy, std::ostream* out) { *out << policy.to_string(); }
}  // namespace dnnx

namespace {

using dnnx::AlgoPolicy;
using dnnx::CandidateStatus;
using dnnx::Choice;
using dnnx::Direction;
using dnnx::ErrorKind;
using dnnx::PolicyKind;
using dnnx::ProfileRow;
using dnnx::Reuse;
using dnnx::TuneOptions;
using dnnx::testing_fakes::Algo;
using dnnx::testing_fakes::fake_request;
using dnnx::testing_fakes::FakeBench;
using dnnx::testing_fakes::options_with;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

const ProfileRow& row_of(const std::vector<ProfileRow>& rows, const std::string& id) {
  const auto it = std::find_if(rows.begin(), rows.end(),
                               [&](const ProfileRow& row) { return row.algo.id == id; });
  if (it == rows.end()) throw std::runtime_error("no row for " + id);
  return *it;
}

std::vector<std::string> ids_of(const std::vector<ProfileRow>& rows) {
  std::vector<std::string> ids;
  for (const ProfileRow& row : rows) ids.push_back(row.algo.id);
  return ids;
}

// Runs `call`, expects dnnx::Error of `kind`, and returns its message for further checks.
template <typename Call>
std::string error_message(Call call, ErrorKind kind) {
  try {
    call();
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    return error.message();
  }
  ADD_FAILURE() << "no dnnx::Error raised";
  return {};
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

Choice select(FakeBench& bench, const TuneOptions& options, Direction direction = Direction::fwd) {
  return dnnx::tune::select(fake_request(direction), bench.candidates(), options, bench.run());
}

// ---------------------------------------------------------------- heuristic

TEST(HeuristicPolicy, FirstAdmissibleInPriorityOrderAndRunsNothing) {
  FakeBench bench;
  bench.add(Algo("u").unsupported("needs stride 1"))
      .add(Algo("w").workspace(MiB))
      .add(Algo("n").nondeterministic())
      .add(Algo("a"), {9.0})
      .add(Algo("b"), {1.0});
  TuneOptions options = options_with(AlgoPolicy::heuristic());
  options.workspace_limit = KiB;
  options.deterministic = true;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "a");
  EXPECT_EQ(bench.total_calls(), 0);
  EXPECT_EQ(choice.candidates_timed, 0);
  EXPECT_TRUE(choice.timings.empty());
  EXPECT_TRUE(std::isnan(choice.time_ms));
  EXPECT_EQ(choice.policy, AlgoPolicy::heuristic());
  EXPECT_EQ(choice.direction, Direction::fwd);
  EXPECT_EQ(choice.key, "fake-key");
}

TEST(HeuristicPolicy, EachConstraintAloneMovesThePick) {
  FakeBench bench;
  bench.add(Algo("w").workspace(MiB)).add(Algo("n").nondeterministic()).add(Algo("a"));
  TuneOptions options = options_with(AlgoPolicy::heuristic());
  EXPECT_EQ(select(bench, options).algo.id, "w");
  options.workspace_limit = KiB;
  EXPECT_EQ(select(bench, options).algo.id, "n");
  options.deterministic = true;
  EXPECT_EQ(select(bench, options).algo.id, "a");
  options.fastest = true;  // ignores the workspace limit, not determinism
  EXPECT_EQ(select(bench, options).algo.id, "w");
  options.deterministic = false;
  options.fastest = false;
  options.workspace_limit = MiB;  // the limit is inclusive
  EXPECT_EQ(select(bench, options).algo.id, "w");
  EXPECT_EQ(bench.total_calls(), 0);
}

TEST(HeuristicPolicy, NothingAdmissibleIsUnsupportedSayingWhy) {
  FakeBench bench;
  bench.add(Algo("u").unsupported("needs stride 1")).add(Algo("w").workspace(MiB));
  TuneOptions options = options_with(AlgoPolicy::heuristic());
  options.workspace_limit = 0;
  const std::string message =
      error_message([&] { select(bench, options); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "u: needs stride 1")) << message;
  EXPECT_TRUE(contains(message, "w:")) << message;
  EXPECT_TRUE(contains(message, std::to_string(MiB))) << message;
  EXPECT_EQ(bench.total_calls(), 0);
}

TEST(HeuristicPolicy, EmptyCandidateListIsUnsupported) {
  FakeBench bench;
  error_message([&] { select(bench, options_with(AlgoPolicy::heuristic())); },
                ErrorKind::Unsupported);
}

// ---------------------------------------------------------------- fixed

TEST(FixedPolicy, HonoursTheIdEvenWhenNotFirstNorFastest) {
  FakeBench bench;
  bench.add(Algo("a"), {1.0}).add(Algo("b"), {0.5}).add(Algo("c"), {30.0});
  const Choice choice = select(bench, options_with(AlgoPolicy::fixed("c")));
  EXPECT_EQ(choice.algo.id, "c");
  EXPECT_EQ(choice.policy.kind, PolicyKind::fixed);
  EXPECT_EQ(bench.total_calls(), 0);
}

TEST(FixedPolicy, IsPerDirection) {
  FakeBench bench;
  bench.add(Algo("a")).add(Algo("b")).add(Algo("c"));
  TuneOptions options;
  options.fwd = AlgoPolicy::fixed("b");
  options.bwd_weights = AlgoPolicy::fixed("c");
  EXPECT_EQ(select(bench, options, Direction::fwd).algo.id, "b");
  EXPECT_EQ(select(bench, options, Direction::bwd_data).algo.id, "a");
  EXPECT_EQ(select(bench, options, Direction::bwd_weights).algo.id, "c");
}

TEST(FixedPolicy, UnknownIdIsInvalidArgumentListingValidIds) {
  FakeBench bench;
  bench.add(Algo("fake:direct")).add(Algo("fake:fft").unsupported("no")).add(Algo("fake:gemm"));
  const std::string message =
      error_message([&] { select(bench, options_with(AlgoPolicy::fixed("fake:winograd"))); },
                    ErrorKind::InvalidArgument);
  EXPECT_TRUE(contains(message, "fake:winograd")) << message;
  EXPECT_TRUE(contains(message, "fake:direct, fake:gemm")) << message;
  // An id that cannot run is not offered as a valid one.
  EXPECT_FALSE(contains(message, "fake:fft")) << message;
}

TEST(FixedPolicy, UnsupportedIdIsUnsupportedWithReasonAndValidIds) {
  FakeBench bench;
  bench.add(Algo("fake:direct")).add(Algo("fake:fft").unsupported("FFT needs stride 1, got 2"));
  const std::string message = error_message(
      [&] { select(bench, options_with(AlgoPolicy::fixed("fake:fft"))); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "fake:fft")) << message;
  EXPECT_TRUE(contains(message, "FFT needs stride 1, got 2")) << message;
  EXPECT_TRUE(contains(message, "fake:direct")) << message;
}

TEST(FixedPolicy, ConstraintsStillApply) {
  FakeBench bench;
  bench.add(Algo("a")).add(Algo("big").workspace(MiB)).add(Algo("racy").nondeterministic());
  TuneOptions options = options_with(AlgoPolicy::fixed("big"));
  options.workspace_limit = KiB;
  std::string message = error_message([&] { select(bench, options); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "big")) << message;
  EXPECT_TRUE(contains(message, "workspace")) << message;
  options.fastest = true;
  EXPECT_EQ(select(bench, options).algo.id, "big");

  options = options_with(AlgoPolicy::fixed("racy"));
  options.deterministic = true;
  message = error_message([&] { select(bench, options); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "racy")) << message;
  EXPECT_TRUE(contains(message, "deterministic")) << message;
}

// ---------------------------------------------------------------- exhaustive

TEST(ExhaustivePolicy, PicksTheFastestAndSortsRowsFastestFirst) {
  FakeBench bench;
  bench.add(Algo("a"), {3.0}).add(Algo("b"), {1.0}).add(Algo("c"), {2.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;  // every candidate gets all timing_runs in one pass
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "b");
  EXPECT_DOUBLE_EQ(choice.time_ms, 1.0);
  EXPECT_EQ(ids_of(choice.timings), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(choice.candidates_timed, 3);
  for (const ProfileRow& row : choice.timings) {
    EXPECT_EQ(row.status, CandidateStatus::ok) << row.algo.id;
    EXPECT_EQ(row.runs, 5) << row.algo.id;
  }
}

// Note [compile budget] in src/ops/dispatch.cpp: a run that throws tune::Skipped (its plan not
// ready within the backend's compile budget) leaves the candidate not_timed with the reason, not
// failed, and does not count against the benchmark limit.
TEST(ExhaustivePolicy, SkippedCandidatesAreNotTimedWithTheReason) {
  FakeBench bench;
  bench.add(Algo("a"), {3.0}).add(Algo("slow_to_build"), {0.5}).add(Algo("c"), {2.0});
  dnnx::tune::RunOnce scripted = bench.run();
  const dnnx::tune::RunOnce run = [&](const dnnx::AlgoInfo& algo) -> double {
    if (algo.id == "slow_to_build") throw dnnx::tune::Skipped("not compiled within the budget");
    return scripted(algo);
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = 2;
  const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options, run);
  EXPECT_EQ(choice.algo.id, "c");
  const ProfileRow& skipped = row_of(choice.timings, "slow_to_build");
  EXPECT_EQ(skipped.status, CandidateStatus::not_timed);
  EXPECT_EQ(skipped.detail, "not compiled within the budget");
  EXPECT_EQ(skipped.runs, 0);
  EXPECT_EQ(row_of(choice.timings, "c").status, CandidateStatus::ok)
      << "a skipped candidate used up the benchmark limit";
  EXPECT_EQ(choice.candidates_timed, 2);
}

TEST(ExhaustivePolicy, WarmupRunsAreRunButNotCounted) {
  FakeBench bench;
  // The warm-up of "a" is slow and that of "b" absurdly fast: counting either would flip the
  // winner or change the min.
  bench.add(Algo("a"), {100.0, 2.0}).add(Algo("b"), {0.01, 3.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;  // the timing phase alone (Note [final round] below)
  options.warmup_runs = 1;
  options.timing_runs = 5;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "a");
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "a").min_ms, 2.0);
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "b").min_ms, 3.0);
  EXPECT_EQ(row_of(choice.timings, "a").runs, 5);
  EXPECT_EQ(bench.calls("a"), 6);
  EXPECT_EQ(bench.calls("b"), 6);

  FakeBench twice;
  twice.add(Algo("a"), {100.0, 100.0, 2.0});
  options.warmup_runs = 2;
  options.timing_runs = 3;
  const Choice second = select(twice, options);
  EXPECT_EQ(twice.calls("a"), 5);
  EXPECT_DOUBLE_EQ(second.time_ms, 2.0);
  EXPECT_EQ(row_of(second.timings, "a").runs, 3);

  FakeBench none;
  none.add(Algo("a"), {7.0, 2.0});
  options.warmup_runs = 0;
  const Choice third = select(none, options);
  EXPECT_EQ(none.calls("a"), 3);
  EXPECT_DOUBLE_EQ(row_of(third.timings, "a").min_ms, 2.0);
  EXPECT_DOUBLE_EQ(third.time_ms, 2.0);  // median of 7, 2, 2
}

TEST(ExhaustivePolicy, UsesTheMedianOfTimingRuns) {
  FakeBench bench;
  // "a": median 3, min 1, mean 4. "b": 2.5 every run. The median decides: b wins, although
  // a has the better min.
  bench.add(Algo("a"), {0.0, 5.0, 1.0, 9.0, 2.0, 3.0}).add(Algo("b"), {0.0, 2.5});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;  // the timing phase alone (Note [final round] below)
  options.timing_runs = 5;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "b");
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "a").median_ms, 3.0);
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "a").min_ms, 1.0);
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "b").median_ms, 2.5);

  FakeBench even;
  even.add(Algo("a"), {0.0, 4.0, 1.0, 3.0, 2.0});
  options.timing_runs = 4;
  const Choice second = select(even, options);
  EXPECT_DOUBLE_EQ(second.time_ms, 2.5);
}

TEST(ExhaustivePolicy, AbandonsACandidateWhoseFirstRunIsFarSlower) {
  FakeBench bench;
  // Each candidate's first run is the abandonment probe (and its first warm-up). "slow" probes
  // at 5x the best median (10) and would then run at 1 ms: were it timed further it would win.
  // "close" probes at 3.9x: within the factor, and its warm runs take 15 (1.5x): timed fully.
  // "warmslow" is within the factor cold (30) but its warm run takes 25, over 2x the best: it
  // could not even contend in a final round, so it is abandoned after that run.
  bench.add(Algo("best"), {10.0})
      .add(Algo("slow"), {50.0, 1.0})
      .add(Algo("close"), {39.0, 15.0})
      .add(Algo("warmslow"), {30.0, 25.0, 1.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 4.0;
  options.final_round = false;  // counts one pass's runs
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "best");
  const ProfileRow& slow = row_of(choice.timings, "slow");
  EXPECT_EQ(slow.status, CandidateStatus::abandoned);
  EXPECT_EQ(slow.runs, 1);
  EXPECT_DOUBLE_EQ(slow.median_ms, 50.0);
  EXPECT_FALSE(slow.detail.empty());
  EXPECT_EQ(bench.calls("slow"), 1);  // the probe, never again
  EXPECT_EQ(row_of(choice.timings, "close").status, CandidateStatus::ok);
  EXPECT_EQ(bench.calls("close"), 6);
  EXPECT_DOUBLE_EQ(row_of(choice.timings, "close").median_ms, 15.0);
  const ProfileRow& warmslow = row_of(choice.timings, "warmslow");
  EXPECT_EQ(warmslow.status, CandidateStatus::abandoned);
  EXPECT_EQ(warmslow.runs, 2);
  EXPECT_DOUBLE_EQ(warmslow.median_ms, 25.0);
  EXPECT_NE(warmslow.detail.find("warm run 25"), std::string::npos) << warmslow.detail;
  EXPECT_EQ(bench.calls("warmslow"), 2);
  EXPECT_EQ(choice.candidates_timed, 4);
  EXPECT_NE(choice.timings.front().status, CandidateStatus::abandoned);
}

// Note [probing slow candidates]: once a candidate has been abandoned, later candidates are run
// on a slice first; a slice slower than 2x the best abandons the candidate without a full run, a
// fast slice (or none) leaves it to the full run.
TEST(ExhaustivePolicy, ProbesOnASliceOnceASlowCandidateShowedUp) {
  FakeBench bench;
  // best 10 ms (abandonment threshold 40).
  bench.add(Algo("best"), {10.0})
      .add(Algo("near"), {15.0})     // fully timed, probing still off
      .add(Algo("huge"), {200.0})    // abandoned on its full run: probing on from here
      .add(Algo("slow"), {300.0})    // its slice takes 50 > 2 x 10: never fully run
      .add(Algo("twice"), {30.0})    // its slice takes 21 > 2 x 10: cannot win, never run
      .add(Algo("fast"), {8.0})      // its slice takes 1: fully timed, wins
      .add(Algo("noslice"), {9.0});  // no slice: fully timed
  std::map<std::string, int> probes;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;  // one slice only
    ++probes[algo.id];
    if (algo.id == "slow") return dnnx::tune::ProbeRun{50.0, 0.125};
    if (algo.id == "twice") return dnnx::tune::ProbeRun{21.0, 0.125};
    if (algo.id == "fast") return dnnx::tune::ProbeRun{1.0, 0.125};
    return std::nullopt;
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 4.0;
  const Choice choice =
      dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), probe);
  EXPECT_EQ(choice.algo.id, "fast");
  EXPECT_EQ(probes.count("best") + probes.count("near") + probes.count("huge"), 0U);
  EXPECT_EQ(probes["slow"], 1);
  EXPECT_EQ(bench.calls("slow"), 0);
  const ProfileRow& slow = row_of(choice.timings, "slow");
  EXPECT_EQ(slow.status, CandidateStatus::abandoned);
  EXPECT_EQ(slow.runs, 0);
  EXPECT_NE(slow.detail.find("slice"), std::string::npos) << slow.detail;
  EXPECT_EQ(row_of(choice.timings, "noslice").status, CandidateStatus::ok);
  EXPECT_EQ(bench.calls("twice"), 0);
  EXPECT_EQ(row_of(choice.timings, "twice").status, CandidateStatus::abandoned);
  // Without a probe the same search runs "slow" once.
  FakeBench plain = bench;
  const Choice unprobed =
      dnnx::tune::select(fake_request(), plain.candidates(), options, plain.run());
  EXPECT_EQ(unprobed.algo.id, "fast");
  EXPECT_EQ(row_of(unprobed.timings, "slow").runs, 1);
}

// Note [probing slow candidates]: a probe that throws Skipped (its slice cannot be run yet) skips
// the candidate with the probe's reason: no full run, not failed. With Request::probe_at_once
// the probes start once the first candidate has a time, before any was abandoned.
TEST(ExhaustivePolicy, AProbeThatSkipsLeavesTheCandidateNotTimed) {
  FakeBench bench;
  bench.add(Algo("best"), {10.0})
      .add(Algo("huge"), {200.0})   // abandoned on its full run: probing on from here
      .add(Algo("pending"), {1.0})  // would win, but its probe cannot run yet
      .add(Algo("fast"), {8.0});    // its slice takes 1: fully timed, wins
  std::map<std::string, int> probes;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;
    ++probes[algo.id];
    if (algo.id == "pending") throw dnnx::tune::Skipped("slice plan still compiling");
    return dnnx::tune::ProbeRun{1.0, 0.125};
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 4.0;
  const Choice choice =
      dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), probe);
  EXPECT_EQ(choice.algo.id, "fast");
  EXPECT_EQ(bench.calls("pending"), 0);
  const ProfileRow& pending = row_of(choice.timings, "pending");
  EXPECT_EQ(pending.status, CandidateStatus::not_timed);
  EXPECT_EQ(pending.detail, "slice plan still compiling");
  EXPECT_EQ(probes.count("best") + probes.count("huge"), 0U);
  EXPECT_EQ(probes["fast"], 1);

  // Probing once the first candidate has a time: "best", with no time to be judged against,
  // runs in full without a probe; "huge" is abandoned on its slice without a full run.
  FakeBench at_once;
  at_once.add(Algo("best"), {10.0}).add(Algo("huge"), {200.0}).add(Algo("fast"), {8.0});
  probes.clear();
  const dnnx::tune::ProbeOnce slices = [&](const dnnx::AlgoInfo& algo,
                                           int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;
    ++probes[algo.id];
    return dnnx::tune::ProbeRun{algo.id == "huge" ? 25.0 : 1.0, 0.125};
  };
  dnnx::tune::Request request = fake_request();
  request.probe_at_once = true;
  const Choice probed =
      dnnx::tune::select(request, at_once.candidates(), options, at_once.run(), slices);
  EXPECT_EQ(probed.algo.id, "fast");
  EXPECT_EQ(probes.count("best"), 0U);
  EXPECT_EQ(probes["huge"], 1);
  EXPECT_EQ(probes["fast"], 1);
  EXPECT_EQ(at_once.calls("huge"), 0);
  EXPECT_EQ(row_of(probed.timings, "huge").status, CandidateStatus::abandoned);
  // Without it, "huge" gets its full run.
  FakeBench later;
  later.add(Algo("best"), {10.0}).add(Algo("huge"), {200.0}).add(Algo("fast"), {8.0});
  dnnx::tune::select(fake_request(), later.candidates(), options, later.run(), slices);
  EXPECT_EQ(later.calls("huge"), 1);
}

// Note [pruning variants]: a variant runs only when its seed, timed before it, came within
// variant_factor of the best so far; the variants of abandoned or failed seeds never run; a
// seed that was not timed says nothing.
FakeBench variant_bench() {
  FakeBench bench;
  // "far", 2.5x the best, goes first: timed in full before "best" sets a bar it would be
  // abandoned under.
  bench.add(Algo("far"), {25.0})
      .add(Algo("best"), {10.0})
      .add(Algo("near"), {15.0})             // 1.5x the best: within the default factor 2
      .add(Algo("huge"), {200.0})            // abandoned on its first run
      .add(Algo("broken"), {10.0}, 0)        // fails on its first run
      .add(Algo("excluded").workspace(MiB))  // over the workspace limit: never timed
      .add(Algo("near:v1").variant_of("near"), {8.0})
      .add(Algo("far:v1").variant_of("far"), {5.0})  // would win, but its seed was far
      .add(Algo("huge:v1").variant_of("huge"), {1.0})
      .add(Algo("broken:v1").variant_of("broken"), {1.0})
      .add(Algo("excluded:v1").variant_of("excluded"), {9.0})
      .add(Algo("unlisted:v1").variant_of("unlisted"), {9.5});
  return bench;
}

TuneOptions variant_options() {
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.workspace_limit = KiB;
  options.final_round = false;
  return options;
}

TEST(ExhaustivePolicy, VariantsOfSlowOrAbandonedSeedsAreNotRun) {
  FakeBench bench = variant_bench();
  const Choice choice = select(bench, variant_options());
  EXPECT_EQ(choice.algo.id, "near:v1");
  // Kept: the seed within 2x, and the seeds never timed (excluded, not listed).
  for (const char* id : {"near:v1", "excluded:v1", "unlisted:v1"}) {
    EXPECT_EQ(row_of(choice.timings, id).status, CandidateStatus::ok) << id;
    EXPECT_GT(bench.calls(id), 0) << id;
  }
  // Not run: the seed timed over 2x the best, abandoned, or failed.
  for (const char* id : {"far:v1", "huge:v1", "broken:v1"}) {
    const ProfileRow& row = row_of(choice.timings, id);
    EXPECT_EQ(row.status, CandidateStatus::abandoned) << id;
    EXPECT_EQ(row.runs, 0) << id;
    EXPECT_TRUE(std::isnan(row.median_ms)) << id;
    EXPECT_EQ(bench.calls(id), 0) << id;
    EXPECT_NE(row.detail.find("variant of " + row.algo.variant_of), std::string::npos)
        << row.detail;
  }
  const std::string& far = row_of(choice.timings, "far:v1").detail;
  // The best so far by then is near:v1's 8 ms.
  EXPECT_NE(far.find("median 25 ms > variant_factor 2 x best 8 ms"), std::string::npos) << far;
  EXPECT_NE(row_of(choice.timings, "huge:v1").detail.find("abandoned (first run 200"),
            std::string::npos)
      << row_of(choice.timings, "huge:v1").detail;
  EXPECT_NE(row_of(choice.timings, "broken:v1").detail.find("failed"), std::string::npos);
}

// Note [scout candidates]: a candidate noted "scout" is timed right after the first admissible
// candidate, so the bounds the others meet come from it; the heuristic policy keeps the list's
// order, and every candidate still has its one row.
FakeBench scout_bench(bool scouts) {
  auto scout = [scouts](Algo algo) { return scouts ? algo.note("scout") : algo; };
  FakeBench bench;
  bench
      .add(Algo("too_big").workspace(64 * MiB), {1.0})  // over the workspace cap below
      .add(Algo("heuristic"), {10.0})
      .add(Algo("mid"), {9.0})  // fully timed against 10; against 4 its warm run (> 2 x 4) ends it
      .add(Algo("slow"), {30.0})
      .add(scout(Algo("fold")), {4.0})
      .add(scout(Algo("other_fold")), {5.0});
  return bench;
}

TEST(ExhaustivePolicy, ScoutsAreTimedRightAfterTheFirstAdmissibleCandidate) {
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.workspace_limit = MiB;
  options.final_round = false;
  for (const bool scouts : {true, false}) {
    SCOPED_TRACE(scouts ? "scouts" : "no scouts");
    FakeBench bench = scout_bench(scouts);
    std::vector<std::string> order;
    const dnnx::tune::RunOnce run = bench.run();
    const dnnx::tune::RunOnce counted = [&](const dnnx::AlgoInfo& algo) {
      if (order.empty() || order.back() != algo.id) order.push_back(algo.id);
      return run(algo);
    };
    const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options, counted);
    EXPECT_EQ(choice.algo.id, "fold");
    EXPECT_EQ(choice.timings.size(), bench.candidates().size());
    EXPECT_EQ(row_of(choice.timings, "too_big").status, CandidateStatus::over_workspace_limit);
    const ProfileRow& mid = row_of(choice.timings, "mid");
    if (scouts) {
      EXPECT_EQ(order,
                (std::vector<std::string>{"heuristic", "fold", "other_fold", "mid", "slow"}));
      EXPECT_EQ(mid.status, CandidateStatus::abandoned);
      EXPECT_EQ(bench.calls("mid"), 2);  // the cold run, then the warm one
    } else {
      EXPECT_EQ(order,
                (std::vector<std::string>{"heuristic", "mid", "slow", "fold", "other_fold"}));
      EXPECT_EQ(mid.status, CandidateStatus::ok);
      EXPECT_GT(bench.calls("mid"), 1);
    }
  }
  // The heuristic policy picks the first admissible candidate of the list, scouts or not.
  FakeBench bench = scout_bench(true);
  TuneOptions heuristic = options_with(AlgoPolicy::heuristic());
  EXPECT_EQ(select(bench, heuristic).algo.id, "too_big");
  heuristic.workspace_limit = MiB;
  EXPECT_EQ(select(bench, heuristic).algo.id, "heuristic");
}

// The bar is the best so far: a seed that was near the best when its variant came up keeps the
// variant even if something faster is timed later; one listed after its variant does not prune.
TEST(ExhaustivePolicy, VariantsAreJudgedWhenTheirTurnComes) {
  FakeBench bench;
  bench.add(Algo("seed"), {10.0})
      .add(Algo("seed:v1").variant_of("seed"), {9.0})
      .add(Algo("faster"), {4.0})
      .add(Algo("seed:v2").variant_of("seed"), {3.0})  // seed is now 2.5x the best: not run
      .add(Algo("late:v1").variant_of("late"), {7.0})  // its seed comes after it
      .add(Algo("late"), {100.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "faster");
  EXPECT_EQ(row_of(choice.timings, "seed:v1").status, CandidateStatus::ok);
  EXPECT_EQ(row_of(choice.timings, "seed:v2").status, CandidateStatus::abandoned);
  EXPECT_EQ(bench.calls("seed:v2"), 0);
  EXPECT_EQ(row_of(choice.timings, "late:v1").status, CandidateStatus::ok);
}

// variant_factor 0 runs every variant; a larger factor keeps the variants of slower seeds;
// infinity keeps those of every timed seed but still skips those of abandoned or failed ones.
TEST(ExhaustivePolicy, VariantFactorZeroRunsEveryVariant) {
  {
    FakeBench bench = variant_bench();
    TuneOptions options = variant_options();
    options.variant_factor = 0;
    const Choice choice = select(bench, options);
    EXPECT_EQ(choice.algo.id, "huge:v1");
    for (const ProfileRow& row : choice.timings) {
      if (row.algo.variant_of.empty()) continue;
      // Each one runs; those after huge:v1's 1 ms are then abandoned on their own times.
      EXPECT_GT(bench.calls(row.algo.id), 0) << row.algo.id;
      EXPECT_EQ(row.detail.find("variant of"), std::string::npos) << row.detail;
    }
  }
  {
    FakeBench bench = variant_bench();
    TuneOptions options = variant_options();
    options.variant_factor = 4;  // far (25 ms) is within 4 x 8 ms
    const Choice choice = select(bench, options);
    EXPECT_EQ(row_of(choice.timings, "far:v1").status, CandidateStatus::ok);
    EXPECT_EQ(choice.algo.id, "far:v1");
    EXPECT_EQ(row_of(choice.timings, "huge:v1").status, CandidateStatus::abandoned);
  }
  {
    FakeBench bench = variant_bench();
    TuneOptions options = variant_options();
    options.variant_factor = std::numeric_limits<double>::infinity();
    const Choice choice = select(bench, options);
    EXPECT_EQ(row_of(choice.timings, "far:v1").status, CandidateStatus::ok);
    EXPECT_EQ(bench.calls("huge:v1"), 0);
    EXPECT_EQ(bench.calls("broken:v1"), 0);
  }
}

// Profiles go through time_candidates too: the same rule, without a benchmark limit.
TEST(ExhaustivePolicy, ProfilesPruneVariantsAsTheSearchDoes) {
  FakeBench bench = variant_bench();
  const std::vector<ProfileRow> rows = dnnx::tune::time_candidates(
      bench.candidates(), variant_options(), bench.run(), /*apply_benchmark_limit=*/false);
  EXPECT_EQ(row_of(rows, "far:v1").status, CandidateStatus::abandoned);
  EXPECT_EQ(row_of(rows, "near:v1").status, CandidateStatus::ok);
  EXPECT_EQ(rows.front().algo.id, "near:v1");
}

// The seed is shown where candidates are: a "variant of" column in `dnnx algos` tables (only
// when some candidate is a variant) and `variant_of` in profile JSON.
TEST(VariantOf, AlgoTablesAndProfileJsonNameTheSeed) {
  std::vector<dnnx::AlgoInfo> algos{Algo("a").info(), Algo("b").info()};
  EXPECT_EQ(dnnx::format_algo_table(algos).find("variant of"), std::string::npos);
  algos.push_back(Algo("b:v1").variant_of("b").info());
  const std::string table = dnnx::format_algo_table(algos);
  EXPECT_NE(table.find("families  variant of"), std::string::npos) << table;
  const std::string::size_type at = table.find("b:v1");
  ASSERT_NE(at, std::string::npos) << table;
  std::string line = table.substr(at, table.find('\n', at) - at);
  line.erase(line.find_last_not_of(' ') + 1);
  EXPECT_TRUE(line.ends_with("  b")) << '[' << line << ']';

  dnnx::ProfileResult profile;
  profile.rows.emplace_back().algo = algos.back();
  EXPECT_NE(profile.json().find("\"variant_of\": \"b\""), std::string::npos) << profile.json();
}

// Note [probing slow candidates]: a slice within the bound whose time, scaled to the whole
// problem, is over 4x the best is followed by the next larger slice (a run's time need not grow in
// proportion to the batch); one whose scaled time is within 4x goes to its full run at once.
TEST(ExhaustivePolicy, ProbesALargerSliceWhenTheSmallOneScalesPastTheBest) {
  FakeBench bench;
  bench.add(Algo("best"), {10.0})
      .add(Algo("huge"), {200.0})       // abandoned on its full run: probing on from here
      .add(Algo("cliff"), {5000.0})     // eighth 15 (scaled 120 > 40), quarter 25 > 2 x 10
      .add(Algo("contender"), {12.0})   // eighth 1.2 (scaled 9.6): full run at once
      .add(Algo("fixed"), {11.0})       // eighth 9 (scaled 72), quarter 9.5 (scaled 38): full
      .add(Algo("nolarger"), {5000.0})  // eighth 15, no larger slice: the full run decides
      .add(Algo("passes"), {19.0});     // eighth 6, quarter 12 (both scaled 48), half 15 (30): full
  std::map<std::string, std::vector<int>> levels;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    levels[algo.id].push_back(level);
    const double fraction = 0.125 * (1 << level);
    if (level > 2) return std::nullopt;
    if (algo.id == "cliff") return dnnx::tune::ProbeRun{level == 0 ? 15.0 : 25.0, fraction};
    if (algo.id == "contender") return dnnx::tune::ProbeRun{1.2, fraction};
    if (algo.id == "fixed") return dnnx::tune::ProbeRun{level == 0 ? 9.0 : 9.5, fraction};
    if (algo.id == "nolarger")
      return level == 0 ? std::optional(dnnx::tune::ProbeRun{15.0, fraction}) : std::nullopt;
    if (algo.id == "passes")
      return dnnx::tune::ProbeRun{level == 0 ? 6.0 : level == 1 ? 12.0 : 15.0, fraction};
    return std::nullopt;
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 4.0;
  const Choice choice =
      dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), probe);
  EXPECT_EQ(choice.algo.id, "best");
  EXPECT_EQ(levels["cliff"], (std::vector<int>{0, 1}));
  EXPECT_EQ(bench.calls("cliff"), 0);
  const ProfileRow& cliff = row_of(choice.timings, "cliff");
  EXPECT_EQ(cliff.status, CandidateStatus::abandoned);
  EXPECT_NE(cliff.detail.find("0.25 of it"), std::string::npos) << cliff.detail;
  EXPECT_EQ(levels["contender"], (std::vector<int>{0}));
  EXPECT_GE(bench.calls("contender"), 1);
  EXPECT_EQ(levels["fixed"], (std::vector<int>{0, 1}));
  EXPECT_GE(bench.calls("fixed"), 1);
  EXPECT_EQ(levels["nolarger"], (std::vector<int>{0, 1}));
  EXPECT_EQ(bench.calls("nolarger"), 1);  // abandoned on its full run
  EXPECT_EQ(levels["passes"], (std::vector<int>{0, 1, 2}));
  EXPECT_GE(bench.calls("passes"), 1);
}

// Note [heuristics' top configs] (backends/cudnn/conv_engine.cpp): a slice rules a candidate
// noted "heuristics_top" out only beyond abandon_factor x the best (others beyond 2x), and one
// whose probe throws Skipped gets its full run.
TEST(ExhaustivePolicy, HeuristicsTopCandidatesAreRuledOutOnASliceOnlyBeyondAbandonFactor) {
  FakeBench bench;
  bench.add(Algo("best"), {10.0})
      .add(Algo("huge"), {200.0})                          // abandoned: probing on from here
      .add(Algo("slow"), {300.0})                          // slice 30 > 2 x 10: ruled out
      .add(Algo("top_a").note("heuristics_top"), {30.0})   // slice 30 < 4 x 10: full run
      .add(Algo("top_b").note("heuristics_top"), {600.0})  // slice 50 > 4 x 10: ruled out
      .add(Algo("top_c").note("heuristics_top"), {35.0});  // its probe is skipped: full run
  std::map<std::string, int> probes;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;
    ++probes[algo.id];
    if (algo.id == "top_c") throw dnnx::tune::Skipped("its slice plan is still compiling");
    return dnnx::tune::ProbeRun{algo.id == "top_b" ? 50.0 : 30.0, 0.125};
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 4.0;
  const Choice choice =
      dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), probe);
  EXPECT_EQ(choice.algo.id, "best");
  EXPECT_EQ(probes["slow"], 1);
  EXPECT_EQ(row_of(choice.timings, "slow").runs, 0);
  EXPECT_EQ(probes["top_a"], 1);
  EXPECT_GE(row_of(choice.timings, "top_a").runs, 1);
  EXPECT_EQ(probes["top_b"], 1);
  EXPECT_EQ(bench.calls("top_b"), 0);
  const ProfileRow& top_b = row_of(choice.timings, "top_b");
  EXPECT_EQ(top_b.status, CandidateStatus::abandoned);
  EXPECT_TRUE(contains(top_b.detail, "4 x best")) << top_b.detail;
  EXPECT_EQ(probes["top_c"], 1);
  EXPECT_GE(bench.calls("top_c"), 1);
  EXPECT_NE(row_of(choice.timings, "top_c").status, CandidateStatus::not_timed);
}

// Note [warm first runs]: where the backend's first reading is warm, it is the first timed run
// and the warm bound (2x) judges it at once; with a final round, a reading over 1.25x the best
// is not sampled again.
TEST(ExhaustivePolicy, WarmFirstRunsAreJudgedAtOnceAndCountAsSamples) {
  // Runs under 2 ms (Note [long runs] below).
  FakeBench bench;
  bench.add(Algo("best"), {1.0})
      .add(Algo("near"), {1.2})       // within 1.25x: every timed run (3 of the first pass)
      .add(Algo("far"), {1.9})        // within 2x but over 1.25x: one sample
      .add(Algo("slow"), {2.1, 0.1})  // over 2x on its first run: abandoned, never run again
      .add(Algo("after"), {3.0});     // probed: its slice (2.5) is over 2x the best
  std::map<std::string, int> probes;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;
    ++probes[algo.id];
    return dnnx::tune::ProbeRun{2.5, 0.125};
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;
  std::vector<ProfileRow> rows = dnnx::tune::time_candidates(
      bench.candidates(), options, bench.run(), true, probe, dnnx::tune::FirstRun::warm);
  // Without a final round every candidate within 2x gets all timing_runs (5), the first included.
  EXPECT_EQ(bench.calls("best"), 5);
  EXPECT_EQ(bench.calls("near"), 5);
  EXPECT_EQ(bench.calls("far"), 5);
  EXPECT_EQ(bench.calls("slow"), 1);
  const ProfileRow& slow = row_of(rows, "slow");
  EXPECT_EQ(slow.status, CandidateStatus::abandoned);
  EXPECT_EQ(slow.runs, 1);
  EXPECT_NE(slow.detail.find("warm"), std::string::npos) << slow.detail;
  EXPECT_EQ(probes.count("best") + probes.count("near") + probes.count("far"), 0U);
  EXPECT_EQ(probes["after"], 1);
  EXPECT_EQ(bench.calls("after"), 0);

  // With the final round (the default) the first pass samples "far" once and the others 3 times
  // (half of timing_runs, rounded up); all three are within 2x, so they contend in the final
  // round's 5 turns of 2 runs.
  auto fresh = [] {
    FakeBench b;
    b.add(Algo("best"), {1.0})
        .add(Algo("near"), {1.2})
        .add(Algo("far"), {1.9})
        .add(Algo("slow"), {2.1, 0.1});
    return b;
  };
  FakeBench again = fresh();
  options.final_round = true;
  const Choice choice = dnnx::tune::select(fake_request(), again.candidates(), options, again.run(),
                                           {}, dnnx::tune::FirstRun::warm);
  EXPECT_EQ(choice.algo.id, "best");
  EXPECT_EQ(again.calls("far"), 1 + 10);
  EXPECT_EQ(again.calls("near"), 3 + 10);
  EXPECT_EQ(again.calls("slow"), 1);

  // The same candidates judged as possibly cold: "slow" (2.1 < 4x) gets its warm run (0.1 ms)
  // and wins.
  FakeBench cold = fresh();
  const Choice loose = dnnx::tune::select(fake_request(), cold.candidates(), options, cold.run());
  EXPECT_EQ(loose.algo.id, "slow");
}

// Note [long runs]: on a device clock, a run of 2 ms or more is one precise sample. The first pass
// takes one sample of each long candidate, probing starts as soon as the best is that long (no
// candidate needs to be abandoned first), and the final round times each contender once per turn,
// in 3 turns (half of timing_runs, rounded up), with no untimed run before it.
TEST(ExhaustivePolicy, LongRunsOnADeviceClockAreSampledOnce) {
  auto fresh = [] {
    FakeBench bench;
    bench.add(Algo("best"), {10.0})
        .add(Algo("slow"), {400.0})       // probed at once: its slice (50) is over 2x the best
        .add(Algo("near"), {12.0, 9.0});  // 9 ms from its second run on
    return bench;
  };
  std::map<std::string, int> probes;
  const dnnx::tune::ProbeOnce probe = [&](const dnnx::AlgoInfo& algo,
                                          int level) -> std::optional<dnnx::tune::ProbeRun> {
    if (level > 0) return std::nullopt;
    ++probes[algo.id];
    return dnnx::tune::ProbeRun{algo.id == "slow" ? 50.0 : 1.5, 0.125};
  };
  const TuneOptions options = options_with(AlgoPolicy::exhaustive());
  FakeBench bench = fresh();
  const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(),
                                           probe, dnnx::tune::FirstRun::warm);
  EXPECT_EQ(choice.algo.id, "near");
  EXPECT_EQ(bench.calls("best"), 1 + 3);
  EXPECT_EQ(bench.calls("near"), 1 + 3);
  EXPECT_EQ(bench.calls("slow"), 0);
  EXPECT_EQ(probes["slow"], 1);
  EXPECT_EQ(probes["near"], 1);  // a contender's probe sends it to its full run
  EXPECT_EQ(row_of(choice.timings, "near").runs, 3);
  EXPECT_TRUE(contains(row_of(choice.timings, "near").detail, "one run per turn"));
  EXPECT_EQ(choice.search.full_runs, 2);
  EXPECT_EQ(choice.search.probes, 2);

  // Judged as possibly cold (a host clock), the same candidates get every sample: a cold first
  // run and 3 timed ones in the first pass, then 5 turns of 2 runs; "slow" runs in full (its
  // cold run is over 4x the best) since nothing was abandoned before it.
  probes.clear();
  FakeBench cold = fresh();
  const Choice loose =
      dnnx::tune::select(fake_request(), cold.candidates(), options, cold.run(), probe);
  EXPECT_EQ(cold.calls("best"), 1 + 3 + 2 * options.timing_runs);
  EXPECT_EQ(cold.calls("slow"), 1);
  EXPECT_EQ(probes["slow"], 0);
  EXPECT_EQ(loose.algo.id, "near");
}

// Note [final round]: in each turn only a contender's second run is timed. "a" runs at 30 ms
// right after another candidate (caches in the other's state) and 9 ms after a run of its own;
// "b" takes 9.5 ms either way. Timing the first run of each turn would pick "b".
TEST(ExhaustivePolicy, FinalRoundTimesTheSecondRunOfEachTurn) {
  FakeBench bench;
  bench
      .add(Algo("a"),
           {10.0, 10.0, 10.0, 10.0, 30.0, 9.0, 30.0, 9.0, 30.0, 9.0, 30.0, 9.0, 30.0, 9.0})
      .add(Algo("b"), {9.5});
  const Choice choice = select(bench, options_with(AlgoPolicy::exhaustive()));
  EXPECT_EQ(choice.algo.id, "a");
  EXPECT_DOUBLE_EQ(choice.time_ms, 9.0);
}

// Note [final round]: "late" was timed while the machine was slow (12 ms) and would lose to
// "early" (10 ms), but runs at 8 ms when both are timed again in alternation; "far" (over 2x the
// best) is no contender: abandoned after its warm run. The first pass times half the runs (3 of
// 5).
TEST(ExhaustivePolicy, FinalRoundReTimesTheContendersInterleaved) {
  FakeBench bench;
  bench.add(Algo("early"), {10.0})
      .add(Algo("late"), {12.0, 12.0, 12.0, 12.0, 12.0, 12.0, 8.0})
      .add(Algo("far"), {25.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "late");
  EXPECT_DOUBLE_EQ(choice.time_ms, 8.0);
  EXPECT_EQ(choice.runner_up, "early");
  // Each final-round turn is an untimed run and a timed one.
  EXPECT_EQ(bench.calls("early"), 1 + 3 + 2 * options.timing_runs);
  EXPECT_EQ(bench.calls("late"), 1 + 3 + 2 * options.timing_runs);
  EXPECT_EQ(bench.calls("far"), 2);
  EXPECT_EQ(row_of(choice.timings, "far").status, CandidateStatus::abandoned);
  EXPECT_EQ(row_of(choice.timings, "late").runs, options.timing_runs);
  EXPECT_NE(row_of(choice.timings, "late").detail.find("final round"), std::string::npos);
  // Where the search's time went: the first pass's full runs (a first run and three timed ones
  // each of "early" and "late", two of "far"), no probe, the final round apart.
  EXPECT_EQ(choice.search.full_runs, 4 + 4 + 2);
  EXPECT_EQ(choice.search.probes, 0);
  EXPECT_GE(choice.search.final_ms, 0.0);
  EXPECT_NE(choice.search.costliest.find("early"), std::string::npos) << choice.search.costliest;
  EXPECT_NE(choice.search.costliest.find("far"), std::string::npos) << choice.search.costliest;
  // Off: the timing phase's medians decide.
  FakeBench again;
  again.add(Algo("early"), {10.0})
      .add(Algo("late"), {12.0, 12.0, 12.0, 12.0, 12.0, 12.0, 8.0})
      .add(Algo("far"), {25.0});
  options.final_round = false;
  EXPECT_EQ(select(again, options).algo.id, "early");
  EXPECT_EQ(again.calls("late"), 6);
}

// Note [final round]: the heuristic's pick ("pick", listed first) is fifth on the first pass,
// behind four variants within 5%, yet runs fastest when timed again in alternation: it joins the
// contenders and wins. Without that it would not be timed again, and "v1" would be kept.
TEST(ExhaustivePolicy, TheHeuristicPickContendsInTheFinalRound) {
  auto fresh = [] {
    FakeBench bench;
    bench.add(Algo("pick"), {1.05, 1.05, 1.05, 1.05, 0.95})
        .add(Algo("v1"), {1.00})
        .add(Algo("v2"), {1.01})
        .add(Algo("v3"), {1.02})
        .add(Algo("v4"), {1.03})
        .add(Algo("far"), {2.5});
    return bench;
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  FakeBench bench = fresh();
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "pick");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.95);
  EXPECT_EQ(choice.runner_up, "v1");
  EXPECT_TRUE(contains(row_of(choice.timings, "pick").detail, "final round"));
  EXPECT_EQ(bench.calls("pick"), 1 + 3 + 2 * options.timing_runs);
  EXPECT_EQ(bench.calls("far"), 2);

  // Over the band (2x the best) the pick is no contender: timed on the first pass only.
  FakeBench slow;
  slow.add(Algo("pick"), {2.5}).add(Algo("v1"), {1.00}).add(Algo("v2"), {1.01});
  EXPECT_EQ(select(slow, options).algo.id, "v1");
  EXPECT_EQ(slow.calls("pick"), 1 + 3);
  EXPECT_EQ(slow.calls("v1"), 1 + 3 + 2 * options.timing_runs);
}

// Note [final round]: with a RunLoop the timed part of a turn is a loop lasting about 0.5 ms.
// "ramp" wins single runs (0.050 against 0.052 ms) but "steady" wins back to back (0.0515
// against 0.053 ms), which is what a network calling the layer sees.
TEST(ExhaustivePolicy, FinalRoundTimesShortContendersBackToBack) {
  auto fresh = [] {
    FakeBench bench;
    bench.add(Algo("ramp"), {0.050}).add(Algo("steady"), {0.052});
    return bench;
  };
  std::map<std::string, std::vector<int>> loops;  // the run counts asked for, per id
  std::map<std::string, std::vector<int>> held_loops;  // those of held (deep) loops
  const dnnx::tune::RunLoop loop = [&](const dnnx::AlgoInfo& algo, int runs, bool held) {
    (held ? held_loops : loops)[algo.id].push_back(runs);
    return algo.id == "ramp" ? 0.053 : 0.0515;
  };
  const TuneOptions options = options_with(AlgoPolicy::exhaustive());
  FakeBench bench = fresh();
  const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(),
                                           {}, dnnx::tune::FirstRun::warm, loop);
  EXPECT_EQ(choice.algo.id, "steady");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.0515);
  EXPECT_EQ(choice.runner_up, "ramp");
  // One loop per contender and round, ceil(0.5 ms / 0.050 ms) = 10 runs each, after the
  // untimed single run of each turn.
  EXPECT_EQ(loops["ramp"], std::vector<int>(options.timing_runs, 10));
  EXPECT_EQ(loops["steady"], std::vector<int>(options.timing_runs, 10));
  EXPECT_EQ(bench.calls("steady"), 3 + options.timing_runs);
  EXPECT_TRUE(contains(row_of(choice.timings, "steady").detail, "10 runs back to back"));
  // Samples of 10 runs: no long-loop check (Note [leaders that slow down in long loops]).
  EXPECT_TRUE(held_loops.empty());
  // Without a loop the single runs decide.
  FakeBench plain = fresh();
  EXPECT_EQ(dnnx::tune::select(fake_request(), plain.candidates(), options, plain.run(), {},
                               dnnx::tune::FirstRun::warm)
                .algo.id,
            "ramp");
  // Contenders over 0.5 ms are timed one run per turn; the final round does not loop. Its fastest
  // is then checked in one held loop of ceil(20 / 0.60) = 34 runs, which reads it no slower.
  loops.clear();
  FakeBench long_runs;
  long_runs.add(Algo("ramp"), {0.60}).add(Algo("steady"), {0.62});
  EXPECT_EQ(dnnx::tune::select(fake_request(), long_runs.candidates(), options, long_runs.run(), {},
                               dnnx::tune::FirstRun::warm, loop)
                .algo.id,
            "ramp");
  EXPECT_TRUE(loops.empty());
  EXPECT_EQ(held_loops, (std::map<std::string, std::vector<int>>{{"ramp", {34}}}));
}

// Note [final round]: where the turns are loops, up to ten contenders within the band are timed
// again, not four. Five entries of one library kernel ("same0".."same4", 0.0074 ms in single runs
// and back to back) fill the first pass's fastest four; "other" reads 0.0089 ms in single runs
// (its launch and ramp-up paid in full) and runs 0.0070 back to back. It contends and wins; with
// single-run turns (no RunLoop) the fastest four and the heuristic's pick contend, as before.
TEST(ExhaustivePolicy, LoopedFinalRoundsTakeMoreContenders) {
  auto fresh = [] {
    FakeBench bench;
    for (int i = 0; i < 5; ++i) bench.add(Algo("same" + std::to_string(i)), {0.0074});
    bench.add(Algo("other"), {0.0089}).add(Algo("far"), {0.0200});
    return bench;
  };
  std::map<std::string, int> loops;  // loops timed, per id
  const dnnx::tune::RunLoop loop = [&loops](const dnnx::AlgoInfo& algo, int runs, bool held) {
    EXPECT_FALSE(held);   // only deep loops hold the gate
    EXPECT_EQ(runs, 32);  // 0.5 ms over a best under 1/64 ms counted as 1/64 ms
    ++loops[algo.id];
    return algo.id == "other" ? 0.0070 : 0.0074;
  };
  const TuneOptions options = options_with(AlgoPolicy::exhaustive());
  FakeBench bench = fresh();
  const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(),
                                           {}, dnnx::tune::FirstRun::warm, loop);
  EXPECT_EQ(choice.algo.id, "other");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.0070);
  // Every candidate within 2x of the best contends: the five entries and "other", not "far".
  for (int i = 0; i < 5; ++i) EXPECT_EQ(loops["same" + std::to_string(i)], options.timing_runs);
  EXPECT_EQ(loops["other"], options.timing_runs);
  EXPECT_EQ(loops.count("far"), 0U);
  EXPECT_TRUE(contains(row_of(choice.timings, "other").detail, "final round"));

  // No more than ten: with twelve equal entries ahead of it, "other" is left out.
  loops.clear();
  FakeBench crowded;
  for (int i = 0; i < 12; ++i) crowded.add(Algo("same" + std::to_string(i)), {0.0074});
  crowded.add(Algo("other"), {0.0089});
  const Choice full = dnnx::tune::select(fake_request(), crowded.candidates(), options,
                                         crowded.run(), {}, dnnx::tune::FirstRun::warm, loop);
  EXPECT_EQ(full.algo.id.rfind("same", 0), 0U) << full.algo.id;
  EXPECT_EQ(loops.count("other"), 0U);
  int looped = 0;
  for (const auto& [id, count] : loops) looped += count > 0 ? 1 : 0;
  EXPECT_EQ(looped, 10);

  // Single-run turns: the fastest four and the heuristic's pick ("same0", among them).
  FakeBench plain = fresh();
  const Choice single = dnnx::tune::select(fake_request(), plain.candidates(), options, plain.run(),
                                           {}, dnnx::tune::FirstRun::warm);
  EXPECT_EQ(single.algo.id.rfind("same", 0), 0U) << single.algo.id;
  EXPECT_FALSE(contains(row_of(single.timings, "other").detail, "final round"));
  EXPECT_EQ(plain.calls("other"), 3);  // the first pass's three samples only
  EXPECT_EQ(plain.calls("same4"), 3);
}

// TuneOptions::final_contenders sets how many contend (Note [final round]): every candidate within
// 2x of the best at a count over theirs, fewer at a lower one, single runs and loops alike; the
// heuristic's pick still joins; an out-of-range count is an InvalidArgument before anything runs.
TEST(ExhaustivePolicy, FinalContendersIsAnOption) {
  std::map<std::string, int> loops;
  const dnnx::tune::RunLoop loop = [&loops](const dnnx::AlgoInfo& algo, int, bool held) {
    EXPECT_FALSE(held);  // only deep loops hold the gate
    ++loops[algo.id];
    return algo.id == "late" ? 0.0070 : 0.0074;
  };
  auto crowded = [] {
    FakeBench bench;
    for (int i = 0; i < 12; ++i) bench.add(Algo("same" + std::to_string(i)), {0.0074});
    bench.add(Algo("late"), {0.0089}).add(Algo("far"), {0.0200});
    return bench;
  };
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_contenders = 1000;
  FakeBench all = crowded();
  const Choice wide = dnnx::tune::select(fake_request(), all.candidates(), options, all.run(), {},
                                         dnnx::tune::FirstRun::warm, loop);
  EXPECT_EQ(wide.algo.id, "late");  // the thirteenth within the band, which ten leave out
  EXPECT_EQ(loops["late"], options.timing_runs);
  EXPECT_EQ(loops.count("far"), 0U);
  int looped = 0;
  for (const auto& [id, count] : loops) looped += count > 0 ? 1 : 0;
  EXPECT_EQ(looped, 13);

  loops.clear();
  options.final_contenders = 2;
  FakeBench two = crowded();
  const Choice few = dnnx::tune::select(fake_request(), two.candidates(), options, two.run(), {},
                                        dnnx::tune::FirstRun::warm, loop);
  EXPECT_EQ(few.algo.id.rfind("same", 0), 0U) << few.algo.id;
  looped = 0;
  for (const auto& [id, count] : loops) looped += count > 0 ? 1 : 0;
  EXPECT_EQ(looped, 2);  // the two fastest, the heuristic's pick ("same0") among them

  // Single runs: the count applies too ("late", sixth, contends with six).
  FakeBench single_runs;
  for (int i = 0; i < 5; ++i) single_runs.add(Algo("same" + std::to_string(i)), {0.0074});
  single_runs.add(Algo("late"), {0.0089});
  options.final_contenders = 6;
  const Choice single = dnnx::tune::select(fake_request(), single_runs.candidates(), options,
                                           single_runs.run(), {}, dnnx::tune::FirstRun::warm);
  EXPECT_TRUE(contains(row_of(single.timings, "late").detail, "final round"));

  for (int bad : {-1, TuneOptions::max_final_contenders + 1}) {
    options.final_contenders = bad;
    FakeBench untouched = crowded();
    EXPECT_THROW(dnnx::tune::select(fake_request(), untouched.candidates(), options,
                                    untouched.run(), {}, dnnx::tune::FirstRun::warm, loop),
                 dnnx::Error);
    EXPECT_EQ(untouched.calls("same0"), 0);
  }
}

// TuneOptions::final_loop_ms sets the loop's length: ceil(ms / best) runs, a best under 1/64 ms
// counted as 1/64 ms, in loops of at most 32 runs; 0 turns the loops off (single runs decide, as
// without a RunLoop).
TEST(ExhaustivePolicy, FinalLoopLengthIsAnOption) {
  std::map<std::string, std::vector<int>> loops;
  const dnnx::tune::RunLoop loop = [&loops](const dnnx::AlgoInfo& algo, int runs, bool held) {
    EXPECT_FALSE(held);  // only deep loops hold the gate
    loops[algo.id].push_back(runs);
    return algo.id == "ramp" ? 0.053 : 0.0515;
  };
  auto choose = [&](double ms) {
    loops.clear();
    FakeBench bench;
    bench.add(Algo("ramp"), {0.050}).add(Algo("steady"), {0.052});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.final_loop_ms = ms;
    return dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), {},
                              dnnx::tune::FirstRun::warm, loop)
        .algo.id;
  };
  EXPECT_EQ(choose(1.0), "steady");
  EXPECT_EQ(loops["steady"], std::vector<int>(TuneOptions{}.timing_runs, 20));
  EXPECT_EQ(choose(4.0), "steady");
  // 80 runs as loops of 32, 32 and 16: a sample of 4 ms, long (Note [long runs]), so in half the
  // turns (rounded up).
  std::vector<int> chunked;
  for (int turn = 0; turn < (TuneOptions{}.timing_runs + 1) / 2; ++turn)
    chunked.insert(chunked.end(), {32, 32, 16});
  EXPECT_EQ(loops["ramp"], chunked);
  EXPECT_EQ(choose(0.0), "ramp");
  EXPECT_TRUE(loops.empty());
}

// Note [final round]: a long loop is timed as loops of at most 32 runs, weighted by their runs;
// a contender under 1/64 ms counts as 1/64 ms, so the default loop of a fast kernel stays 32 runs.
TEST(ExhaustivePolicy, LongFinalLoopsAreTimedInLoopsOf32) {
  std::map<std::string, std::vector<int>> loops;
  const dnnx::tune::RunLoop loop = [&loops](const dnnx::AlgoInfo& algo, int runs, bool held) {
    EXPECT_FALSE(held);  // only deep loops hold the gate
    loops[algo.id].push_back(runs);
    // "hot" slows in its longer loops (a kernel clocked down under a power limit); "cool" does
    // not. Per run: 32-run loops 0.040 against 0.042, the 8-run tail 0.060 against 0.042.
    if (algo.id == "cool") return 0.042;
    return runs == 32 ? 0.040 : 0.060;
  };
  auto select_with = [&](double loop_ms, double hot_ms) {
    loops.clear();
    FakeBench bench;
    bench.add(Algo("hot"), {hot_ms}).add(Algo("cool"), {hot_ms * 1.02});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.final_loop_ms = loop_ms;
    return dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), {},
                              dnnx::tune::FirstRun::warm, loop);
  };
  // 0.5 ms over a best of 0.004 ms: counted as 1/64 ms, 32 runs in one loop, "hot" wins.
  Choice choice = select_with(0.5, 0.004);
  EXPECT_EQ(loops["hot"], std::vector<int>(TuneOptions{}.timing_runs, 32));
  EXPECT_EQ(choice.algo.id, "hot");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.040);
  // 1.6 ms over 0.04 ms: 40 runs, as 32 and 8; per run (32 x 0.040 + 8 x 0.060) / 40 = 0.044,
  // so "cool" (0.042) wins.
  choice = select_with(1.6, 0.04);
  std::vector<int> chunked;
  for (int turn = 0; turn < TuneOptions{}.timing_runs; ++turn)
    chunked.insert(chunked.end(), {32, 8});
  EXPECT_EQ(loops["hot"], chunked);
  EXPECT_EQ(choice.algo.id, "cool");
  EXPECT_NEAR(row_of(choice.timings, "hot").median_ms, 0.044, 1e-12);
  EXPECT_TRUE(contains(row_of(choice.timings, "hot").detail, "40 runs back to back per sample"));
  EXPECT_TRUE(contains(row_of(choice.timings, "hot").detail, "(as loops of 32)"));
  // 4 ms over 0.04 ms: 100 runs as 32, 32, 32 and 4, a sample of 4 ms: long (Note [long runs]),
  // so half the turns (rounded up) and no untimed run before each.
  choice = select_with(4.0, 0.04);
  chunked.clear();
  const int turns = (TuneOptions{}.timing_runs + 1) / 2;
  for (int turn = 0; turn < turns; ++turn) chunked.insert(chunked.end(), {32, 32, 32, 4});
  EXPECT_EQ(loops["hot"], chunked);
  EXPECT_EQ(row_of(choice.timings, "hot").runs, turns);
}

// Note [texture reads in long loops]: "tex" (noted texture_reads) leads the final round's loops
// of 2 runs (0.371 against 0.377 ms per run) and trails held loops of ceil(20 / 0.371) = 54 runs
// (0.395); "plain" reads 0.377 either way and is kept. "next", within 8% of "tex", joins the deep
// loops; "far" does not.
TEST(ExhaustivePolicy, TextureReadersLeadingTheFinalRoundAreTimedInDeepLoops) {
  std::map<std::string, std::vector<int>> held_loops;  // the run counts of held loops, per id
  bool tex_fails = false;
  const dnnx::tune::RunLoop loop = [&](const dnnx::AlgoInfo& algo, int runs, bool held) {
    if (held) held_loops[algo.id].push_back(runs);
    if (algo.id == "tex") {
      if (held && tex_fails) throw dnnx::Error(dnnx::ErrorKind::BackendFailure, "scripted");
      return held ? 0.395 : 0.371;
    }
    if (algo.id == "plain") return 0.377;
    if (algo.id == "next") return 0.390;
    return 0.450;
  };
  auto select_with = [&](double tex_ms, double plain_ms, double loop_ms = 0.5) {
    held_loops.clear();
    FakeBench bench;
    bench.add(Algo("tex").note("texture_reads"), {tex_ms})
        .add(Algo("plain"), {plain_ms})
        .add(Algo("next"), {0.390})
        .add(Algo("far"), {0.450});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.final_loop_ms = loop_ms;
    return dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), {},
                              dnnx::tune::FirstRun::warm, loop);
  };
  Choice choice = select_with(0.371, 0.377);
  EXPECT_EQ(choice.algo.id, "plain");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.377);
  for (const char* id : {"tex", "plain", "next"})
    EXPECT_EQ(held_loops[id], std::vector<int>(3, 54)) << id;
  EXPECT_EQ(held_loops.count("far"), 0U);
  const dnnx::ProfileRow& tex = row_of(choice.timings, "tex");
  EXPECT_DOUBLE_EQ(tex.median_ms, 0.395);
  EXPECT_EQ(tex.runs, 3);
  EXPECT_TRUE(contains(tex.detail, "then 3 loops of 54 runs queued back to back, which decide"))
      << tex.detail;
  EXPECT_FALSE(contains(row_of(choice.timings, "far").detail, "loops of 54")) << "far";

  // "tex" (first pass 0.371 ms) and "plain" (0.377) alone, "tex" looping at `tex_loop_ms`.
  auto two_way = [&](double tex_loop_ms) {
    held_loops.clear();
    const dnnx::tune::RunLoop tex_loop = [&](const dnnx::AlgoInfo& algo, int runs, bool held) {
      if (held) held_loops[algo.id].push_back(runs);
      return algo.id == "tex" ? tex_loop_ms : loop(algo, runs, false);
    };
    FakeBench bench;
    bench.add(Algo("tex").note("texture_reads"), {0.371}).add(Algo("plain"), {0.377});
    return dnnx::tune::select(fake_request(), bench.candidates(),
                              options_with(AlgoPolicy::exhaustive()), bench.run(), {},
                              dnnx::tune::FirstRun::warm, tex_loop)
        .algo.id;
  };
  // No contender without the note within 8% of "tex" ("plain" loops at 0.377 against "tex" at
  // 0.340): no deep round; "tex" is checked as any leader of samples of 2 runs is (Note [leaders
  // that slow down in long loops]), in one loop of ceil(20 / 0.340) = 59 runs, and kept.
  EXPECT_EQ(two_way(0.340), "tex");
  EXPECT_EQ(held_loops, (std::map<std::string, std::vector<int>>{{"tex", {59}}}));
  // The final round's fastest reads no textures ("tex" loops at 0.395): no deep round, the
  // check of "plain" alone (ceil(20 / 0.377) = 54 runs).
  EXPECT_EQ(two_way(0.395), "plain");
  EXPECT_EQ(held_loops, (std::map<std::string, std::vector<int>>{{"plain", {54}}}));
  // Loops off (final_loop_ms 0): single runs decide, no deep loops.
  choice = select_with(0.371, 0.377, 0.0);
  EXPECT_EQ(choice.algo.id, "tex");
  EXPECT_TRUE(held_loops.empty());
  // A deep loop that throws drops its contender, as the final round does.
  tex_fails = true;
  choice = select_with(0.371, 0.377);
  EXPECT_EQ(choice.algo.id, "plain");
  EXPECT_EQ(row_of(choice.timings, "tex").status, CandidateStatus::failed);
  EXPECT_TRUE(contains(row_of(choice.timings, "tex").detail, "deep loops")) << "failed";
}

// Note [texture reads in long loops], Note [host cost ties]: the cudnn backend notes a texture
// reader host_heavy as well. "tex" leads "plain" (0.377 ms) in the final round and holds its
// lead in the deep loops, at `tex_ms` in every loop: within host_tie (2%) the host tie keeps
// "plain", beyond it "tex" is kept.
TEST(ExhaustivePolicy, TextureReadersHoldingTheirLeadInDeepLoopsFaceTheHostTie) {
  auto select_with = [](double tex_ms, double host_tie) {
    int held = 0;
    const dnnx::tune::RunLoop loop = [&](const dnnx::AlgoInfo& algo, int, bool is_held) {
      held += is_held;
      return algo.id == "tex" ? tex_ms : 0.377;
    };
    FakeBench bench;
    bench.add(Algo("tex").note("texture_reads").note("host_heavy"), {tex_ms})
        .add(Algo("plain"), {0.377});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.host_tie = host_tie;
    const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(), options,
                                             bench.run(), {}, dnnx::tune::FirstRun::warm, loop);
    EXPECT_EQ(held, 6) << "three deep loops each for tex and plain";
    return choice.algo.id;
  };
  EXPECT_EQ(select_with(0.372, 0.02), "plain");  // 1.3% ahead
  EXPECT_EQ(select_with(0.360, 0.02), "tex");    // 4.5% ahead
  EXPECT_EQ(select_with(0.372, 0.0), "tex");     // the host tie off
}

// Note [leaders that slow down in long loops]: "slow" leads the final round's loops of
// ceil(0.5 / 0.426) = 2 runs (0.426 ms per run) and reads 0.531 in a held loop of
// ceil(20 / 0.426) = 47 runs, 25% slower: the contenders under 0.531 ("fold" 0.444, "other"
// 0.447; not "far", 0.60) are timed with it in three such loops, and "fold" is kept.
TEST(ExhaustivePolicy, LeadersThatSlowDownInLongLoopsAreTimedInDeepLoops) {
  std::map<std::string, std::vector<int>> held_loops;
  const auto select_with = [&](double slow_held_ms, double loop_ms = 0.5, double slow_ms = 0.426,
                               bool slow_fails = false,
                               dnnx::tune::FirstRun first_run = dnnx::tune::FirstRun::warm) {
    held_loops.clear();
    const dnnx::tune::RunLoop loop = [&](const dnnx::AlgoInfo& algo, int runs, bool held) {
      if (held) held_loops[algo.id].push_back(runs);
      if (algo.id == "slow") {
        if (held && slow_fails) throw dnnx::Error(dnnx::ErrorKind::BackendFailure, "scripted");
        return held ? slow_held_ms : slow_ms;
      }
      if (algo.id == "fold") return 0.444;
      if (algo.id == "other") return 0.447;
      return 0.60;
    };
    FakeBench bench;
    bench.add(Algo("slow"), {slow_ms})
        .add(Algo("fold"), {0.444})
        .add(Algo("other"), {0.447})
        .add(Algo("far"), {0.60});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.final_loop_ms = loop_ms;
    return dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run(), {},
                              first_run, loop);
  };
  Choice choice = select_with(0.531);
  EXPECT_EQ(choice.algo.id, "fold");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.444);
  EXPECT_EQ(held_loops["slow"], std::vector<int>(4, 47));  // the check, then three turns
  EXPECT_EQ(held_loops["fold"], std::vector<int>(3, 47));
  EXPECT_EQ(held_loops["other"], std::vector<int>(3, 47));
  EXPECT_EQ(held_loops.count("far"), 0U);
  const dnnx::ProfileRow& slow = row_of(choice.timings, "slow");
  EXPECT_DOUBLE_EQ(slow.median_ms, 0.531);
  EXPECT_EQ(slow.runs, 3);
  EXPECT_TRUE(contains(slow.detail, "one loop of 47 runs queued back to back read 0.531"))
      << slow.detail;
  EXPECT_TRUE(contains(row_of(choice.timings, "fold").detail,
                       "which decide: the fastest ran 25% slower in a long loop"))
      << row_of(choice.timings, "fold").detail;

  // 13% slower in the held loop (clock settling): within slowdown_limit, "slow" is kept; the
  // check was its one held loop.
  choice = select_with(0.481);
  EXPECT_EQ(choice.algo.id, "slow");
  EXPECT_DOUBLE_EQ(choice.time_ms, 0.426);
  EXPECT_EQ(held_loops, (std::map<std::string, std::vector<int>>{{"slow", {47}}}));
  // 17% slower (0.498 ms): still within slowdown_limit (18%).
  EXPECT_EQ(select_with(0.498).algo.id, "slow");
  EXPECT_EQ(held_loops, (std::map<std::string, std::vector<int>>{{"slow", {47}}}));
  // Slower than every other contender's final round reads: the deep round still takes three,
  // the fastest first, so "far" (0.60) stays out, and "fold" wins it.
  EXPECT_EQ(select_with(0.70).algo.id, "fold");
  EXPECT_EQ(held_loops["other"], std::vector<int>(3, 47));
  EXPECT_EQ(held_loops.count("far"), 0U);
  // Samples of ceil(0.5 / 0.1) = 5 runs: no check, whatever a long loop would read.
  EXPECT_EQ(select_with(0.2, 0.5, 0.1).algo.id, "slow");
  EXPECT_TRUE(held_loops.empty());
  // Loops off (final_loop_ms 0): no check either; nor on a host clock (FirstRun::may_be_cold).
  EXPECT_EQ(select_with(0.531, 0.0).algo.id, "slow");
  EXPECT_TRUE(held_loops.empty());
  EXPECT_EQ(select_with(0.531, 0.5, 0.426, false, dnnx::tune::FirstRun::may_be_cold).algo.id,
            "slow");
  EXPECT_TRUE(held_loops.empty());
  // A check that throws drops the leader, as the final round does.
  choice = select_with(0.531, 0.5, 0.426, /*slow_fails=*/true);
  EXPECT_EQ(choice.algo.id, "fold");
  EXPECT_EQ(row_of(choice.timings, "slow").status, CandidateStatus::failed);
  EXPECT_TRUE(contains(row_of(choice.timings, "slow").detail, "the final round's long loop"))
      << row_of(choice.timings, "slow").detail;
}

TEST(ExhaustivePolicy, NeverPicksACandidateNotedOverflowRisk) {
  // Note [unsafe candidates]: "fast" is timed and fastest, but only a fixed id may choose it.
  FakeBench bench;
  bench.add(Algo("accurate"), {2.0})
      .add(Algo("fast").overflow_risk(), {1.0})
      .add(Algo("other"), {3.0});
  const Choice choice = select(bench, options_with(AlgoPolicy::exhaustive()));
  EXPECT_EQ(choice.algo.id, "accurate");
  EXPECT_EQ(choice.runner_up, "other");
  EXPECT_GT(bench.calls("fast"), 0);
  EXPECT_EQ(row_of(choice.timings, "fast").status, CandidateStatus::ok);
  EXPECT_EQ(select(bench, options_with(AlgoPolicy::fixed("fast"))).algo.id, "fast");
  FakeBench only;
  only.add(Algo("fast").overflow_risk(), {1.0}).add(Algo("accurate"), {2.0});
  EXPECT_EQ(select(only, options_with(AlgoPolicy::heuristic())).algo.id, "accurate");
}

// Note [host cost ties]: a candidate noted host_heavy is chosen only when it beats the fastest
// lighter one by more than host_tie; the timing table stays fastest first.
TEST(ExhaustivePolicy, HostHeavyCandidateWinsOnlyBeyondTheHostTie) {
  const auto choose = [](double heavy_ms, double light_ms, double tie) {
    FakeBench bench;
    bench.add(Algo("light"), {light_ms})
        .add(Algo("heavy").note("legacy").note("host_heavy"), {heavy_ms})
        .add(Algo("slow"), {light_ms * 3});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.host_tie = tie;
    const Choice choice = select(bench, options);
    EXPECT_EQ(choice.timings.front().algo.id, choice.algo.id);
    return choice;
  };
  // 1% faster: within the default 2%, the lighter one is chosen, the heavy one is runner-up.
  const Choice tie = choose(0.99, 1.0, TuneOptions{}.host_tie);
  EXPECT_EQ(tie.algo.id, "light");
  EXPECT_DOUBLE_EQ(tie.time_ms, 1.0);
  EXPECT_EQ(tie.runner_up, "heavy");
  EXPECT_EQ(row_of(tie.timings, "heavy").status, CandidateStatus::ok);
  // 5% faster: beyond the tie, the heavy one wins; with host_tie 0.1 it does not; 0 turns it off.
  EXPECT_EQ(choose(0.95, 1.0, TuneOptions{}.host_tie).algo.id, "heavy");
  EXPECT_EQ(choose(0.95, 1.0, 0.1).algo.id, "light");
  EXPECT_EQ(choose(0.999, 1.0, 0.0).algo.id, "heavy");
  // Only heavy candidates ran: the fastest of them.
  FakeBench heavy_only;
  heavy_only.add(Algo("a").note("host_heavy"), {2.0}).add(Algo("b").note("host_heavy"), {1.0});
  EXPECT_EQ(select(heavy_only, options_with(AlgoPolicy::exhaustive())).algo.id, "b");
  // chosen_row, which a profile's `chosen` uses, agrees and leaves the rows in place.
  std::vector<ProfileRow> rows(3);
  rows[0].algo = Algo("heavy").note("host_heavy").info();
  rows[0].median_ms = 0.99;
  rows[1].algo = Algo("unsafe").overflow_risk().info();
  rows[1].median_ms = 0.995;
  rows[2].algo = Algo("light").info();
  rows[2].median_ms = 1.0;
  for (ProfileRow& row : rows) row.status = CandidateStatus::ok;
  EXPECT_EQ(dnnx::tune::chosen_row(rows, TuneOptions{})->algo.id, "light");
  TuneOptions off;
  off.host_tie = 0;
  EXPECT_EQ(dnnx::tune::chosen_row(rows, off)->algo.id, "heavy");
  EXPECT_EQ(rows.front().algo.id, "heavy");
  // An out-of-range host_tie is an InvalidArgument naming it.
  for (const double bad : {-0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    FakeBench any;
    any.add(Algo("a"), {1.0});
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.host_tie = bad;
    EXPECT_TRUE(contains(error_message([&] { select(any, options); }, ErrorKind::InvalidArgument),
                         "host_tie"))
        << bad;
  }
}

TEST(ExhaustivePolicy, AbandonFactorIsHonoured) {
  FakeBench bench;
  bench.add(Algo("best"), {10.0}).add(Algo("slow"), {50.0, 1.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 100.0;
  options.final_round = false;  // counts one pass's runs
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "slow");  // the 50 ms probe was its warm-up; then 1 ms x 5
  EXPECT_DOUBLE_EQ(choice.time_ms, 1.0);
  EXPECT_EQ(bench.calls("slow"), 6);
  // The warm run is held to half the factor (50 here): 2.5x the best is timed fully.
  FakeBench warm;
  warm.add(Algo("best"), {10.0}).add(Algo("warmish"), {30.0, 25.0});
  const Choice timed = select(warm, options);
  EXPECT_EQ(row_of(timed.timings, "warmish").status, CandidateStatus::ok);
  EXPECT_EQ(warm.calls("warmish"), 6);
  // A factor of 1.5 holds it to 1x: a warm run slower than the best abandons.
  options.abandon_factor = 1.5;
  FakeBench tight;
  tight.add(Algo("best"), {10.0}).add(Algo("close"), {12.0, 11.0});
  EXPECT_EQ(row_of(select(tight, options).timings, "close").status, CandidateStatus::abandoned);
  EXPECT_EQ(tight.calls("close"), 2);
}

TEST(ExhaustivePolicy, NaiveCandidatesAreNotRunOnceARealOneWasTimed) {
  FakeBench bench;
  // Marked naive (a reference loop). Listed after a timed candidate it is not run at all,
  // even though here it would be fastest, and it does not use up a benchmark slot.
  bench.add(Algo("real"), {2.0})
      .add(Algo("naive").naive(), {0.5})
      .add(Algo("other"), {3.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = 2;
  Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "real");
  EXPECT_EQ(bench.calls("naive"), 0);
  EXPECT_EQ(row_of(choice.timings, "naive").status, CandidateStatus::abandoned);
  EXPECT_GT(bench.calls("other"), 0);
  EXPECT_EQ(choice.candidates_timed, 2);

  options.time_naive = true;
  options.benchmark_limit = 0;
  options.final_round = false;  // counts one pass's runs
  choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "naive");
  EXPECT_EQ(bench.calls("naive"), 6);
}

TEST(ExhaustivePolicy, ANaiveCandidateListedFirstIsTimed) {
  // Nothing has been timed when its turn comes, so it may be all there is.
  FakeBench bench;
  bench.add(Algo("naive").naive(), {5.0}).add(Algo("real"), {1.0});
  const Choice choice = select(bench, options_with(AlgoPolicy::exhaustive()));
  EXPECT_EQ(choice.algo.id, "real");
  EXPECT_EQ(bench.calls("naive"), 1 + 3);  // first pass only: 5 ms is no contender of 1 ms
  EXPECT_EQ(row_of(choice.timings, "naive").status, CandidateStatus::ok);

  FakeBench alone;
  alone.add(Algo("naive").naive(), {5.0});
  EXPECT_EQ(select(alone, options_with(AlgoPolicy::exhaustive())).algo.id, "naive");
}

TEST(ExhaustivePolicy, TheFirstCandidateIsNeverAbandoned) {
  FakeBench bench;
  bench.add(Algo("huge"), {1000.0});
  const Choice choice = select(bench, options_with(AlgoPolicy::exhaustive()));
  EXPECT_EQ(choice.algo.id, "huge");
  EXPECT_EQ(row_of(choice.timings, "huge").status, CandidateStatus::ok);
}

TEST(ExhaustivePolicy, BenchmarkLimitCountsOnlyCandidatesThatRan) {
  FakeBench bench;
  bench.add(Algo("u").unsupported("no"), {0.1})
      .add(Algo("w").workspace(MiB), {0.1})
      .add(Algo("a"), {5.0})
      .add(Algo("n").nondeterministic(), {0.1})
      .add(Algo("b"), {4.0})
      .add(Algo("c"), {0.5})
      .add(Algo("d"), {0.5});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = 2;
  options.workspace_limit = KiB;
  options.deterministic = true;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "b");
  EXPECT_EQ(choice.candidates_timed, 2);
  EXPECT_GT(bench.calls("a"), 0);
  EXPECT_GT(bench.calls("b"), 0);
  for (const char* id : {"u", "w", "n", "c", "d"}) EXPECT_EQ(bench.calls(id), 0) << id;
  EXPECT_EQ(row_of(choice.timings, "c").status, CandidateStatus::not_timed);
  EXPECT_EQ(row_of(choice.timings, "d").status, CandidateStatus::not_timed);
  EXPECT_EQ(row_of(choice.timings, "u").status, CandidateStatus::unsupported);
  EXPECT_EQ(row_of(choice.timings, "w").status, CandidateStatus::over_workspace_limit);
  EXPECT_EQ(row_of(choice.timings, "n").status, CandidateStatus::not_deterministic);
  EXPECT_EQ(choice.timings.size(), 7u);
}

TEST(ExhaustivePolicy, BenchmarkLimitZeroTimesEverything) {
  FakeBench bench;
  bench.add(Algo("a"), {3.0}).add(Algo("b"), {2.0}).add(Algo("c"), {1.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.final_round = false;  // counts the timing phase's runs only
  options.benchmark_limit = 0;
  EXPECT_EQ(select(bench, options).algo.id, "c");
  EXPECT_EQ(bench.calls("c"), 6);
}

TEST(ExhaustivePolicy, AbandonedCandidatesCountTowardsTheLimit) {
  // An abandoned candidate did run (once), so it uses up a benchmark slot.
  FakeBench bench;
  bench.add(Algo("a"), {1.0}).add(Algo("slow"), {100.0}).add(Algo("c"), {0.5});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = 2;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "a");
  EXPECT_EQ(row_of(choice.timings, "slow").status, CandidateStatus::abandoned);
  EXPECT_EQ(bench.calls("slow"), 1);
  EXPECT_EQ(choice.candidates_timed, 2);
  EXPECT_EQ(bench.calls("c"), 0);
}

TEST(ExhaustivePolicy, ProfileIgnoresTheBenchmarkLimit) {
  FakeBench bench;
  bench.add(Algo("a"), {3.0}).add(Algo("b"), {2.0}).add(Algo("c"), {1.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = 1;
  const std::vector<ProfileRow> rows =
      dnnx::tune::time_candidates(bench.candidates(), options, bench.run(), false);
  EXPECT_EQ(ids_of(rows), (std::vector<std::string>{"c", "b", "a"}));
  const std::vector<ProfileRow> limited =
      dnnx::tune::time_candidates(bench.candidates(), options, bench.run(), true);
  EXPECT_EQ(row_of(limited, "a").status, CandidateStatus::ok);
  EXPECT_EQ(row_of(limited, "b").status, CandidateStatus::not_timed);
  EXPECT_EQ(row_of(limited, "c").status, CandidateStatus::not_timed);
}

// Note [search budget]: once the search's time reaches the budget, only the heuristics' top
// picks start, after the first candidate with a time; profiles and a budget of 0 time everything.
TEST(ExhaustivePolicy, ASpentSearchBudgetTimesOnlyTheHeuristicsTopPicks) {
  FakeBench bench;
  bench.add(Algo("u").unsupported("no"), {0.1})
      .add(Algo("a"), {3.0})
      .add(Algo("b"), {1.0})
      .add(Algo("top").note("heuristics_top"), {2.0})
      .add(Algo("c"), {0.5});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.search_budget_ms = 10;
  // Listing and plan builds took the whole budget (spent_ms): the first candidate with a time
  // still runs, and so does the heuristics' pick.
  std::vector<ProfileRow> rows = dnnx::tune::time_candidates(
      bench.candidates(), options, bench.run(), true, {}, dnnx::tune::FirstRun::may_be_cold, 10.0);
  EXPECT_EQ(row_of(rows, "a").status, CandidateStatus::ok);
  for (const char* id : {"b", "c"}) {
    const ProfileRow& row = row_of(rows, id);
    EXPECT_EQ(row.status, CandidateStatus::not_timed) << id;
    EXPECT_NE(row.detail.find("search_budget_ms 10 spent"), std::string::npos) << row.detail;
    EXPECT_EQ(bench.calls(id), 0) << id;
  }
  EXPECT_EQ(row_of(rows, "top").status, CandidateStatus::ok);
  EXPECT_EQ(row_of(rows, "u").status, CandidateStatus::unsupported);

  // select() counts Request::spent_ms the same way.
  dnnx::tune::Request request = fake_request(Direction::fwd);
  request.spent_ms = 25.0;
  const Choice choice = dnnx::tune::select(request, bench.candidates(), options, bench.run());
  EXPECT_EQ(choice.algo.id, "top");
  EXPECT_EQ(row_of(choice.timings, "c").status, CandidateStatus::not_timed);

  // Within the budget, without one, and in a profile, every candidate runs.
  for (const auto& [budget, spent, limited] :
       {std::tuple{1e6, 0.0, true}, std::tuple{0.0, 1e9, true}, std::tuple{10.0, 10.0, false}}) {
    options.search_budget_ms = budget;
    rows = dnnx::tune::time_candidates(bench.candidates(), options, bench.run(), limited, {},
                                       dnnx::tune::FirstRun::may_be_cold, spent);
    EXPECT_EQ(rows.front().algo.id, "c") << budget << ' ' << spent << ' ' << limited;
    EXPECT_EQ(row_of(rows, "b").status, CandidateStatus::ok);
  }
}

TEST(ExhaustivePolicy, SearchBudgetOutOfRangeIsAnError) {
  FakeBench bench;
  bench.add(Algo("a"), {1.0});
  for (const double bad :
       {-1.0, TuneOptions::max_search_budget_ms * 2, std::numeric_limits<double>::quiet_NaN()}) {
    TuneOptions options = options_with(AlgoPolicy::exhaustive());
    options.search_budget_ms = bad;
    EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                         "search_budget_ms"))
        << bad;
  }
}

TEST(ExhaustivePolicy, WorkspaceLimitExcludesAndFastestIgnoresIt) {
  FakeBench bench;
  bench.add(Algo("big").workspace(MiB), {1.0}).add(Algo("small").workspace(KiB), {4.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.workspace_limit = 64 * KiB;
  Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "small");
  EXPECT_EQ(row_of(choice.timings, "big").status, CandidateStatus::over_workspace_limit);
  EXPECT_EQ(bench.calls("big"), 0);
  options.fastest = true;
  choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "big");
  EXPECT_EQ(row_of(choice.timings, "big").status, CandidateStatus::ok);
}

TEST(ExhaustivePolicy, WorkspaceLimitZeroStillFindsAZeroWorkspaceCandidate) {
  FakeBench bench;
  bench.add(Algo("ws1").workspace(1), {0.1})
      .add(Algo("zero_slow"), {3.0})
      .add(Algo("zero_fast"), {2.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.workspace_limit = 0;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "zero_fast");
  EXPECT_EQ(row_of(choice.timings, "ws1").status, CandidateStatus::over_workspace_limit);
  options.fwd = AlgoPolicy::heuristic();
  EXPECT_EQ(select(bench, options).algo.id, "zero_slow");
}

TEST(ExhaustivePolicy, DeterministicExcludesNondeterministicCandidates) {
  FakeBench bench;
  bench.add(Algo("atomic").nondeterministic(), {0.5}).add(Algo("ordered"), {2.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  EXPECT_EQ(select(bench, options).algo.id, "atomic");
  const int atomic_runs = bench.calls("atomic");
  options.deterministic = true;
  const Choice choice = select(bench, options);
  EXPECT_EQ(choice.algo.id, "ordered");
  EXPECT_EQ(row_of(choice.timings, "atomic").status, CandidateStatus::not_deterministic);
  EXPECT_EQ(bench.calls("atomic"), atomic_runs);
}

TEST(ExhaustivePolicy, ACandidateThatThrowsIsMarkedFailedAndTheNextWins) {
  FakeBench bench;
  // "crash_timed" passes its probe / warm-up and throws on its first timed run; "crash_warmup"
  // throws at once. Both are faster than "ok" when they do return.
  bench.add(Algo("crash_timed"), {0.1}, /*fails_after=*/1)
      .add(Algo("crash_warmup"), {0.1}, /*fails_after=*/0)
      .add(Algo("ok"), {3.0});
  const Choice choice = select(bench, options_with(AlgoPolicy::exhaustive()));
  EXPECT_EQ(choice.algo.id, "ok");
  const ProfileRow& timed = row_of(choice.timings, "crash_timed");
  EXPECT_EQ(timed.status, CandidateStatus::failed);
  EXPECT_TRUE(contains(timed.detail, "scripted failure of crash_timed")) << timed.detail;
  EXPECT_EQ(row_of(choice.timings, "crash_warmup").status, CandidateStatus::failed);
  EXPECT_EQ(bench.calls("crash_timed"), 2);
  EXPECT_EQ(bench.calls("crash_warmup"), 1);
  EXPECT_EQ(choice.timings.front().algo.id, "ok");
}

TEST(ExhaustivePolicy, OutOfMemoryFromTheRunIsAFailureNotACrash) {
  FakeBench bench;
  bench.add(Algo("hungry")).add(Algo("lean"), {2.0});
  auto run = bench.run();
  auto oom = [&](const dnnx::AlgoInfo& algo) -> double {
    if (algo.id == "hungry") throw std::bad_alloc();
    return run(algo);
  };
  const Choice choice = dnnx::tune::select(fake_request(), bench.candidates(),
                                           options_with(AlgoPolicy::exhaustive()), oom);
  EXPECT_EQ(choice.algo.id, "lean");
  EXPECT_EQ(row_of(choice.timings, "hungry").status, CandidateStatus::failed);
}

TEST(ExhaustivePolicy, EveryCandidateFailingIsUnsupportedListingEach) {
  FakeBench bench;
  bench.add(Algo("x"), {1.0}, 0).add(Algo("y").unsupported("needs groups 1"));
  const std::string message = error_message(
      [&] { select(bench, options_with(AlgoPolicy::exhaustive())); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "x: failed")) << message;
  EXPECT_TRUE(contains(message, "y: unsupported")) << message;
  EXPECT_TRUE(contains(message, "needs groups 1")) << message;
}

TEST(ExhaustivePolicy, RejectsNonsensicalTimingOptions) {
  FakeBench bench;
  bench.add(Algo("a"));
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.timing_runs = 0;
  EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                       "timing_runs"));
  options = options_with(AlgoPolicy::exhaustive());
  options.warmup_runs = -1;
  EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                       "warmup_runs"));
  // The upper bounds: 2^31 - 1 runs would never end (and the timing table would not fit).
  options = options_with(AlgoPolicy::exhaustive());
  options.timing_runs = std::numeric_limits<int>::max();
  EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                       "timing_runs must be in [1, 1000], got 2147483647"));
  options = options_with(AlgoPolicy::exhaustive());
  options.warmup_runs = 1001;
  EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                       "warmup_runs must be in [0, 1000], got 1001"));
  options = options_with(AlgoPolicy::exhaustive());
  options.benchmark_limit = -3;
  EXPECT_TRUE(
      contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument), "-3"));
  options = options_with(AlgoPolicy::exhaustive());
  options.abandon_factor = 1.0;
  EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                       "abandon_factor"));
  for (const double bad : {0.5, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    options = options_with(AlgoPolicy::exhaustive());
    options.variant_factor = bad;
    EXPECT_TRUE(contains(error_message([&] { select(bench, options); }, ErrorKind::InvalidArgument),
                         "variant_factor must be 0 (off) or >= 1"))
        << bad;
  }
  EXPECT_EQ(bench.total_calls(), 0);
}

// ---------------------------------------------------------------- families

FakeBench family_bench() {
  FakeBench bench;
  bench.add(Algo("none_racy").family("none").nondeterministic())
      .add(Algo("wino_unsupported").family("winograd").unsupported("needs 3x3"))
      .add(Algo("wino_small").family("winograd").family("small"))
      .add(Algo("large").family("large").workspace(MiB))
      .add(Algo("fft").family("fft"))
      .add(Algo("wino_zero").family("winograd"));
  return bench;
}

TEST(FamilyPolicy, PicksTheFirstAdmissibleCandidateOfTheFamily) {
  FakeBench bench = family_bench();
  const auto pick = [&](const char* family) {
    return select(bench, options_with(AlgoPolicy::of_family(family))).algo.id;
  };
  EXPECT_EQ(pick("none"), "none_racy");
  EXPECT_EQ(pick("winograd"), "wino_small");
  EXPECT_EQ(pick("small"), "wino_small");
  EXPECT_EQ(pick("large"), "large");
  EXPECT_EQ(pick("fft"), "fft");
  EXPECT_EQ(pick("deterministic"), "wino_small");
  EXPECT_EQ(bench.total_calls(), 0);
}

TEST(FamilyPolicy, ConstraintsApplyWithinTheFamily) {
  FakeBench bench;
  bench.add(Algo("wino_big").family("winograd").workspace(MiB))
      .add(Algo("wino_lean").family("winograd"));
  TuneOptions options = options_with(AlgoPolicy::of_family("winograd"));
  EXPECT_EQ(select(bench, options).algo.id, "wino_big");
  options.workspace_limit = KiB;
  EXPECT_EQ(select(bench, options).algo.id, "wino_lean");
}

TEST(FamilyPolicy, AFamilyWithoutCandidatesNamesItAndTheAvailableOnes) {
  FakeBench bench = family_bench();
  const std::string message =
      error_message([&] { select(bench, options_with(AlgoPolicy::of_family("fft_tiling"))); },
                    ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "fft_tiling")) << message;
  for (const char* family : {"none", "winograd", "small", "large", "fft"})
    EXPECT_TRUE(contains(message, family)) << family << " missing in: " << message;
  EXPECT_TRUE(contains(message, "fakebackend")) << message;
}

TEST(FamilyPolicy, AFamilyWhoseCandidatesAreAllExcludedIsUnsupported) {
  FakeBench bench = family_bench();
  TuneOptions options = options_with(AlgoPolicy::of_family("large"));
  options.workspace_limit = KiB;
  const std::string message =
      error_message([&] { select(bench, options); }, ErrorKind::Unsupported);
  EXPECT_TRUE(contains(message, "large")) << message;
  EXPECT_TRUE(contains(message, std::to_string(MiB))) << message;
}

TEST(FamilyPolicy, UnknownFamilyIsInvalidArgument) {
  FakeBench bench = family_bench();
  const std::string message =
      error_message([&] { select(bench, options_with(AlgoPolicy::of_family("gemm_fast"))); },
                    ErrorKind::InvalidArgument);
  EXPECT_TRUE(contains(message, "gemm_fast")) << message;
}

// ---------------------------------------------------------------- verbose

TEST(Verbose, OneLinePerDecisionNamingTheWinnerAndCount) {
  FakeBench bench;
  bench.add(Algo("fake:slow"), {3.0}).add(Algo("fake:quick"), {1.0});
  TuneOptions options = options_with(AlgoPolicy::exhaustive());
  options.verbose = true;
  testing::internal::CaptureStderr();
  select(bench, options);
  options.fwd = AlgoPolicy::heuristic();
  select(bench, options);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  const std::string first = err.substr(0, err.find('\n'));
  EXPECT_TRUE(contains(first, "conv fwd")) << first;
  EXPECT_TRUE(contains(first, "fake-desc")) << first;
  EXPECT_TRUE(contains(first, "fake:quick")) << first;
  EXPECT_TRUE(contains(first, "2 of 2")) << first;
  EXPECT_TRUE(contains(first, "exhaustive")) << first;
  const std::string second = err.substr(err.find('\n') + 1);
  EXPECT_TRUE(contains(second, "heuristic")) << second;
  EXPECT_TRUE(contains(second, "-> fake:slow")) << second;
}

TEST(Verbose, SilentWhenOff) {
  FakeBench bench;
  bench.add(Algo("a"));
  testing::internal::CaptureStderr();
  select(bench, options_with(AlgoPolicy::exhaustive()));
  select(bench, options_with(AlgoPolicy::heuristic()));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// ---------------------------------------------------------------- exclusion

TEST(Exclusion, StatusPerConstraint) {
  TuneOptions options;
  EXPECT_FALSE(dnnx::tune::exclusion(Algo("a").info(), options).has_value());
  auto why = dnnx::tune::exclusion(Algo("u").unsupported("needs stride 1").info(), options);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->status, CandidateStatus::unsupported);
  EXPECT_EQ(why->detail, "needs stride 1");
  options.workspace_limit = 100;
  EXPECT_FALSE(dnnx::tune::exclusion(Algo("w").workspace(100).info(), options).has_value());
  why = dnnx::tune::exclusion(Algo("w").workspace(101).info(), options);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->status, CandidateStatus::over_workspace_limit);
  EXPECT_TRUE(contains(why->detail, "101")) << why->detail;
  EXPECT_TRUE(contains(why->detail, "100")) << why->detail;
  options.deterministic = true;
  why = dnnx::tune::exclusion(Algo("n").nondeterministic().info(), options);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->status, CandidateStatus::not_deterministic);
}

// ---------------------------------------------------------------- parsing

struct ParseCase {
  const char* text;
  AlgoPolicy expected;
};

void PrintTo(const ParseCase& c, std::ostream* out) { *out << c.text; }

class PolicyParse : public testing::TestWithParam<ParseCase> {};

AlgoPolicy with_reuse(AlgoPolicy policy, Reuse reuse) {
  policy.reuse = reuse;
  return policy;
}

TEST_P(PolicyParse, MapsOntoThePolicyAndRoundTrips) {
  const ParseCase& c = GetParam();
  const AlgoPolicy parsed = AlgoPolicy::parse(c.text);
  EXPECT_EQ(parsed, c.expected) << c.text << " parsed as " << parsed.to_string();
  EXPECT_EQ(AlgoPolicy::parse(parsed.to_string()), parsed) << parsed.to_string();
}

INSTANTIATE_TEST_SUITE_P(
    Names, PolicyParse,
    testing::Values(
        ParseCase{"heuristic", AlgoPolicy::heuristic()},
        ParseCase{"exhaustive", AlgoPolicy::exhaustive()},
        ParseCase{"heuristic:once", AlgoPolicy::heuristic(Reuse::once)},
        ParseCase{"exhaustive:once", AlgoPolicy::exhaustive(Reuse::once)},
        ParseCase{"guess_once", AlgoPolicy::heuristic(Reuse::once)},
        ParseCase{"guess_on_shape_change", AlgoPolicy::heuristic(Reuse::on_shape_change)},
        ParseCase{"time_once", AlgoPolicy::exhaustive(Reuse::once)},
        ParseCase{"time_on_shape_change", AlgoPolicy::exhaustive(Reuse::on_shape_change)},
        ParseCase{"small", AlgoPolicy::of_family("small")},
        ParseCase{"none", AlgoPolicy::of_family("none")},
        ParseCase{"large", AlgoPolicy::of_family("large")},
        ParseCase{"fft", AlgoPolicy::of_family("fft")},
        ParseCase{"fft_tiling", AlgoPolicy::of_family("fft_tiling")},
        ParseCase{"winograd", AlgoPolicy::of_family("winograd")},
        ParseCase{"deterministic", AlgoPolicy::of_family("deterministic")},
        ParseCase{"family:winograd", AlgoPolicy::of_family("winograd")},
        ParseCase{"winograd:once", with_reuse(AlgoPolicy::of_family("winograd"), Reuse::once)},
        ParseCase{"fixed:reference:direct", AlgoPolicy::fixed("reference:direct")},
        // Ids keep their colons and case.
        ParseCase{"fixed:onednn:jit:avx512_core", AlgoPolicy::fixed("onednn:jit:avx512_core")},
        ParseCase{"fixed:cudnn:legacy:FFT_TILING", AlgoPolicy::fixed("cudnn:legacy:FFT_TILING")}),
    [](const testing::TestParamInfo<ParseCase>& info) {
      std::string name = info.param.text;
      std::replace_if(
          name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
      return name;
    });

TEST(PolicyParse, FixedOnceRoundTrips) {
  // to_string appends ":once" to every policy; parse must read it back for fixed ids too.
  AlgoPolicy policy = AlgoPolicy::fixed("reference:direct");
  policy.reuse = Reuse::once;
  const AlgoPolicy parsed = AlgoPolicy::parse(policy.to_string());
  EXPECT_EQ(parsed.id, "reference:direct") << policy.to_string();
  EXPECT_EQ(parsed.reuse, Reuse::once) << policy.to_string();
}

class PolicyParseBad : public testing::TestWithParam<const char*> {};

TEST_P(PolicyParseBad, IsInvalidArgumentNamingTheTextAndTheSpellings) {
  const std::string text = GetParam();
  const std::string message =
      error_message([&] { AlgoPolicy::parse(text); }, ErrorKind::InvalidArgument);
  EXPECT_TRUE(contains(message, "'" + text + "'") || contains(message, text)) << message;
  if (text != "fixed:") {
    for (const char* spelling : {"heuristic", "exhaustive", "fixed:<id>", "guess_once",
                                 "time_on_shape_change", "winograd", "fft_tiling"})
      EXPECT_TRUE(contains(message, spelling)) << spelling << " missing in: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Spellings, PolicyParseBad,
                         testing::Values("", "guess", "time", "fixed:", "fastest",
                                         "winograd_nonfused", "family:bogus", "heuristic:twice",
                                         "exhaustive:", "time-once", " heuristic", "fft tiling"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return "case" + std::to_string(info.index);
                         });

TEST(PolicyNames, EveryCandidateStatusHasADistinctName) {
  std::vector<std::string> names;
  for (CandidateStatus status :
       {CandidateStatus::ok, CandidateStatus::unsupported, CandidateStatus::over_workspace_limit,
        CandidateStatus::not_deterministic, CandidateStatus::failed, CandidateStatus::abandoned,
        CandidateStatus::not_timed})
    names.emplace_back(dnnx::to_string(status));
  EXPECT_EQ(names[0], "ok");
  EXPECT_EQ(names[2], "over_workspace_limit");
  EXPECT_EQ(names[5], "abandoned");
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

TEST(PolicyNames, DirectionsParseBothSpellings) {
  EXPECT_EQ(dnnx::parse_direction("fwd"), Direction::fwd);
  EXPECT_EQ(dnnx::parse_direction("forward"), Direction::fwd);
  EXPECT_EQ(dnnx::parse_direction("bwd_data"), Direction::bwd_data);
  EXPECT_EQ(dnnx::parse_direction("backward_data"), Direction::bwd_data);
  EXPECT_EQ(dnnx::parse_direction("bwd_weights"), Direction::bwd_weights);
  EXPECT_EQ(dnnx::parse_direction("bwd_filter"), Direction::bwd_weights);
  for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights})
    EXPECT_EQ(dnnx::parse_direction(dnnx::to_string(d)), d);
}

}  // namespace
