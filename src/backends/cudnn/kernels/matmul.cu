// The matrix multiply's kernels beside cuBLAS.
//
// Note [bias gradient kernel]
// diff_bias is the column sums of a dense row-major rows x n diff_dst. A block reads 32
// consecutive columns (one warp wide: coalesced) with 8 rows of threads, each summing every 8th
// row of its chunk of rows; the 8 partial sums are then added in row order. When one block per 32
// columns would leave the GPU idle (few columns, many rows) the rows are split into chunks whose
// f32 partial sums go to the workspace and are added in chunk order by a second kernel. Every order
// of addition is fixed by (rows, n, SM count), so the result is bitwise reproducible.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/matmul.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace dnnx::cudnn::kernels::matmul {
namespace {

constexpr int block_threads = 256;
constexpr int column_tile = 32;  // columns per block of the gradient kernel (one warp wide)
constexpr int column_rows = 8;   // rows of threads per block of the gradient kernel
constexpr std::int64_t max_blocks = 1 << 20;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

unsigned grid_for(std::int64_t items, std::int64_t per_block) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(items, per_block), 1, max_blocks));
}

// The split of Note [bias gradient kernel].
struct Chunks {
  std::int64_t count = 1;
  std::int64_t rows_per_chunk = 1;
};

// Chunks of rows for a grid of ceil(n / block_columns) x chunks blocks: enough blocks for the GPU
// (4 per SM), each chunk at least min_rows rows (where there are that many).
Chunks chunks_of(std::int64_t rows, std::int64_t n, int sm_count,
                 std::int64_t block_columns = column_tile, std::int64_t min_rows = 64) {
  const std::int64_t target_blocks = 4 * static_cast<std::int64_t>(std::max(sm_count, 1));
  const std::int64_t tiles = ceil_div(n, block_columns);
  std::int64_t wanted = std::clamp<std::int64_t>(ceil_div(target_blocks, tiles), 1,
                                                 std::max<std::int64_t>(rows / min_rows, 1));
  wanted = std::min<std::int64_t>(wanted, 65535);  // gridDim.y
  Chunks chunks;
  chunks.rows_per_chunk = ceil_div(rows, wanted);
  chunks.count = ceil_div(rows, chunks.rows_per_chunk);
  return chunks;
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    add_bias_kernel(const T* bias, T* dst, std::int64_t count, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    dst[i] = from_float<T>(to_float(dst[i]) + to_float(bias[i % n]));
  }
}

template <typename T>
__device__ __forceinline__ void store_sum(T* out, std::int64_t j, float total, float beta) {
  out[j] = from_float<T>(beta != 0.0f ? total + beta * to_float(out[j]) : total);
}

// Note [bias gradient kernel]: columns of tile blockIdx.x, rows of chunk blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(column_tile* column_rows)
    column_sums_kernel(const T* x, T* out, float* partial, std::int64_t rows, std::int64_t n,
                       std::int64_t rows_per_chunk, float beta) {
  __shared__ float sums[column_rows][column_tile + 1];
  const std::int64_t tiles = (n + column_tile - 1) / column_tile;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t j = tile * column_tile + threadIdx.x;
    float acc = 0.0f;
    if (j < n) {
      for (std::int64_t r = begin + threadIdx.y; r < end; r += column_rows)
        acc += to_float(x[r * n + j]);
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
      float total = 0.0f;
#pragma unroll
      for (int y = 0; y < column_rows; ++y) total += sums[y][threadIdx.x];
      if (gridDim.y == 1) {
        store_sum(out, j, total, beta);
      } else {
        partial[static_cast<std::int64_t>(blockIdx.y) * n + j] = total;
      }
    }
    __syncthreads();
  }
}

// Adds the chunks' partial sums of each column in chunk order.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    finalize_kernel(const float* partial, T* out, std::int64_t n, std::int64_t chunks, float beta) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x; j < n;
       j += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    float total = 0.0f;
    for (std::int64_t c = 0; c < chunks; ++c) total += partial[c * n + j];
    store_sum(out, j, total, beta);
  }
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    store_kernel(const float* accumulator, T* out, std::int64_t count, float beta) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    store_sum(out, i, accumulator[i], beta);
  }
}

template <typename T>
cudaError_t bias_gradient_typed(std::int64_t rows, std::int64_t n, const void* diff_dst, float beta,
                                void* diff_bias, void* workspace, int sm_count,
                                cudaStream_t stream) {
  const Chunks chunks = chunks_of(rows, n, sm_count);
  if (chunks.count > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  auto* out = static_cast<T*>(diff_bias);
  auto* partial = static_cast<float*>(workspace);
  const dim3 grid(grid_for(n, column_tile), static_cast<unsigned>(chunks.count));
  column_sums_kernel<T><<<grid, dim3(column_tile, column_rows), 0, stream>>>(
      static_cast<const T*>(diff_dst), out, partial, rows, n, chunks.rows_per_chunk, beta);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (chunks.count > 1) {
    finalize_kernel<T><<<grid_for(n, block_threads), block_threads, 0, stream>>>(
        partial, out, n, chunks.count, beta);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t add_bias(Element element, std::int64_t rows, std::int64_t n, const void* bias,
                     void* dst, cudaStream_t stream) {
  const std::int64_t count = rows * n;
  const unsigned grid = grid_for(count, block_threads);
  switch (element) {
    case Element::f32:
      add_bias_kernel<float><<<grid, block_threads, 0, stream>>>(
          static_cast<const float*>(bias), static_cast<float*>(dst), count, n);
      break;
    case Element::f16:
      add_bias_kernel<__half><<<grid, block_threads, 0, stream>>>(
          static_cast<const __half*>(bias), static_cast<__half*>(dst), count, n);
      break;
    case Element::bf16:
      add_bias_kernel<__nv_bfloat16><<<grid, block_threads, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(dst), count, n);
      break;
  }
  return cudaGetLastError();
}

std::size_t bias_gradient_workspace(std::int64_t rows, std::int64_t n, int sm_count) {
  const Chunks chunks = chunks_of(rows, n, sm_count);
  return chunks.count > 1 ? static_cast<std::size_t>(chunks.count * n) * sizeof(float) : 0;
}

cudaError_t bias_gradient(Element element, std::int64_t rows, std::int64_t n, const void* diff_dst,
                          float beta, void* diff_bias, void* workspace, int sm_count,
                          cudaStream_t stream) {
  switch (element) {
    case Element::f32:
      return bias_gradient_typed<float>(rows, n, diff_dst, beta, diff_bias, workspace, sm_count,
                                        stream);
    case Element::f16:
      return bias_gradient_typed<__half>(rows, n, diff_dst, beta, diff_bias, workspace, sm_count,
                                         stream);
    case Element::bf16:
      return bias_gradient_typed<__nv_bfloat16>(rows, n, diff_dst, beta, diff_bias, workspace,
                                                sm_count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t store_accumulator(Element element, std::int64_t count, const float* accumulator,
                              float beta, void* out, cudaStream_t stream) {
  const unsigned grid = grid_for(count, block_threads);
  switch (element) {
    case Element::f32:
      store_kernel<float>
          <<<grid, block_threads, 0, stream>>>(accumulator, static_cast<float*>(out), count, beta);
      break;
    case Element::f16:
      store_kernel<__half>
          <<<grid, block_threads, 0, stream>>>(accumulator, static_cast<__half*>(out), count, beta);
      break;
    case Element::bf16:
      store_kernel<__nv_bfloat16><<<grid, block_threads, 0, stream>>>(
          accumulator, static_cast<__nv_bfloat16*>(out), count, beta);
      break;
  }
  return cudaGetLastError();
}

namespace {

// One warp per row segment (the cols elements of one row of one matrix), lanes along it: reads
// and writes both coalesced, whatever cols is.
constexpr int segment_warps = 8;

template <typename T>
__global__ void side_by_side_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                    std::int64_t count, std::int64_t rows, std::int64_t cols) {
  const std::int64_t segments = rows * count;
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * segment_warps + threadIdx.y;
       s < segments; s += static_cast<std::int64_t>(gridDim.x) * segment_warps) {
    // Segment s of dst is row r of matrix g: dst's rows are r, each holding the g in turn.
    const std::int64_t r = s / count;
    const std::int64_t g = s - r * count;
    const T* from = src + (g * rows + r) * cols;
    T* to = dst + s * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += warpSize) to[c] = from[c];
  }
}

}  // namespace

cudaError_t side_by_side(Element element, std::int64_t count, std::int64_t rows, std::int64_t cols,
                         const void* src, void* dst, cudaStream_t stream) {
  if (count <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
  const unsigned grid = grid_for(rows * count, segment_warps);
  const dim3 block(32, segment_warps);
  if (element == Element::f32) {
    side_by_side_kernel<std::uint32_t>
        <<<grid, block, 0, stream>>>(static_cast<const std::uint32_t*>(src),
                                     static_cast<std::uint32_t*>(dst), count, rows, cols);
  } else {
    side_by_side_kernel<std::uint16_t>
        <<<grid, block, 0, stream>>>(static_cast<const std::uint16_t*>(src),
                                     static_cast<std::uint16_t*>(dst), count, rows, cols);
  }
  return cudaGetLastError();
}

namespace {

// ---- activation passes (Note [matmul activation candidates] in src/core/matmul_activation.hpp)

constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic = 0.044715f;

// Note [gelu tanh for 16-bit types]
// The tanh of the GELU enters its value and derivative only as 0.5 (1 + t) and 1 - t^2, so an
// absolute error of t of a few f32 ulps is all that reaches them. For f16 and bf16 results, whose
// rounding is far coarser, t = 1 - 2 / (1 + e^(2u)) with the hardware's approximate exponential
// and reciprocal (__expf, __fdividef: a few instructions, where tanhf and an IEEE division take
// tens, which count in a pass of a few bytes per element); f32 results keep tanhf. e^(2u)
// overflowing to infinity gives t = 1 (the reciprocal of infinity is 0), underflowing to 0 gives
// -1.
template <typename T>
__device__ __forceinline__ float tanh_for(float u) {
  if constexpr (sizeof(T) == 2) {
    return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * u));
  } else {
    return tanhf(u);
  }
}

template <typename T>
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh_for<T>(sqrt_2_over_pi * (x + gelu_cubic * x * x * x)));
}

template <typename T>
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float t = tanh_for<T>(sqrt_2_over_pi * (x + gelu_cubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic * x * x);
}

// Note [matmul activation kernels]
// The passes are memory-bound, so each thread takes a group of eight consecutive elements: group g
// is elements [8g, 8g + 8), read and written as 16-byte accesses when every tensor of the pass is
// 16-byte aligned (one for 2-byte types, two for f32) and one by one otherwise or at the end.
// relu's mask (Note [matmul aux]) is then one byte per group: byte g holds bits 8(g % 4) ..
// 8(g % 4) + 7 of word g / 4 on the little-endian device, so a thread reads or writes its own byte
// and no thread assembles a word from others. The forward writes every byte of the
// ceil(count / 32) words, elements past the end counting as zero bits.
constexpr int group_size = 8;

template <typename T>
__device__ __forceinline__ void load_group(const T* p, std::int64_t first, std::int64_t count,
                                           bool vector, float (&out)[group_size]) {
  if (vector) {
    constexpr int lanes = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int j = 0; j < group_size / lanes; ++j) {
      const Pack<T, lanes> pack = *reinterpret_cast<const Pack<T, lanes>*>(p + first + j * lanes);
#pragma unroll
      for (int k = 0; k < lanes; ++k) out[j * lanes + k] = to_float(pack.v[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < group_size; ++k) out[k] = first + k < count ? to_float(p[first + k]) : 0.0f;
  }
}

template <typename T>
__device__ __forceinline__ void store_group(T* p, std::int64_t first, std::int64_t count,
                                            bool vector, const float (&in)[group_size]) {
  if (vector) {
    constexpr int lanes = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int j = 0; j < group_size / lanes; ++j) {
      Pack<T, lanes> pack;
#pragma unroll
      for (int k = 0; k < lanes; ++k) pack.v[k] = from_float<T>(in[j * lanes + k]);
      *reinterpret_cast<Pack<T, lanes>*>(p + first + j * lanes) = pack;
    }
  } else {
#pragma unroll
    for (int k = 0; k < group_size; ++k) {
      if (first + k < count) p[first + k] = from_float<T>(in[k]);
    }
  }
}

// Groups [0, groups) by a grid-stride loop; `vector` is whether group g may use 16-byte accesses.
#define DNNX_FOR_EACH_GROUP(groups)                                                          \
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x; \
       g < (groups); g += static_cast<std::int64_t>(gridDim.x) * block_threads)

// relu in place, and the mask bytes when asked (bytes: 4 per mask word, covering every group).
template <typename T>
__global__ void __launch_bounds__(block_threads)
    relu_kernel(T* dst, std::uint8_t* mask, std::int64_t count, std::int64_t bytes, bool aligned) {
  DNNX_FOR_EACH_GROUP(bytes) {
    const std::int64_t first = g * group_size;
    if (first >= count) {  // the last word's bytes past the end
      if (mask != nullptr) mask[g] = 0;
      continue;
    }
    const bool vector = aligned && first + group_size <= count;
    float x[group_size];
    load_group(dst, first, count, vector, x);
    unsigned bits = 0;
    bool negative = false;
#pragma unroll
    for (int k = 0; k < group_size; ++k) {
      if (x[k] > 0.0f) bits |= 1u << k;
      negative |= x[k] < 0.0f;
    }
    if (negative) {  // NaN stays NaN, as in torch; elements past the end read as 0 stay unwritten
#pragma unroll
      for (int k = 0; k < group_size; ++k) x[k] = x[k] < 0.0f ? 0.0f : x[k];
      store_group(dst, first, count, vector, x);
    }
    if (mask != nullptr) mask[g] = static_cast<std::uint8_t>(bits);
  }
}

// dst = gelu(src); src is dst in place, or the state (Note [gelu state first]), when `pre` is
// null.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    gelu_kernel(const T* src, T* dst, T* pre, std::int64_t count, bool aligned) {
  DNNX_FOR_EACH_GROUP((count + group_size - 1) / group_size) {
    const std::int64_t first = g * group_size;
    const bool vector = aligned && first + group_size <= count;
    float x[group_size];
    load_group(src, first, count, vector, x);
    if (pre != nullptr) store_group(pre, first, count, vector, x);  // exact: x came from T
#pragma unroll
    for (int k = 0; k < group_size; ++k) x[k] = gelu_tanh<T>(x[k]);
    store_group(dst, first, count, vector, x);
  }
}

// The backward passes take groups [first_group, first_group + groups): with Vector, whole groups
// read and written as 16-byte accesses, with no per-group test (the launch gives them the whole
// groups of aligned tensors, and the last partial group to the other instance). A run-time test
// per group instead took 11% more instructions and ~15% more time on an H200 (docs/benchmarks.md,
// "GPU matmul").
template <typename T, bool Vector>
__global__ void __launch_bounds__(block_threads)
    relu_grad_kernel(const T* diff_dst, const std::uint8_t* mask, T* diff_pre,
                     std::int64_t first_group, std::int64_t groups, std::int64_t count) {
  DNNX_FOR_EACH_GROUP(groups) {
    const std::int64_t first = (first_group + g) * group_size;
    const bool vector = Vector;
    float d[group_size];
    load_group(diff_dst, first, count, vector, d);
    const unsigned bits = mask[first_group + g];
#pragma unroll
    for (int k = 0; k < group_size; ++k) d[k] = (bits >> k) & 1u ? d[k] : 0.0f;
    store_group(diff_pre, first, count, vector, d);
  }
}

template <typename T, bool Vector>
__global__ void __launch_bounds__(block_threads)
    gelu_grad_kernel(const T* diff_dst, const T* pre, T* diff_pre, std::int64_t first_group,
                     std::int64_t groups, std::int64_t count) {
  DNNX_FOR_EACH_GROUP(groups) {
    const std::int64_t first = (first_group + g) * group_size;
    const bool vector = Vector;
    float d[group_size];
    float x[group_size];
    load_group(diff_dst, first, count, vector, d);
    load_group(pre, first, count, vector, x);
#pragma unroll
    for (int k = 0; k < group_size; ++k) d[k] *= gelu_tanh_grad<T>(x[k]);
    store_group(diff_pre, first, count, vector, d);
  }
}

#undef DNNX_FOR_EACH_GROUP

bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// Note [activation derivative with the bias gradient]
// bwd_weights with a bias needs diff_pre twice: as the GEMM's operand and for its column sums
// (diff_bias). The pass that writes diff_pre also sums its columns, so the GEMM after it is a
// plain one (no bias-gradient epilogue) and diff_pre is not read again for the sums. A block of
// 32 x 8 threads covers 256 columns (a thread's group of eight, read and written as 16-byte
// accesses when n % 8 == 0 and every pointer is 16-byte aligned: a warp reads 512 contiguous bytes
// of a row) and a chunk of rows, each row of threads taking every 8th row of the chunk. The sums
// are of diff_pre as stored (rounded to T), in f32, added in row order per thread, then over the
// 8 rows of threads in order, then over the chunks in order (finalize_kernel): bitwise
// reproducible for a given (rows, n, SM count).
constexpr int bias_columns = column_tile * group_size;  // 256 columns per block

template <typename T, Activation A>
__global__ void __launch_bounds__(column_tile* column_rows)
    activation_grad_bias_kernel(const T* diff_dst, const void* aux, T* diff_pre, T* diff_bias,
                                float* partial, std::int64_t rows, std::int64_t n,
                                std::int64_t rows_per_chunk, float beta, bool vector) {
  __shared__ float sums[column_rows][bias_columns + 1];
  const std::int64_t j0 =
      static_cast<std::int64_t>(blockIdx.x) * bias_columns + threadIdx.x * group_size;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float acc[group_size] = {};
  if (j0 < n) {
    for (std::int64_t r = begin + threadIdx.y; r < end; r += column_rows) {
      const std::int64_t first = r * n + j0;
      float d[group_size];
      if (vector) {
        load_group(diff_dst, first, first + group_size, true, d);
        if constexpr (A == Activation::relu) {
          const unsigned bits = static_cast<const std::uint8_t*>(aux)[first / group_size];
#pragma unroll
          for (int k = 0; k < group_size; ++k) d[k] = (bits >> k) & 1u ? d[k] : 0.0f;
        } else {
          float x[group_size];
          load_group(static_cast<const T*>(aux), first, first + group_size, true, x);
#pragma unroll
          for (int k = 0; k < group_size; ++k) d[k] *= gelu_tanh_grad<T>(x[k]);
        }
#pragma unroll
        for (int k = 0; k < group_size; ++k) d[k] = to_float(from_float<T>(d[k]));
        store_group(diff_pre, first, first + group_size, true, d);
      } else {
        const std::int64_t last = r * n + n;  // the row's end: the group may stop short of it
#pragma unroll
        for (int k = 0; k < group_size; ++k) {
          const std::int64_t i = first + k;
          d[k] = 0.0f;
          if (i >= last) continue;
          float v = to_float(diff_dst[i]);
          if constexpr (A == Activation::relu) {
            const unsigned byte = static_cast<const std::uint8_t*>(aux)[i / 8];
            v = (byte >> (i % 8)) & 1u ? v : 0.0f;
          } else {
            v *= gelu_tanh_grad<T>(to_float(static_cast<const T*>(aux)[i]));
          }
          const T stored = from_float<T>(v);
          diff_pre[i] = stored;
          d[k] = to_float(stored);
        }
      }
#pragma unroll
      for (int k = 0; k < group_size; ++k) acc[k] += d[k];
    }
  }
#pragma unroll
  for (int k = 0; k < group_size; ++k) sums[threadIdx.y][threadIdx.x * group_size + k] = acc[k];
  __syncthreads();
  // One column per thread: 256 threads, 256 columns.
  const int c = threadIdx.y * column_tile + threadIdx.x;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * bias_columns + c;
  if (j < n) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < column_rows; ++y) total += sums[y][c];
    if (gridDim.y == 1) {
      store_sum(diff_bias, j, total, beta);
    } else {
      partial[static_cast<std::int64_t>(blockIdx.y) * n + j] = total;
    }
  }
}

// The chunks of rows of activation_grad_bias_kernel: chunks of at least 32 rows.
Chunks bias_chunks_of(std::int64_t rows, std::int64_t n, int sm_count) {
  return chunks_of(rows, n, sm_count, bias_columns, 32);
}

template <typename T, Activation A>
cudaError_t launch_backward_bias(std::int64_t rows, std::int64_t n, const void* diff_dst,
                                 const void* aux, void* diff_pre, float beta, void* diff_bias,
                                 void* workspace, int sm_count, cudaStream_t stream) {
  const Chunks chunks = bias_chunks_of(rows, n, sm_count);
  if (chunks.count > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  const bool vector =
      n % group_size == 0 && aligned16({diff_dst, diff_pre, A == Activation::relu ? nullptr : aux});
  auto* out = static_cast<T*>(diff_bias);
  auto* partial = static_cast<float*>(workspace);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, bias_columns)),
                  static_cast<unsigned>(chunks.count));
  activation_grad_bias_kernel<T, A><<<grid, dim3(column_tile, column_rows), 0, stream>>>(
      static_cast<const T*>(diff_dst), aux, static_cast<T*>(diff_pre), out, partial, rows, n,
      chunks.rows_per_chunk, beta, vector);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (chunks.count > 1) {
    finalize_kernel<T><<<grid_for(n, block_threads), block_threads, 0, stream>>>(
        partial, out, n, chunks.count, beta);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_bias_typed(Activation activation, std::int64_t rows, std::int64_t n,
                                const void* diff_dst, const void* aux, void* diff_pre, float beta,
                                void* diff_bias, void* workspace, int sm_count,
                                cudaStream_t stream) {
  return activation == Activation::relu
             ? launch_backward_bias<T, Activation::relu>(rows, n, diff_dst, aux, diff_pre, beta,
                                                         diff_bias, workspace, sm_count, stream)
             : launch_backward_bias<T, Activation::gelu_tanh>(
                   rows, n, diff_dst, aux, diff_pre, beta, diff_bias, workspace, sm_count, stream);
}

// dst = gelu(src), the state `pre` written first when not null (gelu_kernel).
template <typename T>
void launch_gelu(std::int64_t count, const void* src, void* dst, void* pre, cudaStream_t stream) {
  const std::int64_t groups = (count + group_size - 1) / group_size;
  gelu_kernel<T><<<grid_for(groups, block_threads), block_threads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), static_cast<T*>(pre), count,
      aligned16({src, dst, pre}));
}

template <typename T>
void launch_forward(Activation activation, std::int64_t count, void* dst, void* aux,
                    cudaStream_t stream) {
  if (activation == Activation::relu) {
    const std::int64_t bytes = (count + 31) / 32 * 4;
    relu_kernel<T><<<grid_for(bytes, block_threads), block_threads, 0, stream>>>(
        static_cast<T*>(dst), static_cast<std::uint8_t*>(aux), count, bytes, aligned16({dst}));
  } else {
    launch_gelu<T>(count, dst, dst, aux, stream);
  }
}

template <typename T, bool Vector>
void launch_backward_groups(Activation activation, std::int64_t first_group, std::int64_t groups,
                            std::int64_t count, const void* diff_dst, const void* aux,
                            void* diff_pre, cudaStream_t stream) {
  if (groups <= 0) return;
  const unsigned grid = grid_for(groups, block_threads);
  if (activation == Activation::relu) {
    relu_grad_kernel<T, Vector><<<grid, block_threads, 0, stream>>>(
        static_cast<const T*>(diff_dst), static_cast<const std::uint8_t*>(aux),
        static_cast<T*>(diff_pre), first_group, groups, count);
  } else {
    gelu_grad_kernel<T, Vector><<<grid, block_threads, 0, stream>>>(
        static_cast<const T*>(diff_dst), static_cast<const T*>(aux), static_cast<T*>(diff_pre),
        first_group, groups, count);
  }
}

template <typename T>
void launch_backward(Activation activation, std::int64_t count, const void* diff_dst,
                     const void* aux, void* diff_pre, cudaStream_t stream) {
  const std::int64_t groups = (count + group_size - 1) / group_size;
  const bool aligned = activation == Activation::relu ? aligned16({diff_dst, diff_pre})
                                                      : aligned16({diff_dst, aux, diff_pre});
  const std::int64_t whole = aligned ? count / group_size : 0;
  launch_backward_groups<T, true>(activation, 0, whole, count, diff_dst, aux, diff_pre, stream);
  launch_backward_groups<T, false>(activation, whole, groups - whole, count, diff_dst, aux,
                                   diff_pre, stream);
}

}  // namespace

cudaError_t activation_forward(Element element, Activation activation, std::int64_t count,
                               void* dst, void* aux, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (element) {
    case Element::f32: launch_forward<float>(activation, count, dst, aux, stream); break;
    case Element::f16: launch_forward<__half>(activation, count, dst, aux, stream); break;
    case Element::bf16: launch_forward<__nv_bfloat16>(activation, count, dst, aux, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t gelu_forward_from(Element element, std::int64_t count, const void* pre, void* dst,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (element) {
    case Element::f32: launch_gelu<float>(count, pre, dst, nullptr, stream); break;
    case Element::f16: launch_gelu<__half>(count, pre, dst, nullptr, stream); break;
    case Element::bf16: launch_gelu<__nv_bfloat16>(count, pre, dst, nullptr, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t activation_backward(Element element, Activation activation, std::int64_t count,
                                const void* diff_dst, const void* aux, void* diff_pre,
                                cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (element) {
    case Element::f32:
      launch_backward<float>(activation, count, diff_dst, aux, diff_pre, stream);
      break;
    case Element::f16:
      launch_backward<__half>(activation, count, diff_dst, aux, diff_pre, stream);
      break;
    case Element::bf16:
      launch_backward<__nv_bfloat16>(activation, count, diff_dst, aux, diff_pre, stream);
      break;
  }
  return cudaGetLastError();
}

std::size_t activation_backward_bias_workspace(std::int64_t rows, std::int64_t n, int sm_count) {
  const Chunks chunks = bias_chunks_of(rows, n, sm_count);
  return chunks.count > 1 ? static_cast<std::size_t>(chunks.count * n) * sizeof(float) : 0;
}

cudaError_t activation_backward_bias(Element element, Activation activation, std::int64_t rows,
                                     std::int64_t n, const void* diff_dst, const void* aux,
                                     void* diff_pre, float beta, void* diff_bias, void* workspace,
                                     int sm_count, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  switch (element) {
    case Element::f32:
      return backward_bias_typed<float>(activation, rows, n, diff_dst, aux, diff_pre, beta,
                                        diff_bias, workspace, sm_count, stream);
    case Element::f16:
      return backward_bias_typed<__half>(activation, rows, n, diff_dst, aux, diff_pre, beta,
                                         diff_bias, workspace, sm_count, stream);
    case Element::bf16:
      return backward_bias_typed<__nv_bfloat16>(activation, rows, n, diff_dst, aux, diff_pre, beta,
                                                diff_bias, workspace, sm_count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::matmul
