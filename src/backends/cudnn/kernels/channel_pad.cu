// Copies between a tensor and its channel-padded twin.
//
// One thread per dst element, a grid-stride loop; the index is split into the three axes with
// 32-bit division whenever the dst has fewer than 2^31 elements (most tensors), 64-bit otherwise.
// Neighbouring threads touch neighbouring elements of dst and, within a row, of src, so both sides
// are coalesced; the copies are a few percent of the convolutions they surround.

#include "backends/cudnn/kernels/channel_pad.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::channel_pad {
namespace {

constexpr int block_threads = 256;

template <typename T, typename Index>
__global__ void copy_box(const T* __restrict__ src, T* __restrict__ dst, Index s0, Index s1,
                         Index s2, Index d1, Index d2, Index total) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const Index k = i % d2;
    const Index rest = i / d2;
    const Index j = rest % d1;
    const Index outer = rest / d1;
    dst[i] = (outer < s0 && j < s1 && k < s2) ? src[(outer * s1 + j) * s2 + k] : T(0);
  }
}

template <typename T, typename Index>
cudaError_t launch(const void* src, const Box& s, void* dst, const Box& d, cudaStream_t stream) {
  const auto total = static_cast<Index>(d.count());
  int device = 0;
  int sm_count = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (d.count() + block_threads - 1) / block_threads;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, sm_count * 32LL));
  copy_box<T, Index><<<blocks, block_threads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), static_cast<Index>(s.dims[0]),
      static_cast<Index>(s.dims[1]), static_cast<Index>(s.dims[2]), static_cast<Index>(d.dims[1]),
      static_cast<Index>(d.dims[2]), total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_index(const void* src, const Box& s, void* dst, const Box& d,
                           cudaStream_t stream) {
  if (d.count() < INT_MAX && s.count() < INT_MAX)
    return launch<T, std::uint32_t>(src, s, dst, d, stream);
  return launch<T, std::uint64_t>(src, s, dst, d, stream);
}

}  // namespace

cudaError_t copy(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                 int element_bytes, cudaStream_t stream) {
  if (dst_box.count() == 0) return cudaSuccess;
  switch (element_bytes) {
    case 2: return dispatch_index<std::uint16_t>(src, src_box, dst, dst_box, stream);
    case 4: return dispatch_index<std::uint32_t>(src, src_box, dst, dst_box, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace dnnx::cudnn::kernels::channel_pad
