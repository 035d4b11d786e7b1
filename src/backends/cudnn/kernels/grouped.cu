// dnnx's grouped convolution kernel on the tensor cores (kernels/grouped.hpp).
//
// Note [grouped products]
// A grouped convolution of few channels per group (ResNeXt's 3x3 layers: 32 groups of 4, 8, 16
// or 32 channels) is, per tap, a product of the positions by the group's input channels by its
// output channels, 4 to 32 wide; cuDNN's engines run the groups of 4 and 8 at a quarter of the
// memory rate or less (ResNeXt-50's l1.conv3x3 in f16: 0.082 ms for 103 MB of src and dst on an
// H200, l2.conv3x3 0.051 ms for 51 MB; docs/benchmarks.md). Here the products are mma.m16n8k8
// (16 positions x 8 input channels by 8 output channels, f32 accumulators), the size of a group
// of 8, of two groups of 4 with the weights across groups zero, or of 8 of the inputs and outputs
// of a group of 16 or 32 (two or four products per tap and 8 output channels):
// - A block owns th x tw output positions of one plane (tw up to 64, th so that the input tile
//   stays near 40 KiB) and 32 channels, whole groups. Its threads copy the input tile (the
//   positions its 3x3 windows reach, 32 channels each) into shared memory with 16-byte
//   asynchronous copies, zeros in the padding, each position padded to 80 bytes
//   (grouped::column_halves: the 8 rows of a matrix load fall on distinct banks; at a forward
//   stride of 2 the rows are 160 bytes apart and two of them share banks), in two groups: the
//   first half of its rows, then the rest. The tiles of positions whose windows lie in the first
//   half (grouped::ready_tiles()) are computed while the rest arrives.
// - bwd_data at stride 2 is split into the stride's phases (the diff_src positions of one parity
//   per dim, a block's positions all of one phase): each phase is reached by a fixed subset of
//   the taps (grouped::taps_of(): along a dim, tap k where phase + pad - k is even), each a
//   correlation of diff_dst at stride 1, so no product is of zeros. At stride 1 there is one phase
//   and every tap: the correlation of diff_dst with the kernel flipped. A phase's taps are its
//   slots (grouped::phase_slots()), the weights' fragments of the phases one after the other.
// - A warp computes tiles of 16 positions (grouped::warp_share()): at groups of 4 or 8 all 32
//   channels of every fourth tile, at 16 half of them of every other tile, at 32 a quarter of
//   every tile. Per slot and output block (and product), one ldmatrix.x2 of the 16 positions' 8
//   input channels (each lane gives the tile address of one position's row) and one mma with the
//   slot's weights, held in registers for the whole block (9 x 4 fragments) with each slot's
//   offset in the tile; the next slot's loads are issued before this one's products.
// - The loop over a block's tiles is a few instructions besides its loads and products: the
//   positions a lane loads and stores are stepped by additions (grouped::Cursor), the slots'
//   offsets added to one base address, no division. Where a block's phase has every tap (fwd,
//   bwd_data at stride 1) the slot loop has no test.
// - The weights are laid out as the products' B fragments by a first launch
//   (grouped::fragment_source(); bwd_data each group's in and out channels swapped), on every
//   call: the weights change between calls.
// - A tile's outputs, converted from f32, go through the warp's staging in shared memory so that
//   each lane stores 16 bytes of a position's channels (the accumulators' lanes hold 4 bytes).
//   Each output is summed by one lane in a fixed order and written once: bitwise reproducible,
//   no atomics.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/grouped.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int block_threads = grouped::warps * warp_size;
constexpr int fragment_threads = 256;
// Blocks of the products kernel an SM holds: its shared memory takes 5 (an input tile near 40 KiB
// and the warps' staging), and so its registers are capped at 102.
constexpr int blocks_per_sm = 5;
// The input tile's target size: a block of 64 positions' width then takes 5 rows, and 5 blocks
// (with their staging, Geo::shared_bytes()) fit an SM's shared memory.
constexpr int tile_target_bytes = 40 * 1024;
constexpr int max_width = 64;
// Bounds as the depthwise kernels' (Note [depthwise kernels]).
constexpr std::int64_t max_coordinate = std::int64_t{1} << 29;
constexpr std::int64_t max_blocks = (std::int64_t{1} << 31) - 1;
constexpr std::int64_t max_elements = std::int64_t{1} << 62;
constexpr int kernel_positions = grouped::taps * grouped::taps;

// D += A * B: A 16 x 8 (row major, two registers), B 8 x 8 (column major), f32 D.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], unsigned a0, unsigned a1, unsigned b);
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], unsigned a0, unsigned a1, unsigned b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], unsigned a0, unsigned a1,
                                                   unsigned b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
}

// Two 8x8 matrices of 16-bit elements from shared memory: lanes 0-7 give the rows of the first,
// 8-15 those of the second; lane l receives row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of
// each (the A fragment of mma.m16n8k8). `address`: the shared-memory address of this lane's row.
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(address));
}

// grouped::fragment_source(): the weights as the products' B fragments, two halves a fragment.
template <typename T>
__global__ void __launch_bounds__(fragment_threads)
    fragments_kernel(grouped::Geo g, const T* __restrict__ w, T* __restrict__ laid) {
  wait_for_prior_grids();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * fragment_threads + threadIdx.x;
  if (i >= grouped::fragments(g) * 2) return;
  const std::int64_t source = grouped::fragment_source(g, i / 2, static_cast<int>(i % 2));
  laid[i] = source >= 0 ? w[source] : from_float<T>(0.0f);
}

// Note [grouped products]. InBlocks: products per tap and 8 output channels; AllTaps: every
// block's phase has the 9 taps (fwd, and bwd_data at stride 1).
template <typename T, int InBlocks, bool AllTaps>
__global__ void __launch_bounds__(block_threads, blocks_per_sm)
    products_kernel(grouped::Geo g, const T* __restrict__ a, const unsigned* __restrict__ laid,
                    T* __restrict__ out) {
  wait_for_prior_grids();
  extern __shared__ uint4 shared[];
  T* tile = reinterpret_cast<T*>(shared);
  const grouped::BlockOrigin o = grouped::origin_of(g, blockIdx.x);
  {
    // Thread i copies chunk i % 4 of tile positions i / 4, i / 4 + 32, ...: the first
    // grouped::first_rows() rows as one group of copies, the rest as a second.
    constexpr int stride = block_threads / 4;
    const int k = static_cast<int>(threadIdx.x) % 4;
    const int cols = g.in_cols();
    const int split = grouped::first_rows(g) * cols;
    const int positions = g.in_rows() * cols;
    grouped::Cursor q = grouped::cursor_at(static_cast<int>(threadIdx.x) / 4, cols);
    int position = static_cast<int>(threadIdx.x) / 4;
    const auto copy = [&] {
      const std::int64_t source = grouped::chunk_source(g, o, q, k);
      T* to = tile + position * grouped::column_halves + k * 8;
      if (source >= 0) {
        __pipeline_memcpy_async(to, a + source, 16);
      } else {
        *reinterpret_cast<uint4*>(to) = make_uint4(0u, 0u, 0u, 0u);
      }
      grouped::advance(q, stride, cols);
    };
    for (; position < split; position += stride) copy();
    __pipeline_commit();
    for (; position < positions; position += stride) copy();
    __pipeline_commit();
  }
  constexpr int OutBlocks = grouped::warps / InBlocks;
  const int lane = static_cast<int>(threadIdx.x) % warp_size;
  const int warp = static_cast<int>(threadIdx.x) / warp_size;
  const grouped::WarpShare share = grouped::warp_share(InBlocks, warp);
  grouped::PhaseSlots slots{kernel_positions, grouped::taps, 0};
  if constexpr (!AllTaps) slots = grouped::phase_slots(g, o.phase_h, o.phase_w);
  // Per slot: its weights' fragments and its offset in the tile (bytes), both in registers.
  unsigned b[kernel_positions][OutBlocks][InBlocks];
  unsigned offset[kernel_positions];
#pragma unroll
  for (int t = 0; t < kernel_positions; ++t) {
    const bool on = AllTaps || t < slots.count;
    offset[t] = on ? static_cast<unsigned>(grouped::slot_offset(g, o, slots, t)) * 2u : 0u;
#pragma unroll
    for (int ob = 0; ob < OutBlocks; ++ob) {
#pragma unroll
      for (int ib = 0; ib < InBlocks; ++ib) {
        const std::int64_t fragment =
            ((static_cast<std::int64_t>(slots.first + t) * (g.channels / 8) + o.channel / 8 +
              share.first_block + ob) *
                 InBlocks +
             ib) *
                warp_size +
            lane;
        b[t][ob][ib] = on ? laid[fragment] : 0u;
      }
    }
  }
  const int first_in_block = grouped::in_block(g, share.first_block, 0);
  const auto tile_address = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  // The warp's staging: tile_rows rows of staging_pitch() bytes.
  const unsigned staging = tile_address + static_cast<unsigned>(g.tile_bytes()) +
                           static_cast<unsigned>(warp * grouped::tile_rows * g.staging_pitch());
  // A lane gives ldmatrix the row of position lane % 16 of a tile (qa), and stores 16 bytes of
  // the staged rows lane / OutBlocks + i * store_rows (qs[i]).
  constexpr int store_rows = warp_size / OutBlocks;
  constexpr int store_passes = (grouped::tile_rows + store_rows - 1) / store_rows;
  const int first_position = share.first_tile * grouped::tile_rows;
  const int step = share.tile_step * grouped::tile_rows;
  grouped::Cursor qa = grouped::cursor_at(first_position + lane % 16, g.tw);
  grouped::Cursor qs[store_passes];
#pragma unroll
  for (int i = 0; i < store_passes; ++i)
    qs[i] = grouped::cursor_at(first_position + lane / OutBlocks + i * store_rows, g.tw);
  // A tile of the warp's, its products and stores.
  const auto run_tile = [&] {
    const unsigned base =
        tile_address + static_cast<unsigned>(grouped::a_base(g, qa, first_in_block)) * 2u;
    float d[OutBlocks][4] = {};
    // The loads of the next slot are issued before the products of this one.
    unsigned a[2][OutBlocks][InBlocks][2];
#pragma unroll
    for (int ob = 0; ob < OutBlocks; ++ob) {
#pragma unroll
      for (int ib = 0; ib < InBlocks; ++ib) {
        ldmatrix_x2(a[0][ob][ib][0], a[0][ob][ib][1],
                    base + offset[0] + grouped::product_block(InBlocks, ob, ib) * 16u);
      }
    }
#pragma unroll
    for (int t = 0; t < kernel_positions; ++t) {
      if (!AllTaps && t >= slots.count) break;
      if (t + 1 < kernel_positions && (AllTaps || t + 1 < slots.count)) {
#pragma unroll
        for (int ob = 0; ob < OutBlocks; ++ob) {
#pragma unroll
          for (int ib = 0; ib < InBlocks; ++ib) {
            ldmatrix_x2(a[(t + 1) % 2][ob][ib][0], a[(t + 1) % 2][ob][ib][1],
                        base + offset[t + 1] + grouped::product_block(InBlocks, ob, ib) * 16u);
          }
        }
      }
#pragma unroll
      for (int ob = 0; ob < OutBlocks; ++ob) {
#pragma unroll
        for (int ib = 0; ib < InBlocks; ++ib)
          mma<T>(d[ob], a[t % 2][ob][ib][0], a[t % 2][ob][ib][1], b[t][ob][ib]);
      }
    }
    // Through the staging: each lane's accumulators (rows lane / 4 and lane / 4 + 8, channels
    // 8 ob + 2 (lane % 4) and the next) in, 16 bytes of a row per lane out.
#pragma unroll
    for (int ob = 0; ob < OutBlocks; ++ob) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        Pack<T, 2> v;
        v.v[0] = from_float<T>(d[ob][2 * half]);
        v.v[1] = from_float<T>(d[ob][2 * half + 1]);
        const unsigned at =
            staging + static_cast<unsigned>((lane / 4 + 8 * half) * g.staging_pitch() + ob * 16 +
                                            (lane % 4) * 4);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at),
                     "r"(*reinterpret_cast<const unsigned*>(&v))
                     : "memory");
      }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < store_passes; ++i) {
      const int row = lane / OutBlocks + i * store_rows;
      if (row >= grouped::tile_rows) continue;
      const int part = lane % OutBlocks;
      const std::int64_t at = grouped::output_index(g, o, qs[i], (share.first_block + part) * 8);
      if (at < 0) continue;
      uint4 v;
      asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(staging + static_cast<unsigned>(row * g.staging_pitch() + part * 16))
                   : "memory");
      *reinterpret_cast<uint4*>(out + at) = v;
    }
    __syncwarp();
    grouped::advance(qa, step, g.tw);
#pragma unroll
    for (int i = 0; i < store_passes; ++i) grouped::advance(qs[i], step, g.tw);
  };
  // The tiles of the first rows while the rest of the input tile arrives, then the others.
  const int tiles = g.position_tiles();
  int pt = share.first_tile;
  __pipeline_wait_prior(1);
  __syncthreads();
  for (const int ready = grouped::ready_tiles(g); pt < ready; pt += share.tile_step) run_tile();
  __pipeline_wait_prior(0);
  __syncthreads();
  for (; pt < tiles; pt += share.tile_step) run_tile();
}

template <typename T, int InBlocks>
cudaError_t launch_products(const grouped::Geo& g, const T* a, const unsigned* laid, T* out,
                            const Queue& queue) {
  const bool all_taps = g.phases_h * g.phases_w == 1;
  auto* kernel =
      all_taps ? products_kernel<T, InBlocks, true> : products_kernel<T, InBlocks, false>;
  return launch(queue, kernel, dim3(static_cast<unsigned>(g.blocks)), dim3(block_threads),
                g.shared_bytes(), g, a, laid, out);
}

template <typename T>
cudaError_t launch_typed(const grouped::Geo& g, const void* a, const void* w, void* out,
                         void* workspace, const Queue& queue) {
  T* laid = static_cast<T*>(workspace);
  const std::int64_t halves = grouped::fragments(g) * 2;
  const cudaError_t status =
      launch(queue, fragments_kernel<T>,
             dim3(static_cast<unsigned>((halves + fragment_threads - 1) / fragment_threads)),
             dim3(fragment_threads), 0, g, static_cast<const T*>(w), laid);
  if (status != cudaSuccess) return status;
  const T* in = static_cast<const T*>(a);
  T* dst = static_cast<T*>(out);
  const auto* fragments = static_cast<const unsigned*>(workspace);
  switch (g.in_blocks) {
    case 1: return launch_products<T, 1>(g, in, fragments, dst, queue);
    case 2: return launch_products<T, 2>(g, in, fragments, dst, queue);
    case 4: return launch_products<T, 4>(g, in, fragments, dst, queue);
    default: return cudaErrorInvalidValue;
  }
}

// grouped_unsupported() but for the bound on blocks, which needs the geometry.
const char* shape_unsupported(const GroupedShape& shape) {
  if (shape.batch < 0) return "the shape has a negative batch";
  if (shape.type == GroupedType::f32)
    return "the grouped kernel runs f16 and bf16 only (tensor-core products)";
  if (shape.groups < 2) return "the grouped kernel runs convolutions of 2 or more groups";
  const std::int64_t per_group = shape.in_per_group;
  if (shape.out_per_group != per_group ||
      (per_group != 4 && per_group != 8 && per_group != 16 && per_group != 32))
    return "the grouped kernel runs groups of 4, 8, 16 or 32 channels, in and out alike";
  if ((shape.groups * per_group) % grouped::tile_channels != 0)
    return "the grouped kernel needs a channel count that is a multiple of 32";
  if (shape.kernel[0] != 1 || shape.kernel[1] != grouped::taps || shape.kernel[2] != grouped::taps)
    return "the grouped kernel runs 3x3 kernels (of depth 1 in 3-D) only";
  for (int i = 0; i < 3; ++i) {
    if (shape.input[i] < 1 || shape.output[i] < 1 || shape.stride[i] < 1 || shape.dilation[i] < 1 ||
        shape.pad_before[i] < 0)
      return "a spatial size, stride or dilation below 1, or a negative padding";
    if (shape.input[i] > max_coordinate || shape.output[i] > max_coordinate ||
        shape.pad_before[i] > max_coordinate)
      return "spatial sizes or paddings beyond 2^29";
  }
  if (shape.stride[0] != 1 || shape.pad_before[0] != 0 || shape.input[0] != shape.output[0])
    return "the grouped kernel runs 3-D convolutions at depth stride 1 without depth padding only";
  if (shape.stride[1] > 2 || shape.stride[2] > 2)
    return "the grouped kernel runs a stride of 1 or 2 along H and W only";
  if (shape.dilation[1] != 1 || shape.dilation[2] != 1)
    return "the grouped kernel runs kernels without dilation only";
  // Element indices are 64-bit: src and dst below 2^62 elements.
  const std::int64_t channels = shape.groups * per_group;
  const std::int64_t plane = static_cast<std::int64_t>(std::max(shape.input[1], shape.output[1])) *
                             std::max(shape.input[2], shape.output[2]);
  if (channels > max_coordinate ||
      shape.batch * static_cast<std::int64_t>(shape.input[0]) > max_elements / (plane * channels))
    return "src or dst holds 2^62 elements or more";
  return nullptr;
}

const char* blocks_unsupported(const grouped::Geo& g) {
  return g.blocks > max_blocks ? "the grouped kernel needs 2^31 blocks or more" : nullptr;
}

// The shape checked as grouped_unsupported() does, its geometry worked out once.
template <bool Forward>
cudaError_t run_direction(const GroupedShape& shape, const void* a, const void* w, void* out,
                          void* workspace, const Queue& queue) {
  if (shape_unsupported(shape) != nullptr) return cudaErrorInvalidValue;
  const grouped::Geo g = grouped::geo(shape, Forward);
  if (blocks_unsupported(g) != nullptr) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  if (!aligned(a, 16) || !aligned(out, 16) || !aligned(workspace, 16))
    return cudaErrorMisalignedAddress;
  switch (shape.type) {
    case GroupedType::f16: return launch_typed<__half>(g, a, w, out, workspace, queue);
    case GroupedType::bf16: return launch_typed<__nv_bfloat16>(g, a, w, out, workspace, queue);
    case GroupedType::f32: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

grouped::Geo grouped::geo(const GroupedShape& shape, bool forward) {
  const int* read = forward ? shape.input : shape.output;
  const int* written = forward ? shape.output : shape.input;
  Geo g;
  g.a_h = read[1];
  g.a_w = read[2];
  g.o_h = written[1];
  g.o_w = written[2];
  g.pad_h = shape.pad_before[1];
  g.pad_w = shape.pad_before[2];
  g.stride_h = shape.stride[1];
  g.stride_w = shape.stride[2];
  g.backward = !forward;
  g.channels = static_cast<int>(shape.groups * shape.in_per_group);
  g.per_group = static_cast<int>(shape.in_per_group);
  g.in_blocks = std::max(1, g.per_group / 8);
  g.phases_h = forward ? 1 : g.stride_h;
  g.phases_w = forward ? 1 : g.stride_w;
  g.grid_h = (g.o_h + g.phases_h - 1) / g.phases_h;
  g.grid_w = (g.o_w + g.phases_w - 1) / g.phases_w;
  g.tw = std::min(g.grid_w, max_width);
  const int row_bytes = g.in_cols() * column_halves * 2;
  g.th = std::clamp((tile_target_bytes / row_bytes - taps) / g.step_h() + 1, 1, g.grid_h);
  g.row_tiles = (g.grid_h + g.th - 1) / g.th;
  g.col_tiles = (g.grid_w + g.tw - 1) / g.tw;
  g.channel_tiles = g.channels / tile_channels;
  g.planes = shape.batch * shape.input[0];
  g.blocks = g.planes * g.phases_h * g.phases_w * g.row_tiles * g.col_tiles * g.channel_tiles;
  return g;
}


const char* grouped_unsupported(const GroupedShape& shape, bool forward) {
  if (const char* reason = shape_unsupported(shape)) return reason;
  return blocks_unsupported(grouped::geo(shape, forward));
}

std::size_t grouped_workspace_bytes(const GroupedShape& shape) {
  // bwd_data's domain is within fwd's, and the count is the same: taps x channels / 8 x
  // in_blocks x 32 lanes x 4 bytes.
  if (grouped_unsupported(shape, true) != nullptr) return 0;
  const grouped::Geo g = grouped::geo(shape, true);
  return static_cast<std::size_t>(grouped::fragments(g)) * 4;
}

cudaError_t grouped_fwd(const GroupedShape& shape, const void* src, const void* weights, void* dst,
                        void* workspace, const Queue& queue) {
  return run_direction<true>(shape, src, weights, dst, workspace, queue);
}

cudaError_t grouped_bwd_data(const GroupedShape& shape, const void* diff_dst, const void* weights,
                             void* diff_src, void* workspace, const Queue& queue) {
  return run_direction<false>(shape, diff_dst, weights, diff_src, workspace, queue);
}

}  // namespace dnnx::cudnn::kernels
