// The column matrix of a convolution and its gradient's sum back into the input (im2col.hpp).
// One thread per element of the tensor written, in its memory order (writes coalesced; im2col's
// reads follow the output positions, col2im's the taps), grid-stride over the rest.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/im2col.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::im2col {
namespace {

constexpr int block_threads = 256;
constexpr std::int64_t max_blocks = 1 << 20;

unsigned grid_for(std::int64_t items) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((items + block_threads - 1) / block_threads, 1, max_blocks));
}

template <typename Bits>
__global__ void im2col_kernel(Geometry g, const Bits* __restrict__ src, Bits* __restrict__ col) {
  const std::int64_t count = col_elements(g);
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < count; index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const ColEntry e = col_entry(g, index);
    const std::int64_t q = tap_source(g, e.tap, e.p);
    col[index] = q < 0 ? Bits{0} : src[src_offset(g, e.n, e.c, q)];
  }
}

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
    float sum = 0.0f;
    for (std::int64_t tap = 0; tap < g.taps; ++tap) {
      const std::int64_t p = tap_target(g, tap, q);
      if (p >= 0) sum += to_float(col[col_offset(g, n, c, tap, p)]);
    }
    src[index] = from_float<T>(sum);
  }
}

}  // namespace

cudaError_t im2col(Element element, const Geometry& geometry, const void* src, void* col,
                   cudaStream_t stream) {
  const std::int64_t count = col_elements(geometry);
  if (count <= 0) return cudaSuccess;
  const unsigned grid = grid_for(count);
  if (element == Element::f32) {
    im2col_kernel<std::uint32_t><<<grid, block_threads, 0, stream>>>(
        geometry, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(col));
  } else {  // f16 and bf16: +0 is all zero bits in both
    im2col_kernel<std::uint16_t><<<grid, block_threads, 0, stream>>>(
        geometry, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(col));
  }
  return cudaGetLastError();
}

cudaError_t col2im(Element element, const Geometry& geometry, const void* col, void* src,
                   cudaStream_t stream) {
  const std::int64_t count = geometry.batch * geometry.channels * geometry.in_positions;
  if (count <= 0) return cudaSuccess;
  const unsigned grid = grid_for(count);
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
