// The fused convolution's public surface: the desc (validation, key, hash, repro, printing),
// bad inputs (kind, and a message naming the argument and the value), and selection through
// convolution's forward policy (fixed, bad id, exhaustive, heuristic, distinct cache keys).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/conv_fused.hpp>

#include "ops/conv_fused_support.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

ConvFusedDesc small_desc(DType dtype = DType::f32, Layout layout = Layout::channels_first) {
  ConvFusedDesc desc;
  desc.conv = ConvDesc::from_shapes({2, 4, 8, 8}, {8, 4, 3, 3}, {1}, {1}, {1}, 1, dtype, layout);
  desc.bias = true;
  desc.residual = true;
  desc.residual_scale = 0.5f;
  desc.activation = FusedActivation::relu;
  return desc;
}

Context private_context(BackendKind backend) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

// ---- the desc -----------------------------------------------------------------------------------

TEST(ConvFusedDesc, KeyNamesTheEpilogueAfterTheConvolution) {
  const ConvFusedDesc desc = small_desc();
  EXPECT_EQ(desc.key(), desc.conv.key() + " +bias +residual*0.5 relu");
  ConvFusedDesc plain;
  plain.conv = desc.conv;
  plain.activation = FusedActivation::identity;
  EXPECT_EQ(plain.key(), desc.conv.key() + " identity");
  std::ostringstream printed;
  printed << desc;
  EXPECT_EQ(printed.str(), desc.key());
}

TEST(ConvFusedDesc, EveryFieldChangesKeyHashAndEquality) {
  const ConvFusedDesc base = small_desc();
  std::vector<ConvFusedDesc> variants(5, base);
  variants[0].bias = false;
  variants[1].residual_scale = 0.25f;
  variants[2].activation = FusedActivation::identity;
  variants[3].conv.stride = {2, 2, 1};
  variants[4].residual = false, variants[4].residual_scale = 1.0f;
  for (const ConvFusedDesc& variant : variants) {
    EXPECT_FALSE(variant == base) << variant;
    EXPECT_NE(variant.key(), base.key());
    EXPECT_NE(variant.hash(), base.hash()) << variant;
  }
  EXPECT_TRUE(small_desc() == base);
  EXPECT_EQ(small_desc().hash(), base.hash());
}

// The CLI test cli.conv_fused.repro runs exactly this line (tests/ops/conv_fused.cmake).
TEST(ConvFusedDesc, ReproIsTheCliLine) {
  EXPECT_EQ(small_desc().repro(),
            "dnnx profile conv_fused --input 2x4x8x8 --weights 8x4x3x3 --stride 1 --pad 1 "
            "--dilation 1 --dtype f32 --layout nchw --bias --residual --residual-scale 0.5 "
            "--activation relu --direction fwd");
  ConvFusedDesc plain;
  plain.conv = small_desc().conv;
  plain.activation = FusedActivation::identity;
  EXPECT_EQ(plain.repro(),
            "dnnx profile conv_fused --input 2x4x8x8 --weights 8x4x3x3 --stride 1 --pad 1 "
            "--dilation 1 --dtype f32 --layout nchw --activation identity --direction fwd");
}

TEST(ConvFusedDesc, ActivationNames) {
  EXPECT_EQ(to_string(FusedActivation::relu), "relu");
  EXPECT_EQ(to_string(FusedActivation::identity), "identity");
  EXPECT_EQ(parse_fused_activation("RELU"), FusedActivation::relu);
  EXPECT_EQ(parse_fused_activation("none"), FusedActivation::identity);
}

// ---- bad inputs ---------------------------------------------------------------------------------

struct BadInput {
  const char* name;
  ErrorKind kind;
  std::vector<std::string> mentions;  // the argument and the value, at least
  std::function<void()> call;
};

class Operands {
 public:
  explicit Operands(const ConvFusedDesc& desc)
      : desc_(desc),
        operands_(random_conv_fused_operands(desc, 7)),
        dst_(Tensor::zeros(desc.dst_dims(), desc.conv.dtype, desc.conv.layout)) {}
  std::shared_ptr<const Choice> call(Context& context, const ConvFusedDesc& desc) {
    return conv_fused_fwd(context, desc, operands_.src, operands_.weights, bias(), residual(),
                          dst_);
  }
  const Tensor* bias() const { return desc_.bias ? &operands_.bias : nullptr; }
  const Tensor* residual() const { return desc_.residual ? &operands_.residual : nullptr; }
  ConvFusedOperands& operands() { return operands_; }
  Tensor& dst() { return dst_; }

 private:
  ConvFusedDesc desc_;
  ConvFusedOperands operands_;
  Tensor dst_;
};

void call_with(Context& context, Operands& o, const ConvFusedDesc& desc, const Tensor* bias,
               const Tensor* residual, const Tensor* src = nullptr) {
  conv_fused_fwd(context, desc, src ? *src : o.operands().src, o.operands().weights, bias, residual,
                 o.dst());
}

std::vector<BadInput> bad_inputs() {
  std::vector<BadInput> cases;
  const ConvFusedDesc good = small_desc();
  const auto run = [](ConvFusedDesc desc,
                      std::function<void(Context&, Operands&, ConvFusedDesc&)> call) {
    return [desc, call]() mutable {
      Context context = private_context(BackendKind::reference);
      Operands operands(small_desc());
      call(context, operands, desc);
    };
  };
  {
    ConvFusedDesc d = good;
    d.residual_scale = std::numeric_limits<float>::quiet_NaN();
    cases.push_back(
        {"nan_residual_scale", ErrorKind::InvalidArgument, {"residual_scale", "nan"}, [d] {
           d.validate();
         }});
  }
  {
    ConvFusedDesc d = good;
    d.residual = false;
    cases.push_back({"scale_without_residual",
                     ErrorKind::InvalidArgument,
                     {"residual_scale", "0.5", "residual is false"},
                     [d] { d.validate(); }});
  }
  {
    ConvFusedDesc d = good;
    d.activation = static_cast<FusedActivation>(7);
    cases.push_back(
        {"unknown_activation_value", ErrorKind::InvalidArgument, {"activation", "7"}, [d] {
           d.validate();
         }});
  }
  {
    ConvFusedDesc d = good;
    d.conv.groups = 3;
    cases.push_back(
        {"groups_not_dividing", ErrorKind::InvalidArgument, {"groups=3", "in_channels=4"}, [d] {
           d.validate();
         }});
  }
  cases.push_back({"unknown_activation_name", ErrorKind::InvalidArgument, {"gelu", "relu"}, [] {
                     parse_fused_activation("gelu");
                   }});
  cases.push_back({"bias_missing",
                   ErrorKind::InvalidArgument,
                   {"bias", "missing", "desc.bias"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     call_with(c, o, d, nullptr, o.residual());
                   })});
  {
    ConvFusedDesc d = good;
    d.bias = false;
    cases.push_back({"bias_not_asked_for",
                     ErrorKind::InvalidArgument,
                     {"bias", "desc.bias is false"},
                     run(d, [](Context& c, Operands& o, ConvFusedDesc& desc) {
                       call_with(c, o, desc, o.bias(), o.residual());
                     })});
  }
  cases.push_back({"residual_missing",
                   ErrorKind::InvalidArgument,
                   {"residual", "missing", "desc.residual"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     call_with(c, o, d, o.bias(), nullptr);
                   })});
  cases.push_back({"src_dtype_mix",
                   ErrorKind::InvalidArgument,
                   {"dtype mix", "src is f16", "f32"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     const Tensor src16 = random_tensor(d.src_dims(), DType::f16, d.conv.layout, 1);
                     call_with(c, o, d, o.bias(), o.residual(), &src16);
                   })});
  cases.push_back({"bias_wrong_dims",
                   ErrorKind::InvalidArgument,
                   {"bias dims", "9", "8"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     const Tensor bias = random_tensor({9}, DType::f32, Layout::channels_first, 1);
                     call_with(c, o, d, &bias, o.residual());
                   })});
  cases.push_back({"residual_wrong_layout",
                   ErrorKind::InvalidArgument,
                   {"layout mismatch", "residual", "nchw"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     const Tensor residual =
                         random_tensor(d.dst_dims(), DType::f32, Layout::channels_last, 1);
                     call_with(c, o, d, o.bias(), &residual);
                   })});
  cases.push_back(
      {"residual_wrong_dims",
       ErrorKind::InvalidArgument,
       {"residual dims", "2x8x7x8", "2x8x8x8"},
       run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
         const Tensor residual = random_tensor({2, 8, 7, 8}, DType::f32, Layout::channels_first, 1);
         call_with(c, o, d, o.bias(), &residual);
       })});
  cases.push_back({"src_null_data",
                   ErrorKind::InvalidArgument,
                   {"src has null data"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     const Tensor src =
                         Tensor::view(nullptr, d.src_dims(), DType::f32, Layout::channels_first);
                     call_with(c, o, d, o.bias(), o.residual(), &src);
                   })});
  cases.push_back(
      {"residual_partially_overlaps_dst",
       ErrorKind::InvalidArgument,
       {"residual partially overlaps dst"},
       run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
         // A view one element into dst's memory, same dims: overlapping, not equal.
         Tensor big = Tensor::zeros({d.dst_dims().product() + 1}, DType::f32);
         Tensor dst = Tensor::view(big.data(), d.dst_dims(), DType::f32);
         const Tensor residual =
             Tensor::view(static_cast<float*>(big.data()) + 1, d.dst_dims(), DType::f32);
         conv_fused_fwd(c, d, o.operands().src, o.operands().weights, o.bias(), &residual, dst);
       })});
  cases.push_back({"dst_overlaps_bias",
                   ErrorKind::InvalidArgument,
                   {"dst overlaps bias"},
                   run(good, [](Context& c, Operands& o, ConvFusedDesc& d) {
                     Tensor dst = o.dst();
                     const Tensor bias = Tensor::view(dst.data(), d.bias_dims(), DType::f32);
                     conv_fused_fwd(c, d, o.operands().src, o.operands().weights, &bias,
                                    o.residual(), dst);
                   })});
  cases.push_back({"list_bwd_data",
                   ErrorKind::InvalidArgument,
                   {"only the forward direction", "bwd_data"},
                   [good] {
                     Context context = private_context(BackendKind::reference);
                     conv_fused_list(context, good, Direction::bwd_data);
                   }});
  cases.push_back({"profile_bwd_weights",
                   ErrorKind::InvalidArgument,
                   {"only the forward direction", "bwd_weights"},
                   [good] {
                     Context context = private_context(BackendKind::reference);
                     conv_fused_profile(context, good, Direction::bwd_weights);
                   }});
  cases.push_back({"fixed_id_not_a_candidate",
                   ErrorKind::InvalidArgument,
                   {"'onednn:nope'", "valid ids", "reference:direct"},
                   [good] {
                     Context context = private_context(BackendKind::reference);
                     context.tune().fwd = AlgoPolicy::fixed("onednn:nope");
                     Operands operands(good);
                     operands.call(context, good);
                   }});
  return cases;
}

class ConvFusedBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(ConvFusedBadInput, RaisesKindNamingArgumentAndValue) {
  const BadInput& bad = GetParam();
  try {
    bad.call();
    FAIL() << bad.name << ": no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), bad.kind) << bad.name << ": " << error.what();
    for (const std::string& mention : bad.mentions) {
      EXPECT_NE(std::string(error.what()).find(mention), std::string::npos)
          << bad.name << ": message lacks '" << mention << "': " << error.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ConvFusedBadInput, ::testing::ValuesIn(bad_inputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) {
                           return std::string(info.param.name);
                         });

TEST(ConvFusedBadInput, TableHasAtLeastTenCases) { EXPECT_GE(bad_inputs().size(), 10u); }

// A call through the op layer carries the repro line of the fused desc.
TEST(ConvFusedBadInput, ErrorsCarryTheFusedRepro) {
  Context context = private_context(BackendKind::reference);
  const ConvFusedDesc desc = small_desc();
  Operands operands(desc);
  try {
    conv_fused_fwd(context, desc, operands.operands().src, operands.operands().weights, nullptr,
                   operands.residual(), operands.dst());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().repro, desc.repro());
  }
}

// ---- selection ----------------------------------------------------------------------------------

bool cpu_available() { return backend_available(BackendKind::cpu); }

TEST(ConvFusedPolicy, HeuristicPicksTheFirstSupportedCandidate) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  const ConvFusedDesc desc = small_desc();
  const auto algos = conv_fused_list(context, desc);
  const auto first =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
  ASSERT_NE(first, algos.end());
  const auto choice = conv_fused_select(context, desc);
  EXPECT_EQ(choice->algo.id, first->id);
  EXPECT_EQ(choice->policy.kind, PolicyKind::heuristic);
  Operands operands(desc);
  EXPECT_EQ(operands.call(context, desc)->algo.id, first->id);
}

TEST(ConvFusedPolicy, LowPrecisionRunsOnEveryCpuNativeCandidatesFirst) {
  // Note [candidate order] (src/backends/onednn/conv_list.cpp): native fused implementations,
  // then f32-compute fused ones, then the unfused candidate, then ref:any. Which groups exist
  // depends on the CPU; the f32-compute ones and a runnable unfused candidate exist everywhere.
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  for (const DType dtype : {DType::f16, DType::bf16}) {
    ConvFusedDesc desc = small_desc();
    desc.conv.dtype = dtype;
    const auto algos = conv_fused_list(context, desc);
    int group = 0;
    int f32_compute = 0;
    bool unfused = false;
    for (const AlgoInfo& algo : algos) {
      SCOPED_TRACE(algo.id);
      if (!algo.supported) continue;
      const bool ref = algo.id.starts_with("onednn:ref:");
      const int here = ref                            ? 3
                       : algo.has_note("unfused")     ? 2
                       : algo.has_note("f32_compute") ? 1
                                                      : 0;
      EXPECT_GE(here, group) << "out of order";
      group = std::max(group, here);
      if (here == 1) {
        ++f32_compute;
        EXPECT_TRUE(algo.id.ends_with(":fused:f32"));
        EXPECT_NE(algo.name.find("f32 compute"), std::string::npos) << algo.name;
      }
      if (here == 2) unfused = true;
    }
    EXPECT_GT(f32_compute, 0) << to_string(dtype);
    EXPECT_TRUE(unfused) << to_string(dtype);
  }
}

TEST(ConvFusedPolicy, FixedIdIsHonoured) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  const ConvFusedDesc desc = small_desc();
  for (const AlgoInfo& algo : conv_fused_list(context, desc)) {
    if (!algo.supported) continue;
    Context fixed = context;
    fixed.tune().fwd = AlgoPolicy::fixed(algo.id);
    Operands operands(desc);
    EXPECT_EQ(operands.call(fixed, desc)->algo.id, algo.id);
  }
}

TEST(ConvFusedPolicy, UnsupportedFixedIdNamesTheReasonAndTheValidIds) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  const ConvFusedDesc desc = small_desc();
  context.tune().fwd = AlgoPolicy::fixed("onednn:unavailable:winograd:fused");
  Operands operands(desc);
  try {
    operands.call(context, desc);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    EXPECT_NE(std::string(error.what()).find("winograd"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("valid ids"), std::string::npos) << error.what();
  }
}

TEST(ConvFusedPolicy, ExhaustivePicksATimedCandidate) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  context.tune().fwd = AlgoPolicy::exhaustive();
  context.tune().timing_runs = 2;
  const ConvFusedDesc desc = small_desc();
  Operands operands(desc);
  const auto choice = operands.call(context, desc);
  ASSERT_FALSE(choice->timings.empty());
  EXPECT_EQ(choice->timings.front().status, CandidateStatus::ok);
  EXPECT_EQ(choice->algo.id, choice->timings.front().algo.id);
  EXPECT_TRUE(std::isfinite(choice->time_ms));
  EXPECT_GE(choice->candidates_timed, 2);
  // The choice is cached: the next call does not time again.
  EXPECT_EQ(operands.call(context, desc), choice);
}

TEST(ConvFusedPolicy, ProfileTimesEverySupportedCandidate) {
  if (!cpu_available()) GTEST_SKIP() << "cpu backend not available";
  Context context = private_context(BackendKind::cpu);
  context.tune().timing_runs = 1;
  const ConvFusedDesc desc = small_desc();
  const ProfileResult profile = conv_fused_profile(context, desc);
  EXPECT_EQ(profile.repro, desc.repro());
  EXPECT_EQ(profile.rows.size(), conv_fused_list(context, desc).size());
  EXPECT_FALSE(profile.chosen.empty());
}

TEST(ConvFusedPolicy, CacheKeysDifferFromPlainConvolutionAndBetweenEpilogues) {
  Context context = private_context(BackendKind::reference);
  const ConvFusedDesc desc = small_desc();
  ConvFusedDesc other = desc;
  other.activation = FusedActivation::identity;
  const auto fused = conv_fused_select(context, desc);
  const auto fused_other = conv_fused_select(context, other);
  const auto plain = conv_select(context, desc.conv, Direction::fwd);
  EXPECT_NE(fused->key, plain->key);
  EXPECT_NE(fused->key, fused_other->key);
  EXPECT_NE(fused->key.find("+bias +residual*0.5 relu"), std::string::npos) << fused->key;
  EXPECT_EQ(context.choice_cache()->size(), 3u);
}

TEST(ConvFusedPolicy, ConvolutionsFixedIdGovernsFusedCalls) {
  // TuneOptions::fwd is the policy: a fixed conv id that is not a fused candidate is refused.
  Context context = private_context(BackendKind::reference);
  context.tune().fwd = AlgoPolicy::fixed("reference:direct");
  const ConvFusedDesc desc = small_desc();
  EXPECT_EQ(conv_fused_select(context, desc)->algo.id, "reference:direct");
}

}  // namespace
}  // namespace dnnx::test
