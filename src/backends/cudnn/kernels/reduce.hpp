#pragma once
// The cudnn backend's own reduction kernels (candidate "cudnn:kernel:reduce"): sum, mean, max,
// min and the 1- and 2-norms over any axes, forward and backward, on plain device pointers. No
// cuDNN types.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::reduce {

/// Storage type of every tensor; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// What is computed (ReduceKind's order).
enum class Kind : int { sum, mean, max, min, norm1, norm2 };

/// One reduction in memory order (core/reduce_args.hpp's ReduceGeometry): the src sizes and the
/// strides of src and dst along them (dst's 0 on reduced axes), and the kept and reduced axes
/// (size > 1) with their src strides. The kept axes, row-major, number dst's elements as they lie
/// in memory.
struct Geometry {
  static constexpr int max_rank = 5;
  int rank = 1;
  std::int64_t sizes[max_rank] = {};
  std::int64_t dst_strides[max_rank] = {};
  int kept_rank = 0;
  std::int64_t kept_sizes[max_rank] = {};
  std::int64_t kept_strides[max_rank] = {};
  int reduced_rank = 0;
  std::int64_t reduced_sizes[max_rank] = {};
  std::int64_t reduced_strides[max_rank] = {};
  std::int64_t outputs = 1;  ///< dst elements
  std::int64_t count = 1;    ///< src elements per dst element
};

/// Bytes of scratch `forward` needs on a device with `sm_count` multiprocessors.
std::size_t forward_workspace(const Geometry& g, int sm_count);
/// Bytes of scratch `backward` needs (the tie counts of max and min).
std::size_t backward_workspace(Kind kind, const Geometry& g);

/// dst = reduce(src) over the geometry's reduced axes, in f32 in an order fixed by (g, sm_count):
/// bitwise reproducible. `workspace` holds forward_workspace() bytes. Queues the work on `stream`
/// and returns the launch status.
cudaError_t forward(Element element, Kind kind, const Geometry& g, const void* src, void* dst,
                    void* workspace, int sm_count, cudaStream_t stream);

/// diff_src = the gradient of the reduction (Note [tied extrema] in core/reduce_args.hpp for max
/// and min); `src` and `dst` (the forward's) are read for max, min, norm1 and norm2 only.
/// `workspace` holds backward_workspace() bytes. Queues the work on `stream` and returns the
/// launch status.
cudaError_t backward(Element element, Kind kind, const Geometry& g, const void* src,
                     const void* dst, const void* diff_dst, void* diff_src, void* workspace,
                     cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::reduce
