#pragma once
// THE matmul case table (STYLE.md "Tests"): linear layers with and without bias, every
// transpose combination, batched products with and without a shared b, sizes 1 and odd sizes,
// scales with beta = 0 (the output is not read), 1 (accumulation) and others, relu and gelu
// epilogues (n a multiple of 8 and not), in every dtype.
// Also the inputs of a case, the tolerance and the comparison every matmul test shares.

#include <dnnx/ops/matmul.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct MatmulCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique: <shape>_<scales>_<dtype>
  MatmulDesc desc;
};

/// Every shape x {f32, f16, bf16}, with its scales.
std::vector<MatmulCase> matmul_cases();

/// The seeded inputs of a case (host, dense, desc.dtype) and what each output holds before a
/// call: random values to accumulate onto, or NaN when beta = 0 (it must not be read). With an
/// activation, `state` is what the reference backend's fwd_training keeps (on the host), which
/// every backward reads, so that all candidates differentiate at the same pre.
struct MatmulInputs {
  Tensor a, b, bias, diff_dst;
  Tensor dst0, diff_a0, diff_b0, diff_bias0;
  SavedState state;
};
MatmulInputs matmul_inputs(const MatmulDesc& desc, std::string_view seed);

/// Host copies of every output of a direction, started from `inputs`' initial values:
/// "dst" (fwd, fwd_training), "diff_a" (bwd_data), "diff_b" and, with a bias, "diff_bias"
/// (bwd_weights); run_matmul adds "pre" to fwd_training with gelu (the state, as a tensor).
struct MatmulOutputs {
  std::vector<std::pair<std::string, Tensor>> tensors;
};
MatmulOutputs matmul_outputs(const MatmulDesc& desc, Direction direction,
                             const MatmulInputs& inputs);

/// Runs `direction` on `context` (host tensors: reference and cpu backends), writing `outputs`;
/// a backward with an activation reads inputs.state.
std::shared_ptr<const Choice> run_matmul(Context& context, const MatmulDesc& desc,
                                         Direction direction, const MatmulInputs& inputs,
                                         MatmulOutputs& outputs);

/// Fails unless every output is finite and within the dtype's bound of the reference's (Note
/// [matmul tolerances] in matmul_cases.cpp). `worst` gets the largest error / bound.
::testing::AssertionResult matmul_close(const MatmulDesc& desc, Direction direction,
                                        const MatmulOutputs& actual,
                                        const MatmulOutputs& expected, const MatmulInputs& inputs,
                                        std::string_view context, double* worst = nullptr);

/// Failure context: op, direction, candidate id, the desc and its `dnnx` reproduction line.
std::string matmul_context(const MatmulDesc& desc, Direction direction,
                           std::string_view candidate);

}  // namespace dnnx::test
