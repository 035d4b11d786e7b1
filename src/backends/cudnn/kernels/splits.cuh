#pragma once
// The fixed-order sum of split reductions' partial sums, shared by the weight-gradient kernels
// that split their N x positions range over blocks (depthwise.cu, narrow.cu): each split writes
// f32 partial sums of every weight to a workspace, and reduce_splits() adds them. The order of
// the sum depends on the split count alone, so a result is bitwise reproducible on any GPU.
// Included by .cu files only (nvcc).

#include "backends/cudnn/kernels/common.cuh"

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels {

// The reduction's blocks: 32 lanes along the weights x this many rows along the splits.
constexpr int reduce_rows = 32;

// dw = the sum of the splits' partial sums (`splits` arrays of `count`), in split order per row
// of the block, then the rows' sums in row order: 32 lanes along the weights x 32 rows along the
// splits.
template <typename T>
__global__ void __launch_bounds__(warp_size* reduce_rows)
    reduce_splits_kernel(const float* __restrict__ partial, T* __restrict__ dw, std::int64_t count,
                         int splits) {
  __shared__ float red[reduce_rows][warp_size + 1];
  wait_for_prior_grids();
  const int lane = threadIdx.x;
  const int row = threadIdx.y;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * warp_size; base < count;
       base += static_cast<std::int64_t>(gridDim.x) * warp_size) {
    const std::int64_t i = base + lane;
    float sum = 0.0f;
    if (i < count) {
      for (int s = row; s < splits; s += reduce_rows)
        sum += partial[static_cast<std::int64_t>(s) * count + i];
    }
    red[row][lane] = sum;
    __syncthreads();
    if (row == 0 && i < count) {
      float total = 0.0f;
#pragma unroll
      for (int r = 0; r < reduce_rows; ++r) total += red[r][lane];
      dw[i] = from_float<T>(total);
    }
    __syncthreads();
  }
}

// Adds the splits' partial sums into dw (a no-op when `partial` is null: no split).
template <typename T>
cudaError_t reduce_splits(const float* partial, T* dw, std::int64_t count, int splits,
                          const Queue& queue) {
  if (partial == nullptr) return cudaSuccess;
  const std::int64_t blocks = std::min<std::int64_t>((count + warp_size - 1) / warp_size, 65535);
  return launch(queue, reduce_splits_kernel<T>, dim3(static_cast<unsigned>(blocks)),
                dim3(warp_size, reduce_rows), 0, partial, dw, count, splits);
}

}  // namespace dnnx::cudnn::kernels
