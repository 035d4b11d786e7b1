#pragma once
// The softmax case table (shared by the parity, reference, oracle and GPU tests) and the helpers
// that run a case and bound its rounding error.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "support/compare.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct SoftmaxCase {
  std::string name;  ///< unique, usable as a gtest name
  SoftmaxDesc desc;
  float magnitude = 4;  ///< inputs are uniform in [-magnitude, magnitude)
};

/// Every combination the table covers: shapes (batch 1, odd C, C = 1, C above the warp kernel's
/// 1024, 1-D to 3-D spatial) x mode x log x layout, in f32; the parity tests run each in every
/// dtype. Includes "large" rows with logits of magnitude 1e4.
std::vector<SoftmaxCase> softmax_cases();

/// `desc` with another dtype.
SoftmaxDesc with_dtype(SoftmaxDesc desc, DType dtype);

/// The src of a case: uniform in [-magnitude, magnitude), rounded to the dtype, dense in the
/// desc's layout, reproducible from the case name.
Tensor softmax_src(const SoftmaxCase& c, const SoftmaxDesc& desc);
/// A diff_dst for the backward pass: uniform in [-1, 1).
Tensor softmax_diff_dst(const SoftmaxCase& c, const SoftmaxDesc& desc);

/// Runs the forward (or the backward on `dst`, `diff_dst`) of `context` into a new NaN-filled
/// output; returns it with the choice that ran.
struct SoftmaxRun {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};
SoftmaxRun run_softmax(Context& context, const SoftmaxDesc& desc, Direction direction,
                       const Tensor& src_or_dst, const Tensor* diff_dst = nullptr);

/// Per-element error scales: forward: |y| (softmax) or |y| + 1 (log-softmax); backward: the
/// formula on absolute values, |y| * (|dy| + sum |dy * y|) or |dy| + exp(y) * sum |dy|. Inputs in
/// logical order; f64 loops (independent of every backend).
std::vector<float> softmax_forward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst);
std::vector<float> softmax_backward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst,
                                          const std::vector<float>& diff_dst);

/// The bound for an output of `dtype` relative to those scales (Note [softmax tolerances]).
Tolerance softmax_tolerance(DType dtype);

/// "softmax fwd <id> | <repro>" for failure messages.
std::string softmax_context(const SoftmaxDesc& desc, Direction direction,
                            const std::string& candidate);

/// A context on `backend` with a private memory-only choice cache and `policy` for the
/// direction's softmax calls.
Context softmax_context_for(BackendKind backend, Direction direction, const AlgoPolicy& policy);

}  // namespace dnnx::test
