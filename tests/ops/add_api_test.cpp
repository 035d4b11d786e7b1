// Tensor add through the public API: the desc (constructors, key, hash, exact repro), the
// reference backend (closed forms, beta = 0 not reading dst, backward against finite
// differences), and selection on the cpu backend (heuristic, fixed id, exhaustive, the
// DNNX_ADD_*_ALGO variables, profile).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/add.hpp>

#include "ops/add_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace dnnx::test {
namespace {

#define DNNX_REQUIRE_CPU()                                      \
  do {                                                          \
    std::string dnnx_why_;                                      \
    if (!backend_available(BackendKind::cpu, &dnnx_why_))       \
      GTEST_SKIP() << "cpu backend unavailable: " << dnnx_why_; \
  } while (false)

Context cpu_context() {
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

TEST(AddDescTest, BiasBroadcastsEverythingButChannels) {
  const AddDesc desc = AddDesc::bias(Dims{8, 64, 7, 5}, DType::f16, Layout::channels_last);
  EXPECT_EQ(desc.src_dims, (Dims{1, 64, 1, 1}));
  EXPECT_TRUE(desc.broadcasts(0));
  EXPECT_FALSE(desc.broadcasts(1));
  EXPECT_TRUE(desc.broadcasts(2));
  EXPECT_EQ(desc.reduction_size(), 8 * 7 * 5);
  // Batch 1: nothing to broadcast along N.
  EXPECT_FALSE(AddDesc::bias(Dims{1, 4, 3}).broadcasts(0));
}

TEST(AddDescTest, KeyHashReproAreExact) {
  const AddDesc a = AddDesc::from_dims(Dims{1, 256, 1, 1}, Dims{64, 256, 56, 56}, 0.1f, -2.5f,
                                       DType::bf16, Layout::channels_last);
  EXPECT_EQ(a.repro(Direction::bwd_data),
            "dnnx profile add --src 1x256x1x1 --dst 64x256x56x56 --alpha 0.1 --beta -2.5 --dtype "
            "bf16 --layout nhwc --direction bwd");
  EXPECT_EQ(a.key(), "add src=1x256x1x1 dst=64x256x56x56 alpha=0.1 beta=-2.5 bf16 nhwc");
  AddDesc b = a;
  EXPECT_EQ(a.hash(), b.hash());
  std::set<std::string> keys{a.key()};
  b.alpha = 0.2f;
  keys.insert(b.key());
  b = a;
  b.beta = 0;
  keys.insert(b.key());
  b = a;
  b.src_dims = Dims{1, 256, 56, 56};
  keys.insert(b.key());
  b = a;
  b.layout = Layout::channels_first;
  keys.insert(b.key());
  EXPECT_EQ(keys.size(), 5u);
  b = a;
  b.beta = -0.0f;
  AddDesc c = a;
  c.beta = 0.0f;
  EXPECT_EQ(b, c);
  EXPECT_EQ(b.hash(), c.hash());
}

TEST(AddReferenceTest, ClosedFormsAndBetaZeroDoesNotReadDst) {
  const AddDesc desc = AddDesc::from_dims(Dims{1, 2}, Dims{3, 2}, 2.0f, 0.5f);
  const Tensor src = tensor_from(desc.src_dims, DType::f32, Layout::channels_first, {1, -1});
  const Tensor dst =
      tensor_from(desc.dst_dims, DType::f32, Layout::channels_first, {10, 20, 30, 40, 50, 60});
  EXPECT_EQ(reference_add_fwd(desc, src, dst).to_f32(), (std::vector<float>{7, 8, 17, 18, 27, 28}));
  AddDesc overwrite = desc;
  overwrite.beta = 0;
  const Tensor nan = nan_tensor(desc.dst_dims, DType::f32, Layout::channels_first);
  EXPECT_EQ(reference_add_fwd(overwrite, src, nan).to_f32(),
            (std::vector<float>{2, -2, 2, -2, 2, -2}));
  const Tensor diff_dst =
      tensor_from(desc.dst_dims, DType::f32, Layout::channels_first, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(reference_add_bwd(desc, diff_dst).to_f32(), (std::vector<float>{18, 24}));
}

// The gradient of L(src) = sum(diff_dst * add(src)) by central differences of the reference's
// forward pass, element by element of src, against its backward pass, for every pattern of the
// table in f32 (the add is linear: the differences are exact up to the rounding of L).
TEST(AddReferenceTest, BackwardMatchesFiniteDifferences) {
  for (const AddCase& c : add_cases()) {
    if (c.desc.dtype != DType::f32 || c.desc.layout != Layout::channels_first) continue;
    AddDesc desc = c.desc;
    SCOPED_TRACE(c.name);
    const Tensor src = random_tensor(desc.src_dims, DType::f32, desc.layout, 1);
    const Tensor dst = random_tensor(desc.dst_dims, DType::f32, desc.layout, 2);
    const Tensor diff_dst = random_tensor(desc.dst_dims, DType::f32, desc.layout, 3);
    const std::vector<float> grad = reference_add_bwd(desc, diff_dst).to_f32();
    const std::vector<float> weights = diff_dst.to_f32();
    const auto loss = [&](const std::vector<float>& values) {
      const Tensor out =
          reference_add_fwd(desc, tensor_from(desc.src_dims, DType::f32, desc.layout, values), dst);
      double sum = 0;
      const std::vector<float> out_values = out.to_f32();
      for (std::size_t i = 0; i < out_values.size(); ++i)
        sum += static_cast<double>(out_values[i]) * weights[i];
      return sum;
    };
    const std::vector<float> base = src.to_f32();
    const float h = 0.25f;  // exact in f32; the loss is linear in src
    for (std::size_t j = 0; j < base.size(); ++j) {
      std::vector<float> plus = base, minus = base;
      plus[j] += h;
      minus[j] -= h;
      const double fd = (loss(plus) - loss(minus)) / (2.0 * h);
      EXPECT_NEAR(grad[j], fd,
                  1e-5 * (1 + std::fabs(fd)) * static_cast<double>(desc.reduction_size()))
          << "src element " << j;
    }
  }
}

// ---- selection on the cpu backend ----------------------------------------------------------

TEST(AddPolicyTest, HeuristicFixedAndExhaustive) {
  DNNX_REQUIRE_CPU();
  const AddDesc desc = AddDesc::from_dims(Dims{1, 8, 1, 1}, Dims{2, 8, 6, 6}, 1.0f, 1.0f,
                                          DType::f32, Layout::channels_last);
  const Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
  Context context = cpu_context();
  const auto algos = add_list(context, desc, Direction::fwd);
  Tensor dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
  EXPECT_EQ(add_fwd(context, desc, src, dst)->algo.id, first_supported(algos));
  for (const AlgoInfo& algo : algos) {
    if (!algo.supported) continue;
    Context fixed = context;
    fixed.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::fixed(algo.id);
    const auto choice = add_fwd(fixed, desc, src, dst);
    EXPECT_EQ(choice->algo.id, algo.id);
    EXPECT_EQ(choice->policy.kind, PolicyKind::fixed);
  }
  Context exhaustive = context;
  exhaustive.tune().policy(OpKind::add, Direction::bwd_data) = AlgoPolicy::exhaustive();
  const auto choice = add_select(exhaustive, desc, Direction::bwd_data);
  EXPECT_EQ(choice->policy.kind, PolicyKind::exhaustive);
  ASSERT_FALSE(choice->timings.empty());
  EXPECT_EQ(choice->timings.front().algo.id, choice->algo.id);
  EXPECT_EQ(add_select(exhaustive, desc, Direction::bwd_data), choice);  // cached
  const ProfileResult profile = add_profile(context, desc, Direction::fwd);
  EXPECT_EQ(profile.op, "add");
  EXPECT_EQ(profile.rows.size(), algos.size());
}

// f16 and bf16 adds run on the cpu backend whatever the CPU: natively where oneDNN has kernels for
// them, as f32-compute candidates otherwise (Note [f32 compute] in
// src/backends/onednn/layer_common.hpp, Note [f32-compute adds] in src/backends/onednn/add.cpp).
// Which of the two a formulation gets is read from the listing, never assumed of the CPU.
TEST(AddPolicyTest, EveryDtypeRunsOnEveryCpu) {
  DNNX_REQUIRE_CPU();
  Context context = cpu_context();
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const AddDesc& desc :
         {AddDesc::bias(Dims{2, 8, 5, 3}, dtype),
          AddDesc::from_dims(Dims{1, 8, 1, 1}, Dims{2, 8, 5, 3}, 2.0f, 0.0f, dtype,
                             Layout::channels_last),
          AddDesc::from_dims(Dims{2, 8, 5, 3}, Dims{2, 8, 5, 3}, 0.5f, -1.0f, dtype)}) {
      for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
        SCOPED_TRACE(add_context(desc, direction, "(listing)"));
        const std::vector<AlgoInfo> algos = add_list(context, desc, direction);
        EXPECT_TRUE(f32_compute_marked_and_ordered(algos, dtype));
        ASSERT_FALSE(first_supported(algos).empty()) << "no cpu candidate runs this add";
        EXPECT_EQ(add_select(context, desc, direction)->algo.id, first_supported(algos));
        // Per formulation (the first note): which implementations oneDNN has for the dtype.
        struct Seen {
          bool native = false, native_fast = false, f32 = false, f32_reference = false;
        };
        std::map<std::string, Seen> formulations;
        const std::size_t copies =
            static_cast<std::size_t>(desc.src_dims.product() + desc.dst_dims.product()) *
            sizeof(float);
        for (const AlgoInfo& algo : algos) {
          ASSERT_FALSE(algo.notes.empty()) << algo.id;
          if (algo.id.starts_with("onednn:unavailable:")) continue;
          Seen& seen = formulations[algo.notes.front()];
          if (is_f32_compute(algo)) {
            seen.f32 = true;
            seen.f32_reference = seen.f32_reference || is_onednn_reference(algo);
            // The f32 copies of src and dst lie in the workspace (Note [f32 compute]).
            if (algo.supported) {
              EXPECT_GE(algo.workspace_bytes, copies) << algo.id;
            }
          } else {
            seen.native = true;
            seen.native_fast = seen.native_fast || !is_onednn_reference(algo);
          }
        }
        for (const auto& [formulation, seen] : formulations) {
          EXPECT_FALSE(seen.f32 && seen.native_fast)
              << formulation << " has native non-reference candidates and f32-compute ones";
          EXPECT_FALSE(seen.f32_reference && seen.native)
              << formulation << " has a native candidate and an f32-compute ref:any";
        }
      }
    }
  }
}

TEST(AddPolicyTest, EnvironmentVariablesSetThePolicies) {
  DNNX_REQUIRE_CPU();
  setenv("DNNX_BACKEND", "cpu", 1);
  setenv("DNNX_ADD_FWD_ALGO", "exhaustive", 1);
  setenv("DNNX_ADD_BWD_ALGO", "fixed:reference:direct", 1);
  Context context = Context::from_env();
  unsetenv("DNNX_ADD_FWD_ALGO");
  unsetenv("DNNX_ADD_BWD_ALGO");
  unsetenv("DNNX_BACKEND");
  EXPECT_EQ(context.tune().policy(OpKind::add, Direction::fwd).kind, PolicyKind::exhaustive);
  EXPECT_EQ(context.tune().policy(OpKind::add, Direction::bwd_data),
            AlgoPolicy::fixed("reference:direct"));
  // The other ops keep their heuristic.
  EXPECT_EQ(context.tune().policy(OpKind::activation, Direction::fwd).kind, PolicyKind::heuristic);
  // reference:direct is no cpu candidate: the fixed id is refused, naming the valid ones.
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  try {
    add_select(context, AddDesc::bias(Dims{2, 3, 4, 4}), Direction::bwd_data);
    ADD_FAILURE() << "a reference id was accepted on cpu";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("valid ids: onednn:"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
