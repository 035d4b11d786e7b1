#pragma once
// The transforms of Winograd's minimal filtering F(4x4, 3x3) (Note [winograd candidates] in
// conv_winograd.cpp): plain pointers, sizes and a stream; no cuDNN types. The tile functions are
// shared by the kernels and the host (a test runs whole convolutions through them).
//
// With the interpolation points 0, 1, -1, 2, -2 and infinity, one 4x4 output tile y of the 3x3
// correlation of a 6x6 input tile d with a filter g is y = A^T [(G g G^T) . (B^T d B)] A, "."
// the elementwise product of two 6x6 matrices; the gradients follow from it: d's is
// B [(G g G^T) . (A dy A^T)] B^T (a correlation again, with the filter turned), g's is
// G^T [(A dy A^T) . (B^T d B)] G.

#include <cuda_runtime_api.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_WINOGRAD_HD __host__ __device__
#else
#define DNNX_WINOGRAD_HD
#endif

namespace dnnx::cudnn::kernels::winograd {

inline constexpr int out_tile = 4;     ///< outputs per tile and dim
inline constexpr int in_tile = 6;      ///< inputs per tile and dim (out_tile + 3 - 1)
inline constexpr int points = 36;      ///< in_tile^2: the products of the batch
inline constexpr int filter_size = 3;  ///< the kernel's taps per dim

/// One pass of the transforms over a part of the batch. The input transform reads `in_channels`
/// maps of in_h x in_w; the tiles cover out_h x out_w (what the output transform writes, or the
/// gradient the gradient transform reads). With dilation d, the outputs of a tile lie d apart: a
/// tile holds 4 x 4 outputs of one residue class mod d per dim (class_tiles_h tiles per class
/// along H, tiles_h = dilation_h * class_tiles_h; tile_origin()), and its output (row + d i) reads
/// input rows row + d (i + r) - pad_h, r < 3, the tile's 6 input rows row - pad_h + d j (zeros
/// outside the map); columns alike. tiles = batch * tiles_h * tiles_w, tile index (n * tiles_h +
/// th) * tiles_w + tw. The tiles are cut into `splits` runs of `split_tiles` (the weight
/// gradient's products, one per point and run: Note [winograd candidates]); the slots past the
/// last tile hold zeros. A transformed tensor of C channels is
///   channels_first: {36, splits, C, split_tiles}
///   channels_last:  {36, splits * split_tiles, C}
/// (with one run, {36, C, tiles} and {36, tiles, C}); maps are {batch, channels, h, w}
/// (channels_last {batch, h, w, channels}).
struct Geometry {
  bool channels_last = false;
  std::int64_t batch = 1;
  std::int64_t in_channels = 1, out_channels = 1;
  std::int64_t in_h = 1, in_w = 1;
  std::int64_t out_h = 1, out_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t class_tiles_h = 1, class_tiles_w = 1;
  std::int64_t tiles_h = 1, tiles_w = 1;
  std::int64_t splits = 1, split_tiles = 1;
};

DNNX_WINOGRAD_HD inline std::int64_t tiles_of(const Geometry& g) {
  return g.batch * g.tiles_h * g.tiles_w;
}

/// Where tile `tile` lies: its sample and the map position of its first output; its outputs are
/// at (row + dilation_h * i, col + dilation_w * j), i, j < 4. Tile row th is the (th %
/// class_tiles_h)-th run of 4 of residue class th / class_tiles_h (columns alike). 32-bit: tiles
/// and positions are below 2^31 (the caller's bounds).
struct TileOrigin {
  std::uint32_t n;
  std::int32_t row, col;
};
DNNX_WINOGRAD_HD inline TileOrigin tile_origin(const Geometry& g, std::uint32_t tile) {
  const auto tiles_w = static_cast<std::uint32_t>(g.tiles_w);
  const auto per_sample = static_cast<std::uint32_t>(g.tiles_h) * tiles_w;
  const std::uint32_t n = tile / per_sample;
  const std::uint32_t rest = tile - n * per_sample;
  const std::uint32_t th = rest / tiles_w, tw = rest - th * tiles_w;
  const auto class_h = static_cast<std::uint32_t>(g.class_tiles_h);
  const auto class_w = static_cast<std::uint32_t>(g.class_tiles_w);
  const std::uint32_t ch = th / class_h, cw = tw / class_w;
  return {n, static_cast<std::int32_t>(ch + g.dilation_h * out_tile * (th - ch * class_h)),
          static_cast<std::int32_t>(cw + g.dilation_w * out_tile * (tw - cw * class_w))};
}

/// The tile slots of a transformed tensor: splits * split_tiles (at least tiles_of(g)).
DNNX_WINOGRAD_HD inline std::int64_t slots_of(const Geometry& g) {
  return g.splits * g.split_tiles;
}

// The one-dimensional transforms; the 2-D ones apply them along each dim of a tile.

/// B^T x: 6 from 6.
DNNX_WINOGRAD_HD inline void input_1d(const float* x, int step, float* t, int t_step) {
  const float x0 = x[0], x1 = x[step], x2 = x[2 * step], x3 = x[3 * step], x4 = x[4 * step],
              x5 = x[5 * step];
  t[0] = 4.0f * x0 - 5.0f * x2 + x4;
  t[t_step] = -4.0f * (x1 + x2) + x3 + x4;
  t[2 * t_step] = 4.0f * (x1 - x2) - x3 + x4;
  t[3 * t_step] = 2.0f * (x3 - x1) - x2 + x4;
  t[4 * t_step] = 2.0f * (x1 - x3) - x2 + x4;
  t[5 * t_step] = 4.0f * x1 - 5.0f * x3 + x5;
}

/// A^T m: 4 from 6.
DNNX_WINOGRAD_HD inline void output_1d(const float* m, int step, float* y, int y_step) {
  const float m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step],
              m5 = m[5 * step];
  const float p12 = m1 + m2, d12 = m1 - m2, p34 = m3 + m4, d34 = m3 - m4;
  y[0] = m0 + p12 + p34;
  y[y_step] = d12 + 2.0f * d34;
  y[2 * y_step] = p12 + 4.0f * p34;
  y[3 * y_step] = d12 + 8.0f * d34 + m5;
}

/// G g: 6 from 3.
DNNX_WINOGRAD_HD inline void filter_1d(const float* g, int step, float* u, int u_step) {
  const float g0 = g[0], g1 = g[step], g2 = g[2 * step];
  u[0] = 0.25f * g0;
  u[u_step] = -(g0 + g1 + g2) / 6.0f;
  u[2 * u_step] = -(g0 - g1 + g2) / 6.0f;
  u[3 * u_step] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
  u[4 * u_step] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
  u[5 * u_step] = g2;
}

/// A y: 6 from 4 (the output transform's adjoint).
DNNX_WINOGRAD_HD inline void gradient_1d(const float* y, int step, float* z, int z_step) {
  const float y0 = y[0], y1 = y[step], y2 = y[2 * step], y3 = y[3 * step];
  z[0] = y0;
  z[z_step] = y0 + y1 + y2 + y3;
  z[2 * z_step] = y0 - y1 + y2 - y3;
  z[3 * z_step] = y0 + 2.0f * y1 + 4.0f * y2 + 8.0f * y3;
  z[4 * z_step] = y0 - 2.0f * y1 + 4.0f * y2 - 8.0f * y3;
  z[5 * z_step] = y3;
}

/// G^T u: 3 from 6 (the filter transform's adjoint).
DNNX_WINOGRAD_HD inline void filter_gradient_1d(const float* u, int step, float* g, int g_step) {
  const float u0 = u[0], u1 = u[step], u2 = u[2 * step], u3 = u[3 * step], u4 = u[4 * step],
              u5 = u[5 * step];
  g[0] = 0.25f * u0 - (u1 + u2) / 6.0f + (u3 + u4) / 24.0f;
  g[g_step] = (u2 - u1) / 6.0f + (u3 - u4) / 12.0f;
  g[2 * g_step] = (u3 + u4 - u1 - u2) / 6.0f + u5;
}

// The 2-D transforms of row-major tiles: `rows` x `cols` in, the 1-D transform down each column,
// then along each row.

/// v = B^T d B (6x6 from 6x6).
DNNX_WINOGRAD_HD inline void input_tile(const float* d, float* v) {
  float t[points];
  for (int j = 0; j < in_tile; ++j) input_1d(d + j, in_tile, t + j, in_tile);
  for (int i = 0; i < in_tile; ++i) input_1d(t + i * in_tile, 1, v + i * in_tile, 1);
}

/// y = A^T m A (4x4 from 6x6).
DNNX_WINOGRAD_HD inline void output_tile(const float* m, float* y) {
  float t[out_tile * in_tile];
  for (int j = 0; j < in_tile; ++j) output_1d(m + j, in_tile, t + j, in_tile);
  for (int i = 0; i < out_tile; ++i) output_1d(t + i * in_tile, 1, y + i * out_tile, 1);
}

/// u = G g G^T (6x6 from 3x3).
DNNX_WINOGRAD_HD inline void filter_tile(const float* g, float* u) {
  float t[in_tile * filter_size];
  for (int j = 0; j < filter_size; ++j) filter_1d(g + j, filter_size, t + j, filter_size);
  for (int i = 0; i < in_tile; ++i) filter_1d(t + i * filter_size, 1, u + i * in_tile, 1);
}

/// z = A dy A^T (6x6 from 4x4).
DNNX_WINOGRAD_HD inline void gradient_tile(const float* dy, float* z) {
  float t[in_tile * out_tile];
  for (int j = 0; j < out_tile; ++j) gradient_1d(dy + j, out_tile, t + j, out_tile);
  for (int i = 0; i < in_tile; ++i) gradient_1d(t + i * out_tile, 1, z + i * in_tile, 1);
}

/// dg = G^T du G (3x3 from 6x6).
DNNX_WINOGRAD_HD inline void filter_gradient_tile(const float* du, float* dg) {
  float t[filter_size * in_tile];
  for (int j = 0; j < in_tile; ++j) filter_gradient_1d(du + j, in_tile, t + j, in_tile);
  for (int i = 0; i < filter_size; ++i)
    filter_gradient_1d(t + i * in_tile, 1, dg + i * filter_size, 1);
}

/// Offset of (point, channel, tile slot) in a transformed tensor of `channels` channels.
DNNX_WINOGRAD_HD inline std::int64_t transformed_offset(const Geometry& g, std::int64_t channels,
                                                        int point, std::int64_t channel,
                                                        std::int64_t tile) {
  if (g.channels_last) return (point * slots_of(g) + tile) * channels + channel;
  const std::int64_t split = tile / g.split_tiles;
  return ((point * g.splits + split) * channels + channel) * g.split_tiles +
         (tile - split * g.split_tiles);
}

/// The (tile slot, channel) whose value for a point sits at `index` of that point's slice of a
/// transformed tensor of `channels` channels (transformed_offset's inverse; a kernel thread's
/// place): channels fastest in channels_last; in channels_first the slots of a run fastest, then
/// the channels, then the runs.
struct TileChannel {
  std::uint32_t tile, channel;
};
DNNX_WINOGRAD_HD inline TileChannel tile_channel_of(bool channels_last, std::uint32_t index,
                                                    std::uint32_t split_tiles,
                                                    std::uint32_t channels) {
  if (channels_last) {
    const std::uint32_t tile = index / channels;
    return {tile, index - tile * channels};
  }
  const std::uint32_t rest = index / split_tiles;
  const std::uint32_t split = rest / channels;
  return {split * split_tiles + (index - rest * split_tiles), rest - split * channels};
}

/// Offset of (n, channel, row, col) in a map tensor of `channels` channels, h x w.
DNNX_WINOGRAD_HD inline std::int64_t map_offset(bool channels_last, std::int64_t channels,
                                                std::int64_t h, std::int64_t w, std::int64_t n,
                                                std::int64_t channel, std::int64_t row,
                                                std::int64_t col) {
  return channels_last ? ((n * h + row) * w + col) * channels + channel
                       : ((n * channels + channel) * h + row) * w + col;
}

/// Offset of tap (r, s) of filter (o, i) in weights {O, I, 3, 3} (channels_last {O, 3, 3, I}).
DNNX_WINOGRAD_HD inline std::int64_t weight_offset(bool channels_last, std::int64_t i_count,
                                                   std::int64_t o, std::int64_t i, int r, int s) {
  return channels_last ? ((o * filter_size + r) * filter_size + s) * i_count + i
                       : ((o * i_count + i) * filter_size + r) * filter_size + s;
}

/// u {36, out_channels, in_channels} = G w G^T of each filter of `weights`: {out_channels,
/// in_channels, 3, 3} (channels_last {out_channels, 3, 3, in_channels}); with `turned`, the
/// weights are {in_channels, out_channels, 3, 3} and filter (o, i) is filter (i, o) rotated by
/// 180 degrees (the backward data pass's).
cudaError_t filter_transform(const float* weights, float* u, std::int64_t out_channels,
                             std::int64_t in_channels, bool channels_last, bool turned,
                             cudaStream_t stream);

/// v = B^T d B of every 6x6 input tile of every channel of `in` (in_channels maps of g); zeros in
/// the slots past the last tile.
cudaError_t input_transform(const Geometry& g, const float* in, float* v, cudaStream_t stream);

/// out = A^T m A of every tile of every channel of m (out_channels of g), the outputs past
/// out_h x out_w dropped.
cudaError_t output_transform(const Geometry& g, const float* m, float* out, cudaStream_t stream);

/// z = A dy A^T of every 4x4 tile of every channel of `dy` (out_channels maps of out_h x out_w,
/// zeros past them); zeros in the slots past the last tile.
cudaError_t gradient_transform(const Geometry& g, const float* dy, float* z, cudaStream_t stream);

/// diff_weights {out_channels, in_channels, 3, 3} (channels_last {out_channels, 3, 3,
/// in_channels}) = G^T du G, du the sum over its `splits` partial gradients of du {36, splits,
/// out_channels, in_channels} (in split order).
cudaError_t filter_gradient_transform(const float* du, float* diff_weights,
                                      std::int64_t out_channels, std::int64_t in_channels,
                                      std::int64_t splits, bool channels_last, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::winograd
