#pragma once
// The tensors of one reduction call (Note [op dispatch]); the op layer has validated them against
// the desc: dims, dtype, density in desc.layout, device, no overlap of the output with an input.
// Also how a reduction maps onto memory, which the cpu and cudnn kernels share.

#include <dnnx/ops/reduce.hpp>
#include <dnnx/tensor.hpp>

#include <array>
#include <cstdint>

namespace dnnx::detail {

/// Which tensors are set depends on the direction:
///   fwd:      src -> dst
///   bwd_data: diff_dst (and src, saved_dst when desc.backward_reads_values()) -> diff_src
struct ReduceArgs {
  const Tensor* src = nullptr;        ///< fwd; bwd of max, min, norm1, norm2 (src_dims)
  Tensor* dst = nullptr;              ///< fwd: written (dst_dims)
  const Tensor* saved_dst = nullptr;  ///< bwd of max, min, norm1, norm2: the forward's dst ("dst")
  const Tensor* diff_dst = nullptr;   ///< bwd: read (dst_dims)
  Tensor* diff_src = nullptr;         ///< bwd: written (src_dims)
};

// Note [tied extrema]
// The gradient of max (min) goes to the elements of a group equal to the forward's result, split
// evenly among them when several tie: diff_src = diff_dst / t at each of the t tied elements, 0
// elsewhere (torch.amax / amin's rule; torch.max(dim) instead gives all of it to one index). The
// comparison is in the storage dtype, where the result is exactly one of the group's values. A
// dst that no element equals (not the forward's result, or NaN) gives a zero gradient.

/// A reduction in memory order. src and dst are dense in the desc's layout; their axes in memory
/// order, outermost first, are the logical ones (channels_first, or rank <= 2) or N, spatial...,
/// C (channels_last). The kept axes in that order, row-major, number the dst elements as they
/// lie in memory; the reduced axes number the elements of one group.
struct ReduceGeometry {
  int rank = 0;                                   ///< axes of src in memory order
  std::array<std::int64_t, 5> sizes{};            ///< src sizes, memory order
  std::array<std::int64_t, 5> src_strides{};      ///< dense src strides, memory order
  std::array<std::int64_t, 5> dst_strides{};      ///< dense dst strides, 0 on reduced axes
  int kept_rank = 0;                              ///< kept axes (dst size > 1), memory order
  std::array<std::int64_t, 5> kept_sizes{};       ///< their sizes
  std::array<std::int64_t, 5> kept_strides{};     ///< their src strides
  int reduced_rank = 0;                           ///< reduced axes, memory order
  std::array<std::int64_t, 5> reduced_sizes{};    ///< their sizes
  std::array<std::int64_t, 5> reduced_strides{};  ///< their src strides
  std::int64_t outputs = 1;                       ///< dst elements
  std::int64_t count = 1;                         ///< src elements per dst element
};

/// The geometry of a valid desc.
inline ReduceGeometry reduce_geometry(const ReduceDesc& desc) {
  const int rank = desc.src_dims.rank();
  std::array<int, 5> order{};
  if (desc.layout == Layout::channels_last && rank >= 3) {
    int k = 0;
    order[static_cast<std::size_t>(k++)] = 0;
    for (int i = 2; i < rank; ++i) order[static_cast<std::size_t>(k++)] = i;
    order[static_cast<std::size_t>(k)] = 1;
  } else {
    for (int i = 0; i < rank; ++i) order[static_cast<std::size_t>(i)] = i;
  }
  ReduceGeometry g;
  g.rank = rank;
  std::int64_t src_stride = 1, dst_stride = 1;
  for (int m = rank - 1; m >= 0; --m) {
    const auto k = static_cast<std::size_t>(m);
    const int axis = order[k];
    g.sizes[k] = desc.src_dims[axis];
    g.src_strides[k] = src_stride;
    g.dst_strides[k] = desc.dst_dims[axis] == 1 ? 0 : dst_stride;
    src_stride *= desc.src_dims[axis];
    dst_stride *= desc.dst_dims[axis];
  }
  for (int m = 0; m < rank; ++m) {
    const auto k = static_cast<std::size_t>(m);
    if (g.sizes[k] == 1) continue;
    if (g.dst_strides[k] == 0) {
      g.reduced_sizes[static_cast<std::size_t>(g.reduced_rank)] = g.sizes[k];
      g.reduced_strides[static_cast<std::size_t>(g.reduced_rank++)] = g.src_strides[k];
      g.count *= g.sizes[k];
    } else {
      g.kept_sizes[static_cast<std::size_t>(g.kept_rank)] = g.sizes[k];
      g.kept_strides[static_cast<std::size_t>(g.kept_rank++)] = g.src_strides[k];
      g.outputs *= g.sizes[k];
    }
  }
  return g;
}

/// The src offset of element `r` (row-major over the reduced axes) of the group of dst element
/// `o` (row-major over the kept axes).
inline std::int64_t reduce_src_offset(const ReduceGeometry& g, std::int64_t o, std::int64_t r) {
  std::int64_t offset = 0;
  for (int m = g.kept_rank - 1; m >= 0; --m) {
    const auto k = static_cast<std::size_t>(m);
    offset += (o % g.kept_sizes[k]) * g.kept_strides[k];
    o /= g.kept_sizes[k];
  }
  for (int m = g.reduced_rank - 1; m >= 0; --m) {
    const auto k = static_cast<std::size_t>(m);
    offset += (r % g.reduced_sizes[k]) * g.reduced_strides[k];
    r /= g.reduced_sizes[k];
  }
  return offset;
}

}  // namespace dnnx::detail
