#pragma once
// The tensors of one argmax or accuracy call (Note [op dispatch]), validated by the op layer
// against the desc, and how the two map onto memory: every backend sees them as `outer` lines of
// `axis` elements, `inner` apart (Note [axis geometry] in softmax_args.hpp), the line o * inner + i
// starting at offset o * axis * inner + i.

#include <dnnx/ops/accuracy.hpp>
#include <dnnx/ops/argmax.hpp>
#include <dnnx/tensor.hpp>

#include "core/softmax_args.hpp"

#include <cstdint>
#include <string>

namespace dnnx::detail {

/// fwd: src -> dst (indices).
struct ArgmaxArgs {
  const Tensor* src = nullptr;  ///< desc.src_dims, desc.dtype, dense desc.layout
  Tensor* dst = nullptr;        ///< desc.dst_dims(), desc.index_dtype, dense desc.layout
};

/// fwd: logits, labels -> count (read first when accumulating).
struct AccuracyArgs {
  const Tensor* logits = nullptr;  ///< desc.dims, desc.dtype, dense desc.layout
  const Tensor* labels = nullptr;  ///< desc.labels_dims(), desc.label_dtype, dense row-major
  Tensor* count = nullptr;         ///< {1}, desc.count_dtype
};

/// The lines of an argmax in memory: dst's element o * inner + i is the argmax of the line at
/// offsets o * axis * inner + i + a * inner, a in [0, axis).
inline AxisGeometry axis_geometry(const ArgmaxDesc& desc) {
  const int rank = desc.src_dims.rank();
  const bool last = desc.layout == Layout::channels_last && rank >= 3;
  // The position of each logical axis in memory order (outermost first).
  const auto position = [&](int axis) {
    if (!last) return axis;
    if (axis == 0) return 0;
    if (axis == 1) return rank - 1;
    return axis - 1;
  };
  AxisGeometry g;
  const int searched = position(desc.axis);
  for (int i = 0; i < rank; ++i) {
    const int p = position(i);
    if (p < searched) g.outer *= desc.src_dims[i];
    if (p > searched) g.inner *= desc.src_dims[i];
  }
  g.axis = desc.src_dims[desc.axis];
  return g;
}

/// The lines of an accuracy count in memory: position p (labels' row-major order) is line p.
inline AxisGeometry axis_geometry(const AccuracyDesc& desc) {
  return axis_geometry(desc.dims, false, desc.layout);
}

/// "labels[n=.., ...] (position p) is <label>; accepted: a class in [0, C) or ignore_index (..)".
std::string bad_accuracy_label_message(const AccuracyDesc& desc, std::int64_t position,
                                       std::int64_t label);

// Note [label rank]
// A label's rank among the C logits x of its position is #{c : x_c > x_y} + #{c < y : x_c ==
// x_y}, NaN counting as larger than every number and equal to NaN: the label's place in a
// descending sort that keeps equal values in index order. rank < k is top-k correct; rank 0 is
// argmax == y with ties to the first index. Computed in one pass, no sort: every backend the same.

/// Whether a ranks above b (Note [label rank]).
inline bool ranks_above(float a, float b) { return (a != a && b == b) || a > b; }
/// Whether a ties with b (Note [label rank]).
inline bool ties_with(float a, float b) { return a == b || (a != a && b != b); }

}  // namespace dnnx::detail
