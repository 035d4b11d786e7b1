#pragma once
// The tensors of one softmax call, and how a softmax desc maps onto memory: every backend sees
// the op as `outer` independent groups of `axis` elements, `inner` apart.

#include <dnnx/ops/softmax.hpp>
#include <dnnx/tensor.hpp>

#include "core/dtype.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace dnnx::detail {

/// The tensors of one softmax call. Which are set depends on the direction:
///   fwd:      src -> dst            (dst may be src itself: in place)
///   bwd_data: saved_dst, diff_dst -> diff_src
/// The op layer has validated shapes, dtypes, layouts and devices against the desc.
struct SoftmaxArgs {
  const Tensor* src = nullptr;
  Tensor* dst = nullptr;
  const Tensor* saved_dst = nullptr;  ///< bwd: the forward's output ("dst" in messages)
  const Tensor* diff_dst = nullptr;
  Tensor* diff_src = nullptr;
};

/// A normalization axis in memory: element (o, a, i) of `outer` x `axis` x `inner` sits at
/// offset (o * axis + a) * inner + i of a dense tensor, and the group it belongs to is o * inner
/// + i. Every softmax and cross-entropy desc in either layout is of this form (Note [axis
/// geometry]).
struct AxisGeometry {
  std::int64_t outer = 1;
  std::int64_t axis = 1;
  std::int64_t inner = 1;
  std::int64_t groups() const { return outer * inner; }
  std::int64_t elements() const { return outer * axis * inner; }
};

// Note [axis geometry]
// Let S be the product of the spatial dims. Instance mode normalizes the C*S values of a sample,
// which are contiguous in both layouts: outer N, axis C*S, inner 1. Channel mode normalizes the C
// values of a position: channels_first (N, C, S) gives outer N, axis C, inner S; channels_last
// (N, S, C) gives outer N*S, axis C, inner 1. `logical` asks for the geometry of the logical
// (row-major N, C, spatial...) order, which is the channels_first one.

/// Product of the spatial dims of `dims` (1 when rank 2).
inline std::int64_t spatial_size(const Dims& dims) {
  std::int64_t size = 1;
  for (int i = 2; i < dims.rank(); ++i) size *= dims[i];
  return size;
}

/// Note [axis geometry] for a normalization over channels (instance = false) or over the whole
/// sample (instance = true) of `dims` stored in `layout`.
inline AxisGeometry axis_geometry(const Dims& dims, bool instance, Layout layout) {
  const std::int64_t n = dims[0];
  const std::int64_t c = dims[1];
  const std::int64_t s = spatial_size(dims);
  if (instance) return {n, c * s, 1};
  if (layout == Layout::channels_last) return {n * s, c, 1};
  return {n, c, s};
}

/// The geometry of `desc` in its layout (or in logical order with `logical`).
inline AxisGeometry axis_geometry(const SoftmaxDesc& desc, bool logical = false) {
  return axis_geometry(desc.dims, desc.mode == SoftmaxMode::instance,
                       logical ? Layout::channels_first : desc.layout);
}

}  // namespace dnnx::detail

namespace dnnx::detail {

/// Throws InvalidArgument unless `dims` is N, C, spatial... of rank 2 to 5 with every entry in
/// [1, 2^31] and at most 2^60 elements; `field` names it in the message ("dims", "logits dims").
void validate_nc_dims(const Dims& dims, const char* field);
/// N, spatial... of N, C, spatial... dims (one entry per position), after validate_nc_dims.
Dims nc_position_dims(const Dims& dims, const char* field);

/// Whether `layout` is one of the Layout values (a desc may hold a cast integer).
inline bool valid_layout(Layout layout) {
  return layout == Layout::channels_first || layout == Layout::channels_last;
}

}  // namespace dnnx::detail

namespace dnnx::detail {

/// The f32 to hand to a store into `dtype` so that `value` is rounded once (Note [rounding once]
/// in backends/reference/conv.cpp): f32 itself rounds to nearest; for f16 / bf16 the value is
/// first rounded to odd in f32, which the store's round-to-nearest then rounds correctly.
inline float round_once_f32(double value, DType dtype) {
  const auto nearest = static_cast<float>(value);
  if (dtype == DType::f32 || std::isinf(nearest)) return nearest;
  return round_to_odd(value);
}

/// Writes f64 results (logical order) into host tensor `out` of any strides, rounded once.
inline void store_rounded(const std::vector<double>& values, Tensor& out) {
  std::vector<float> narrowed(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    narrowed[i] = round_once_f32(values[i], out.dtype());
  out.copy_from_f32(narrowed);
}

}  // namespace dnnx::detail
