#pragma once
// The cudnn backend's own reorder kernels (candidate "cudnn:kernel:reorder"): dst = alpha * src +
// beta * dst between tensors of the same dims, each with its own storage type, either in the same
// memory order (elementwise) or as a batched transpose (NCHW <-> NHWC). Plain device pointers, no
// cuDNN types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::reorder {

/// Storage type of a tensor; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// How the elements move (Note [reorder kernels] in reorder.cu).
struct Shape {
  /// Elements of each tensor (>= 0).
  std::int64_t count = 0;
  /// False: src and dst share their memory order, element i of src goes to element i of dst.
  /// True: src is `batch` row-major matrices of `rows` x `cols`, dst the same matrices
  /// transposed (`cols` x `rows`), one after the other.
  bool transpose = false;
  std::int64_t batch = 1;
  std::int64_t rows = 1;
  std::int64_t cols = 1;
};

/// dst = alpha * src + beta * dst, each element converted to f32 and rounded once to dst's type;
/// with beta = 0 dst is only written. Queues the work on `stream` and returns the launch status
/// (cudaSuccess without a launch when shape.count is 0).
cudaError_t run(Element src_element, Element dst_element, const Shape& shape, float alpha,
                float beta, const void* src, void* dst, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::reorder
