#pragma once
/// \file
/// Argmax over one axis: the index of the largest element of every line along the axis, as
/// torch.argmax(dim, keepdim=True) gives it; what a classifier's prediction is.

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

/// What an argmax computes. Plain data: comparable, hashable, printable; it is the cache key, the
/// error context and the test-case name. dst[..., 0, ...] = the smallest index i along `axis`
/// whose element is the largest of its line: ties go to the first index, and NaN counts as larger
/// than every number (the first NaN wins), as torch.argmax. dst has src's dims with 1 on `axis`.
struct ArgmaxDesc {
  Dims src_dims;                           ///< logical dims of src (rank 1 to 5, each >= 1)
  int axis = 1;                            ///< the axis searched, in [0, rank)
  DType dtype = DType::f32;                ///< of src: f32, f16, bf16
  DType index_dtype = DType::i64;          ///< of dst: i32 or i64
  Layout layout = Layout::channels_first;  ///< memory order of src and dst

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// src_dims with 1 on `axis` (checks the desc first).
  Dims dst_dims() const;

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile argmax --src 64x1000 --axis 1 --dtype f32 --index-dtype i64 --layout nchw`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ArgmaxDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ArgmaxDesc& desc);

/// dst = argmax of src along desc.axis. src is dense in desc.layout, of desc.dtype; dst (dims
/// desc.dst_dims(), desc.index_dtype) is dense in desc.layout. Returns the choice that ran.
std::shared_ptr<const Choice> argmax_fwd(Context& context, const ArgmaxDesc& desc,
                                         const Tensor& src, Tensor& dst);

/// Every candidate of the context's backend, nothing run (argmax has Direction::fwd only).
std::vector<AlgoInfo> argmax_list(Context& context, const ArgmaxDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates; cached).
std::shared_ptr<const Choice> argmax_select(Context& context, const ArgmaxDesc& desc,
                                            Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult argmax_profile(Context& context, const ArgmaxDesc& desc, Direction direction);

}  // namespace dnnx
