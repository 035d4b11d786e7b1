#pragma once
// The channels_last column strips of dnnx's depthwise kernels (Note [depthwise channel strips] in
// depthwise.cu): one thread's work as a function shared by the kernel and the host (a test runs
// whole convolutions through it where there is no GPU).

#include "backends/cudnn/kernels/depthwise.hpp"
#include "backends/cudnn/kernels/spatial.hpp"

#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_STRIPS_HD __host__ __device__
#else
#define DNNX_STRIPS_HD
#endif
// Loops unrolled in device code; the host compilers (nvcc's and the tests') keep their own say.
#if defined(__CUDA_ARCH__)
#define DNNX_STRIPS_UNROLL _Pragma("unroll")
#else
#define DNNX_STRIPS_UNROLL
#endif

namespace dnnx::cudnn::kernels::strips {

/// Output rows per thread (R) of every strips kernel (depthwise in both layouts, grouped).
inline constexpr int strip_rows = 4;

/// The rows, columns and planes of a strip's correlation (Note [depthwise column strips] in
/// depthwise.cu): the tensor read {a_d, a_h, a_w} (fwd: src; bwd_data: diff_dst), the one
/// written {o_d, o_h, o_w} (fwd: dst; bwd_data: diff_src). Output row y, column x reads rows
/// y * S - pad_h + kh and columns x * stride_w - pad_w + kw (bwd_data: the kernel flipped, stride
/// 1); output depth z reads plane_read() of it.
struct Span {
  int a_d = 1, a_h = 1, a_w = 1;
  int o_d = 1, o_h = 1, o_w = 1;
  int pad_h = 0, pad_w = 0;  ///< the first row (column) read by output row (column) 0
  int stride_w = 1;
  int s_d = 1, p_d = 0;  ///< the depth's stride and front padding (kernels of depth 1)
  int strips = 1;        ///< ceil(o_h / strip_rows)
};

/// The span of a K x K kernel (of depth 1) over `dims` in fwd (`forward`) or bwd_data.
inline Span span_of(const SpatialDims& dims, int k, bool forward) {
  const int* read = forward ? dims.input : dims.output;
  const int* written = forward ? dims.output : dims.input;
  Span s;
  s.a_d = read[0];
  s.a_h = read[1];
  s.a_w = read[2];
  s.o_d = written[0];
  s.o_h = written[1];
  s.o_w = written[2];
  s.pad_h = forward ? dims.pad_before[1] : k - 1 - dims.pad_before[1];
  s.pad_w = forward ? dims.pad_before[2] : k - 1 - dims.pad_before[2];
  s.stride_w = forward ? dims.stride[2] : 1;
  s.s_d = dims.stride[0];
  s.p_d = dims.pad_before[0];
  s.strips = (s.o_h + strip_rows - 1) / strip_rows;
  return s;
}

/// The plane output depth z reads: z * s_d - p_d (Backward, bwd_data: (z + p_d) / s_d where that
/// divides), or -1 when that is outside the tensor read (the outputs are zeros).
template <bool Backward>
DNNX_STRIPS_HD inline int plane_read(const Span& g, int z) {
  if (Backward) {
    const int shifted = z + g.p_d;
    return shifted % g.s_d == 0 && shifted / g.s_d < g.a_d ? shifted / g.s_d : -1;
  }
  const int zi = z * g.s_d - g.p_d;
  return zi >= 0 && zi < g.a_d ? zi : -1;
}

/// The channels_last depthwise strips (multiplier 1): both tensors dense, {batch, span, channels}.
/// A thread owns V channels (a pack) of one column of `strip_rows` output rows of one plane:
/// item = ((z * strips + strip) * o_w + x) * packs + pack, below `items`.
struct ChannelGeo : Span {
  int channels = 1;                         ///< C (multiplier 1)
  int packs = 1;                            ///< C / V
  int items = 0;                            ///< threads per sample
  std::int64_t a_sample = 0, o_sample = 0;  ///< elements per sample
};

/// The geometry of `shape`'s strips in fwd (`forward`) or bwd_data for packs of `pack` channels
/// (a divisor of the channel count). The shape must be in the variant's domain
/// (depthwise_unsupported() says nullptr for strips).
ChannelGeo channel_geo(const DepthwiseShape& shape, bool forward, int pack);

/// The widest pack the launch uses for `shape` when every pointer is aligned to it: at most 8
/// bytes, V * K * K <= 64 (the weights a thread keeps in f32 registers: f16 3x3 takes 4, 5x5 2),
/// and a divisor of the channel count.
int channel_pack(const DepthwiseShape& shape);

/// V consecutive channels, loaded and stored as one aligned access.
template <typename T, int V>
struct alignas(sizeof(T) * V) StripPack {
  T v[V];
};

/// One thread's strip: the outputs of `item` (< g.items) of one sample, `a` and `out` pointing at
/// that sample's first element, `wt` at the weights transposed (kernel position k x channels:
/// wt[k * channels + c], Note [depthwise weight taps]). K x K kernel, stride S along H; Backward:
/// bwd_data (the kernel flipped). Convert::widen(T) -> float and Convert::narrow(float) -> T
/// convert the storage type. Positions outside the tensor read are skipped; each output sums its
/// window in the order of the rows read, then the kernel's columns, in f32.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename T, int V, int K, int S, bool Backward, typename Convert>
DNNX_STRIPS_HD inline void channel_strip(const ChannelGeo& g, int item, const T* a, const T* wt,
                                         T* out) {
  constexpr int R = strip_rows;
  int t = item;
  const int pack = t % g.packs;
  t /= g.packs;
  const int x = t % g.o_w;
  t /= g.o_w;
  const int strip = t % g.strips;
  const int z = t / g.strips;
  const int c = pack * V;
  const int zi = plane_read<Backward>(g, z);
  const int y0 = strip * R;
  const int row0 = y0 * S - g.pad_h;
  const int col0 = x * g.stride_w - g.pad_w;
  bool column_inside[K];
  DNNX_STRIPS_UNROLL
  for (int kw = 0; kw < K; ++kw) column_inside[kw] = col0 + kw >= 0 && col0 + kw < g.a_w;
  float acc[R][V];
  DNNX_STRIPS_UNROLL
  for (int r = 0; r < R; ++r) {
    DNNX_STRIPS_UNROLL
    for (int e = 0; e < V; ++e) acc[r][e] = 0.0f;
  }
  if (zi >= 0) {
    float wk[K * K][V];  // the kernel (bwd_data: flipped), each tap used by up to R rows
    DNNX_STRIPS_UNROLL
    for (int k = 0; k < K * K; ++k) {
      const StripPack<T, V> p = *reinterpret_cast<const StripPack<T, V>*>(
          wt + (Backward ? K * K - 1 - k : k) * g.channels + c);
      DNNX_STRIPS_UNROLL
      for (int e = 0; e < V; ++e) wk[k][e] = Convert::widen(p.v[e]);
    }
    DNNX_STRIPS_UNROLL
    for (int j = 0; j < (R - 1) * S + K; ++j) {
      const int ih = row0 + j;
      if (ih < 0 || ih >= g.a_h) continue;
      const int base = (zi * g.a_h + ih) * g.a_w + col0;
      float v[K][V];
      DNNX_STRIPS_UNROLL
      for (int kw = 0; kw < K; ++kw) {
        if (!column_inside[kw]) continue;
        const StripPack<T, V> p =
            *reinterpret_cast<const StripPack<T, V>*>(a + (base + kw) * g.channels + c);
        DNNX_STRIPS_UNROLL
        for (int e = 0; e < V; ++e) v[kw][e] = Convert::widen(p.v[e]);
      }
      DNNX_STRIPS_UNROLL
      for (int r = 0; r < R; ++r) {
        const int kh = j - r * S;
        if (kh < 0 || kh >= K) continue;
        DNNX_STRIPS_UNROLL
        for (int kw = 0; kw < K; ++kw) {
          if (!column_inside[kw]) continue;
          DNNX_STRIPS_UNROLL
          for (int e = 0; e < V; ++e) acc[r][e] += v[kw][e] * wk[kh * K + kw][e];
        }
      }
    }
  }
  DNNX_STRIPS_UNROLL
  for (int r = 0; r < R; ++r) {
    if (y0 + r >= g.o_h) continue;
    StripPack<T, V> y;
    DNNX_STRIPS_UNROLL
    for (int e = 0; e < V; ++e) y.v[e] = Convert::narrow(acc[r][e]);
    *reinterpret_cast<StripPack<T, V>*>(out + ((z * g.o_h + y0 + r) * g.o_w + x) * g.channels + c) =
        y;
  }
}

}  // namespace dnnx::cudnn::kernels::strips
