#pragma once
// The cross-entropy case table (shared by the parity, reference, oracle and GPU tests), its
// inputs, and the helpers that run a case and bound its rounding error.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "support/compare.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct XentCase {
  std::string name;  ///< unique, usable as a gtest name
  CrossEntropyDesc desc;
  float magnitude = 4;     ///< logits uniform in [-magnitude, magnitude)
  double ignored = 0.125;  ///< fraction of positions labelled ignore_index
};

/// Shapes (batch 1, odd C, C = 1, C above the warp kernel's 2048, 1-D to 3-D spatial) x
/// reduction x weights x label dtype x layout x ignore_index (PyTorch's -100, a class index, a
/// value above C), logits of magnitude 1e4, and a batch whose every position is ignored (mean is
/// NaN). f32; the parity tests run each in every dtype.
std::vector<XentCase> xent_cases();

CrossEntropyDesc with_dtype(CrossEntropyDesc desc, DType dtype);

/// The inputs of a case, on the host, reproducible from its name: logits dense in the desc's
/// layout, labels (label_dtype, row-major; `ignored` of them ignore_index), class weights in
/// [0.25, 2) when weighted, and diff_loss in [0.5, 1.5) (dims of the loss).
struct XentInputs {
  Tensor logits;
  Tensor labels;
  Tensor weights;  ///< null unless desc.weighted
  Tensor diff_loss;
  const Tensor* weights_or_null() const { return weights.is_null() ? nullptr : &weights; }
};
XentInputs xent_inputs(const XentCase& c, const CrossEntropyDesc& desc);

/// Labels as int64 in logical order.
std::vector<std::int64_t> labels_of(const Tensor& labels);

/// A host tensor of label_dtype holding `values` (written as integers, exactly).
Tensor labels_tensor(const Dims& dims, DType label_dtype, const std::vector<std::int64_t>& values);

/// Runs the forward (loss) or backward (diff_logits) of `context` into a new NaN-filled output.
struct XentRun {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};
XentRun run_xent(Context& context, const CrossEntropyDesc& desc, Direction direction,
                 const XentInputs& inputs);

/// Error scales (f64 loops, independent of every backend): forward: w * (|lse| + |x_y|) per
/// position, summed (and divided by the weight total) for mean / sum; backward: |g| * (p +
/// onehot) per element.
std::vector<float> xent_forward_scale(const CrossEntropyDesc& desc, const XentInputs& inputs);
std::vector<float> xent_backward_scale(const CrossEntropyDesc& desc, const XentInputs& inputs);

/// The bound for an output of `dtype` relative to those scales (Note [xent tolerances]).
Tolerance xent_tolerance(DType dtype);

/// "xent fwd [<id>] <desc> | <repro>" for failure messages.
std::string xent_context(const CrossEntropyDesc& desc, Direction direction,
                         const std::string& candidate);

/// A context on `backend` with a private memory-only choice cache and `policy` for the
/// direction's cross-entropy calls.
Context xent_context_for(BackendKind backend, Direction direction, const AlgoPolicy& policy);

/// NaN-aware check: elements where `expected` is NaN must be NaN, the others finite and within
/// the bound.
::testing::AssertionResult xent_close(const Tensor& actual, const std::vector<float>& expected,
                                      const std::vector<float>& scale, const Dims& dims,
                                      const Tolerance& tolerance, const std::string& where);

}  // namespace dnnx::test
