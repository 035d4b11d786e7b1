#pragma once
/// \file
/// Top-k accuracy count: how many positions of a batch of logits rank their label among the k
/// largest classes, written to (or added into) a one-element device tensor, so that a training
/// loop counts an epoch's correct predictions without copying anything to the host per batch.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {

/// What an accuracy count computes. Plain data: comparable, hashable, printable; it is the cache
/// key, the error context and the test-case name. Logits and labels are shaped as
/// CrossEntropyDesc takes them: logits N x C[ x spatial...] (class axis 1), one label per
/// position (N[ x spatial...]). With x the logits of a position and y its label, the label's rank
/// is #{c : x_c > x_y} + #{c < y : x_c == x_y} (NaN counts as larger than every number and equal
/// to NaN): its place in a stable descending sort. The position is correct when rank < top_k;
/// with top_k = 1 that is argmax(x) == y with ties to the first index (torch.argmax). Positions
/// whose label is ignore_index count neither way.
///   count = number of correct positions            (accumulate = false)
///   count = count + number of correct positions    (accumulate = true: an epoch's total)
/// Every other label must be in [0, C): anything else is an InvalidArgument naming the position
/// and value (on the cudnn backend raised by a later call, as cross-entropy's, see
/// docs/ops/reduce.md).
struct AccuracyDesc {
  Dims dims;                               ///< logits: N, C, spatial... (rank 2 to 5)
  std::int64_t top_k = 1;                  ///< in [1, C]
  std::int64_t ignore_index = -100;        ///< label value that marks a position as ignored
  DType label_dtype = DType::i64;          ///< dtype of labels: i32 or i64
  DType dtype = DType::f32;                ///< dtype of logits: f32, f16, bf16
  DType count_dtype = DType::i64;          ///< dtype of count: i64 (exact) or f32
  bool accumulate = false;                 ///< add into count instead of overwriting it
  Layout layout = Layout::channels_first;  ///< memory order of logits

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  // The shapes check `dims` first (InvalidArgument naming them when out of range).
  std::int64_t classes() const;    ///< C
  std::int64_t positions() const;  ///< N * spatial: labels
  Dims labels_dims() const;        ///< N, spatial... (dense row-major, label_dtype)

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile accuracy --input 64x1000 --top-k 5 --label-dtype i64 --dtype f32 ...`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const AccuracyDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const AccuracyDesc& desc);

/// count (dims {1}, desc.count_dtype) = (count +) the number of correct positions of `logits`
/// (desc.dims, desc.dtype, dense desc.layout) against `labels` (desc.labels_dims(),
/// desc.label_dtype, dense row-major). count must not overlap the inputs. Returns the choice
/// that ran.
std::shared_ptr<const Choice> accuracy_fwd(Context& context, const AccuracyDesc& desc,
                                           const Tensor& logits, const Tensor& labels,
                                           Tensor& count);

/// Every candidate of the context's backend, nothing run (accuracy has Direction::fwd only).
std::vector<AlgoInfo> accuracy_list(Context& context, const AccuracyDesc& desc,
                                    Direction direction);
/// The choice the context's policy makes (may time candidates, on scratch tensors when
/// accumulating; cached).
std::shared_ptr<const Choice> accuracy_select(Context& context, const AccuracyDesc& desc,
                                              Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult accuracy_profile(Context& context, const AccuracyDesc& desc, Direction direction);

}  // namespace dnnx
