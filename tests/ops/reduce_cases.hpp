#pragma once
// THE case tables of the reduction ops (STYLE.md "Tests"): reduce (every kind over none, all,
// inner, outer and mixed axes, ranks 1 to 5, odd sizes, a long group, in every dtype and both
// layouts), argmax (each axis position, i32 and i64 indices) and accuracy (top-1 and top-k,
// spatial positions, accumulation, i32 and i64 labels and counts). Their inputs (with ties, which
// the tie rules are about), the reference's answers, and the comparison every test shares.

#include <dnnx/ops/accuracy.hpp>
#include <dnnx/ops/argmax.hpp>
#include <dnnx/ops/reduce.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the reduce table.
struct ReduceCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique: <pattern>_<kind>_<dtype>_<layout>
  ReduceDesc desc;
};
/// Every pattern x {f32, f16, bf16} x {nchw, nhwc}, the kinds rotating through them so that each
/// kind meets every sort of axis set.
std::vector<ReduceCase> reduce_cases();

/// One row of the argmax table.
struct ArgmaxCase {
  std::string name;
  ArgmaxDesc desc;
};
std::vector<ArgmaxCase> argmax_cases();

/// One row of the accuracy table.
struct AccuracyCase {
  std::string name;
  AccuracyDesc desc;
};
std::vector<AccuracyCase> accuracy_cases();

/// The inputs of a reduce case, on the host, from the case name: src (values from a small set for
/// max and min, so that groups hold ties), diff_dst, and dst = the reference's forward on src.
struct ReduceInputs {
  Tensor src, dst, diff_dst;
};
ReduceInputs reduce_inputs(const ReduceDesc& desc, std::string_view name);

/// Logits whose values come from a small set of exactly representable numbers (ties in every
/// dtype), dense in `layout`.
Tensor tied_tensor(const Dims& dims, DType dtype, Layout layout, std::uint64_t seed);
/// Host labels of `dims` in `dtype` uniform in [0, classes), one in five `ignore_index`.
Tensor random_label_tensor(const Dims& dims, DType dtype, std::int64_t classes,
                           std::int64_t ignore_index, std::uint64_t seed);
/// A host count tensor {1} of `dtype` (i64 or f32) holding `value`.
Tensor count_tensor(DType dtype, std::int64_t value);
/// The value of a host count tensor.
double count_value(const Tensor& count);

/// The reference backend's answers (fresh host tensors).
Tensor reference_reduce_fwd(const ReduceDesc& desc, const Tensor& src);
Tensor reference_reduce_bwd(const ReduceDesc& desc, const ReduceInputs& inputs);

/// Fails unless `actual` is finite and within the dtype's bound of `expected` (Note [reduce
/// tolerances] in reduce_cases.cpp); `worst` gets the largest error / bound.
::testing::AssertionResult reduce_close(const ReduceDesc& desc, Direction direction,
                                        const Tensor& actual, const Tensor& expected,
                                        const ReduceInputs& inputs, std::string_view context,
                                        double* worst = nullptr);

/// Failure context: op, direction, candidate id, the desc and its `dnnx` reproduction line.
template <typename Desc>
std::string op_case_context(std::string_view op, const Desc& desc, Direction direction,
                            std::string_view candidate) {
  return std::string(op) + " " + std::string(to_string(direction)) + " [" + std::string(candidate) +
         "] " + desc.key() + "\n  repro: " + desc.repro(direction);
}

}  // namespace dnnx::test
