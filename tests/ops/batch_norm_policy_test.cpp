// Selection of batch-norm candidates (label unit): heuristic, fixed, exhaustive, constraints,
// DNNX_BNORM_*_ALGO, profiles, and Note [timing stateful calls] (an exhaustive selection of a
// training forward must not apply the running-statistics update more than once).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "ops/batch_norm_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace dnnx::test {
namespace {

BatchNormDesc training_desc() {
  BatchNormDesc desc;
  desc.dims = {4, 8, 6, 5};
  desc.mode = BatchNormMode::spatial;
  desc.training = true;
  desc.momentum = 0.5;  // a second update would show clearly
  return desc;
}

#define DNNX_REQUIRE_CPU()                                                \
  do {                                                                    \
    std::string dnnx_why_;                                                \
    if (!backend_available(BackendKind::cpu, &dnnx_why_))                 \
      GTEST_SKIP() << "backend cpu is not available here: " << dnnx_why_; \
  } while (false)

TEST(BatchNormPolicy, HeuristicRunsTheFirstSupportedCandidate) {
  DNNX_REQUIRE_CPU();
  const BatchNormDesc desc = training_desc();
  Context context = batch_norm_context_with(BackendKind::cpu, Direction::fwd);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const std::vector<AlgoInfo> algos = batch_norm_list(context, desc, direction);
    const auto first =
        std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
    ASSERT_NE(first, algos.end());
    for (std::size_t i = 0; i < algos.size(); ++i)
      EXPECT_EQ(algos[i].priority, static_cast<int>(i));
    const auto choice = batch_norm_select(context, desc, direction);
    EXPECT_EQ(choice->algo.id, first->id);
    EXPECT_EQ(choice->op, "bnorm");
    EXPECT_EQ(choice->direction, direction);
  }
}

TEST(BatchNormPolicy, FixedRunsThatCandidateAndEveryIdIsListedOnce) {
  DNNX_REQUIRE_CPU();
  const BatchNormDesc desc = training_desc();
  const BatchNormInputs in = batch_norm_inputs(desc, 3);
  Context base = batch_norm_context_with(BackendKind::cpu, Direction::fwd);
  const std::vector<AlgoInfo> algos = batch_norm_list(base, desc, Direction::fwd);
  std::set<std::string> ids;
  for (const AlgoInfo& algo : algos) {
    EXPECT_TRUE(ids.insert(algo.id).second) << algo.id;
    if (!algo.supported) continue;
    Context fixed = batch_norm_context_with(BackendKind::cpu, Direction::fwd, algo.id);
    EXPECT_EQ(run_batch_norm_fwd(fixed, desc, in).choice->algo.id, algo.id);
  }
  EXPECT_TRUE(ids.count("cpu:kernel:bnorm"));
}

TEST(BatchNormPolicy, EnvironmentVariablesSetThePolicies) {
  DNNX_REQUIRE_CPU();
  ::setenv("DNNX_BNORM_FWD_ALGO", "fixed:cpu:kernel:bnorm", 1);
  ::setenv("DNNX_BNORM_BWD_ALGO", "exhaustive", 1);
  TuneOptions options;
  apply_tune_env(options);
  ::unsetenv("DNNX_BNORM_FWD_ALGO");
  ::unsetenv("DNNX_BNORM_BWD_ALGO");
  EXPECT_EQ(options.policy(OpKind::batch_norm, Direction::fwd),
            AlgoPolicy::fixed("cpu:kernel:bnorm"));
  EXPECT_EQ(options.policy(OpKind::batch_norm, Direction::bwd_data).kind, PolicyKind::exhaustive);
  // Convolution's policies are untouched.
  EXPECT_EQ(options.policy(Direction::fwd).kind, PolicyKind::heuristic);

  const BatchNormDesc desc = training_desc();
  const BatchNormInputs in = batch_norm_inputs(desc, 4);
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune() = options;
  const BatchNormFwdResult fwd = run_batch_norm_fwd(context, desc, in);
  EXPECT_EQ(fwd.choice->algo.id, "cpu:kernel:bnorm");
  const BatchNormBwdResult bwd =
      run_batch_norm_bwd(context, desc, in, fwd.saved_mean, fwd.saved_inv_std);
  EXPECT_FALSE(bwd.choice->timings.empty());
}

// Note [timing stateful calls]
TEST(BatchNormPolicy, ExhaustiveTrainingForwardUpdatesRunningStatisticsOnce) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    const BatchNormDesc desc = training_desc();
    const BatchNormInputs in = batch_norm_inputs(desc, 5);
    Context heuristic = batch_norm_context_with(BackendKind::reference, Direction::fwd);
    const BatchNormFwdResult once = run_batch_norm_fwd(heuristic, desc, in);

    Context exhaustive = batch_norm_context_with(backend, Direction::fwd);
    exhaustive.tune().policy(OpKind::batch_norm, Direction::fwd) = AlgoPolicy::exhaustive();
    exhaustive.tune().time_naive = true;
    const BatchNormFwdResult timed = run_batch_norm_fwd(exhaustive, desc, in);
    EXPECT_GE(timed.choice->candidates_timed, 1) << to_string(backend);
    const std::string context = batch_norm_context(desc, Direction::fwd, timed.choice->algo.id);
    EXPECT_TRUE(compare_batch_norm_fwd(desc, in, once, timed, context));
  }
}

TEST(BatchNormPolicy, ConstraintsPickAdmissibleCandidates) {
  DNNX_REQUIRE_CPU();
  const BatchNormDesc desc = training_desc();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    Context limited = batch_norm_context_with(BackendKind::cpu, direction);
    limited.tune().workspace_limit = 0;
    EXPECT_EQ(batch_norm_select(limited, desc, direction)->algo.workspace_bytes, 0u);
    Context deterministic = batch_norm_context_with(BackendKind::cpu, direction);
    deterministic.tune().deterministic = true;
    EXPECT_TRUE(batch_norm_select(deterministic, desc, direction)->algo.deterministic);
  }
}

TEST(BatchNormPolicy, ProfileTimesEveryCandidate) {
  DNNX_REQUIRE_CPU();
  BatchNormDesc desc = training_desc();
  desc.training = false;
  Context context = batch_norm_context_with(BackendKind::cpu, Direction::bwd_data);
  context.tune().time_naive = true;
  const ProfileResult profile = batch_norm_profile(context, desc, Direction::bwd_data);
  EXPECT_EQ(profile.op, "bnorm");
  EXPECT_EQ(profile.rows.size(), batch_norm_list(context, desc, Direction::bwd_data).size());
  EXPECT_FALSE(profile.chosen.empty());
  EXPECT_EQ(profile.repro, desc.repro(Direction::bwd_data));
}

TEST(BatchNormPolicy, RepeatedCallsReuseTheChoice) {
  DNNX_REQUIRE_CPU();
  const BatchNormDesc desc = training_desc();
  const BatchNormInputs in = batch_norm_inputs(desc, 6);
  Context context = batch_norm_context_with(BackendKind::cpu, Direction::fwd);
  const auto first = run_batch_norm_fwd(context, desc, in).choice;
  const auto second = run_batch_norm_fwd(context, desc, in).choice;
  EXPECT_EQ(first, second);
  EXPECT_EQ(context.choice_cache()->size(), 1u);
}

}  // namespace
}  // namespace dnnx::test
