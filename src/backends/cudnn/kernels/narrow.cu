// dnnx's tensor-core backward data kernel for convolutions with few input channels
// (kernels/narrow.hpp).
//
// Note [narrow backward data]
// The backward data pass of a convolution with C input channels is a product of M = N x input
// positions rows by K x kernel volume (the diff_dst channels at each tap whose window holds the
// position) by C columns. cuDNN's engines tile the C side by 32 or more, so with the 3 channels
// of a network's first layer most of their tensor-core work is padding: C3D's conv1a (batch 30,
// 3 x 16 x 112 x 112, 3x3x3, 64 channels) takes about 2.8 ms in f16 on an H200 with cuDNN's best
// engine and PyTorch's, where reading diff_dst once takes about 0.2 ms. This kernel tiles C by
// 8, the narrowest tensor-core product (mma.sync m16n8k16: 16 rows x 16 of the reduction x 8
// columns, f32 accumulators), at most 8 channels:
// - A warp owns 4 tiles of 16 rows, a thread 2 rows of each (the product's fragment layout); the
//   rows are input positions of one stride phase (each dim's position mod its stride), which a
//   block shares (grid.y), so that the taps that reach the phase are known to the whole block:
//   they are walked directly (the first, then every stride / gcd(stride, dilation)-th), at
//   stride 2 in 2-D a quarter of the taps, with no product of zeros and no division per tap.
//   A tile's 16 rows are consecutive positions along W, whose diff_dst positions at a tap are
//   consecutive too.
// - Issue slots, not memory, bound this kernel (Nsight Compute on an earlier form: the ALU pipe
//   the busiest, 86% L1 hits, DRAM at 4%), so the work per tap is kept to pointer steps: a
//   tile whose rows every tap along W reaches (the interior of the map) takes no check per tap;
//   elsewhere a row its tap does not reach reads a zeroed row of the workspace instead of
//   branching, and K a multiple of 32 drops the last chunk's bound.
// - For each tap that reaches the phase, and each chunk of 32 diff_dst channels, a thread loads
//   the 8 channels its fragment holds of each of its rows (one 16-byte load when K is a multiple
//   of 8 and diff_dst aligned) and its fragment of the weights (Note [narrow weight fragments]),
//   and runs two products per tile. The reduction's order within a chunk is permuted (thread
//   t's 8 consecutive channels stand for the fragment's columns 2t, 2t+1, 2t+8, 2t+9 of two
//   products): the same permutation on both operands leaves the sum a sum over the same
//   products.
// - Each diff_src element is written once by the thread that holds its accumulator, converted
//   from f32; rows without a tap get 0. The order of the sum is fixed by the shape: bitwise
//   reproducible, no atomics.
// Data reuse between taps (a diff_dst element is read once per tap whose window holds it) goes
// through L1 and L2 (Note [narrow block tiles]).
// On an H200 (docs/benchmarks.md, "Narrow-channel backward data"): C3D's conv1a in 2.08 ms
// against 2.78 for cuDNN's best candidate; the 3x3 stride-2 stems of MobileNetV2 and
// EfficientNet-B0 (0.36 against 0.42 ms), R(2+1)D's 1x7x7 stem and U-Net's first layer ahead
// too; the 7x7 stride-2 stems (DeepLabV3's, 0.83 against 0.63 ms; ResNeXt-50's, ResNet-50's
// shape) still behind cuDNN's channel-padded engines. A variant that staged each kernel depth's
// diff_dst region in shared memory ran slower than the direct loads of its day (3.86 against
// 2.90 ms on conv1a): its copy's index arithmetic cost more issue slots than it saved.
//
// Note [narrow weight fragments]
// Each thread of a warp needs, per tap and chunk, the weights of its fragment: column (channel)
// lane / 4, the 8 diff_dst channels chunk * 32 + (lane % 4) * 8 + 0..7, which in the weights'
// K, taps, C layout are kernel volume x C elements apart. A first launch rearranges the weights
// into the workspace as [tap][chunk][lane][8] (zero for channels beyond C or K), so that each
// thread's fragment is one aligned 16-byte load, a warp's 512 contiguous bytes, the same for
// every warp of the grid (L1 and L2 hits). It runs on every call: the weights change between
// calls.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/narrow.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int chunk_channels = 32;  // diff_dst channels per step: two m16n8k16 products
constexpr int warps = 4;
constexpr int tiles = 4;  // tiles of 16 rows per warp
constexpr int block_threads = warps * warp_size;
constexpr int block_segments = warps * tiles;  // segments of 16 rows (positions along W)
constexpr int min_blocks = 3;                  // per SM: 12 warps, up to 168 registers a thread
constexpr int fragment_threads = 256;
constexpr std::int64_t max_coordinate = std::int64_t{1} << 29;
constexpr std::int64_t max_phases = 65535;
constexpr std::int64_t max_fragments = std::int64_t{1} << 26;  // taps x chunks
constexpr std::int64_t max_blocks = (std::int64_t{1} << 31) - 1;  // grid.x

struct Geo {
  int in[3], out[3], k[3], s[3], p[3], d[3];
  int j[3];  // positions of a phase along each dim, at most: ceil(in / s)
  int channels, out_channels, chunks, kvol;
  int seg_w, seg_h;        // a block's segments of 16 rows along W, and its rows along H
  int seg_w_log2;
  int blocks_w, blocks_h;  // blocks along W and H of a phase
  std::int64_t batch;
};

// The grid's blocks of a phase: N x D x tiles of H x W (Note [narrow block tiles]). A double: the
// product of an unsupported shape may be beyond int64.
double blocks_of(const Geo& g) {
  return static_cast<double>(g.batch) * g.j[0] * g.blocks_h * g.blocks_w;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

Geo geo_of(const NarrowShape& shape) {
  Geo g{};
  copy_dims(g, shape);
  for (int i = 0; i < 3; ++i) g.j[i] = ceil_div(shape.input[i], shape.stride[i]);
  g.channels = shape.channels;
  g.out_channels = shape.out_channels;
  g.chunks = ceil_div(shape.out_channels, chunk_channels);
  g.kvol = shape.kernel[0] * shape.kernel[1] * shape.kernel[2];
  // Note [narrow block tiles]: 1, 2 or 4 segments along W, the rest of the block's 16 along H,
  // whichever covers the phase's plane with the fewest rows outside it (the widest on a tie).
  std::int64_t least = -1;
  for (const int log2 : {2, 1, 0}) {
    const int w = 16 << log2;
    const int h = block_segments >> log2;
    const std::int64_t covered =
        std::int64_t{ceil_div(g.j[2], w)} * w * (std::int64_t{ceil_div(g.j[1], h)} * h);
    if (least < 0 || covered < least) {
      least = covered;
      g.seg_w_log2 = log2;
    }
  }
  g.seg_w = 1 << g.seg_w_log2;
  g.seg_h = block_segments / g.seg_w;
  g.blocks_w = ceil_div(g.j[2], 16 * g.seg_w);
  g.blocks_h = ceil_div(g.j[1], g.seg_h);
  g.batch = shape.batch;
  return g;
}

__device__ __forceinline__ bool inside(int x, int size) {
  return static_cast<unsigned>(x) < static_cast<unsigned>(size);
}

// Note [narrow block tiles]
// The taps of a row read diff_dst positions around it, which the rows next to it along H and W
// read too: a block's rows are a tile of seg_h rows along H by seg_w segments of 16 along W of
// one (n, D) plane of the phase, not a run of consecutive positions, so that at each kernel
// depth the diff_dst positions its taps read ((seg_h + KH - 1) x (16 seg_w + KW - 1) at stride
// 1) can stay in L1 while the block's taps along H and W read them. Segment s of a block (s =
// warp x tiles + tile) is at row s / seg_w, column s % seg_w of its tile. The tile's shape (16 x
// 16, 8 x 32 or 4 x 64 positions) is the one that covers the phase's plane with the fewest rows
// beyond its edges, which still run their products: a 112-wide plane (C3D's, the stems') fits
// 16-wide tiles exactly and 64-wide ones with 12.5% to spare. (Neither the tiles' effect on L1
// nor this choice was measured apart from the kernel's other changes; the figures of
// docs/benchmarks.md predate the choice, with 4 x 64 tiles wherever the plane was 64 wide.)

// D += A * B on the tensor cores: A 16 x 16 (row major), B 16 x 8 (column major), f32 D.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                    unsigned a3, unsigned b0, unsigned b1);
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                            unsigned a3, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], unsigned a0, unsigned a1,
                                                   unsigned a2, unsigned a3, unsigned b0,
                                                   unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Note [narrow weight fragments]: wf[tap][chunk][lane][8] from w (K, taps, C), followed by the
// chunks x 32 zero elements the products read for rows their tap does not reach.
template <typename T>
__global__ void __launch_bounds__(fragment_threads)
    fragments_kernel(const T* __restrict__ w, Pack<T, 8>* __restrict__ wf, int channels,
                     int out_channels, int kvol, int chunks) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * fragment_threads +
                         static_cast<std::int64_t>(threadIdx.x);
  const std::int64_t fragments = static_cast<std::int64_t>(kvol) * chunks * warp_size;
  if (i >= fragments) {
    if (i < fragments + chunks * (chunk_channels / 8)) {
      Pack<T, 8> zero;
#pragma unroll
      for (int e = 0; e < 8; ++e) zero.v[e] = from_float<T>(0.0f);
      wf[i] = zero;
    }
    return;
  }
  const int lane = static_cast<int>(i % warp_size);
  const std::int64_t q = i / warp_size;
  const int chunk = static_cast<int>(q % chunks);
  const int tap = static_cast<int>(q / chunks);
  const int c = lane / 4;
  const int k0 = chunk * chunk_channels + (lane % 4) * 8;
  Pack<T, 8> out;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int k = k0 + e;
    out.v[e] = c < channels && k < out_channels
                   ? w[(static_cast<std::int64_t>(k) * kvol + tap) * channels + c]
                   : from_float<T>(0.0f);
  }
  wf[i] = out;
}

// How the products read diff_dst: 16-byte loads of whole chunks (K a multiple of 32), 16-byte
// loads with the last chunk's packs beyond K read as zero (K a multiple of 8), or element by
// element (any K, or diff_dst not 16-byte aligned).
enum class Access { whole_chunks, packs, elements };

// The 8 channels k..k+7 of a diff_dst position (zero beyond K).
template <typename T, Access A>
__device__ __forceinline__ uint4 load8(const T* p, int k, int out_channels) {
  if constexpr (A == Access::whole_chunks) {
    return __ldg(reinterpret_cast<const uint4*>(p + k));
  } else if constexpr (A == Access::packs) {
    return k < out_channels ? __ldg(reinterpret_cast<const uint4*>(p + k))
                            : make_uint4(0u, 0u, 0u, 0u);
  } else {
    Pack<T, 8> pack;
#pragma unroll
    for (int e = 0; e < 8; ++e) pack.v[e] = k + e < out_channels ? p[k + e] : from_float<T>(0.0f);
    return *reinterpret_cast<const uint4*>(&pack);
  }
}

// The taps of a phase along one dim: those t whose offset o(t) = (r + pad - t * dilation) /
// stride is exact, the first at t0 and then every `step` (stride / gcd(stride, dilation)), their
// offsets o0 and down by o_step each; none when t0 >= k. hi and lo: the largest and smallest.
struct Taps {
  int t0, step, o0, o_step, hi, lo;
};
__device__ __forceinline__ Taps taps_of(const Geo& g, int i, int r) {
  Taps taps{g.k[i], 1, 0, 0, 0, 0};
  const int n0 = r + g.p[i];
  for (int t = 0; t < g.k[i] && t < g.s[i]; ++t) {
    if ((n0 - t * g.d[i]) % g.s[i] == 0) {
      taps.t0 = t;
      break;
    }
  }
  if (taps.t0 >= g.k[i]) return taps;
  taps.step = 1;
  while (taps.step * g.d[i] % g.s[i] != 0) ++taps.step;  // at most stride iterations
  taps.o0 = (n0 - taps.t0 * g.d[i]) / g.s[i];
  taps.o_step = taps.step * g.d[i] / g.s[i];
  taps.hi = taps.o0;
  taps.lo = taps.o0 - (g.k[i] - 1 - taps.t0) / taps.step * taps.o_step;
  return taps;
}

// Note [narrow backward data]. `zeros`: at least chunks x 32 zero elements, read for the rows a
// tap does not reach.
template <typename T, Access A>
__global__ void __launch_bounds__(block_threads, min_blocks)
    bwd_data_kernel(Geo g, const T* __restrict__ dy, const uint4* __restrict__ wf,
                    const T* __restrict__ zeros, T* __restrict__ dx) {
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const int warp = static_cast<int>(threadIdx.x) / warp_size;
  const int group = lane / 4;  // the fragment's row (and, in B and D, its column)
  const int quad = lane % 4;
  int phase = static_cast<int>(blockIdx.y);
  const int rw = phase % g.s[2];
  phase /= g.s[2];
  const int rh = phase % g.s[1];
  const int rd = phase / g.s[1];
  // The block's tile (Note [narrow block tiles]): sample n, plane z, tile (bh, bw) of the phase.
  unsigned b = blockIdx.x;
  const int bw = static_cast<int>(b % static_cast<unsigned>(g.blocks_w));
  b /= static_cast<unsigned>(g.blocks_w);
  const int bh = static_cast<int>(b % static_cast<unsigned>(g.blocks_h));
  b /= static_cast<unsigned>(g.blocks_h);
  const int z = static_cast<int>(b % static_cast<unsigned>(g.j[0]));
  const int n = static_cast<int>(b / static_cast<unsigned>(g.j[0]));
  const std::int64_t K = g.out_channels;
  // Per tile: its phase row y, the x of its first row, which of the thread's two rows (group,
  // group + 8) are positions of the phase, and its diff_dst offset at a tap shift of 0.
  int ty[tiles], tx[tiles], rows_in[tiles];
  std::int64_t base[tiles];
#pragma unroll
  for (int t = 0; t < tiles; ++t) {
    const int segment = warp * tiles + t;
    ty[t] = bh * g.seg_h + (segment >> g.seg_w_log2);
    tx[t] = (bw * g.seg_w + (segment & (g.seg_w - 1))) * 16;
    const bool y_in = ty[t] < g.j[1] && ty[t] * g.s[1] + rh < g.in[1];
    rows_in[t] = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int x = tx[t] + group + 8 * h;
      if (y_in && x < g.j[2] && x * g.s[2] + rw < g.in[2]) rows_in[t] |= 1 << h;
    }
    base[t] = ((static_cast<std::int64_t>(n) * g.out[0] + z) * g.out[1] + ty[t]) * g.out[2] * K +
              static_cast<std::int64_t>(tx[t] + group) * K;
  }
  float acc[tiles][4];
#pragma unroll
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;
  }
  const Taps d_taps = taps_of(g, 0, rd);
  const Taps h_taps = taps_of(g, 1, rh);
  const Taps w_taps = taps_of(g, 2, rw);
  // Pointer steps between consecutive taps of the phase along H and W.
  const std::int64_t h_step = static_cast<std::int64_t>(h_taps.o_step) * g.out[2] * K;
  const std::int64_t w_step = static_cast<std::int64_t>(w_taps.o_step) * K;
  if (z * g.s[0] + rd < g.in[0]) {
    int od = d_taps.o0;
    for (int td = d_taps.t0; td < g.k[0]; td += d_taps.step, od -= d_taps.o_step) {
      if (!inside(z + od, g.out[0])) continue;  // the same for the whole block
      // Per tile at the first tap along H: its rows' pointers at the first tap along W.
      const T* row0[tiles];
#pragma unroll
      for (int t = 0; t < tiles; ++t) {
        row0[t] =
            dy + base[t] +
            ((static_cast<std::int64_t>(od) * g.out[1] + h_taps.o0) * g.out[2] + w_taps.o0) * K;
      }
      int oh = h_taps.o0;
      for (int th = h_taps.t0; th < g.k[1]; th += h_taps.step, oh -= h_taps.o_step) {
        // Per tile at this (td, th): which rows a tap may reach, and whether every tap along W
        // reaches both rows (no check per tap then).
        int live[tiles];  // bit h: row h reachable at this (td, th)
        bool whole[tiles];
#pragma unroll
        for (int t = 0; t < tiles; ++t) {
          live[t] = inside(ty[t] + oh, g.out[1]) ? rows_in[t] : 0;
          whole[t] = live[t] == 3 && tx[t] + w_taps.lo >= 0 && tx[t] + 15 + w_taps.hi < g.out[2];
        }
        int ow = w_taps.o0;
        const T* at[tiles];
#pragma unroll
        for (int t = 0; t < tiles; ++t) at[t] = row0[t];
#pragma unroll 1
        for (int tw = w_taps.t0; tw < g.k[2]; tw += w_taps.step, ow -= w_taps.o_step) {
          const T* p[tiles][2];
#pragma unroll
          for (int t = 0; t < tiles; ++t) {
            if (whole[t]) {
              p[t][0] = at[t];
              p[t][1] = at[t] + 8 * K;
            } else {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const bool ok = (live[t] >> h & 1) && inside(tx[t] + group + 8 * h + ow, g.out[2]);
                p[t][h] = ok ? at[t] + 8 * h * K : zeros;
              }
            }
            at[t] -= w_step;
          }
          const int tap = (td * g.k[1] + th) * g.k[2] + tw;
          const uint4* frag = wf + static_cast<std::int64_t>(tap) * g.chunks * warp_size + lane;
#pragma unroll 1
          for (int chunk = 0; chunk < g.chunks; ++chunk) {
            const uint4 bf = __ldg(frag + chunk * warp_size);
            const int k = chunk * chunk_channels + quad * 8;
            uint4 lo[tiles], hi[tiles];
#pragma unroll
            for (int t = 0; t < tiles; ++t) {
              lo[t] = load8<T, A>(p[t][0], k, g.out_channels);
              hi[t] = load8<T, A>(p[t][1], k, g.out_channels);
            }
#pragma unroll
            for (int t = 0; t < tiles; ++t) {
              mma<T>(acc[t], lo[t].x, hi[t].x, lo[t].y, hi[t].y, bf.x, bf.y);
              mma<T>(acc[t], lo[t].z, hi[t].z, lo[t].w, hi[t].w, bf.z, bf.w);
            }
          }
        }
#pragma unroll
        for (int t = 0; t < tiles; ++t) row0[t] -= h_step;
      }
    }
  }

  // D's fragment: rows group and group + 8, columns (channels) 2 * quad and 2 * quad + 1.
  const int c0 = 2 * quad;
  if (c0 >= g.channels) return;
  const int id = z * g.s[0] + rd;
#pragma unroll
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!(rows_in[t] >> h & 1)) continue;
      const int ih = ty[t] * g.s[1] + rh;
      const int iw = (tx[t] + group + 8 * h) * g.s[2] + rw;
      T* out = dx +
               (((static_cast<std::int64_t>(n) * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw) *
                   g.channels +
               c0;
      out[0] = from_float<T>(acc[t][2 * h]);
      if (c0 + 1 < g.channels) out[1] = from_float<T>(acc[t][2 * h + 1]);
    }
  }
}

template <typename T>
cudaError_t bwd_data_typed(const NarrowShape& shape, const void* diff_dst, const void* weights,
                           void* diff_src, void* workspace, cudaStream_t stream) {
  const Geo g = geo_of(shape);
  const std::int64_t fragments = static_cast<std::int64_t>(g.kvol) * g.chunks * warp_size;
  const std::int64_t packs = fragments + g.chunks * (chunk_channels / 8);  // and the zeros
  fragments_kernel<T>
      <<<static_cast<unsigned>((packs + fragment_threads - 1) / fragment_threads), fragment_threads,
         0, stream>>>(static_cast<const T*>(weights), static_cast<Pack<T, 8>*>(workspace),
                      g.channels, g.out_channels, g.kvol, g.chunks);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned>(blocks_of(g)),
                  static_cast<unsigned>(g.s[0] * g.s[1] * g.s[2]));
  const bool aligned = reinterpret_cast<std::uintptr_t>(diff_dst) % 16 == 0;
  const auto* dy = static_cast<const T*>(diff_dst);
  const auto* wf = static_cast<const uint4*>(workspace);
  const auto* zeros = reinterpret_cast<const T*>(wf + fragments);
  auto* dx = static_cast<T*>(diff_src);
  if (aligned && g.out_channels % chunk_channels == 0)
    bwd_data_kernel<T, Access::whole_chunks>
        <<<grid, block_threads, 0, stream>>>(g, dy, wf, zeros, dx);
  else if (aligned && g.out_channels % 8 == 0)
    bwd_data_kernel<T, Access::packs><<<grid, block_threads, 0, stream>>>(g, dy, wf, zeros, dx);
  else
    bwd_data_kernel<T, Access::elements><<<grid, block_threads, 0, stream>>>(g, dy, wf, zeros, dx);
  return cudaGetLastError();
}

}  // namespace

const char* narrow_unsupported(const NarrowShape& shape) {
  if (shape.channels < 1 || shape.channels > narrow_max_channels)
    return "the narrow-channel kernel produces at most 8 input channels";
  std::int64_t phases = 1;
  for (int i = 0; i < 3; ++i) {
    for (const std::int64_t v :
         {std::int64_t{shape.input[i]}, std::int64_t{shape.output[i]},
          std::int64_t{shape.kernel[i]}, std::int64_t{shape.stride[i]},
          std::int64_t{shape.pad_before[i]}, std::int64_t{shape.dilation[i]}}) {
      if (v >= max_coordinate)
        return "spatial sizes, strides, paddings or dilations of 2^29 or more";
    }
    phases *= shape.stride[i];
  }
  if (phases > max_phases) return "a stride product (stride phases) beyond 65535";
  const std::int64_t taps = std::int64_t{shape.kernel[0]} * shape.kernel[1] * shape.kernel[2];
  const std::int64_t chunks =
      (std::int64_t{shape.out_channels} + chunk_channels - 1) / chunk_channels;
  if (taps * chunks >= max_fragments)
    return "kernel volume x ceil(out_channels / 32) of 2^26 or more";
  if (blocks_of(geo_of(shape)) > max_blocks)
    return "N x input positions beyond the grid's 2^31 blocks";
  return nullptr;
}

std::size_t narrow_bwd_data_workspace_bytes(const NarrowShape& shape) {
  const Geo g = geo_of(shape);
  const std::size_t fragments =
      static_cast<std::size_t>(g.kvol) * static_cast<std::size_t>(g.chunks) * warp_size;
  return (fragments + static_cast<std::size_t>(g.chunks) * (chunk_channels / 8)) * sizeof(uint4);
}

cudaError_t narrow_bwd_data(const NarrowShape& shape, const void* diff_dst, const void* weights,
                            void* diff_src, void* workspace, cudaStream_t stream) {
  if (narrow_unsupported(shape) != nullptr) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;  // diff_src is empty
  switch (shape.type) {
    case NarrowType::f16:
      return bwd_data_typed<__half>(shape, diff_dst, weights, diff_src, workspace, stream);
    case NarrowType::bf16:
      return bwd_data_typed<__nv_bfloat16>(shape, diff_dst, weights, diff_src, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels
