// Parity of every listed cpu candidate of the fused convolution (fused post-op implementations
// and the unfused one) with the reference backend, over the conv_fused case table.
//
// Per case: random inputs in [-1, 1) rounded to the dtype go through the reference (the oracle),
// then through each candidate of conv_fused_list() with the conv forward policy fixed to its id.
// Outputs start as NaN (or, in place, as the residual) and are checked for NaN/Inf first, then
// |candidate - reference| <= tol * scale elementwise (Note [conv_fused tolerances]). Candidates
// that claim determinism run twice and must agree bitwise. Unsupported candidates are counted and
// each must carry a reason of Note [expected unsupported fused]; anything else fails.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/conv_fused.hpp>

#include "ops/conv_fused_support.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>
#include <sstream>

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

class ConvFusedParity : public ::testing::TestWithParam<ConvFusedCase> {};

std::string case_name(const ::testing::TestParamInfo<ConvFusedCase>& info) {
  return info.param.name;
}

TEST_P(ConvFusedParity, cpu) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend not available: " << why;
  const ConvFusedCase& param = GetParam();
  const ConvFusedDesc& desc = param.desc;
  const ConvFusedOperands operands = random_conv_fused_operands(desc, seed_from(param.name));

  Context reference(BackendKind::reference);
  const ConvFusedRun expected = run_conv_fused(reference, desc, operands, param.in_place);
  ASSERT_TRUE(all_finite(expected.dst, "reference dst",
                         conv_fused_context(desc, "reference:direct", param.in_place)));
  const std::vector<float> expected_values = expected.dst.to_f32();
  const std::vector<float> scale = conv_fused_error_scale(desc, operands);
  const Tolerance tolerance = conv_fused_tolerance(desc.conv.dtype);

  Context base(BackendKind::cpu);
  base.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<AlgoInfo> algos = conv_fused_list(base, desc);
  ASSERT_FALSE(algos.empty());
  EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
    return a.id.starts_with("unfused:");
  })) << "no unfused candidate listed";

  std::ostringstream summary;
  int ran = 0, unsupported = 0, fused = 0;
  double worst = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string context = conv_fused_context(desc, algo.id, param.in_place);
    const bool is_fused =
        std::find(algo.notes.begin(), algo.notes.end(), "fused") != algo.notes.end();
    const bool is_unfused =
        std::find(algo.notes.begin(), algo.notes.end(), "unfused") != algo.notes.end();
    EXPECT_TRUE(is_fused != is_unfused) << "notes must say fused or unfused\n  " << context;
    if (!algo.supported) {
      ++unsupported;
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_NE(unsupported_category(expected_reasons(), desc, Direction::fwd, algo), nullptr)
          << "unsupported for a reason not in Note [expected unsupported fused]: \"" << algo.reason
          << "\"\n  " << context;
      continue;
    }
    Context fixed = base;
    fixed.tune().fwd = AlgoPolicy::fixed(algo.id);
    const auto start = std::chrono::steady_clock::now();
    ConvFusedRun run;
    try {
      run = run_conv_fused(fixed, desc, operands, param.in_place);
    } catch (const Error& error) {
      ADD_FAILURE() << "supported candidate threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++ran;
    if (is_fused) ++fused;
    EXPECT_EQ(run.choice->algo.id, algo.id)
        << "a fixed policy ran another candidate\n  " << context;
    if (!all_finite(run.dst, "dst", context)) {
      ADD_FAILURE() << all_finite(run.dst, "dst", context).message();
      continue;
    }
    double ratio = 0;
    EXPECT_TRUE(close_within_scale(run.dst.to_f32(), expected_values, scale, run.dst.dims(),
                                   tolerance, "dst", context, &ratio));
    worst = std::max(worst, ratio);
    summary << "\n    ran  " << algo.id << " (" << ms << " ms, error " << ratio << " of the bound)";
    if (algo.deterministic) {
      const ConvFusedRun again = run_conv_fused(fixed, desc, operands, param.in_place);
      EXPECT_TRUE(bitwise_equal(run.dst, again.dst, "dst", context));
    }
  }
  // f32 always has oneDNN's ref:any with post-ops, and f16/bf16 at least its f32-compute
  // variant, so a fused candidate must have run on every CPU.
  EXPECT_GT(fused, 0) << "no fused cpu candidate ran";
  if (desc.conv.dtype != DType::f32) {
    EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
      return a.supported && a.id.ends_with(":fused:f32");
    })) << "no supported f32-compute fused candidate";
  }
  RecordProperty("candidates", static_cast<int>(algos.size()));
  RecordProperty("candidates_run", ran);
  RecordProperty("candidates_unsupported", unsupported);
  std::cout << "[ parity   ] cpu " << param.name << ": " << ran << " ran (" << fused << " fused), "
            << unsupported << " unsupported, worst error " << worst << " of the bound"
            << summary.str() << "\n";
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
