// Pooling through the public API on the host backends: selection policies (heuristic, fixed,
// exhaustive, the workspace limit), the environment's DNNX_POOL_*_ALGO, profiles, the choice
// cache, and repeated calls.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"
#include "ops/pool_support.hpp"
#include "support/compare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace dnnx::test {
namespace {

class PoolApi : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_available(GetParam(), &why))
      GTEST_SKIP() << "backend " << to_string(GetParam()) << " is not available here: " << why;
  }
  Context context() const {
    Context context(GetParam());
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    return context;
  }
};

PoolDesc max_desc() {
  return PoolDesc::from_shapes({2, 8, 11, 11}, {3}, {2}, {1}, PoolMode::max, true);
}

TEST_P(PoolApi, FixedPolicyRunsExactlyThatCandidate) {
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const PoolDesc desc = max_desc();
    const PoolOperands operands = pool_operands(desc, 11);
    Context base = context();
    for (const AlgoInfo& algo : pool_list(base, desc, direction)) {
      if (!algo.supported) continue;
      Context fixed = base;
      fixed.tune().policy(OpKind::pool, direction) = AlgoPolicy::fixed(algo.id);
      const PoolRun run = run_pool(fixed, desc, direction, operands);
      EXPECT_EQ(run.choice->algo.id, algo.id);
      EXPECT_EQ(run.choice->policy.kind, PolicyKind::fixed);
      EXPECT_EQ(run.choice->op, "pool");
      EXPECT_EQ(run.choice->direction, direction);
      // The selection record matches what the op ran.
      EXPECT_EQ(pool_select(fixed, desc, direction)->algo.id, algo.id);
    }
  }
}

TEST_P(PoolApi, UnknownFixedIdListsTheValidIds) {
  const PoolDesc desc = max_desc();
  Context fixed = context();
  fixed.tune().policy(OpKind::pool, Direction::fwd) = AlgoPolicy::fixed("onednn:no_such_impl");
  std::vector<std::string> valid;
  for (const AlgoInfo& algo : pool_list(fixed, desc, Direction::fwd)) {
    if (algo.supported) valid.push_back(algo.id);
  }
  ASSERT_FALSE(valid.empty());
  const PoolOperands operands = pool_operands(desc, 12);
  try {
    run_pool(fixed, desc, Direction::fwd, operands);
    FAIL() << "an unknown fixed id was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
    EXPECT_NE(error.message().find("'onednn:no_such_impl'"), std::string::npos) << error.what();
    for (const std::string& id : valid)
      EXPECT_NE(error.message().find(id), std::string::npos)
          << "missing " << id << ": " << error.what();
    EXPECT_NE(error.context().repro.find("dnnx profile pool"), std::string::npos) << error.what();
  }
}

TEST_P(PoolApi, ExhaustivePicksTheFastestTimedCandidate) {
  const PoolDesc desc =
      PoolDesc::from_shapes({2, 16, 24, 24}, {3}, {2}, {1}, PoolMode::avg_exclude_pad, false,
                            DType::f32, Layout::channels_last);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    Context timed = context();
    timed.tune().policy(OpKind::pool, direction) = AlgoPolicy::exhaustive();
    timed.tune().timing_runs = 2;
    const auto choice = pool_select(timed, desc, direction);
    ASSERT_NE(choice, nullptr);
    EXPECT_EQ(choice->policy.kind, PolicyKind::exhaustive);
    EXPECT_GE(choice->candidates_timed, 1);
    ASSERT_FALSE(choice->timings.empty());
    // Rows come fastest first; the choice is the first ok row.
    EXPECT_EQ(choice->timings.front().status, CandidateStatus::ok);
    EXPECT_EQ(choice->timings.front().algo.id, choice->algo.id);
    double best = choice->timings.front().median_ms;
    for (const ProfileRow& row : choice->timings) {
      if (row.status == CandidateStatus::ok) {
        EXPECT_GE(row.median_ms, best) << row.algo.id;
      }
    }
    EXPECT_FALSE(std::isnan(choice->time_ms));
    // The op call uses the cached choice.
    const PoolRun run = run_pool(timed, desc, direction, pool_operands(desc, 13));
    EXPECT_EQ(run.choice->algo.id, choice->algo.id);
  }
}

TEST_P(PoolApi, ProfileTimesEveryCandidate) {
  const PoolDesc desc = max_desc();
  Context profiled = context();
  const ProfileResult result = pool_profile(profiled, desc, Direction::bwd_data);
  EXPECT_EQ(result.op, "pool");
  EXPECT_EQ(result.direction, Direction::bwd_data);
  EXPECT_EQ(result.repro, desc.repro(Direction::bwd_data));
  EXPECT_EQ(result.rows.size(), pool_list(profiled, desc, Direction::bwd_data).size());
  EXPECT_FALSE(result.chosen.empty());
  EXPECT_NE(result.table().find(result.chosen), std::string::npos);
}

TEST_P(PoolApi, HeuristicIsTheFirstSupportedCandidate) {
  const PoolDesc desc = max_desc();
  Context heuristic = context();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const std::vector<AlgoInfo> algos = pool_list(heuristic, desc, direction);
    const auto first = std::find_if(algos.begin(), algos.end(),
                                    [](const AlgoInfo& algo) { return algo.supported; });
    ASSERT_NE(first, algos.end());
    EXPECT_EQ(first->priority, 0);
    EXPECT_EQ(pool_select(heuristic, desc, direction)->algo.id, first->id);
  }
}

// A zero-workspace candidate always exists: with no workspace allowed, max backward still runs.
TEST_P(PoolApi, ZeroWorkspaceLimitStillRuns) {
  const PoolDesc desc = max_desc();
  Context limited = context();
  limited.tune().workspace_limit = 0;
  const PoolOperands operands = pool_operands(desc, 14);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const PoolRun run = run_pool(limited, desc, direction, operands);
    EXPECT_EQ(run.choice->algo.workspace_bytes, 0u) << run.choice->algo.id;
    Context reference(BackendKind::reference);
    const PoolRun expected = run_pool(reference, desc, direction, operands);
    EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected.output.to_f32(),
                                   pool_error_scale(desc, direction, operands), run.output.dims(),
                                   pool_tolerance(desc, direction), "output",
                                   pool_context(desc, direction, run.choice->algo.id)));
  }
}

// Repeated calls (the fast path in front of the choice cache) give the same bits, also after the
// options change.
TEST_P(PoolApi, RepeatedCallsAreStable) {
  const PoolDesc desc =
      PoolDesc::from_shapes({1, 5, 9, 8}, {2, 3}, {2, 1}, {1, 1}, PoolMode::avg_include_pad, true,
                            DType::bf16, Layout::channels_last);
  const PoolOperands operands = pool_operands(desc, 15);
  Context calls = context();
  const PoolRun first = run_pool(calls, desc, Direction::bwd_data, operands);
  const PoolRun second = run_pool(calls, desc, Direction::bwd_data, operands);
  EXPECT_EQ(first.choice->algo.id, second.choice->algo.id);
  EXPECT_TRUE(bitwise_equal(first.output, second.output, "diff_src", desc.key()));
  calls.tune().deterministic = true;
  const PoolRun third = run_pool(calls, desc, Direction::bwd_data, operands);
  EXPECT_TRUE(third.choice->algo.deterministic);
}

INSTANTIATE_TEST_SUITE_P(Host, PoolApi, ::testing::Values(BackendKind::reference, BackendKind::cpu),
                         [](const ::testing::TestParamInfo<BackendKind>& info) {
                           return std::string(to_string(info.param));
                         });

// DNNX_POOL_FWD_ALGO / DNNX_POOL_BWD_ALGO set the pool policies (and nothing else).
TEST(PoolEnv, PolicyVariablesReachThePoolPolicies) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why)) GTEST_SKIP() << why;
  ASSERT_EQ(setenv("DNNX_POOL_BWD_ALGO", "fixed:cpu:kernel:pool", 1), 0);
  ASSERT_EQ(setenv("DNNX_POOL_FWD_ALGO", "exhaustive", 1), 0);
  TuneOptions options;
  apply_tune_env(options);
  unsetenv("DNNX_POOL_BWD_ALGO");
  unsetenv("DNNX_POOL_FWD_ALGO");
  EXPECT_EQ(options.policy(OpKind::pool, Direction::bwd_data),
            AlgoPolicy::fixed("cpu:kernel:pool"));
  EXPECT_EQ(options.policy(OpKind::pool, Direction::fwd).kind, PolicyKind::exhaustive);
  EXPECT_EQ(options.policy(Direction::fwd).kind, PolicyKind::heuristic);  // conv's untouched

  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune() = options;
  const PoolDesc desc = max_desc();
  const PoolRun run = run_pool(context, desc, Direction::bwd_data, pool_operands(desc, 16));
  EXPECT_EQ(run.choice->algo.id, "cpu:kernel:pool");
}

}  // namespace
}  // namespace dnnx::test
