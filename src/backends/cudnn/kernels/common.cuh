#pragma once
// Device code the kernels of this folder share: f32 <-> storage-type conversions, packed vector
// accesses, warp reductions, the online-softmax reduction of softmax.cu and cross_entropy.cu, and
// the dependent launches of the convolution kernels. Included by .cu files only (nvcc); every
// kernel computes in f32 whatever the storage type.

#include "backends/cudnn/kernels/queue.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dnnx::cudnn::kernels {

constexpr int warp_size = 32;

// Whether `pointer` is aligned to `bytes` (host side: which packed access a launch may use).
inline bool aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// ---- dependent launches ------------------------------------------------------------------------

// Note [dependent launches]
// A kernel queued behind another starts only once that one has completed and its writes are
// flushed, and then pays its own launch (its blocks scheduled, its parameters loaded) with the GPU
// idle: about a microsecond between back-to-back kernels on an H200, a tenth of a 10 us
// convolution (docs/benchmarks.md, "Kernel design measurements"). From compute capability 9.0 a
// launch may carry programmatic stream serialization: the kernel may then begin while its
// predecessor's last blocks finish, and griddepcontrol.wait holds it until every grid before it
// has completed and its memory is visible. So each kernel of the depthwise, grouped and
// narrow-channel convolutions (and the split reduction they share) waits so before its first
// global memory access, and launch() adds the attribute when the queue allows it (the cudnn
// backend's Runtime::kernel_queue(): DNNX_CUDNN_DEPENDENT_LAUNCHES, on by default, sm_90 and
// later). The wait is at the kernel's start, before its reads and its writes alike: a kernel
// cannot know which of its inputs the previous kernel writes, nor whether that kernel still reads
// what this one overwrites (a workspace reused by the next call). A kernel launched without the
// attribute passes the wait at once.
// No kernel here triggers its dependents early (griddepcontrol.launch_dependents): the next
// kernel's launch overlaps only this one's last blocks. cuDNN's and cuBLASLt's kernels are
// launched by those libraries, without the attribute.

// Waits until the grids this one depends on have completed and their writes are visible (Note
// [dependent launches]); a no-op before sm_90 and for a launch without the attribute.
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// `kernel`<<<grid, block, shared_bytes, queue.stream>>>(args...), with programmatic stream
// serialization when queue.dependent (Note [dependent launches]): the kernel must call
// wait_for_prior_grids() before its first global memory access. Returns the launch status.
template <typename... Params, typename... Args>
cudaError_t launch(const Queue& queue, void (*kernel)(Params...), dim3 grid, dim3 block,
                   std::size_t shared_bytes, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = queue.stream;
  config.attrs = queue.dependent ? &attribute : nullptr;
  config.numAttrs = queue.dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// ---- conversions --------------------------------------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Rounds to nearest even into the storage type.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// V consecutive elements, loaded and stored as one aligned access (16 bytes for the widest V).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// ---- warp reductions (butterfly: every lane gets the result, in a fixed order) ------------------

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// ---- online softmax -----------------------------------------------------------------------------

// sum * exp(max - m) for a running pair; an empty pair (max -inf) is 0 and a NaN sum stays NaN.
__device__ __forceinline__ float rescaled(float sum, float max, float m) {
  return max == -INFINITY ? sum * 0.0f : sum * expf(max - m);
}

// A running (max, sum of exp(x - max)). -inf elements contribute nothing; a NaN element makes the
// sum NaN, which every later step keeps (fmaxf alone would drop it).
struct Running {
  float max = -INFINITY;
  float sum = 0.0f;
  __device__ __forceinline__ void add(float x) {
    if (x != x) {
      sum = x;
    } else if (x > max) {
      sum = rescaled(sum, max, x) + 1.0f;
      max = x;
    } else if (x != -INFINITY) {
      sum += expf(x - max);
    }
  }
  __device__ __forceinline__ void merge(float other_max, float other_sum) {
    const float m = fmaxf(max, other_max);
    sum = rescaled(sum, max, m) + rescaled(other_sum, other_max, m);
    max = m;
  }
};

// The warp's merge, same result in every lane.
__device__ __forceinline__ Running warp_merge(Running r) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2) {
    const float m = __shfl_xor_sync(0xffffffffu, r.max, offset);
    const float s = __shfl_xor_sync(0xffffffffu, r.sum, offset);
    r.merge(m, s);
  }
  return r;
}

// The whole block's merge (a 1-D block of at most BlockThreads threads), same result in every
// thread: warps merge by shuffles, then the first warp's lanes merge the warps' pairs in warp
// order. Every thread of the block must call it.
template <int BlockThreads>
__device__ inline Running block_merge(Running r) {
  __shared__ float maxes[BlockThreads / warp_size];
  __shared__ float sums[BlockThreads / warp_size];
  const int lane = threadIdx.x % warp_size;
  const int warp = threadIdx.x / warp_size;
  r = warp_merge(r);
  if (lane == 0) {
    maxes[warp] = r.max;
    sums[warp] = r.sum;
  }
  __syncthreads();
  Running total;
  if (lane < blockDim.x / warp_size) {
    total.max = maxes[lane];
    total.sum = sums[lane];
  }
  total = warp_merge(total);
  __syncthreads();  // the arrays are reused by the next group
  return total;
}

}  // namespace dnnx::cudnn::kernels
