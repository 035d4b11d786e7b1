// The cudnn backend's batch-normalization kernels.
//
// Note [batch-norm kernel layouts]
// A statistic's values are laid out in one of two ways (kernels::batch_norm::Shape): planes
// (channels-first spatial data: N runs of S contiguous values per channel) or columns (channels-
// last spatial data, per-activation data, and channels-first data without spatial extent: an
// M x K row-major matrix, statistic k in column k). Planes are read by threads walking a run;
// columns by a warp reading 32 neighbouring statistics of a row, in 16-byte packs when K allows.
//
// Note [batch-norm kernel passes]
// Two-pass path (cudnn:kernel:bnorm, any shape): (1) a partial kernel sums, per statistic and per
// chunk of its values, what the statistics need: for a forward, s1 = sum (x - p) and
// s2 = sum (x - p)^2 around a pivot p, the statistic's first value, which every chunk shares, so
// chunks add up exactly like plain sums and the shift keeps s2 / n - (s1 / n)^2 free of the
// cancellation of raw sums of squares (Chan, Golub & LeVeque 1983); for a backward,
// s1 = sum dy and s2 = sum dy (x - mean). Sums are f64 per thread, reduced in a fixed order
// (warp shuffles, then warps in index order), and written per chunk; (2) a finalize kernel adds
// the chunks of each statistic in a fixed order, forms mean, variance, saved and running
// statistics (PyTorch's update, unbiased variance) or diff_scale / diff_shift, and the
// per-statistic coefficients of the output; (3) an apply kernel computes y = a x + b or
// dx = a dy + b x + c elementwise. Inference forwards skip (1) and (2): the coefficients come from
// the running statistics. The chunk count is fixed per plan from the shape and the GPU's size,
// so a plan's results do not depend on timing: the kernels are deterministic (no atomics).
// Fused path (cudnn:kernel:bnorm_fused, planes with at most fused_capacity() values per
// statistic, e.g. 7x7 spatial at batch 64): one block per statistic loads its values into
// registers once, reduces, and writes the outputs from the registers: one read of x (and dy) and
// one write, against two reads in the two-pass path.

#include "backends/cudnn/kernels/batch_norm.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace dnnx::cudnn::kernels::batch_norm {
namespace {

constexpr int block_threads = 256;
constexpr int fused_items = 16;     // values per thread in the fused path
constexpr int column_threads = 32;  // blockDim.x of the column kernels
constexpr int column_rows = 8;      // blockDim.y of the column kernels
constexpr std::size_t region_alignment = 256;

// Sums `a` and `b` over the block in a fixed order; the totals are valid in thread 0. `shared`
// holds 64 doubles. Every thread of the block must call it.
__device__ void block_sum2(double& a, double& b, double* shared) {
  const int tid = threadIdx.x + threadIdx.y * blockDim.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warps = (blockDim.x * blockDim.y + 31) / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, offset);
    b += __shfl_down_sync(0xffffffffu, b, offset);
  }
  if (lane == 0) {
    shared[warp] = a;
    shared[32 + warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    a = lane < warps ? shared[lane] : 0.0;
    b = lane < warps ? shared[32 + lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) {
      a += __shfl_down_sync(0xffffffffu, a, offset);
      b += __shfl_down_sync(0xffffffffu, b, offset);
    }
  }
}

// The value every chunk of statistic k shifts by (its first value).
template <typename T>
__device__ __forceinline__ double pivot_of(const T* x, unsigned k, unsigned run, bool planes) {
  return to_float(x[planes ? k * run : k]);
}

// ---- (1) partial sums
// -----------------------------------------------------------------------------

// Planes: block (k, chunk j) sums runs [r0, r1) of statistic k. `row_threads` threads share a run.
template <typename T, bool Gradient>
__global__ void partial_planes(const T* __restrict__ x, const T* __restrict__ dy,
                               const float* __restrict__ center, unsigned statistics, unsigned runs,
                               unsigned run, int splits, int row_threads,
                               double* __restrict__ partial) {
  __shared__ double shared[64];
  const unsigned k = blockIdx.x;
  const unsigned j = blockIdx.y;
  const unsigned r0 = static_cast<unsigned>(static_cast<std::uint64_t>(runs) * j / splits);
  const unsigned r1 = static_cast<unsigned>(static_cast<std::uint64_t>(runs) * (j + 1) / splits);
  const unsigned rows_per_pass = block_threads / row_threads;
  const unsigned row_lane = threadIdx.x / row_threads;
  const unsigned column = threadIdx.x % row_threads;
  const double c = Gradient ? static_cast<double>(center[k]) : pivot_of(x, k, run, true);
  double s1 = 0.0, s2 = 0.0;
  for (unsigned r = r0 + row_lane; r < r1; r += rows_per_pass) {
    const unsigned base = (r * statistics + k) * run;
    for (unsigned s = column; s < run; s += row_threads) {
      const double d = static_cast<double>(to_float(x[base + s])) - c;
      if constexpr (Gradient) {
        const double g = to_float(dy[base + s]);
        s1 += g;
        s2 += g * d;
      } else {
        s1 += d;
        s2 += d * d;
      }
    }
  }
  block_sum2(s1, s2, shared);
  if (threadIdx.x == 0) {
    partial[(static_cast<std::size_t>(j) * statistics + k) * 2] = s1;
    partial[(static_cast<std::size_t>(j) * statistics + k) * 2 + 1] = s2;
  }
}

// Columns: block (tile, chunk j), blockDim (32, 8); thread x owns statistics [c0, c0 + V), rows
// of chunk j are shared out over threadIdx.y and summed across it in a fixed order.
template <typename T, int V, bool Gradient>
__global__ void partial_columns(const T* __restrict__ x, const T* __restrict__ dy,
                                const float* __restrict__ center, unsigned statistics,
                                unsigned rows, int splits, double* __restrict__ partial) {
  __shared__ double shared[column_rows][column_threads * V];
  const unsigned c0 = (blockIdx.x * column_threads + threadIdx.x) * V;
  const unsigned j = blockIdx.y;
  const unsigned m0 = static_cast<unsigned>(static_cast<std::uint64_t>(rows) * j / splits);
  const unsigned m1 = static_cast<unsigned>(static_cast<std::uint64_t>(rows) * (j + 1) / splits);
  const bool active = c0 < statistics;
  double s1[V], s2[V], c[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s1[v] = 0.0;
    s2[v] = 0.0;
    c[v] = !active    ? 0.0
           : Gradient ? static_cast<double>(center[c0 + v])
                      : pivot_of(x, c0 + v, 1, false);
  }
  if (active) {
    for (unsigned m = m0 + threadIdx.y; m < m1; m += column_rows) {
      const unsigned offset = m * statistics + c0;
      const Pack<T, V> xs = *reinterpret_cast<const Pack<T, V>*>(x + offset);
      Pack<T, V> gs;
      if constexpr (Gradient) gs = *reinterpret_cast<const Pack<T, V>*>(dy + offset);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const double d = static_cast<double>(to_float(xs.v[v])) - c[v];
        if constexpr (Gradient) {
          const double g = to_float(gs.v[v]);
          s1[v] += g;
          s2[v] += g * d;
        } else {
          s1[v] += d;
          s2[v] += d * d;
        }
      }
    }
  }
  // Sum over threadIdx.y, s1 then s2, through shared memory.
  for (int which = 0; which < 2; ++which) {
#pragma unroll
    for (int v = 0; v < V; ++v)
      shared[threadIdx.y][threadIdx.x * V + v] = which == 0 ? s1[v] : s2[v];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        double total = 0.0;
        for (int y = 0; y < column_rows; ++y) total += shared[y][threadIdx.x * V + v];
        partial[(static_cast<std::size_t>(j) * statistics + c0 + v) * 2 + which] = total;
      }
    }
    __syncthreads();
  }
}

// ---- (2) finalize
// ---------------------------------------------------------------------------------

// Adds the chunks of statistic k = blockIdx.x * 32 + threadIdx.x: threadIdx.y takes chunks
// y, y + 8, ... and the eight lanes are added in order. Totals valid for threadIdx.y == 0.
__device__ void chunk_totals(const double* __restrict__ partial, unsigned statistics, int splits,
                             unsigned k, double& s1, double& s2) {
  __shared__ double shared[2][column_rows][column_threads];
  // Four independent sums per thread keep four loads in flight; they are added in a fixed order.
  constexpr int ways = 4;
  double as[ways] = {}, bs[ways] = {};
  if (k < statistics) {
    int j = threadIdx.y;
    for (; j + (ways - 1) * column_rows < splits; j += ways * column_rows) {
#pragma unroll
      for (int u = 0; u < ways; ++u) {
        const std::size_t at = (static_cast<std::size_t>(j + u * column_rows) * statistics + k) * 2;
        as[u] += partial[at];
        bs[u] += partial[at + 1];
      }
    }
    for (; j < splits; j += column_rows) {
      as[0] += partial[(static_cast<std::size_t>(j) * statistics + k) * 2];
      bs[0] += partial[(static_cast<std::size_t>(j) * statistics + k) * 2 + 1];
    }
  }
  const double a = (as[0] + as[1]) + (as[2] + as[3]);
  const double b = (bs[0] + bs[1]) + (bs[2] + bs[3]);
  shared[0][threadIdx.y][threadIdx.x] = a;
  shared[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  s1 = 0.0;
  s2 = 0.0;
  if (threadIdx.y == 0) {
    for (int y = 0; y < column_rows; ++y) {
      s1 += shared[0][y][threadIdx.x];
      s2 += shared[1][y][threadIdx.x];
    }
  }
}

struct Statistics {
  const float* scale;
  const float* shift;
  float* running_mean;
  float* running_var;
  float* saved_mean;
  float* saved_inv_std;
};

// Mean and biased variance of statistic k from its shifted sums; writes the saved and running
// statistics and returns y = a x + b's coefficients.
__device__ float2 finish_forward(unsigned k, double pivot, double s1, double s2, double count,
                                 double eps, double momentum, const Statistics& t) {
  const double shifted = s1 / count;
  const double mean = pivot + shifted;
  const double var = fmax(0.0, s2 / count - shifted * shifted);
  const double inv_std = 1.0 / sqrt(var + eps);
  if (t.saved_mean != nullptr) t.saved_mean[k] = static_cast<float>(mean);
  if (t.saved_inv_std != nullptr) t.saved_inv_std[k] = static_cast<float>(inv_std);
  if (t.running_mean != nullptr) {
    t.running_mean[k] = static_cast<float>((1.0 - momentum) * t.running_mean[k] + momentum * mean);
    t.running_var[k] = static_cast<float>((1.0 - momentum) * t.running_var[k] +
                                          momentum * var * count / (count - 1.0));
  }
  const double scale = t.scale != nullptr ? static_cast<double>(t.scale[k]) : 1.0;
  const double shift = t.shift != nullptr ? static_cast<double>(t.shift[k]) : 0.0;
  const double a = scale * inv_std;
  return make_float2(static_cast<float>(a), static_cast<float>(shift - mean * a));
}

template <typename T>
__global__ void finalize_forward(const T* __restrict__ x, unsigned statistics, unsigned run,
                                 bool planes, int splits, const double* __restrict__ partial,
                                 double count, double eps, double momentum, Statistics t,
                                 float2* __restrict__ coefficients) {
  const unsigned k = blockIdx.x * column_threads + threadIdx.x;
  double s1, s2;
  chunk_totals(partial, statistics, splits, k, s1, s2);
  if (threadIdx.y != 0 || k >= statistics) return;
  coefficients[k] = finish_forward(k, pivot_of(x, k, run, planes), s1, s2, count, eps, momentum, t);
}

// Inference: y = (x - running_mean) / sqrt(running_var + eps) * scale + shift = a x + b.
__global__ void coefficients_inference(unsigned statistics, double eps, Statistics t,
                                       float2* __restrict__ coefficients) {
  const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= statistics) return;
  const double inv_std = 1.0 / sqrt(static_cast<double>(t.running_var[k]) + eps);
  const double scale = t.scale != nullptr ? static_cast<double>(t.scale[k]) : 1.0;
  const double shift = t.shift != nullptr ? static_cast<double>(t.shift[k]) : 0.0;
  const double a = scale * inv_std;
  coefficients[k] =
      make_float2(static_cast<float>(a), static_cast<float>(shift - t.running_mean[k] * a));
}

struct Gradients {
  const float* scale;
  const float* saved_mean;
  const float* saved_inv_std;
  const float* running_mean;
  const float* running_var;
  float* diff_scale;
  float* diff_shift;
};

__device__ __forceinline__ double center_of(const Gradients& t, unsigned k, bool training) {
  return training ? t.saved_mean[k] : t.running_mean[k];
}

// diff_scale / diff_shift of statistic k from sum dy and sum dy (x - mean), and
// dx = a dy + b x + c's coefficients (b = c = 0 in inference: frozen statistics).
__device__ float4 finish_backward(unsigned k, double sum_dy, double sum_dy_x, double count,
                                  double eps, bool training, const Gradients& t) {
  const double mean = center_of(t, k, training);
  const double inv_std = training ? static_cast<double>(t.saved_inv_std[k])
                                  : 1.0 / sqrt(static_cast<double>(t.running_var[k]) + eps);
  const double sum_dy_xhat = sum_dy_x * inv_std;
  if (t.diff_scale != nullptr) t.diff_scale[k] = static_cast<float>(sum_dy_xhat);
  if (t.diff_shift != nullptr) t.diff_shift[k] = static_cast<float>(sum_dy);
  const double scale = t.scale != nullptr ? static_cast<double>(t.scale[k]) : 1.0;
  const double a = scale * inv_std;
  if (!training) return make_float4(static_cast<float>(a), 0.0f, 0.0f, 0.0f);
  // The batch statistics' terms: -a (sum dy + x_hat sum dy x_hat) / n.
  const double b = -a * inv_std * sum_dy_xhat / count;
  return make_float4(static_cast<float>(a), static_cast<float>(b),
                     static_cast<float>(-a * sum_dy / count - b * mean), 0.0f);
}

__global__ void finalize_backward(unsigned statistics, int splits,
                                  const double* __restrict__ partial, double count, double eps,
                                  bool training, Gradients t, float4* __restrict__ coefficients) {
  const unsigned k = blockIdx.x * column_threads + threadIdx.x;
  double s1, s2;
  chunk_totals(partial, statistics, splits, k, s1, s2);
  if (threadIdx.y != 0 || k >= statistics) return;
  coefficients[k] = finish_backward(k, s1, s2, count, eps, training, t);
}

// ---- (3) apply
// ------------------------------------------------------------------------------------

// The statistic of flat element i (the first of a pack when V > 1: a pack never straddles two
// statistics of a plane, and holds V consecutive statistics of a row).
__device__ __forceinline__ unsigned statistic_of(unsigned i, unsigned statistics, unsigned run,
                                                 bool planes) {
  return planes ? (i / run) % statistics : i % statistics;
}

template <typename T, int V>
__global__ void apply_forward(const T* __restrict__ x, T* __restrict__ y,
                              const float2* __restrict__ coefficients, unsigned packs,
                              unsigned statistics, unsigned run, bool planes) {
  for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    const unsigned i = p * V;
    const unsigned k = statistic_of(i, statistics, run, planes);
    const Pack<T, V> in = *reinterpret_cast<const Pack<T, V>*>(x + i);
    Pack<T, V> out;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float2 f = coefficients[planes ? k : k + v];
      out.v[v] = from_float<T>(fmaf(to_float(in.v[v]), f.x, f.y));
    }
    *reinterpret_cast<Pack<T, V>*>(y + i) = out;
  }
}

template <typename T, int V>
__global__ void apply_backward(const T* __restrict__ x, const T* __restrict__ dy,
                               T* __restrict__ dx, const float4* __restrict__ coefficients,
                               unsigned packs, unsigned statistics, unsigned run, bool planes) {
  for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    const unsigned i = p * V;
    const unsigned k = statistic_of(i, statistics, run, planes);
    const Pack<T, V> xs = *reinterpret_cast<const Pack<T, V>*>(x + i);
    const Pack<T, V> gs = *reinterpret_cast<const Pack<T, V>*>(dy + i);
    Pack<T, V> out;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float4 f = coefficients[planes ? k : k + v];
      out.v[v] = from_float<T>(f.x * to_float(gs.v[v]) + f.y * to_float(xs.v[v]) + f.z);
    }
    *reinterpret_cast<Pack<T, V>*>(dx + i) = out;
  }
}

// ---- fused path
// -----------------------------------------------------------------------------------

// One block per statistic of a planes shape with count <= fused_capacity(): value e of the
// statistic (e = threadIdx.x + item * 256) is x[(e / run * statistics + k) * run + e % run].
template <typename T>
__global__ void fused_forward(const T* __restrict__ x, T* __restrict__ y, unsigned statistics,
                              unsigned run, unsigned count, double eps, double momentum,
                              Statistics t) {
  __shared__ double shared[64];
  __shared__ float2 coefficient;
  const unsigned k = blockIdx.x;
  float values[fused_items];
  unsigned offsets[fused_items];
  const double pivot = pivot_of(x, k, run, true);
  double s1 = 0.0, s2 = 0.0;
#pragma unroll
  for (int item = 0; item < fused_items; ++item) {
    const unsigned e = threadIdx.x + item * block_threads;
    offsets[item] = (e / run * statistics + k) * run + e % run;
    values[item] = e < count ? to_float(x[offsets[item]]) : 0.0f;
    if (e < count) {
      const double d = static_cast<double>(values[item]) - pivot;
      s1 += d;
      s2 += d * d;
    }
  }
  block_sum2(s1, s2, shared);
  if (threadIdx.x == 0) coefficient = finish_forward(k, pivot, s1, s2, count, eps, momentum, t);
  __syncthreads();
  const float2 f = coefficient;
#pragma unroll
  for (int item = 0; item < fused_items; ++item) {
    const unsigned e = threadIdx.x + item * block_threads;
    if (e < count) y[offsets[item]] = from_float<T>(fmaf(values[item], f.x, f.y));
  }
}

template <typename T>
__global__ void fused_backward(const T* __restrict__ x, const T* __restrict__ dy,
                               T* __restrict__ dx, unsigned statistics, unsigned run,
                               unsigned count, double eps, bool training, Gradients t) {
  __shared__ double shared[64];
  __shared__ float4 coefficient;
  const unsigned k = blockIdx.x;
  float xs[fused_items], gs[fused_items];
  unsigned offsets[fused_items];
  const double mean = center_of(t, k, training);
  double s1 = 0.0, s2 = 0.0;
#pragma unroll
  for (int item = 0; item < fused_items; ++item) {
    const unsigned e = threadIdx.x + item * block_threads;
    offsets[item] = (e / run * statistics + k) * run + e % run;
    xs[item] = e < count ? to_float(x[offsets[item]]) : 0.0f;
    gs[item] = e < count ? to_float(dy[offsets[item]]) : 0.0f;
    if (e < count) {
      s1 += gs[item];
      s2 += static_cast<double>(gs[item]) * (static_cast<double>(xs[item]) - mean);
    }
  }
  block_sum2(s1, s2, shared);
  if (threadIdx.x == 0) coefficient = finish_backward(k, s1, s2, count, eps, training, t);
  __syncthreads();
  const float4 f = coefficient;
#pragma unroll
  for (int item = 0; item < fused_items; ++item) {
    const unsigned e = threadIdx.x + item * block_threads;
    if (e < count) dx[offsets[item]] = from_float<T>(f.x * gs[item] + f.y * xs[item] + f.z);
  }
}

// ---- host side
// --------------------------------------------------------------------------------------

std::size_t align_up(std::size_t bytes) {
  return (bytes + region_alignment - 1) / region_alignment * region_alignment;
}

std::size_t element_size(Element element) { return element == Element::f32 ? 4 : 2; }

// Widest pack of a column shape: 16 bytes when K is a multiple of it.
int column_pack(const Shape& shape, Element element) {
  const int widest = static_cast<int>(16 / element_size(element));
  for (int v = widest; v > 1; v /= 2) {
    if (shape.statistics % v == 0) return v;
  }
  return 1;
}

// The pack width every pointer of a call allows for the apply kernels: elements of a pack share
// a statistic (planes: run % V == 0) or are consecutive statistics (columns: K % V == 0).
int apply_pack(const Shape& shape, Element element, const void* a, const void* b,
               const void* c = nullptr) {
  const std::size_t size = element_size(element);
  const std::int64_t divisible = shape.planes ? shape.run : shape.statistics;
  for (int v = static_cast<int>(16 / size); v > 1; v /= 2) {
    const std::size_t bytes = size * static_cast<std::size_t>(v);
    if (divisible % v == 0 && aligned(a, bytes) && aligned(b, bytes) &&
        (c == nullptr || aligned(c, bytes)))
      return v;
  }
  return 1;
}

// Blocks of the grid-stride apply kernels: enough to fill the GPU a few times over.
unsigned apply_blocks(std::int64_t packs) {
  const std::int64_t blocks = (packs + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65535 * 8));
}

// The workspace regions: chunk sums (f64 pairs), then per-statistic coefficients.
struct Regions {
  double* partial;
  void* coefficients;
};

Regions regions(const Shape& shape, const Geometry& geometry, void* workspace, bool reduce) {
  auto* base = static_cast<unsigned char*>(workspace);
  const std::size_t partial_bytes =
      reduce ? align_up(static_cast<std::size_t>(geometry.splits) *
                        static_cast<std::size_t>(shape.statistics) * 2 * sizeof(double))
             : 0;
  return {reinterpret_cast<double*>(base), base + partial_bytes};
}

template <typename T>
void launch_partial(const Shape& shape, const Geometry& g, const T* x, const T* dy,
                    const float* center, double* partial, cudaStream_t stream) {
  const auto k = static_cast<unsigned>(shape.statistics);
  if (shape.planes) {
    const dim3 grid(k, static_cast<unsigned>(g.splits));
    if (dy == nullptr) {
      partial_planes<T, false><<<grid, block_threads, 0, stream>>>(
          x, dy, center, k, static_cast<unsigned>(shape.runs), static_cast<unsigned>(shape.run),
          g.splits, g.row_threads, partial);
    } else {
      partial_planes<T, true><<<grid, block_threads, 0, stream>>>(
          x, dy, center, k, static_cast<unsigned>(shape.runs), static_cast<unsigned>(shape.run),
          g.splits, g.row_threads, partial);
    }
    return;
  }
  const dim3 block(column_threads, column_rows);
  const auto rows = static_cast<unsigned>(shape.runs);
  auto run = [&](auto pack) {
    constexpr int V = decltype(pack)::value;
    const dim3 grid(
        static_cast<unsigned>((shape.statistics + column_threads * V - 1) / (column_threads * V)),
        static_cast<unsigned>(g.splits));
    if (dy == nullptr) {
      partial_columns<T, V, false>
          <<<grid, block, 0, stream>>>(x, dy, center, k, rows, g.splits, partial);
    } else {
      partial_columns<T, V, true>
          <<<grid, block, 0, stream>>>(x, dy, center, k, rows, g.splits, partial);
    }
  };
  const int widest = static_cast<int>(16 / sizeof(T));
  const int v = std::min(
      apply_pack(shape, sizeof(T) == 4 ? Element::f32 : Element::f16, x, dy != nullptr ? dy : x),
      widest);
  if (v >= 8) {
    run(std::integral_constant<int, 8>{});
  } else if (v >= 4) {
    run(std::integral_constant<int, 4>{});
  } else if (v >= 2) {
    run(std::integral_constant<int, 2>{});
  } else {
    run(std::integral_constant<int, 1>{});
  }
}

template <typename T>
cudaError_t forward_typed(const Params& p, const Shape& shape, const Geometry& g, const Forward& t,
                          void* workspace, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(t.x);
  auto* y = static_cast<T*>(t.y);
  const auto k = static_cast<unsigned>(shape.statistics);
  const auto count = static_cast<double>(shape.count());
  const Statistics stats{t.scale,       t.shift,      t.running_mean,
                         t.running_var, t.saved_mean, t.saved_inv_std};
  if (g.fused && p.training) {
    fused_forward<T><<<k, block_threads, 0, stream>>>(x, y, k, static_cast<unsigned>(shape.run),
                                                      static_cast<unsigned>(shape.count()), p.eps,
                                                      p.momentum, stats);
    return cudaGetLastError();
  }
  const Regions r = regions(shape, g, workspace, p.training);
  auto* coefficients = static_cast<float2*>(r.coefficients);
  if (p.training) {
    launch_partial<T>(shape, g, x, nullptr, nullptr, r.partial, stream);
    const dim3 grid((k + column_threads - 1) / column_threads);
    finalize_forward<T><<<grid, dim3(column_threads, column_rows), 0, stream>>>(
        x, k, static_cast<unsigned>(shape.run), shape.planes, g.splits, r.partial, count, p.eps,
        p.momentum, stats, coefficients);
  } else {
    coefficients_inference<<<(k + block_threads - 1) / block_threads, block_threads, 0, stream>>>(
        k, p.eps, stats, coefficients);
  }
  const auto numel = static_cast<unsigned>(shape.numel());
  const auto run = static_cast<unsigned>(shape.run);
  auto apply = [&](auto pack) {
    constexpr int V = decltype(pack)::value;
    const unsigned packs = numel / V;
    apply_forward<T, V><<<apply_blocks(packs), block_threads, 0, stream>>>(
        x, y, coefficients, packs, k, run, shape.planes);
  };
  switch (std::min(apply_pack(shape, p.element, t.x, t.y), static_cast<int>(16 / sizeof(T)))) {
    case 8: apply(std::integral_constant<int, 8>{}); break;
    case 4: apply(std::integral_constant<int, 4>{}); break;
    case 2: apply(std::integral_constant<int, 2>{}); break;
    default: apply(std::integral_constant<int, 1>{}); break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_typed(const Params& p, const Shape& shape, const Geometry& g,
                           const Backward& t, void* workspace, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(t.x);
  const auto* dy = static_cast<const T*>(t.dy);
  auto* dx = static_cast<T*>(t.dx);
  const auto k = static_cast<unsigned>(shape.statistics);
  const auto count = static_cast<double>(shape.count());
  const Gradients grads{t.scale,       t.saved_mean, t.saved_inv_std, t.running_mean,
                        t.running_var, t.diff_scale, t.diff_shift};
  if (g.fused) {
    fused_backward<T><<<k, block_threads, 0, stream>>>(
        x, dy, dx, k, static_cast<unsigned>(shape.run), static_cast<unsigned>(shape.count()), p.eps,
        p.training, grads);
    return cudaGetLastError();
  }
  const Regions r = regions(shape, g, workspace, true);
  auto* coefficients = static_cast<float4*>(r.coefficients);
  launch_partial<T>(shape, g, x, dy, p.training ? t.saved_mean : t.running_mean, r.partial, stream);
  finalize_backward<<<(k + column_threads - 1) / column_threads, dim3(column_threads, column_rows),
                      0, stream>>>(k, g.splits, r.partial, count, p.eps, p.training, grads,
                                   coefficients);
  const auto numel = static_cast<unsigned>(shape.numel());
  const auto run = static_cast<unsigned>(shape.run);
  auto apply = [&](auto pack) {
    constexpr int V = decltype(pack)::value;
    const unsigned packs = numel / V;
    apply_backward<T, V><<<apply_blocks(packs), block_threads, 0, stream>>>(
        x, dy, dx, coefficients, packs, k, run, shape.planes);
  };
  switch (
      std::min(apply_pack(shape, p.element, t.x, t.dy, t.dx), static_cast<int>(16 / sizeof(T)))) {
    case 8: apply(std::integral_constant<int, 8>{}); break;
    case 4: apply(std::integral_constant<int, 4>{}); break;
    case 2: apply(std::integral_constant<int, 2>{}); break;
    default: apply(std::integral_constant<int, 1>{}); break;
  }
  return cudaGetLastError();
}

}  // namespace

std::int64_t fused_capacity() { return static_cast<std::int64_t>(block_threads) * fused_items; }

Geometry split_geometry(const Shape& shape, Element element, int sm_count) {
  // One full wave of 256-thread blocks (8 per multiprocessor): enough loads in flight to keep
  // the memory busy, and few chunks for the finalize kernel to add up.
  const std::int64_t target = static_cast<std::int64_t>(std::max(sm_count, 1)) * 8;
  Geometry g;
  std::int64_t blocks_per_split = shape.statistics;
  std::int64_t max_splits = shape.runs;
  if (shape.planes) {
    g.row_threads = 256;
    while (g.row_threads > 32 && g.row_threads / 2 >= shape.run) g.row_threads /= 2;
  } else {
    const int v = column_pack(shape, element);
    blocks_per_split = (shape.statistics + column_threads * v - 1) / (column_threads * v);
    // At least one row per thread of a block's column.
    max_splits = std::max<std::int64_t>(1, shape.runs / column_rows);
  }
  const std::int64_t splits = (target + blocks_per_split - 1) / blocks_per_split;
  g.splits = static_cast<int>(
      std::clamp<std::int64_t>(splits, 1, std::min<std::int64_t>(max_splits, 65535)));
  return g;
}

Geometry fused_geometry() {
  Geometry g;
  g.fused = true;
  return g;
}

std::size_t workspace_bytes(const Shape& shape, const Geometry& geometry, bool training,
                            bool backward) {
  // The fused path keeps its coefficients in shared memory; an inference forward has no
  // reduction to fuse and takes the two-pass path's coefficients.
  if (geometry.fused && (training || backward)) return 0;
  const auto k = static_cast<std::size_t>(shape.statistics);
  const bool reduce = training || backward;
  const std::size_t partial =
      reduce ? align_up(static_cast<std::size_t>(geometry.splits) * k * 2 * sizeof(double)) : 0;
  const std::size_t coefficients = backward ? k * sizeof(float4) : k * sizeof(float2);
  return partial + align_up(coefficients);
}

cudaError_t forward(const Params& params, const Shape& shape, const Geometry& geometry,
                    const Forward& tensors, void* workspace, cudaStream_t stream) {
  switch (params.element) {
    case Element::f16:
      return forward_typed<__half>(params, shape, geometry, tensors, workspace, stream);
    case Element::bf16:
      return forward_typed<__nv_bfloat16>(params, shape, geometry, tensors, workspace, stream);
    default: return forward_typed<float>(params, shape, geometry, tensors, workspace, stream);
  }
}

cudaError_t backward(const Params& params, const Shape& shape, const Geometry& geometry,
                     const Backward& tensors, void* workspace, cudaStream_t stream) {
  switch (params.element) {
    case Element::f16:
      return backward_typed<__half>(params, shape, geometry, tensors, workspace, stream);
    case Element::bf16:
      return backward_typed<__nv_bfloat16>(params, shape, geometry, tensors, workspace, stream);
    default: return backward_typed<float>(params, shape, geometry, tensors, workspace, stream);
  }
}

}  // namespace dnnx::cudnn::kernels::batch_norm
