// The softmax call path through the public API: listing, the policies (heuristic, fixed,
// exhaustive, family, deterministic, DNNX_SOFTMAX_*_ALGO), the choice cache, profiles, in place.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "ops/softmax_cases.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace dnnx::test {
namespace {

SoftmaxDesc small_desc(bool log = false, Layout layout = Layout::channels_first) {
  SoftmaxDesc desc;
  desc.dims = Dims{4, 6, 3, 3};
  desc.mode = SoftmaxMode::channel;
  desc.log = log;
  desc.layout = layout;
  return desc;
}

TEST(SoftmaxApi, ReferenceListsOneCandidate) {
  Context context(BackendKind::reference);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const auto algos = softmax_list(context, small_desc(), direction);
    ASSERT_EQ(algos.size(), 1u);
    EXPECT_EQ(algos[0].id, "reference:direct");
    EXPECT_TRUE(algos[0].supported);
    EXPECT_TRUE(algos[0].deterministic);
    EXPECT_EQ(algos[0].workspace_bytes, 0u);
  }
}

TEST(SoftmaxApi, CpuListsEveryImplementationWithKernelAndRefLast) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  Context context(BackendKind::cpu);
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    const auto algos = softmax_list(context, small_desc(false, layout), Direction::fwd);
    ASSERT_GE(algos.size(), 1u);
    EXPECT_EQ(algos.back().id.rfind("onednn:ref:", 0), 0u) << algos.back().id;
    for (std::size_t i = 0; i < algos.size(); ++i) {
      EXPECT_EQ(algos[i].priority, static_cast<int>(i));
      EXPECT_TRUE(algos[i].id.rfind("onednn:", 0) == 0 || algos[i].id == "cpu:kernel")
          << algos[i].id;
    }
    // Note [cpu softmax kernel]: the zero-workspace C++ kernel is first on nchw channel mode with
    // spatial dims, just before ref:any otherwise.
    const auto kernel = std::find_if(algos.begin(), algos.end(),
                                     [](const AlgoInfo& a) { return a.id == "cpu:kernel"; });
    ASSERT_NE(kernel, algos.end());
    EXPECT_EQ(kernel->workspace_bytes, 0u);
    if (layout == Layout::channels_first) {
      EXPECT_EQ(kernel, algos.begin());
    } else {
      EXPECT_EQ(kernel + 2, algos.end());
    }
    // Note [softmax strategies]: nchw channel mode with spatial dims gets the nhwc copies.
    const bool transposed = std::any_of(algos.begin(), algos.end(),
                                        [](const AlgoInfo& a) { return a.id.ends_with(":nhwc"); });
    EXPECT_EQ(transposed, layout == Layout::channels_first) << to_string(layout);
  }
}

// The heuristic takes the first supported candidate; fixed runs exactly the id; exhaustive times
// them all and records the timings.
TEST(SoftmaxApi, Policies) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    const SoftmaxDesc desc = small_desc(true);
    const Tensor src = random_tensor(desc.dims, desc.dtype, desc.layout, 3);
    Context heuristic = softmax_context_for(backend, Direction::fwd, AlgoPolicy::heuristic());
    const auto first = softmax_list(heuristic, desc, Direction::fwd).front();
    EXPECT_EQ(run_softmax(heuristic, desc, Direction::fwd, src).choice->algo.id, first.id);
    for (const AlgoInfo& algo : softmax_list(heuristic, desc, Direction::fwd)) {
      Context fixed = softmax_context_for(backend, Direction::fwd, AlgoPolicy::fixed(algo.id));
      EXPECT_EQ(run_softmax(fixed, desc, Direction::fwd, src).choice->algo.id, algo.id);
    }
    Context exhaustive = softmax_context_for(backend, Direction::fwd, AlgoPolicy::exhaustive());
    exhaustive.tune().time_naive = true;
    const auto choice = softmax_select(exhaustive, desc, Direction::fwd);
    EXPECT_EQ(choice->policy.kind, PolicyKind::exhaustive);
    EXPECT_EQ(choice->timings.size(), softmax_list(exhaustive, desc, Direction::fwd).size());
    EXPECT_GT(choice->candidates_timed, 0);
    // The call uses the cached choice.
    EXPECT_EQ(run_softmax(exhaustive, desc, Direction::fwd, src).choice->algo.id, choice->algo.id);
  }
}

TEST(SoftmaxApi, BackwardPolicyIsItsOwn) {
  const SoftmaxDesc desc = small_desc();
  Context context(BackendKind::reference);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune().policy(OpKind::softmax, Direction::fwd) = AlgoPolicy::fixed("no-such-id");
  const Tensor dst = random_tensor(desc.dims, desc.dtype, desc.layout, 1);
  const Tensor diff_dst = random_tensor(desc.dims, desc.dtype, desc.layout, 2);
  EXPECT_EQ(run_softmax(context, desc, Direction::bwd_data, dst, &diff_dst).choice->algo.id,
            "reference:direct");
  EXPECT_THROW(run_softmax(context, desc, Direction::fwd, dst), Error);
  // Convolution's policies do not apply to softmax.
  Context conv_policy(BackendKind::reference);
  conv_policy.set_choice_cache(std::make_shared<ChoiceCache>());
  conv_policy.tune().fwd = AlgoPolicy::fixed("no-such-id");
  EXPECT_NO_THROW(run_softmax(conv_policy, desc, Direction::fwd, dst));
}

TEST(SoftmaxApi, EnvironmentPolicy) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  ::setenv("DNNX_SOFTMAX_BWD_ALGO", "fixed:onednn:ref:any", 1);
  ::setenv("DNNX_BACKEND", "cpu", 1);
  Context context = Context::from_env();
  ::unsetenv("DNNX_SOFTMAX_BWD_ALGO");
  ::unsetenv("DNNX_BACKEND");
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  EXPECT_EQ(context.tune().policy(OpKind::softmax, Direction::bwd_data).id, "onednn:ref:any");
  const SoftmaxDesc desc = small_desc();
  const Tensor dst = random_tensor(desc.dims, desc.dtype, desc.layout, 1);
  const Tensor diff_dst = random_tensor(desc.dims, desc.dtype, desc.layout, 2);
  EXPECT_EQ(run_softmax(context, desc, Direction::bwd_data, dst, &diff_dst).choice->algo.id,
            "onednn:ref:any");
  ::setenv("DNNX_SOFTMAX_FWD_ALGO", "fastest-please", 1);
  EXPECT_THROW(Context::from_env(), Error);
  ::unsetenv("DNNX_SOFTMAX_FWD_ALGO");
}

TEST(SoftmaxApi, DeterministicAndWorkspaceConstraints) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  const SoftmaxDesc desc = small_desc();  // nchw spatial: the nhwc candidate needs workspace
  Context context = softmax_context_for(BackendKind::cpu, Direction::fwd, AlgoPolicy::heuristic());
  context.tune().deterministic = true;
  context.tune().workspace_limit = 0;
  const auto choice = softmax_select(context, desc, Direction::fwd);
  EXPECT_TRUE(choice->algo.deterministic);
  EXPECT_EQ(choice->algo.workspace_bytes, 0u) << choice->algo.id;
}

TEST(SoftmaxApi, InPlaceForwardEqualsOutOfPlace) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
      const SoftmaxDesc desc = small_desc(false, layout);
      Context probe(backend);
      for (const AlgoInfo& algo : softmax_list(probe, desc, Direction::fwd)) {
        if (!algo.supported) continue;
        Context context = softmax_context_for(backend, Direction::fwd, AlgoPolicy::fixed(algo.id));
        const Tensor src = random_tensor(desc.dims, desc.dtype, desc.layout, 9);
        const Tensor out_of_place = run_softmax(context, desc, Direction::fwd, src).output;
        Tensor data = random_tensor(desc.dims, desc.dtype, desc.layout, 9);
        softmax_fwd(context, desc, data, data);
        EXPECT_TRUE(bitwise_equal(data, out_of_place, "in-place dst",
                                  softmax_context(desc, Direction::fwd, algo.id)));
      }
    }
  }
}

TEST(SoftmaxApi, ProfileTimesEveryCandidate) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context = softmax_context_for(backend, Direction::bwd_data, AlgoPolicy::heuristic());
    context.tune().timing_runs = 2;
    context.tune().time_naive = true;
    const SoftmaxDesc desc = small_desc(true);
    const ProfileResult result = softmax_profile(context, desc, Direction::bwd_data);
    EXPECT_EQ(result.op, "softmax");
    EXPECT_EQ(result.rows.size(), softmax_list(context, desc, Direction::bwd_data).size());
    EXPECT_FALSE(result.chosen.empty());
    EXPECT_NE(result.repro.find("dnnx profile softmax --input 4x6x3x3 --mode channel --log"),
              std::string::npos)
        << result.repro;
  }
}

TEST(SoftmaxApi, DescKeyHashAndRepro) {
  SoftmaxDesc a = small_desc();
  SoftmaxDesc b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  b.log = true;
  EXPECT_NE(a, b);
  EXPECT_NE(a.key(), b.key());
  b = a;
  b.mode = SoftmaxMode::instance;
  EXPECT_NE(a.key(), b.key());
  EXPECT_EQ(a.axis_size(), 6);
  EXPECT_EQ(a.groups(), 36);
  EXPECT_EQ(b.axis_size(), 54);
  EXPECT_EQ(b.groups(), 4);
  EXPECT_EQ(a.repro(Direction::bwd_data),
            "dnnx profile softmax --input 4x6x3x3 --mode channel --dtype f32 --layout nchw "
            "--direction bwd");
}

}  // namespace
}  // namespace dnnx::test
