// The cudnn backend's argmax and accuracy-count kernels.
//
// Note [argmax kernels]
// Argmax: when the searched axis is innermost in memory (inner = 1) a warp takes a line, its
// lanes every 32nd element, and the lanes' (value, index) pairs meet by a butterfly that keeps the
// larger value and, on a tie, the smaller index: the first index of the largest, whatever the
// order of meeting. Otherwise a thread takes a line, and neighbouring threads read neighbouring
// elements. Accuracy: a warp takes a position and its lanes count the classes ranking above the
// label (Note [label rank]); each block adds its correct positions into a 64-bit counter in the
// workspace (integer atomics: exact in any order), and one last thread writes the count and the
// lowest bad position found. Nothing is synchronized with the host.

#include "backends/cudnn/kernels/argmax.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::argmax {
namespace {

constexpr int block_threads = 256;
constexpr int block_warps = block_threads / warp_size;
constexpr std::int64_t max_grid = std::int64_t{1} << 20;  // grid-stride loops do the rest
constexpr unsigned long long no_position = ~0ull;

// The workspace of an accuracy call.
struct AccuracyScratch {
  unsigned long long correct;
  unsigned long long bad_position;
};

__device__ __forceinline__ bool ranks_above(float a, float b) {
  return (a != a && b == b) || a > b;
}
__device__ __forceinline__ bool ties_with(float a, float b) { return a == b || (a != a && b != b); }

// Whether (v, i) wins over (best, best_index): larger, or as large and earlier.
__device__ __forceinline__ bool wins(float v, std::int64_t i, float best, std::int64_t best_index) {
  return ranks_above(v, best) || (ties_with(v, best) && i < best_index);
}

__device__ __forceinline__ void store_index(void* dst, std::int64_t line, std::int64_t index,
                                            bool index64) {
  if (index64) {
    static_cast<long long*>(dst)[line] = index;
  } else {
    static_cast<int*>(dst)[line] = static_cast<int>(index);
  }
}

// Note [argmax kernels]: inner = 1, a warp per line.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    warp_argmax_kernel(const T* src, void* dst, Lines lines, bool index64) {
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  for (std::int64_t line = static_cast<std::int64_t>(blockIdx.x) * block_warps +
                           static_cast<std::int64_t>(threadIdx.x) / warp_size;
       line < lines.outer; line += static_cast<std::int64_t>(gridDim.x) * block_warps) {
    const T* row = src + line * lines.axis;
    float best = -INFINITY;
    std::int64_t best_index = LLONG_MAX;  // no element yet: any element wins
    for (std::int64_t a = lane; a < lines.axis; a += warp_size) {
      const float v = to_float(row[a]);
      if (best_index == LLONG_MAX || ranks_above(v, best)) {
        best = v;
        best_index = a;
      }
    }
    for (int offset = warp_size / 2; offset > 0; offset /= 2) {
      const float v = __shfl_xor_sync(0xffffffffu, best, offset);
      const std::int64_t i = __shfl_xor_sync(0xffffffffu, best_index, offset);
      if (i != LLONG_MAX && (best_index == LLONG_MAX || wins(v, i, best, best_index))) {
        best = v;
        best_index = i;
      }
    }
    if (lane == 0) store_index(dst, line, best_index, index64);
  }
}

// Note [argmax kernels]: inner > 1, a thread per line.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    thread_argmax_kernel(const T* src, void* dst, Lines lines, bool index64) {
  const std::int64_t count = lines.outer * lines.inner;
  for (std::int64_t line = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       line < count; line += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    const std::int64_t o = line / lines.inner;
    const T* base = src + o * lines.axis * lines.inner + (line - o * lines.inner);
    float best = to_float(base[0]);
    std::int64_t best_index = 0;
    for (std::int64_t a = 1; a < lines.axis; ++a) {
      const float v = to_float(base[a * lines.inner]);
      if (ranks_above(v, best)) {
        best = v;
        best_index = a;
      }
    }
    store_index(dst, line, best_index, index64);
  }
}

// Note [argmax kernels]: a warp per position.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    accuracy_kernel(const T* logits, const void* labels, AccuracyParams p,
                    AccuracyScratch* scratch) {
  __shared__ unsigned long long block_correct;
  if (threadIdx.x == 0) block_correct = 0;
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const Lines l = p.lines;
  const std::int64_t positions = l.outer * l.inner;
  unsigned long long correct = 0;
  for (std::int64_t pos = static_cast<std::int64_t>(blockIdx.x) * block_warps +
                          static_cast<std::int64_t>(threadIdx.x) / warp_size;
       pos < positions; pos += static_cast<std::int64_t>(gridDim.x) * block_warps) {
    const std::int64_t y = p.label64 ? static_cast<const long long*>(labels)[pos]
                                     : static_cast<const int*>(labels)[pos];
    if (y == p.ignore_index) continue;
    if (y < 0 || y >= l.axis) {
      if (lane == 0) atomicMin(&scratch->bad_position, static_cast<unsigned long long>(pos));
      continue;
    }
    const std::int64_t o = pos / l.inner;
    const T* base = logits + o * l.axis * l.inner + (pos - o * l.inner);
    const float label_logit = to_float(base[y * l.inner]);
    long long rank = 0;
    for (std::int64_t c = lane; c < l.axis; c += warp_size) {
      const float v = to_float(base[c * l.inner]);
      if (ranks_above(v, label_logit) || (c < y && ties_with(v, label_logit))) ++rank;
    }
    rank = warp_sum(rank);
    if (lane == 0 && rank < p.top_k) ++correct;
  }
  if (correct > 0) atomicAdd(&block_correct, correct);
  __syncthreads();
  if (threadIdx.x == 0 && block_correct > 0) atomicAdd(&scratch->correct, block_correct);
}

// One thread: the count and the bad-label report.
__global__ void accuracy_finish_kernel(const void* labels, AccuracyParams p,
                                       const AccuracyScratch* scratch, void* count,
                                       BadValueReport* report) {
  const unsigned long long correct = scratch->correct;
  if (p.count_f32) {
    float* out = static_cast<float*>(count);
    *out = (p.accumulate ? *out : 0.0f) + static_cast<float>(correct);
  } else {
    long long* out = static_cast<long long*>(count);
    *out = (p.accumulate ? *out : 0) + static_cast<long long>(correct);
  }
  const unsigned long long bad = scratch->bad_position;
  if (bad != no_position) {
    const auto pos = static_cast<std::int64_t>(bad);
    report->value = p.label64 ? static_cast<const long long*>(labels)[pos]
                              : static_cast<const int*>(labels)[pos];
    __threadfence_system();
    report->position = pos;
  }
}

unsigned grid_for(std::int64_t items, std::int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((items + per_block - 1) / per_block, 1, max_grid));
}

template <typename T>
cudaError_t argmax_typed(const Lines& lines, const void* src, void* dst, bool index64,
                         cudaStream_t stream) {
  if (lines.inner == 1) {
    warp_argmax_kernel<T><<<grid_for(lines.outer, block_warps), block_threads, 0, stream>>>(
        static_cast<const T*>(src), dst, lines, index64);
  } else {
    thread_argmax_kernel<T>
        <<<grid_for(lines.outer * lines.inner, block_threads), block_threads, 0, stream>>>(
            static_cast<const T*>(src), dst, lines, index64);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t accuracy_typed(const AccuracyParams& p, const void* logits, const void* labels,
                           void* count, AccuracyScratch* scratch, BadValueReport* report,
                           cudaStream_t stream) {
  if (const cudaError_t status =
          cudaMemsetAsync(&scratch->correct, 0, sizeof scratch->correct, stream);
      status != cudaSuccess) {
    return status;
  }
  if (const cudaError_t status =
          cudaMemsetAsync(&scratch->bad_position, 0xff, sizeof scratch->bad_position, stream);
      status != cudaSuccess) {
    return status;
  }
  accuracy_kernel<T>
      <<<grid_for(p.lines.outer * p.lines.inner, block_warps), block_threads, 0, stream>>>(
          static_cast<const T*>(logits), labels, p, scratch);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  accuracy_finish_kernel<<<1, 1, 0, stream>>>(labels, p, scratch, count, report);
  return cudaGetLastError();
}

}  // namespace

cudaError_t argmax(Element element, const Lines& lines, const void* src, void* dst, bool index64,
                   cudaStream_t stream) {
  switch (element) {
    case Element::f32: return argmax_typed<float>(lines, src, dst, index64, stream);
    case Element::f16: return argmax_typed<__half>(lines, src, dst, index64, stream);
    case Element::bf16: return argmax_typed<__nv_bfloat16>(lines, src, dst, index64, stream);
  }
  return cudaErrorInvalidValue;
}

std::size_t accuracy_workspace() { return sizeof(AccuracyScratch); }

cudaError_t accuracy(const AccuracyParams& params, const void* logits, const void* labels,
                     void* count, void* workspace, BadValueReport* report, cudaStream_t stream) {
  if (workspace == nullptr || report == nullptr) return cudaErrorInvalidValue;
  auto* scratch = static_cast<AccuracyScratch*>(workspace);
  switch (params.element) {
    case Element::f32:
      return accuracy_typed<float>(params, logits, labels, count, scratch, report, stream);
    case Element::f16:
      return accuracy_typed<__half>(params, logits, labels, count, scratch, report, stream);
    case Element::bf16:
      return accuracy_typed<__nv_bfloat16>(params, logits, labels, count, scratch, report, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::argmax
