#pragma once
/// \file
/// Cross-entropy loss: log-softmax over the channel axis and the negative log-likelihood of the
/// label at every position, forward and backward. Plain N x C logits are PyTorch's
/// cross_entropy; N x C x spatial logits are cudnn.torch's SpatialCrossEntropyCriterion /
/// VolumetricCrossEntropyCriterion (one label per spatial position).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// How the per-position losses are combined.
enum class Reduction : std::uint8_t {
  none,  ///< one loss per position: dims N[, spatial...]
  mean,  ///< sum(w[y_i] * nll_i) / sum(w[y_i]) over the positions not ignored (dims {1})
  sum,   ///< sum(w[y_i] * nll_i) over the positions not ignored (dims {1})
};
/// "none", "mean", "sum".
std::string_view to_string(Reduction reduction);
/// Parses the names above; throws InvalidArgument listing them.
Reduction parse_reduction(std::string_view text);

/// What a cross-entropy computes. Plain data: comparable, hashable, printable; it is the cache
/// key, the error context and the test-case name. With p = softmax over the C channels of a
/// position i holding label y_i:
///   nll_i = -log p[y_i];  loss_i = w[y_i] * nll_i  (w = 1 when not weighted)
/// A position whose label equals ignore_index contributes nothing (loss_i = 0, no gradient, no
/// weight in the mean). Mean of nothing is NaN (0/0, as PyTorch). Every label must be
/// ignore_index or in [0, C): anything else is an InvalidArgument naming the position and value.
/// Computation is in f32 or wider whatever the dtype, stable for logits of any magnitude.
struct CrossEntropyDesc {
  Dims dims;                               ///< logits: N, C, spatial... (rank 2 to 5), elements
  Reduction reduction = Reduction::mean;   ///< none, mean or sum
  std::int64_t ignore_index = -100;        ///< label value that marks a position as ignored
  bool weighted = false;                   ///< per-class weights are given (f32, dims {C})
  DType label_dtype = DType::i64;          ///< dtype of labels: i32 or i64
  DType dtype = DType::f32;                ///< dtype of logits, loss and their gradients
  Layout layout = Layout::channels_first;  ///< memory order of logits and diff_logits

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;

  // The shapes check `dims` first: InvalidArgument naming them when they are out of range (a desc
  // that was never validated), never a negative size.
  std::int64_t classes() const;    ///< C
  std::int64_t positions() const;  ///< N * D * H * W: labels (and per-position losses)
  Dims labels_dims() const;        ///< N, spatial... (dense row-major, label_dtype)
  Dims loss_dims() const;          ///< labels_dims() for none, {1} for mean and sum
  Dims weights_dims() const;       ///< {C}

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile xent --input 64x1000 --reduction mean --dtype f32 --layout nchw --direction
  /// fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const CrossEntropyDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const CrossEntropyDesc& desc);

/// loss = cross-entropy of `logits` (desc.dims, desc.dtype, dense desc.layout) against `labels`
/// (desc.labels_dims(), desc.label_dtype, dense row-major), with class `weights` (f32 {C}) when
/// desc.weighted (null otherwise). `loss` has desc.loss_dims() and desc.dtype and must not
/// overlap the inputs. Returns the choice that ran.
/// Out-of-range labels: host backends raise during the call; the cudnn backend's kernels record
/// the first one and a later call of the same (desc, direction, candidate) raises, see
/// docs/ops/cross_entropy.md; the loss of such a call holds NaN.
std::shared_ptr<const Choice> cross_entropy_fwd(Context& context, const CrossEntropyDesc& desc,
                                                const Tensor& logits, const Tensor& labels,
                                                const Tensor* weights, Tensor& loss);
/// diff_logits = gradient of the loss w.r.t. logits given diff_loss (dims and dtype of the
/// loss): w[y_i] * g_i * (softmax_i - onehot(y_i)) where g_i is diff_loss[i] (none), diff_loss[0]
/// (sum) or diff_loss[0] / sum of w[y] (mean); zero at ignored positions. diff_logits has the
/// logits' dims, dtype and layout and must not overlap any input. Returns the choice that ran.
std::shared_ptr<const Choice> cross_entropy_bwd(Context& context, const CrossEntropyDesc& desc,
                                                const Tensor& logits, const Tensor& labels,
                                                const Tensor* weights, const Tensor& diff_loss,
                                                Tensor& diff_logits);

/// Every candidate of the context's backend for (desc, direction) — fwd or bwd_data (the
/// backward pass) — with support status, workspace and determinism; nothing is run.
std::vector<AlgoInfo> cross_entropy_list(Context& context, const CrossEntropyDesc& desc,
                                         Direction direction);
/// The choice the context's policy (TuneOptions::policy(OpKind::cross_entropy, direction)) makes.
std::shared_ptr<const Choice> cross_entropy_select(Context& context, const CrossEntropyDesc& desc,
                                                   Direction direction);
/// Times every candidate on scratch tensors (valid labels, some ignored) and returns the table.
ProfileResult cross_entropy_profile(Context& context, const CrossEntropyDesc& desc,
                                    Direction direction);

}  // namespace dnnx
