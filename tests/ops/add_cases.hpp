#pragma once
// THE tensor-add case table (STYLE.md "Tests"): every broadcast pattern (none, bias 1xCx1x1,
// 1xCxHxW, 1x1xHxW, scalar, along N only, mixed), ranks 1 to 5, odd sizes and batch 1, in every
// dtype and both layouts, with scales that include beta = 0 (dst not read). Also the tolerance
// and the comparison every add test shares.

#include <dnnx/ops/add.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct AddCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique: <pattern>_<scales>_<dtype>_<layout>
  AddDesc desc;
};

/// Every pattern x {f32, f16, bf16} x {nchw, nhwc}, the scales (1, 1), (0.5, -2), (2, 0)
/// rotating through them.
std::vector<AddCase> add_cases();

/// The reference backend's forward pass: alpha * broadcast(src) + beta * `dst` (a fresh tensor;
/// `dst` is left alone).
Tensor reference_add_fwd(const AddDesc& desc, const Tensor& src, const Tensor& dst);
/// The reference backend's backward pass (a fresh tensor).
Tensor reference_add_bwd(const AddDesc& desc, const Tensor& diff_dst);

/// Fails unless `actual` is finite and within the dtype's bound of `expected` (Note [add
/// tolerances] in add_cases.cpp): forward relative to |alpha src| + |beta dst| per element,
/// backward relative to |alpha| times the sum of |diff_dst| behind each element. `worst` gets the
/// largest error / bound.
::testing::AssertionResult add_close(const AddDesc& desc, Direction direction, const Tensor& actual,
                                     const Tensor& expected, const Tensor& src, const Tensor& dst,
                                     const Tensor& diff_dst, std::string_view context,
                                     double* worst = nullptr);

/// Failure context: op, direction, candidate id, the desc and its `dnnx` reproduction line.
std::string add_context(const AddDesc& desc, Direction direction, std::string_view candidate);

}  // namespace dnnx::test
