// The L2 sweep after timing (Note [cache after timing] in backend.cpp), two kernels on the stream:
//   read     every thread reads 16-byte words with L2-only loads (`ld.global.cg`), so each line
//            of the block is allocated in L2, displacing whatever earlier kernels left there; the
//            loaded values are folded into one word, stored through `sink` unless it is null (the
//            launch passes null): the compiler cannot tell, so it keeps the loads;
//   discard  `discard.global.L2` on every 128-byte line of the block (sm_80 and later): the lines
//            become invalid without being written back, so L2 is left empty rather than full of
//            the block. On older devices the sweep stops after the read.

#include "backends/cudnn/kernels/sweep.hpp"

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::sweep {
namespace {

constexpr int threads = 256;
constexpr std::size_t line_bytes = 128;

__global__ void read_kernel(const uint4* block, std::size_t words, unsigned* sink) {
  unsigned fold = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    const uint4 word = __ldcg(block + i);
    fold ^= word.x ^ word.y ^ word.z ^ word.w;
  }
  if (sink != nullptr) sink[0] = fold;
}

__global__ void discard_kernel(const char* block, std::size_t lines) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < lines;
       i += stride) {
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(block + i * line_bytes) : "memory");
  }
#endif
}

}  // namespace

cudaError_t empty_l2(const void* block, std::size_t bytes, int sm_count, cudaStream_t stream) {
  const std::size_t lines = bytes / line_bytes;
  if (lines == 0) return cudaSuccess;
  const int blocks = std::max(1, sm_count) * 8;
  read_kernel<<<blocks, threads, 0, stream>>>(static_cast<const uint4*>(block),
                                              lines * line_bytes / sizeof(uint4), nullptr);
  discard_kernel<<<blocks, threads, 0, stream>>>(static_cast<const char*>(block), lines);
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::sweep
