#pragma once
/// \file
/// Reductions over any set of axes (sum, mean, max, min, the 1- and 2-norms), as
/// cudnnReduceTensor and oneDNN's reduction primitive compute them, and their backward pass: what
/// a training loop needs to keep its metrics (a batch's loss, a gradient norm) on the device.

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

/// What a reduction computes over the elements x_i of one reduced group.
enum class ReduceKind : std::uint8_t {
  sum,    ///< sum x_i
  mean,   ///< sum x_i / count
  max,    ///< max x_i (NaN if any x_i is NaN, as torch.amax)
  min,    ///< min x_i (NaN if any x_i is NaN, as torch.amin)
  norm1,  ///< sum |x_i|
  norm2,  ///< sqrt(sum x_i^2)
};
/// "sum", "mean", "max", "min", "norm1", "norm2".
std::string_view to_string(ReduceKind kind);
/// Parses the names above; throws InvalidArgument listing them.
ReduceKind parse_reduce_kind(std::string_view text);

/// What a reduction computes. Plain data: comparable, hashable, printable; it is the cache key,
/// the error context and the test-case name. dst has src's rank with 1 on every reduced axis
/// (keepdim, as AddDesc writes a broadcast): dst is reduce(src) over the axes where src_dims > 1
/// and dst_dims = 1. An axis of size 1 in both is neither reduced nor kept in any way that
/// matters; with no reduced axis dst is a copy of src (max, min, sum, mean), |src| (norm1, norm2).
/// Accumulation is f32 (f64 on the reference backend) for every dtype; the result is rounded once
/// to the dtype.
struct ReduceDesc {
  ReduceKind kind = ReduceKind::sum;
  Dims src_dims;                           ///< logical dims of src (rank 1 to 5, each >= 1)
  Dims dst_dims;                           ///< src_dims with 1 on each reduced axis
  DType dtype = DType::f32;                ///< of src and dst (and their gradients): f32, f16, bf16
  Layout layout = Layout::channels_first;  ///< memory order of both tensors

  /// The reduction of `src` over `axes` (each in [0, rank), any order, no repeats; empty: none).
  static ReduceDesc over(ReduceKind kind, const Dims& src, const std::vector<int>& axes,
                         DType dtype = DType::f32, Layout layout = Layout::channels_first);
  /// The reduction of every element of `src` to dims 1x1x...
  static ReduceDesc all(ReduceKind kind, const Dims& src, DType dtype = DType::f32,
                        Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// Whether logical axis `axis` is reduced (src > 1, dst 1).
  bool reduces(int axis) const { return dst_dims[axis] == 1 && src_dims[axis] != 1; }
  /// Elements of src reduced into each dst element.
  std::int64_t reduction_size() const { return src_dims.product() / dst_dims.product(); }
  /// Whether the backward pass reads src and dst (max, min, norm1, norm2) or diff_dst alone.
  bool backward_reads_values() const { return kind != ReduceKind::sum && kind != ReduceKind::mean; }

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile reduce --kind sum --src 64x1000 --dst 1x1 --dtype f32 --layout nchw ...`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ReduceDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ReduceDesc& desc);

/// dst = reduce(src). Both dense in desc.layout, of desc.dtype; dst must not overlap src.
/// Returns the choice that ran.
std::shared_ptr<const Choice> reduce_fwd(Context& context, const ReduceDesc& desc,
                                         const Tensor& src, Tensor& dst);
/// diff_src = the gradient of the reduction w.r.t. src given diff_dst (dst's dims), overwriting
/// diff_src (src's dims):
///   sum:   diff_dst broadcast;       mean:  diff_dst / count broadcast;
///   max, min: diff_dst / t at the t elements of the group equal to dst (ties split evenly, as
///          torch.amax / amin), 0 elsewhere;
///   norm1: sign(x) * diff_dst;       norm2: x / dst * diff_dst (0 where dst is 0).
/// `src` and `dst` are the forward's input and output (dst as the forward wrote it). diff_src must
/// not overlap any input. Returns the choice that ran.
std::shared_ptr<const Choice> reduce_bwd(Context& context, const ReduceDesc& desc,
                                         const Tensor& src, const Tensor& dst,
                                         const Tensor& diff_dst, Tensor& diff_src);
/// The backward pass of sum and mean, which read neither src nor dst (InvalidArgument for the
/// other kinds, which need them).
std::shared_ptr<const Choice> reduce_bwd(Context& context, const ReduceDesc& desc,
                                         const Tensor& diff_dst, Tensor& diff_src);

/// Every candidate of the context's backend for (desc, direction), nothing run. The backward
/// pass is Direction::bwd_data.
std::vector<AlgoInfo> reduce_list(Context& context, const ReduceDesc& desc, Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> reduce_select(Context& context, const ReduceDesc& desc,
                                            Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult reduce_profile(Context& context, const ReduceDesc& desc, Direction direction);

}  // namespace dnnx
