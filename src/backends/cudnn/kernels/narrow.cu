// dnnx's tensor-core backward data and backward weights kernels for convolutions with few input
// channels (kernels/narrow.hpp).
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
// On an H200 (docs/benchmarks.md, "Narrow-channel backward data"): ahead of cuDNN's best
// candidate on C3D's conv1a, the 3x3 stride-2 stems of MobileNetV2 and EfficientNet-B0, R(2+1)D's
// 1x7x7 stem and U-Net's first layer; a few percent behind cuDNN's channel-padded engines on the
// 7x7 stride-2 stems (DeepLabV3's, ResNeXt-50's). A variant that staged each kernel depth's
// diff_dst region in shared memory ran slower than the direct loads of its day (3.86 against
// 2.90 ms on conv1a): its copy's index arithmetic cost more issue slots than it saved. Where a
// phase reaches few taps, a block's fixed work weighs as much as its products: Notes [narrow
// phase taps] and [narrow rounds].
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
#include "backends/cudnn/kernels/splits.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

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
constexpr std::int64_t target_blocks = 4096;                      // Note [narrow rounds]
constexpr int light_work = 8;  // taps x chunks a phase, on average (the same)

struct Geo {
  int in[3], out[3], k[3], s[3], p[3], d[3];
  int j[3];  // positions of a phase along each dim, at most: ceil(in / s)
  int channels, out_channels, chunks, kvol;
  int seg_w, seg_h;        // a block's segments of 16 rows along W, and its rows along H
  int seg_w_log2;
  int blocks_w, blocks_h;  // the phase's tiles along W and H
  int rounds, groups_w;    // tiles along W a block runs, one after the other; blocks along W
  int phases;              // s[0] x s[1] x s[2]
  std::int64_t batch;
};

// The grid's blocks: N x D x tiles along H x groups of tiles along W (Note [narrow rounds]) x
// phases, the phase the fastest, so that the phases of a tile, which read the same diff_dst, run
// close in time and find it in L2. A double: the product of an unsupported shape may be beyond
// int64.
double blocks_of(const Geo& g) {
  return static_cast<double>(g.batch) * g.j[0] * g.blocks_h * g.groups_w * g.phases;
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
  g.phases = static_cast<int>(std::min<std::int64_t>(
      std::int64_t{shape.stride[0]} * shape.stride[1] * shape.stride[2], max_phases + 1));
  g.batch = shape.batch;
  // Note [narrow rounds]: where a phase reaches few taps x chunks, the most tiles a block (up to
  // 8) that leave the grid target_blocks.
  g.rounds = 1;
  g.groups_w = g.blocks_w;
  const bool light = std::int64_t{g.kvol} * g.chunks <= std::int64_t{light_work} * g.phases;
  for (const int rounds : {8, 4, 2}) {
    if (!light) break;
    const int groups = ceil_div(g.blocks_w, rounds);
    const double blocks = static_cast<double>(g.batch) * g.j[0] * g.blocks_h * groups * g.phases;
    if (rounds <= g.blocks_w && blocks >= static_cast<double>(target_blocks)) {
      g.rounds = ceil_div(g.blocks_w, groups);  // the same tiles in fewer rounds where it can
      g.groups_w = groups;
      break;
    }
  }
  return g;
}

__device__ __forceinline__ bool inside(int x, int size) {
  return static_cast<unsigned>(x) < static_cast<unsigned>(size);
}

// Note [narrow rounds]
// A block's fixed work (its phase and tile worked out from its index, the phase's taps read,
// the lanes' roles) costs as much as its products where a phase reaches few taps with few
// diff_dst channels (a stride-2 3x3 stem with 32: one to four taps of one chunk), so there a
// block runs up to 8 tiles along W one after the other, each with its own accumulators and
// stores, as many as leave the grid at least target_blocks blocks (about 10 waves on an H200 at
// 3 blocks an SM). The groups' tiles are spread evenly (7 tiles: 4 + 3). "Few": kernel volume
// x chunks at most light_work per phase on average: measured on an H200 (docs/benchmarks.md,
// "Narrow-channel backward data"), the rounds took MobileNetV2's stem (2.25 a phase) faster and
// the layers of 18 or more (C3D's conv1a, the 7x7 stride-2 stems) a little slower, so those run
// one tile a block. Each output element is still summed by one thread in the same order: the
// rounds do not change the result.

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

// The workspace of the backward data pass, in 16-byte packs: the weights' fragments, the zeros,
// then the taps of every phase (Note [narrow phase taps]).
struct DataWorkspace {
  std::int64_t fragments, zeros, tap_packs;
};
DataWorkspace data_workspace_of(const Geo& g) {
  DataWorkspace ws{};
  ws.fragments = std::int64_t{g.kvol} * g.chunks * warp_size;
  ws.zeros = std::int64_t{g.chunks} * (chunk_channels / 8);
  const std::int64_t entries = std::int64_t{g.s[0]} + g.s[1] + g.s[2];
  ws.tap_packs = (entries * static_cast<std::int64_t>(sizeof(Taps)) + 15) / 16;
  return ws;
}

// Note [narrow phase taps]
// Which taps of a dim reach a phase depends on the residue alone (the position mod the stride),
// so the launch that rearranges the weights also tabulates taps_of() for every residue of every
// dim (strides s0 + s1 + s2 entries, dim 0's first), and a block of the main kernel reads its
// phase's three instead of working them out: a dozen integer divisions and remainders by the
// shape's values, which were most of a block's instructions where a phase reaches few taps (a
// stride-2 3x3 layer: one to four taps per phase).

// Note [narrow weight fragments]: wf[tap][chunk][lane][8] from w (K, taps, C), followed by the
// chunks x 32 zero elements the products read for rows their tap does not reach, then the taps
// of every phase (Note [narrow phase taps]).
template <typename T>
__global__ void __launch_bounds__(fragment_threads)
    fragments_kernel(Geo g, const T* __restrict__ w, Pack<T, 8>* __restrict__ wf,
                     Taps* __restrict__ taps) {
  wait_for_prior_grids();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * fragment_threads +
                         static_cast<std::int64_t>(threadIdx.x);
  const std::int64_t fragments = static_cast<std::int64_t>(g.kvol) * g.chunks * warp_size;
  const std::int64_t zeros = fragments + g.chunks * (chunk_channels / 8);
  if (i >= zeros) {
    int e = static_cast<int>(i - zeros);  // below s0 + s1 + s2 + fragment_threads
    for (int dim = 0; dim < 3; ++dim) {
      if (e < g.s[dim]) {
        taps[i - zeros] = taps_of(g, dim, e);
        return;
      }
      e -= g.s[dim];
    }
    return;
  }
  if (i >= fragments) {
    Pack<T, 8> zero;
#pragma unroll
    for (int e = 0; e < 8; ++e) zero.v[e] = from_float<T>(0.0f);
    wf[i] = zero;
    return;
  }
  const int lane = static_cast<int>(i % warp_size);
  const std::int64_t q = i / warp_size;
  const int chunk = static_cast<int>(q % g.chunks);
  const int tap = static_cast<int>(q / g.chunks);
  const int c = lane / 4;
  const int k0 = chunk * chunk_channels + (lane % 4) * 8;
  Pack<T, 8> out;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int k = k0 + e;
    out.v[e] = c < g.channels && k < g.out_channels
                   ? w[(static_cast<std::int64_t>(k) * g.kvol + tap) * g.channels + c]
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

// Note [narrow backward data]. `zeros`: at least chunks x 32 zero elements, read for the rows a
// tap does not reach; `phase_taps`: Note [narrow phase taps].
template <typename T, Access A>
__global__ void __launch_bounds__(block_threads, min_blocks)
    bwd_data_kernel(Geo g, const T* __restrict__ dy, const uint4* __restrict__ wf,
                    const T* __restrict__ zeros, const Taps* __restrict__ phase_taps,
                    T* __restrict__ dx) {
  wait_for_prior_grids();
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const int warp = static_cast<int>(threadIdx.x) / warp_size;
  const int group = lane / 4;  // the fragment's row (and, in B and D, its column)
  const int quad = lane % 4;
  // The block's phase (the fastest, blocks_of()) and tiles (Note [narrow block tiles]): sample n,
  // plane z, the row of tiles bh of the phase, and its tiles bw of group gw (Note [narrow
  // rounds]).
  unsigned b = blockIdx.x;
  unsigned phase = b % static_cast<unsigned>(g.phases);
  b /= static_cast<unsigned>(g.phases);
  const int rw = static_cast<int>(phase % static_cast<unsigned>(g.s[2]));
  phase /= static_cast<unsigned>(g.s[2]);
  const int rh = static_cast<int>(phase % static_cast<unsigned>(g.s[1]));
  const int rd = static_cast<int>(phase / static_cast<unsigned>(g.s[1]));
  const int gw = static_cast<int>(b % static_cast<unsigned>(g.groups_w));
  b /= static_cast<unsigned>(g.groups_w);
  const int bh = static_cast<int>(b % static_cast<unsigned>(g.blocks_h));
  b /= static_cast<unsigned>(g.blocks_h);
  const int z = static_cast<int>(b % static_cast<unsigned>(g.j[0]));
  const int n = static_cast<int>(b / static_cast<unsigned>(g.j[0]));
  const std::int64_t K = g.out_channels;
  const Taps d_taps = phase_taps[rd];
  const Taps h_taps = phase_taps[g.s[0] + rh];
  const Taps w_taps = phase_taps[g.s[0] + g.s[1] + rw];
  // Pointer steps between consecutive taps of the phase along H and W.
  const std::int64_t h_step = static_cast<std::int64_t>(h_taps.o_step) * g.out[2] * K;
  const std::int64_t w_step = static_cast<std::int64_t>(w_taps.o_step) * K;
  const bool z_in = z * g.s[0] + rd < g.in[0];
  // Per tile: its phase row y, and the offset along W of its first row within the block's tile.
  int ty[tiles], sx[tiles];
#pragma unroll
  for (int t = 0; t < tiles; ++t) {
    const int segment = warp * tiles + t;
    ty[t] = bh * g.seg_h + (segment >> g.seg_w_log2);
    sx[t] = (segment & (g.seg_w - 1)) * 16 + group;
  }
  // The rows of diff_dst's plane (n, z) and of diff_src's plane (n, z x stride + rd).
  const std::int64_t dy_plane = (static_cast<std::int64_t>(n) * g.out[0] + z) * g.out[1];
  const std::int64_t dx_plane =
      (static_cast<std::int64_t>(n) * g.in[0] + z * g.s[0] + rd) * g.in[1];
  const int bw_end = min(g.blocks_w, (gw + 1) * g.rounds);
  for (int bw = gw * g.rounds; bw < bw_end; ++bw) {
    // Per tile: the x of the thread's first row, which of its two rows (group, group + 8) are
    // positions of the phase, and its diff_dst offset at a tap shift of 0.
    int tx[tiles], rows_in[tiles];
    std::int64_t base[tiles];
#pragma unroll
    for (int t = 0; t < tiles; ++t) {
      tx[t] = bw * g.seg_w * 16 + sx[t];
      const bool y_in = z_in && ty[t] < g.j[1] && ty[t] * g.s[1] + rh < g.in[1];
      rows_in[t] = 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int x = tx[t] + 8 * h;
        if (y_in && x < g.j[2] && x * g.s[2] + rw < g.in[2]) rows_in[t] |= 1 << h;
      }
      base[t] = ((dy_plane + ty[t]) * g.out[2] + tx[t]) * K;
    }
    float acc[tiles][4];
#pragma unroll
    for (int t = 0; t < tiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][e] = 0.0f;
    }
    int od = d_taps.o0;
    for (int td = d_taps.t0; z_in && td < g.k[0]; td += d_taps.step, od -= d_taps.o_step) {
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
          whole[t] = live[t] == 3 && tx[t] - group + w_taps.lo >= 0 &&
                     tx[t] - group + 15 + w_taps.hi < g.out[2];
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
                const bool ok = (live[t] >> h & 1) && inside(tx[t] + 8 * h + ow, g.out[2]);
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

    // D's fragment: rows group and group + 8, columns (channels) 2 * quad and 2 * quad + 1.
    const int c0 = 2 * quad;
    if (c0 < g.channels) {
#pragma unroll
      for (int t = 0; t < tiles; ++t) {
        if (rows_in[t] == 0) continue;  // then tx x stride may be beyond the input, and int
        T* out = dx +
                 ((dx_plane + ty[t] * g.s[1] + rh) * g.in[2] + tx[t] * g.s[2] + rw) * g.channels +
                 c0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!(rows_in[t] >> h & 1)) continue;
          T* o = out + static_cast<std::int64_t>(8 * h) * g.s[2] * g.channels;
          o[0] = from_float<T>(acc[t][2 * h]);
          if (c0 + 1 < g.channels) o[1] = from_float<T>(acc[t][2 * h + 1]);
        }
      }
    }
  }
}

template <typename T>
cudaError_t bwd_data_typed(const Geo& g, const void* diff_dst, const void* weights, void* diff_src,
                           void* workspace, const Queue& queue) {
  const DataWorkspace ws = data_workspace_of(g);
  auto* wf = static_cast<uint4*>(workspace);
  auto* taps = reinterpret_cast<Taps*>(wf + ws.fragments + ws.zeros);
  // One thread per pack of fragments and zeros and per entry of the taps' table.
  const std::int64_t items = ws.fragments + ws.zeros + g.s[0] + g.s[1] + g.s[2];
  if (const cudaError_t status =
          launch(queue, fragments_kernel<T>,
                 dim3(static_cast<unsigned>((items + fragment_threads - 1) / fragment_threads)),
                 dim3(fragment_threads), 0, g, static_cast<const T*>(weights),
                 reinterpret_cast<Pack<T, 8>*>(wf), taps);
      status != cudaSuccess)
    return status;
  const dim3 grid(static_cast<unsigned>(blocks_of(g)));
  const bool aligned = reinterpret_cast<std::uintptr_t>(diff_dst) % 16 == 0;
  const auto* dy = static_cast<const T*>(diff_dst);
  const auto* zeros = reinterpret_cast<const T*>(wf + ws.fragments);
  auto* dx = static_cast<T*>(diff_src);
  const auto kernel = aligned && g.out_channels % chunk_channels == 0
                          ? bwd_data_kernel<T, Access::whole_chunks>
                      : aligned && g.out_channels % 8 == 0 ? bwd_data_kernel<T, Access::packs>
                                                           : bwd_data_kernel<T, Access::elements>;
  return launch(queue, kernel, grid, dim3(block_threads), 0, g, dy, wf, zeros, taps, dx);
}

// Why the kernels cannot run `shape` for any direction: the channel count and 32-bit coordinates.
const char* dims_unsupported(const NarrowShape& shape) {
  if (shape.channels < 1 || shape.channels > narrow_max_channels)
    return "the narrow-channel kernel takes at most 8 input channels";
  for (int i = 0; i < 3; ++i) {
    for (const std::int64_t v :
         {std::int64_t{shape.input[i]}, std::int64_t{shape.output[i]},
          std::int64_t{shape.kernel[i]}, std::int64_t{shape.stride[i]},
          std::int64_t{shape.pad_before[i]}, std::int64_t{shape.dilation[i]}}) {
      if (v >= max_coordinate)
        return "spatial sizes, strides, paddings or dilations of 2^29 or more";
    }
  }
  // The input rows' element offsets (the tiles' copies) are ints.
  if (std::int64_t{shape.input[2]} * shape.channels >= (std::int64_t{1} << 31))
    return "an input row (W x C) of 2^31 elements or more";
  return nullptr;
}

// Why the backward data kernel cannot run a shape, in two parts as the weight gradient's: the
// shape's own bounds (then geo_of() may be computed), and its geometry's grid.
const char* data_shape_unsupported(const NarrowShape& shape) {
  if (const char* reason = dims_unsupported(shape)) return reason;
  std::int64_t phases = 1;
  for (int i = 0; i < 3; ++i) phases *= shape.stride[i];
  if (phases > max_phases) return "a stride product (stride phases) beyond 65535";
  const std::int64_t taps = std::int64_t{shape.kernel[0]} * shape.kernel[1] * shape.kernel[2];
  const std::int64_t chunks =
      (std::int64_t{shape.out_channels} + chunk_channels - 1) / chunk_channels;
  if (taps * chunks >= max_fragments)
    return "kernel volume x ceil(out_channels / 32) of 2^26 or more";
  return nullptr;
}
const char* data_geo_unsupported(const Geo& g) {
  if (blocks_of(g) > max_blocks) return "N x input positions beyond the grid's 2^31 blocks";
  return nullptr;
}

// ---- backward weights ---------------------------------------------------------------------------

// Note [narrow weight gradients]
// The weight gradient of a convolution with C <= 8 input channels is a product of K rows (the
// diff_dst channels) by J = kernel volume x C columns (a column per tap and channel, in the
// weights' K, taps, C order), reduced over N x every output position. cuDNN's engines pad C to
// their tile's channel block: C3D's conv1a (3 channels, 3x3x3, 64 outputs, batch 30) takes about
// 1.2 ms with cuDNN's best engine, where reading its 770 MB of diff_dst once takes about 0.2.
// This kernel runs mma.sync m16n8k16 (f32 accumulators) with the positions as the reduction:
// - A unit of work is a segment of 16, 32 or 64 consecutive output positions along W of one
//   output row (n, od, oh). The block copies the segment's diff_dst (positions x its 64
//   channels, zero beyond K and beyond the row) to shared memory, and next to it the input rows
//   the segment's taps read: per (kd, kh) of the block's columns, span = (seg - 1) x stride +
//   (KW - 1) x dilation + 1 positions x C channels, zero outside the input. Two stages: the
//   asynchronous copies of the next unit run under the products of this one.
// - A (16 channels x 16 positions) is an ldmatrix.trans of the positions' diff_dst rows. B (16
//   positions x 8 columns): each thread gathers its column's 4 elements from the input rows,
//   column (tap, c) at (row of (kd, kh)) x pitch + kw x dilation x C + c for position 0 and
//   stride x C further per position. The columns pack the C channels of consecutive taps, so no
//   product is spent on a padded channel (C3D's 81 columns are 11 tiles of 8; C padded to 8
//   would take 27).
// - A block owns up to 64 diff_dst channels (grid.z) and up to 16 column tiles (grid.y, the
//   tiles shared evenly by the blocks). Its 4 warps split the tiles, up to 4 each; when one or
//   two warps hold them all, the others take the segment's other 16-position steps, and the warps
//   of a column group add their sums in warp order at the end. The segment's length is the one
//   with the least cost of padded positions and per-unit work (weighs a unit as 16 positions),
//   among those whose input rows fit the tile.
// - grid.x splits the units (N x output rows x segments) into contiguous ranges, their count a
//   function of the shape alone; a block steps through its range without a division. Each
//   block writes its f32 partial sums to the workspace and reduce_splits() adds them in a fixed
//   order: bitwise reproducible, no atomics.
// On an H200 (docs/benchmarks.md, "dnnx's narrow-channel weight gradient"): ahead of cuDNN's best
// candidate on C3D's conv1a, the 3x3 stride-2 stems and ResNet-50's 7x7 stride-2 conv1; behind
// cuDNN's legacy algorithm 1 on DeepLabV3's 513-wide conv1, whose odd rows are copied element by
// element (Note [narrow input words]). Issue slots bound it, not memory (Nsight Compute: DRAM at
// 13%), so the copies are kept to a few instructions each (Note [narrow tile copies]); up to four
// stages in flight instead of two ran slower on the 3-channel layers.
//
// Note [narrow input words]
// An input row of C channels starts at an odd element whenever its first column times C is odd
// (C = 3, any odd column), too misaligned for the asynchronous copies' 4-byte words. When W x C
// is even (and src 4-byte aligned) every row of the tensor starts at an even element, so the
// tile's row copies the words from its first element rounded down to even: the row then begins
// one element early when that was odd (`shift`, the same for every row of a unit, added to the
// products' pointer), and a word is either wholly inside the row or wholly outside it (zero
// filled), since the row's ends are even too. When W x C is a multiple of 8 (and src 16-byte
// aligned: the stems' 224 x 3, C3D's 112 x 3) the same holds for 16-byte packs, the first
// element rounded down to a multiple of 8 and `shift` up to 7: a quarter of the copies of words,
// which were most of the kernel's instructions on the 3-channel stems. Otherwise the rows are
// copied element by element. A tile row's pitch leaves room for the shift: span x C + 7 halves
// rounded up to a multiple of 8, so that each row starts 16-byte aligned.
namespace wg {
constexpr int threads = 128;
constexpr int warps = threads / warp_size;
constexpr int channels = 64;  // diff_dst channels per block: 4 row tiles of 16
constexpr int row_tiles = channels / 16;
constexpr int warp_tiles = 4;                    // column tiles of 8 a warp holds at most
constexpr int block_tiles = warps * warp_tiles;  // 128 columns
constexpr int max_segment = 64;
constexpr int pitch = channels + 8;  // halves per position of the diff_dst tile (see below)
constexpr int stage_y = max_segment * pitch;  // the diff_dst tile's halves
constexpr int input_halves = 6144;  // the input rows' tile: 12 KiB (two stages within 48 KiB)
constexpr int blocks_per_sm = 4;    // 16 warps an SM: up to 128 registers a thread
constexpr std::int64_t target_blocks = 512;  // about one wave of blocks on a large GPU
constexpr std::int64_t min_units = 4;        // units per split at least
constexpr std::int64_t max_workspace = std::int64_t{256} << 20;  // partial sums' bytes at most
constexpr std::int64_t max_columns = std::int64_t{1} << 24;
constexpr std::int64_t max_grid_yz = 65535;
constexpr std::int64_t max_units = std::int64_t{1} << 40;  // units x splits within int64
}  // namespace wg
// The diff_dst tile's rows are 144 bytes apart, so the 8 rows of an 8x8 matrix ldmatrix reads
// start in 8 distinct 4-bank groups: no bank conflict.

struct WGeo {
  int in[3], out[3], k[3], s[3], p[3], d[3];
  int channels, out_channels, columns;
  int seg, segs, span;  // positions per segment, segments per output row, input positions read
  int block_cols;       // columns per block (a multiple of 8)
  int col_groups;       // warps along the columns: 1, 2 or 4
  int warp_tiles;       // column tiles per warp
  int pos_groups;       // warps along the segment's steps: 4 / col_groups
  int rows;             // input rows (kd, kh) a block's tile holds at most
  int x_pitch;          // halves per input row in the tile (Note [narrow input words])
  int stage_halves;     // a stage: the diff_dst tile, then the input rows
  int col_blocks, k_blocks, splits;
  std::int64_t units;
  std::int64_t batch;

  int shared_bytes() const {
    const int tiles = 2 * stage_halves * 2 + rows * 16;  // and the rows' RowOffsets
    const int sums = (pos_groups - 1) * col_groups * warp_size *
                     (wg::row_tiles * wg::warp_tiles * 4) * static_cast<int>(sizeof(float));
    return std::max(tiles, sums);
  }
};

// The input rows (kd, kh) the columns [lo, hi) read: pairs lo / C / KW to (hi - 1) / C / KW.
__host__ __device__ inline int rows_of(int lo, int hi, int channels, int kw) {
  return (hi - 1) / channels / kw - lo / channels / kw + 1;
}

// A unit's segment (Note [narrow weight gradients]): of 64, 32 and 16 output positions, among
// those whose g.rows input rows fit `input_halves` (Note [narrow input words] for their pitch),
// the one with the least cost of padded positions and per-unit work (a unit weighs as 16
// positions). Sets seg (0 when none fits), span, segs and x_pitch.
void choose_segment(WGeo& g, int input_halves) {
  std::int64_t least = -1;
  for (const int seg : {64, 32, 16}) {
    const std::int64_t span =
        std::int64_t{seg - 1} * g.s[2] + std::int64_t{g.k[2] - 1} * g.d[2] + 1;
    const std::int64_t pitch = (span * g.channels + 7 + 7) / 8 * 8;
    if (std::int64_t{g.rows} * pitch > input_halves) continue;
    const std::int64_t segs = (std::int64_t{g.out[2]} + seg - 1) / seg;
    const std::int64_t cost = segs * (seg + 16);
    if (least < 0 || cost < least) {
      least = cost;
      g.seg = seg;
      g.span = static_cast<int>(span);
      g.segs = static_cast<int>(segs);
      g.x_pitch = static_cast<int>(pitch);
    }
  }
}

// The geometry of a shape that passed dims_unsupported() with J below wg::max_columns; seg is 0
// when no segment's input rows fit the tile.
WGeo weights_geo(const NarrowShape& shape) {
  WGeo g{};
  copy_dims(g, shape);
  g.channels = shape.channels;
  g.out_channels = shape.out_channels;
  g.batch = shape.batch;
  g.columns = shape.kernel[0] * shape.kernel[1] * shape.kernel[2] * shape.channels;
  const int tiles = ceil_div(g.columns, 8);
  g.col_blocks = ceil_div(tiles, wg::block_tiles);
  const int block_tiles = ceil_div(tiles, g.col_blocks);
  g.block_cols = block_tiles * 8;
  g.col_groups = block_tiles <= wg::warp_tiles ? 1 : block_tiles <= 2 * wg::warp_tiles ? 2 : 4;
  g.warp_tiles = ceil_div(block_tiles, g.col_groups);
  g.pos_groups = wg::warps / g.col_groups;
  for (int b = 0; b < g.col_blocks; ++b) {
    const int lo = b * g.block_cols;
    g.rows =
        std::max(g.rows, rows_of(lo, std::min(g.columns, lo + g.block_cols), g.channels, g.k[2]));
  }
  choose_segment(g, wg::input_halves);
  // Stages start 16-byte aligned.
  g.stage_halves = (wg::stage_y + g.rows * g.x_pitch + 7) / 8 * 8;
  g.units = g.batch * g.out[0] * g.out[1] * g.segs;
  g.k_blocks = static_cast<int>(std::min<std::int64_t>(
      (std::int64_t{g.out_channels} + wg::channels - 1) / wg::channels, wg::max_grid_yz + 1));
  const std::int64_t sums_bytes =
      std::int64_t{g.out_channels} * g.columns * static_cast<std::int64_t>(sizeof(float));
  std::int64_t splits = (wg::target_blocks + std::int64_t{g.col_blocks} * g.k_blocks - 1) /
                        (std::int64_t{g.col_blocks} * g.k_blocks);
  splits = std::min(splits, (g.units + wg::min_units - 1) / wg::min_units);
  splits = std::min(splits, wg::max_workspace / std::max<std::int64_t>(sums_bytes, 1));
  g.splits = static_cast<int>(std::max<std::int64_t>(splits, 1));
  return g;
}

// Four 8x8 matrices of 16-bit elements, transposed: lanes 8i..8i+7 give the rows of matrix i;
// lane l receives elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) of each.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The unit a block works on: sample n, output plane od, row oh, segment sg (the fastest).
struct Unit {
  std::int64_t n;
  int od, oh, sg;
};

__device__ __forceinline__ Unit unit_at(const WGeo& g, std::int64_t index) {
  Unit u;
  u.sg = static_cast<int>(index % g.segs);
  index /= g.segs;
  u.oh = static_cast<int>(index % g.out[1]);
  index /= g.out[1];
  u.od = static_cast<int>(index % g.out[0]);
  u.n = index / g.out[0];
  return u;
}

__device__ __forceinline__ void advance(const WGeo& g, Unit& u) {
  if (++u.sg < g.segs) return;
  u.sg = 0;
  if (++u.oh < g.out[1]) return;
  u.oh = 0;
  if (++u.od < g.out[0]) return;
  u.od = 0;
  ++u.n;
}

// How a block copies its input rows (Note [narrow input words]): by 16-byte or 4-byte
// asynchronous copies, or element by element.
enum class XCopy { packs = 8, words = 2, elements = 1 };

// The copies src allows (Note [narrow input words]): packs when every row starts 16-byte aligned,
// words when 4-byte aligned, else elements.
XCopy x_copy_of(const WGeo& g, const void* src) {
  const std::int64_t row_elements = static_cast<std::int64_t>(g.in[2]) * g.channels;
  if (aligned(src, 16) && row_elements % 8 == 0) return XCopy::packs;
  if (aligned(src, 4) && row_elements % 2 == 0) return XCopy::words;
  return XCopy::elements;
}

// An input row of a block's tile (Note [narrow tile copies]).
struct RowOffsets {
  int kd, kh;            // kd x dilation, kh x dilation
  std::int64_t element;  // (kd x dilation x H + kh x dilation) x W x C
};

// Note [narrow tile copies]
// The copies of a unit are most of the kernel's instructions besides the products, so a thread's
// share is fixed once per block: its chunk of 8 diff_dst channels (and the positions 16 apart
// from its first), and its first item of the input rows with the step to its next (the rows of
// the tile flattened, a row's items being its 4-byte words or elements). The per-row part of an
// input address is a table in shared memory made once per block (RowOffsets); per unit, a copy
// adds it to the unit's origin.

// The table of a block's input rows: rows row_lo.. of the kernel's (kd, kh) pairs.
__device__ __forceinline__ void make_row_offsets(const WGeo& g, RowOffsets* offsets, int row_lo,
                                                 int rows, int tid, int threads) {
  const std::int64_t row_elements = static_cast<std::int64_t>(g.in[2]) * g.channels;
  for (int r = tid; r < rows; r += threads) {
    const int kd = (row_lo + r) / g.k[1];
    const int kh = row_lo + r - kd * g.k[1];
    offsets[r].kd = kd * g.d[0];
    offsets[r].kh = kh * g.d[1];
    offsets[r].element = (static_cast<std::int64_t>(kd) * g.d[0] * g.in[1] +
                          static_cast<std::int64_t>(kh) * g.d[1]) *
                         row_elements;
  }
}

// A thread's share of the tile's input rows: its first item and the step to its next, the rows
// flattened (items per row: the pitch over the item's halves).
struct RowShare {
  int items, row, item, row_step, item_step;
};
__device__ __forceinline__ RowShare row_share(const WGeo& g, int width, int tid, int threads) {
  RowShare share;
  share.items = g.x_pitch / width;
  share.row = tid / share.items;
  share.item = tid - share.row * share.items;
  share.row_step = threads / share.items;
  share.item_step = threads - share.row_step * share.items;
  return share;
}

// Copies the input rows of unit u into the tile xs (rows x pitch halves): item i of tile row r
// is the item at element a0 + width x i of input row r, a0 = iw0 x C rounded down to a multiple
// of the width (Note [narrow input words]), zero outside the input. packs and words are
// asynchronous copies (committed by the caller), elements plain loads and stores.
template <typename T, XCopy X>
__device__ __forceinline__ void copy_input_rows(const WGeo& g, const T* __restrict__ x, T* xs,
                                                const RowOffsets* offsets, int rows,
                                                const RowShare& share, const Unit& u) {
  constexpr int width = static_cast<int>(X);
  const int C = g.channels;
  const int row_elements = g.in[2] * C;
  const int a = (u.sg * g.seg * g.s[2] - g.p[2]) * C;
  const int a0 = a - (a & (width - 1));
  const int id0 = u.od * g.s[0] - g.p[0];
  const int ih0 = u.oh * g.s[1] - g.p[1];
  const T* origin = x + ((u.n * g.in[0] + id0) * g.in[1] + ih0) * row_elements + a0;
  int r = share.row;
  int i = share.item;
  while (r < rows) {
    const RowOffsets row = offsets[r];
    const int e = a0 + width * i;
    const bool ok = inside(id0 + row.kd, g.in[0]) && inside(ih0 + row.kh, g.in[1]) && e >= 0 &&
                    e < row_elements;
    T* to = xs + r * g.x_pitch + width * i;
    if constexpr (X == XCopy::packs) {
      __pipeline_memcpy_async(reinterpret_cast<uint4*>(to),
                              reinterpret_cast<const uint4*>(ok ? origin + row.element + 8 * i : x),
                              16, ok ? 0 : 16);
    } else if constexpr (X == XCopy::words) {
      __pipeline_memcpy_async(to, ok ? origin + row.element + 2 * i : x, 4, ok ? 0 : 4);
    } else {
      *to = ok ? origin[row.element + i] : from_float<T>(0.0f);
    }
    r += share.row_step;
    i += share.item_step;
    if (i >= share.items) {
      i -= share.items;
      ++r;
    }
  }
}

// Note [narrow weight gradients]. PackedY: K a multiple of 8 and diff_dst 16-byte aligned (the
// diff_dst tile by 16-byte asynchronous copies); X: how the input rows are copied. The copies
// that are not asynchronous are plain loads and stores, made after the products of the unit
// before.
template <typename T, bool PackedY, XCopy X>
__global__ void __launch_bounds__(wg::threads, wg::blocks_per_sm)
    bwd_weights_kernel(WGeo g, const T* __restrict__ x, const T* __restrict__ dy,
                       float* __restrict__ partial) {
  wait_for_prior_grids();
  extern __shared__ uint4 shared[];
  T* const stage0 = reinterpret_cast<T*>(shared);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % warp_size;
  const int warp = tid / warp_size;
  const int group = lane / 4;
  const int quad = lane % 4;
  const int K = g.out_channels;
  const int C = g.channels;
  const int k0 = static_cast<int>(blockIdx.z) * wg::channels;
  const int row_tiles = min(wg::row_tiles, (K - k0 + 15) / 16);
  const int col_lo = static_cast<int>(blockIdx.y) * g.block_cols;
  const int col_hi = min(g.columns, col_lo + g.block_cols);
  const int row_lo = col_lo / C / g.k[2];
  const int rows = rows_of(col_lo, col_hi, C, g.k[2]);
  const int cgroup = warp % g.col_groups;
  const int pgroup = warp / g.col_groups;
  const int sc = g.s[2] * C;  // halves between consecutive positions' elements of a column
  // Per column tile of this warp: whether it holds columns of the block, and this thread's
  // column's offset in the input rows at position 2 quad.
  bool tile_on[wg::warp_tiles];
  int xoff[wg::warp_tiles];
#pragma unroll
  for (int i = 0; i < wg::warp_tiles; ++i) {
    const int tile = cgroup * g.warp_tiles + i;
    tile_on[i] = i < g.warp_tiles && col_lo + tile * 8 < col_hi;
    const int j = col_lo + tile * 8 + group;
    xoff[i] = wg::stage_y + 2 * quad * sc;
    if (tile_on[i] && j < col_hi) {
      const int tap = j / C;
      const int kw = tap % g.k[2];
      xoff[i] += (tap / g.k[2] - row_lo) * g.x_pitch + kw * g.d[2] * C + (j - tap * C);
    }
  }
  // This lane's row of the ldmatrix: position (lane / 16) x 8 + lane % 8, channels 8 x bit 3.
  const unsigned a_lane = static_cast<unsigned>(__cvta_generic_to_shared(stage0)) +
                          static_cast<unsigned>((((lane >> 4) & 1) * 8 + (lane & 7)) * wg::pitch +
                                                ((lane >> 3) & 1) * 8) *
                              2u;
  float acc[wg::row_tiles][wg::warp_tiles][4];
#pragma unroll
  for (int m = 0; m < wg::row_tiles; ++m) {
#pragma unroll
    for (int i = 0; i < wg::warp_tiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][i][e] = 0.0f;
    }
  }

  // Per input row of the tile (Note [narrow tile copies]): its (kd x dilation, kh x dilation)
  // and its first element's offset from the unit's origin.
  auto* offsets = reinterpret_cast<RowOffsets*>(stage0 + 2 * g.stage_halves);
  make_row_offsets(g, offsets, row_lo, rows, tid, wg::threads);
  __syncthreads();
  // This thread's first item of the input rows and its step: one item a 16-byte pack, a 4-byte
  // word or an element.
  constexpr bool PackedX = X != XCopy::elements;
  constexpr int width = static_cast<int>(X);  // halves per item
  const RowShare share = row_share(g, width, tid, wg::threads);
  // This thread's chunk of 8 diff_dst channels at positions y_position + 16 i.
  const int y_position = tid / 8;
  const int y_channel = tid % 8 * 8;
  const bool y_channel_in = k0 + y_channel < K;

  // The copies of a unit into stage s: Async the asynchronous ones, else the plain ones. A
  // thread's share of each is the same for every unit (Note [narrow tile copies]).
  const auto copy = [&](int s, const Unit& u, auto async) {
    constexpr bool Async = decltype(async)::value;
    T* const ys = stage0 + s * g.stage_halves;
    T* const xs = ys + wg::stage_y;
    const int ow0 = u.sg * g.seg;
    const int valid = min(g.seg, g.out[2] - ow0);
    if constexpr (Async == PackedY) {
      const T* from =
          dy + (((u.n * g.out[0] + u.od) * g.out[1] + u.oh) * g.out[2] + ow0 + y_position) * K +
          k0 + y_channel;
      T* to = ys + y_position * wg::pitch + y_channel;
      for (int i = 0; i < g.seg / 16; ++i) {
        const bool ok = y_channel_in && y_position + 16 * i < valid;
        const T* at = from + static_cast<std::int64_t>(16 * i) * K;
        if constexpr (Async) {
          __pipeline_memcpy_async(to + 16 * i * wg::pitch, ok ? at : dy, 16, ok ? 0 : 16);
        } else {
          Pack<T, 8> v;
#pragma unroll
          for (int e = 0; e < 8; ++e)
            v.v[e] = ok && k0 + y_channel + e < K ? at[e] : from_float<T>(0.0f);
          *reinterpret_cast<Pack<T, 8>*>(to + 16 * i * wg::pitch) = v;
        }
      }
    }
    if constexpr (Async == PackedX) copy_input_rows<T, X>(g, x, xs, offsets, rows, share, u);
  };

  const std::int64_t first = g.units * blockIdx.x / g.splits;
  const int count = static_cast<int>(g.units * (blockIdx.x + 1) / g.splits - first);
  const int steps = g.seg / 16;
  Unit next = unit_at(g, first);
  if (count > 0) {
    copy(0, next, std::true_type{});
    __pipeline_commit();
    copy(0, next, std::false_type{});
  }
  for (int u = 0; u < count; ++u) {
    const int s = u & 1;
    const int ow0 = next.sg * g.seg;
    const int valid = min(g.seg, g.out[2] - ow0);
    const int shift = ((ow0 * g.s[2] - g.p[2]) * C) & (width - 1);
    __pipeline_wait_prior(0);
    __syncthreads();  // stage s is complete, and every warp is done with stage 1 - s
    const bool more = u + 1 < count;
    if (more) {
      advance(g, next);
      copy(1 - s, next, std::true_type{});
      __pipeline_commit();
    }
    const unsigned a_stage = a_lane + static_cast<unsigned>(s * g.stage_halves) * 2u;
    const auto* b_stage =
        reinterpret_cast<const unsigned short*>(stage0 + s * g.stage_halves) + shift;
    for (int step = pgroup; step < steps && step * 16 < valid; step += g.pos_groups) {
      unsigned a[wg::row_tiles][4];
#pragma unroll
      for (int m = 0; m < wg::row_tiles; ++m) {
        if (m < row_tiles)
          ldmatrix_x4_trans(a[m],
                            a_stage + static_cast<unsigned>(step * 16 * wg::pitch + m * 16) * 2u);
      }
      const unsigned short* b = b_stage + step * 16 * sc;
#pragma unroll
      for (int i = 0; i < wg::warp_tiles; ++i) {
        if (!tile_on[i]) continue;
        const unsigned short* at = b + xoff[i];
        const unsigned b0 = static_cast<unsigned>(at[0]) | static_cast<unsigned>(at[sc]) << 16;
        const unsigned b1 = static_cast<unsigned>(at[8 * sc]) | static_cast<unsigned>(at[9 * sc])
                                                                    << 16;
#pragma unroll
        for (int m = 0; m < wg::row_tiles; ++m) {
          if (m < row_tiles) mma<T>(acc[m][i], a[m][0], a[m][1], a[m][2], a[m][3], b0, b1);
        }
      }
    }
    if (more) copy(1 - s, next, std::false_type{});
  }
  // The warps of a column group add their sums in warp order, through shared memory.
  if (g.pos_groups > 1) {
    __syncthreads();
    auto* sums = reinterpret_cast<float*>(shared);
    constexpr int per_lane = wg::row_tiles * wg::warp_tiles * 4;
    const auto at = [&](int pg, int e) {
      return ((((pg - 1) * g.col_groups + cgroup) * per_lane) + e) * warp_size + lane;
    };
    if (pgroup > 0) {
#pragma unroll
      for (int m = 0; m < wg::row_tiles; ++m) {
#pragma unroll
        for (int i = 0; i < wg::warp_tiles; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            sums[at(pgroup, (m * wg::warp_tiles + i) * 4 + e)] = acc[m][i][e];
        }
      }
    }
    __syncthreads();
    if (pgroup > 0) return;
    for (int pg = 1; pg < g.pos_groups; ++pg) {
#pragma unroll
      for (int m = 0; m < wg::row_tiles; ++m) {
#pragma unroll
        for (int i = 0; i < wg::warp_tiles; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[m][i][e] += sums[at(pg, (m * wg::warp_tiles + i) * 4 + e)];
        }
      }
    }
  }
  // D's fragment: rows (channels) group and group + 8, columns 2 quad and 2 quad + 1.
  float* out = partial + static_cast<std::int64_t>(blockIdx.x) * K * g.columns;
#pragma unroll
  for (int m = 0; m < wg::row_tiles; ++m) {
#pragma unroll
    for (int i = 0; i < wg::warp_tiles; ++i) {
      if (m >= row_tiles || !tile_on[i]) continue;
      const int j = col_lo + (cgroup * g.warp_tiles + i) * 8 + 2 * quad;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = k0 + m * 16 + group + 8 * h;
        if (k >= K) continue;
        float* row = out + static_cast<std::int64_t>(k) * g.columns;
        if (j < col_hi) row[j] = acc[m][i][2 * h];
        if (j + 1 < col_hi) row[j + 1] = acc[m][i][2 * h + 1];
      }
    }
  }
}

std::size_t weights_workspace_bytes(const WGeo& g) {
  return static_cast<std::size_t>(g.splits) * static_cast<std::size_t>(g.out_channels) *
         static_cast<std::size_t>(g.columns) * sizeof(float);
}

// Why the kernel cannot run a shape, in two parts: the shape's own bounds (then weights_geo()
// may be computed), and the bounds of its geometry, which the launch then uses as it is.
const char* weights_shape_unsupported(const NarrowShape& shape) {
  if (const char* reason = dims_unsupported(shape)) return reason;
  const std::int64_t columns =
      std::int64_t{shape.kernel[0]} * shape.kernel[1] * shape.kernel[2] * shape.channels;
  if (columns >= wg::max_columns) return "kernel volume x channels of 2^24 or more";
  return nullptr;
}
const char* weights_geo_unsupported(const WGeo& g) {
  if (g.seg == 0) {
    return "the input rows 16 output positions read (kernel rows x span x channels) exceed the "
           "narrow-channel kernel's 12 KiB tile";
  }
  if (g.col_blocks > wg::max_grid_yz || g.k_blocks > wg::max_grid_yz)
    return "kernel volume x channels or out_channels beyond the grid's 65535 blocks";
  if (g.units > wg::max_units) return "N x output rows x segments beyond 2^40";
  return nullptr;
}

template <typename T>
cudaError_t bwd_weights_typed(const WGeo& g, const void* src, const void* diff_dst,
                              void* diff_weights, void* workspace, const Queue& queue) {
  const dim3 grid(static_cast<unsigned>(g.splits), static_cast<unsigned>(g.col_blocks),
                  static_cast<unsigned>(g.k_blocks));
  const auto* x = static_cast<const T*>(src);
  const auto* dy = static_cast<const T*>(diff_dst);
  auto* partial = static_cast<float*>(workspace);
  const auto bytes = static_cast<std::size_t>(g.shared_bytes());
  const bool packed_y = aligned(diff_dst, 16) && g.out_channels % 8 == 0;
  const XCopy copy = x_copy_of(g, src);
  const auto run = [&](auto packed, auto mode) {
    return launch(queue, bwd_weights_kernel<T, decltype(packed)::value, decltype(mode)::value>,
                  grid, dim3(wg::threads), bytes, g, x, dy, partial);
  };
  const auto with_copy = [&](auto packed) {
    switch (copy) {
      case XCopy::packs: return run(packed, std::integral_constant<XCopy, XCopy::packs>{});
      case XCopy::words: return run(packed, std::integral_constant<XCopy, XCopy::words>{});
      case XCopy::elements: break;
    }
    return run(packed, std::integral_constant<XCopy, XCopy::elements>{});
  };
  if (const cudaError_t status =
          packed_y ? with_copy(std::true_type{}) : with_copy(std::false_type{});
      status != cudaSuccess)
    return status;
  return reduce_splits<T>(partial, static_cast<T*>(diff_weights),
                          static_cast<std::int64_t>(g.out_channels) * g.columns, g.splits, queue);
}

// ---- forward -----------------------------------------------------------------------------------

// Note [narrow forward]
// The forward pass of a convolution with C <= 8 input channels is a product of M = N x output
// positions rows by J = kernel volume x C (the reduction, the weights' taps x C order) by K
// columns. cuDNN's engines pad C to their tile's channel block (the 3-channel stems run engines
// 47 and 40 over 32 or more channels a tap, or the padded copies of `cudnn:padc`). This kernel
// packs the J products of each output position 16 to a tensor-core step (mma.sync m16n8k16, f32
// accumulators): a 3x3 stem's 27 take 2 steps where channels padded to 8 would take 5.
// - A unit of work is a segment of 16, 32 or 64 output positions along W of one output row, as in
//   the weight gradient (Note [narrow weight gradients]); the block copies the input rows its
//   taps read (every (kd, kh) of the kernel) to shared memory with the same copies (Note [narrow
//   input words], Note [narrow tile copies]), two stages, the next unit's asynchronous copies
//   under this unit's products.
// - A: a warp's tile of 16 positions x 16 columns, each thread gathering its 8 elements from the
//   input rows: column j's offset in the tile (a table made once per block; -1 beyond J reads as
//   zero) plus the position's p x stride x C. B: the weights of 16 columns x 8 output channels,
//   arranged once per block in shared memory as each lane's fragment (one 8-byte load a product).
// - A block owns up to 64 output channels (grid.y, 8 column tiles of the product); its warps
//   split the segment's 16-position tiles and, where the segment has fewer than 4, the column
//   tiles. Each output element is written once, by the thread that holds its accumulator, in
//   a fixed order: deterministic, overwrite.
// - grid.x splits the units into contiguous ranges (Note [narrow weight gradients]); no partial
//   sums: each unit's outputs are its own.
// Bounds: J at most 16 x fw::max_ksteps (the weights' fragments in shared memory) and the input
// rows of 16 positions within the 8 KiB tile.
namespace fw {
constexpr int threads = 128;
constexpr int warps = threads / warp_size;
constexpr int channels = 64;  // output channels per block
constexpr int n_tiles = channels / 8;
constexpr int max_ksteps = 12;      // J up to 192: 3 x 7 x 7 x 3 = 147 fits
constexpr int input_halves = 4096;  // a stage's input rows: 8 KiB
constexpr int blocks_per_sm = 4;    // 16 warps an SM: up to 128 registers a thread
constexpr std::int64_t target_blocks = 2048;
constexpr std::int64_t max_grid_y = 65535;
}  // namespace fw

// The forward pass's geometry, in the weight gradient's terms: every (kd, kh) row of the kernel
// in one block's tile, the segment the longest whose rows fit fw::input_halves (seg 0 when none
// does), the units split into ranges (splits: grid.x), K into blocks of 64 (k_blocks: grid.y).
WGeo forward_geo(const NarrowShape& shape) {
  WGeo g{};
  copy_dims(g, shape);
  g.channels = shape.channels;
  g.out_channels = shape.out_channels;
  g.batch = shape.batch;
  g.columns = shape.kernel[0] * shape.kernel[1] * shape.kernel[2] * shape.channels;
  g.col_blocks = 1;
  g.rows = shape.kernel[0] * shape.kernel[1];
  choose_segment(g, fw::input_halves);
  g.stage_halves = (g.rows * g.x_pitch + 7) / 8 * 8;
  g.units = g.batch * g.out[0] * g.out[1] * g.segs;
  g.k_blocks = static_cast<int>(std::min<std::int64_t>(
      (std::int64_t{g.out_channels} + fw::channels - 1) / fw::channels, fw::max_grid_y + 1));
  const std::int64_t per_k = (fw::target_blocks + g.k_blocks - 1) / g.k_blocks;
  g.splits = static_cast<int>(std::max<std::int64_t>(std::min(per_k, g.units), 1));
  return g;
}

// Tensor-core steps of 16 products per output position.
__host__ __device__ inline int forward_ksteps(const WGeo& g) { return (g.columns + 15) / 16; }

// Shared memory: two stages of input rows, the weights' fragments, the columns' offsets, the
// rows' table.
int forward_shared_bytes(const WGeo& g) {
  const int ksteps = forward_ksteps(g);
  return 2 * g.stage_halves * 2 + ksteps * fw::n_tiles * warp_size * 8 + ksteps * 16 * 4 +
         g.rows * static_cast<int>(sizeof(RowOffsets));
}

const char* forward_shape_unsupported(const NarrowShape& shape) {
  if (const char* reason = dims_unsupported(shape)) return reason;
  const std::int64_t columns =
      std::int64_t{shape.kernel[0]} * shape.kernel[1] * shape.kernel[2] * shape.channels;
  if (columns > 16 * fw::max_ksteps)
    return "the narrow-channel forward kernel takes kernel volume x channels of at most 192";
  return nullptr;
}
const char* forward_geo_unsupported(const WGeo& g) {
  if (g.seg == 0) {
    return "the input rows 16 output positions read (kernel rows x span x channels) exceed the "
           "narrow-channel forward kernel's 8 KiB tile";
  }
  if (g.k_blocks > fw::max_grid_y) return "out_channels beyond the grid's 65535 blocks of 64";
  if (g.units > wg::max_units) return "N x output rows x segments beyond 2^40";
  return nullptr;
}

// Note [narrow forward].
template <typename T, XCopy X>
__global__ void __launch_bounds__(fw::threads, fw::blocks_per_sm)
    fwd_kernel(WGeo g, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
               bool pairs) {
  wait_for_prior_grids();
  extern __shared__ uint4 shared[];
  T* const stage0 = reinterpret_cast<T*>(shared);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % warp_size;
  const int warp = tid / warp_size;
  const int group = lane / 4;
  const int quad = lane % 4;
  const int K = g.out_channels;
  const int C = g.channels;
  const int J = g.columns;
  const int ksteps = forward_ksteps(g);
  const int k0 = static_cast<int>(blockIdx.y) * fw::channels;
  const int n_tiles = min(fw::n_tiles, (K - k0 + 7) / 8);
  auto* frags = reinterpret_cast<uint2*>(stage0 + 2 * g.stage_halves);
  int* column_at = reinterpret_cast<int*>(frags + ksteps * fw::n_tiles * warp_size);
  auto* offsets = reinterpret_cast<RowOffsets*>(column_at + ksteps * 16);

  // B's fragments, [kstep][tile][lane]: {B[2q][n], B[2q + 1][n]} and {B[2q + 8][n], B[2q + 9][n]}
  // with n = lane / 4, q = lane % 4, B[i][n] = w[k0 + tile x 8 + n][kstep x 16 + i], zero beyond
  // K and J.
  const auto* wbits = reinterpret_cast<const unsigned short*>(w);
  for (int i = tid; i < ksteps * fw::n_tiles * warp_size; i += fw::threads) {
    const int l = i % warp_size;
    const int tile = i / warp_size % fw::n_tiles;
    const int kstep = i / (warp_size * fw::n_tiles);
    const int k = k0 + tile * 8 + l / 4;
    const int j0 = kstep * 16 + (l % 4) * 2;
    unsigned v[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned pair = 0;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = j0 + 8 * h + e;
        const unsigned bits = k < K && j < J ? wbits[static_cast<std::int64_t>(k) * J + j] : 0u;
        pair |= bits << (16 * e);
      }
      v[h] = pair;
    }
    frags[i] = make_uint2(v[0], v[1]);
  }
  // Column j's element in the tile at position 0 (before the unit's shift), -1 beyond J.
  for (int j = tid; j < ksteps * 16; j += fw::threads) {
    int offset = -1;
    if (j < J) {
      const int tap = j / C;
      const int kw = tap % g.k[2];
      offset = tap / g.k[2] * g.x_pitch + kw * g.d[2] * C + (j - tap * C);
    }
    column_at[j] = offset;
  }
  make_row_offsets(g, offsets, 0, g.rows, tid, fw::threads);
  __syncthreads();
  constexpr int width = static_cast<int>(X);
  const RowShare share = row_share(g, width, tid, fw::threads);

  // The warps over the segment's tiles of 16 positions (m_groups of them) and, where those are
  // fewer than the warps, over the column tiles: tile ng + i x n_groups, i = 0, 1, ...
  const int m_groups = g.seg / 16;
  const int n_groups = fw::warps / m_groups;
  const int mt = warp % m_groups;
  const int ng = warp / m_groups;
  const int sc = g.s[2] * C;  // halves between consecutive positions' elements of a column
  const int p0 = (mt * 16 + group) * sc;
  const int p1 = p0 + 8 * sc;

  const std::int64_t first = g.units * blockIdx.x / g.splits;
  const int count = static_cast<int>(g.units * (blockIdx.x + 1) / g.splits - first);
  Unit next = unit_at(g, first);
  if (count > 0) {
    if constexpr (X != XCopy::elements)
      copy_input_rows<T, X>(g, x, stage0, offsets, g.rows, share, next);
    __pipeline_commit();
    if constexpr (X == XCopy::elements)
      copy_input_rows<T, X>(g, x, stage0, offsets, g.rows, share, next);
  }
  for (int u = 0; u < count; ++u) {
    const int s = u & 1;
    const Unit unit = next;
    const int ow0 = unit.sg * g.seg;
    const int valid = min(g.seg, g.out[2] - ow0);
    const int shift = ((ow0 * g.s[2] - g.p[2]) * C) & (width - 1);
    __pipeline_wait_prior(0);
    __syncthreads();  // stage s is complete, and every warp is done with stage 1 - s
    const bool more = u + 1 < count;
    T* const other = stage0 + (1 - s) * g.stage_halves;
    if (more) {
      advance(g, next);
      if constexpr (X != XCopy::elements)
        copy_input_rows<T, X>(g, x, other, offsets, g.rows, share, next);
      __pipeline_commit();
    }
    if (mt * 16 < valid) {
      const auto* tile =
          reinterpret_cast<const unsigned short*>(stage0 + s * g.stage_halves) + shift;
      float acc[fw::n_tiles][4];
#pragma unroll
      for (int i = 0; i < fw::n_tiles; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
      }
      const auto at = [&](int offset, int position) -> unsigned {
        return offset < 0 ? 0u : static_cast<unsigned>(tile[offset + position]);
      };
      for (int kstep = 0; kstep < ksteps; ++kstep) {
        const int2 lo = *reinterpret_cast<const int2*>(column_at + kstep * 16 + 2 * quad);
        const int2 hi = *reinterpret_cast<const int2*>(column_at + kstep * 16 + 8 + 2 * quad);
        const unsigned a0 = at(lo.x, p0) | at(lo.y, p0) << 16;
        const unsigned a1 = at(lo.x, p1) | at(lo.y, p1) << 16;
        const unsigned a2 = at(hi.x, p0) | at(hi.y, p0) << 16;
        const unsigned a3 = at(hi.x, p1) | at(hi.y, p1) << 16;
        const uint2* b = frags + kstep * fw::n_tiles * warp_size + lane;
#pragma unroll
        for (int i = 0; i < fw::n_tiles; ++i) {
          const int t = ng + i * n_groups;
          if (t < n_tiles) {
            const uint2 bf = b[t * warp_size];
            mma<T>(acc[i], a0, a1, a2, a3, bf.x, bf.y);
          }
        }
      }
      // D's fragment: positions mt x 16 + group (+ 8), channels k0 + t x 8 + 2 quad (+ 1).
      T* const out = y +
                     (((unit.n * g.out[0] + unit.od) * g.out[1] + unit.oh) * g.out[2] + ow0) * K +
                     k0 + 2 * quad;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int p = mt * 16 + group + 8 * h;
        if (p >= valid) continue;
        T* const row = out + static_cast<std::int64_t>(p) * K;
#pragma unroll
        for (int i = 0; i < fw::n_tiles; ++i) {
          const int t = ng + i * n_groups;
          const int k = k0 + t * 8 + 2 * quad;
          if (t >= n_tiles || k >= K) continue;
          if (pairs) {  // K even: k + 1 < K, and the pair 4-byte aligned
            Pack<T, 2> v;
            v.v[0] = from_float<T>(acc[i][2 * h]);
            v.v[1] = from_float<T>(acc[i][2 * h + 1]);
            *reinterpret_cast<Pack<T, 2>*>(row + t * 8) = v;
          } else {
            row[t * 8] = from_float<T>(acc[i][2 * h]);
            if (k + 1 < K) row[t * 8 + 1] = from_float<T>(acc[i][2 * h + 1]);
          }
        }
      }
    }
    if constexpr (X == XCopy::elements) {
      if (more) copy_input_rows<T, X>(g, x, other, offsets, g.rows, share, next);
    }
  }
}

template <typename T>
cudaError_t fwd_typed(const WGeo& g, const void* src, const void* weights, void* dst,
                      const Queue& queue) {
  const dim3 grid(static_cast<unsigned>(g.splits), static_cast<unsigned>(g.k_blocks));
  const auto* x = static_cast<const T*>(src);
  const auto* w = static_cast<const T*>(weights);
  auto* y = static_cast<T*>(dst);
  const auto bytes = static_cast<std::size_t>(forward_shared_bytes(g));
  const bool pairs = g.out_channels % 2 == 0 && aligned(dst, 4);
  const XCopy copy = x_copy_of(g, src);
  const auto kernel = copy == XCopy::packs   ? fwd_kernel<T, XCopy::packs>
                      : copy == XCopy::words ? fwd_kernel<T, XCopy::words>
                                             : fwd_kernel<T, XCopy::elements>;
  return launch(queue, kernel, grid, dim3(fw::threads), bytes, g, x, w, y, pairs);
}

}  // namespace

const char* narrow_unsupported(const NarrowShape& shape) {
  if (const char* reason = data_shape_unsupported(shape)) return reason;
  return data_geo_unsupported(geo_of(shape));
}

std::size_t narrow_bwd_data_workspace_bytes(const NarrowShape& shape) {
  const DataWorkspace ws = data_workspace_of(geo_of(shape));
  return static_cast<std::size_t>(ws.fragments + ws.zeros + ws.tap_packs) * sizeof(uint4);
}

cudaError_t narrow_bwd_data(const NarrowShape& shape, const void* diff_dst, const void* weights,
                            void* diff_src, void* workspace, const Queue& queue) {
  if (data_shape_unsupported(shape) != nullptr) return cudaErrorInvalidValue;
  const Geo g = geo_of(shape);  // once per call: the check's and the launch's
  if (data_geo_unsupported(g) != nullptr) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;  // diff_src is empty
  switch (shape.type) {
    case NarrowType::f16:
      return bwd_data_typed<__half>(g, diff_dst, weights, diff_src, workspace, queue);
    case NarrowType::bf16:
      return bwd_data_typed<__nv_bfloat16>(g, diff_dst, weights, diff_src, workspace, queue);
  }
  return cudaErrorInvalidValue;
}

const char* narrow_fwd_unsupported(const NarrowShape& shape) {
  if (const char* reason = forward_shape_unsupported(shape)) return reason;
  return forward_geo_unsupported(forward_geo(shape));
}

cudaError_t narrow_fwd(const NarrowShape& shape, const void* src, const void* weights, void* dst,
                       const Queue& queue) {
  if (forward_shape_unsupported(shape) != nullptr) return cudaErrorInvalidValue;
  const WGeo g = forward_geo(shape);  // once per call: the check's and the launch's
  if (forward_geo_unsupported(g) != nullptr) return cudaErrorInvalidValue;
  if (g.units == 0) return cudaSuccess;  // dst is empty
  switch (shape.type) {
    case NarrowType::f16: return fwd_typed<__half>(g, src, weights, dst, queue);
    case NarrowType::bf16: return fwd_typed<__nv_bfloat16>(g, src, weights, dst, queue);
  }
  return cudaErrorInvalidValue;
}

const char* narrow_bwd_weights_unsupported(const NarrowShape& shape) {
  if (const char* reason = weights_shape_unsupported(shape)) return reason;
  return weights_geo_unsupported(weights_geo(shape));
}

std::size_t narrow_bwd_weights_workspace_bytes(const NarrowShape& shape) {
  return weights_workspace_bytes(weights_geo(shape));
}

cudaError_t narrow_bwd_weights(const NarrowShape& shape, const void* src, const void* diff_dst,
                               void* diff_weights, void* workspace, const Queue& queue) {
  if (weights_shape_unsupported(shape) != nullptr) return cudaErrorInvalidValue;
  const WGeo g = weights_geo(shape);  // once per call: the check's and the launch's
  if (weights_geo_unsupported(g) != nullptr) return cudaErrorInvalidValue;
  switch (shape.type) {
    case NarrowType::f16:
      return bwd_weights_typed<__half>(g, src, diff_dst, diff_weights, workspace, queue);
    case NarrowType::bf16:
      return bwd_weights_typed<__nv_bfloat16>(g, src, diff_dst, diff_weights, workspace, queue);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels
