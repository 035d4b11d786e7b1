#pragma once
/// \file
/// Pooling (1-, 2- and 3-D): max, average including padding, average excluding padding; per-side
/// padding, dilation and ceil mode; forward and backward; max pooling that saves its argmax indices
/// for the backward pass. The semantics are exactly PyTorch's max_pool{1,2,3}d (dilation,
/// return_indices both ways) / avg_pool{1,2,3}d, and dilated averages are defined the same way
/// (docs/ops/pool.md).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// What a pooling window computes.
enum class PoolMode : std::uint8_t {
  max,              ///< the largest element of the window (padding never wins)
  avg_include_pad,  ///< mean over the window, padding counted as zeros (count_include_pad=True)
  avg_exclude_pad,  ///< mean over the window's input elements only (count_include_pad=False)
};
/// "max", "avg_include_pad", "avg_exclude_pad".
std::string_view to_string(PoolMode mode);
/// Parses the names above (also "avg" = avg_include_pad, PyTorch's default, and "avg_include",
/// "avg_exclude"); throws InvalidArgument listing them.
PoolMode parse_pool_mode(std::string_view text);

/// What a pooling computes. Plain data: comparable, hashable, printable; it is the cache key, the
/// error context and the test-case name. Spatial arrays hold `spatial_dims` meaningful entries in
/// D, H, W order for 3-D, H, W for 2-D, W for 1-D (unused entries are ignored). src is
/// N x C x input..., dst N x C x output... (output_size()).
///
/// A window holds `kernel` positions spaced `dilation` apart: output o's window along a dim is
/// o * stride - pad_before + j * dilation, j = 0 .. kernel - 1, of the padded input; it spans
/// the effective kernel (kernel - 1) * dilation + 1. Output size along a dim (PyTorch's
/// pooling_output_shape, with per-side padding):
///   floor mode: (input + pad_before + pad_after - effective kernel) / stride + 1
///   ceil mode:  the same rounded up, minus one if that last window would start at or beyond
///               input + pad_before (it must start inside the input or the front padding).
struct PoolDesc {
  int spatial_dims = 2;                         ///< 1, 2 or 3
  std::int64_t batch = 1;                       ///< N
  std::int64_t channels = 1;                    ///< C (of src and dst)
  std::array<std::int64_t, 3> input{};          ///< src spatial sizes, elements
  std::array<std::int64_t, 3> kernel{};         ///< window sizes, elements
  std::array<std::int64_t, 3> stride{1, 1, 1};  ///< window steps, elements
  std::array<std::int64_t, 3> pad_before{};  ///< implicit padding before each spatial dim, elements
  std::array<std::int64_t, 3> pad_after{};   ///< implicit padding after each spatial dim, elements
  /// Distance between the positions of a window, elements (1: dense windows). PyTorch's max_pool
  /// dilation; the averages take it too, over the same positions (docs/ops/pool.md, "Dilation").
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  bool ceil_mode = false;         ///< round the output size up (PyTorch's ceil_mode)
  PoolMode mode = PoolMode::max;  ///< what a window computes
  /// Max pooling that saves / consumes argmax indices (PyTorch's max_pool*d_with_indices): the
  /// forward writes, next to dst, each window's argmax as a flat index into its (n, c) input
  /// plane, and the backward routes diff_dst through those indices instead of reading src and
  /// dst. Only with PoolMode::max. Calls take the indices overloads of pool_fwd / pool_bwd below
  /// exactly when this is set.
  bool indices = false;
  DType dtype = DType::f32;  ///< dtype of src, dst and their gradients (f32, f16, bf16)
  Layout layout = Layout::channels_first;  ///< memory order of every tensor of the op

  /// Builds a desc from a PyTorch-style src shape N, C, spatial... `kernel`, `stride` and `pad`
  /// have one entry per spatial dim or a single entry for all; an empty `stride` means the kernel
  /// size (PyTorch's default); `pad` is symmetric (set pad_before / pad_after afterwards for
  /// asymmetric padding). Throws InvalidArgument if the shapes are inconsistent.
  static PoolDesc from_shapes(const Dims& src, const std::vector<std::int64_t>& kernel,
                              const std::vector<std::int64_t>& stride = {},
                              const std::vector<std::int64_t>& pad = {0},
                              PoolMode mode = PoolMode::max, bool ceil_mode = false,
                              DType dtype = DType::f32, Layout layout = Layout::channels_first);
  /// The same with a dilation (one entry per spatial dim or a single entry for all), as
  /// PyTorch's max_pool*d(input, kernel, stride, padding, dilation, ceil_mode).
  static PoolDesc from_shapes(const Dims& src, const std::vector<std::int64_t>& kernel,
                              const std::vector<std::int64_t>& stride,
                              const std::vector<std::int64_t>& pad,
                              const std::vector<std::int64_t>& dilation, PoolMode mode,
                              bool ceil_mode = false, DType dtype = DType::f32,
                              Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value. Besides sizes >= 1 it
  /// enforces PyTorch's rule that padding is at most half the effective kernel on each side,
  /// that the effective kernel fits the padded input (every output size is >= 1), that every
  /// window holds at least one input element (which the padding rule guarantees for dense
  /// windows; a dilated window can fall between input elements, where PyTorch returns -inf and an
  /// index outside the plane), and that `indices` comes with PoolMode::max only.
  void validate() const;

  Dims src_dims() const;  ///< N, C, input...
  Dims dst_dims() const;  ///< N, C, output... (the output shape)
  /// Output spatial size along spatial dim `i`.
  std::int64_t output_size(int i) const;
  /// The extent of a window along spatial dim `i`: (kernel - 1) * dilation + 1.
  std::int64_t effective_kernel(int i) const;
  /// Elements the last window along spatial dim `i` reaches past the padded input (ceil mode
  /// only; 0 when every window ends inside input + pad_after).
  std::int64_t overhang(int i) const;
  /// Elements of one (n, c) input plane: the product of the input sizes. Indices lie in
  /// [0, input_plane()).
  std::int64_t input_plane() const;

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile pool --input 64x64x112x112 --kernel 3 --stride 2 --pad 1 --mode max ...`
  /// (with `--dilation` when a dilation is not 1, `--indices` when `indices` is set).
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const PoolDesc&) const = default;
};

/// Prints desc.key().
std::ostream& operator<<(std::ostream& out, const PoolDesc& desc);

/// dst = pool(src), for a desc without `indices`. Returns the choice that ran.
std::shared_ptr<const Choice> pool_fwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       Tensor& dst);
/// diff_src = gradient of pool w.r.t. src, given diff_dst, for a desc without `indices`. `src`
/// and `dst` are the forward pass's input and output (every mode takes them: max routes each
/// gradient to the first maximum of its window in scan order, as PyTorch does, and cuDNN reads x
/// and y in every mode). Returns the choice that ran.
std::shared_ptr<const Choice> pool_bwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src);

/// Max pooling that saves its argmax (desc.indices set; PyTorch's max_pool*d_with_indices):
/// dst = pool(src), and `indices` (desc.dst_dims(), dense in desc.layout, dtype i64 as PyTorch's
/// or i32, on the context's device) receives, per output element, the flat index into its (n, c)
/// input plane of the element dst holds: d*H*W + h*W + w (3-D), h*W + w (2-D) or w (1-D), the
/// first maximum of the window in scan order, a NaN replacing any number (the last NaN when the
/// window holds several), as PyTorch's `val > max || isnan(val)`. Returns the choice that ran.
std::shared_ptr<const Choice> pool_fwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       Tensor& dst, Tensor& indices);
/// The backward pass of the max pooling with indices (desc.indices set; PyTorch's
/// max_pool*d_with_indices_backward, argument order as there without the unused input):
/// diff_src[n, c, i] = the sum, over the outputs o of plane (n, c) whose window holds i and whose
/// index is i, of diff_dst[n, c, o]; zero where no index points. Overlapping windows accumulate.
/// `indices` is what the forward wrote (i64 or i32, dims and layout of dst): every index must name
/// an element of its own window. An index that does not (outside its (n, c) plane, or inside it
/// but not one of its window's positions) raises InvalidArgument naming the first such index's
/// position and value and the window, on every backend (on a GPU at the next call of the same
/// plan, docs/ops/pool.md; diff_src is then unspecified). Returns the choice that ran.
std::shared_ptr<const Choice> pool_bwd(Context& context, const PoolDesc& desc,
                                       const Tensor& diff_dst, const Tensor& indices,
                                       Tensor& diff_src);

/// Every candidate of the context's backend for (desc, direction) (Direction::bwd_data is the
/// backward pass), with support status, workspace and determinism — nothing is run. Priority
/// order: the first supported one is the heuristic pick.
std::vector<AlgoInfo> pool_list(Context& context, const PoolDesc& desc, Direction direction);
/// The choice the context's pool policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> pool_select(Context& context, const PoolDesc& desc,
                                          Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult pool_profile(Context& context, const PoolDesc& desc, Direction direction);

}  // namespace dnnx
