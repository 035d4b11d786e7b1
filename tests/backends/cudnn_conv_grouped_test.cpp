// dnnx's grouped convolution kernel on the tensor cores in the cudnn backend
// (cudnn:kernel:grouped:mma, Note [grouped candidates]): where it is listed as supported and why
// not (host-side), its launch's shared memory within the default limit over a sweep of sizes, its
// blocks run on the host against the reference over a case table, the index arithmetic the kernel
// uses (grouped::) with its matrix loads and products emulated (no GPU either), and on a GPU every
// supported case in f16 and bf16 against the reference, the overwrite of the output and bitwise
// determinism.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_grouped.hpp"
#include "backends/cudnn/kernels/grouped.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/conv_gpu.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {
namespace {

namespace grouped = cudnn::kernels::grouped;

constexpr DType kernel_dtypes[] = {DType::f16, DType::bf16};

struct Case {
  std::string name;
  ConvDesc desc;  // f16 channels_last; the GPU test runs it in f16 and bf16
};

// A grouped convolution of `groups` groups of src[1] / groups channels in and out.
ConvDesc grouped_desc(const Dims& src, std::int64_t groups, const Dims& kernel,
                      const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& pad,
                      const std::vector<std::int64_t>& dilation = {1}) {
  std::vector<std::int64_t> weights{src[1], src[1] / groups};
  for (int i = 0; i < kernel.rank(); ++i) weights.push_back(kernel[i]);
  ConvDesc desc =
      ConvDesc::from_shapes(src, Dims(weights), stride, pad, dilation, groups, DType::f16);
  desc.layout = Layout::channels_last;
  return desc;
}

std::vector<Case> cases() {
  std::vector<Case> table{
      {"4_per_group_odd_sizes", grouped_desc({2, 32, 13, 11}, 8, {3, 3}, {1}, {1})},
      {"8_per_group", grouped_desc({2, 64, 9, 10}, 8, {3, 3}, {1}, {1})},
      {"16_per_group", grouped_desc({2, 64, 7, 9}, 4, {3, 3}, {1}, {1})},
      {"32_per_group", grouped_desc({1, 64, 5, 6}, 2, {3, 3}, {1}, {1})},
      {"four_channel_tiles", grouped_desc({2, 128, 6, 7}, 32, {3, 3}, {1}, {1})},
      // 70 columns: two column tiles of 64, the second partial; 12 rows of 64-wide tiles: row
      // tiles of 5, the last partial.
      {"column_tiles", grouped_desc({1, 32, 5, 70}, 8, {3, 3}, {1}, {1})},
      {"row_tiles", grouped_desc({1, 32, 12, 64}, 4, {3, 3}, {1}, {1})},
      {"height1", grouped_desc({2, 32, 1, 17}, 8, {3, 3}, {1}, {1})},
      {"no_padding", grouped_desc({2, 32, 4, 6}, 8, {3, 3}, {1}, {0})},
      {"padding_2", grouped_desc({1, 32, 5, 4}, 4, {3, 3}, {1}, {2})},
      {"batch1_1x1_spatial", grouped_desc({1, 32, 1, 1}, 8, {3, 3}, {1}, {1})},
      {"3d_1x3x3", grouped_desc({2, 32, 3, 6, 7}, 4, {1, 3, 3}, {1}, {0, 1, 1})},
      // Stride 2: bwd_data in the stride's phases, odd and even sizes.
      {"stride2", grouped_desc({2, 64, 9, 10}, 8, {3, 3}, {2}, {1})},
      {"stride2_16_per_group", grouped_desc({1, 64, 8, 7}, 4, {3, 3}, {2}, {1})},
      {"stride_2x1_no_padding", grouped_desc({2, 32, 7, 9}, 8, {3, 3}, {2, 1}, {0})},
      {"stride_1x2_padding_2", grouped_desc({1, 32, 6, 11}, 4, {3, 3}, {1, 2}, {2})},
      {"stride2_column_tiles", grouped_desc({1, 32, 3, 140}, 8, {3, 3}, {2}, {1})},
  };
  // Per-side padding (TensorFlow's SAME for even sizes), and padding beyond the window.
  ConvDesc after = grouped_desc({2, 32, 10, 12}, 8, {3, 3}, {1}, {0});
  after.pad_after = {2, 1, 0};
  table.push_back({"pad_after_only", after});
  ConvDesc same = grouped_desc({2, 32, 10, 12}, 8, {3, 3}, {2}, {0});
  same.pad_after = {1, 1, 0};
  table.push_back({"stride2_pad_after_only", same});
  ConvDesc wide = grouped_desc({2, 32, 9, 8}, 8, {3, 3}, {1}, {0});
  wide.pad_before = {3, 0, 0};
  wide.pad_after = {0, 4, 0};
  table.push_back({"padding_beyond_the_window", wide});
  for (Case& c : table) c.desc.validate();
  return table;
}

ConvDesc with(ConvDesc desc, DType dtype, Layout layout = Layout::channels_last) {
  desc.dtype = dtype;
  desc.layout = layout;
  return desc;
}

std::string reason(const ConvDesc& desc, Direction direction) {
  const std::vector<AlgoInfo> infos = cudnn::grouped_candidates(desc, direction);
  return infos.size() == 1 ? infos[0].reason : "(listed " + std::to_string(infos.size()) + ")";
}

// ---------------------------------------------------------------------------------------------
// The listing (host-side: no GPU needed).

TEST(CudnnConvGrouped, ListsOneCandidateWithItsDomain) {
  const ConvDesc base = grouped_desc({2, 32, 13, 11}, 8, {3, 3}, {1}, {1});
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const std::vector<AlgoInfo> infos = cudnn::grouped_candidates(base, direction);
    ASSERT_EQ(infos.size(), 1u);
    const AlgoInfo& info = infos[0];
    EXPECT_EQ(info.id, cudnn::grouped_id);
    EXPECT_TRUE(cudnn::is_grouped_id(info.id));
    EXPECT_TRUE(info.deterministic);
    EXPECT_TRUE(info.has_note("kernel"));
    EXPECT_EQ(info.supported, direction != Direction::bwd_weights) << info.reason;
    // The weights as fragments: 9 taps x 4 blocks of 8 output channels x 1 product x 32 lanes x
    // 4 bytes.
    EXPECT_EQ(info.workspace_bytes, info.supported ? 9u * 4u * 32u * 4u : 0u);
  }
  EXPECT_NE(reason(base, Direction::bwd_weights).find("fwd and bwd_data only"), std::string::npos);
  // Groups of 32: four products per tap and block of 8.
  const ConvDesc wide = grouped_desc({1, 64, 5, 6}, 2, {3, 3}, {1}, {1});
  const std::vector<AlgoInfo> infos = cudnn::grouped_candidates(wide, Direction::fwd);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].workspace_bytes, 9u * 8u * 4u * 32u * 4u);
  EXPECT_FALSE(cudnn::is_grouped_id("cudnn:kernel:grouped:"));
}

TEST(CudnnConvGrouped, SaysWhyItCannotRun) {
  const ConvDesc base = grouped_desc({2, 32, 13, 11}, 8, {3, 3}, {1}, {1});
  EXPECT_EQ(reason(base, Direction::fwd), "");
  EXPECT_EQ(reason(with(base, DType::bf16), Direction::bwd_data), "");
  EXPECT_NE(reason(with(base, DType::f32), Direction::fwd).find("f16 and bf16"), std::string::npos);
  const ConvDesc dense = grouped_desc({2, 32, 9, 9}, 1, {3, 3}, {1}, {1});
  EXPECT_NE(reason(dense, Direction::fwd).find("groups=1"), std::string::npos);
  const ConvDesc depthwise = grouped_desc({2, 32, 9, 9}, 32, {3, 3}, {1}, {1});
  EXPECT_NE(reason(depthwise, Direction::fwd).find("depthwise"), std::string::npos);
  EXPECT_NE(
      reason(with(base, DType::f16, Layout::channels_first), Direction::fwd).find("channels_last"),
      std::string::npos);
  const ConvDesc two = grouped_desc({2, 32, 9, 9}, 16, {3, 3}, {1}, {1});
  EXPECT_NE(reason(two, Direction::fwd).find("4, 8, 16 or 32 channels"), std::string::npos);
  const ConvDesc sixty_four = grouped_desc({2, 128, 9, 9}, 2, {3, 3}, {1}, {1});
  EXPECT_NE(reason(sixty_four, Direction::fwd).find("4, 8, 16 or 32 channels"), std::string::npos);
  ConvDesc uneven =
      ConvDesc::from_shapes({2, 32, 9, 9}, {64, 4, 3, 3}, {1}, {1}, {1}, 8, DType::f16);
  uneven.layout = Layout::channels_last;
  EXPECT_NE(reason(uneven, Direction::fwd).find("in and out alike"), std::string::npos);
  const ConvDesc c48 = grouped_desc({2, 48, 9, 9}, 12, {3, 3}, {1}, {1});
  EXPECT_NE(reason(c48, Direction::fwd).find("multiple of 32"), std::string::npos);
  const ConvDesc k5 = grouped_desc({2, 32, 9, 9}, 8, {5, 5}, {1}, {2});
  EXPECT_NE(reason(k5, Direction::fwd).find("3x3 kernels"), std::string::npos);
  const ConvDesc k333 = grouped_desc({2, 32, 4, 9, 9}, 8, {3, 3, 3}, {1}, {1});
  EXPECT_NE(reason(k333, Direction::fwd).find("3x3 kernels"), std::string::npos);
  const ConvDesc depth2 = grouped_desc({2, 32, 4, 9, 9}, 8, {1, 3, 3}, {2, 1, 1}, {0, 1, 1});
  EXPECT_NE(reason(depth2, Direction::fwd).find("depth stride 1"), std::string::npos);
  const ConvDesc dilated = grouped_desc({2, 32, 9, 9}, 8, {3, 3}, {1}, {2}, {2});
  EXPECT_NE(reason(dilated, Direction::fwd).find("without dilation"), std::string::npos);
  const ConvDesc s2 = grouped_desc({2, 32, 9, 9}, 8, {3, 3}, {2}, {1});
  EXPECT_EQ(reason(s2, Direction::fwd), "");
  EXPECT_EQ(reason(s2, Direction::bwd_data), "");
  const ConvDesc s3 = grouped_desc({2, 32, 9, 9}, 8, {3, 3}, {1, 3}, {1});
  EXPECT_NE(reason(s3, Direction::fwd).find("stride of 1 or 2"), std::string::npos);
  EXPECT_NE(reason(s3, Direction::bwd_data).find("stride of 1 or 2"), std::string::npos);
  const ConvDesc p3 = grouped_desc({2, 32, 9, 9}, 8, {3, 3}, {1}, {3});
  EXPECT_EQ(reason(p3, Direction::fwd), "");
  EXPECT_EQ(reason(p3, Direction::bwd_data), "");
  // Sizes beyond the kernel's 32-bit spatial arithmetic.
  ConvDesc huge = grouped_desc({1, 32, 4, 4}, 8, {3, 3}, {1}, {1});
  huge.pad_before[0] = huge.pad_after[0] = std::int64_t{1} << 30;
  EXPECT_NE(reason(huge, Direction::fwd).find("2^29"), std::string::npos);
}

// The launch's shared memory (the input tile and the warps' staging) stays within the 48 KiB a
// kernel gets without opting in, over sizes from 1 to beyond a block's 64 columns, both strides,
// paddings, group sizes and directions; every block holds a tile of at least one row.
TEST(CudnnConvGrouped, SharedMemoryStaysWithinTheDefaultLimit) {
  std::size_t checked = 0;
  std::size_t largest = 0;
  for (std::int64_t size : {1, 2, 3, 5, 7, 14, 16, 17, 28, 56, 63, 64, 65, 100, 129, 224, 513}) {
    for (std::int64_t stride : {1, 2}) {
      for (std::int64_t pad : {0, 1, 3}) {
        for (std::int64_t per_group : {4, 8, 16, 32}) {
          if (size + 2 * pad < 3) continue;  // no output position
          const ConvDesc desc =
              grouped_desc({1, 64, size, size + 3}, 64 / per_group, {3, 3}, {stride}, {pad});
          for (Direction direction : {Direction::fwd, Direction::bwd_data}) {
            if (!reason(desc, direction).empty()) continue;
            const grouped::Geo g =
                grouped::geo(cudnn::grouped_shape(desc), direction == Direction::fwd);
            const std::string where = test::conv_context(desc, direction, "grouped");
            EXPECT_LE(g.shared_bytes(), std::size_t{48} * 1024) << where;
            EXPECT_GE(g.th, 1) << where;
            EXPECT_LE(g.tw, 64) << where;
            largest = std::max(largest, g.shared_bytes());
            ++checked;
          }
        }
      }
    }
  }
  std::cout << "[ grouped  ] " << checked << " geometries, at most " << largest
            << " bytes of shared memory\n";
  EXPECT_GT(checked, 500u);
}

// ---------------------------------------------------------------------------------------------
// The blocks on the host (no GPU needed): every block of the launch, its input tile copied as
// the threads do (grouped::chunk_source() at positions stepped by grouped::advance()) in the
// kernel's two groups, the second's rows NaN while the tiles of the first (grouped::ready_tiles())
// run, each warp's share of the tiles (grouped::warp_share()) and its products over its phase's
// slots (grouped::phase_slots(), grouped::slot_offset()) from the matrix rows at
// grouped::a_base() and the weights laid out by grouped::fragment_source(),
// the products in f32 as mma.m16n8k8 does them (A's row m the 8 elements at lane m's address,
// B's column n the fragments of lanes 4n ... 4n + 3), and the stores at
// grouped::output_index(), the positions stepped a tile at a time as the lanes step them. In f32
// throughout: the arithmetic of indices, not of f16, is under test.

// What the kernel writes for (desc, direction) (desc f16 or bf16), from f32 operands of desc's
// shapes, in the output's memory order; NaN where nothing was written.
std::vector<float> host_run(const ConvDesc& desc, Direction direction,
                            const test::ConvOperands& operands) {
  const cudnn::kernels::GroupedShape shape = cudnn::grouped_shape(desc);
  const bool forward = direction == Direction::fwd;
  const grouped::Geo g = grouped::geo(shape, forward);
  const auto* w = static_cast<const float*>(operands.weights.data());
  std::vector<float> laid(static_cast<std::size_t>(grouped::fragments(g) * 2));
  for (std::size_t i = 0; i < laid.size(); ++i) {
    const std::int64_t source =
        grouped::fragment_source(g, static_cast<std::int64_t>(i / 2), static_cast<int>(i % 2));
    laid[i] = source >= 0 ? w[source] : 0.0f;
  }
  const auto* a = static_cast<const float*>((forward ? operands.src : operands.diff_dst).data());
  std::vector<float> out(
      static_cast<std::size_t>(test::conv_output_dims(desc, direction).product()),
      std::numeric_limits<float>::quiet_NaN());
  std::vector<float> tile(g.tile_bytes() / 2);
  constexpr int threads = grouped::warps * 32;
  for (std::int64_t block = 0; block < g.blocks; ++block) {
    const grouped::BlockOrigin o = grouped::origin_of(g, block);
    std::fill(tile.begin(), tile.end(), std::numeric_limits<float>::quiet_NaN());
    // The copies of the first rows (group 0) or of the others (group 1).
    const int split = grouped::first_rows(g) * g.in_cols();
    const int positions = g.in_rows() * g.in_cols();
    const auto copy_group = [&](int group) {
      for (int thread = 0; thread < threads; ++thread) {
        const int k = thread % 4;
        grouped::Cursor q = grouped::cursor_at(thread / 4, g.in_cols());
        for (int position = thread / 4; position < positions; position += threads / 4) {
          const std::int64_t source = grouped::chunk_source(g, o, q, k);
          if ((position < split) == (group == 0)) {
            for (int e = 0; e < 8; ++e) {
              tile[static_cast<std::size_t>(position * grouped::column_halves + k * 8 + e)] =
                  source >= 0 ? a[source + e] : 0.0f;
            }
          }
          grouped::advance(q, threads / 4, g.in_cols());
        }
      }
    };
    const grouped::PhaseSlots slots = grouped::phase_slots(g, o.phase_h, o.phase_w);
    // Each warp's tiles up to `limit` from where it left off: first those of the first rows, the
    // other rows' elements still NaN in the tile, then the rest.
    struct WarpState {
      int pt;
      grouped::Cursor q[16];
    };
    WarpState states[grouped::warps];
    for (int warp = 0; warp < grouped::warps; ++warp) {
      const grouped::WarpShare share = grouped::warp_share(g.in_blocks, warp);
      states[warp].pt = share.first_tile;
      for (int m = 0; m < 16; ++m)
        states[warp].q[m] = grouped::cursor_at(share.first_tile * grouped::tile_rows + m, g.tw);
    }
    const auto run_tiles = [&](int warp, int limit) {
      const grouped::WarpShare share = grouped::warp_share(g.in_blocks, warp);
      const int first_in_block = grouped::in_block(g, share.first_block, 0);
      grouped::Cursor* q = states[warp].q;
      int& pt = states[warp].pt;
      for (; pt < limit; pt += share.tile_step) {
        for (int ob = 0; ob < g.out_blocks(); ++ob) {
          const int ob_tensor = o.channel / 8 + share.first_block + ob;
          float d[16][8] = {};
          for (int t = 0; t < slots.count; ++t) {
            const int offset = grouped::slot_offset(g, o, slots, t);
            for (int ib = 0; ib < g.in_blocks; ++ib) {
              const int cb = grouped::product_block(g.in_blocks, ob, ib);
              const std::int64_t first =
                  ((static_cast<std::int64_t>(slots.first + t) * (g.channels / 8) + ob_tensor) *
                       g.in_blocks +
                   ib) *
                  32;
              for (int m = 0; m < 16; ++m) {
                const int row = grouped::a_base(g, q[m], first_in_block) + offset + cb * 8;
                for (int n = 0; n < 8; ++n) {
                  for (int k = 0; k < 8; ++k) {
                    const float b =
                        laid[static_cast<std::size_t>((first + n * 4 + k / 2) * 2 + k % 2)];
                    d[m][n] += tile[static_cast<std::size_t>(row + k)] * b;
                  }
                }
              }
            }
          }
          for (int m = 0; m < 16; ++m) {
            for (int n = 0; n < 8; ++n) {
              const std::int64_t at =
                  grouped::output_index(g, o, q[m], (share.first_block + ob) * 8 + n);
              if (at >= 0) out[static_cast<std::size_t>(at)] = d[m][n];
            }
          }
        }
        for (int m = 0; m < 16; ++m)
          grouped::advance(q[m], share.tile_step * grouped::tile_rows, g.tw);
      }
    };
    copy_group(0);
    for (int warp = 0; warp < grouped::warps; ++warp) run_tiles(warp, grouped::ready_tiles(g));
    copy_group(1);
    for (int warp = 0; warp < grouped::warps; ++warp) run_tiles(warp, g.position_tiles());
  }
  return out;
}

TEST(CudnnConvGrouped, HostRunsMatchTheReference) {
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  for (const Case& c : cases()) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data}) {
      if (!reason(c.desc, direction).empty()) continue;
      const ConvDesc f32 = with(c.desc, DType::f32);
      const test::ConvOperands operands =
          test::random_conv_operands(f32, direction, test::seed_from(f32.key()));
      const std::vector<float> expected =
          test::run_conv(reference, f32, direction, operands).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(f32, direction, operands);
      const Dims dims = test::conv_output_dims(f32, direction);
      const std::string where = c.name + ": " + test::conv_context(c.desc, direction, "host");
      std::vector<float> memory = host_run(c.desc, direction, operands);
      const std::vector<float> actual =
          Tensor::view(memory.data(), dims, DType::f32, f32.layout).to_f32();
      EXPECT_TRUE(test::all_finite(actual, dims, "output", where));
      EXPECT_TRUE(test::close_within_scale(actual, expected, scale, dims,
                                           test::conv_tolerance(DType::f32), "output", where));
      ++checked;
    }
  }
  std::cout << "[ grouped  ] " << checked << " host runs checked against the reference\n";
  // Every case (20) in both directions.
  EXPECT_EQ(checked, 40u);
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

// Every supported case and direction against the reference in f16 and bf16; the output starts as
// NaN (an unwritten element fails), and a second run into the first run's values must give the
// same bits (overwrite, not accumulate, and determinism).
TEST(CudnnConvGrouped, MatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  for (const Case& c : cases()) {
    for (DType dtype : kernel_dtypes) {
      const ConvDesc desc = with(c.desc, dtype);
      for (Direction direction : {Direction::fwd, Direction::bwd_data}) {
        if (!reason(desc, direction).empty()) continue;
        const std::string where = c.name + ": " + test::conv_context(desc, direction, "grouped");
        const test::ConvOperands operands =
            test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
        const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
        const std::vector<float> expected =
            test::run_conv(reference, desc, direction, operands).output.to_f32();
        if (!test::check_fixed_candidate(context, desc, direction, cudnn::grouped_id, device,
                                         expected,
                                         test::conv_error_scale(desc, direction, operands), where))
          continue;
        ++checked;
      }
    }
  }
  std::cout << "[ cudnn    ] " << cudnn::grouped_id << ": " << checked
            << " runs matched the reference\n";
  // Every case in both directions, in two dtypes.
  EXPECT_EQ(checked, 80u);
}

}  // namespace
}  // namespace dnnx
