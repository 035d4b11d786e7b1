// Activations through the public API: the desc's vocabulary (names, key, hash, repro), the
// reference backend's values and derivatives (closed forms, PyTorch's conventions at the kinks,
// finite differences), in-place calls, and selection (heuristic, fixed id, exhaustive, the
// DNNX_ACT_*_ALGO variables, select and profile) on the cpu backend.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "ops/activation_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace dnnx::test {
namespace {

constexpr ActivationKind all_kinds[] = {ActivationKind::identity,     ActivationKind::relu,
                                        ActivationKind::clipped_relu, ActivationKind::tanh,
                                        ActivationKind::sigmoid,      ActivationKind::elu,
                                        ActivationKind::swish};

Context cpu_context() {
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

#define DNNX_REQUIRE_CPU()                                      \
  do {                                                          \
    std::string dnnx_why_;                                      \
    if (!backend_available(BackendKind::cpu, &dnnx_why_))       \
      GTEST_SKIP() << "cpu backend unavailable: " << dnnx_why_; \
  } while (false)

// ---- vocabulary ----------------------------------------------------------------------------

TEST(ActivationDescTest, NamesRoundTrip) {
  for (const ActivationKind kind : all_kinds) {
    EXPECT_EQ(parse_activation_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(parse_activation_kind("SiLU"), ActivationKind::swish);
  for (const ActivationSaved saved :
       {ActivationSaved::src_and_dst, ActivationSaved::dst, ActivationSaved::src})
    EXPECT_EQ(parse_activation_saved(to_string(saved)), saved);
  EXPECT_EQ(parse_activation_saved("both"), ActivationSaved::src_and_dst);
}

TEST(ActivationDescTest, BackwardFromDstFollowsTheKind) {
  EXPECT_TRUE(activation_bwd_from_dst(ActivationKind::relu, 1));
  EXPECT_TRUE(activation_bwd_from_dst(ActivationKind::tanh, 1));
  EXPECT_TRUE(activation_bwd_from_dst(ActivationKind::elu, 0));
  EXPECT_FALSE(activation_bwd_from_dst(ActivationKind::elu, -0.25));
  EXPECT_FALSE(activation_bwd_from_dst(ActivationKind::swish, 1));
  ActivationDesc swish = ActivationDesc::from_dims(ActivationKind::swish, Dims{4});
  swish.saved = ActivationSaved::dst;
  EXPECT_FALSE(swish.bwd_computable());
  swish.saved = ActivationSaved::src;
  EXPECT_TRUE(swish.bwd_computable());
}

TEST(ActivationDescTest, KeyHashAndEquality) {
  const ActivationDesc a = ActivationDesc::from_dims(ActivationKind::relu, Dims{2, 3, 4, 5});
  ActivationDesc b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  // alpha means nothing to relu: same key (one cache entry), same hash.
  b.alpha = 3;
  EXPECT_EQ(a.key(), b.key());
  EXPECT_EQ(a.hash(), b.hash());
  // Every field that changes the computation changes the key.
  std::set<std::string> keys{a.key()};
  ActivationDesc c = a;
  c.layout = Layout::channels_last;
  keys.insert(c.key());
  c = a;
  c.dtype = DType::bf16;
  keys.insert(c.key());
  c = a;
  c.saved = ActivationSaved::dst;
  keys.insert(c.key());
  c = a;
  c.dims = Dims{2, 3, 4, 6};
  keys.insert(c.key());
  keys.insert(ActivationDesc::elu(a.dims, 0.5).key());
  keys.insert(ActivationDesc::elu(a.dims, 0.25).key());
  keys.insert(ActivationDesc::clipped_relu(a.dims, 6).key());
  keys.insert(ActivationDesc::clipped_relu(a.dims, 0.5).key());
  EXPECT_EQ(keys.size(), 9u);
  // -0.0 == 0.0: equal descs hash equal.
  EXPECT_EQ(ActivationDesc::elu(a.dims, 0.0).hash(), ActivationDesc::elu(a.dims, -0.0).hash());
}

TEST(ActivationDescTest, ReproIsExactAndNamesOnlyMeaningfulFields) {
  ActivationDesc elu =
      ActivationDesc::elu(Dims{64, 256, 56, 56}, 0.1, DType::f16, Layout::channels_last);
  elu.saved = ActivationSaved::dst;
  EXPECT_EQ(elu.repro(Direction::fwd),
            "dnnx profile act --input 64x256x56x56 --kind elu --alpha 0.1 --dtype f16 --layout "
            "nhwc --direction fwd");
  EXPECT_EQ(elu.repro(Direction::bwd_data),
            "dnnx profile act --input 64x256x56x56 --kind elu --alpha 0.1 --dtype f16 --layout "
            "nhwc --direction bwd --saved dst");
  const ActivationDesc clip = ActivationDesc::clipped_relu(Dims{7}, 6);
  EXPECT_EQ(clip.repro(),
            "dnnx profile act --input 7 --kind clipped_relu --ceiling 6 --dtype f32 "
            "--layout nchw --direction fwd");
  std::ostringstream printed;
  printed << clip;
  EXPECT_EQ(printed.str(), clip.key());
  // An invalid desc still prints (it is the context of the error that rejects it).
  ActivationDesc broken;
  EXPECT_NE(broken.repro().find("--input "), std::string::npos);
}

// ---- the reference backend ---------------------------------------------------------------------

// The f32 reference output for one input, through the public API.
float reference_value(const ActivationDesc& base, float x) {
  ActivationDesc desc = base;
  desc.dims = Dims{1};
  desc.dtype = DType::f32;
  const Tensor src = tensor_from(desc.dims, DType::f32, Layout::channels_first, {x});
  return reference_activation_fwd(desc, src).to_f32()[0];
}

// The f32 reference derivative (diff_dst = 1) at `x`, from src or from dst alone.
float reference_derivative(const ActivationDesc& base, float x, ActivationSaved saved) {
  ActivationDesc desc = base;
  desc.dims = Dims{1};
  desc.dtype = DType::f32;
  desc.saved = saved;
  const Tensor src = tensor_from(desc.dims, DType::f32, Layout::channels_first, {x});
  const Tensor dst = reference_activation_fwd(desc, src);
  const Tensor one = tensor_from(desc.dims, DType::f32, Layout::channels_first, {1.0f});
  return reference_activation_bwd(desc, src, dst, one).to_f32()[0];
}

TEST(ActivationReferenceTest, ForwardMatchesClosedForms) {
  const auto desc = [](ActivationKind kind) { return ActivationDesc::from_dims(kind, Dims{1}); };
  const double e = std::exp(1.0);
  EXPECT_EQ(reference_value(desc(ActivationKind::identity), -1.25f), -1.25f);
  EXPECT_EQ(reference_value(desc(ActivationKind::relu), -1.25f), 0.0f);
  EXPECT_EQ(reference_value(desc(ActivationKind::relu), 1.25f), 1.25f);
  EXPECT_EQ(reference_value(ActivationDesc::clipped_relu(Dims{1}, 0.5), 0.75f), 0.5f);
  EXPECT_EQ(reference_value(ActivationDesc::clipped_relu(Dims{1}, 0.5), 0.25f), 0.25f);
  EXPECT_EQ(reference_value(ActivationDesc::clipped_relu(Dims{1}, 0.5), -0.25f), 0.0f);
  EXPECT_EQ(reference_value(desc(ActivationKind::tanh), 0.5f), static_cast<float>(std::tanh(0.5)));
  EXPECT_EQ(reference_value(desc(ActivationKind::sigmoid), 1.0f),
            static_cast<float>(1.0 / (1.0 + 1.0 / e)));
  EXPECT_EQ(reference_value(ActivationDesc::elu(Dims{1}, 0.5), -1.0f),
            static_cast<float>(0.5 * (1.0 / e - 1.0)));
  EXPECT_EQ(reference_value(ActivationDesc::elu(Dims{1}, 0.5), 2.0f), 2.0f);
  EXPECT_EQ(reference_value(desc(ActivationKind::swish), 1.0f),
            static_cast<float>(1.0 / (1.0 + 1.0 / e)));
  // Saturation without overflow, and NaN passing through as in PyTorch.
  EXPECT_EQ(reference_value(desc(ActivationKind::sigmoid), -200.0f), 0.0f);
  EXPECT_EQ(reference_value(desc(ActivationKind::swish), -200.0f), -0.0f);
  EXPECT_TRUE(std::isnan(reference_value(desc(ActivationKind::relu), NAN)));
}

TEST(ActivationReferenceTest, DerivativesAtTheKinksArePyTorchs) {
  for (const ActivationSaved saved : {ActivationSaved::src, ActivationSaved::dst}) {
    SCOPED_TRACE(to_string(saved));
    const ActivationDesc relu = ActivationDesc::from_dims(ActivationKind::relu, Dims{1});
    EXPECT_EQ(reference_derivative(relu, 0.0f, saved), 0.0f);  // threshold_backward: x <= 0
    EXPECT_EQ(reference_derivative(relu, -0.0f, saved), 0.0f);
    EXPECT_EQ(reference_derivative(relu, 1e-30f, saved), 1.0f);
    const ActivationDesc clip = ActivationDesc::clipped_relu(Dims{1}, 0.5);
    EXPECT_EQ(reference_derivative(clip, 0.0f, saved), 0.0f);  // hardtanh_backward: open interval
    EXPECT_EQ(reference_derivative(clip, 0.5f, saved), 0.0f);
    EXPECT_EQ(reference_derivative(clip, std::nextafter(0.5f, 0.0f), saved), 1.0f);
    EXPECT_EQ(reference_derivative(clip, 0.75f, saved), 0.0f);
    const ActivationDesc elu = ActivationDesc::elu(Dims{1}, 0.5);
    EXPECT_EQ(reference_derivative(elu, 0.0f, saved), 0.5f);  // elu_backward: x <= 0 branch
    EXPECT_EQ(reference_derivative(elu, 1.0f, saved), 1.0f);
  }
  // Negative alpha: only from src (elu'(x) = alpha e^x for x <= 0).
  const ActivationDesc elu = ActivationDesc::elu(Dims{1}, -0.5);
  EXPECT_FLOAT_EQ(reference_derivative(elu, -1.0f, ActivationSaved::src),
                  static_cast<float>(-0.5 * std::exp(-1.0)));
}

// The reference's backward against central differences of its own forward pass, in f32, at
// points away from the kinks; and its backward from dst against the one from src.
TEST(ActivationReferenceTest, BackwardMatchesFiniteDifferences) {
  std::vector<ActivationDesc> descs;
  for (const ActivationKind kind : all_kinds)
    descs.push_back(ActivationDesc::from_dims(kind, Dims{1}));
  descs.push_back(ActivationDesc::clipped_relu(Dims{1}, 0.5));
  descs.push_back(ActivationDesc::elu(Dims{1}, 0.3));
  descs.push_back(ActivationDesc::elu(Dims{1}, -0.7));
  const float h = 0x1p-8f;
  for (const ActivationDesc& desc : descs) {
    SCOPED_TRACE(desc.key());
    int checked = 0;
    for (float x = -3.0f; x <= 3.0f; x += 0.1875f) {
      const bool near_kink =
          std::fabs(x) < 4 * h || (desc.kind == ActivationKind::clipped_relu &&
                                   std::fabs(x - static_cast<float>(desc.ceiling)) < 4 * h);
      if (near_kink) continue;
      const double fd = (static_cast<double>(reference_value(desc, x + h)) -
                         static_cast<double>(reference_value(desc, x - h))) /
                        (2.0 * h);
      const float from_src = reference_derivative(desc, x, ActivationSaved::src);
      // Truncation O(h^2 f''') and the f32 rounding of f (u |f| / h) stay far below this.
      EXPECT_NEAR(from_src, fd, 2e-3 * std::max(1.0, std::fabs(fd))) << "x = " << x;
      if (activation_bwd_from_dst(desc.kind, desc.alpha)) {
        // dst is f(x) rounded to f32: 1 - y^2 etc. inherit a few f32 ulps of 1.
        EXPECT_NEAR(reference_derivative(desc, x, ActivationSaved::dst), from_src, 1e-6)
            << "x = " << x;
      }
      ++checked;
    }
    EXPECT_GT(checked, 20);
  }
}

TEST(ActivationReferenceTest, InPlaceMatchesOutOfPlaceBitwise) {
  for (const ActivationCase& c : activation_cases()) {
    const ActivationDesc& desc = c.desc;
    const Tensor src = activation_src(desc, seed_from(c.name));
    const Tensor dst = reference_activation_fwd(desc, src);
    Tensor in_place = clone(src);
    Context reference(BackendKind::reference);
    activation_fwd(reference, desc, in_place, in_place);
    EXPECT_TRUE(bitwise_equal(in_place, dst, "fwd in place", c.name));
    const Tensor diff_dst = random_tensor(desc.dims, desc.dtype, desc.layout, 7);
    const Tensor diff_src = reference_activation_bwd(desc, src, dst, diff_dst);
    Tensor grad = clone(diff_dst);
    activation_bwd(reference, desc, &src, &dst, grad, grad);
    EXPECT_TRUE(bitwise_equal(grad, diff_src, "bwd in place", c.name));
  }
}

// ---- selection on the cpu backend ----------------------------------------------------------

ActivationDesc policy_desc() {
  return ActivationDesc::from_dims(ActivationKind::tanh, Dims{2, 8, 6, 6}, DType::f32,
                                   Layout::channels_last);
}

TEST(ActivationPolicyTest, HeuristicRunsTheFirstSupportedCandidate) {
  DNNX_REQUIRE_CPU();
  Context context = cpu_context();
  const ActivationDesc desc = policy_desc();
  Tensor src = activation_src(desc, 1), dst = nan_tensor(desc.dims, desc.dtype, desc.layout);
  const auto choice = activation_fwd(context, desc, src, dst);
  EXPECT_EQ(choice->algo.id, first_supported(activation_list(context, desc, Direction::fwd)));
  EXPECT_EQ(choice->policy.kind, PolicyKind::heuristic);
  EXPECT_EQ(choice->op, "act");
}

TEST(ActivationPolicyTest, FixedIdRunsExactlyThatCandidate) {
  DNNX_REQUIRE_CPU();
  Context context = cpu_context();
  ActivationDesc desc = policy_desc();
  desc.saved = ActivationSaved::dst;
  const std::vector<AlgoInfo> algos = activation_list(context, desc, Direction::bwd_data);
  int fixed = 0;
  for (const AlgoInfo& algo : algos) {
    if (!algo.supported) continue;
    context.tune().policy(OpKind::activation, Direction::bwd_data) = AlgoPolicy::fixed(algo.id);
    const Tensor dst = random_tensor(desc.dims, desc.dtype, desc.layout, 2);
    const Tensor diff_dst = random_tensor(desc.dims, desc.dtype, desc.layout, 3);
    Tensor diff_src = nan_tensor(desc.dims, desc.dtype, desc.layout);
    const auto choice = activation_bwd(context, desc, nullptr, &dst, diff_dst, diff_src);
    EXPECT_EQ(choice->algo.id, algo.id);
    EXPECT_EQ(choice->policy.kind, PolicyKind::fixed);
    ++fixed;
  }
  EXPECT_GT(fixed, 0);
  // A candidate that reads src cannot be fixed when only dst is saved.
  for (const AlgoInfo& algo : algos) {
    if (algo.supported) continue;
    context.tune().policy(OpKind::activation, Direction::bwd_data) = AlgoPolicy::fixed(algo.id);
    try {
      activation_select(context, desc, Direction::bwd_data);
      ADD_FAILURE() << "fixed unsupported " << algo.id << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
      EXPECT_NE(error.message().find(algo.reason), std::string::npos) << error.what();
    }
    break;
  }
}

TEST(ActivationPolicyTest, ExhaustiveTimesTheCandidatesAndCachesTheChoice) {
  DNNX_REQUIRE_CPU();
  Context context = cpu_context();
  context.tune().policy(OpKind::activation, Direction::fwd) = AlgoPolicy::exhaustive();
  const ActivationDesc desc = policy_desc();
  const auto choice = activation_select(context, desc, Direction::fwd);
  EXPECT_EQ(choice->policy.kind, PolicyKind::exhaustive);
  ASSERT_FALSE(choice->timings.empty());
  EXPECT_EQ(choice->timings.front().status, CandidateStatus::ok);
  EXPECT_EQ(choice->timings.front().algo.id, choice->algo.id);
  EXPECT_GE(choice->candidates_timed, 1);
  // The second selection is a cache hit: the very same choice.
  EXPECT_EQ(activation_select(context, desc, Direction::fwd), choice);
  // A call runs what was selected.
  Tensor src = activation_src(desc, 1), dst = nan_tensor(desc.dims, desc.dtype, desc.layout);
  EXPECT_EQ(activation_fwd(context, desc, src, dst)->algo.id, choice->algo.id);
}

TEST(ActivationPolicyTest, ProfileTimesEveryCandidate) {
  DNNX_REQUIRE_CPU();
  Context context = cpu_context();
  const ActivationDesc desc = policy_desc();
  const ProfileResult profile = activation_profile(context, desc, Direction::bwd_data);
  EXPECT_EQ(profile.op, "act");
  EXPECT_EQ(profile.rows.size(), activation_list(context, desc, Direction::bwd_data).size());
  EXPECT_FALSE(profile.chosen.empty());
  EXPECT_EQ(profile.repro, desc.repro(Direction::bwd_data));
}

TEST(ActivationPolicyTest, EnvironmentVariablesSetThePolicies) {
  DNNX_REQUIRE_CPU();
  const ActivationDesc desc = policy_desc();
  const std::string id = [&] {
    Context context = cpu_context();
    const auto algos = activation_list(context, desc, Direction::bwd_data);
    return algos.back().supported ? algos.back().id : first_supported(algos);
  }();
  setenv("DNNX_BACKEND", "cpu", 1);
  setenv("DNNX_ACT_BWD_ALGO", ("fixed:" + id).c_str(), 1);
  setenv("DNNX_ACT_FWD_ALGO", "exhaustive", 1);
  Context context = Context::from_env();
  unsetenv("DNNX_ACT_BWD_ALGO");
  unsetenv("DNNX_ACT_FWD_ALGO");
  unsetenv("DNNX_BACKEND");
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  EXPECT_EQ(context.tune().policy(OpKind::activation, Direction::fwd).kind, PolicyKind::exhaustive);
  EXPECT_EQ(context.tune().policy(OpKind::activation, Direction::bwd_data), AlgoPolicy::fixed(id));
  // Convolution's policies are not touched.
  EXPECT_EQ(context.tune().policy(Direction::fwd).kind, PolicyKind::heuristic);
  EXPECT_EQ(activation_select(context, desc, Direction::bwd_data)->algo.id, id);
}

// cudnn.torch's inplace=true, end to end on the cpu backend: forward in place, backward from dst
// alone and in place, against the out-of-place reference.
TEST(ActivationPolicyTest, InPlaceLayerRoundTrip) {
  DNNX_REQUIRE_CPU();
  for (const ActivationKind kind :
       {ActivationKind::relu, ActivationKind::tanh, ActivationKind::sigmoid, ActivationKind::elu,
        ActivationKind::clipped_relu}) {
    ActivationDesc desc =
        ActivationDesc::from_dims(kind, Dims{3, 5, 4, 4}, DType::f32, Layout::channels_last);
    desc.saved = ActivationSaved::dst;
    SCOPED_TRACE(desc.key());
    const Tensor src = activation_src(desc, 11);
    const Tensor diff_dst = random_tensor(desc.dims, desc.dtype, desc.layout, 12);
    const Tensor expected_dst = reference_activation_fwd(desc, src);
    ActivationDesc from_src = desc;
    from_src.saved = ActivationSaved::src;
    const Tensor expected_grad = reference_activation_bwd(from_src, src, expected_dst, diff_dst);

    Context context = cpu_context();
    Tensor activations = clone(src);
    activation_fwd(context, desc, activations, activations);  // src is gone
    Tensor grad = clone(diff_dst);
    activation_bwd(context, desc, nullptr, &activations, grad, grad);
    EXPECT_TRUE(activation_close(desc, Direction::fwd, activations, expected_dst, nullptr, "fwd"));
    EXPECT_TRUE(activation_close(desc, Direction::bwd_data, grad, expected_grad, &diff_dst, "bwd"));
  }
}

}  // namespace
}  // namespace dnnx::test
