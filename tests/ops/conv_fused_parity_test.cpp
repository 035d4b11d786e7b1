// Parity of every listed cpu candidate of the fused convolution (fused post-op implementations
// and the unfused one) with the reference backend, over the conv_fused case table, through the
// parity runner (support/parity.hpp).
//
// Per case: random inputs in [-1, 1) rounded to the dtype; outputs start as NaN (or, in place, as
// the residual) and are compared elementwise within Note [conv_fused tolerances]. Unsupported
// candidates are counted and each must carry a reason of Note [expected unsupported fused];
// anything else fails. Beyond the runner's checks: every candidate's notes say fused or unfused,
// an unfused candidate is listed, a fused one runs, and f16/bf16 have an f32-compute fused one.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/conv_fused.hpp>

#include "ops/conv_fused_support.hpp"
#include "support/compare.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported fused]: the only reasons a listed cpu candidate may be unsupported.
const std::vector<ExpectedReason<ConvFusedDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ConvFusedDesc>> reasons = {
      // oneDNN implements winograd for few shapes (3x3, stride 1, f32 on some ISAs), with
      // post-ops for fewer still.
      {"onednn: no fused winograd implementation",
       std::regex("^onednn:unavailable:winograd:fused$"),
       std::regex("has no winograd implementation"),
       [](const ConvFusedDesc&, Direction) { return true; }},
      // Native f16/bf16 convolutions exist only on some ISAs (f32-compute candidates run the
      // rest: Note [f32 compute convolution] in src/backends/onednn/conv_list.cpp); f32 has
      // oneDNN's reference everywhere. The unfused candidate always has a convolution to run.
      {"onednn: no native fused direct implementation for f16/bf16",
       std::regex("^onednn:unavailable:direct:fused$"), std::regex("has no direct implementation"),
       [](const ConvFusedDesc& desc, Direction) { return desc.conv.dtype != DType::f32; }},
  };
  return reasons;
}

// A row of the conv_fused table, for the parity runner (forward only).
class ConvFusedParityCase final : public ParityCase {
 public:
  explicit ConvFusedParityCase(const ConvFusedCase& param)
      : param_(param), operands_(random_conv_fused_operands(param.desc, seed_from(param.name))) {}

  OpKind op_kind() const override { return OpKind::conv_fused; }
  std::string label() const override { return param_.name; }
  std::string where(Direction, std::string_view candidate) const override {
    return conv_fused_context(desc(), candidate, param_.in_place);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return conv_fused_list(context, desc(), direction);
  }
  ParityRun run(Context& context, Direction) const override {
    ConvFusedRun run = run_conv_fused(context, desc(), operands_, param_.in_place);
    return {{{"dst", std::move(run.dst)}}, std::move(run.choice)};
  }
  ParityExpected reference(Direction direction) const override {
    ParityExpected expected = ParityCase::reference(direction);
    expected.scale = conv_fused_error_scale(desc(), operands_);
    return expected;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    const Tensor& dst = actual.outputs[0].tensor;
    return close_within_scale(dst.to_f32(), expected.run.outputs[0].tensor.to_f32(), expected.scale,
                              dst.dims(), conv_fused_tolerance(desc().conv.dtype), "dst", where,
                              worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc(), direction, algo) != nullptr;
  }
  void check_listing(BackendKind, Direction direction,
                     const std::vector<AlgoInfo>& algos) const override {
    EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
      return a.id.starts_with("unfused:");
    })) << "no unfused candidate listed";
    for (const AlgoInfo& algo : algos) {
      EXPECT_TRUE(algo.has_note("fused") != algo.has_note("unfused"))
          << "notes must say fused or unfused\n  " << where(direction, algo.id);
    }
    // f32 always has oneDNN's ref:any with post-ops, and f16/bf16 at least its f32-compute
    // variant.
    if (desc().conv.dtype != DType::f32) {
      EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
        return a.supported && a.id.ends_with(":fused:f32");
      })) << "no supported f32-compute fused candidate";
    }
  }
  // So a fused candidate must have run on every CPU.
  void check_after(Context&, Direction, const std::vector<AlgoInfo>& algos,
                   const ParityTally& tally, const ParityExpected&) const override {
    const auto fused = std::count_if(algos.begin(), algos.end(), [&](const AlgoInfo& a) {
      return a.has_note("fused") &&
             std::find(tally.ran_ids.begin(), tally.ran_ids.end(), a.id) != tally.ran_ids.end();
    });
    EXPECT_GT(fused, 0) << "no fused cpu candidate ran";
  }

 private:
  const ConvFusedDesc& desc() const { return param_.desc; }

  const ConvFusedCase& param_;
  ConvFusedOperands operands_;
};

class ConvFusedParity : public ::testing::TestWithParam<ConvFusedCase> {};

std::string case_name(const ::testing::TestParamInfo<ConvFusedCase>& info) {
  return info.param.name;
}

TEST_P(ConvFusedParity, cpu) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend not available: " << why;
  check_parity(ConvFusedParityCase(GetParam()), BackendKind::cpu, Direction::fwd);
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvFusedParity, ::testing::ValuesIn(conv_fused_cases()),
                         case_name);

// The reference's fused candidate against an independent computation (the reference backend's
// convolution in f32, then the epilogue in f64): both round once or twice from nearly the same
// value, so they agree to a unit of the dtype (f32: within 2^-22 of the scale).
class ConvFusedReference : public ::testing::TestWithParam<ConvFusedCase> {};

TEST_P(ConvFusedReference, matches_independent_computation) {
  const ConvFusedCase& param = GetParam();
  const ConvFusedDesc& desc = param.desc;
  const ConvFusedOperands operands = random_conv_fused_operands(desc, seed_from(param.name));
  Context reference(BackendKind::reference);
  const ConvFusedRun run = run_conv_fused(reference, desc, operands, param.in_place);
  EXPECT_EQ(run.choice->algo.id, "reference:direct");
  const std::string context = conv_fused_context(desc, "reference:direct", param.in_place);
  ASSERT_TRUE(all_finite(run.dst, "dst", context));
  Tolerance tolerance;
  switch (desc.conv.dtype) {
    case DType::f32: tolerance = {0x1.0p-22, 0.0}; break;
    case DType::f16: tolerance = {0x1.0p-10, 0x1.0p-24}; break;
    default: tolerance = {0x1.0p-7, 0.0}; break;
  }
  EXPECT_TRUE(close_within_scale(run.dst.to_f32(), independent_conv_fused(desc, operands),
                                 conv_fused_error_scale(desc, operands), run.dst.dims(), tolerance,
                                 "dst", context));
  // Deterministic: a second run gives the same bits.
  const ConvFusedRun again = run_conv_fused(reference, desc, operands, param.in_place);
  EXPECT_TRUE(bitwise_equal(run.dst, again.dst, "dst", context));
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvFusedReference, ::testing::ValuesIn(conv_fused_cases()),
                         case_name);

}  // namespace
}  // namespace dnnx::test
