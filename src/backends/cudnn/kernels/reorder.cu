// The cudnn backend's reorder kernels.
//
// Note [reorder kernels]
// Two kernels, by whether an element keeps its memory position:
//   elementwise  src and dst share their memory order (same layout, a layout change that moves
//                nothing such as C = 1, or rank <= 2): a grid-stride loop over the elements,
//                converting each through f32;
//   transpose    NCHW <-> NHWC is, per image, the transpose of a C x S matrix (S the spatial
//                size) into S x C, or of S x C into C x S. A block of 32 x 8 threads moves one
//                32 x 32 tile through shared memory (padded to 33 columns against bank
//                conflicts): it reads the tile's rows (consecutive threads, consecutive source
//                addresses), then writes its columns as rows of dst (consecutive threads,
//                consecutive destination addresses). Blocks walk a flat list of (image, tile row,
//                tile column) so that any batch and matrix size fits a bounded 1-D grid.
// Indices are 64-bit throughout: a tensor may hold more than 2^31 elements. Grids are bounded
// (max_blocks) and every kernel loops over its work, so the launch never exceeds CUDA's grid
// limits. Each value is alpha * src (+ beta * dst) in f32, rounded once to dst's type.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/reorder.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::reorder {
namespace {

constexpr int block_threads = 256;
constexpr int tile = 32;                    // tile edge of the transpose kernel
constexpr int tile_rows = 8;                // rows of threads per transpose block
constexpr std::int64_t max_blocks = 65535;  // per launch; the kernels loop over the rest

template <typename S, typename D, bool ReadDst>
__global__ void __launch_bounds__(block_threads)
    elementwise_kernel(const S* src, D* dst, std::int64_t count, float alpha, float beta) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       i < count; i += step) {
    float value = alpha * to_float(src[i]);
    if constexpr (ReadDst) value += beta * to_float(dst[i]);
    dst[i] = from_float<D>(value);
  }
}

// Note [reorder kernels], transpose: src holds `batch` matrices rows x cols, dst their transposes.
template <typename S, typename D, bool ReadDst>
__global__ void __launch_bounds__(tile* tile_rows)
    transpose_kernel(const S* src, D* dst, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                     float alpha, float beta) {
  __shared__ float buffer[tile][tile + 1];
  const std::int64_t row_tiles = (rows + tile - 1) / tile;
  const std::int64_t col_tiles = (cols + tile - 1) / tile;
  const std::int64_t per_image = row_tiles * col_tiles;
  const std::int64_t tiles = batch * per_image;
  const std::int64_t matrix = rows * cols;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t image = t / per_image;
    const std::int64_t within = t - image * per_image;
    const std::int64_t row0 = (within / col_tiles) * tile;
    const std::int64_t col0 = (within % col_tiles) * tile;
    const S* in = src + image * matrix;
    D* out = dst + image * matrix;
    const std::int64_t col = col0 + threadIdx.x;
    for (int i = static_cast<int>(threadIdx.y); i < tile; i += tile_rows) {
      const std::int64_t row = row0 + i;
      if (row < rows && col < cols) buffer[i][threadIdx.x] = to_float(in[row * cols + col]);
    }
    __syncthreads();
    // dst is cols x rows: its row index is a source column, its column index a source row.
    const std::int64_t out_col = row0 + threadIdx.x;  // a source row
    for (int i = static_cast<int>(threadIdx.y); i < tile; i += tile_rows) {
      const std::int64_t out_row = col0 + i;  // a source column
      if (out_row < cols && out_col < rows) {
        D* target = out + out_row * rows + out_col;
        float value = alpha * buffer[threadIdx.x][i];
        if constexpr (ReadDst) value += beta * to_float(*target);
        *target = from_float<D>(value);
      }
    }
    __syncthreads();  // the buffer is refilled by the next tile
  }
}

unsigned bounded_grid(std::int64_t blocks) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, max_blocks));
}

template <typename S, typename D>
cudaError_t run_typed(const Shape& shape, float alpha, float beta, const void* src_raw,
                      void* dst_raw, cudaStream_t stream) {
  const auto* src = static_cast<const S*>(src_raw);
  auto* dst = static_cast<D*>(dst_raw);
  const bool read_dst = beta != 0.0f;
  if (!shape.transpose) {
    const unsigned grid = bounded_grid((shape.count + block_threads - 1) / block_threads);
    if (read_dst) {
      elementwise_kernel<S, D, true>
          <<<grid, block_threads, 0, stream>>>(src, dst, shape.count, alpha, beta);
    } else {
      elementwise_kernel<S, D, false>
          <<<grid, block_threads, 0, stream>>>(src, dst, shape.count, alpha, beta);
    }
    return cudaGetLastError();
  }
  const std::int64_t tiles =
      shape.batch * ((shape.rows + tile - 1) / tile) * ((shape.cols + tile - 1) / tile);
  const unsigned grid = bounded_grid(tiles);
  const dim3 block(tile, tile_rows);
  if (read_dst) {
    transpose_kernel<S, D, true>
        <<<grid, block, 0, stream>>>(src, dst, shape.batch, shape.rows, shape.cols, alpha, beta);
  } else {
    transpose_kernel<S, D, false>
        <<<grid, block, 0, stream>>>(src, dst, shape.batch, shape.rows, shape.cols, alpha, beta);
  }
  return cudaGetLastError();
}

template <typename S>
cudaError_t run_from(Element dst_element, const Shape& shape, float alpha, float beta,
                     const void* src, void* dst, cudaStream_t stream) {
  switch (dst_element) {
    case Element::f32: return run_typed<S, float>(shape, alpha, beta, src, dst, stream);
    case Element::f16: return run_typed<S, __half>(shape, alpha, beta, src, dst, stream);
    case Element::bf16: return run_typed<S, __nv_bfloat16>(shape, alpha, beta, src, dst, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t run(Element src_element, Element dst_element, const Shape& shape, float alpha,
                float beta, const void* src, void* dst, cudaStream_t stream) {
  if (shape.count == 0) return cudaSuccess;
  if (shape.count < 0 || shape.batch < 1 || shape.rows < 1 || shape.cols < 1 ||
      (shape.transpose && shape.batch * shape.rows * shape.cols != shape.count))
    return cudaErrorInvalidValue;
  switch (src_element) {
    case Element::f32: return run_from<float>(dst_element, shape, alpha, beta, src, dst, stream);
    case Element::f16: return run_from<__half>(dst_element, shape, alpha, beta, src, dst, stream);
    case Element::bf16:
      return run_from<__nv_bfloat16>(dst_element, shape, alpha, beta, src, dst, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::reorder
