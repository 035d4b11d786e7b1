// The cross-entropy call path through the public API: listing, the policies (heuristic, fixed,
// exhaustive, DNNX_XENT_*_ALGO), profiles with valid scratch labels, desc shapes and printing.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "ops/cross_entropy_cases.hpp"
#include "support/compare.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace dnnx::test {
namespace {

XentCase spatial_case(Reduction reduction = Reduction::mean) {
  XentCase c;
  c.name = "api_spatial";
  c.desc.dims = Dims{2, 7, 5, 3};
  c.desc.reduction = reduction;
  c.desc.weighted = true;
  return c;
}

TEST(XentApi, Shapes) {
  CrossEntropyDesc desc = spatial_case().desc;
  EXPECT_EQ(desc.classes(), 7);
  EXPECT_EQ(desc.positions(), 30);
  EXPECT_EQ(desc.labels_dims(), (Dims{2, 5, 3}));
  EXPECT_EQ(desc.loss_dims(), (Dims{1}));
  EXPECT_EQ(desc.weights_dims(), (Dims{7}));
  desc.reduction = Reduction::none;
  EXPECT_EQ(desc.loss_dims(), (Dims{2, 5, 3}));
  desc.dims = Dims{64, 1000};
  EXPECT_EQ(desc.labels_dims(), (Dims{64}));
}

TEST(XentApi, DescKeyHashAndRepro) {
  CrossEntropyDesc a = spatial_case().desc;
  CrossEntropyDesc b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  b.ignore_index = 255;
  EXPECT_NE(a, b);
  EXPECT_NE(a.key(), b.key());
  EXPECT_NE(a.repro(), b.repro());
  EXPECT_NE(b.repro().find("--ignore-index=255"), std::string::npos) << b.repro();
  b = a;
  b.label_dtype = DType::i32;
  EXPECT_NE(a.key(), b.key());
  EXPECT_EQ(a.repro(Direction::bwd_data),
            "dnnx profile xent --input 2x7x5x3 --reduction mean --weighted --label-dtype i64 "
            "--dtype f32 --layout nchw --direction bwd");
}

TEST(XentApi, CpuCandidates) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  Context context(BackendKind::cpu);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const auto algos = cross_entropy_list(context, spatial_case().desc, direction);
    ASSERT_GE(algos.size(), 2u);
    // Note [xent cpu candidates]: the fused candidate first, oneDNN's ref last.
    EXPECT_EQ(algos.front().id, "cpu:fused");
    EXPECT_EQ(algos.back().id, "onednn:ref:any+nll");
    for (const AlgoInfo& algo : algos) EXPECT_TRUE(algo.deterministic) << algo.id;
    // The oneDNN candidates hold an f32 copy of the logits in the workspace.
    EXPECT_GE(algos.back().workspace_bytes, 2u * 7 * 5 * 3 * 4);
  }
}

TEST(XentApi, Policies) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    const XentCase c = spatial_case();
    const XentInputs inputs = xent_inputs(c, c.desc);
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      Context heuristic = xent_context_for(backend, direction, AlgoPolicy::heuristic());
      const auto algos = cross_entropy_list(heuristic, c.desc, direction);
      EXPECT_EQ(run_xent(heuristic, c.desc, direction, inputs).choice->algo.id, algos.front().id);
      Context exhaustive = xent_context_for(backend, direction, AlgoPolicy::exhaustive());
      exhaustive.tune().time_naive = true;
      const auto choice = cross_entropy_select(exhaustive, c.desc, direction);
      EXPECT_EQ(choice->timings.size(), algos.size());
      EXPECT_EQ(run_xent(exhaustive, c.desc, direction, inputs).choice->algo.id, choice->algo.id);
    }
  }
}

TEST(XentApi, EnvironmentPolicy) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  ::setenv("DNNX_XENT_FWD_ALGO", "fixed:onednn:ref:any+nll", 1);
  ::setenv("DNNX_BACKEND", "cpu", 1);
  Context context = Context::from_env();
  ::unsetenv("DNNX_XENT_FWD_ALGO");
  ::unsetenv("DNNX_BACKEND");
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  XentCase c = spatial_case();
  c.desc.layout = Layout::channels_last;
  const XentInputs inputs = xent_inputs(c, c.desc);
  EXPECT_EQ(run_xent(context, c.desc, Direction::fwd, inputs).choice->algo.id,
            "onednn:ref:any+nll");
  EXPECT_EQ(run_xent(context, c.desc, Direction::bwd_data, inputs).choice->algo.id, "cpu:fused");
}

TEST(XentApi, ProfileUsesValidScratchLabels) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context = xent_context_for(backend, Direction::fwd, AlgoPolicy::heuristic());
    context.tune().timing_runs = 2;
    context.tune().time_naive = true;
    context.tune().abandon_factor = 1e9;  // every candidate runs on the scratch tensors
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      CrossEntropyDesc desc = spatial_case(Reduction::sum).desc;
      desc.ignore_index = 3;
      desc.label_dtype = DType::i32;
      const ProfileResult result = cross_entropy_profile(context, desc, direction);
      EXPECT_EQ(result.op, "xent");
      ASSERT_FALSE(result.rows.empty());
      for (const ProfileRow& row : result.rows)
        EXPECT_EQ(row.status, CandidateStatus::ok) << row.algo.id << ": " << row.detail;
    }
  }
}

}  // namespace
}  // namespace dnnx::test
