// The cudnn backend's seeded fill and dropout kernels and the device pattern fill.
//
// Note [seeded kernels]
// Each thread of fill computes whole Philox blocks (four elements) from their index, and each
// thread of dropout whole mask words (32 elements, eight blocks), so no value depends on the grid:
// the grid is capped (grid-stride loops) and every index is 64-bit. The arithmetic is
// core/philox.hpp's, whose IEEE intrinsics nvcc never contracts (Note [bit-identical draws]), so
// the values are bit-identical to the reference's; f16 / bf16 go through its to_half_bits /
// to_bf16_bits, the code the host backends use. Loads of f16 / bf16 are exact conversions.

#include "backends/cudnn/kernels/random.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::random {
namespace {

namespace rnd = dnnx::detail::random;

constexpr int block_threads = 256;
constexpr std::int64_t max_grid = 65536;

unsigned grid_for(std::int64_t items) {
  const std::int64_t blocks = (items + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(blocks, max_grid)));
}

template <typename T>
__device__ __forceinline__ void store(T* base, std::int64_t offset, float value);
template <>
__device__ __forceinline__ void store<float>(float* base, std::int64_t offset, float value) {
  base[offset] = value;
}
template <>
__device__ __forceinline__ void store<std::uint16_t>(std::uint16_t* base, std::int64_t offset,
                                                     float value) {
  base[offset] = rnd::to_half_bits(value);
}

// f16 and bf16 travel as their bits; Bf16 tags the bfloat16 store and load.
struct Bf16 {
  std::uint16_t bits;
};
template <>
__device__ __forceinline__ void store<Bf16>(Bf16* base, std::int64_t offset, float value) {
  base[offset].bits = rnd::to_bf16_bits(value);
}

__device__ __forceinline__ float load(const float* base, std::int64_t offset) {
  return base[offset];
}
__device__ __forceinline__ float load(const std::uint16_t* base, std::int64_t offset) {
  return __half2float(__ushort_as_half(base[offset]));
}
__device__ __forceinline__ float load(const Bf16* base, std::int64_t offset) {
  return rnd::float_of(static_cast<std::uint32_t>(base[offset].bits) << 16);
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    fill_kernel(T* dst, rnd::Geometry geometry, std::int64_t count, rnd::DrawParams params,
                std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t blocks = (count + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t block = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       block < blocks; block += stride) {
    float values[4];
    rnd::draw4(params, seed, offset + static_cast<std::uint64_t>(block), values);
    const std::int64_t start = block * 4;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (start + k < count) store<T>(dst, geometry.offset(start + k), values[k]);
    }
  }
}

template <typename T, bool Draw>
__global__ void __launch_bounds__(block_threads)
    dropout_kernel(const T* src, T* dst, std::uint32_t* mask, rnd::Geometry geometry,
                   std::int64_t count, float p, float scale, std::uint64_t seed,
                   std::uint64_t offset) {
  const std::int64_t words = (count + 31) / 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t word = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       word < words; word += stride) {
    const std::int64_t start = word * 32;
    std::uint32_t bits = 0;
    if constexpr (Draw) {
      bits = rnd::mask_word(seed, offset, start, count, p);
      mask[word] = bits;
    } else {
      bits = mask[word];
    }
    for (int k = 0; k < 32 && start + k < count; ++k) {
      const std::int64_t at = geometry.offset(start + k);
      const bool kept = ((bits >> k) & 1u) != 0;
      store<T>(dst, at, rnd::mul(load(src, at), kept ? scale : 0.0f));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    pattern_kernel(T* dst, std::size_t count, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * block_threads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * block_threads + threadIdx.x;
       i < count; i += stride)
    dst[i] = value;
}

}  // namespace

cudaError_t fill(Element element, void* dst, const rnd::Geometry& geometry, std::int64_t count,
                 const rnd::DrawParams& params, std::uint64_t seed, std::uint64_t offset,
                 cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned grid = grid_for((count + 3) / 4);
  switch (element) {
    case Element::f32:
      fill_kernel<float><<<grid, block_threads, 0, stream>>>(static_cast<float*>(dst), geometry,
                                                             count, params, seed, offset);
      break;
    case Element::f16:
      fill_kernel<std::uint16_t><<<grid, block_threads, 0, stream>>>(
          static_cast<std::uint16_t*>(dst), geometry, count, params, seed, offset);
      break;
    case Element::bf16:
      fill_kernel<Bf16><<<grid, block_threads, 0, stream>>>(static_cast<Bf16*>(dst), geometry,
                                                            count, params, seed, offset);
      break;
  }
  return cudaGetLastError();
}

cudaError_t dropout_forward(Element element, const void* src, void* dst, std::uint32_t* mask,
                            const rnd::Geometry& geometry, std::int64_t count, float p, float scale,
                            std::uint64_t seed, std::uint64_t offset, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned grid = grid_for((count + 31) / 32);
  switch (element) {
    case Element::f32:
      dropout_kernel<float, true><<<grid, block_threads, 0, stream>>>(
          static_cast<const float*>(src), static_cast<float*>(dst), mask, geometry, count, p, scale,
          seed, offset);
      break;
    case Element::f16:
      dropout_kernel<std::uint16_t, true><<<grid, block_threads, 0, stream>>>(
          static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst), mask, geometry,
          count, p, scale, seed, offset);
      break;
    case Element::bf16:
      dropout_kernel<Bf16, true><<<grid, block_threads, 0, stream>>>(
          static_cast<const Bf16*>(src), static_cast<Bf16*>(dst), mask, geometry, count, p, scale,
          seed, offset);
      break;
  }
  return cudaGetLastError();
}

cudaError_t dropout_backward(Element element, const void* diff_dst, void* diff_src,
                             const std::uint32_t* mask, const rnd::Geometry& geometry,
                             std::int64_t count, float scale, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned grid = grid_for((count + 31) / 32);
  // The backward kernel only reads the mask.
  auto* bits = const_cast<std::uint32_t*>(mask);
  switch (element) {
    case Element::f32:
      dropout_kernel<float, false><<<grid, block_threads, 0, stream>>>(
          static_cast<const float*>(diff_dst), static_cast<float*>(diff_src), bits, geometry, count,
          0.0f, scale, 0, 0);
      break;
    case Element::f16:
      dropout_kernel<std::uint16_t, false><<<grid, block_threads, 0, stream>>>(
          static_cast<const std::uint16_t*>(diff_dst), static_cast<std::uint16_t*>(diff_src), bits,
          geometry, count, 0.0f, scale, 0, 0);
      break;
    case Element::bf16:
      dropout_kernel<Bf16, false><<<grid, block_threads, 0, stream>>>(
          static_cast<const Bf16*>(diff_dst), static_cast<Bf16*>(diff_src), bits, geometry, count,
          0.0f, scale, 0, 0);
      break;
  }
  return cudaGetLastError();
}

cudaError_t fill_pattern(void* dst, std::size_t count, std::size_t element_bytes,
                         std::uint64_t pattern, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned grid = grid_for(static_cast<std::int64_t>(
      std::min<std::size_t>(count, static_cast<std::size_t>(max_grid) * block_threads)));
  switch (element_bytes) {
    case 1: return cudaMemsetAsync(dst, static_cast<int>(pattern & 0xffu), count, stream);
    case 2:
      pattern_kernel<std::uint16_t><<<grid, block_threads, 0, stream>>>(
          static_cast<std::uint16_t*>(dst), count, static_cast<std::uint16_t>(pattern));
      break;
    case 4:
      pattern_kernel<std::uint32_t><<<grid, block_threads, 0, stream>>>(
          static_cast<std::uint32_t*>(dst), count, static_cast<std::uint32_t>(pattern));
      break;
    case 8:
      pattern_kernel<std::uint64_t>
          <<<grid, block_threads, 0, stream>>>(static_cast<std::uint64_t*>(dst), count, pattern);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::random
