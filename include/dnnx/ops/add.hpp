#pragma once
/// \file
/// Broadcasting tensor add: dst = alpha * broadcast(src) + beta * dst (cuDNN's cudnnAddTensor; a
/// bias add is src 1xCx1x1), and its backward pass, the gradient w.r.t. src (the bias gradient).

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

/// What a tensor add computes. Plain data: comparable, hashable, printable.
struct AddDesc {
  Dims src_dims;       ///< logical dims of src: each equal to dst's or 1 (broadcast), same rank
  Dims dst_dims;       ///< logical dims of dst: N, C, spatial... (rank 1 to 5)
  float alpha = 1.0f;  ///< scale of src (finite)
  /// Scale of dst's previous contents (finite). With beta = 0 dst is not read at all, so it may
  /// hold anything, NaN included (BLAS and cuDNN convention).
  float beta = 1.0f;
  DType dtype = DType::f32;                ///< of src and dst (and their gradients)
  Layout layout = Layout::channels_first;  ///< memory order of both tensors

  /// dst = alpha * broadcast(src) + beta * dst over the given dims.
  static AddDesc from_dims(const Dims& src, const Dims& dst, float alpha = 1.0f, float beta = 1.0f,
                           DType dtype = DType::f32, Layout layout = Layout::channels_first);
  /// A bias add on `dst` (rank >= 2): src is 1 x C x 1 x ... .
  static AddDesc bias(const Dims& dst, DType dtype = DType::f32,
                      Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// Whether src is broadcast along logical axis `axis` (src 1, dst > 1).
  bool broadcasts(int axis) const { return src_dims[axis] == 1 && dst_dims[axis] != 1; }
  /// dst elements summed into each diff_src element by the backward pass.
  std::int64_t reduction_size() const { return dst_dims.product() / src_dims.product(); }

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile add --src 1x256x1x1 --dst 64x256x56x56 --alpha 1 --beta 1 --dtype f32 ...`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const AddDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const AddDesc& desc);

/// dst = alpha * broadcast(src) + beta * dst. src must not overlap dst. Returns the choice that
/// ran.
std::shared_ptr<const Choice> add_fwd(Context& context, const AddDesc& desc, const Tensor& src,
                                      Tensor& dst);
/// diff_src = alpha * (sum of diff_dst over the broadcast axes): the gradient w.r.t. src (the bias
/// gradient). Overwrites diff_src (the gradient w.r.t. dst is beta * diff_dst, left to the
/// caller). diff_src must not overlap diff_dst. Returns the choice that ran.
std::shared_ptr<const Choice> add_bwd(Context& context, const AddDesc& desc, const Tensor& diff_dst,
                                      Tensor& diff_src);

/// Every candidate of the context's backend for (desc, direction), nothing run. The backward pass
/// is Direction::bwd_data.
std::vector<AlgoInfo> add_list(Context& context, const AddDesc& desc, Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> add_select(Context& context, const AddDesc& desc,
                                         Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult add_profile(Context& context, const AddDesc& desc, Direction direction);

}  // namespace dnnx
