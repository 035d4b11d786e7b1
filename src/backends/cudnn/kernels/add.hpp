#pragma once
// The cudnn backend's own broadcasting-add kernels (candidates "cudnn:kernel:add"): every
// broadcast pattern, forward and backward (the sum over the broadcast axes), on plain device
// pointers. No cuDNN types.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::add {

/// Storage type of src and dst; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// The axes of one add in memory order (outermost first), after dropping size-1 axes and merging
/// neighbours that src treats alike (both broadcast, or both not); one axis of size 1 when nothing
/// is left. Dense tensors of the same
/// layout share their memory order, so src's memory offset of a dst element follows from it.
struct Shape {
  static constexpr int max_rank = 5;
  int rank = 1;                      ///< merged axes, at least 1
  std::int64_t dims[max_rank] = {};  ///< dst's size along each merged axis
  bool broadcast[max_rank] = {};     ///< src has size 1 along the axis (and dst more)

  /// Elements of dst.
  std::int64_t dst_count() const;
  /// Elements of src (the kept axes).
  std::int64_t src_count() const;
};

/// The merged shape of dst `dst_dims` and src `src_dims`, both `rank` sizes in memory order
/// (outermost first); every src size equals dst's or is 1.
Shape make_shape(int rank, const std::int64_t* dst_dims, const std::int64_t* src_dims);

/// dst = alpha * broadcast(src) + beta * dst; with beta = 0 dst is only written. Queues the work
/// on `stream` and returns the launch status.
cudaError_t forward(Element element, float alpha, float beta, const Shape& shape, const void* src,
                    void* dst, cudaStream_t stream);

/// Bytes of scratch `backward` needs for `shape` on a device with `sm_count` multiprocessors.
std::size_t backward_workspace(const Shape& shape, int sm_count);

/// diff_src = alpha * (sum of diff_dst over the broadcast axes), summed in f32 in an order fixed by
/// (shape, sm_count): bitwise reproducible. `workspace` holds backward_workspace() bytes. Queues
/// the work on `stream` and returns the launch status.
cudaError_t backward(Element element, float alpha, const Shape& shape, const void* diff_dst,
                     void* diff_src, void* workspace, int sm_count, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::add
