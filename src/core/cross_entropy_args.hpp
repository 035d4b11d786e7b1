#pragma once
// The tensors of one cross-entropy call, and the label-range rule every backend applies.

#include <dnnx/ops/cross_entropy.hpp>
#include <dnnx/tensor.hpp>

#include "core/softmax_args.hpp"

#include <cstdint>
#include <string>

namespace dnnx::detail {

/// The tensors of one cross-entropy call. Which are set depends on the direction:
///   fwd:      logits, labels[, weights] -> loss
///   bwd_data: logits, labels[, weights], diff_loss -> diff_logits
/// `weights` is set exactly when desc.weighted. The op layer has validated shapes, dtypes,
/// layouts and devices against the desc.
struct CrossEntropyArgs {
  const Tensor* logits = nullptr;
  const Tensor* labels = nullptr;
  const Tensor* weights = nullptr;
  const Tensor* diff_loss = nullptr;
  Tensor* loss = nullptr;
  Tensor* diff_logits = nullptr;
};

/// The logits of `desc` as Note [axis geometry] groups: one group of C classes per position, the
/// position index (into labels and per-position losses) being o * inner + i.
inline AxisGeometry axis_geometry(const CrossEntropyDesc& desc, bool logical = false) {
  return axis_geometry(desc.dims, false, logical ? Layout::channels_first : desc.layout);
}

/// Whether `label` is usable: ignore_index, or a class in [0, classes).
inline bool label_ok(std::int64_t label, std::int64_t classes, std::int64_t ignore_index) {
  return label == ignore_index || (label >= 0 && label < classes);
}

/// "labels[n=1, h=2, w=3]" style name of position `position` of `labels_dims`.
std::string label_position(const Dims& labels_dims, std::int64_t position);

/// The InvalidArgument message for an out-of-range label at `position`.
std::string bad_label_message(const CrossEntropyDesc& desc, std::int64_t position,
                              std::int64_t label);

}  // namespace dnnx::detail
