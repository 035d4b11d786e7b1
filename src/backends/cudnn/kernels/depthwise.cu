// dnnx's depthwise convolution kernels (kernels/depthwise.hpp).
//
// Note [depthwise kernels]
// A depthwise convolution reads few values per output (a kernel window of one channel), so it is
// bound by memory traffic and index arithmetic, not by multiply-adds; the kernels aim at coalesced
// accesses and cheap indexing rather than at data reuse in shared memory.
// - fwd: one thread per output element (channels_first, consecutive threads along W) or per
//   output channel pack (channels_last, consecutive threads along the channels), summing its
//   window in the order D, H, W of the kernel in f32.
// - bwd_data: a gather, one thread per input element (or channel pack), summing over the
//   multiplier's output channels and then the outputs (D, H, W) whose window holds it (Note
//   [depthwise backward data]); each diff_src element is written once: no atomics,
//   deterministic.
// - bwd_weights (direct and unrolled; channel packs: Note [depthwise packed weight gradients]):
//   each weight is a sum over N and every output position. A block owns one output
//   channel (channels_first: 256 threads along the positions) or 32 channels (channels_last: 32
//   lanes along the channels x 8 rows along the positions), a chunk of up to 16 kernel positions
//   (the unrolled variant: all 9, 25 or 49) kept in registers per thread, and one contiguous split
//   of the N * positions range, walked with a fixed step split into its coordinates (no division
//   per position). The block reduces its threads' sums in a fixed order (butterfly warp sums,
//   then the warps' or rows' sums in index order); when the range is split over several blocks
//   (to fill the GPU when there are few channels), each split writes f32 partial sums to the
//   workspace and a second kernel adds them in a fixed order (32 rows of a block take every
//   32nd split, then the rows' sums are added in row order). The split count is a function of
//   the shape only, so results are bitwise reproducible on any GPU.
// Indices inside a sample are 32-bit (a sample's src and dst hold fewer than 2^31 elements,
// spatial coordinates stay below 2^29: depthwise_unsupported()), the sample offset is 64-bit, and
// the batch is walked by a grid dimension bounded to 65535 blocks.
//
// Note [depthwise variants]
// direct         runtime kernel sizes, one element per thread; every depthwise desc.
// unrolled       3x3, 5x5 and 7x7 2-D kernels with compile-time trip counts: the window's loads
//                are issued together and its offsets are constants.
// channel_packs  channels_last with multiplier 1. fwd and bwd_data (even channel counts): V = 2,
//                4 or 8 consecutive channels per thread (up to 16 bytes per access; V narrows at
//                run time when a pointer is not aligned for it), 3x3, 5x5 and 7x7 unrolled, other
//                kernels at runtime sizes, the weights read from a transposed copy (Note
//                [depthwise weight taps]). bwd_weights (2-D 3x3, 5x5 and 7x7 kernels, any
//                channel count): Note [depthwise packed weight gradients].
//
// Note [depthwise weight taps]
// The weights are O x kernel volume, so the V channels of a pack have their weight at a tap
// kernel-volume elements apart, and the lanes of a warp (consecutive packs) as far apart again:
// read as they are, each tap costs a pack thread V scalar loads, each a warp's access touching a
// sector per pack. channel_packs fwd and bwd_data with V > 1 first copy the weights transposed,
// kernel volume x O, into their workspace (transpose_weights_kernel, one more launch), so a
// tap's V weights are one aligned pack load next to the lanes'. The copy is made on every call:
// the weights change between calls (an optimizer step). On an H200 the f16 stride-2 bwd_data
// layers of MobileNetV2 and EfficientNet-B0 took 0.45-0.73 of PyTorch's time with it, against
// 0.94-0.99 before (this kernel or cuDNN's engine 6; docs/benchmarks.md, "The second process,
// and the depthwise weight taps").
// strips         channels_first, 2-D 3x3, 5x5 and 7x7 kernels without dilation; fwd at a stride
//                of 1 or 2 along H, bwd_data at stride 1: a column strip of output rows per
//                thread (Note [depthwise column strips]).
// A channels_last form of the strips (a pack of up to 8 bytes of channels per thread, the lanes
// of a warp along the channels) and tiles of the input in shared memory were measured on an H200
// and ran slower than cuDNN's runtime-compiled depthwise engines on every fp16 layer of
// MobileNetV2 and EfficientNet-B0 tried (docs/benchmarks.md, *Kernels measured and dropped*):
// channels_last fwd and bwd_data at stride 1 are left to cuDNN and channel_packs.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/depthwise.hpp"
#include "backends/cudnn/kernels/splits.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int block_threads = 256;
constexpr int max_grid_y = 65535;
// bwd_weights: kernel positions per block in the runtime-size kernels.
constexpr int weights_chunk = 16;
// bwd_weights channels_last blocks: 32 channels x 8 rows of positions.
constexpr int rows = block_threads / warp_size;
// bwd_weights splits: enough blocks to fill a large GPU, each split at least this many positions.
constexpr std::int64_t target_blocks = 2048;
constexpr std::int64_t min_split_positions = 1024;
constexpr std::int64_t max_splits = 1024;
// channel_packs bwd_weights: about one wave of 256-thread blocks on a large GPU, and the output
// columns of a warp's unit of work (Note [depthwise packed weight gradients]).
constexpr std::int64_t packs_target_blocks = 1024;
constexpr int packs_segment_columns = 16;
// Bounds of depthwise_unsupported() (Note [depthwise kernels]).
constexpr std::int64_t max_coordinate = std::int64_t{1} << 29;
constexpr std::int64_t max_sample = (std::int64_t{1} << 31) - 1;
constexpr std::int64_t max_kernel_volume = std::int64_t{1} << 19;

// The shape as the kernels read it.
struct Geo {
  int in[3], out[3], k[3], s[3], p[3], d[3];
  int ext[3];    // (k - 1) * d + 1: a window's extent
  int channels;  // C
  int mult;      // M
  int outc;      // O = C * M
  int kvol;      // kernel volume
  int in_plane, out_plane;
  int items;  // threads' items per sample (x extent of the grid)
  std::int64_t src_sample, dst_sample;
  std::int64_t batch;
};

Geo geo_of(const DepthwiseShape& shape) {
  Geo g{};
  copy_dims(g, shape);
  for (int i = 0; i < 3; ++i) g.ext[i] = (shape.kernel[i] - 1) * shape.dilation[i] + 1;
  g.channels = static_cast<int>(shape.channels);
  g.mult = static_cast<int>(shape.multiplier);
  g.outc = static_cast<int>(shape.channels * shape.multiplier);
  g.kvol = shape.kernel[0] * shape.kernel[1] * shape.kernel[2];
  g.in_plane = shape.input[0] * shape.input[1] * shape.input[2];
  g.out_plane = shape.output[0] * shape.output[1] * shape.output[2];
  g.src_sample = static_cast<std::int64_t>(g.channels) * g.in_plane;
  g.dst_sample = static_cast<std::int64_t>(g.outc) * g.out_plane;
  g.batch = shape.batch;
  return g;
}

std::int64_t volume(const int (&v)[3]) { return static_cast<std::int64_t>(v[0]) * v[1] * v[2]; }

// The compile-time kernel size of a shape for the unrolled code: 3, 5, 7, or 0 (runtime sizes).
int unrolled_size(const DepthwiseShape& shape) {
  if (shape.kernel[0] != 1 || shape.kernel[1] != shape.kernel[2]) return 0;
  const int k = shape.kernel[1];
  return k == 3 || k == 5 || k == 7 ? k : 0;
}

template <typename T>
constexpr int max_pack() {
  return static_cast<int>(16 / sizeof(T));
}

// The widest pack (8, 4, 2 channels; 16 bytes at most) that divides the channels and to which
// every pointer is aligned; 1 when none.
template <typename T>
int pack_width(const DepthwiseShape& shape, std::initializer_list<const void*> pointers) {
  for (int v = max_pack<T>(); v >= 2; v /= 2) {
    if (shape.channels % v != 0) continue;
    bool ok = true;
    for (const void* p : pointers) ok = ok && aligned(p, sizeof(T) * static_cast<std::size_t>(v));
    if (ok) return v;
  }
  return 1;
}

__device__ __forceinline__ bool inside(int x, int size) {
  return static_cast<unsigned>(x) < static_cast<unsigned>(size);
}

// Note [depthwise weight taps]: wt = the weights transposed, kernel volume x O.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    transpose_weights_kernel(const T* __restrict__ w, T* __restrict__ wt, int outc, int kvol) {
  wait_for_prior_grids();
  const int i = static_cast<int>(blockIdx.x) * block_threads + static_cast<int>(threadIdx.x);
  if (i >= outc * kvol) return;
  const int o = i / kvol;
  wt[(i - o * kvol) * outc + o] = w[i];
}

// ---- forward ------------------------------------------------------------------------------------

// KH, KW > 0: a 2-D KH x KW kernel (kernel D is 1), loops unrolled; 0: runtime sizes.
template <typename T, int V, bool CL, int KH, int KW>
__global__ void __launch_bounds__(block_threads)
    fwd_kernel(Geo g, const T* __restrict__ src, const T* __restrict__ w,
               const T* __restrict__ wt, T* __restrict__ dst) {
  wait_for_prior_grids();
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (item >= g.items) return;
  const int idx = static_cast<int>(item);
  int o, od, oh, ow;
  if (CL) {
    const int packs = g.outc / V;
    o = idx % packs * V;
    int pos = idx / packs;
    ow = pos % g.out[2];
    pos /= g.out[2];
    oh = pos % g.out[1];
    od = pos / g.out[1];
  } else {
    int t = idx;
    ow = t % g.out[2];
    t /= g.out[2];
    oh = t % g.out[1];
    t /= g.out[1];
    od = t % g.out[0];
    o = t / g.out[0];
  }
  const int kd_n = KH > 0 ? 1 : g.k[0];
  const int kh_n = KH > 0 ? KH : g.k[1];
  const int kw_n = KW > 0 ? KW : g.k[2];
  const int c = o / g.mult;  // V > 1 only with multiplier 1
  const int d0 = od * g.s[0] - g.p[0];
  const int h0 = oh * g.s[1] - g.p[1];
  const int w0 = ow * g.s[2] - g.p[2];
  // Offset of the channel in a sample, and of the output element (pack) in a sample.
  const int channel_offset = CL ? c : c * g.in_plane;
  const int out_offset = CL ? idx * V : idx;
  const T* weights = w + static_cast<std::int64_t>(o) * g.kvol;
  for (std::int64_t n = blockIdx.y; n < g.batch; n += gridDim.y) {
    const T* s = src + n * g.src_sample + channel_offset;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    for (int kd = 0; kd < kd_n; ++kd) {
      const int id = d0 + kd * g.d[0];
      if (!inside(id, g.in[0])) continue;
#pragma unroll
      for (int kh = 0; kh < kh_n; ++kh) {
        const int ih = h0 + kh * g.d[1];
        if (!inside(ih, g.in[1])) continue;
        const int row = (id * g.in[1] + ih) * g.in[2];
#pragma unroll
        for (int kw = 0; kw < kw_n; ++kw) {
          const int iw = w0 + kw * g.d[2];
          if (!inside(iw, g.in[2])) continue;
          const int k = (kd * kh_n + kh) * kw_n + kw;
          if (CL) {
            const Pack<T, V> x = *reinterpret_cast<const Pack<T, V>*>(
                s + static_cast<std::int64_t>(row + iw) * g.channels);
            if constexpr (V > 1) {  // Note [depthwise weight taps]
              const Pack<T, V> wk = *reinterpret_cast<const Pack<T, V>*>(wt + k * g.outc + o);
#pragma unroll
              for (int v = 0; v < V; ++v) acc[v] += to_float(x.v[v]) * to_float(wk.v[v]);
            } else {
              acc[0] += to_float(x.v[0]) * to_float(weights[k]);
            }
          } else {
            acc[0] += to_float(s[row + iw]) * to_float(weights[k]);
          }
        }
      }
    }
    T* out = dst + n * g.dst_sample + out_offset;
    if (V == 1) {
      out[0] = from_float<T>(acc[0]);
    } else {
      Pack<T, V> y;
#pragma unroll
      for (int v = 0; v < V; ++v) y.v[v] = from_float<T>(acc[v]);
      *reinterpret_cast<Pack<T, V>*>(out) = y;
    }
  }
}

// ---- backward data ------------------------------------------------------------------------------

// Note [depthwise backward data]
// Input position x (shifted by the front padding: x + pad) lies in the window of output o when
// o * stride <= x + pad <= o * stride + extent - 1 (extent = (kernel - 1) * dilation + 1), at
// kernel position (x + pad - o * stride) / dilation when that divides. The gather walks these
// outputs, first..last per dim (at most ceil(extent / stride)), rather than every kernel position:
// two divisions per dim instead of one per kernel position, by a stride that is mostly 1 or 2
// (shifts), and a dilation division only where the dilation is not 1.

// x / s for x >= 0 (stride 1 and 2 without a division).
__device__ __forceinline__ int divide(int x, int s) { return s == 1 ? x : s == 2 ? x >> 1 : x / s; }

struct Outputs {
  int first, last;  // inclusive; empty when first > last
};

__device__ __forceinline__ Outputs outputs_of(int shifted, int extent, int stride, int out) {
  Outputs r;
  r.first = shifted < extent ? 0 : divide(shifted - extent, stride) + 1;
  r.last = min(out - 1, divide(shifted, stride));
  return r;
}

// The kernel position at `offset` (0 <= offset < extent) from a window's start, or -1 when the
// offset falls between two positions of a dilated window.
__device__ __forceinline__ int position_of(int offset, int dilation) {
  if (dilation == 1) return offset;
  const int k = offset / dilation;
  return k * dilation == offset ? k : -1;
}

template <typename T, int V, bool CL, int KH, int KW>
__global__ void __launch_bounds__(block_threads)
    bwd_data_kernel(Geo g, const T* __restrict__ dd, const T* __restrict__ w,
                    const T* __restrict__ wt, T* __restrict__ ds) {
  wait_for_prior_grids();
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (item >= g.items) return;
  const int idx = static_cast<int>(item);
  int c, id, ih, iw;
  if (CL) {
    const int packs = g.channels / V;
    c = idx % packs * V;
    int pos = idx / packs;
    iw = pos % g.in[2];
    pos /= g.in[2];
    ih = pos % g.in[1];
    id = pos / g.in[1];
  } else {
    int t = idx;
    iw = t % g.in[2];
    t /= g.in[2];
    ih = t % g.in[1];
    t /= g.in[1];
    id = t % g.in[0];
    c = t / g.in[0];
  }
  const int kh_n = KH > 0 ? KH : g.k[1];
  const int kw_n = KW > 0 ? KW : g.k[2];
  // The outputs whose windows hold this element, per dim (Note [depthwise backward data]).
  const int d0 = id + g.p[0];
  const int h0 = ih + g.p[1];
  const int w0 = iw + g.p[2];
  const Outputs rd = outputs_of(d0, g.ext[0], g.s[0], g.out[0]);
  const Outputs rh = outputs_of(h0, g.ext[1], g.s[1], g.out[1]);
  const Outputs rw = outputs_of(w0, g.ext[2], g.s[2], g.out[2]);
  const int in_offset = CL ? idx * V : idx;
  for (std::int64_t n = blockIdx.y; n < g.batch; n += gridDim.y) {
    const T* grad = dd + n * g.dst_sample;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    for (int m = 0; m < g.mult; ++m) {
      const int o = c * g.mult + m;  // V > 1 only with multiplier 1
      const T* weights = w + static_cast<std::int64_t>(o) * g.kvol;
      const int channel_offset = CL ? o : o * g.out_plane;
      for (int od = rd.first; od <= rd.last; ++od) {
        const int kd = position_of(d0 - od * g.s[0], g.d[0]);
        if (kd < 0) continue;
        for (int oh = rh.first; oh <= rh.last; ++oh) {
          const int kh = position_of(h0 - oh * g.s[1], g.d[1]);
          if (kh < 0) continue;
          const int row = (od * g.out[1] + oh) * g.out[2];
          for (int ow = rw.first; ow <= rw.last; ++ow) {
            const int kw = position_of(w0 - ow * g.s[2], g.d[2]);
            if (kw < 0) continue;
            const int k = (kd * kh_n + kh) * kw_n + kw;
            if (CL) {
              const Pack<T, V> x = *reinterpret_cast<const Pack<T, V>*>(
                  grad + static_cast<std::int64_t>(row + ow) * g.outc + channel_offset);
              if constexpr (V > 1) {  // Note [depthwise weight taps]
                const Pack<T, V> wk = *reinterpret_cast<const Pack<T, V>*>(wt + k * g.outc + o);
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] += to_float(x.v[v]) * to_float(wk.v[v]);
              } else {
                acc[0] += to_float(x.v[0]) * to_float(weights[k]);
              }
            } else {
              acc[0] += to_float(grad[channel_offset + row + ow]) * to_float(weights[k]);
            }
          }
        }
      }
    }
    T* out = ds + n * g.src_sample + in_offset;
    if (V == 1) {
      out[0] = from_float<T>(acc[0]);
    } else {
      Pack<T, V> y;
#pragma unroll
      for (int v = 0; v < V; ++v) y.v[v] = from_float<T>(acc[v]);
      *reinterpret_cast<Pack<T, V>*>(out) = y;
    }
  }
}

// ---- column strips: fwd, and bwd_data at stride 1 ---------------------------------------------

// Note [depthwise column strips]
// The elementwise kernels above load a whole K x K window per output. Output rows next to each
// other share most of their window's rows: at a stride S along H, output row y reads input rows
// y * S - pad + kh, so the R rows y0..y0 + R - 1 read (R - 1) * S + K distinct rows. A thread of
// the strips variant computes such a column strip of R outputs (channels_first, one column of one
// plane), loads each of those rows' K values once and adds them into every output row whose
// window holds the row: ((R - 1) * S + K) * K / R loads per output instead of K * K (10 instead
// of 25 for 5x5 at stride 1 with R = 4), with the kernel size, stride along H and R known at
// compile time so that every index into the strip is a constant. Consecutive threads take
// consecutive columns, so a warp's row loads are contiguous (strided along W at a stride there).
// bwd_data at stride 1 is the same correlation over diff_dst with the kernel flipped and a
// padding of K - 1 - pad (diff_src[i] = sum_k diff_dst[i + pad - k] * w[k]), summed over the
// multiplier's output channels; a kernel of depth 1 maps each plane written to one plane read, or
// none (zeros). Positions outside the tensor read are skipped, not multiplied by zero, as in the
// other variants; each output sums its window in the order H, W of the kernel (bwd_data: of the
// outputs, as the gather above), in f32.
constexpr int strip_rows = 4;  // R

struct StripGeo {
  int a_d, a_h, a_w;  // the tensor read (fwd: src; bwd_data: diff_dst)
  int o_d, o_h, o_w;  // the tensor written
  int pad_h, pad_w;   // the first row (column) read by output row (column) 0
  int stride_w;
  int s_d, p_d;  // depth: the plane read at output depth z is z * s_d - p_d (bwd_data: inverted)
  int strips;    // ceil(o_h / R)
  int mult;      // M
  int items;     // threads per sample: planes written x o_d x strips x o_w
  std::int64_t a_sample, o_sample;
  std::int64_t batch;
};

// Threads per sample of the strips variant (may exceed int: depthwise_unsupported checks).
std::int64_t strip_items(const DepthwiseShape& shape, bool forward) {
  const int* written = forward ? shape.output : shape.input;
  const std::int64_t planes = forward ? shape.channels * shape.multiplier : shape.channels;
  const std::int64_t strips = (written[1] + strip_rows - 1) / strip_rows;
  return planes * written[0] * strips * written[2];
}

StripGeo strip_geo(const DepthwiseShape& shape, bool forward) {
  const Geo g = geo_of(shape);
  const int k = shape.kernel[1];
  StripGeo sg{};
  const int* read = forward ? g.in : g.out;
  const int* written = forward ? g.out : g.in;
  sg.a_d = read[0];
  sg.a_h = read[1];
  sg.a_w = read[2];
  sg.o_d = written[0];
  sg.o_h = written[1];
  sg.o_w = written[2];
  sg.pad_h = forward ? g.p[1] : k - 1 - g.p[1];
  sg.pad_w = forward ? g.p[2] : k - 1 - g.p[2];
  sg.stride_w = forward ? g.s[2] : 1;
  sg.s_d = g.s[0];
  sg.p_d = g.p[0];
  sg.strips = (sg.o_h + strip_rows - 1) / strip_rows;
  sg.mult = g.mult;
  sg.items = static_cast<int>(strip_items(shape, forward));
  sg.a_sample = forward ? g.src_sample : g.dst_sample;
  sg.o_sample = forward ? g.dst_sample : g.src_sample;
  sg.batch = g.batch;
  return sg;
}

template <typename T, int K, int S, int R, bool Backward>
__global__ void __launch_bounds__(block_threads)
    strips_kernel(StripGeo g, const T* __restrict__ a, const T* __restrict__ w,
                  T* __restrict__ out) {
  wait_for_prior_grids();
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (item >= g.items) return;
  int t = static_cast<int>(item);
  const int x = t % g.o_w;
  t /= g.o_w;
  const int strip = t % g.strips;
  t /= g.strips;
  const int z = t % g.o_d;
  const int q = t / g.o_d;  // the channel written
  // The plane read at depth z, or -1 (the strip's outputs are zeros).
  int zi;
  if (Backward) {
    const int shifted = z + g.p_d;
    zi = shifted % g.s_d == 0 && shifted / g.s_d < g.a_d ? shifted / g.s_d : -1;
  } else {
    zi = z * g.s_d - g.p_d;
    if (!inside(zi, g.a_d)) zi = -1;
  }
  const int y0 = strip * R;
  const int row0 = y0 * S - g.pad_h;
  const int col0 = x * g.stride_w - g.pad_w;
  const int a_plane = g.a_h * g.a_w;
  bool column_inside[K];
#pragma unroll
  for (int kw = 0; kw < K; ++kw) column_inside[kw] = inside(col0 + kw, g.a_w);
  const int reads = Backward ? g.mult : 1;
  for (std::int64_t n = blockIdx.y; n < g.batch; n += gridDim.y) {
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int m = 0; zi >= 0 && m < reads; ++m) {
      const int channel = Backward ? q * g.mult + m : q / g.mult;  // the channel read
      const int o = Backward ? channel : q;                        // the weights' channel
      const T* plane = a + n * g.a_sample + (channel * g.a_d + zi) * a_plane;
      const T* weights = w + static_cast<std::int64_t>(o) * (K * K);
      float wk[K * K];  // the kernel (bwd_data: flipped), every element used by up to R rows
#pragma unroll
      for (int k = 0; k < K * K; ++k) wk[k] = to_float(weights[Backward ? K * K - 1 - k : k]);
#pragma unroll
      for (int j = 0; j < (R - 1) * S + K; ++j) {
        const int ih = row0 + j;
        if (!inside(ih, g.a_h)) continue;
        const int row = ih * g.a_w + col0;
        float v[K];
#pragma unroll
        for (int kw = 0; kw < K; ++kw) v[kw] = column_inside[kw] ? to_float(plane[row + kw]) : 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int kh = j - r * S;
          if (kh < 0 || kh >= K) continue;
#pragma unroll
          for (int kw = 0; kw < K; ++kw) {
            if (column_inside[kw]) acc[r] += v[kw] * wk[kh * K + kw];
          }
        }
      }
    }
    T* dst = out + n * g.o_sample + ((q * g.o_d + z) * g.o_h + y0) * g.o_w + x;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (y0 + r < g.o_h) dst[r * g.o_w] = from_float<T>(acc[r]);
    }
  }
}

// ---- backward weights ---------------------------------------------------------------------------

// How the direct and unrolled bwd_weights kernels split their work (Note [depthwise kernels]); a
// function of the shape only.
struct WeightsSplit {
  int chunk = 1;   // kernel positions per block
  int chunks = 1;  // grid y
  int grid_x = 1;  // output channels (channels_first) or blocks of 32 of them (channels_last)
  int splits = 1;  // grid z
  std::int64_t total = 0;      // N * output positions
  std::int64_t per_split = 0;  // positions per split
};

WeightsSplit weights_split(const DepthwiseShape& shape, DepthwiseVariant variant) {
  WeightsSplit w;
  const int kvol = static_cast<int>(volume(shape.kernel));
  const int unrolled = variant == DepthwiseVariant::unrolled ? unrolled_size(shape) : 0;
  w.chunk = unrolled > 0 ? kvol : std::min(kvol, weights_chunk);
  w.chunks = (kvol + w.chunk - 1) / w.chunk;
  const std::int64_t outc = shape.channels * shape.multiplier;
  w.grid_x = static_cast<int>(shape.channels_last ? (outc + warp_size - 1) / warp_size : outc);
  w.total = shape.batch * volume(shape.output);
  const std::int64_t base = static_cast<std::int64_t>(w.grid_x) * w.chunks;
  std::int64_t splits = (target_blocks + base - 1) / base;
  splits = std::min({splits, max_splits, std::max<std::int64_t>(1, w.total / min_split_positions)});
  splits = std::max<std::int64_t>(splits, 1);
  w.per_split = std::max<std::int64_t>(1, (w.total + splits - 1) / splits);
  // No empty split: recount from the rounded-up split size.
  w.splits = static_cast<int>(std::max<std::int64_t>(1, (w.total + w.per_split - 1) / w.per_split));
  return w;
}

// A fixed step through the N * output positions, split into its parts (host-side, once per
// launch) so that a thread walks its positions without a division per position.
struct PositionStep {
  std::int64_t n = 0;
  int p = 0, d = 0, h = 0, w = 0;
};

PositionStep position_step(const DepthwiseShape& shape, int step) {
  PositionStep s;
  const std::int64_t plane = volume(shape.output);
  s.n = step / plane;
  const int r = static_cast<int>(step % plane);
  s.p = r;
  s.w = r % shape.output[2];
  const int t = r / shape.output[2];
  s.h = t % shape.output[1];
  s.d = t / shape.output[1];
  return s;
}

// A position of the N * output range: sample n, output coordinates (od, oh, ow) and their offset
// p = (od * OH + oh) * OW + ow in the sample's plane. advance() adds a PositionStep with one carry
// per coordinate (each part of the step is below its dim's size).
struct Position {
  std::int64_t n;
  int p, od, oh, ow;

  __device__ __forceinline__ void set(std::int64_t j, const Geo& g) {
    n = j / g.out_plane;
    p = static_cast<int>(j - n * g.out_plane);
    ow = p % g.out[2];
    const int t = p / g.out[2];
    oh = t % g.out[1];
    od = t / g.out[1];
  }

  __device__ __forceinline__ void advance(const PositionStep& s, const Geo& g) {
    n += s.n;
    p += s.p;
    ow += s.w;
    oh += s.h;
    od += s.d;
    if (ow >= g.out[2]) {
      ow -= g.out[2];
      ++oh;
    }
    if (oh >= g.out[1]) {
      oh -= g.out[1];
      ++od;
    }
    if (od >= g.out[0]) {
      od -= g.out[0];
      ++n;
      p -= g.out_plane;
    }
  }
};

// The chunk's kernel positions as offsets (kd, kh, kw) * dilation, in shared memory.
template <int KC>
__device__ __forceinline__ void chunk_offsets(const Geo& g, int k0, int kc, int tid,
                                              int (&offs)[KC][3]) {
  if (tid < kc) {
    const int k = k0 + tid;
    const int kw = k % g.k[2];
    const int t = k / g.k[2];
    const int kh = t % g.k[1];
    const int kd = t / g.k[1];
    offs[tid][0] = kd * g.d[0];
    offs[tid][1] = kh * g.d[1];
    offs[tid][2] = kw * g.d[2];
  }
}

// Adds gv * src(window position i) for the chunk's positions to acc. `s` points at the channel's
// first element in its sample; `step` is the distance of W neighbours (1, or C channels_last).
template <typename T, int KC, int KH, int KW>
__device__ __forceinline__ void accumulate(const Geo& g, const T* __restrict__ s, int step, int bd,
                                           int bh, int bw, int kc, const int (&offs)[KC][3],
                                           float gv, float (&acc)[KC]) {
#pragma unroll
  for (int i = 0; i < KC; ++i) {
    if (KH == 0 && i >= kc) break;
    const int id = KH > 0 ? bd : bd + offs[i][0];
    const int ih = KH > 0 ? bh + (i / KW) * g.d[1] : bh + offs[i][1];
    const int iw = KH > 0 ? bw + (i % KW) * g.d[2] : bw + offs[i][2];
    if (inside(id, g.in[0]) && inside(ih, g.in[1]) && inside(iw, g.in[2]))
      acc[i] +=
          gv * to_float(s[static_cast<std::int64_t>((id * g.in[1] + ih) * g.in[2] + iw) * step]);
  }
}

// channels_first: block (output channel, chunk, split), 256 threads along the positions.
template <typename T, int KC, int KH, int KW>
__global__ void __launch_bounds__(block_threads)
    bwd_weights_cf_kernel(Geo g, const T* __restrict__ src, const T* __restrict__ dd,
                          float* __restrict__ partial, T* __restrict__ dw, int chunk,
                          std::int64_t total, std::int64_t per_split, PositionStep step) {
  wait_for_prior_grids();
  __shared__ int offs[KC][3];
  __shared__ float red[block_threads / warp_size][KC];
  const int o = blockIdx.x;
  const int k0 = blockIdx.y * chunk;
  const int kc = min(chunk, g.kvol - k0);
  const int tid = threadIdx.x;
  chunk_offsets<KC>(g, k0, kc, tid, offs);
  __syncthreads();
  float acc[KC];
#pragma unroll
  for (int i = 0; i < KC; ++i) acc[i] = 0.0f;
  const int c = o / g.mult;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.z) * per_split;
  const std::int64_t j1 = j0 + per_split < total ? j0 + per_split : total;
  std::int64_t j = j0 + tid;
  if (j < j1) {
    Position at;
    at.set(j, g);
    for (; j < j1; j += block_threads) {
      const float gv =
          to_float(dd[at.n * g.dst_sample + static_cast<std::int64_t>(o) * g.out_plane + at.p]);
      const T* s = src + at.n * g.src_sample + static_cast<std::int64_t>(c) * g.in_plane;
      accumulate<T, KC, KH, KW>(g, s, 1, at.od * g.s[0] - g.p[0], at.oh * g.s[1] - g.p[1],
                                at.ow * g.s[2] - g.p[2], kc, offs, gv, acc);
      at.advance(step, g);
    }
  }
  const int lane = tid % warp_size;
  const int warp = tid / warp_size;
#pragma unroll
  for (int i = 0; i < KC; ++i) {
    const float v = warp_sum(acc[i]);
    if (lane == 0) red[warp][i] = v;
  }
  __syncthreads();
  if (tid < kc) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < block_threads / warp_size; ++w) sum += red[w][tid];
    const std::int64_t at = static_cast<std::int64_t>(o) * g.kvol + k0 + tid;
    if (partial != nullptr)
      partial[static_cast<std::int64_t>(blockIdx.z) * g.outc * g.kvol + at] = sum;
    else
      dw[at] = from_float<T>(sum);
  }
}

// Sums per thread reduced over a block's rows in groups of this many (shared memory per group:
// rows x group x 33 floats).
constexpr int reduce_group = rows;

using RowSums = float[rows][reduce_group][warp_size + 1];

// The block's (32 lanes x 8 rows) reduction of each thread's N sums: sum e of lane l (< lanes)
// is the total over the rows and then over the `phases` lanes l + q * lanes (a fixed order),
// taken a group of reduce_group sums at a time through `red`; row e % reduce_group of the block
// adds it and calls write(e, total) on lane l. Every thread of the block must call it.
template <int N, typename Write>
__device__ __forceinline__ void block_sums(RowSums& red, const float (&acc)[N], int lanes,
                                            int phases, Write write) {
  const int lane = threadIdx.x;
  const int row = threadIdx.y;
#pragma unroll
  for (int e0 = 0; e0 < N; e0 += reduce_group) {
#pragma unroll
    for (int i = 0; i < reduce_group; ++i) {
      if (e0 + i < N) red[row][i][lane] = acc[e0 + i];
    }
    __syncthreads();
    const int e = e0 + row;
    if (e < N && lane < lanes) {
      float sum = 0.0f;
      for (int r = 0; r < rows; ++r) {
        for (int q = 0; q < phases; ++q) sum += red[r][row][q * lanes + lane];
      }
      write(e, sum);
    }
    __syncthreads();
  }
}

// channels_last: block (32 output channels, chunk, split), 32 lanes along the channels x 8 rows
// along the positions.
template <typename T, int KC, int KH, int KW>
__global__ void __launch_bounds__(block_threads)
    bwd_weights_cl_kernel(Geo g, const T* __restrict__ src, const T* __restrict__ dd,
                          float* __restrict__ partial, T* __restrict__ dw, int chunk,
                          std::int64_t total, std::int64_t per_split, PositionStep step) {
  wait_for_prior_grids();
  __shared__ int offs[KC][3];
  __shared__ RowSums red;
  const int k0 = blockIdx.y * chunk;
  const int kc = min(chunk, g.kvol - k0);
  const int lane = threadIdx.x;
  const int row = threadIdx.y;
  const int tid = row * warp_size + lane;
  chunk_offsets<KC>(g, k0, kc, tid, offs);
  __syncthreads();
  float acc[KC];
#pragma unroll
  for (int i = 0; i < KC; ++i) acc[i] = 0.0f;
  const int o = blockIdx.x * warp_size + lane;
  const bool valid = o < g.outc;
  const int c = valid ? o / g.mult : 0;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.z) * per_split;
  const std::int64_t j1 = j0 + per_split < total ? j0 + per_split : total;
  std::int64_t j = j0 + row;
  if (valid && j < j1) {
    Position at;
    at.set(j, g);
    for (; j < j1; j += rows) {
      const float gv =
          to_float(dd[at.n * g.dst_sample + static_cast<std::int64_t>(at.p) * g.outc + o]);
      const T* s = src + at.n * g.src_sample + c;
      accumulate<T, KC, KH, KW>(g, s, g.channels, at.od * g.s[0] - g.p[0], at.oh * g.s[1] - g.p[1],
                                at.ow * g.s[2] - g.p[2], kc, offs, gv, acc);
      at.advance(step, g);
    }
  }
  block_sums(red, acc, warp_size, 1, [&](int i, float sum) {
    if (!valid || i >= kc) return;
    const std::int64_t at = static_cast<std::int64_t>(o) * g.kvol + k0 + i;
    if (partial != nullptr)
      partial[static_cast<std::int64_t>(blockIdx.z) * g.outc * g.kvol + at] = sum;
    else
      dw[at] = from_float<T>(sum);
  });
}

// Note [depthwise packed weight gradients]
// The channel_packs variant of bwd_weights (channels_last, multiplier 1, 2-D K x K kernels with
// K 3, 5 or 7, any channel count): a thread owns V consecutive channels (V = 4, 2, 1 for K = 3,
// 5, 7: its K * K * V sums stay in registers) and walks a segment of an output row (n, od, oh)
// along ow, so the coordinates are divided once per segment, the window's rows are tested once
// per segment, and one index computation serves V channels. A warp's lanes take `lanes` packs
// side by side (32, or all the packs when there are fewer) and `phases` = 32 / lanes
// neighbouring output columns, so that few channels still fill the warp with contiguous
// accesses. A segment is 16 columns (a multiple of `phases`) rather than the whole row: a
// thread's loads of one column wait for the previous column's sums, so the latency is hidden by
// more warps, and shorter units give more of them (a 41-column row makes three). A block's 8
// warps take different segments of one split of the N * OD * OH * segments units; the block adds
// its threads' sums in a fixed order (rows, then phases) and writes them to the split's partial
// sums, which a second kernel adds in a fixed order. Packs load as one access when the channel
// count is a multiple of V and both pointers are aligned for it; otherwise element by element,
// the last pack of an odd channel count masked. The split is a function of the shape only:
// results are bitwise reproducible on any GPU.
//
// Note [sliding weight-gradient windows]
// With stride 1 and dilation 1 along W, the window of output column ow + 1 is that of ow moved
// by one input column. There a thread walks a run of consecutive columns (its phase's share of
// the segment: segment / phases columns, rather than every phases-th column) and keeps the K x K
// window of input packs in registers, loading only the K packs of the column that enters it per
// output column instead of all K x K: a third of the loads, conversions and index arithmetic for
// 3x3 kernels, a seventh for 7x7, which matters most where packs load element by element (odd
// channel counts). Taps in the padding are skipped as in the other path, so each sum adds the
// same products in the same column order: with one phase the results are bitwise those of the
// other path.
struct PacksSplit {
  int size = 0;                // K
  int v = 1;                   // channels per thread
  int lanes = 32;              // lanes along the packs
  int phases = 1;              // output columns a warp walks side by side
  int segment = 1;             // output columns per unit
  int segments = 1;            // units per output row
  int grid_x = 1;              // blocks along the packs
  int splits = 1;              // grid y
  std::int64_t units = 0;      // N * OD * OH * segments
  std::int64_t per_split = 0;  // units per split
  bool slide = false;          // Note [sliding weight-gradient windows]
};

PacksSplit packs_split(const DepthwiseShape& shape) {
  PacksSplit sp;
  sp.size = unrolled_size(shape);
  sp.v = sp.size == 3 ? 4 : sp.size == 5 ? 2 : 1;
  const std::int64_t packs = (shape.channels + sp.v - 1) / sp.v;
  sp.lanes = static_cast<int>(std::min<std::int64_t>(warp_size, packs));
  sp.phases = warp_size / sp.lanes;
  sp.grid_x = static_cast<int>((packs + sp.lanes - 1) / sp.lanes);
  sp.segment = sp.phases * std::max(1, packs_segment_columns / sp.phases);
  sp.segments = (shape.output[2] + sp.segment - 1) / sp.segment;
  sp.units = shape.batch * shape.output[0] * shape.output[1] * sp.segments;
  std::int64_t splits = (packs_target_blocks + sp.grid_x - 1) / sp.grid_x;
  splits = std::min({splits, max_splits, (sp.units + rows - 1) / rows});
  splits = std::max<std::int64_t>(splits, 1);
  sp.per_split = std::max<std::int64_t>(1, (sp.units + splits - 1) / splits);
  sp.splits =
      static_cast<int>(std::max<std::int64_t>(1, (sp.units + sp.per_split - 1) / sp.per_split));
  sp.slide = shape.stride[2] == 1 && shape.dilation[2] == 1;
  return sp;
}

// V elements at p into f32; the first `count` of them when not Aligned (the rest are 0).
template <typename T, int V, bool Aligned>
__device__ __forceinline__ void load_pack(const T* __restrict__ p, int count, float (&out)[V]) {
  if (Aligned) {
    const Pack<T, V> x = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = to_float(x.v[v]);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = v < count ? to_float(p[v]) : 0.0f;
  }
}

// The K packs of input column iw in the window's rows (zeros for a row or column in the padding).
template <typename T, int V, bool Aligned, int K>
__device__ __forceinline__ void load_column(const Geo& g, const T* __restrict__ s,
                                            const int (&row_at)[K], int iw, bool column_inside,
                                            int count, float (&x)[K][V]) {
#pragma unroll
  for (int kh = 0; kh < K; ++kh) {
    if (column_inside && row_at[kh] >= 0) {
      load_pack<T, V, Aligned>(s + (row_at[kh] + iw) * g.channels, count, x[kh]);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) x[kh][v] = 0.0f;
    }
  }
}

template <typename T, int V, bool Aligned, int K, bool Slide>
__global__ void __launch_bounds__(block_threads)
    bwd_weights_packs_kernel(Geo g, PacksSplit sp, const T* __restrict__ src,
                             const T* __restrict__ dd, float* __restrict__ partial,
                             T* __restrict__ dw) {
  wait_for_prior_grids();
  constexpr int E = K * K * V;  // sums per thread: kernel position major, channel minor
  __shared__ RowSums red;
  const int lane = threadIdx.x;
  const int row = threadIdx.y;
  const int pack_lane = lane % sp.lanes;
  const int phase = lane / sp.lanes;
  const int c0 = (blockIdx.x * sp.lanes + pack_lane) * V;
  const int count = min(V, g.channels - c0);
  float acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.0f;
  const std::int64_t u0 = static_cast<std::int64_t>(blockIdx.y) * sp.per_split;
  const std::int64_t u1 = min(u0 + sp.per_split, sp.units);
  if (phase < sp.phases && count > 0) {
    for (std::int64_t u = u0 + row; u < u1; u += rows) {
      const std::int64_t j = u / sp.segments;  // the output row
      const int first = static_cast<int>(u - j * sp.segments) * sp.segment;
      const int end = min(first + sp.segment, g.out[2]);
      const int oh = static_cast<int>(j % g.out[1]);
      const std::int64_t t = j / g.out[1];
      const int od = static_cast<int>(t % g.out[0]);
      const std::int64_t n = t / g.out[0];
      const int id = od * g.s[0] - g.p[0];
      if (!inside(id, g.in[0])) continue;  // padding: the whole row adds nothing
      const T* s = src + n * g.src_sample + c0;
      const T* d = dd + n * g.dst_sample +
                   static_cast<std::int64_t>((od * g.out[1] + oh) * g.out[2]) * g.channels + c0;
      // Each window row's first element in the sample, or -1 for a row in the padding.
      int row_at[K];
#pragma unroll
      for (int kh = 0; kh < K; ++kh) {
        const int ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
        row_at[kh] = inside(ih, g.in[1]) ? (id * g.in[1] + ih) * g.in[2] : -1;
      }
      if constexpr (Slide) {
        // Note [sliding weight-gradient windows]: window column j holds input column ow - p + j.
        const int run = sp.segment / sp.phases;
        const int lo = first + phase * run;
        const int hi = min(lo + run, end);
        if (lo >= hi) continue;  // this phase's run is past the row's end
        float x[K][K][V];        // [column j][row kh][channel]
        bool in_w[K];
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {
          const int iw = lo - g.p[2] + j;
          in_w[j] = inside(iw, g.in[2]);
          load_column<T, V, Aligned, K>(g, s, row_at, iw, in_w[j], count, x[j]);
        }
        for (int ow = lo; ow < hi; ++ow) {
          const int iw = ow - g.p[2] + K - 1;
          in_w[K - 1] = inside(iw, g.in[2]);
          load_column<T, V, Aligned, K>(g, s, row_at, iw, in_w[K - 1], count, x[K - 1]);
          float gv[V];
          load_pack<T, V, Aligned>(d + ow * g.channels, count, gv);
#pragma unroll
          for (int kw = 0; kw < K; ++kw) {
            if (!in_w[kw]) continue;
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
              if (row_at[kh] < 0) continue;
#pragma unroll
              for (int v = 0; v < V; ++v) acc[(kh * K + kw) * V + v] += gv[v] * x[kw][kh][v];
            }
          }
#pragma unroll
          for (int j = 0; j < K - 1; ++j) {
            in_w[j] = in_w[j + 1];
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
#pragma unroll
              for (int v = 0; v < V; ++v) x[j][kh][v] = x[j + 1][kh][v];
            }
          }
        }
      } else {
        for (int ow = first + phase; ow < end; ow += sp.phases) {
          float gv[V];
          load_pack<T, V, Aligned>(d + ow * g.channels, count, gv);
          const int w0 = ow * g.s[2] - g.p[2];
#pragma unroll
          for (int kw = 0; kw < K; ++kw) {
            const int iw = w0 + kw * g.d[2];
            if (!inside(iw, g.in[2])) continue;
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
              if (row_at[kh] < 0) continue;
              float x[V];
              load_pack<T, V, Aligned>(s + (row_at[kh] + iw) * g.channels, count, x);
#pragma unroll
              for (int v = 0; v < V; ++v) acc[(kh * K + kw) * V + v] += gv[v] * x[v];
            }
          }
        }
      }
    }
  }
  // Sum e of a pack: kernel position e / V of its channel e % V.
  const std::int64_t weights = static_cast<std::int64_t>(g.channels) * g.kvol;
  block_sums(red, acc, sp.lanes, sp.phases, [&](int e, float sum) {
    const int c = (blockIdx.x * sp.lanes + lane) * V + e % V;
    if (c >= g.channels) return;
    const std::int64_t at = static_cast<std::int64_t>(c) * g.kvol + e / V;
    if (partial != nullptr)
      partial[static_cast<std::int64_t>(blockIdx.y) * weights + at] = sum;
    else
      dw[at] = from_float<T>(sum);
  });
}

// ---- launches -----------------------------------------------------------------------------------

dim3 grid_of(std::int64_t items, std::int64_t batch) {
  return dim3(static_cast<unsigned>((items + block_threads - 1) / block_threads),
              static_cast<unsigned>(std::min<std::int64_t>(batch, max_grid_y)), 1);
}

// Launches fwd (Forward true) or bwd_data with pack V, layout and compile-time kernel size K.
// With V > 1 (channel_packs) the weights are first transposed into `workspace` (Note [depthwise
// weight taps]).
template <bool Forward, typename T, int V, bool CL, int K>
cudaError_t launch_elementwise(Geo g, const void* a, const void* w, void* out, void* workspace,
                               const Queue& queue) {
  const std::int64_t positions = Forward ? g.out_plane : g.in_plane;
  const std::int64_t channels = Forward ? g.outc : g.channels;
  g.items = static_cast<int>(positions * (channels / V));
  const dim3 grid = grid_of(g.items, g.batch);
  const T* weights = static_cast<const T*>(w);
  T* transposed = nullptr;
  if constexpr (V > 1) {
    if (workspace == nullptr) return cudaErrorInvalidValue;
    transposed = static_cast<T*>(workspace);
    const int count = g.outc * g.kvol;
    if (const cudaError_t status =
            launch(queue, transpose_weights_kernel<T>,
                   dim3(static_cast<unsigned>((count + block_threads - 1) / block_threads)),
                   dim3(block_threads), 0, weights, transposed, g.outc, g.kvol);
        status != cudaSuccess)
      return status;
  }
  const auto kernel = Forward ? fwd_kernel<T, V, CL, K, K> : bwd_data_kernel<T, V, CL, K, K>;
  return launch(queue, kernel, grid, dim3(block_threads), 0, g, static_cast<const T*>(a), weights,
                static_cast<const T*>(transposed), static_cast<T*>(out));
}

template <bool Forward, typename T, int V, bool CL>
cudaError_t launch_sized(int size, const Geo& g, const void* a, const void* w, void* out,
                         void* workspace, const Queue& queue) {
  switch (size) {
    case 3: return launch_elementwise<Forward, T, V, CL, 3>(g, a, w, out, workspace, queue);
    case 5: return launch_elementwise<Forward, T, V, CL, 5>(g, a, w, out, workspace, queue);
    case 7: return launch_elementwise<Forward, T, V, CL, 7>(g, a, w, out, workspace, queue);
    default: return launch_elementwise<Forward, T, V, CL, 0>(g, a, w, out, workspace, queue);
  }
}

template <bool Forward, typename T, int K>
cudaError_t launch_strips_sized(const StripGeo& g, int stride_h, const void* a, const void* w,
                                void* out, const Queue& queue) {
  const dim3 grid = grid_of(g.items, g.batch);
  const T* in = static_cast<const T*>(a);
  const T* weights = static_cast<const T*>(w);
  T* dst = static_cast<T*>(out);
  const auto kernel = !Forward        ? strips_kernel<T, K, 1, strip_rows, true>
                      : stride_h == 1 ? strips_kernel<T, K, 1, strip_rows, false>
                                      : strips_kernel<T, K, 2, strip_rows, false>;
  return launch(queue, kernel, grid, dim3(block_threads), 0, g, in, weights, dst);
}

template <bool Forward, typename T>
cudaError_t launch_strips(const DepthwiseShape& shape, const void* a, const void* w, void* out,
                          const Queue& queue) {
  const StripGeo g = strip_geo(shape, Forward);
  switch (unrolled_size(shape)) {
    case 3: return launch_strips_sized<Forward, T, 3>(g, shape.stride[1], a, w, out, queue);
    case 5: return launch_strips_sized<Forward, T, 5>(g, shape.stride[1], a, w, out, queue);
    case 7: return launch_strips_sized<Forward, T, 7>(g, shape.stride[1], a, w, out, queue);
    default: return cudaErrorInvalidValue;
  }
}

template <bool Forward, typename T>
cudaError_t elementwise_typed(const DepthwiseShape& shape, DepthwiseVariant variant, const void* a,
                              const void* w, void* out, void* workspace, const Queue& queue) {
  const Geo g = geo_of(shape);
  switch (variant) {
    case DepthwiseVariant::direct:
      return shape.channels_last
                 ? launch_sized<Forward, T, 1, true>(0, g, a, w, out, nullptr, queue)
                 : launch_sized<Forward, T, 1, false>(0, g, a, w, out, nullptr, queue);
    case DepthwiseVariant::unrolled: {
      const int size = unrolled_size(shape);
      return shape.channels_last
                 ? launch_sized<Forward, T, 1, true>(size, g, a, w, out, nullptr, queue)
                 : launch_sized<Forward, T, 1, false>(size, g, a, w, out, nullptr, queue);
    }
    case DepthwiseVariant::strips: return launch_strips<Forward, T>(shape, a, w, out, queue);
    case DepthwiseVariant::channel_packs: {
      const int size = unrolled_size(shape);
      switch (pack_width<T>(shape, {a, out})) {
        case 8:
          if constexpr (max_pack<T>() >= 8)
            return launch_sized<Forward, T, 8, true>(size, g, a, w, out, workspace, queue);
          break;
        case 4: return launch_sized<Forward, T, 4, true>(size, g, a, w, out, workspace, queue);
        case 2: return launch_sized<Forward, T, 2, true>(size, g, a, w, out, workspace, queue);
        default: return launch_sized<Forward, T, 1, true>(size, g, a, w, out, nullptr, queue);
      }
      return cudaErrorInvalidValue;
    }
  }
  return cudaErrorInvalidValue;
}

template <bool Forward>
cudaError_t elementwise(const DepthwiseShape& shape, DepthwiseVariant variant, const void* a,
                        const void* w, void* out, void* workspace, const Queue& queue) {
  const DepthwiseDirection direction =
      Forward ? DepthwiseDirection::fwd : DepthwiseDirection::bwd_data;
  if (depthwise_unsupported(shape, variant, direction) != nullptr) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  switch (shape.type) {
    case DepthwiseType::f32:
      return elementwise_typed<Forward, float>(shape, variant, a, w, out, workspace, queue);
    case DepthwiseType::f16:
      return elementwise_typed<Forward, __half>(shape, variant, a, w, out, workspace, queue);
    case DepthwiseType::bf16:
      return elementwise_typed<Forward, __nv_bfloat16>(shape, variant, a, w, out, workspace, queue);
  }
  return cudaErrorInvalidValue;
}

template <typename T, int KC, int K>
cudaError_t launch_weights(const DepthwiseShape& shape, const WeightsSplit& split, const void* src,
                           const void* dd, void* dw, float* partial, const Queue& queue) {
  const Geo g = geo_of(shape);
  const dim3 grid(static_cast<unsigned>(split.grid_x), static_cast<unsigned>(split.chunks),
                  static_cast<unsigned>(split.splits));
  const T* s = static_cast<const T*>(src);
  const T* d = static_cast<const T*>(dd);
  T* out = static_cast<T*>(dw);
  const cudaError_t status =
      shape.channels_last
          ? launch(queue, bwd_weights_cl_kernel<T, KC, K, K>, grid, dim3(warp_size, rows), 0, g, s,
                   d, partial, out, split.chunk, split.total, split.per_split,
                   position_step(shape, rows))
          : launch(queue, bwd_weights_cf_kernel<T, KC, K, K>, grid, dim3(block_threads), 0, g, s, d,
                   partial, out, split.chunk, split.total, split.per_split,
                   position_step(shape, block_threads));
  if (status != cudaSuccess) return status;
  return reduce_splits<T>(partial, out, static_cast<std::int64_t>(g.outc) * g.kvol, split.splits,
                          queue);
}

template <typename T, int V, int K>
cudaError_t launch_packs(const DepthwiseShape& shape, const PacksSplit& split, const void* src,
                         const void* dd, void* dw, float* partial, const Queue& queue) {
  const Geo g = geo_of(shape);
  const dim3 grid(static_cast<unsigned>(split.grid_x), static_cast<unsigned>(split.splits));
  const bool whole =
      shape.channels % V == 0 && aligned(src, sizeof(T) * V) && aligned(dd, sizeof(T) * V);
  const T* s = static_cast<const T*>(src);
  const T* d = static_cast<const T*>(dd);
  T* out = static_cast<T*>(dw);
  const dim3 block(warp_size, rows);
  const auto kernel = whole && split.slide ? bwd_weights_packs_kernel<T, V, true, K, true>
                      : whole              ? bwd_weights_packs_kernel<T, V, true, K, false>
                      : split.slide        ? bwd_weights_packs_kernel<T, V, false, K, true>
                                           : bwd_weights_packs_kernel<T, V, false, K, false>;
  if (const cudaError_t status =
          launch(queue, kernel, grid, block, 0, g, split, s, d, partial, out);
      status != cudaSuccess)
    return status;
  return reduce_splits<T>(partial, out, static_cast<std::int64_t>(g.channels) * g.kvol,
                          split.splits, queue);
}

template <typename T>
cudaError_t weights_typed(const DepthwiseShape& shape, DepthwiseVariant variant, const void* src,
                          const void* dd, void* dw, void* workspace, const Queue& queue) {
  if (variant == DepthwiseVariant::channel_packs) {
    const PacksSplit split = packs_split(shape);
    float* partial = split.splits > 1 ? static_cast<float*>(workspace) : nullptr;
    if (split.splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
    switch (split.size) {
      case 3: return launch_packs<T, 4, 3>(shape, split, src, dd, dw, partial, queue);
      case 5: return launch_packs<T, 2, 5>(shape, split, src, dd, dw, partial, queue);
      case 7: return launch_packs<T, 1, 7>(shape, split, src, dd, dw, partial, queue);
      default: return cudaErrorInvalidValue;
    }
  }
  const WeightsSplit split = weights_split(shape, variant);
  float* partial = split.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  if (split.splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  if (variant == DepthwiseVariant::unrolled) {
    switch (unrolled_size(shape)) {
      case 3: return launch_weights<T, 9, 3>(shape, split, src, dd, dw, partial, queue);
      case 5: return launch_weights<T, 25, 5>(shape, split, src, dd, dw, partial, queue);
      case 7: return launch_weights<T, 49, 7>(shape, split, src, dd, dw, partial, queue);
      default: return cudaErrorInvalidValue;
    }
  }
  return launch_weights<T, weights_chunk, 0>(shape, split, src, dd, dw, partial, queue);
}

std::size_t element_size(DepthwiseType type) { return type == DepthwiseType::f32 ? 4 : 2; }

}  // namespace

const char* depthwise_unsupported(const DepthwiseShape& shape, DepthwiseVariant variant,
                                  DepthwiseDirection direction) {
  const bool backward_weights = direction == DepthwiseDirection::bwd_weights;
  if (shape.batch < 0 || shape.channels < 1 || shape.multiplier < 1)
    return "the shape has a negative batch or no channels";
  for (int i = 0; i < 3; ++i) {
    const std::int64_t extent =
        static_cast<std::int64_t>(shape.kernel[i] - 1) * shape.dilation[i] + 1;
    const std::int64_t reach = static_cast<std::int64_t>(shape.output[i]) * shape.stride[i];
    if (shape.input[i] < 1 || shape.output[i] < 1 || shape.kernel[i] < 1 || shape.stride[i] < 1 ||
        shape.dilation[i] < 1 || shape.pad_before[i] < 0)
      return "a spatial size, stride or dilation below 1, or a negative padding";
    if (shape.input[i] > max_coordinate || shape.pad_before[i] > max_coordinate ||
        extent > max_coordinate || reach > max_coordinate)
      return "spatial sizes, strides, paddings or kernel extents beyond 2^29";
  }
  const std::int64_t outc = shape.channels * shape.multiplier;
  if (outc > max_sample || shape.channels * volume(shape.input) > max_sample ||
      outc * volume(shape.output) > max_sample)
    return "a sample of src or dst holds 2^31 elements or more";
  if (volume(shape.kernel) > max_kernel_volume) return "a kernel of more than 2^19 positions";
  switch (variant) {
    case DepthwiseVariant::direct: return nullptr;
    case DepthwiseVariant::unrolled:
      return unrolled_size(shape) == 0
                 ? "the unrolled variant runs 2-D 3x3, 5x5 and 7x7 kernels only"
                 : nullptr;
    case DepthwiseVariant::channel_packs:
      if (!shape.channels_last) return "channel packs need the channels_last layout";
      if (shape.multiplier != 1) return "channel packs need a channel multiplier of 1";
      if (backward_weights) {
        if (unrolled_size(shape) == 0)
          return "channel packs run bwd_weights for 2-D 3x3, 5x5 and 7x7 kernels only";
        return nullptr;
      }
      if (shape.channels % 2 != 0) return "channel packs need an even channel count";
      return nullptr;
    case DepthwiseVariant::strips:
      if (shape.channels_last) return "column strips need the channels_first layout";
      if (backward_weights) return "column strips run fwd and bwd_data only";
      if (unrolled_size(shape) == 0) return "column strips run 2-D 3x3, 5x5 and 7x7 kernels only";
      if (shape.dilation[1] != 1 || shape.dilation[2] != 1)
        return "column strips run kernels without dilation only";
      if (direction == DepthwiseDirection::fwd && shape.stride[1] > 2)
        return "column strips run fwd at a stride of 1 or 2 along H only";
      if (direction == DepthwiseDirection::bwd_data &&
          (shape.stride[1] != 1 || shape.stride[2] != 1))
        return "column strips run bwd_data at stride 1 along H and W only";
      if (strip_items(shape, direction == DepthwiseDirection::fwd) > max_sample)
        return "a sample needs 2^31 column strips or more";
      return nullptr;
  }
  return "unknown variant";
}

std::size_t depthwise_bwd_weights_workspace_bytes(const DepthwiseShape& shape,
                                                  DepthwiseVariant variant) {
  if (depthwise_unsupported(shape, variant, DepthwiseDirection::bwd_weights) != nullptr ||
      shape.batch == 0)
    return 0;
  const int splits = variant == DepthwiseVariant::channel_packs
                         ? packs_split(shape).splits
                         : weights_split(shape, variant).splits;
  if (splits <= 1) return 0;
  return static_cast<std::size_t>(splits) *
         static_cast<std::size_t>(shape.channels * shape.multiplier) *
         static_cast<std::size_t>(volume(shape.kernel)) * sizeof(float);
}

cudaError_t depthwise_fwd(const DepthwiseShape& shape, DepthwiseVariant variant, const void* src,
                          const void* weights, void* dst, void* workspace, const Queue& queue) {
  return elementwise<true>(shape, variant, src, weights, dst, workspace, queue);
}

cudaError_t depthwise_bwd_data(const DepthwiseShape& shape, DepthwiseVariant variant,
                               const void* diff_dst, const void* weights, void* diff_src,
                               void* workspace, const Queue& queue) {
  return elementwise<false>(shape, variant, diff_dst, weights, diff_src, workspace, queue);
}

std::size_t depthwise_weight_taps_bytes(const DepthwiseShape& shape, DepthwiseVariant variant) {
  if (variant != DepthwiseVariant::channel_packs) return 0;
  return static_cast<std::size_t>(shape.channels * shape.multiplier) *
         static_cast<std::size_t>(volume(shape.kernel)) * element_size(shape.type);
}

cudaError_t depthwise_bwd_weights(const DepthwiseShape& shape, DepthwiseVariant variant,
                                  const void* src, const void* diff_dst, void* diff_weights,
                                  void* workspace, const Queue& queue) {
  if (depthwise_unsupported(shape, variant, DepthwiseDirection::bwd_weights) != nullptr)
    return cudaErrorInvalidValue;
  if (shape.batch == 0) {
    // No position contributes: every gradient is 0 (all-zero bits in f32, f16 and bf16).
    const std::size_t bytes = static_cast<std::size_t>(shape.channels * shape.multiplier) *
                              static_cast<std::size_t>(volume(shape.kernel)) *
                              element_size(shape.type);
    return cudaMemsetAsync(diff_weights, 0, bytes, queue.stream);
  }
  switch (shape.type) {
    case DepthwiseType::f32:
      return weights_typed<float>(shape, variant, src, diff_dst, diff_weights, workspace, queue);
    case DepthwiseType::f16:
      return weights_typed<__half>(shape, variant, src, diff_dst, diff_weights, workspace, queue);
    case DepthwiseType::bf16:
      return weights_typed<__nv_bfloat16>(shape, variant, src, diff_dst, diff_weights, workspace,
                                          queue);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels
