// dnnx's depthwise convolution kernels in the cudnn backend (cudnn:kernel:depthwise:*, Note
// [depthwise candidates]): which variant is listed as supported for which desc and why not
// (host-side, runs without a GPU), then on a GPU every supported variant of every direction
// against the reference backend over a case table (odd sizes, stride 2, dilation 2, multipliers
// 2 and 3, batch 1, 1x1 spatial, 5x5 / 7x7 / 1x7 kernels, per-side padding, 1-D and 3-D, both
// layouts, every dtype), the overwrite of the output, bitwise determinism, and the split
// reduction of bwd_weights with its workspace.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_depthwise.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/conv_gpu.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {
namespace {

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};
constexpr DType all_dtypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr Layout all_layouts[] = {Layout::channels_first, Layout::channels_last};

const std::string direct_id = "cudnn:kernel:depthwise:direct";
const std::string unrolled_id = "cudnn:kernel:depthwise:unrolled";
const std::string packs_id = "cudnn:kernel:depthwise:channel_packs";
const std::string strips_id = "cudnn:kernel:depthwise:strips";

struct Case {
  std::string name;
  ConvDesc desc;  // f32 channels_first; the tests run it in every dtype and layout
};

ConvDesc depthwise(const Dims& src, std::int64_t multiplier, const Dims& kernel,
                   const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& pad,
                   const std::vector<std::int64_t>& dilation = {1}) {
  std::vector<std::int64_t> weights{src[1] * multiplier, 1};
  for (int i = 0; i < kernel.rank(); ++i) weights.push_back(kernel[i]);
  return ConvDesc::from_shapes(src, Dims(weights), stride, pad, dilation, src[1]);
}

std::vector<Case> cases() {
  std::vector<Case> table{
      {"3x3_odd_sizes", depthwise({2, 8, 13, 11}, 1, {3, 3}, {1}, {1})},
      {"3x3_stride2", depthwise({3, 16, 15, 15}, 1, {3, 3}, {2}, {1})},
      {"3x3_dilation2", depthwise({2, 6, 12, 13}, 1, {3, 3}, {1}, {2}, {2})},
      {"3x3_multiplier2", depthwise({2, 4, 9, 10}, 2, {3, 3}, {1}, {1})},
      {"3x3_batch1_1x1_spatial", depthwise({1, 12, 1, 1}, 1, {3, 3}, {1}, {1})},
      {"5x5_stride2", depthwise({2, 24, 17, 14}, 1, {5, 5}, {2}, {2})},
      {"5x5_multiplier3_odd_channels", depthwise({2, 5, 11, 9}, 3, {5, 5}, {1}, {2})},
      {"7x7_odd_channels", depthwise({2, 3, 16, 15}, 1, {7, 7}, {1}, {3})},
      {"1x7_and_7x1", depthwise({2, 6, 9, 12}, 1, {1, 7}, {1}, {0, 3})},
      {"7x1_stride_2x1", depthwise({2, 6, 12, 9}, 1, {7, 1}, {2, 1}, {3, 0})},
      {"1d_k7_stride2", depthwise({2, 6, 33}, 1, {7}, {2}, {3})},
      {"3d_3x3x3", depthwise({1, 4, 5, 6, 7}, 1, {3, 3, 3}, {1}, {1})},
      {"3d_1x3x3_stride2", depthwise({2, 8, 3, 9, 8}, 1, {1, 3, 3}, {1, 2, 2}, {0, 1, 1})},
      // bwd_weights reductions split over several blocks (Note [depthwise kernels]).
      {"3x3_split_reduction", depthwise({4, 8, 48, 48}, 1, {3, 3}, {1}, {1})},
      {"3x3_many_splits_stride2", depthwise({8, 4, 64, 64}, 2, {3, 3}, {2}, {1})},
      // Channel packs' bwd_weights: a prime channel count over two blocks of packs with a partial
      // last pack, few packs sharing a warp with several output columns, split rows.
      {"3x3_prime_channels_two_pack_blocks", depthwise({3, 131, 9, 10}, 1, {3, 3}, {2}, {1})},
      {"5x5_few_channels_split_rows", depthwise({4, 6, 40, 23}, 1, {5, 5}, {1}, {2})},
      {"7x7_many_channels_stride2", depthwise({2, 40, 17, 15}, 1, {7, 7}, {2}, {3})},
      // Their sliding windows (stride 1 along W): a prime channel count whose packs load element
      // by element over rows of two segments, and rows narrower than the kernel.
      {"3x3_prime_channels_stride1", depthwise({2, 97, 7, 21}, 1, {3, 3}, {1}, {1})},
      {"5x5_rows_narrower_than_the_kernel", depthwise({2, 10, 6, 3}, 1, {5, 5}, {1}, {2})},
      {"7x7_stride_2x1", depthwise({2, 12, 15, 19}, 1, {7, 7}, {2, 1}, {3})},
      // Column strips (Note [depthwise column strips]): output heights of 1 and 2 (fewer rows than
      // a strip), strided along W only, padding wider than the kernel's reach on one side, and a
      // depth-1 kernel whose depth stride leaves diff_src planes without a window.
      {"5x5_stride_1x2_height1", depthwise({3, 7, 1, 18}, 1, {5, 5}, {1, 2}, {2})},
      {"3x3_height2_multiplier2", depthwise({2, 5, 2, 9}, 2, {3, 3}, {1}, {1})},
      {"3d_1x5x5_depth_stride2", depthwise({2, 3, 5, 7, 6}, 1, {1, 5, 5}, {2, 1, 1}, {0, 2, 2})},
  };
  // Per-side padding (TensorFlow's SAME for even sizes): after only, and before only.
  ConvDesc after = depthwise({2, 8, 11, 12}, 1, {3, 3}, {2}, {0});
  after.pad_after = {1, 1, 0};
  table.push_back({"3x3_stride2_pad_after_only", after});
  ConvDesc before = depthwise({2, 8, 10, 9}, 1, {3, 3}, {1}, {0});
  before.pad_before = {2, 1, 0};
  table.push_back({"3x3_pad_before_only", before});
  ConvDesc wide = depthwise({2, 4, 9, 8}, 1, {3, 3}, {1}, {0});
  wide.pad_before = {3, 0, 0};
  wide.pad_after = {0, 4, 0};
  table.push_back({"3x3_padding_beyond_the_window", wide});
  for (Case& c : table) c.desc.validate();
  return table;
}

ConvDesc with(ConvDesc desc, DType dtype, Layout layout) {
  desc.dtype = dtype;
  desc.layout = layout;
  return desc;
}

const AlgoInfo* find(const std::vector<AlgoInfo>& infos, const std::string& id) {
  const auto found =
      std::find_if(infos.begin(), infos.end(), [&](const AlgoInfo& info) { return info.id == id; });
  return found == infos.end() ? nullptr : &*found;
}

// ---------------------------------------------------------------------------------------------
// The listing (host-side: no GPU needed).

TEST(CudnnConvDepthwise, ListsFourVariantsWithTheirDomains) {
  const ConvDesc base = depthwise({2, 8, 13, 11}, 1, {3, 3}, {1}, {1});
  for (Direction direction : all_directions) {
    for (Layout layout : all_layouts) {
      const ConvDesc desc = with(base, DType::f16, layout);
      SCOPED_TRACE(test::conv_context(desc, direction, "(list)"));
      const std::vector<AlgoInfo> infos = cudnn::depthwise_candidates(desc, direction);
      ASSERT_EQ(infos.size(), 4u);
      EXPECT_EQ(infos[0].id, packs_id);
      EXPECT_EQ(infos[1].id, strips_id);
      EXPECT_EQ(infos[2].id, unrolled_id);
      EXPECT_EQ(infos[3].id, direct_id);
      for (const AlgoInfo& info : infos) {
        EXPECT_TRUE(info.deterministic) << info.id;
        EXPECT_TRUE(info.has_note("kernel")) << info.id;
        EXPECT_EQ(info.has_note("fixed_order_reduction"), direction == Direction::bwd_weights);
        EXPECT_TRUE(cudnn::is_depthwise_id(info.id));
        EXPECT_EQ(info.supported, info.reason.empty()) << info.id << ": " << info.reason;
        if (direction != Direction::bwd_weights) {
          // channel_packs: the weights transposed (Note [depthwise weight taps]), f16 8 x 9.
          const bool taps = info.id == packs_id && info.supported;
          EXPECT_EQ(info.workspace_bytes, taps ? 8u * 9u * 2u : 0u) << info.id;
        }
      }
      EXPECT_TRUE(infos[2].supported) << infos[2].reason;
      EXPECT_TRUE(infos[3].supported) << infos[3].reason;
      const bool packs = layout == Layout::channels_last;
      EXPECT_EQ(infos[0].supported, packs) << infos[0].reason;
      EXPECT_EQ(infos[1].supported, !packs && direction != Direction::bwd_weights)
          << infos[1].reason;
      if (layout == Layout::channels_first) {
        EXPECT_NE(infos[0].reason.find("channels_last"), std::string::npos) << infos[0].reason;
      } else {
        EXPECT_NE(infos[1].reason.find("channels_first"), std::string::npos) << infos[1].reason;
      }
    }
  }
  EXPECT_FALSE(cudnn::is_depthwise_id("cudnn:kernel:depthwise:"));
  EXPECT_FALSE(cudnn::is_depthwise_id("cudnn:engine:0"));
}

TEST(CudnnConvDepthwise, SaysWhyAVariantCannotRun) {
  auto reason = [](const ConvDesc& desc, Direction direction, const std::string& id) {
    const std::vector<AlgoInfo> infos = cudnn::depthwise_candidates(desc, direction);
    const AlgoInfo* info = find(infos, id);
    return info == nullptr ? std::string("(not listed)") : info->reason;
  };
  // Not depthwise: grouped, and dense.
  const ConvDesc grouped =
      ConvDesc::from_shapes({2, 8, 9, 9}, {8, 2, 3, 3}, {1}, {1}, {1}, 4, DType::f32);
  const ConvDesc dense = ConvDesc::from_shapes({2, 8, 9, 9}, {16, 8, 3, 3}, {1}, {1});
  for (const ConvDesc& desc : {grouped, dense}) {
    for (const std::string& id : {direct_id, unrolled_id, packs_id, strips_id}) {
      const std::string why = reason(desc, Direction::fwd, id);
      EXPECT_NE(why.find("not a depthwise convolution"), std::string::npos) << id << ": " << why;
      EXPECT_NE(why.find("groups="), std::string::npos) << why;
    }
  }
  // A single input channel with groups 1 is depthwise (multiplier 16).
  const ConvDesc one_channel = ConvDesc::from_shapes({2, 1, 9, 9}, {16, 1, 3, 3}, {1}, {1});
  EXPECT_EQ(reason(one_channel, Direction::fwd, direct_id), "");
  // The unrolled variant: 3x3, 5x5 and 7x7 only (1 x 3 x 3 in 3-D too).
  const ConvDesc k7 = depthwise({2, 4, 16, 16}, 1, {7, 7}, {1}, {3});
  EXPECT_EQ(reason(k7, Direction::fwd, unrolled_id), "");
  const ConvDesc k9 = depthwise({2, 4, 16, 16}, 1, {9, 9}, {1}, {4});
  EXPECT_NE(reason(k9, Direction::fwd, unrolled_id).find("3x3, 5x5 and 7x7"), std::string::npos);
  EXPECT_EQ(reason(k9, Direction::fwd, direct_id), "");
  const ConvDesc k133 = depthwise({1, 4, 3, 6, 6}, 1, {1, 3, 3}, {1}, {0, 1, 1});
  EXPECT_EQ(reason(k133, Direction::bwd_weights, unrolled_id), "");
  const ConvDesc k333 = depthwise({1, 4, 4, 6, 6}, 1, {3, 3, 3}, {1}, {1});
  EXPECT_NE(reason(k333, Direction::fwd, unrolled_id), "");
  const ConvDesc k1d = depthwise({1, 4, 20}, 1, {3}, {1}, {1});
  EXPECT_NE(reason(k1d, Direction::fwd, unrolled_id), "");
  // Channel packs: channels_last, multiplier 1; even channels for fwd and bwd_data, 2-D 3x3, 5x5
  // or 7x7 windows (any channel count) for bwd_weights.
  const ConvDesc odd =
      with(depthwise({2, 5, 9, 9}, 1, {3, 3}, {1}, {1}), DType::f16, Layout::channels_last);
  EXPECT_NE(reason(odd, Direction::fwd, packs_id).find("even channel count"), std::string::npos);
  EXPECT_EQ(reason(odd, Direction::bwd_weights, packs_id), "");
  const ConvDesc k1x7 =
      with(depthwise({2, 6, 9, 12}, 1, {1, 7}, {1}, {0, 3}), DType::f16, Layout::channels_last);
  EXPECT_EQ(reason(k1x7, Direction::fwd, packs_id), "");
  EXPECT_NE(reason(k1x7, Direction::bwd_weights, packs_id).find("bwd_weights for 2-D 3x3"),
            std::string::npos);
  const ConvDesc mult =
      with(depthwise({2, 4, 9, 9}, 2, {3, 3}, {1}, {1}), DType::f16, Layout::channels_last);
  EXPECT_NE(reason(mult, Direction::bwd_data, packs_id).find("multiplier of 1"), std::string::npos);
  // Column strips: channels_first fwd (stride 1 or 2 along H) and bwd_data (stride 1), 3x3, 5x5
  // and 7x7 windows of 1 x K x K positions, no dilation.
  EXPECT_EQ(reason(k7, Direction::fwd, strips_id), "");
  EXPECT_EQ(reason(k7, Direction::bwd_data, strips_id), "");
  EXPECT_EQ(reason(k133, Direction::bwd_data, strips_id), "");
  EXPECT_NE(reason(k7, Direction::bwd_weights, strips_id).find("fwd and bwd_data only"),
            std::string::npos);
  EXPECT_NE(reason(k9, Direction::fwd, strips_id).find("3x3, 5x5 and 7x7"), std::string::npos);
  const ConvDesc s2 = depthwise({2, 4, 16, 16}, 1, {5, 5}, {2}, {2});
  EXPECT_EQ(reason(s2, Direction::fwd, strips_id), "");
  EXPECT_NE(reason(s2, Direction::bwd_data, strips_id).find("stride 1 along H and W"),
            std::string::npos);
  const ConvDesc s3 = depthwise({2, 4, 16, 16}, 1, {3, 3}, {3, 1}, {1});
  EXPECT_NE(reason(s3, Direction::fwd, strips_id).find("stride of 1 or 2 along H"),
            std::string::npos);
  const ConvDesc dilated = depthwise({2, 4, 16, 16}, 1, {3, 3}, {1}, {2}, {2});
  EXPECT_NE(reason(dilated, Direction::fwd, strips_id).find("without dilation"), std::string::npos);
  EXPECT_NE(reason(with(k7, DType::f32, Layout::channels_last), Direction::fwd, strips_id)
                .find("channels_first"),
            std::string::npos);
  // Sizes beyond the kernels' 32-bit spatial arithmetic.
  ConvDesc huge = depthwise({1, 1, 4, 4}, 1, {3, 3}, {1}, {1});
  huge.pad_before[0] = huge.pad_after[0] = std::int64_t{1} << 30;
  EXPECT_NE(reason(huge, Direction::fwd, direct_id).find("2^29"), std::string::npos);
  // A sample of 2^31 elements or more.
  const ConvDesc big_sample = depthwise({1, 1 << 16, 1 << 8, 1 << 7}, 1, {1, 1}, {1}, {0});
  EXPECT_NE(reason(big_sample, Direction::fwd, direct_id).find("2^31"), std::string::npos);
}

TEST(CudnnConvDepthwise, BwdWeightsWorkspaceHoldsTheSplitsPartialSums) {
  // 4 x 48 x 48 positions: at least two splits, each channel's 9 partial sums per split in f32.
  const ConvDesc desc = depthwise({4, 8, 48, 48}, 1, {3, 3}, {1}, {1});
  for (const AlgoInfo& info : cudnn::depthwise_candidates(desc, Direction::bwd_weights)) {
    if (!info.supported) continue;
    EXPECT_GT(info.workspace_bytes, 0u) << info.id;
    EXPECT_EQ(info.workspace_bytes % (8 * 9 * sizeof(float)), 0u) << info.id;
  }
  // One small sample: no split, no workspace.
  const ConvDesc small = depthwise({1, 8, 6, 6}, 1, {3, 3}, {1}, {1});
  for (const AlgoInfo& info : cudnn::depthwise_candidates(small, Direction::bwd_weights))
    EXPECT_EQ(info.workspace_bytes, 0u) << info.id;
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

// Every supported depthwise variant of every direction against the reference, in every dtype
// and layout; the output starts as NaN (an unwritten element fails), a second run into an output
// holding the first run's values must give the same bits (overwrite, not accumulate, and
// determinism).
TEST(CudnnConvDepthwise, EveryVariantMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::map<std::string, std::size_t> checked;
  for (const Case& c : cases()) {
    for (DType dtype : all_dtypes) {
      for (Layout layout : all_layouts) {
        const ConvDesc desc = with(c.desc, dtype, layout);
        for (Direction direction : all_directions) {
          const test::ConvOperands operands =
              test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
          const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
          const std::vector<float> expected =
              test::run_conv(reference, desc, direction, operands).output.to_f32();
          const std::vector<float> scale = test::conv_error_scale(desc, direction, operands);
          const std::vector<AlgoInfo> listed = conv_list(context, desc, direction);
          bool any = false;
          for (const std::string& id : {direct_id, unrolled_id, packs_id, strips_id}) {
            const std::string where = c.name + ": " + test::conv_context(desc, direction, id);
            const AlgoInfo* info = find(listed, id);
            ASSERT_NE(info, nullptr) << "not listed\n" << where;
            if (!info->supported) continue;
            if (id == direct_id) any = true;
            if (!test::check_fixed_candidate(context, desc, direction, id, device, expected, scale,
                                             where))
              continue;
            ++checked[id];
          }
          EXPECT_TRUE(any) << "the direct variant is not supported: "
                           << test::conv_context(desc, direction, direct_id);
        }
      }
    }
  }
  for (const auto& [id, count] : checked)
    std::cout << "[ cudnn    ] " << id << ": " << count << " runs matched the reference\n";
  EXPECT_GT(checked[unrolled_id], 0u);
  EXPECT_GT(checked[packs_id], 0u);
  EXPECT_GT(checked[strips_id], 0u);
}

// Exhaustive selection times the depthwise kernels with cuDNN's candidates and runs its pick.
TEST(CudnnConvDepthwise, ExhaustiveSelectionTimesTheKernels) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc =
      with(depthwise({8, 32, 28, 28}, 1, {3, 3}, {2}, {1}), DType::f16, Layout::channels_last);
  for (Direction direction : all_directions) {
    const ProfileResult profile = conv_profile(context, desc, direction);
    std::size_t ran = 0;
    for (const auto& row : profile.rows) {
      if (!cudnn::is_depthwise_id(row.algo.id) || !row.algo.supported) continue;
      const bool timed =
          row.status == CandidateStatus::ok || row.status == CandidateStatus::abandoned;
      EXPECT_TRUE(timed) << row.algo.id << ": " << to_string(row.status) << " " << row.detail;
      ran += timed;
    }
    EXPECT_GE(ran, 2u) << test::conv_context(desc, direction, "(profile)") << "\n"
                       << profile.table();
  }
}

}  // namespace
}  // namespace dnnx
