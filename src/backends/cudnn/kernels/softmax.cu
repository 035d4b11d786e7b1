// Softmax / log-softmax kernels (cudnn:kernel:softmax). Every group is max-subtracted (accurate)
// and computed in f32 whatever the storage type; log-softmax is (x - max) - log(sum), never
// x - (max + log(sum)) (Note [log-softmax shift] in backends/onednn/softmax.cpp).
//
// Note [softmax kernel shapes]
// Three kernels cover every (outer, axis, inner):
//   warp    inner 1, axis <= 1024: one warp per group, the group held in registers (N values per
//           lane, N the smallest power of two with 32 N >= axis), so the input is read once and
//           the output written once; four groups per 128-thread block. This is the N x C case
//           (e.g. 64 x 1000 classes: 64 warps, 32 values per lane) and channel mode on nhwc.
//   block   inner 1, axis > 1024: one 512-thread block per group; each thread keeps a running
//           (max, sum of exp) over its strided elements (one read), the pairs are merged across
//           the block, and a second pass (mostly from L2) writes the output.
//   column  inner > 1 (channel mode on nchw with spatial dims): one thread per (o, i) group,
//           adjacent threads on adjacent positions so every load is coalesced; a running
//           (max, sum) pass, then the writing pass. Also groups of at most 8 contiguous values
//           (e.g. nhwc with few channels), whose rows adjacent threads read from shared lines.
// Each output element is written by the thread that read its input last, after the group's
// reduction is complete, so dst may be src. Reductions go through warp shuffles in a fixed
// butterfly order and shared memory in warp order: results are bitwise reproducible.

#include "backends/cudnn/kernels/softmax.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int warp_rows_per_block = 4;
constexpr int block_threads = 512;
constexpr int column_threads = 256;
constexpr std::int64_t max_blocks = std::int64_t{1} << 20;  // grid-stride beyond this

__device__ float block_sum(float v) {
  __shared__ float sums[block_threads / warp_size];
  const int lane = threadIdx.x % warp_size;
  const int warp = threadIdx.x / warp_size;
  v = warp_sum(v);
  if (lane == 0) sums[warp] = v;
  __syncthreads();
  float total = lane < blockDim.x / warp_size ? sums[lane] : 0.0f;
  total = warp_sum(total);
  __syncthreads();
  return total;
}

// ---- forward -------------------------------------------------------------------------------

template <typename T, int N, bool Log>
__global__ void __launch_bounds__(warp_size* warp_rows_per_block)
    warp_forward(const T* src, T* dst, std::int64_t rows, int axis) {
  const int lane = threadIdx.x;
  for (std::int64_t row = blockIdx.x * std::int64_t{warp_rows_per_block} + threadIdx.y; row < rows;
       row += std::int64_t{gridDim.x} * warp_rows_per_block) {
    const T* x = src + row * axis;
    T* y = dst + row * axis;
    float v[N];
    float max = -INFINITY;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int c = lane + k * warp_size;
      v[k] = c < axis ? to_float(x[c]) : -INFINITY;
      max = fmaxf(max, v[k]);
    }
    max = warp_max(max);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int c = lane + k * warp_size;
      if (c < axis) {
        const float e = expf(v[k] - max);
        sum += e;
        if (!Log) v[k] = e;
      }
    }
    sum = warp_sum(sum);
    const float log_sum = Log ? logf(sum) : 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int c = lane + k * warp_size;
      if (c < axis) y[c] = from_float<T>(Log ? (v[k] - max) - log_sum : v[k] / sum);
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(block_threads)
    block_forward(const T* src, T* dst, std::int64_t rows, std::int64_t axis) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = src + row * axis;
    T* y = dst + row * axis;
    Running r;
    for (std::int64_t c = threadIdx.x; c < axis; c += blockDim.x) r.add(to_float(x[c]));
    const Running total = block_merge<block_threads>(r);
    const float log_sum = logf(total.sum);
    for (std::int64_t c = threadIdx.x; c < axis; c += blockDim.x) {
      const float shifted = to_float(x[c]) - total.max;
      y[c] = from_float<T>(Log ? shifted - log_sum : expf(shifted) / total.sum);
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(column_threads)
    column_forward(const T* src, T* dst, std::int64_t outer, std::int64_t axis,
                   std::int64_t inner) {
  const std::int64_t groups = outer * inner;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < groups;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t first = (g / inner) * axis * inner + g % inner;
    Running r;
    for (std::int64_t a = 0; a < axis; ++a) r.add(to_float(src[first + a * inner]));
    const float log_sum = logf(r.sum);
    for (std::int64_t a = 0; a < axis; ++a) {
      const std::int64_t k = first + a * inner;
      const float shifted = to_float(src[k]) - r.max;
      dst[k] = from_float<T>(Log ? shifted - log_sum : expf(shifted) / r.sum);
    }
  }
}

// ---- backward ------------------------------------------------------------------------------
// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy).

template <typename T, int N, bool Log>
__global__ void __launch_bounds__(warp_size* warp_rows_per_block)
    warp_backward(const T* dst, const T* diff_dst, T* diff_src, std::int64_t rows, int axis) {
  const int lane = threadIdx.x;
  for (std::int64_t row = blockIdx.x * std::int64_t{warp_rows_per_block} + threadIdx.y; row < rows;
       row += std::int64_t{gridDim.x} * warp_rows_per_block) {
    const std::int64_t base = row * axis;
    float y[N];
    float dy[N];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int c = lane + k * warp_size;
      y[k] = c < axis ? to_float(dst[base + c]) : 0.0f;
      dy[k] = c < axis ? to_float(diff_dst[base + c]) : 0.0f;
      sum += Log ? dy[k] : dy[k] * y[k];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int c = lane + k * warp_size;
      if (c < axis)
        diff_src[base + c] = from_float<T>(Log ? dy[k] - expf(y[k]) * sum : y[k] * (dy[k] - sum));
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(block_threads)
    block_backward(const T* dst, const T* diff_dst, T* diff_src, std::int64_t rows,
                   std::int64_t axis) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t base = row * axis;
    float partial = 0.0f;
    for (std::int64_t c = threadIdx.x; c < axis; c += blockDim.x) {
      const float dy = to_float(diff_dst[base + c]);
      partial += Log ? dy : dy * to_float(dst[base + c]);
    }
    const float sum = block_sum(partial);
    for (std::int64_t c = threadIdx.x; c < axis; c += blockDim.x) {
      const float y = to_float(dst[base + c]);
      const float dy = to_float(diff_dst[base + c]);
      diff_src[base + c] = from_float<T>(Log ? dy - expf(y) * sum : y * (dy - sum));
    }
  }
}

template <typename T, bool Log>
__global__ void __launch_bounds__(column_threads)
    column_backward(const T* dst, const T* diff_dst, T* diff_src, std::int64_t outer,
                    std::int64_t axis, std::int64_t inner) {
  const std::int64_t groups = outer * inner;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < groups;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t first = (g / inner) * axis * inner + g % inner;
    float sum = 0.0f;
    for (std::int64_t a = 0; a < axis; ++a) {
      const std::int64_t k = first + a * inner;
      const float dy = to_float(diff_dst[k]);
      sum += Log ? dy : dy * to_float(dst[k]);
    }
    for (std::int64_t a = 0; a < axis; ++a) {
      const std::int64_t k = first + a * inner;
      const float y = to_float(dst[k]);
      const float dy = to_float(diff_dst[k]);
      diff_src[k] = from_float<T>(Log ? dy - expf(y) * sum : y * (dy - sum));
    }
  }
}

// ---- launch --------------------------------------------------------------------------------

enum class Shape { warp, block, column };

// Groups of at most `thread_max_axis` contiguous values go one per thread (the column kernel with
// inner 1): a warp per group would leave most of its lanes idle.
constexpr std::int64_t thread_max_axis = 8;

Shape shape_of(const SoftmaxShape& s) {
  if (s.inner > 1 || s.axis <= thread_max_axis) return Shape::column;
  return s.axis <= 1024 ? Shape::warp : Shape::block;
}

// Registers per lane of the warp kernel: the smallest power of two with 32 N >= axis.
int values_per_lane(std::int64_t axis) {
  int n = 1;
  while (n * warp_size < axis) n *= 2;
  return n;
}

unsigned grid_of(std::int64_t work, std::int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((work + per_block - 1) / per_block, 1, max_blocks));
}

// The kernel function (for priming) and its launch, for one storage type and mode.
template <typename T, bool Log>
struct Launcher {
  template <int N>
  static const void* warp_kernel(bool backward) {
    return backward ? reinterpret_cast<const void*>(&warp_backward<T, N, Log>)
                    : reinterpret_cast<const void*>(&warp_forward<T, N, Log>);
  }
  static const void* kernel(const SoftmaxShape& s, bool backward) {
    switch (shape_of(s)) {
      case Shape::warp:
        switch (values_per_lane(s.axis)) {
          case 1: return warp_kernel<1>(backward);
          case 2: return warp_kernel<2>(backward);
          case 4: return warp_kernel<4>(backward);
          case 8: return warp_kernel<8>(backward);
          case 16: return warp_kernel<16>(backward);
          default: return warp_kernel<32>(backward);
        }
      case Shape::block:
        return backward ? reinterpret_cast<const void*>(&block_backward<T, Log>)
                        : reinterpret_cast<const void*>(&block_forward<T, Log>);
      case Shape::column:
        return backward ? reinterpret_cast<const void*>(&column_backward<T, Log>)
                        : reinterpret_cast<const void*>(&column_forward<T, Log>);
    }
    return nullptr;
  }

  template <int N>
  static void warp(const SoftmaxShape& s, const void* a, const void* b, void* out, bool backward,
                   cudaStream_t stream) {
    const dim3 block(warp_size, warp_rows_per_block);
    const unsigned grid = grid_of(s.outer, warp_rows_per_block);
    const int axis = static_cast<int>(s.axis);
    if (backward) {
      warp_backward<T, N, Log><<<grid, block, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), s.outer, axis);
    } else {
      warp_forward<T, N, Log><<<grid, block, 0, stream>>>(static_cast<const T*>(a),
                                                          static_cast<T*>(out), s.outer, axis);
    }
  }

  // Forward: a = src; backward: a = dst, b = diff_dst.
  static void launch(const SoftmaxShape& s, const void* a, const void* b, void* out, bool backward,
                     cudaStream_t stream) {
    switch (shape_of(s)) {
      case Shape::warp:
        switch (values_per_lane(s.axis)) {
          case 1: return warp<1>(s, a, b, out, backward, stream);
          case 2: return warp<2>(s, a, b, out, backward, stream);
          case 4: return warp<4>(s, a, b, out, backward, stream);
          case 8: return warp<8>(s, a, b, out, backward, stream);
          case 16: return warp<16>(s, a, b, out, backward, stream);
          default: return warp<32>(s, a, b, out, backward, stream);
        }
      case Shape::block: {
        const unsigned grid = grid_of(s.outer, 1);
        if (backward) {
          block_backward<T, Log><<<grid, block_threads, 0, stream>>>(
              static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), s.outer,
              s.axis);
        } else {
          block_forward<T, Log><<<grid, block_threads, 0, stream>>>(
              static_cast<const T*>(a), static_cast<T*>(out), s.outer, s.axis);
        }
        return;
      }
      case Shape::column: {
        const unsigned grid = grid_of(s.outer * s.inner, column_threads);
        if (backward) {
          column_backward<T, Log><<<grid, column_threads, 0, stream>>>(
              static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), s.outer,
              s.axis, s.inner);
        } else {
          column_forward<T, Log><<<grid, column_threads, 0, stream>>>(
              static_cast<const T*>(a), static_cast<T*>(out), s.outer, s.axis, s.inner);
        }
        return;
      }
    }
  }
};

template <typename F>
cudaError_t dispatch(Element element, bool log, F&& f) {
  switch (element) {
    case Element::f32: return log ? f(Launcher<float, true>{}) : f(Launcher<float, false>{});
    case Element::f16: return log ? f(Launcher<__half, true>{}) : f(Launcher<__half, false>{});
    case Element::bf16:
      return log ? f(Launcher<__nv_bfloat16, true>{}) : f(Launcher<__nv_bfloat16, false>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t softmax_forward(Element element, bool log, const void* src, void* dst,
                            const SoftmaxShape& shape, cudaStream_t stream) {
  if (shape.outer * shape.inner == 0 || shape.axis == 0) return cudaSuccess;
  return dispatch(element, log, [&](auto launcher) {
    launcher.launch(shape, src, nullptr, dst, false, stream);
    return cudaGetLastError();
  });
}

cudaError_t softmax_backward(Element element, bool log, const void* dst, const void* diff_dst,
                             void* diff_src, const SoftmaxShape& shape, cudaStream_t stream) {
  if (shape.outer * shape.inner == 0 || shape.axis == 0) return cudaSuccess;
  return dispatch(element, log, [&](auto launcher) {
    launcher.launch(shape, dst, diff_dst, diff_src, true, stream);
    return cudaGetLastError();
  });
}

cudaError_t softmax_prime(Element element, bool log, const SoftmaxShape& shape) {
  return dispatch(element, log, [&](auto launcher) {
    for (const bool backward : {false, true}) {
      cudaFuncAttributes attributes{};
      const cudaError_t status =
          cudaFuncGetAttributes(&attributes, launcher.kernel(shape, backward));
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  });
}

}  // namespace dnnx::cudnn::kernels
