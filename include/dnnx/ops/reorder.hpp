#pragma once
/// \file
/// Reorder: dst = alpha * src + beta * dst elementwise between two tensors of the same dims, each
/// in its own dense layout and its own floating dtype (oneDNN's reorder, cuDNN's
/// cudnnTransformTensor). Layout changes (NCHW <-> NHWC) and dtype conversions (f32 <-> f16 <->
/// bf16) run where the tensors live, without a trip through host memory.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {

/// What a reorder computes. Plain data: comparable, hashable, printable; the cache key.
struct ReorderDesc {
  Dims dims;                                   ///< logical dims of src and dst, rank 1 to 5
  DType src_dtype = DType::f32;                ///< f32, f16 or bf16
  DType dst_dtype = DType::f32;                ///< f32, f16 or bf16
  Layout src_layout = Layout::channels_first;  ///< memory order of src (rank <= 2: row-major)
  Layout dst_layout = Layout::channels_first;  ///< memory order of dst (rank <= 2: row-major)
  float alpha = 1.0f;                          ///< scale of src (finite)
  /// Scale of dst's previous contents (finite). With beta = 0 dst is not read at all, so it may
  /// hold anything, NaN included (BLAS and cuDNN convention).
  float beta = 0.0f;

  /// The desc of reordering `src` into `dst` (their dims, dtypes and dense layouts) with `alpha`
  /// and `beta`; throws InvalidArgument naming the tensor when one is not dense (channels_first or
  /// channels_last) or when their dims differ.
  static ReorderDesc of(const Tensor& src, const Tensor& dst, float alpha = 1.0f,
                        float beta = 0.0f);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// Whether src and dst have the same strides (same layout, or a layout change that moves no
  /// element, e.g. C = 1): the reorder is elementwise in memory order.
  bool same_order() const;
  /// The `dnnx` CLI line reproducing this case, e.g. `dnnx profile reorder --dims 2x3x4x5
  /// --src-dtype f32 --dst-dtype f16 --src-layout nchw --dst-layout nhwc --alpha 1 --beta 0`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ReorderDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ReorderDesc& desc);

/// dst = alpha * src + beta * dst, each element converted to f32, computed in f32 (f64 on the
/// reference backend) and rounded once to dst's dtype. src and dst must not overlap in memory.
/// Runs on the context's stream after the ops queued before it (no host wait on cudnn). Returns
/// the choice that ran.
std::shared_ptr<const Choice> reorder_fwd(Context& context, const ReorderDesc& desc,
                                          const Tensor& src, Tensor& dst);

/// Every candidate of the context's backend for (desc, fwd), nothing run.
std::vector<AlgoInfo> reorder_list(Context& context, const ReorderDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates; cached).
std::shared_ptr<const Choice> reorder_select(Context& context, const ReorderDesc& desc,
                                             Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult reorder_profile(Context& context, const ReorderDesc& desc, Direction direction);

}  // namespace dnnx
