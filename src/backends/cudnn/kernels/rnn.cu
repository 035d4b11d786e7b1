// The recurrent layer's dropout kernels (kernels/rnn.hpp). As Note [seeded kernels] in
// random.cu: a thread computes whole mask words (eight Philox blocks) from their index, so no bit
// depends on the grid; grids are capped (grid-stride loops) and every index is 64-bit.

#include "backends/cudnn/kernels/rnn.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::rnn {
namespace {

namespace rnd = dnnx::detail::random;

constexpr int block_threads = 256;
constexpr std::int64_t max_grid = 65536;

unsigned grid_for(std::int64_t items) {
  const std::int64_t blocks = (items + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(blocks, max_grid)));
}

__global__ void __launch_bounds__(block_threads)
    draw_kernel(std::uint32_t* mask, std::int64_t count, float p, std::uint64_t seed,
                std::uint64_t offset) {
  const std::int64_t words = (count + 31) / 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t word = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       word < words; word += stride) {
    mask[word] = rnd::mask_word(seed, offset, word * 32, count, p);
  }
}

// f16 and bf16 travel as their bits; the tag types select the conversions.
struct F16 {
  std::uint16_t bits;
};
struct Bf16 {
  std::uint16_t bits;
};
__device__ __forceinline__ float load(const float* base, std::int64_t at) { return base[at]; }
__device__ __forceinline__ float load(const F16* base, std::int64_t at) {
  return __half2float(__ushort_as_half(base[at].bits));
}
__device__ __forceinline__ float load(const Bf16* base, std::int64_t at) {
  return rnd::float_of(static_cast<std::uint32_t>(base[at].bits) << 16);
}
__device__ __forceinline__ void store(float* base, std::int64_t at, float value) {
  base[at] = value;
}
__device__ __forceinline__ void store(F16* base, std::int64_t at, float value) {
  base[at].bits = rnd::to_half_bits(value);
}
__device__ __forceinline__ void store(Bf16* base, std::int64_t at, float value) {
  base[at].bits = rnd::to_bf16_bits(value);
}

template <typename T>
__global__ void __launch_bounds__(block_threads)
    apply_kernel(const T* src, T* dst, const std::uint32_t* mask, std::int64_t first,
                 std::int64_t steps, std::int64_t batch, std::int64_t features, bool batch_first,
                 float scale) {
  const std::int64_t count = steps * batch * features;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       e < count; e += stride) {
    const std::int64_t c = e % features;
    const std::int64_t row = e / features;  // t * batch + n
    const std::int64_t n = row % batch;
    const std::int64_t t = row / batch;
    const std::int64_t at = batch_first ? (n * steps + t) * features + c : e;
    const std::int64_t bit = first + e;
    const bool kept = ((mask[bit / 32] >> (bit % 32)) & 1u) != 0;
    store(dst, at, rnd::mul(load(src, at), kept ? scale : 0.0f));
  }
}

}  // namespace

cudaError_t draw_masks(std::uint32_t* mask, std::int64_t count, float p, std::uint64_t seed,
                       std::uint64_t offset, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  draw_kernel<<<grid_for((count + 31) / 32), block_threads, 0, stream>>>(mask, count, p, seed,
                                                                         offset);
  return cudaGetLastError();
}

cudaError_t apply_mask(Element element, const void* src, void* dst, const std::uint32_t* mask,
                       std::int64_t first, std::int64_t T, std::int64_t N, std::int64_t C,
                       bool batch_first, float scale, cudaStream_t stream) {
  if (T <= 0 || N <= 0 || C <= 0) return cudaSuccess;
  const unsigned grid = grid_for(T * N * C);
  switch (element) {
    case Element::f32:
      apply_kernel<float><<<grid, block_threads, 0, stream>>>(static_cast<const float*>(src),
                                                              static_cast<float*>(dst), mask, first,
                                                              T, N, C, batch_first, scale);
      break;
    case Element::f16:
      apply_kernel<F16><<<grid, block_threads, 0, stream>>>(static_cast<const F16*>(src),
                                                            static_cast<F16*>(dst), mask, first, T,
                                                            N, C, batch_first, scale);
      break;
    case Element::bf16:
      apply_kernel<Bf16><<<grid, block_threads, 0, stream>>>(static_cast<const Bf16*>(src),
                                                             static_cast<Bf16*>(dst), mask, first,
                                                             T, N, C, batch_first, scale);
      break;
  }
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::rnn
