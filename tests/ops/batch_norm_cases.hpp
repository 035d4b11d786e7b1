#pragma once
// The batch-norm case table and what the tests of every backend share: seeded inputs, running a
// forward or a backward on any context (host or device), error scales and tolerances, and the
// comparison of a candidate's outputs with the reference's.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/batch_norm.hpp>
#include <dnnx/tensor.hpp>

#include "support/compare.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table: a name (stable, used as the seed) and the desc.
struct BatchNormCase {
  std::string name;
  BatchNormDesc desc;
};

/// gtest prints parameters on failure; the default would be a byte dump.
void PrintTo(const BatchNormCase& param, std::ostream* out);

/// "4x5x7x9_spatial_train_affine_f32_nchw" style name of a desc.
std::string batch_norm_case_name(const BatchNormDesc& desc);

/// The table: ranks 2 to 5 (1-D to 3-D spatial), batch 1, odd sizes, both modes, both layouts,
/// every dtype, affine on and off, training and inference. Every desc is valid.
std::vector<BatchNormCase> batch_norm_cases();

/// Host inputs of a case, all dense: src and diff_dst (desc.dtype, desc.layout) and the f32
/// parameters (param_dims, laid out as the op expects). src in [-1, 3) (a mean away from 0),
/// diff_dst in [-1, 1), scale in [0.5, 1.5), shift in [-1, 1), running_mean in [-0.5, 0.5),
/// running_var in [0.5, 1.5); reproducible from `seed`.
struct BatchNormInputs {
  Tensor src, diff_dst, scale, shift, running_mean, running_var;
};
BatchNormInputs batch_norm_inputs(const BatchNormDesc& desc, std::uint64_t seed);

/// A dense host tensor of the desc's parameter shape holding `values` (logical order).
Tensor batch_norm_param(const BatchNormDesc& desc, const std::vector<float>& values);

/// What a forward leaves (host tensors): dst; the running statistics after the call (copies of
/// the inputs', updated in training); the saved statistics (training; empty otherwise).
struct BatchNormFwdResult {
  Tensor dst, running_mean, running_var, saved_mean, saved_inv_std;
  std::shared_ptr<const Choice> choice;
};
/// Runs batch_norm_fwd on `context` (data copied to its device and back) with every optional
/// tensor given; outputs start as NaN so that unwritten elements fail the finiteness check.
BatchNormFwdResult run_batch_norm_fwd(Context& context, const BatchNormDesc& desc,
                                      const BatchNormInputs& inputs);

/// What a backward leaves (host tensors); diff_scale / diff_shift are empty without affine.
struct BatchNormBwdResult {
  Tensor diff_src, diff_scale, diff_shift;
  std::shared_ptr<const Choice> choice;
};
/// Runs batch_norm_bwd on `context`; training reads `saved_mean` / `saved_inv_std` (host tensors,
/// usually the reference forward's), inference the inputs' running statistics.
BatchNormBwdResult run_batch_norm_bwd(Context& context, const BatchNormDesc& desc,
                                      const BatchNormInputs& inputs, const Tensor& saved_mean,
                                      const Tensor& saved_inv_std);

/// Per-dtype bounds relative to each element's error scale (Note [batch-norm tolerances] in
/// batch_norm_cases.cpp): `data` for dst and diff_src, `stats` for the f32 statistics and sums.
struct BatchNormTolerance {
  Tolerance data;
  Tolerance stats;
};
BatchNormTolerance batch_norm_tolerance(DType dtype);

/// Compares a candidate's forward with the reference's (NaN/Inf first, then every output within
/// tolerance of its scale). `worst` receives the largest error / bound ratio seen.
::testing::AssertionResult compare_batch_norm_fwd(
    const BatchNormDesc& desc, const BatchNormInputs& inputs, const BatchNormFwdResult& expected,
    const BatchNormFwdResult& actual, std::string_view context, double* worst = nullptr);
/// The same for a backward; `saved_*` are the statistics the backward was given.
::testing::AssertionResult compare_batch_norm_bwd(
    const BatchNormDesc& desc, const BatchNormInputs& inputs, const Tensor& saved_mean,
    const Tensor& saved_inv_std, const BatchNormBwdResult& expected,
    const BatchNormBwdResult& actual, std::string_view context, double* worst = nullptr);
/// Fails unless every output of the two runs is bitwise identical.
::testing::AssertionResult bitwise_equal_fwd(const BatchNormFwdResult& first,
                                             const BatchNormFwdResult& second,
                                             std::string_view context);
::testing::AssertionResult bitwise_equal_bwd(const BatchNormBwdResult& first,
                                             const BatchNormBwdResult& second,
                                             std::string_view context);

/// Failure context: direction, candidate, the desc and its `dnnx` reproduction line.
std::string batch_norm_context(const BatchNormDesc& desc, Direction direction,
                               std::string_view candidate);

/// A context on `backend` with a private memory-only choice cache whose batch-norm policy for
/// `direction` is fixed:`id` (empty id: heuristic).
Context batch_norm_context_with(BackendKind backend, Direction direction,
                                const std::string& id = {});

}  // namespace dnnx::test
