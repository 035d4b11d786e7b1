#pragma once
// The fused-convolution case table and the helpers its tests share (CPU parity, the GPU test):
// random operands, a run on host tensors, the per-element error scale and the tolerance.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv_fused.hpp>
#include <dnnx/tensor.hpp>

#include "support/compare.hpp"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct ConvFusedCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique
  ConvFusedDesc desc;
  bool in_place = false;  ///< the residual is dst itself
};

/// gtest's printer for a case (the default would be a byte dump).
void PrintTo(const ConvFusedCase& param,  // NOLINT(readability-identifier-naming): gtest's name
             std::ostream* out);

/// Every epilogue combination (none, bias, residual, residual_scale != 1, relu / identity), in
/// place and not, over 1/2/3-D, groups, depthwise, stride, dilation, asymmetric padding, odd
/// sizes and batch 1, in f32, f16 and bf16 and both layouts. Small enough that every cpu
/// candidate of every case runs in seconds.
std::vector<ConvFusedCase> conv_fused_cases();

/// The inputs of a call, host tensors dense in the desc's layout (bias: rank 1); bias and
/// residual are null unless the desc asks for them.
struct ConvFusedOperands {
  Tensor src, weights, bias, residual;
};

/// Operands uniform in [-1, 1) rounded to the dtype, reproducible from `seed`.
ConvFusedOperands random_conv_fused_operands(const ConvFusedDesc& desc, std::uint64_t seed);

/// A dense host copy of `tensor` (same dtype and layout).
Tensor host_copy(const Tensor& tensor);

/// dst and the choice that produced it.
struct ConvFusedRun {
  Tensor dst;
  std::shared_ptr<const Choice> choice;
};

/// Runs conv_fused_fwd on a host context with its current TuneOptions. dst starts as all-NaN, or
/// `in_place` as a copy of the residual that is also passed as the residual.
ConvFusedRun run_conv_fused(Context& context, const ConvFusedDesc& desc,
                            const ConvFusedOperands& operands, bool in_place);

/// The reference result computed independently of the reference backend's fused candidate:
/// dnnx::conv_fwd on the reference backend in f32 (the inputs are exact in f32), then the
/// epilogue in f64, rounded to the dtype (twice: f64 -> f32 -> dtype). Logical order.
std::vector<float> independent_conv_fused(const ConvFusedDesc& desc,
                                          const ConvFusedOperands& operands);

/// Per element: sum |x||w| of the convolution + |bias| + |residual_scale * residual|. Errors of a
/// correct implementation are proportional to it whatever the cancellation.
std::vector<float> conv_fused_error_scale(const ConvFusedDesc& desc,
                                          const ConvFusedOperands& operands);

/// The error bound relative to conv_fused_error_scale(): Note [conv_fused tolerances].
Tolerance conv_fused_tolerance(DType dtype);

/// Failure context: candidate, desc, whether in place, and the `dnnx` reproduction line.
std::string conv_fused_context(const ConvFusedDesc& desc, std::string_view candidate,
                               bool in_place);

}  // namespace dnnx::test
