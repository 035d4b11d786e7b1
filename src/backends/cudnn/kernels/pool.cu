// dnnx's pooling kernels (kernels/pool.hpp). Every case in one set of kernels: 1/2/3-D as 3-D,
// per-side padding, dilation, ceil mode, both layouts, f32/f16/bf16 with f32 accumulation.
//
// Note [pool kernel layout]
// One thread per output element (forward) or per input element (backward): nothing is reduced
// across threads, so there are no atomics and every result is bitwise reproducible. In
// channels_last tensors a thread handles a pack of V consecutive channels (16 bytes: 8 f16/bf16
// or 4 f32) when the channel count and the pointers allow it; consecutive threads take
// consecutive packs, so a warp reads whole 16-byte-aligned runs of channels, the memory-bound
// case's best access pattern (max-pool 3x3/2 on 112x112x64 f16 NHWC reads each input pack about
// 2.25 times, mostly from L2). channels_first tensors use one element per thread, consecutive
// threads along W; the max forward and the backward from indices (ResNet's fp32 max pool) run
// instead as "planes" kernels: a thread owns one position of the (n, c) plane and loops over
// planes (grid y), so that the position's window bounds, which cost integer divisions, are worked
// out once for several planes.
//
// Note [pool kernel backward]
// The backward pass gathers: each input element sums, in a fixed order (D, H, W of the windows
// it lies in), the gradients routed to it, in f32, and is written once (zero when none is). The
// averages route diff_dst / divisor to every input element of the window. Max routes each window's
// gradient to its argmax (the first maximum in scan order, a NaN winning: Note [pooling windows]
// in the reference); the argmax is found either by a first pass that stores each window's argmax
// (window-local index, one byte per output element) in the workspace, or, without workspace, by
// rescanning every window an input element lies in.

//
// Note [pool index check]
// The backward from indices gathers as above, matching each window's saved index against the
// input element's flat position. An index outside its window would match no element and its
// gradient would vanish silently, so a second kernel checks every window once, one thread per
// dst element: an index that names no element of its window (outside the plane, outside the
// window's extent, or between the positions of a dilated window) turns the window's first
// input element in diff_src into NaN and atomicMins the index's position (dst's logical order)
// into the plan's PoolIndexRecord. The last block of the launch to finish (a counter in the same
// record) copies the lowest such position, and the index read there, into the plan's
// PoolIndexReport in mapped pinned host memory, and resets the record: Note [deferred label
// check] in backends/cudnn/cross_entropy.cpp is the same scheme, and the plan raises the report
// on its next call. The check is a pass of its own rather than a branch inside the gather: in
// channels_first tensors, one element per thread, that branch made the gather more than twice as
// slow, while a separate pass only reads the indices once more.
//
// Note [pool kernel 3x3]
// A window scanned with runtime bounds issues its loads one after the other. For dense 1 x 3 x 3
// windows (ResNet's max pool) on channel packs the max kernel has constant trip counts instead:
// all nine positions are tested against the input bounds and their packs loaded up front, so
// the loads are in flight together; the comparisons then run in the same scan order.

#include "backends/cudnn/kernels/pool.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int block_threads = 256;
// The argmax pass stores window-local indices as bytes: windows of up to 255 positions.
using ArgIndex = std::uint8_t;
constexpr int max_argmax_window = 255;

// The shape in the kernels' index type (Note [pool kernel layout]).
template <typename Index>
struct Geometry {
  Index batch;
  Index channels;
  Index packs;  // channel packs per position (channels_last), channels otherwise
  int in[3], out[3], kernel[3], stride[3], pad_before[3], pad_after[3];
  int dilation[3];  // distance between a window's positions
  int extent[3];    // (kernel - 1) * dilation + 1
  bool dilated;     // a dilation is not 1
  int mode;         // PoolKernelMode
};

// One output position's window along one dim (Note [pooling windows] in the reference): its input
// elements are begin, begin + step, ... below end.
struct Span {
  int start;   // first position, in input coordinates (may be in the front padding)
  int begin;   // first input element
  int end;     // one past the last input element
  int step;    // the dilation
  int padded;  // positions inside the padded input: the include-pad count
};

template <typename Index>
__device__ __forceinline__ Span window(const Geometry<Index>& g, int dim, int o) {
  Span s;
  s.start = o * g.stride[dim] - g.pad_before[dim];
  s.step = g.dilation[dim];
  if (s.step == 1) {
    const int stop = s.start + g.kernel[dim];
    s.padded = min(stop, g.in[dim] + g.pad_after[dim]) - s.start;
    s.begin = max(s.start, 0);
    s.end = min(stop, g.in[dim]);
    return s;
  }
  // The positions start + j * step, j < kernel: the first at or past 0, the last below the
  // input, and those inside the padded input (detail::pool_span on the host).
  const int skipped = s.start < 0 ? (s.step - 1 - s.start) / s.step : 0;
  const int last = min(g.kernel[dim] - 1, (g.in[dim] - 1 - s.start) / s.step);
  s.begin = s.start + skipped * s.step;
  s.end = s.start + last * s.step + 1;
  s.padded = min(g.kernel[dim], (g.in[dim] + g.pad_after[dim] - s.start + s.step - 1) / s.step);
  return s;
}

// The window-local index along one dim (j of position start + j * step) of position x.
__device__ __forceinline__ int local_of(const Span& s, int x) {
  return s.step == 1 ? x - s.start : (x - s.start) / s.step;
}

// The input elements of a window along one dim.
__device__ __forceinline__ int count_of(const Span& s) {
  return s.step == 1 ? s.end - s.begin : (s.end - s.begin - 1) / s.step + 1;
}

// The outputs along one dim within whose windows' extent input position i lies; with a dilation
// only those whose window starts a multiple of it before i hold i (holds()).
struct Range {
  int first, last;  // inclusive; empty when first > last
};

template <typename Index>
__device__ __forceinline__ Range windows_of(const Geometry<Index>& g, int dim, int i) {
  const int shifted = i + g.pad_before[dim];
  Range r;
  r.first = shifted < g.extent[dim] ? 0 : (shifted - g.extent[dim]) / g.stride[dim] + 1;
  r.last = min(g.out[dim] - 1, shifted / g.stride[dim]);
  return r;
}

// Whether output o's window along one dim holds input position i (o from windows_of(i)).
template <typename Index>
__device__ __forceinline__ bool holds(const Geometry<Index>& g, int dim, int i, int o) {
  return g.dilation[dim] == 1 || (i + g.pad_before[dim] - o * g.stride[dim]) % g.dilation[dim] == 0;
}

template <typename Index>
__device__ __forceinline__ float divisor(const Geometry<Index>& g, const Span& d, const Span& h,
                                         const Span& w) {
  if (g.mode == static_cast<int>(PoolKernelMode::avg_include_pad))
    return static_cast<float>(d.padded) * static_cast<float>(h.padded) *
           static_cast<float>(w.padded);
  return static_cast<float>(count_of(d)) * static_cast<float>(count_of(h)) *
         static_cast<float>(count_of(w));
}

// Where element (n, pack or channel, d, h, w) lives, for a tensor of spatial sizes `sizes`.
template <bool ChannelsLast, int V, typename Index>
__device__ __forceinline__ Index offset_of(const Geometry<Index>& g, const int (&sizes)[3], Index n,
                                           Index pack, int d, int h, int w) {
  const Index position = (static_cast<Index>(d) * sizes[1] + h) * sizes[2] + w;
  const Index plane = static_cast<Index>(sizes[0]) * sizes[1] * sizes[2];
  if (ChannelsLast) return (n * plane + position) * g.channels + pack * V;
  return (n * g.channels + pack) * plane + position;
}

// One item of a grid-stride loop: its sample, channel pack and spatial position.
template <typename Index>
struct Item {
  Index n, pack;
  int d, h, w;
};

// Splits a flat item index into (n, pack, d, h, w) over spatial sizes `sizes`, packs fastest
// for channels_last and W fastest for channels_first (Note [pool kernel layout]).
template <bool ChannelsLast, typename Index>
__device__ __forceinline__ Item<Index> split(const Geometry<Index>& g, const int (&sizes)[3],
                                             Index item) {
  Index n, pack;
  int d, h, w;
  if (ChannelsLast) {
    pack = item % g.packs;
    item /= g.packs;
  }
  w = static_cast<int>(item % sizes[2]);
  item /= sizes[2];
  h = static_cast<int>(item % sizes[1]);
  item /= sizes[1];
  d = static_cast<int>(item % sizes[0]);
  item /= sizes[0];
  if (!ChannelsLast) {
    pack = item % g.packs;
    item /= g.packs;
  }
  n = item;
  return {n, pack, d, h, w};
}

// The argmax of each lane over one window: the window-local index (row-major over the window's
// kernel positions, padding positions included) of the first maximum, a NaN replacing any number.
// FixedK > 0: a dense 1 x FixedK x FixedK window (Note [pool kernel 3x3]); 0: any window.
template <int FixedK, typename T, int V, bool ChannelsLast, typename Index>
__device__ __forceinline__ void window_argmax(const Geometry<Index>& g, const T* __restrict__ src,
                                              Index n, Index pack, const Span& sd, const Span& sh,
                                              const Span& sw, float (&best)[V], int (&at)[V]) {
#pragma unroll
  for (int v = 0; v < V; ++v) {
    best[v] = __int_as_float(0xff800000);  // -inf
    at[v] = (local_of(sd, sd.begin) * g.kernel[1] + local_of(sh, sh.begin)) * g.kernel[2] +
            local_of(sw, sw.begin);
  }
  if constexpr (FixedK > 0) {
    Pack<T, V> values[FixedK][FixedK];
    bool inside[FixedK][FixedK];
#pragma unroll
    for (int kh = 0; kh < FixedK; ++kh) {
#pragma unroll
      for (int kw = 0; kw < FixedK; ++kw) {
        const int h = sh.start + kh, w = sw.start + kw;
        inside[kh][kw] = h >= sh.begin && h < sh.end && w >= sw.begin && w < sw.end;
        if (inside[kh][kw]) {
          values[kh][kw] = *reinterpret_cast<const Pack<T, V>*>(
              src + offset_of<ChannelsLast, V>(g, g.in, n, pack, sd.begin, h, w));
        }
      }
    }
#pragma unroll
    for (int kh = 0; kh < FixedK; ++kh) {
#pragma unroll
      for (int kw = 0; kw < FixedK; ++kw) {
        if (!inside[kh][kw]) continue;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const float value = to_float(values[kh][kw].v[v]);
          if (value > best[v] || isnan(value)) {
            best[v] = value;
            at[v] = kh * FixedK + kw;
          }
        }
      }
    }
  } else {
    const int jw0 = local_of(sw, sw.begin);
    for (int d = sd.begin, jd = local_of(sd, sd.begin); d < sd.end; d += sd.step, ++jd) {
      for (int h = sh.begin, jh = local_of(sh, sh.begin); h < sh.end; h += sh.step, ++jh) {
        const int row = (jd * g.kernel[1] + jh) * g.kernel[2];
        for (int w = sw.begin, jw = jw0; w < sw.end; w += sw.step, ++jw) {
          const Pack<T, V> values = *reinterpret_cast<const Pack<T, V>*>(
              src + offset_of<ChannelsLast, V>(g, g.in, n, pack, d, h, w));
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float value = to_float(values.v[v]);
            if (value > best[v] || isnan(value)) {
              best[v] = value;
              at[v] = row + jw;
            }
          }
        }
      }
    }
  }
}

// A window-local index (row-major over the kernel's positions) as a flat index into the input
// plane.
template <typename Index>
__device__ __forceinline__ long long flat_index(const Geometry<Index>& g, const Span& sd,
                                                const Span& sh, const Span& sw, int local) {
  const int area = g.kernel[1] * g.kernel[2];
  const int d = sd.start + local / area * sd.step;
  const int h = sh.start + local / g.kernel[2] % g.kernel[1] * sh.step;
  const int w = sw.start + local % g.kernel[2] * sw.step;
  return (static_cast<long long>(d) * g.in[1] + h) * g.in[2] + w;
}

// Forward: one thread per output pack. IsMax: dst = window max and, if `argmax` is set, the
// window-local argmax per element, if `indices` is set, the argmax as a flat index into the
// input plane (PyTorch's); otherwise the average of the mode.
template <typename T, typename I, int V, bool ChannelsLast, bool IsMax, int FixedK, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_fwd_kernel(Geometry<Index> g, const T* __restrict__ src, T* __restrict__ dst,
                    ArgIndex* __restrict__ argmax, I* __restrict__ indices, Index items) {
  const Index step = static_cast<Index>(gridDim.x) * block_threads;
  for (Index item = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; item < items;
       item += step) {
    const auto [n, pack, od, oh, ow] = split<ChannelsLast>(g, g.out, item);
    const Span sd = window(g, 0, od), sh = window(g, 1, oh), sw = window(g, 2, ow);
    const Index out_at = offset_of<ChannelsLast, V>(g, g.out, n, pack, od, oh, ow);
    Pack<T, V> result;
    if (IsMax) {
      float best[V];
      int at[V];
      window_argmax<FixedK, T, V, ChannelsLast>(g, src, n, pack, sd, sh, sw, best, at);
#pragma unroll
      for (int v = 0; v < V; ++v) result.v[v] = from_float<T>(best[v]);
      if (argmax != nullptr) {
        Pack<ArgIndex, V> local;
#pragma unroll
        for (int v = 0; v < V; ++v) local.v[v] = static_cast<ArgIndex>(at[v]);
        *reinterpret_cast<Pack<ArgIndex, V>*>(argmax + out_at) = local;
      }
      if (indices != nullptr) {
        // Window-local (row-major over the whole window) to flat in the input plane.
        Pack<I, V> flat;
#pragma unroll
        for (int v = 0; v < V; ++v) flat.v[v] = static_cast<I>(flat_index(g, sd, sh, sw, at[v]));
        *reinterpret_cast<Pack<I, V>*>(indices + out_at) = flat;
      }
    } else {
      float sum[V];
#pragma unroll
      for (int v = 0; v < V; ++v) sum[v] = 0.0f;
      for (int d = sd.begin; d < sd.end; d += sd.step) {
        for (int h = sh.begin; h < sh.end; h += sh.step) {
          for (int w = sw.begin; w < sw.end; w += sw.step) {
            const Pack<T, V> values = *reinterpret_cast<const Pack<T, V>*>(
                src + offset_of<ChannelsLast, V>(g, g.in, n, pack, d, h, w));
#pragma unroll
            for (int v = 0; v < V; ++v) sum[v] += to_float(values.v[v]);
          }
        }
      }
      const float count = divisor(g, sd, sh, sw);
#pragma unroll
      for (int v = 0; v < V; ++v) result.v[v] = from_float<T>(sum[v] / count);
    }
    if (dst != nullptr) *reinterpret_cast<Pack<T, V>*>(dst + out_at) = result;
  }
}

// What a thread of a planes kernel (pool_fwd_max_planes_kernel, pool_bwd_indices_planes_kernel)
// starts from: the elements of one input and one output (n, c) plane, and the position it owns.
struct PlaneThread {
  int in_plane, out_plane, position;
};
template <typename Index>
__device__ __forceinline__ PlaneThread plane_thread(const Geometry<Index>& g) {
  const int in_plane = g.in[0] * g.in[1] * g.in[2];
  const int out_plane = g.out[0] * g.out[1] * g.out[2];
  const int position = static_cast<int>(blockIdx.x) * block_threads + static_cast<int>(threadIdx.x);
  return {in_plane, out_plane, position};
}

// The (d, h, w) coordinates of `position` in a plane of `dims` (row-major).
struct Coordinates {
  int d, h, w;
};
__device__ __forceinline__ Coordinates coordinates(int position, const int (&dims)[3]) {
  const int w = position % dims[2], h = position / dims[2] % dims[1];
  const int d = position / dims[2] / dims[1];
  return {d, h, w};
}

// Max forward for channels_first tensors: a thread owns one output position and visits the
// (n, c) planes blockIdx.y, blockIdx.y + gridDim.y, ..., so its window bounds (integer
// divisions) are worked out once for several planes (as pool_bwd_indices_planes_kernel does);
// what each plane writes is pool_fwd_kernel's.
template <typename T, typename I, int FixedK, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_fwd_max_planes_kernel(Geometry<Index> g, const T* __restrict__ src, T* __restrict__ dst,
                               ArgIndex* __restrict__ argmax, I* __restrict__ indices,
                               Index planes) {
  const auto [in_plane, out_plane, position] = plane_thread(g);
  if (position >= out_plane) return;
  const auto [od, oh, ow] = coordinates(position, g.out);
  const Span sd = window(g, 0, od), sh = window(g, 1, oh), sw = window(g, 2, ow);
  for (Index plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    float best[1];
    int at[1];
    window_argmax<FixedK, T, 1, false>(g, src + plane * in_plane, Index{0}, Index{0}, sd, sh, sw,
                                       best, at);
    const Index out_at = plane * out_plane + position;
    if (dst != nullptr) dst[out_at] = from_float<T>(best[0]);
    if (argmax != nullptr) argmax[out_at] = static_cast<ArgIndex>(at[0]);
    if (indices != nullptr) indices[out_at] = static_cast<I>(flat_index(g, sd, sh, sw, at[0]));
  }
}

// Backward: one thread per input pack, gathering from the windows it lies in
// (Note [pool kernel backward]). `strategy` matters for max only: MaxBackward::argmax reads the
// indices the forward kernel stored in `argmax`; rescan recomputes them from src.
template <typename T, int V, bool ChannelsLast, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_bwd_kernel(Geometry<Index> g, int strategy, const T* __restrict__ src,
                    const T* __restrict__ diff_dst, T* __restrict__ diff_src,
                    const ArgIndex* __restrict__ argmax, Index items) {
  const bool max_mode = g.mode == static_cast<int>(PoolKernelMode::max);
  const bool rescan = strategy == static_cast<int>(MaxBackward::rescan);
  const Index step = static_cast<Index>(gridDim.x) * block_threads;
  for (Index item = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; item < items;
       item += step) {
    const auto [n, pack, id, ih, iw] = split<ChannelsLast>(g, g.in, item);
    const Range rd = windows_of(g, 0, id), rh = windows_of(g, 1, ih), rw = windows_of(g, 2, iw);
    float sum[V];
#pragma unroll
    for (int v = 0; v < V; ++v) sum[v] = 0.0f;
    for (int od = rd.first; od <= rd.last; ++od) {
      if (!holds(g, 0, id, od)) continue;
      const Span sd = window(g, 0, od);
      for (int oh = rh.first; oh <= rh.last; ++oh) {
        if (!holds(g, 1, ih, oh)) continue;
        const Span sh = window(g, 1, oh);
        for (int ow = rw.first; ow <= rw.last; ++ow) {
          if (!holds(g, 2, iw, ow)) continue;
          const Span sw = window(g, 2, ow);
          const Index out_at = offset_of<ChannelsLast, V>(g, g.out, n, pack, od, oh, ow);
          if (!max_mode) {
            const Pack<T, V> grad = *reinterpret_cast<const Pack<T, V>*>(diff_dst + out_at);
            const float count = divisor(g, sd, sh, sw);
#pragma unroll
            for (int v = 0; v < V; ++v) sum[v] += to_float(grad.v[v]) / count;
            continue;
          }
          const int local =
              (local_of(sd, id) * g.kernel[1] + local_of(sh, ih)) * g.kernel[2] + local_of(sw, iw);
          int at[V];
          if (rescan) {
            float best[V];
            window_argmax<0, T, V, ChannelsLast>(g, src, n, pack, sd, sh, sw, best, at);
          } else {
            const Pack<ArgIndex, V> indices =
                *reinterpret_cast<const Pack<ArgIndex, V>*>(argmax + out_at);
#pragma unroll
            for (int v = 0; v < V; ++v) at[v] = indices.v[v];
          }
          bool any = false;
#pragma unroll
          for (int v = 0; v < V; ++v) any = any || at[v] == local;
          if (!any) continue;
          const Pack<T, V> grad = *reinterpret_cast<const Pack<T, V>*>(diff_dst + out_at);
#pragma unroll
          for (int v = 0; v < V; ++v) {
            if (at[v] == local) sum[v] += to_float(grad.v[v]);
          }
        }
      }
    }
    Pack<T, V> result;
#pragma unroll
    for (int v = 0; v < V; ++v) result.v[v] = from_float<T>(sum[v]);
    *reinterpret_cast<Pack<T, V>*>(
        diff_src + offset_of<ChannelsLast, V>(g, g.in, n, pack, id, ih, iw)) = result;
  }
}

// The backward from saved indices (Note [pool kernel backward]): one thread per input pack,
// gathering the gradients of the windows whose saved index names it (with a dilation, windows
// whose extent holds it but not a position would only match a bad index, which the check
// reports). The indices are checked by pool_index_check_kernel (Note [pool index check]).
template <typename T, typename I, int V, bool ChannelsLast, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_bwd_indices_kernel(Geometry<Index> g, const T* __restrict__ diff_dst,
                            const I* __restrict__ indices, T* __restrict__ diff_src, Index items) {
  const Index step = static_cast<Index>(gridDim.x) * block_threads;
  for (Index item = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; item < items;
       item += step) {
    const auto [n, pack, id, ih, iw] = split<ChannelsLast>(g, g.in, item);
    const long long own = (static_cast<long long>(id) * g.in[1] + ih) * g.in[2] + iw;
    const Range rd = windows_of(g, 0, id), rh = windows_of(g, 1, ih), rw = windows_of(g, 2, iw);
    float sum[V];
#pragma unroll
    for (int v = 0; v < V; ++v) sum[v] = 0.0f;
    for (int od = rd.first; od <= rd.last; ++od) {
      for (int oh = rh.first; oh <= rh.last; ++oh) {
        for (int ow = rw.first; ow <= rw.last; ++ow) {
          const Index out_at = offset_of<ChannelsLast, V>(g, g.out, n, pack, od, oh, ow);
          const Pack<I, V> saved = *reinterpret_cast<const Pack<I, V>*>(indices + out_at);
          bool any = false;
#pragma unroll
          for (int v = 0; v < V; ++v) any = any || static_cast<long long>(saved.v[v]) == own;
          if (!any) continue;
          const Pack<T, V> grad = *reinterpret_cast<const Pack<T, V>*>(diff_dst + out_at);
#pragma unroll
          for (int v = 0; v < V; ++v) {
            if (static_cast<long long>(saved.v[v]) == own) sum[v] += to_float(grad.v[v]);
          }
        }
      }
    }
    Pack<T, V> result;
#pragma unroll
    for (int v = 0; v < V; ++v) result.v[v] = from_float<T>(sum[v]);
    *reinterpret_cast<Pack<T, V>*>(
        diff_src + offset_of<ChannelsLast, V>(g, g.in, n, pack, id, ih, iw)) = result;
  }
}

// The same gather for channels_first tensors (Note [pool kernel backward]): a thread owns one
// input position and visits the (n, c) planes blockIdx.y, blockIdx.y + gridDim.y, ..., so the
// position's coordinates and window ranges (integer divisions) are worked out once for several
// planes; in a plane the work is only the windows' loads and compares. (One element per thread,
// with that integer work per element, made ResNet's fp32 max-pool backward 1.4-1.75x PyTorch's,
// whose kernel loops over planes the same way.)
template <typename T, typename I, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_bwd_indices_planes_kernel(Geometry<Index> g, const T* __restrict__ diff_dst,
                                   const I* __restrict__ indices, T* __restrict__ diff_src,
                                   Index planes) {
  const auto [in_plane, out_plane, position] = plane_thread(g);
  if (position >= in_plane) return;
  const auto [id, ih, iw] = coordinates(position, g.in);
  const Range rd = windows_of(g, 0, id), rh = windows_of(g, 1, ih), rw = windows_of(g, 2, iw);
  for (Index plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const I* saved = indices + plane * out_plane;
    const T* grad = diff_dst + plane * out_plane;
    float sum = 0.0f;
    for (int od = rd.first; od <= rd.last; ++od) {
      for (int oh = rh.first; oh <= rh.last; ++oh) {
        const int row = (od * g.out[1] + oh) * g.out[2];
        for (int ow = rw.first; ow <= rw.last; ++ow) {
          if (static_cast<long long>(saved[row + ow]) == position) sum += to_float(grad[row + ow]);
        }
      }
    }
    diff_src[plane * in_plane + position] = from_float<T>(sum);
  }
}

// Note [pool index check]: one thread per dst element, in memory order, after the gather. A bad
// index turns its window's first input element into NaN and competes for the lowest position; the
// last block publishes it. The grid is capped (the threads stride over the elements) so that few
// blocks end with the record's atomics.
template <typename T, typename I, bool ChannelsLast, typename Index>
__global__ void __launch_bounds__(block_threads)
    pool_index_check_kernel(Geometry<Index> g, const I* __restrict__ indices,
                            T* __restrict__ diff_src, Index items, PoolIndexRecord* record,
                            PoolIndexReport* report) {
  // Index arithmetic (32-bit when the tensors allow, dispatch()) on the common path; the bad path
  // recomputes in 64 bits.
  const Index out_plane = static_cast<Index>(g.out[0]) * g.out[1] * g.out[2];
  const Index in_plane = static_cast<Index>(g.in[0]) * g.in[1] * g.in[2];
  const Index step = static_cast<Index>(gridDim.x) * block_threads;
  for (Index item = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; item < items;
       item += step) {
    const Index position = (ChannelsLast ? item / g.channels : item) % out_plane;
    const int ow = static_cast<int>(position % g.out[2]);
    const int oh = static_cast<int>(position / g.out[2] % g.out[1]);
    const int od = static_cast<int>(position / g.out[2] / g.out[1]);
    const Span sd = window(g, 0, od), sh = window(g, 1, oh), sw = window(g, 2, ow);
    const long long index = static_cast<long long>(indices[item]);
    bool inside = index >= 0 && index < in_plane;
    if (inside) {
      const auto flat = static_cast<Index>(index);  // < in_plane
      const int w = static_cast<int>(flat % g.in[2]);
      const int h = static_cast<int>(flat / g.in[2] % g.in[1]);
      const int d = static_cast<int>(flat / g.in[2] / g.in[1]);
      inside =
          d >= sd.begin && d < sd.end && h >= sh.begin && h < sh.end && w >= sw.begin && w < sw.end;
      // Dilated windows: a position, not an element between two.
      if (inside && g.dilated) {
        inside = (d - sd.begin) % sd.step == 0 && (h - sh.begin) % sh.step == 0 &&
                 (w - sw.begin) % sw.step == 0;
      }
    }
    if (inside) continue;
    const long long channels = g.channels;
    const long long rest = ChannelsLast ? item / channels : item / out_plane;
    const long long channel = ChannelsLast ? item % channels : rest % channels;
    const long long n = ChannelsLast ? rest / out_plane : rest / channels;
    const long long corner =
        (static_cast<long long>(sd.begin) * g.in[1] + sh.begin) * g.in[2] + sw.begin;
    const long long at = ChannelsLast ? (n * in_plane + corner) * channels + channel
                                      : (n * channels + channel) * in_plane + corner;
    diff_src[at] = from_float<T>(__int_as_float(0x7fc00000));  // NaN
    const long long logical = (n * channels + channel) * out_plane + position;
    atomicMin(&record->bad_position, static_cast<unsigned long long>(logical));
    __threadfence();
  }

  // The last block to finish publishes the lowest bad position and resets the record.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&record->blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  __threadfence();
  const unsigned long long bad = atomicAdd(&record->bad_position, 0ull);
  if (bad != ~0ull) {
    const auto position = static_cast<long long>(bad);
    const long long channels = g.channels;
    long long offset = position;
    if (ChannelsLast) {
      const long long image = position / (channels * out_plane);
      const long long channel = position / out_plane % channels;
      offset = (image * out_plane + position % out_plane) * channels + channel;
    }
    report->value = static_cast<long long>(indices[offset]);
    __threadfence_system();
    report->position = position;
    __threadfence_system();
    record->bad_position = ~0ull;
  }
  record->blocks_done = 0;
  __threadfence();
}

// ---- host side
// ------------------------------------------------------------------------------------

std::int64_t spatial_count(const int (&sizes)[3]) {
  return static_cast<std::int64_t>(sizes[0]) * sizes[1] * sizes[2];
}

std::int64_t window_volume(const PoolShape& shape) {
  return static_cast<std::int64_t>(shape.kernel[0]) * shape.kernel[1] * shape.kernel[2];
}

// The planes kernel keeps a plane's positions in int (and its grid x within limits).
constexpr std::int64_t max_plane_positions = std::int64_t{1} << 30;

// The grid of a planes kernel: x over a plane's positions, y over the (n, c) planes with about
// eight planes per thread, as many as grid y allows.
dim3 plane_grid(std::int64_t positions, std::int64_t planes) {
  return {static_cast<unsigned>((positions + block_threads - 1) / block_threads),
          static_cast<unsigned>(std::clamp<std::int64_t>((planes + 7) / 8, 1, 65535))};
}

int launch_blocks(std::int64_t items) {
  const std::int64_t blocks = (items + block_threads - 1) / block_threads;
  return static_cast<int>(std::clamp<std::int64_t>(blocks, 1, std::int64_t{1} << 22));
}

template <typename Index>
Geometry<Index> geometry_of(const PoolShape& shape, int pack) {
  Geometry<Index> g{};
  g.batch = static_cast<Index>(shape.batch);
  g.channels = static_cast<Index>(shape.channels);
  g.packs = static_cast<Index>(shape.channels / pack);
  for (int i = 0; i < 3; ++i) {
    g.in[i] = shape.input[i];
    g.out[i] = shape.output[i];
    g.kernel[i] = shape.kernel[i];
    g.stride[i] = shape.stride[i];
    g.pad_before[i] = shape.pad_before[i];
    g.pad_after[i] = shape.pad_after[i];
    g.dilation[i] = shape.dilation[i];
    g.extent[i] = (shape.kernel[i] - 1) * shape.dilation[i] + 1;
    g.dilated = g.dilated || shape.dilation[i] != 1;
  }
  g.mode = static_cast<int>(shape.mode);
  return g;
}

bool aligned_or_null(const void* pointer, std::size_t bytes) {
  return pointer == nullptr || aligned(pointer, bytes);
}

// The widest channel pack `shape` and the pointers allow (Note [pool kernel layout]).
template <typename T>
int pack_width(const PoolShape& shape, std::initializer_list<const void*> pointers) {
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (!shape.channels_last || shape.channels % wide != 0) return 1;
  for (const void* pointer : pointers) {
    if (!aligned_or_null(pointer, 16)) return 1;
  }
  return wide;
}

// Calls launch.template run<V, ChannelsLast, Index>() for the shape's pack width, layout and index
// type.
template <typename T, typename Launch>
cudaError_t dispatch(const PoolShape& shape, int pack, const Launch& launch) {
  const std::int64_t elements = shape.batch * shape.channels *
                                std::max(spatial_count(shape.input), spatial_count(shape.output));
  // 32-bit indices while every offset, and the grid-stride loop's last step, stays far from 2^31.
  const bool narrow = elements < (std::int64_t{1} << 30);
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (pack == wide && wide > 1) {
    return narrow ? launch.template run<wide, true, std::int32_t>()
                  : launch.template run<wide, true, std::int64_t>();
  }
  if (shape.channels_last) {
    return narrow ? launch.template run<1, true, std::int32_t>()
                  : launch.template run<1, true, std::int64_t>();
  }
  return narrow ? launch.template run<1, false, std::int32_t>()
                : launch.template run<1, false, std::int64_t>();
}

// The forward kernel; with `argmax` set and dst null it is the max backward's first pass; with
// `indices` set (max only) it also writes PyTorch's flat argmax indices of type I.
template <typename T, typename I = std::int32_t>
struct FwdLaunch {
  const PoolShape& shape;
  const void* src;
  void* dst;
  ArgIndex* argmax;
  cudaStream_t stream;
  I* indices = nullptr;

  template <int V, bool ChannelsLast, typename Index>
  cudaError_t run() const {
    const Geometry<Index> g = geometry_of<Index>(shape, V);
    const std::int64_t items = shape.batch * shape.channels / V * spatial_count(shape.output);
    const auto* in = static_cast<const T*>(src);
    auto* out = static_cast<T*>(dst);
    const int blocks = launch_blocks(items);
    if (shape.mode != PoolKernelMode::max) {
      pool_fwd_kernel<T, I, V, ChannelsLast, false, 0, Index><<<blocks, block_threads, 0, stream>>>(
          g, in, out, nullptr, nullptr, static_cast<Index>(items));
      return cudaGetLastError();
    }
    const bool window_3x3 = shape.kernel[0] == 1 && shape.kernel[1] == 3 && shape.kernel[2] == 3 &&
                            shape.dilation[1] == 1 && shape.dilation[2] == 1;
    const std::int64_t out_plane = spatial_count(shape.output);
    if (!ChannelsLast && out_plane <= max_plane_positions &&
        spatial_count(shape.input) <= max_plane_positions) {
      const dim3 grid = plane_grid(out_plane, shape.batch * shape.channels);
      const auto planes = static_cast<Index>(shape.batch * shape.channels);
      if (window_3x3) {
        pool_fwd_max_planes_kernel<T, I, 3, Index>
            <<<grid, block_threads, 0, stream>>>(g, in, out, argmax, indices, planes);
      } else {
        pool_fwd_max_planes_kernel<T, I, 0, Index>
            <<<grid, block_threads, 0, stream>>>(g, in, out, argmax, indices, planes);
      }
      return cudaGetLastError();
    }
    if constexpr (V > 1) {
      if (window_3x3) {
        pool_fwd_kernel<T, I, V, ChannelsLast, true, 3, Index>
            <<<blocks, block_threads, 0, stream>>>(g, in, out, argmax, indices,
                                                   static_cast<Index>(items));
        return cudaGetLastError();
      }
    }
    pool_fwd_kernel<T, I, V, ChannelsLast, true, 0, Index><<<blocks, block_threads, 0, stream>>>(
        g, in, out, argmax, indices, static_cast<Index>(items));
    return cudaGetLastError();
  }
};

template <typename T, typename I>
struct BwdIndicesLaunch {
  const PoolShape& shape;
  const void* diff_dst;
  const void* indices;
  void* diff_src;
  PoolIndexRecord* record;
  PoolIndexReport* report;
  cudaStream_t stream;

  template <int V, bool ChannelsLast, typename Index>
  cudaError_t run() const {
    const Geometry<Index> g = geometry_of<Index>(shape, V);
    const std::int64_t items = shape.batch * shape.channels / V * spatial_count(shape.input);
    const std::int64_t in_plane = spatial_count(shape.input);
    if (!ChannelsLast && in_plane <= max_plane_positions) {
      const std::int64_t planes = shape.batch * shape.channels;
      pool_bwd_indices_planes_kernel<T, I, Index>
          <<<plane_grid(in_plane, planes), block_threads, 0, stream>>>(
              g, static_cast<const T*>(diff_dst), static_cast<const I*>(indices),
              static_cast<T*>(diff_src), static_cast<Index>(planes));
    } else {
      pool_bwd_indices_kernel<T, I, V, ChannelsLast, Index>
          <<<launch_blocks(items), block_threads, 0, stream>>>(
              g, static_cast<const T*>(diff_dst), static_cast<const I*>(indices),
              static_cast<T*>(diff_src), static_cast<Index>(items));
    }
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
    // Every block of the check ends with an atomic on the record, all on one address (Note [pool
    // index check]): about as many blocks as an H100/H200 holds at once, striding over dst.
    constexpr int max_check_blocks = 1024;
    const std::int64_t outputs = shape.batch * shape.channels * spatial_count(shape.output);
    pool_index_check_kernel<T, I, ChannelsLast, Index>
        <<<std::min(launch_blocks(outputs), max_check_blocks), block_threads, 0, stream>>>(
            geometry_of<Index>(shape, 1), static_cast<const I*>(indices), static_cast<T*>(diff_src),
            static_cast<Index>(outputs), record, report);
    return cudaGetLastError();
  }
};

template <typename T>
struct BwdLaunch {
  const PoolShape& shape;
  MaxBackward strategy;
  const void* src;
  const void* diff_dst;
  void* diff_src;
  const ArgIndex* argmax;
  cudaStream_t stream;

  template <int V, bool ChannelsLast, typename Index>
  cudaError_t run() const {
    const Geometry<Index> g = geometry_of<Index>(shape, V);
    const std::int64_t items = shape.batch * shape.channels / V * spatial_count(shape.input);
    pool_bwd_kernel<T, V, ChannelsLast, Index><<<launch_blocks(items), block_threads, 0, stream>>>(
        g, static_cast<int>(strategy), static_cast<const T*>(src), static_cast<const T*>(diff_dst),
        static_cast<T*>(diff_src), argmax, static_cast<Index>(items));
    return cudaGetLastError();
  }
};

template <typename T>
cudaError_t fwd_typed(const PoolShape& shape, const void* src, void* dst, cudaStream_t stream) {
  const int pack = pack_width<T>(shape, {src, dst});
  return dispatch<T>(shape, pack, FwdLaunch<T>{shape, src, dst, nullptr, stream});
}

// The pack width for T data and I indices: a pack of indices must be aligned to its size.
template <typename T, typename I>
int index_pack_width(const PoolShape& shape, std::initializer_list<const void*> data,
                     const void* indices) {
  const int pack = pack_width<T>(shape, data);
  return aligned_or_null(indices, static_cast<std::size_t>(pack) * sizeof(I)) ? pack : 1;
}

template <typename T, typename I>
cudaError_t fwd_indices_typed(const PoolShape& shape, const void* src, void* dst, void* indices,
                              cudaStream_t stream) {
  const int pack = index_pack_width<T, I>(shape, {src, dst}, indices);
  return dispatch<T>(shape, pack,
                     FwdLaunch<T, I>{shape, src, dst, nullptr, stream, static_cast<I*>(indices)});
}

template <typename T, typename I>
cudaError_t bwd_indices_typed(const PoolShape& shape, const void* diff_dst, const void* indices,
                              void* diff_src, PoolIndexRecord* record, PoolIndexReport* report,
                              cudaStream_t stream) {
  const int pack = index_pack_width<T, I>(shape, {diff_dst, diff_src}, indices);
  return dispatch<T>(
      shape, pack,
      BwdIndicesLaunch<T, I>{shape, diff_dst, indices, diff_src, record, report, stream});
}

template <typename T>
cudaError_t fwd_indices_of(const PoolShape& shape, PoolIndexType index_type, const void* src,
                           void* dst, void* indices, cudaStream_t stream) {
  return index_type == PoolIndexType::i64
             ? fwd_indices_typed<T, std::int64_t>(shape, src, dst, indices, stream)
             : fwd_indices_typed<T, std::int32_t>(shape, src, dst, indices, stream);
}

template <typename T>
cudaError_t bwd_indices_of(const PoolShape& shape, PoolIndexType index_type, const void* diff_dst,
                           const void* indices, void* diff_src, PoolIndexRecord* record,
                           PoolIndexReport* report, cudaStream_t stream) {
  return index_type == PoolIndexType::i64
             ? bwd_indices_typed<T, std::int64_t>(shape, diff_dst, indices, diff_src, record,
                                                  report, stream)
             : bwd_indices_typed<T, std::int32_t>(shape, diff_dst, indices, diff_src, record,
                                                  report, stream);
}

template <typename T>
cudaError_t bwd_typed(const PoolShape& shape, MaxBackward strategy, const void* src,
                      const void* diff_dst, void* diff_src, void* workspace, cudaStream_t stream) {
  const bool use_argmax = shape.mode == PoolKernelMode::max && strategy == MaxBackward::argmax;
  // One pack width for both passes: the argmax pass writes what the gather reads.
  const int pack = pack_width<T>(shape, {src, diff_dst, diff_src, workspace});
  auto* argmax = static_cast<ArgIndex*>(workspace);
  if (use_argmax) {
    const cudaError_t status =
        dispatch<T>(shape, pack, FwdLaunch<T>{shape, src, nullptr, argmax, stream});
    if (status != cudaSuccess) return status;
  }
  return dispatch<T>(shape, pack,
                     BwdLaunch<T>{shape, use_argmax ? MaxBackward::argmax : MaxBackward::rescan,
                                  src, diff_dst, diff_src, argmax, stream});
}

}  // namespace

std::size_t pool_bwd_workspace_bytes(const PoolShape& shape, MaxBackward strategy) {
  if (shape.mode != PoolKernelMode::max || strategy != MaxBackward::argmax) return 0;
  if (window_volume(shape) > max_argmax_window) return 0;
  return static_cast<std::size_t>(shape.batch * shape.channels * spatial_count(shape.output)) *
         sizeof(ArgIndex);
}

cudaError_t pool_fwd(const PoolShape& shape, const void* src, void* dst, cudaStream_t stream) {
  switch (shape.type) {
    case PoolKernelType::f32: return fwd_typed<float>(shape, src, dst, stream);
    case PoolKernelType::f16: return fwd_typed<__half>(shape, src, dst, stream);
    case PoolKernelType::bf16: return fwd_typed<__nv_bfloat16>(shape, src, dst, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t pool_bwd(const PoolShape& shape, MaxBackward strategy, const void* src,
                     const void* diff_dst, void* diff_src, void* workspace, cudaStream_t stream) {
  // Window-local indices must fit a byte (larger windows are not an argmax candidate).
  if (shape.mode == PoolKernelMode::max && strategy == MaxBackward::argmax &&
      (window_volume(shape) > max_argmax_window || workspace == nullptr))
    return cudaErrorInvalidValue;
  switch (shape.type) {
    case PoolKernelType::f32:
      return bwd_typed<float>(shape, strategy, src, diff_dst, diff_src, workspace, stream);
    case PoolKernelType::f16:
      return bwd_typed<__half>(shape, strategy, src, diff_dst, diff_src, workspace, stream);
    case PoolKernelType::bf16:
      return bwd_typed<__nv_bfloat16>(shape, strategy, src, diff_dst, diff_src, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t pool_index_record_init(PoolIndexRecord* record, cudaStream_t stream) {
  return init_bad_value_record(record, stream);
}

cudaError_t pool_fwd_indices(const PoolShape& shape, PoolIndexType index_type, const void* src,
                             void* dst, void* indices, cudaStream_t stream) {
  if (shape.mode != PoolKernelMode::max || indices == nullptr) return cudaErrorInvalidValue;
  switch (shape.type) {
    case PoolKernelType::f32:
      return fwd_indices_of<float>(shape, index_type, src, dst, indices, stream);
    case PoolKernelType::f16:
      return fwd_indices_of<__half>(shape, index_type, src, dst, indices, stream);
    case PoolKernelType::bf16:
      return fwd_indices_of<__nv_bfloat16>(shape, index_type, src, dst, indices, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t pool_bwd_indices(const PoolShape& shape, PoolIndexType index_type, const void* diff_dst,
                             const void* indices, void* diff_src, PoolIndexRecord* record,
                             PoolIndexReport* report, cudaStream_t stream) {
  if (shape.mode != PoolKernelMode::max || record == nullptr || report == nullptr)
    return cudaErrorInvalidValue;
  switch (shape.type) {
    case PoolKernelType::f32:
      return bwd_indices_of<float>(shape, index_type, diff_dst, indices, diff_src, record, report,
                                   stream);
    case PoolKernelType::f16:
      return bwd_indices_of<__half>(shape, index_type, diff_dst, indices, diff_src, record, report,
                                    stream);
    case PoolKernelType::bf16:
      return bwd_indices_of<__nv_bfloat16>(shape, index_type, diff_dst, indices, diff_src, record,
                                           report, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels
