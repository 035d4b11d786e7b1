#pragma once
// dnnx's grouped convolution kernel for small groups (cudnn:kernel:grouped:strips, Note [grouped
// strips] in grouped.cu): channels_last, 4 or 8 channels per group in and out, 3x3 kernels of
// 2-D (or depth-1 3-D) convolutions without dilation; fwd at a stride of 1 or 2 along H (any along
// W), bwd_data at stride 1. Plain pointers, sizes and a stream; no cuDNN types. One thread's work
// is a function shared by the kernel and the host (a test runs whole convolutions through it
// where there is no GPU).

#include "backends/cudnn/kernels/depthwise_strips.hpp"
#include "backends/cudnn/kernels/spatial.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels {

/// Element type of the tensors (f32 accumulation for all three).
enum class GroupedType : int { f32 = 0, f16 = 1, bf16 = 2 };

/// One grouped convolution in 3 spatial dims (SpatialDims: D, H, W), channels_last and dense: src
/// {batch, D, H, W, groups * in_per_group}, dst {batch, out..., groups * out_per_group}, weights
/// {groups * out_per_group, KD, KH, KW, in_per_group} (dnnx's channels_last weights). Output
/// channel o of group g reads input channels g * in_per_group ... + in_per_group - 1.
struct GroupedShape : SpatialDims {
  std::int64_t batch = 1;
  std::int64_t groups = 1;
  std::int64_t in_per_group = 1;
  std::int64_t out_per_group = 1;
  GroupedType type = GroupedType::f32;
};

/// Why the kernel cannot run `shape` forward (`forward`) or in bwd_data (a static string), or
/// nullptr when it can.
const char* grouped_unsupported(const GroupedShape& shape, bool forward);

/// Workspace bytes of the weights laid out for the kernel in f32 (grouped::weight_source()).
std::size_t grouped_workspace_bytes(const GroupedShape& shape);

/// dst = conv(src, weights), queued on `stream`; `workspace` holds grouped_workspace_bytes(shape)
/// bytes, aligned to 16. Returns the launch status (cudaErrorInvalidValue when the kernel cannot
/// run the shape).
cudaError_t grouped_fwd(const GroupedShape& shape, const void* src, const void* weights, void* dst,
                        void* workspace, cudaStream_t stream);

/// diff_src = gradient w.r.t. src, queued on `stream`: the correlation of diff_dst with the
/// kernel flipped, each diff_src element written once in a fixed order. `workspace` as for
/// grouped_fwd.
cudaError_t grouped_bwd_data(const GroupedShape& shape, const void* diff_dst, const void* weights,
                             void* diff_src, void* workspace, cudaStream_t stream);

namespace grouped {

/// Taps per dim (3x3 kernels).
inline constexpr int taps = 3;

/// The correlation a thread's strip computes over the rows, columns and planes of a strips::Span:
/// the tensor read `a` {batch, span, groups * A} (fwd: src, A = in_per_group; bwd_data: diff_dst,
/// A = out_per_group), the one written {batch, span, groups * B}; output channel b of group g
/// reads that group's A channels. A thread owns the B channels of one group in one column of
/// strips::strip_rows output rows of one plane: item = ((z * strips + strip) * o_w + x) * groups
/// + g.
struct Geo : strips::Span {
  int groups = 1;
  int items = 0;  ///< threads per sample
  std::int64_t a_sample = 0, o_sample = 0;
};

/// The geometry of `shape` in fwd (`forward`) or bwd_data (grouped_unsupported() nullptr).
Geo geo(const GroupedShape& shape, bool forward);

/// The weights as the kernel reads them, f32: element ((tap * B + b) * groups + g) * A + a is the
/// weight of the thread's input channel a onto its output channel b of group g at kernel position
/// tap (bwd_data: the kernel flipped, a and b the output and input channel of the convolution).
/// Returns the index of that weight in dnnx's channels_last weights, for element `laid` below
/// groups * taps^2 * A * B.
DNNX_STRIPS_HD inline std::int64_t weight_source(std::int64_t laid, int groups, int A, int B,
                                                 bool backward) {
  constexpr int kk = taps * taps;
  const int a = static_cast<int>(laid % A);
  std::int64_t t = laid / A;
  const int g = static_cast<int>(t % groups);
  t /= groups;
  const int b = static_cast<int>(t % B);
  const int tap = static_cast<int>(t / B);
  // channels_last weights: {groups * out, kernel, in}; fwd: A = in, B = out.
  const int out = backward ? a : b;
  const int in = backward ? b : a;
  const int per_out = backward ? A : B;
  const int per_in = backward ? B : A;
  const int position = backward ? kk - 1 - tap : tap;
  return ((static_cast<std::int64_t>(g) * per_out + out) * kk + position) * per_in + in;
}

/// One thread's strip: the outputs of `item` (< g.items) of one sample, `a` and `out` pointing at
/// that sample's first element, `w` at the laid-out weights (weight_source()). S: the stride
/// along H; Backward: bwd_data (stride 1, the depth mapped back); P: the channels per load and
/// store (a divisor of A and B, at most 16 bytes, the tensors aligned to it). Convert as for
/// strips::channel_strip(). Positions outside the tensor read are skipped; each output sums over
/// the rows read, the kernel's columns and the group's channels, in that order, in f32.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename T, int A, int B, int P, int S, bool Backward, typename Convert>
DNNX_STRIPS_HD inline void strip(const Geo& g, int item, const T* a, const float* w, T* out) {
  constexpr int R = strips::strip_rows;
  constexpr int K = taps;
  static_assert(A % P == 0 && B % P == 0 && A % 2 == 0, "packs divide the groups' channels");
  constexpr int WP = A % 4 == 0 ? 4 : 2;  // weights per load
  int t = item;
  const int group = t % g.groups;
  t /= g.groups;
  const int x = t % g.o_w;
  t /= g.o_w;
  const int strip_index = t % g.strips;
  const int z = t / g.strips;
  const int zi = strips::plane_read<Backward>(g, z);
  const int y0 = strip_index * R;
  const int row0 = y0 * S - g.pad_h;
  const int col0 = x * g.stride_w - g.pad_w;
  const int a_channels = g.groups * A;
  const int o_channels = g.groups * B;
  bool column_inside[K];
  DNNX_STRIPS_UNROLL
  for (int kw = 0; kw < K; ++kw) column_inside[kw] = col0 + kw >= 0 && col0 + kw < g.a_w;
  float acc[R][B];
  DNNX_STRIPS_UNROLL
  for (int r = 0; r < R; ++r) {
    DNNX_STRIPS_UNROLL
    for (int b = 0; b < B; ++b) acc[r][b] = 0.0f;
  }
  if (zi >= 0) {
    DNNX_STRIPS_UNROLL
    for (int j = 0; j < (R - 1) * S + K; ++j) {
      const int ih = row0 + j;
      if (ih < 0 || ih >= g.a_h) continue;
      const int base = (zi * g.a_h + ih) * g.a_w + col0;
      float v[K][A];
      DNNX_STRIPS_UNROLL
      for (int kw = 0; kw < K; ++kw) {
        if (!column_inside[kw]) continue;
        const T* at = a + (base + kw) * a_channels + group * A;
        DNNX_STRIPS_UNROLL
        for (int p = 0; p < A; p += P) {
          const strips::StripPack<T, P> pack =
              *reinterpret_cast<const strips::StripPack<T, P>*>(at + p);
          DNNX_STRIPS_UNROLL
          for (int e = 0; e < P; ++e) v[kw][p + e] = Convert::widen(pack.v[e]);
        }
      }
      DNNX_STRIPS_UNROLL
      for (int r = 0; r < R; ++r) {
        const int kh = j - r * S;
        if (kh < 0 || kh >= K) continue;
        DNNX_STRIPS_UNROLL
        for (int kw = 0; kw < K; ++kw) {
          if (!column_inside[kw]) continue;
          DNNX_STRIPS_UNROLL
          for (int b = 0; b < B; ++b) {
            const float* wb =
                w + ((static_cast<std::int64_t>(kh * K + kw) * B + b) * g.groups + group) * A;
            DNNX_STRIPS_UNROLL
            for (int q = 0; q < A; q += WP) {
              const strips::StripPack<float, WP> wv =
                  *reinterpret_cast<const strips::StripPack<float, WP>*>(wb + q);
              DNNX_STRIPS_UNROLL
              for (int e = 0; e < WP; ++e) acc[r][b] += v[kw][q + e] * wv.v[e];
            }
          }
        }
      }
    }
  }
  DNNX_STRIPS_UNROLL
  for (int r = 0; r < R; ++r) {
    if (y0 + r >= g.o_h) continue;
    T* at = out + ((z * g.o_h + y0 + r) * g.o_w + x) * o_channels + group * B;
    DNNX_STRIPS_UNROLL
    for (int p = 0; p < B; p += P) {
      strips::StripPack<T, P> pack;
      DNNX_STRIPS_UNROLL
      for (int e = 0; e < P; ++e) pack.v[e] = Convert::narrow(acc[r][p + e]);
      *reinterpret_cast<strips::StripPack<T, P>*>(at + p) = pack;
    }
  }
}

}  // namespace grouped
}  // namespace dnnx::cudnn::kernels
