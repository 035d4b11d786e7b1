// The conv_fused epilogue pass (kernels/conv_fused.hpp).
//
// Note [epilogue kernel]
// Memory-bound: each thread handles a pack of 16 bytes (4 f32 or 8 f16/bf16 elements) when every
// pointer is 16-byte aligned and a pack never straddles a channel (channels_last: C a multiple of
// the pack; channels_first: the spatial size a multiple of it), else one element. A pack's
// channel follows from its first element's index; the bias, C values, stays in cache. Each
// element is read, computed in f32 and written by the same thread, so in-place calls (conv_out or
// residual being dst) are safe, and the result does not depend on the launch: deterministic.

#include "backends/cudnn/kernels/conv_fused.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::conv_fused {
namespace {

constexpr int block_threads = 256;
constexpr std::int64_t max_blocks = 65536;  // grid-stride beyond this

// Note [epilogue kernel]: `packs` groups of V consecutive elements.
template <typename T, int V>
__global__ void epilogue_kernel(Shape shape, const T* __restrict__ bias, const T* conv_out,
                                const T* residual, T* dst, std::int64_t packs) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs;
       p += stride) {
    const std::int64_t first = p * V;
    const std::int64_t channel =
        shape.channels_last ? first % shape.channels : (first / shape.spatial) % shape.channels;
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(conv_out)[p];
    Pack<T, V> res{};
    if (residual != nullptr) res = reinterpret_cast<const Pack<T, V>*>(residual)[p];
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float x = to_float(in.v[k]);
      if (bias != nullptr) x += to_float(bias[shape.channels_last ? channel + k : channel]);
      if (residual != nullptr) x += shape.residual_scale * to_float(res.v[k]);
      if (shape.relu) x = x < 0.0f ? 0.0f : x;
      out.v[k] = from_float<T>(x);
    }
    reinterpret_cast<Pack<T, V>*>(dst)[p] = out;
  }
}

bool aligned_or_null(const void* pointer) { return pointer == nullptr || aligned(pointer, 16); }

template <typename T>
cudaError_t launch(const Shape& shape, const void* conv_out, const void* bias, const void* residual,
                   void* dst, cudaStream_t stream) {
  constexpr int pack = static_cast<int>(16 / sizeof(T));
  const std::int64_t count = shape.batch * shape.channels * shape.spatial;
  if (count == 0) return cudaSuccess;
  const bool packed =
      aligned_or_null(conv_out) && aligned_or_null(residual) && aligned_or_null(dst) &&
      (shape.channels_last ? shape.channels % pack == 0 : shape.spatial % pack == 0);
  const std::int64_t units = packed ? count / pack : count;
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>((units + block_threads - 1) / block_threads, max_blocks));
  const auto* b = static_cast<const T*>(bias);
  const auto* c = static_cast<const T*>(conv_out);
  const auto* r = static_cast<const T*>(residual);
  auto* d = static_cast<T*>(dst);
  if (packed) {
    epilogue_kernel<T, pack><<<blocks, block_threads, 0, stream>>>(shape, b, c, r, d, units);
  } else {
    epilogue_kernel<T, 1><<<blocks, block_threads, 0, stream>>>(shape, b, c, r, d, units);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t epilogue(const Shape& shape, const void* conv_out, const void* bias,
                     const void* residual, void* dst, cudaStream_t stream) {
  switch (shape.element) {
    case Element::f32: return launch<float>(shape, conv_out, bias, residual, dst, stream);
    case Element::f16: return launch<__half>(shape, conv_out, bias, residual, dst, stream);
    case Element::bf16: return launch<__nv_bfloat16>(shape, conv_out, bias, residual, dst, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::conv_fused
