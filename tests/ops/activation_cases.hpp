#pragma once
// THE activation case table (STYLE.md "Tests"): every kind (and its parameters' edge values) in
// every dtype and both layouts, over 1-D to 3-D shapes with odd sizes and batch 1. Also the inputs
// the tests feed, the per-dtype tolerance, and the comparison every test shares.

#include <dnnx/ops/activation.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct ActivationCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique: <kind>[_param]_<shape>_<dtype>_<layout>
  ActivationDesc desc;
};

/// Each kind variant (identity, relu, clipped_relu ceiling 0.5 and 6, tanh, sigmoid, elu alpha 1,
/// 0.5 and -0.5, swish) in f32, f16, bf16 x nchw, nhwc, the shapes rotating through rank 1 to 5
/// (1-D to 3-D spatial), odd sizes and batch 1.
std::vector<ActivationCase> activation_cases();

/// src for `desc`: uniform in [-3, 3) with exact kinks at fixed positions (0, -0, and for clipped
/// relu the ceiling, values just around it), rounded to desc.dtype, dense in desc.layout.
Tensor activation_src(const ActivationDesc& desc, std::uint64_t seed);

/// The reference backend's forward pass of `src` (a fresh tensor).
Tensor reference_activation_fwd(const ActivationDesc& desc, const Tensor& src);

/// The reference backend's backward pass with what desc.saved keeps (a fresh tensor).
Tensor reference_activation_bwd(const ActivationDesc& desc, const Tensor& src, const Tensor& dst,
                                const Tensor& diff_dst);

/// Fails unless every element of `actual` is finite where `expected` is, and
///   |actual - expected| <= rel * |expected| + abs * m * w,
/// with w = 1 forward and |diff_dst| backward, m = max(1, |alpha|) for elu, else 1; rel and abs
/// are the dtype's (Note [activation tolerances] in activation_cases.cpp). `worst` receives the
/// largest error / bound seen.
::testing::AssertionResult activation_close(const ActivationDesc& desc, Direction direction,
                                            const Tensor& actual, const Tensor& expected,
                                            const Tensor* diff_dst, std::string_view context,
                                            double* worst = nullptr);

/// Failure context: op, direction, candidate id, the desc and its `dnnx` reproduction line.
std::string activation_context(const ActivationDesc& desc, Direction direction,
                               std::string_view candidate);

/// A copy of `tensor` (same dims, dtype and layout) in fresh memory.
Tensor clone(const Tensor& tensor);

}  // namespace dnnx::test
