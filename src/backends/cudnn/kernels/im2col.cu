// The column matrix of a convolution and its gradient's sum back into the input (im2col.hpp).
//
// Note [im2col kernels]
// The index functions of im2col.hpp define the layouts; the kernels compute the same with less
// integer division, which would otherwise cost more than the copy (several 64-bit divisions per
// element). Positions, taps and channels * taps are below 2^31 (the column matrix is, by the
// caller's cap), so they are split in 32 bits, and whatever a block shares is split once:
//   channels_first im2col  a block per (row c * taps + tap, sample), its threads along the
//                          output positions: the tap is split once per block, each thread splits
//                          its position (one division per spatial dim but the last) and copies
//                          one element, reads and writes along the row;
//   channels_last im2col   a block per (sample, output position), which first computes every
//                          tap's input position (or -1) into shared memory, then its threads
//                          copy along taps * channels, each element's tap one division away;
//   col2im                 a thread per input element in its memory order, walking the taps per
//                          dim from its own position: a tap whose offset is not a multiple of the
//                          stride, or outside the output, adds nothing; sums in f32 in tap order.
// Grids are capped and grid-stride, so any size runs.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/im2col.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::im2col {
namespace {

constexpr int block_threads = 256;
constexpr unsigned max_grid_x = 1u << 20;
constexpr unsigned max_grid_yz = 65535;
constexpr int max_shared_taps = 1024;  // channels_last: taps beyond this go without the table

unsigned clamp_grid(std::int64_t blocks, unsigned cap) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, cap));
}

template <typename Bits>
__global__ void im2col_first_kernel(Geometry g, const Bits* __restrict__ src,
                                    Bits* __restrict__ col) {
  const std::int64_t rows = g.channels * g.taps;
  const auto positions = static_cast<unsigned>(g.positions);
  for (std::int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const std::int64_t c = row / g.taps;
    int k[3] = {0, 0, 0};
    split(static_cast<unsigned>(row - c * g.taps), g.kernel, g.dims, k);
    for (std::int64_t n = blockIdx.z; n < g.batch; n += gridDim.z) {
      const Bits* plane = src + (n * g.channels + c) * g.in_positions;
      Bits* out = col + (g.packed ? (row * g.batch + n) : (n * rows + row)) * g.positions;
      for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < positions;
           p += gridDim.x * blockDim.x) {
        int o[3] = {0, 0, 0};
        split(p, g.output, g.dims, o);
        const std::int64_t q = source_position(g, o, k);
        out[p] = q < 0 ? Bits{0} : plane[q];
      }
    }
  }
}

template <typename Bits>
__global__ void im2col_last_kernel(Geometry g, const Bits* __restrict__ src,
                                   Bits* __restrict__ col) {
  __shared__ std::int64_t tap_source_of[max_shared_taps];
  const auto channels = static_cast<unsigned>(g.channels);
  const auto width = static_cast<unsigned>(g.taps * g.channels);
  const bool table = g.taps <= max_shared_taps;
  for (std::int64_t np = blockIdx.x; np < g.batch * g.positions; np += gridDim.x) {
    const std::int64_t n = np / g.positions;
    int o[3] = {0, 0, 0};
    split(static_cast<unsigned>(np - n * g.positions), g.output, g.dims, o);
    if (table) {
      __syncthreads();  // the previous position's table is read no more
      for (unsigned tap = threadIdx.x; tap < g.taps; tap += blockDim.x) {
        int k[3] = {0, 0, 0};
        split(tap, g.kernel, g.dims, k);
        tap_source_of[tap] = source_position(g, o, k);
      }
      __syncthreads();
    }
    const Bits* sample = src + n * g.in_positions * g.channels;
    Bits* out = col + np * width;
    for (unsigned j = threadIdx.x; j < width; j += blockDim.x) {
      const unsigned tap = j / channels;
      const unsigned c = j - tap * channels;
      std::int64_t q;
      if (table) {
        q = tap_source_of[tap];
      } else {
        int k[3] = {0, 0, 0};
        split(tap, g.kernel, g.dims, k);
        q = source_position(g, o, k);
      }
      out[j] = q < 0 ? Bits{0} : sample[q * g.channels + c];
    }
  }
}

// Reads a column entry as float (gathered_sum's load).
template <typename T>
struct Load {
  const T* col;
  __device__ float operator()(std::int64_t offset) const { return to_float(col[offset]); }
};

template <typename T>
__global__ void col2im_kernel(Geometry g, const T* __restrict__ col, T* __restrict__ src) {
  const std::int64_t count = g.batch * g.channels * g.in_positions;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < count; index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t n, c, q;
    if (g.channels_last) {
      c = index % g.channels;
      const std::int64_t t = index / g.channels;
      q = t % g.in_positions;
      n = t / g.in_positions;
    } else {
      q = index % g.in_positions;
      const std::int64_t t = index / g.in_positions;
      c = t % g.channels;
      n = t / g.channels;
    }
    const float sum = gathered_sum(g, n, c, q, Load<T>{col});
    src[index] = from_float<T>(sum);
  }
}

}  // namespace

cudaError_t im2col(Element element, const Geometry& geometry, const void* src, void* col,
                   cudaStream_t stream) {
  const std::int64_t count = col_elements(geometry);
  if (count <= 0) return cudaSuccess;
  if (count >= (std::int64_t{1} << 31)) return cudaErrorInvalidValue;  // Note [im2col kernels]
  const bool bits32 = element == Element::f32;
  if (geometry.channels_last) {
    const dim3 grid(clamp_grid(geometry.batch * geometry.positions, max_grid_x));
    const auto width = geometry.taps * geometry.channels;
    const int threads =
        static_cast<int>(std::min<std::int64_t>(block_threads, (width + 31) / 32 * 32));
    if (bits32) {
      im2col_last_kernel<std::uint32_t><<<grid, threads, 0, stream>>>(
          geometry, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(col));
    } else {  // f16 and bf16: +0 is all zero bits in both
      im2col_last_kernel<std::uint16_t><<<grid, threads, 0, stream>>>(
          geometry, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(col));
    }
  } else {
    const int threads = static_cast<int>(
        std::min<std::int64_t>(block_threads, (geometry.positions + 31) / 32 * 32));
    const dim3 grid(clamp_grid((geometry.positions + threads - 1) / threads, max_grid_x),
                    clamp_grid(geometry.channels * geometry.taps, max_grid_yz),
                    clamp_grid(geometry.batch, max_grid_yz));
    if (bits32) {
      im2col_first_kernel<std::uint32_t><<<grid, threads, 0, stream>>>(
          geometry, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(col));
    } else {
      im2col_first_kernel<std::uint16_t><<<grid, threads, 0, stream>>>(
          geometry, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(col));
    }
  }
  return cudaGetLastError();
}

cudaError_t col2im(Element element, const Geometry& geometry, const void* col, void* src,
                   cudaStream_t stream) {
  const std::int64_t count = geometry.batch * geometry.channels * geometry.in_positions;
  if (count <= 0) return cudaSuccess;
  if (col_elements(geometry) >= (std::int64_t{1} << 31) ||
      geometry.in_positions >= (std::int64_t{1} << 31))
    return cudaErrorInvalidValue;  // Note [im2col kernels]
  const unsigned grid = clamp_grid((count + block_threads - 1) / block_threads, max_grid_x);
  switch (element) {
    case Element::f32:
      col2im_kernel<float><<<grid, block_threads, 0, stream>>>(
          geometry, static_cast<const float*>(col), static_cast<float*>(src));
      break;
    case Element::f16:
      col2im_kernel<__half><<<grid, block_threads, 0, stream>>>(
          geometry, static_cast<const __half*>(col), static_cast<__half*>(src));
      break;
    case Element::bf16:
      col2im_kernel<__nv_bfloat16><<<grid, block_threads, 0, stream>>>(
          geometry, static_cast<const __nv_bfloat16*>(col), static_cast<__nv_bfloat16*>(src));
      break;
  }
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::im2col
