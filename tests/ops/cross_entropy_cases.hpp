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
  float magnitude = 4;  ///< each logit is one of `centers` plus uniform in [-magnitude, magnitude)
  std::vector<float> centers{0.0f};  ///< drawn at random for each logit
  double ignored = 0.125;            ///< fraction of positions labelled ignore_index

  /// The largest |logit| the case can draw (before rounding to a dtype).
  float largest() const;
  /// Whether the loss is held to Note [xent large-logit tolerance]: logits clustered near a
  /// center of magnitude 1e3 or more (Note [large-logit rows] in softmax_cases.cpp).
  bool clustered_large() const;
};

/// Shapes (batch 1, odd C, C = 1, C above the warp kernel's 2048, 1-D to 3-D spatial) x
/// reduction x weights x label dtype x layout x ignore_index (PyTorch's -100, a class index, a
/// value above C), logits of magnitude 1e4, a batch whose every position is ignored (mean is
/// NaN), and logits clustered near +-1e4 / +-1e5. f32; the parity tests run each in every dtype
/// that represents its logits.
std::vector<XentCase> xent_cases();

/// Whether every logit of `c` is finite in `dtype` (f16 stops at 65504).
bool representable(const XentCase& c, DType dtype);

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

/// What a parity test compares an output with: per-element scales and the bound relative to them.
struct XentBound {
  std::vector<float> scale;
  Tolerance tolerance;
};
/// The f32 ulps (of max(1, |log p|) per position) by which candidate `algo`'s log-probabilities
/// may miss the exact ones on logits of any magnitude (Note [xent large-logit tolerance]).
double xent_large_logit_ulps(const AlgoInfo& algo);
/// The forward (loss) bound of candidate `algo` on case `c` in `desc`'s dtype: Note [xent
/// large-logit tolerance] for clustered_large() rows, Note [xent tolerances] otherwise.
XentBound xent_forward_bound(const XentCase& c, const CrossEntropyDesc& desc,
                             const XentInputs& inputs, const AlgoInfo& algo);

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
