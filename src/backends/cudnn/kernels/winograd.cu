// The transforms of Winograd's F(4x4, 3x3) (winograd.hpp).
//
// Note [winograd transform kernels]
// Each kernel gives a thread one tile (or one filter) of one channel: it loads the tile, applies
// the tile function of winograd.hpp in registers and stores the 36 (or 16, or 9) results. The
// threads of a warp take neighbouring elements of the transformed tensor's innermost dim (tiles
// in channels_first, channels in channels_last), so every one of its 36 stores and loads is one
// contiguous run of the warp; the map side reads and writes rows of 4 to 6 neighbours per thread
// (a dilation apart), which L1 merges in channels_first and which run along the channels in
// channels_last. The weight gradient's slots past the last tile are written as zeros. A tile
// whose rows and columns all lie inside the map loads without bounds checks. The transformed
// tensors of one pass have fewer than 2^31 elements (the caller's cap), so indices are 32-bit;
// map offsets are 64-bit. Grids are capped and grid-stride, so any size runs.

#include "backends/cudnn/kernels/winograd.hpp"

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::winograd {
namespace {

constexpr int block_threads = 256;
constexpr std::int64_t max_blocks = std::int64_t{1} << 20;

unsigned blocks_for(std::int64_t count) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((count + block_threads - 1) / block_threads, 1, max_blocks));
}

template <bool Last>
__device__ __forceinline__ TileChannel split_index(unsigned index, unsigned split_tiles,
                                                   unsigned channels) {
  return tile_channel_of(Last, index, split_tiles, channels);
}

// A map of one sample and channel: element (row, col) at base[row * row_step + col * col_step].
template <typename T>
struct Map {
  T* base;
  std::int64_t row_step, col_step;
  int h, w;
};

template <bool Last, typename T>
__device__ __forceinline__ Map<T> map_of(T* data, std::int64_t channels, int h, int w, unsigned n,
                                         unsigned channel) {
  const std::int64_t first = map_offset(Last, channels, h, w, n, channel, 0, 0);
  return {data + first, Last ? std::int64_t{w} * channels : std::int64_t{w},
          Last ? channels : std::int64_t{1}, h, w};
}

// The `Rows` x `Cols` elements of `map` at (row0 + dh i, col0 + dw j), zeros outside the map.
template <int Rows, int Cols>
__device__ __forceinline__ void load_tile(const Map<const float>& map, int row0, int col0, int dh,
                                          int dw, float* tile) {
  if (row0 >= 0 && col0 >= 0 && row0 + (Rows - 1) * dh < map.h && col0 + (Cols - 1) * dw < map.w) {
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      const float* row = map.base + (row0 + i * dh) * map.row_step + col0 * map.col_step;
#pragma unroll
      for (int j = 0; j < Cols; ++j) tile[i * Cols + j] = __ldg(row + j * dw * map.col_step);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < Rows; ++i) {
    const int r = row0 + i * dh;
    const bool row_in = r >= 0 && r < map.h;
#pragma unroll
    for (int j = 0; j < Cols; ++j) {
      const int c = col0 + j * dw;
      tile[i * Cols + j] = row_in && c >= 0 && c < map.w
                               ? __ldg(map.base + r * map.row_step + c * map.col_step)
                               : 0.0f;
    }
  }
}

// The transforms of a map tile into a point tile (winograd.hpp's tile functions).
struct InputTransform {
  static constexpr int size = in_tile;  // 6x6 input tiles
  __device__ void operator()(const float* d, float* v) const { input_tile(d, v); }
};
struct GradientTransform {
  static constexpr int size = out_tile;  // 4x4 output-gradient tiles
  __device__ void operator()(const float* dy, float* z) const { gradient_tile(dy, z); }
};

// The 36 transformed values of the (tile slot, channel) at `index`'s place in each point's slice
// of a transformed tensor of `channels` channels (point p's at index + p * count): the
// Transform::size square of `maps` (channels maps of h x w) a dilation apart from the tile's
// origin less (pad_h, pad_w); zeros in the slots past the last tile.
template <bool Last, typename Transform>
__global__ void tile_kernel(Geometry g, const float* __restrict__ maps, float* __restrict__ out,
                            std::int64_t channels, int h, int w, int pad_h, int pad_w) {
  constexpr int size = Transform::size;
  const auto tiles = static_cast<unsigned>(tiles_of(g));
  const auto split_tiles = static_cast<unsigned>(g.split_tiles);
  const unsigned count = static_cast<unsigned>(slots_of(g) * channels);
  for (unsigned index = blockIdx.x * blockDim.x + threadIdx.x; index < count;
       index += gridDim.x * blockDim.x) {
    const TileChannel tc = split_index<Last>(index, split_tiles, static_cast<unsigned>(channels));
    if (tc.tile >= tiles) {
#pragma unroll
      for (int p = 0; p < points; ++p) out[index + p * count] = 0.0f;
      continue;
    }
    const TileOrigin start = tile_origin(g, tc.tile);
    const Map<const float> map = map_of<Last>(maps, channels, h, w, start.n, tc.channel);
    float d[size * size], t[points];
    load_tile<size, size>(map, start.row - pad_h, start.col - pad_w, static_cast<int>(g.dilation_h),
                          static_cast<int>(g.dilation_w), d);
    Transform{}(d, t);
#pragma unroll
    for (int p = 0; p < points; ++p) out[index + p * count] = t[p];
  }
}

// The forward and data gradient's tiles are one run (splits 1, split_tiles = tiles).
template <bool Last>
__global__ void output_kernel(Geometry g, const float* __restrict__ m, float* __restrict__ out) {
  const auto tiles = static_cast<unsigned>(tiles_of(g));
  const auto channels = static_cast<unsigned>(g.out_channels);
  const unsigned count = tiles * channels;
  const auto h = static_cast<int>(g.out_h), w = static_cast<int>(g.out_w);
  const auto dh = static_cast<int>(g.dilation_h), dw = static_cast<int>(g.dilation_w);
  for (unsigned index = blockIdx.x * blockDim.x + threadIdx.x; index < count;
       index += gridDim.x * blockDim.x) {
    const TileChannel tc = split_index<Last>(index, tiles, channels);
    const TileOrigin start = tile_origin(g, tc.tile);
    float t[points], y[out_tile * out_tile];
#pragma unroll
    for (int p = 0; p < points; ++p) t[p] = __ldg(m + index + p * count);
    output_tile(t, y);
    const Map<float> map = map_of<Last>(out, g.out_channels, h, w, start.n, tc.channel);
#pragma unroll
    for (int i = 0; i < out_tile; ++i) {
      const int r = start.row + i * dh;
      if (r >= h) break;
#pragma unroll
      for (int j = 0; j < out_tile; ++j) {
        const int c = start.col + j * dw;
        if (c < w) map.base[r * map.row_step + c * map.col_step] = y[i * out_tile + j];
      }
    }
  }
}

__global__ void filter_kernel(const float* __restrict__ weights, float* __restrict__ u,
                              unsigned out_channels, unsigned in_channels, bool last, bool turned) {
  const unsigned count = out_channels * in_channels;
  for (unsigned index = blockIdx.x * blockDim.x + threadIdx.x; index < count;
       index += gridDim.x * blockDim.x) {
    const unsigned o = index / in_channels, i = index - o * in_channels;
    float g[filter_size * filter_size], t[points];
#pragma unroll
    for (int r = 0; r < filter_size; ++r) {
#pragma unroll
      for (int s = 0; s < filter_size; ++s) {
        // Turned: weights {in, out, 3, 3}, filter (i, o) rotated by 180 degrees.
        const std::int64_t at = turned ? weight_offset(last, out_channels, i, o,
                                                       filter_size - 1 - r, filter_size - 1 - s)
                                       : weight_offset(last, in_channels, o, i, r, s);
        g[r * filter_size + s] = __ldg(weights + at);
      }
    }
    filter_tile(g, t);
#pragma unroll
    for (int p = 0; p < points; ++p) u[index + p * count] = t[p];
  }
}

__global__ void filter_gradient_kernel(const float* __restrict__ du,
                                       float* __restrict__ diff_weights, unsigned out_channels,
                                       unsigned in_channels, unsigned splits, bool last) {
  const unsigned count = out_channels * in_channels;
  for (unsigned index = blockIdx.x * blockDim.x + threadIdx.x; index < count;
       index += gridDim.x * blockDim.x) {
    const unsigned o = index / in_channels, i = index - o * in_channels;
    float t[points], g[filter_size * filter_size];
#pragma unroll
    for (int p = 0; p < points; ++p) {
      const float* partial = du + index + p * splits * count;
      float sum = __ldg(partial);
      for (unsigned split = 1; split < splits; ++split) sum += __ldg(partial + split * count);
      t[p] = sum;
    }
    filter_gradient_tile(t, g);
#pragma unroll
    for (int r = 0; r < filter_size; ++r) {
#pragma unroll
      for (int s = 0; s < filter_size; ++s)
        diff_weights[weight_offset(last, in_channels, o, i, r, s)] = g[r * filter_size + s];
    }
  }
}

}  // namespace

cudaError_t filter_transform(const float* weights, float* u, std::int64_t out_channels,
                             std::int64_t in_channels, bool channels_last, bool turned,
                             cudaStream_t stream) {
  filter_kernel<<<blocks_for(out_channels * in_channels), block_threads, 0, stream>>>(
      weights, u, static_cast<unsigned>(out_channels), static_cast<unsigned>(in_channels),
      channels_last, turned);
  return cudaGetLastError();
}

cudaError_t input_transform(const Geometry& g, const float* in, float* v, cudaStream_t stream) {
  const auto kernel =
      g.channels_last ? tile_kernel<true, InputTransform> : tile_kernel<false, InputTransform>;
  kernel<<<blocks_for(slots_of(g) * g.in_channels), block_threads, 0, stream>>>(
      g, in, v, g.in_channels, static_cast<int>(g.in_h), static_cast<int>(g.in_w),
      static_cast<int>(g.pad_h), static_cast<int>(g.pad_w));
  return cudaGetLastError();
}

cudaError_t output_transform(const Geometry& g, const float* m, float* out, cudaStream_t stream) {
  const auto kernel = g.channels_last ? output_kernel<true> : output_kernel<false>;
  kernel<<<blocks_for(tiles_of(g) * g.out_channels), block_threads, 0, stream>>>(g, m, out);
  return cudaGetLastError();
}

cudaError_t gradient_transform(const Geometry& g, const float* dy, float* z, cudaStream_t stream) {
  const auto kernel = g.channels_last ? tile_kernel<true, GradientTransform>
                                      : tile_kernel<false, GradientTransform>;
  kernel<<<blocks_for(slots_of(g) * g.out_channels), block_threads, 0, stream>>>(
      g, dy, z, g.out_channels, static_cast<int>(g.out_h), static_cast<int>(g.out_w), 0, 0);
  return cudaGetLastError();
}

cudaError_t filter_gradient_transform(const float* du, float* diff_weights,
                                      std::int64_t out_channels, std::int64_t in_channels,
                                      std::int64_t splits, bool channels_last,
                                      cudaStream_t stream) {
  filter_gradient_kernel<<<blocks_for(out_channels * in_channels), block_threads, 0, stream>>>(
      du, diff_weights, static_cast<unsigned>(out_channels), static_cast<unsigned>(in_channels),
      static_cast<unsigned>(splits), channels_last);
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::winograd
