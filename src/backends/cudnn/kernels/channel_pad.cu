// Copies between a tensor and a padded or cropped twin, and between boxes of two tensors.
//
// One thread per dst element (or per 4-, 8- or 16-byte vector of them along the innermost axis,
// where both boxes' rows and both pointers allow it), a grid-stride loop; the index is split into
// the axes with 32-bit division whenever the dst has fewer than 2^31 elements (most tensors),
// 64-bit otherwise, over three axes where the first two are 1. Neighbouring threads touch
// neighbouring elements of dst and, within a row, of src, so both sides are coalesced; the copies
// are a few percent of the convolutions they surround.

#include "backends/cudnn/kernels/channel_pad.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::channel_pad {
namespace {

constexpr int block_threads = 256;

template <typename Index>
struct Axes {
  Index v[5];
};

// Axes 5 - Rank .. 4 of the boxes (the others are 1).
template <typename T, typename Index, int Rank>
__global__ void copy_box(const T* __restrict__ src, T* __restrict__ dst, Axes<Index> s,
                         Axes<Index> d, Index total) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    Index rest = i, at = 0, stride = 1;
    bool inside = true;
#pragma unroll
    for (int a = 4; a >= 5 - Rank; --a) {
      const Index c = a == 5 - Rank ? rest : rest % d.v[a];
      if (a != 5 - Rank) rest /= d.v[a];
      inside = inside && c < s.v[a];
      at += c * stride;
      stride *= s.v[a];
    }
    dst[i] = inside ? src[at] : T{};
  }
}

// The blocks of a grid-stride loop over `count` elements: one per block_threads of them, at most
// 32 per multiprocessor of the current device.
unsigned grid_for(std::int64_t count) {
  int device = 0;
  int sm_count = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (count + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, sm_count * 32LL));
}

template <typename T, typename Index, int Rank>
cudaError_t launch(const void* src, const Box& s, void* dst, const Box& d, cudaStream_t stream) {
  const auto total = static_cast<Index>(d.count());
  const unsigned blocks = grid_for(d.count());
  Axes<Index> sa{}, da{};
  for (int a = 0; a < 5; ++a) {
    sa.v[a] = static_cast<Index>(s.dims[a]);
    da.v[a] = static_cast<Index>(d.dims[a]);
  }
  copy_box<T, Index, Rank><<<blocks, block_threads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), sa, da, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const void* src, const Box& s, void* dst, const Box& d, cudaStream_t stream) {
  const bool three = s.dims[0] == 1 && s.dims[1] == 1 && d.dims[0] == 1 && d.dims[1] == 1;
  if (d.count() < INT_MAX && s.count() < INT_MAX) {
    return three ? launch<T, std::uint32_t, 3>(src, s, dst, d, stream)
                 : launch<T, std::uint32_t, 5>(src, s, dst, d, stream);
  }
  return three ? launch<T, std::uint64_t, 3>(src, s, dst, d, stream)
               : launch<T, std::uint64_t, 5>(src, s, dst, d, stream);
}

// The boxes in elements of `bytes` (the innermost axes divided), where both rows and both pointers
// allow it.
bool widen(const void* src, Box& s, void* dst, Box& d, int element_bytes, int bytes) {
  const auto per = bytes / element_bytes;
  if (s.dims[4] % per != 0 || d.dims[4] % per != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % static_cast<unsigned>(bytes) != 0 ||
      reinterpret_cast<std::uintptr_t>(dst) % static_cast<unsigned>(bytes) != 0)
    return false;
  s.dims[4] /= per;
  d.dims[4] /= per;
  return true;
}

// dst[d_base + c . d_pitch] op= src[s_base + c . s_pitch] for every c of the extents.
template <typename T, typename Index, typename Op>
__global__ void region_kernel(const T* __restrict__ src, T* __restrict__ dst, Axes<Index> extents,
                              Axes<Index> s_pitch, Axes<Index> d_pitch, Index s_base, Index d_base,
                              Index total, Op op) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    Index rest = i, s_at = s_base, d_at = d_base;
#pragma unroll
    for (int a = 4; a >= 0; --a) {
      const Index c = a == 0 ? rest : rest % extents.v[a];
      if (a != 0) rest /= extents.v[a];
      s_at += c * s_pitch.v[a];
      d_at += c * d_pitch.v[a];
    }
    op(dst[d_at], src[s_at]);
  }
}

struct Assign {
  template <typename T>
  __device__ void operator()(T& to, const T& from) const {
    to = from;
  }
};
// to += from in f32, rounded once to T.
struct Add {
  template <typename T>
  __device__ void operator()(T& to, const T& from) const {
    to = from_float<T>(to_float(to) + to_float(from));
  }
};

// The dense pitches of a region's tensor and the element offset of its origin.
template <typename Index>
Axes<Index> pitches(const Region& r, Index& base) {
  Axes<Index> p{};
  std::int64_t pitch = 1, at = 0;
  for (int a = 4; a >= 0; --a) {
    p.v[a] = static_cast<Index>(pitch);
    at += r.origin[a] * pitch;
    pitch *= r.dims.dims[a];
  }
  base = static_cast<Index>(at);
  return p;
}

template <typename T, typename Index, typename Op>
cudaError_t launch_region(const void* src, const Region& s, void* dst, const Region& d,
                          const Box& extents, Op op, cudaStream_t stream) {
  const unsigned blocks = grid_for(extents.count());
  Axes<Index> e{};
  for (int a = 0; a < 5; ++a) e.v[a] = static_cast<Index>(extents.dims[a]);
  Index s_base = 0, d_base = 0;
  const Axes<Index> sp = pitches<Index>(s, s_base), dp = pitches<Index>(d, d_base);
  region_kernel<T, Index, Op><<<blocks, block_threads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), e, sp, dp, s_base, d_base,
      static_cast<Index>(extents.count()), op);
  return cudaGetLastError();
}

template <typename T, typename Op>
cudaError_t region_index(const void* src, const Region& s, void* dst, const Region& d,
                         const Box& extents, Op op, cudaStream_t stream) {
  if (s.dims.count() < INT_MAX && d.dims.count() < INT_MAX)
    return launch_region<T, std::uint32_t>(src, s, dst, d, extents, op, stream);
  return launch_region<T, std::uint64_t>(src, s, dst, d, extents, op, stream);
}

// The regions and extents in elements of `bytes` (the innermost axis divided), where every
// innermost size, origin and both pointers allow it.
bool widen_regions(const void* src, Region& s, void* dst, Region& d, Box& extents,
                   int element_bytes, int bytes) {
  const auto per = bytes / element_bytes;
  if (s.dims.dims[4] % per != 0 || d.dims.dims[4] % per != 0 || s.origin[4] % per != 0 ||
      d.origin[4] % per != 0 || extents.dims[4] % per != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % static_cast<unsigned>(bytes) != 0 ||
      reinterpret_cast<std::uintptr_t>(dst) % static_cast<unsigned>(bytes) != 0)
    return false;
  for (std::int64_t* v :
       {&s.dims.dims[4], &d.dims.dims[4], &s.origin[4], &d.origin[4], &extents.dims[4]})
    *v /= per;
  return true;
}

}  // namespace

cudaError_t copy(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                 int element_bytes, cudaStream_t stream) {
  if (dst_box.count() == 0) return cudaSuccess;
  if (element_bytes != 2 && element_bytes != 4) return cudaErrorInvalidValue;
  Box s = src_box, d = dst_box;
  if (widen(src, s, dst, d, element_bytes, 16)) return dispatch<uint4>(src, s, dst, d, stream);
  if (widen(src, s, dst, d, element_bytes, 8)) return dispatch<uint2>(src, s, dst, d, stream);
  if (element_bytes == 2 && !widen(src, s, dst, d, 2, 4))
    return dispatch<std::uint16_t>(src, s, dst, d, stream);
  return dispatch<std::uint32_t>(src, s, dst, d, stream);
}

cudaError_t copy_region(const void* src, const Region& src_region, void* dst,
                        const Region& dst_region, const Box& extents, int element_bytes,
                        cudaStream_t stream) {
  if (extents.count() == 0) return cudaSuccess;
  if (element_bytes != 2 && element_bytes != 4) return cudaErrorInvalidValue;
  Region s = src_region, d = dst_region;
  Box e = extents;
  if (widen_regions(src, s, dst, d, e, element_bytes, 16))
    return region_index<uint4>(src, s, dst, d, e, Assign{}, stream);
  if (widen_regions(src, s, dst, d, e, element_bytes, 8))
    return region_index<uint2>(src, s, dst, d, e, Assign{}, stream);
  if (element_bytes == 2 && !widen_regions(src, s, dst, d, e, 2, 4))
    return region_index<std::uint16_t>(src, s, dst, d, e, Assign{}, stream);
  return region_index<std::uint32_t>(src, s, dst, d, e, Assign{}, stream);
}

cudaError_t add_region(const void* src, const Region& src_region, void* dst,
                       const Region& dst_region, const Box& extents, Element element,
                       cudaStream_t stream) {
  if (extents.count() == 0) return cudaSuccess;
  switch (element) {
    case Element::f32:
      return region_index<float>(src, src_region, dst, dst_region, extents, Add{}, stream);
    case Element::f16:
      return region_index<__half>(src, src_region, dst, dst_region, extents, Add{}, stream);
    case Element::bf16:
      return region_index<__nv_bfloat16>(src, src_region, dst, dst_region, extents, Add{}, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::channel_pad
