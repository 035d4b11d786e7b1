#pragma once
// dnnx's grouped convolution kernel on the tensor cores (cudnn:kernel:grouped:mma, Note [grouped
// products] in grouped.cu): channels_last, f16 or bf16 (f32 accumulation), 4, 8, 16 or 32
// channels per group in and out, a channel count that is a multiple of 32, 3x3 kernels of 2-D
// convolutions (3-D ones of kernel depth 1, depth stride 1, no depth padding), a stride of 1 or 2
// along H and W, no dilation; fwd and bwd_data. Plain pointers, sizes and a Queue; no
// cuDNN types. The index arithmetic a block and its lanes use is in grouped:: below, shared with
// the host (a test runs whole convolutions through it, the products emulated, where there is no
// GPU).

#include "backends/cudnn/kernels/queue.hpp"
#include "backends/cudnn/kernels/spatial.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_GROUPED_HD __host__ __device__
#else
#define DNNX_GROUPED_HD
#endif
// Loops unrolled in device code (their arrays then stay in registers).
#if defined(__CUDA_ARCH__)
#define DNNX_GROUPED_UNROLL _Pragma("unroll")
#else
#define DNNX_GROUPED_UNROLL
#endif

namespace dnnx::cudnn::kernels {

/// Element type of the tensors.
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
  GroupedType type = GroupedType::f16;
};

/// Why the kernel cannot run `shape` forward (`forward`) or in bwd_data (a static string), or
/// nullptr when it can.
const char* grouped_unsupported(const GroupedShape& shape, bool forward);

/// Workspace bytes of the weights laid out as the products' fragments (grouped::fragment_source()).
std::size_t grouped_workspace_bytes(const GroupedShape& shape);

/// dst = conv(src, weights), queued on `queue`; `workspace` holds grouped_workspace_bytes(shape)
/// bytes, aligned to 16, and src and dst are aligned to 16 bytes. Returns the launch status
/// (cudaErrorInvalidValue when the kernel cannot run the shape, cudaErrorMisalignedAddress for a
/// pointer not aligned to 16 bytes).
cudaError_t grouped_fwd(const GroupedShape& shape, const void* src, const void* weights, void* dst,
                        void* workspace, const Queue& queue);

/// diff_src = gradient w.r.t. src, queued on `queue`: correlations of diff_dst (one per phase of
/// diff_src at stride 2, grouped::taps_of()) with each group's in and out channels swapped, each
/// diff_src element written once in a fixed order. `workspace` and alignment as for grouped_fwd.
cudaError_t grouped_bwd_data(const GroupedShape& shape, const void* diff_dst, const void* weights,
                             void* diff_src, void* workspace, const Queue& queue);

namespace grouped {

/// Taps per dim (3x3 kernels).
inline constexpr int taps = 3;
/// Channels of a block: whole groups (32 is a multiple of 4, 8, 16 and 32), four blocks of 8.
inline constexpr int tile_channels = 32;
/// Halves of one position of the input tile in shared memory: its 32 channels and 8 of padding,
/// so that the 8 rows an 8x8 matrix load reads (8 consecutive positions, 80 bytes apart) fall on
/// distinct banks.
inline constexpr int column_halves = tile_channels + 8;
/// Warps of a block: warp w computes the block's output channels 8w ... 8w + 7.
inline constexpr int warps = tile_channels / 8;
/// Output positions of a product's tile (the rows of mma.m16n8k8).
inline constexpr int tile_rows = 16;

/// The taps of one spatial dim that reach the outputs of one phase, and where they read: output
/// grid index y reads `a` at y * step + offset[k] for each tap k in `valid` (a bit per tap).
/// fwd: every tap, offset k - pad (step: the stride). bwd_data: the taps k with (phase + pad - k)
/// a multiple of the stride, offset (phase + pad - k) / stride (step 1; output y * stride +
/// phase). `lo`: the least offset, where the block's input tile starts.
struct Taps {
  int valid = 0;
  int offset[taps] = {0, 0, 0};
  int lo = 0;
};
DNNX_GROUPED_HD inline Taps taps_of(int pad, int stride, bool backward, int phase) {
  Taps t;
  bool first = true;
  DNNX_GROUPED_UNROLL
  for (int k = 0; k < taps; ++k) {
    const int shifted = phase + pad - k;
    if (backward && shifted % stride != 0) continue;
    t.valid |= 1 << k;
    t.offset[k] = backward ? shifted / stride : k - pad;
    if (first || t.offset[k] < t.lo) t.lo = t.offset[k];
    first = false;
  }
  return t;
}

/// The correlation a block computes: the tensor read `a` {planes, a_h, a_w, channels} (fwd: src;
/// bwd_data: diff_dst), the one written {planes, o_h, o_w, channels}, through the weights' taps as
/// taps_of() says per dim (bwd_data: each group's in and out channels swapped). The written
/// positions are split into phases_h x phases_w phases (bwd_data: the stride's; fwd: one), each a
/// grid of grid_h x grid_w positions (written row y * phases_h + phase_h). A block owns th x tw
/// grid positions of one phase of one plane and 32 channels: block = ((((plane * phases_h +
/// phase_h) * phases_w + phase_w) * row_tiles + row_tile) * col_tiles + col_tile) *
/// channel_tiles + channel_tile.
struct Geo {
  int a_h = 1, a_w = 1;
  int o_h = 1, o_w = 1;
  int pad_h = 0, pad_w = 0;        ///< the convolution's padding before
  int stride_h = 1, stride_w = 1;  ///< the convolution's stride (1 or 2)
  bool backward = false;
  int channels = 32;   ///< in and out
  int per_group = 4;   ///< channels per group, in and out
  int in_blocks = 1;   ///< products per tap and 8 output channels: max(1, per_group / 8)
  int phases_h = 1, phases_w = 1;
  int grid_h = 1, grid_w = 1;  ///< ceil(o_h / phases_h), ceil(o_w / phases_w)
  int th = 1, tw = 1;          ///< a block's grid rows and columns
  int row_tiles = 1, col_tiles = 1, channel_tiles = 1;
  std::int64_t planes = 1;  ///< batch x D
  std::int64_t blocks = 1;

  /// Rows (columns) of `a` per grid step.
  DNNX_GROUPED_HD int step_h() const { return backward ? 1 : stride_h; }
  DNNX_GROUPED_HD int step_w() const { return backward ? 1 : stride_w; }
  /// The input tile's rows and columns (the most any phase reads: its offsets span at most 2).
  DNNX_GROUPED_HD int in_rows() const { return (th - 1) * step_h() + taps; }
  DNNX_GROUPED_HD int in_cols() const { return (tw - 1) * step_w() + taps; }
  /// Product tiles of 16 positions covering the block's th x tw.
  DNNX_GROUPED_HD int position_tiles() const { return (th * tw + tile_rows - 1) / tile_rows; }
  /// Output blocks of 8 channels a warp computes (out_blocks() x in_blocks products per slot: 4),
  /// and the warps that share a tile of positions (in_blocks: they split its 32 channels).
  DNNX_GROUPED_HD int out_blocks() const { return warps / in_blocks; }
  /// Bytes of one row of a warp's output staging (its 8 x out_blocks() channels of a position
  /// and 16 bytes of padding: the rows' 4-byte writes fall on distinct banks).
  DNNX_GROUPED_HD int staging_pitch() const { return out_blocks() * 16 + 16; }
  /// The input tile's bytes (at the start of shared memory), then each warp's staging of the
  /// tile_rows positions of a tile.
  DNNX_GROUPED_HD std::size_t tile_bytes() const {
    return static_cast<std::size_t>(in_rows()) * in_cols() * column_halves * 2;
  }
  std::size_t shared_bytes() const {
    return tile_bytes() + static_cast<std::size_t>(warps) * tile_rows * staging_pitch();
  }
};

/// The geometry of `shape` in fwd (`forward`) or bwd_data (grouped_unsupported() nullptr).
Geo geo(const GroupedShape& shape, bool forward);

/// The input tile's rows a block copies first (a group of asynchronous copies of its own), and
/// the product tiles (of 16 positions, in order) that read no other row: their grid rows r with
/// r * step_h() + 2 < first_rows(), a tap's rows spanning 3 at most. A block computes them while
/// the other rows arrive.
DNNX_GROUPED_HD inline int first_rows(const Geo& g) { return (g.in_rows() + 1) / 2; }
DNNX_GROUPED_HD inline int ready_tiles(const Geo& g) {
  const int rows = first_rows(g) < taps ? 0 : (first_rows(g) - taps) / g.step_h() + 1;
  return rows >= g.th ? g.position_tiles() : rows * g.tw / tile_rows;
}

/// Block `block` of g: its plane, phase, first grid row and column, first channel, and the taps
/// of its phase along H and W.
struct BlockOrigin {
  std::int64_t plane;
  int phase_h, phase_w;
  int row, col, channel;
  Taps taps_h, taps_w;
};
DNNX_GROUPED_HD inline BlockOrigin origin_of(const Geo& g, std::int64_t block) {
  BlockOrigin o;
  o.channel = static_cast<int>(block % g.channel_tiles) * tile_channels;
  block /= g.channel_tiles;
  o.col = static_cast<int>(block % g.col_tiles) * g.tw;
  block /= g.col_tiles;
  o.row = static_cast<int>(block % g.row_tiles) * g.th;
  block /= g.row_tiles;
  o.phase_w = static_cast<int>(block % g.phases_w);
  block /= g.phases_w;
  o.phase_h = static_cast<int>(block % g.phases_h);
  o.plane = block / g.phases_h;
  o.taps_h = taps_of(g.pad_h, g.stride_h, g.backward, o.phase_h);
  o.taps_w = taps_of(g.pad_w, g.stride_w, g.backward, o.phase_w);
  return o;
}

/// A position (row r, column c) of a grid `width` wide, walked in row-major order by fixed steps
/// (advance()): the kernel's loops step their positions by additions, no division per step.
struct Cursor {
  int r = 0, c = 0;
};
DNNX_GROUPED_HD inline Cursor cursor_at(int position, int width) {
  return {position / width, position % width};
}
DNNX_GROUPED_HD inline void advance(Cursor& q, int step, int width) {
  q.c += step;
  while (q.c >= width) {
    q.c -= width;
    ++q.r;
  }
}

/// The number of taps set in a dim's `valid` bits, and the tap of the i-th of them.
DNNX_GROUPED_HD inline int tap_count(int valid) {
  return (valid & 1) + (valid >> 1 & 1) + (valid >> 2 & 1);
}
DNNX_GROUPED_HD inline int nth_tap(int valid, int i) {
  DNNX_GROUPED_UNROLL
  for (int k = 0; k < taps; ++k) {
    if ((valid >> k & 1) == 0) continue;
    if (i == 0) return k;
    --i;
  }
  return 0;
}

/// The taps of a phase are its slots t < count, kh-major: slot t is the tap (nth_tap(taps_h, t /
/// count_w), nth_tap(taps_w, t % count_w)). The weights' fragments hold the slots of the phases
/// one after the other (phase_h-major), 9 in all: each tap reaches exactly one phase.
struct PhaseSlots {
  int count = 0;    ///< the phase's taps
  int count_w = 0;  ///< of them along W
  int first = 0;    ///< the fragments' slot of its tap 0
};
DNNX_GROUPED_HD inline PhaseSlots phase_slots(const Geo& g, int phase_h, int phase_w) {
  PhaseSlots s;
  for (int ph = 0; ph < g.phases_h; ++ph) {
    const int count_h = tap_count(taps_of(g.pad_h, g.stride_h, g.backward, ph).valid);
    for (int pw = 0; pw < g.phases_w; ++pw) {
      const int count_w = tap_count(taps_of(g.pad_w, g.stride_w, g.backward, pw).valid);
      if (ph == phase_h && pw == phase_w) {
        s.count = count_h * count_w;
        s.count_w = count_w;
        return s;
      }
      s.first += count_h * count_w;
    }
  }
  return s;
}

/// t.offset[k] by selects (a run-time index would put the array in local memory).
DNNX_GROUPED_HD inline int offset_of(const Taps& t, int k) {
  return k == 0 ? t.offset[0] : k == 1 ? t.offset[1] : t.offset[2];
}

/// Slot t's offset in the block's input tile (halves) from a position's row of the matrix loads:
/// where its tap reads, less the tile's origin (taps_of()'s lo).
DNNX_GROUPED_HD inline int slot_offset(const Geo& g, const BlockOrigin& o, const PhaseSlots& s,
                                       int t) {
  const int dh = offset_of(o.taps_h, nth_tap(o.taps_h.valid, t / s.count_w)) - o.taps_h.lo;
  const int dw = offset_of(o.taps_w, nth_tap(o.taps_w.valid, t % s.count_w)) - o.taps_w.lo;
  return (dh * g.in_cols() + dw) * column_halves;
}

/// The offset in the input tile (halves) of the first of the 8 channels that grid position q of
/// the block reads at its tap of offset 0 (slot_offset() adds the tap's), channel block `cb`. A
/// position beyond the block's grid (the last tile's lanes past th x tw) reads the last one: its
/// products are not stored.
DNNX_GROUPED_HD inline int a_base(const Geo& g, Cursor q, int cb) {
  if (q.r >= g.th) q = {g.th - 1, g.tw - 1};
  return (q.r * g.step_h() * g.in_cols() + q.c * g.step_w()) * column_halves + cb * 8;
}

/// The element of `a` whose 8 channels chunk k (0..3) of input tile position q holds, or -1 for
/// a position in the padding (zeros). The tile is in_rows() x in_cols() positions of column_halves
/// halves, the chunk at (q.r * in_cols() + q.c) * column_halves + 8 k.
DNNX_GROUPED_HD inline std::int64_t chunk_source(const Geo& g, const BlockOrigin& o, Cursor q,
                                                 int k) {
  const int ih = o.row * g.step_h() + o.taps_h.lo + q.r;
  const int iw = o.col * g.step_w() + o.taps_w.lo + q.c;
  if (ih < 0 || ih >= g.a_h || iw < 0 || iw >= g.a_w) return -1;
  return ((o.plane * g.a_h + ih) * g.a_w + iw) * g.channels + o.channel + k * 8;
}

/// The block of 8 of the block's 32 channels that output block `ob` (0..3) reads in its product
/// `ib` (< in_blocks) per tap: its group's blocks for groups of 8 or more, its own otherwise (the
/// product's weights zero across groups).
DNNX_GROUPED_HD inline int in_block(const Geo& g, int ob, int ib) {
  return g.per_group >= 8 ? ob * 8 / g.per_group * (g.per_group / 8) + ib : ob;
}

/// Warp `warp`'s share of its block: out_blocks = warps / in_blocks output blocks from
/// `first_block`, of the tiles from `first_tile` stepped by out_blocks (the in_blocks warps of
/// a tile split its channels).
struct WarpShare {
  int first_block, first_tile, tile_step;
};
DNNX_GROUPED_HD inline WarpShare warp_share(int in_blocks, int warp) {
  return {warp % in_blocks * (warps / in_blocks), warp / in_blocks, warps / in_blocks};
}

/// The products of a warp whose first output block is `first` (a multiple of out_blocks()): its
/// output block first + ob and product ib read the tile's channel block in_block(g, first, 0) +
/// product_block(in_blocks, ob, ib) (in_block(g, first + ob, ib), with the offset from the
/// warp's first a constant).
DNNX_GROUPED_HD inline int product_block(int in_blocks, int ob, int ib) {
  return in_blocks == 1 ? ob : ib;
}

/// Fragments of the weights: the products' B operand (8 input channels x 8 output channels of a
/// tap) as mma.m16n8k8 holds it, lane l the rows 2 (l % 4), 2 (l % 4) + 1 of column l / 4, for
/// each (slot, output block ob of the whole tensor, product ib) in that order (phase_slots()):
/// fragment ((slot * channels / 8 + ob) * in_blocks + ib) * 32 + lane, two halves each.
DNNX_GROUPED_HD inline std::int64_t fragments(const Geo& g) {
  return static_cast<std::int64_t>(taps * taps) * (g.channels / 8) * g.in_blocks * 32;
}

/// The weight (index into dnnx's channels_last weights) of half `h` of fragment `f`, or -1 where
/// the product's input and output channels are of different groups (a zero). bwd_data: the
/// input and output channel of the convolution swapped (its taps are the forward's, taps_of()).
DNNX_GROUPED_HD inline std::int64_t fragment_source(const Geo& g, std::int64_t f, int h) {
  const int lane = static_cast<int>(f % 32);
  f /= 32;
  const int ib = static_cast<int>(f % g.in_blocks);
  f /= g.in_blocks;
  const int ob = static_cast<int>(f % (g.channels / 8));
  const int slot = static_cast<int>(f / (g.channels / 8));
  int tap = 0;
  for (int ph = 0; ph < g.phases_h; ++ph) {
    for (int pw = 0; pw < g.phases_w; ++pw) {
      const PhaseSlots s = phase_slots(g, ph, pw);
      if (slot >= s.first && slot < s.first + s.count) {
        const int t = slot - s.first;
        tap = nth_tap(taps_of(g.pad_h, g.stride_h, g.backward, ph).valid, t / s.count_w) * taps +
              nth_tap(taps_of(g.pad_w, g.stride_w, g.backward, pw).valid, t % s.count_w);
      }
    }
  }
  const int out = ob * 8 + lane / 4;
  const int in = ob / warps * tile_channels + in_block(g, ob % warps, ib) * 8 + (lane % 4) * 2 + h;
  if (out / g.per_group != in / g.per_group) return -1;
  const int weight_out = g.backward ? in : out;
  const int weight_in = g.backward ? out : in;
  return (static_cast<std::int64_t>(weight_out) * taps * taps + tap) * g.per_group +
         weight_in % g.per_group;
}

/// The element of the tensor written at grid position q of the block at `o`, channel `c` of its
/// 32, or -1 when the position is beyond the block's grid or the tensor's edge.
DNNX_GROUPED_HD inline std::int64_t output_index(const Geo& g, const BlockOrigin& o, Cursor q,
                                                 int c) {
  const int y = (o.row + q.r) * g.phases_h + o.phase_h;
  const int x = (o.col + q.c) * g.phases_w + o.phase_w;
  if (q.r >= g.th || y >= g.o_h || x >= g.o_w) return -1;
  return ((o.plane * g.o_h + y) * g.o_w + x) * g.channels + o.channel + c;
}

}  // namespace grouped
}  // namespace dnnx::cudnn::kernels
