#pragma once
// The tensors of one pooling call, by role (the Args of detail::PoolBackend).

#include <dnnx/ops/pool.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dnnx::detail {

/// The tensors of one pooling call. Which are set depends on the direction and on desc.indices:
///   fwd:      src                   -> dst            (desc.indices: -> dst, indices)
///   bwd_data: src, dst, diff_dst    -> diff_src       (desc.indices: diff_dst, indices_in
///                                                      -> diff_src; src and dst null)
/// (Note [directions of single-backward ops]). The op layer has validated shapes, dtypes, layouts
/// and devices against the desc (indices: i64 or i32, dst's dims and layout), and that no output
/// overlaps an input or another output. Index values are the backends' to check.
struct PoolArgs {
  const Tensor* src = nullptr;
  const Tensor* dst_in = nullptr;  ///< bwd: the forward output (read only)
  const Tensor* diff_dst = nullptr;
  const Tensor* indices_in = nullptr;  ///< bwd with indices: the forward's argmax indices
  Tensor* dst = nullptr;               ///< fwd: the output
  Tensor* indices = nullptr;           ///< fwd with indices: the argmax indices written
  Tensor* diff_src = nullptr;
};

/// One output's window along one spatial dim (Note [pooling windows] in the reference backend):
/// the positions start + j * step, j < kernel, of the padded input; its input elements are begin,
/// begin + step, ... below end.
struct PoolSpan {
  std::int64_t start = 0;   ///< the first position (in the front padding when negative)
  std::int64_t begin = 0;   ///< the first input element
  std::int64_t end = 0;     ///< one past the last input element
  std::int64_t step = 1;    ///< the dilation
  std::int64_t padded = 0;  ///< positions inside the padded input (avg_include_pad's count)

  /// Input elements of the window (at least 1 in a valid desc: Note [windows between input
  /// elements] in core/pool_desc.cpp).
  std::int64_t count() const { return (end - begin - 1) / step + 1; }
};

/// The window that starts at `start` (o * stride - pad_before), of `kernel` positions `dilation`
/// apart, over an input of `input` elements followed by `pad_after` of padding.
inline PoolSpan pool_span(std::int64_t start, std::int64_t kernel, std::int64_t dilation,
                          std::int64_t input, std::int64_t pad_after) {
  PoolSpan span;
  span.start = start;
  span.step = dilation;
  if (dilation == 1) {  // no divisions: the kernels call this per window
    span.begin = std::max<std::int64_t>(start, 0);
    span.end = std::min(start + kernel, input);
    span.padded = std::min(start + kernel, input + pad_after) - start;
    return span;
  }
  // Positions at or past 0 start after `skipped` ones; the last one below input is j = last.
  const std::int64_t skipped = start < 0 ? (dilation - 1 - start) / dilation : 0;
  const std::int64_t last = std::min(kernel - 1, (input - 1 - start) / dilation);
  span.begin = start + skipped * dilation;
  span.end = start + last * dilation + 1;
  span.padded = std::min(kernel, (input + pad_after - start + dilation - 1) / dilation);
  return span;
}

/// Output o's window along spatial dim i of `desc`.
inline PoolSpan pool_span(const PoolDesc& desc, int i, std::int64_t o) {
  const auto s = static_cast<std::size_t>(i);
  return pool_span(o * desc.stride[s] - desc.pad_before[s], desc.kernel[s], desc.dilation[s],
                   desc.input[s], desc.pad_after[s]);
}

/// The spatial fields of a pooling as 3 dims (D, H, W), as the cpu and reference loops walk it:
/// a 1-D or 2-D pooling is a 3-D one whose leading dims have size 1, kernel 1, stride 1,
/// dilation 1 and no padding, which changes no row-major offset.
struct PoolWindows3d {
  std::array<std::int64_t, 3> in{}, out{}, kernel{}, stride{}, dilation{};
  std::array<std::int64_t, 3> extent{};  ///< the effective kernel, (kernel - 1) * dilation + 1
  std::array<std::int64_t, 3> pad_before{}, pad_after{};

  /// The fields of a valid `desc`, promoted to 3 spatial dims.
  explicit PoolWindows3d(const PoolDesc& desc) {
    const int missing = 3 - desc.spatial_dims;
    for (int i = 0; i < 3; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (i < missing) {
        in[k] = out[k] = kernel[k] = stride[k] = dilation[k] = extent[k] = 1;
        continue;
      }
      const auto s = static_cast<std::size_t>(i - missing);
      in[k] = desc.input[s];
      out[k] = desc.output_size(i - missing);
      kernel[k] = desc.kernel[s];
      stride[k] = desc.stride[s];
      dilation[k] = desc.dilation[s];
      extent[k] = desc.effective_kernel(i - missing);
      pad_before[k] = desc.pad_before[s];
      pad_after[k] = desc.pad_after[s];
    }
  }
};

/// The message of a bad argmax index (pool_bwd with indices): `element` is the position of the
/// index in dst's logical (row-major N, C, spatial...) order, `value` the index read there. Names
/// the position as [n, c, o...] and the value, and says what is accepted: an index inside the
/// (n, c) input plane, [0, desc.input_plane()), that names an element of that output's window.
std::string bad_pool_index_message(const PoolDesc& desc, std::int64_t element, std::int64_t value);

/// Whether `value` names an element of the window of output `element` (dst's logical order).
bool pool_index_in_window(const PoolDesc& desc, std::int64_t element, std::int64_t value);

/// A ready-to-run pooling for one (desc, direction, candidate).
using PoolPlan = OpPlan<PoolArgs>;

}  // namespace dnnx::detail
