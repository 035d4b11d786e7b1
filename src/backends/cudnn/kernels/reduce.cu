// The cudnn backend's reduction kernels.
//
// Note [reduce kernels]
// Forward: one warp per (dst element, chunk of its group). The warp's lanes take every 32nd
// element of the chunk (consecutive elements lie side by side in memory when the innermost axis is
// reduced), find each one's src offset by dividing its index by the reduced sizes, and accumulate
// in f32; the lanes then combine by a butterfly in a fixed order. When there are too few dst
// elements to fill the GPU, each group is split into chunks whose f32 partials go to the workspace
// and a last kernel combines them in chunk order. The order of every operation is fixed by (shape,
// SM count): bitwise reproducible. max and min propagate NaN (torch.amax / amin).
// Backward: one thread per src element, in memory order; its dst element follows from its index
// and dst's strides (0 on reduced axes). max and min first count each group's ties with dst
// (integer atomics: exact, order-free) into the workspace (Note [tied extrema] in
// core/reduce_args.hpp).

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/reduce.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::reduce {
namespace {

constexpr int block_threads = 256;
constexpr int block_warps = block_threads / warp_size;
constexpr std::int64_t max_grid = std::int64_t{1} << 20;  // grid-stride loops do the rest

__device__ __forceinline__ std::int64_t group_base(const Geometry& g, std::int64_t o) {
  std::int64_t offset = 0;
  for (int d = g.kept_rank - 1; d >= 0; --d) {
    offset += (o % g.kept_sizes[d]) * g.kept_strides[d];
    o /= g.kept_sizes[d];
  }
  return offset;
}

__device__ __forceinline__ std::int64_t element_offset(const Geometry& g, std::int64_t r) {
  if (g.reduced_rank == 1) return r * g.reduced_strides[0];
  std::int64_t offset = 0;
  for (int d = g.reduced_rank - 1; d >= 0; --d) {
    offset += (r % g.reduced_sizes[d]) * g.reduced_strides[d];
    r /= g.reduced_sizes[d];
  }
  return offset;
}

// The dst offset of src element `i` (memory order).
__device__ __forceinline__ std::int64_t dst_offset(const Geometry& g, std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    offset += (i % g.sizes[d]) * g.dst_strides[d];
    i /= g.sizes[d];
  }
  return offset;
}

// NaN wins.
__device__ __forceinline__ float nan_max(float a, float b) {
  return a != a ? a : b != b ? b : fmaxf(a, b);
}
__device__ __forceinline__ float nan_min(float a, float b) {
  return a != a ? a : b != b ? b : fminf(a, b);
}

template <int K>
__device__ __forceinline__ float initial() {
  if constexpr (K == static_cast<int>(Kind::max)) return -INFINITY;
  if constexpr (K == static_cast<int>(Kind::min)) return INFINITY;
  return 0.0f;
}

// One element into a running value.
template <int K>
__device__ __forceinline__ float accumulate(float acc, float x) {
  if constexpr (K == static_cast<int>(Kind::max)) return nan_max(acc, x);
  if constexpr (K == static_cast<int>(Kind::min)) return nan_min(acc, x);
  if constexpr (K == static_cast<int>(Kind::norm1)) return acc + fabsf(x);
  if constexpr (K == static_cast<int>(Kind::norm2)) return acc + x * x;
  return acc + x;
}

// Two running values into one.
template <int K>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (K == static_cast<int>(Kind::max)) return nan_max(a, b);
  if constexpr (K == static_cast<int>(Kind::min)) return nan_min(a, b);
  return a + b;
}

template <int K>
__device__ __forceinline__ float finish(float acc, std::int64_t count) {
  if constexpr (K == static_cast<int>(Kind::mean)) return acc / static_cast<float>(count);
  if constexpr (K == static_cast<int>(Kind::norm2)) return sqrtf(acc);
  return acc;
}

// Note [reduce kernels]: item = chunk * outputs + dst element, one per warp.
template <typename T, int K>
__global__ void __launch_bounds__(block_threads)
    partial_kernel(const T* src, T* dst, float* partial, Geometry g, std::int64_t chunks,
                   std::int64_t per_chunk) {
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const std::int64_t items = chunks * g.outputs;
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * block_warps +
                           static_cast<std::int64_t>(threadIdx.x) / warp_size;
       item < items; item += static_cast<std::int64_t>(gridDim.x) * block_warps) {
    const std::int64_t chunk = item / g.outputs;
    const std::int64_t o = item - chunk * g.outputs;
    const std::int64_t begin = chunk * per_chunk;
    const std::int64_t end = begin + per_chunk < g.count ? begin + per_chunk : g.count;
    const std::int64_t base = group_base(g, o);
    float acc = initial<K>();
    for (std::int64_t r = begin + lane; r < end; r += warp_size)
      acc = accumulate<K>(acc, to_float(src[base + element_offset(g, r)]));
    for (int offset = warp_size / 2; offset > 0; offset /= 2)
      acc = combine<K>(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    if (lane == 0) {
      if (chunks == 1) {
        dst[o] = from_float<T>(finish<K>(acc, g.count));
      } else {
        partial[item] = acc;
      }
    }
  }
}

// Combines the chunks' partials of each dst element in chunk order.
template <typename T, int K>
__global__ void __launch_bounds__(block_threads)
    finalize_kernel(const float* partial, T* dst, Geometry g, std::int64_t chunks) {
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       o < g.outputs; o += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    float acc = initial<K>();
    for (std::int64_t c = 0; c < chunks; ++c) acc = combine<K>(acc, partial[c * g.outputs + o]);
    dst[o] = from_float<T>(finish<K>(acc, g.count));
  }
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    ties_kernel(const T* src, const T* dst, unsigned long long* ties, Geometry g, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    const std::int64_t o = dst_offset(g, i);
    if (to_float(src[i]) == to_float(dst[o])) atomicAdd(&ties[o], 1ull);
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(block_threads)
    backward_kernel(const T* src, const T* dst, const T* diff_dst, T* diff_src,
                    const unsigned long long* ties, Geometry g, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    const std::int64_t o = dst_offset(g, i);
    const float dy = to_float(diff_dst[o]);
    float value = dy;
    if constexpr (K == static_cast<int>(Kind::mean)) {
      value = dy / static_cast<float>(g.count);
    } else if constexpr (K == static_cast<int>(Kind::max) || K == static_cast<int>(Kind::min)) {
      value = to_float(src[i]) == to_float(dst[o]) ? dy / static_cast<float>(ties[o]) : 0.0f;
    } else if constexpr (K == static_cast<int>(Kind::norm1)) {
      const float x = to_float(src[i]);
      value = x > 0.0f ? dy : x < 0.0f ? -dy : 0.0f;
    } else if constexpr (K == static_cast<int>(Kind::norm2)) {
      const float y = to_float(dst[o]);
      value = y == 0.0f ? 0.0f : to_float(src[i]) / y * dy;
    }
    diff_src[i] = from_float<T>(value);
  }
}

unsigned grid_for(std::int64_t items, std::int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((items + per_block - 1) / per_block, 1, max_grid));
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Note [reduce kernels]: chunks per group, enough warps to fill the GPU a few times over, each
// chunk long enough to be worth a warp.
std::int64_t chunks_of(const Geometry& g, int sm_count) {
  const std::int64_t target_warps =
      4 * static_cast<std::int64_t>(block_warps) * std::max(sm_count, 1);
  const std::int64_t wanted = std::clamp<std::int64_t>(ceil_div(target_warps, g.outputs), 1,
                                                       std::max<std::int64_t>(g.count / 1024, 1));
  const std::int64_t per_chunk = ceil_div(g.count, std::min<std::int64_t>(wanted, 4096));
  return ceil_div(g.count, per_chunk);
}

template <typename T, int K>
cudaError_t forward_kind(const Geometry& g, const void* src, void* dst, void* workspace,
                         int sm_count, cudaStream_t stream) {
  const std::int64_t chunks = chunks_of(g, sm_count);
  const std::int64_t per_chunk = ceil_div(g.count, chunks);
  auto* partial = static_cast<float*>(workspace);
  partial_kernel<T, K><<<grid_for(chunks * g.outputs, block_warps), block_threads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), partial, g, chunks, per_chunk);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (chunks > 1) {
    finalize_kernel<T, K><<<grid_for(g.outputs, block_threads), block_threads, 0, stream>>>(
        partial, static_cast<T*>(dst), g, chunks);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t forward_typed(Kind kind, const Geometry& g, const void* src, void* dst, void* workspace,
                          int sm_count, cudaStream_t stream) {
  switch (kind) {
    case Kind::sum: return forward_kind<T, 0>(g, src, dst, workspace, sm_count, stream);
    case Kind::mean: return forward_kind<T, 1>(g, src, dst, workspace, sm_count, stream);
    case Kind::max: return forward_kind<T, 2>(g, src, dst, workspace, sm_count, stream);
    case Kind::min: return forward_kind<T, 3>(g, src, dst, workspace, sm_count, stream);
    case Kind::norm1: return forward_kind<T, 4>(g, src, dst, workspace, sm_count, stream);
    case Kind::norm2: return forward_kind<T, 5>(g, src, dst, workspace, sm_count, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T, int K>
cudaError_t backward_kind(const Geometry& g, const void* src_raw, const void* dst_raw,
                          const void* diff_dst, void* diff_src, void* workspace,
                          cudaStream_t stream) {
  const std::int64_t n = g.outputs * g.count;
  const auto* src = static_cast<const T*>(src_raw);
  const auto* dst = static_cast<const T*>(dst_raw);
  auto* ties = static_cast<unsigned long long*>(workspace);
  if constexpr (K == static_cast<int>(Kind::max) || K == static_cast<int>(Kind::min)) {
    const std::size_t bytes = static_cast<std::size_t>(g.outputs) * sizeof(unsigned long long);
    if (const cudaError_t status = cudaMemsetAsync(ties, 0, bytes, stream); status != cudaSuccess)
      return status;
    ties_kernel<T><<<grid_for(n, block_threads), block_threads, 0, stream>>>(src, dst, ties, g, n);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  }
  backward_kernel<T, K><<<grid_for(n, block_threads), block_threads, 0, stream>>>(
      src, dst, static_cast<const T*>(diff_dst), static_cast<T*>(diff_src), ties, g, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_typed(Kind kind, const Geometry& g, const void* src, const void* dst,
                           const void* diff_dst, void* diff_src, void* workspace,
                           cudaStream_t stream) {
  switch (kind) {
    case Kind::sum: return backward_kind<T, 0>(g, src, dst, diff_dst, diff_src, workspace, stream);
    case Kind::mean: return backward_kind<T, 1>(g, src, dst, diff_dst, diff_src, workspace, stream);
    case Kind::max: return backward_kind<T, 2>(g, src, dst, diff_dst, diff_src, workspace, stream);
    case Kind::min: return backward_kind<T, 3>(g, src, dst, diff_dst, diff_src, workspace, stream);
    case Kind::norm1:
      return backward_kind<T, 4>(g, src, dst, diff_dst, diff_src, workspace, stream);
    case Kind::norm2:
      return backward_kind<T, 5>(g, src, dst, diff_dst, diff_src, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

std::size_t forward_workspace(const Geometry& g, int sm_count) {
  const std::int64_t chunks = chunks_of(g, sm_count);
  return chunks > 1 ? static_cast<std::size_t>(chunks * g.outputs) * sizeof(float) : 0;
}

std::size_t backward_workspace(Kind kind, const Geometry& g) {
  if (kind != Kind::max && kind != Kind::min) return 0;
  return static_cast<std::size_t>(g.outputs) * sizeof(unsigned long long);
}

cudaError_t forward(Element element, Kind kind, const Geometry& g, const void* src, void* dst,
                    void* workspace, int sm_count, cudaStream_t stream) {
  if (forward_workspace(g, sm_count) > 0 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (element) {
    case Element::f32: return forward_typed<float>(kind, g, src, dst, workspace, sm_count, stream);
    case Element::f16: return forward_typed<__half>(kind, g, src, dst, workspace, sm_count, stream);
    case Element::bf16:
      return forward_typed<__nv_bfloat16>(kind, g, src, dst, workspace, sm_count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t backward(Element element, Kind kind, const Geometry& g, const void* src,
                     const void* dst, const void* diff_dst, void* diff_src, void* workspace,
                     cudaStream_t stream) {
  if (backward_workspace(kind, g) > 0 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (element) {
    case Element::f32:
      return backward_typed<float>(kind, g, src, dst, diff_dst, diff_src, workspace, stream);
    case Element::f16:
      return backward_typed<__half>(kind, g, src, dst, diff_dst, diff_src, workspace, stream);
    case Element::bf16:
      return backward_typed<__nv_bfloat16>(kind, g, src, dst, diff_dst, diff_src, workspace,
                                           stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::reduce
