// dnnx's narrow-channel forward, backward data and backward weights kernels in the cudnn backend
// (cudnn:kernel:narrow:mma, Note [narrow-channel candidates]): where they are listed as supported
// and why not (host-side, runs without a GPU), then on a GPU against the reference backend over a
// case table (1, 2, 3, 5 and 8 input channels; diff_dst channel counts that are multiples of 32,
// of 8 only, and of neither, and beyond one block's 64; stride 1, 2, 3 and per-dim strides, a
// stride larger than the kernel, dilation, per-side padding, 1-D, 2-D and 3-D, rows of several
// blocks, blocks of several tiles along W, segments of 16, 32 and 64 positions, columns over
// several blocks and warps), in f16 and bf16, every direction (the forward kernel where its
// reduction fits), the overwrite of the output and bitwise determinism, and exhaustive searches
// that time them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_narrow.hpp"
#include "ops/context_state.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/conv_gpu.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace dnnx {
namespace {

const std::string narrow = cudnn::narrow_id;

struct Case {
  std::string name;
  ConvDesc desc;  // f16 channels_last; the GPU test runs it in bf16 too
};

ConvDesc conv(const Dims& src, const Dims& weights, const std::vector<std::int64_t>& stride,
              const std::vector<std::int64_t>& pad,
              const std::vector<std::int64_t>& dilation = {1}) {
  ConvDesc desc = ConvDesc::from_shapes(src, weights, stride, pad, dilation, 1, DType::f16);
  desc.layout = Layout::channels_last;
  return desc;
}

std::vector<Case> cases() {
  std::vector<Case> table{
      {"3d_3x3x3_c3_k64", conv({2, 3, 5, 9, 10}, {64, 3, 3, 3, 3}, {1}, {1})},
      {"2d_7x7_stride2_c3_k64", conv({2, 3, 23, 21}, {64, 3, 7, 7}, {2}, {3})},
      {"2d_3x3_stride2_c3_k32", conv({3, 3, 17, 16}, {32, 3, 3, 3}, {2}, {1})},
      {"2d_3x3_c1_k16_unpadded", conv({1, 1, 40, 41}, {16, 1, 3, 3}, {1}, {0})},
      {"2d_3x3_c8_k40", conv({2, 8, 12, 13}, {40, 8, 3, 3}, {1}, {1})},
      {"2d_3x3_dilation2_c5_k37", conv({2, 5, 14, 11}, {37, 5, 3, 3}, {1}, {2}, {2})},
      {"1d_k5_stride3_c2_k24", conv({3, 2, 50}, {24, 2, 5}, {3}, {2})},
      {"2d_stride_2x1_c3_k16", conv({2, 3, 15, 12}, {16, 3, 5, 3}, {2, 1}, {2, 1})},
      {"2d_stride3_larger_than_kernel2_c3_k8", conv({2, 3, 13, 14}, {8, 3, 2, 2}, {3}, {0})},
      {"3d_1x7x7_stride_1x2x2_c3_k45",
       conv({2, 3, 3, 16, 15}, {45, 3, 1, 7, 7}, {1, 2, 2}, {0, 3, 3})},
      {"2d_1x1_c4_k64", conv({2, 4, 9, 7}, {64, 4, 1, 1}, {1}, {0})},
      {"2d_rows_of_several_blocks_c3_k96", conv({1, 3, 61, 67}, {96, 3, 3, 3}, {1}, {1})},
      {"2d_7x7_dilation2_c3_k16", conv({1, 3, 30, 70}, {16, 3, 7, 7}, {1}, {6}, {2})},
      {"2d_3x3_c1_k32_wide_rows", conv({2, 1, 6, 130}, {32, 1, 3, 3}, {1}, {0})},
      {"2d_3x3_stride2_c3_k136_wide_rows", conv({1, 3, 9, 260}, {136, 3, 3, 3}, {2}, {1})},
      {"3d_5x5x5_c8_k24", conv({1, 8, 6, 7, 9}, {24, 8, 5, 5, 5}, {1}, {2})},
      // A depth stride that leaves the last phase plane of one phase beyond the input.
      {"3d_3x3x3_stride2_odd_depth_c3_k16", conv({2, 3, 5, 6, 7}, {16, 3, 3, 3, 3}, {2}, {1})},
      // Few taps a phase and enough tiles for blocks of two rounds along W (Note [narrow
      // rounds]): per phase, 107 tiles of 16 x 16 along W, in 54 blocks, the last with one.
      {"2d_3x3_stride2_c1_k8_rounds_of_tiles", conv({4, 1, 160, 3400}, {8, 1, 3, 3}, {2}, {1})},
  };
  // Per-side padding: after only (TensorFlow's SAME at stride 2), and before only.
  ConvDesc after = conv({2, 3, 12, 11}, {32, 3, 3, 3}, {2}, {0});
  after.pad_after = {1, 1, 0};
  table.push_back({"3x3_stride2_pad_after_only", after});
  ConvDesc before = conv({2, 2, 10, 9}, {16, 2, 3, 3}, {1}, {0});
  before.pad_before = {2, 1, 0};
  table.push_back({"3x3_pad_before_only", before});
  for (Case& c : table) c.desc.validate();
  return table;
}

std::string reason(const ConvDesc& desc, Direction direction) {
  const std::vector<AlgoInfo> infos = cudnn::narrow_candidates(desc, direction);
  EXPECT_EQ(infos.size(), 1u);
  return infos.empty() ? std::string("(not listed)") : infos[0].reason;
}

// ---------------------------------------------------------------------------------------------
// The listing (host-side: no GPU needed).

TEST(CudnnConvNarrow, ListsOneCandidateWithItsDomain) {
  const ConvDesc desc = conv({2, 3, 9, 9}, {64, 3, 3, 3}, {1}, {1});
  const std::vector<AlgoInfo> infos = cudnn::narrow_candidates(desc, Direction::bwd_data);
  ASSERT_EQ(infos.size(), 1u);
  const AlgoInfo& info = infos[0];
  EXPECT_EQ(info.id, narrow);
  EXPECT_TRUE(cudnn::is_narrow_id(info.id));
  EXPECT_FALSE(cudnn::is_narrow_id("cudnn:kernel:narrow:"));
  EXPECT_TRUE(info.supported) << info.reason;
  EXPECT_TRUE(info.deterministic);
  EXPECT_TRUE(info.has_note("kernel"));
  EXPECT_TRUE(info.has_note("tensor_cores"));
  // The weights' fragments (Note [narrow weight fragments]): 9 taps x 2 chunks of 32 channels x
  // 32 lanes x 16 bytes, then 2 chunks of 32 zero elements, then the taps of each dim's phases
  // (Note [narrow phase taps]): 1 + 1 + 1 entries of 24 bytes, 80 with the padding to 16.
  EXPECT_EQ(info.workspace_bytes, 9u * 2u * 32u * 16u + 2u * 64u + 80u);
  // 40 diff_dst channels: two chunks as well; stride 3 along H and 2 along W: 1 + 3 + 2 entries.
  EXPECT_EQ(cudnn::narrow_candidates(conv({2, 3, 9, 9}, {40, 3, 3, 3}, {3, 2}, {1}),
                                     Direction::bwd_data)[0]
                .workspace_bytes,
            9u * 2u * 32u * 16u + 2u * 64u + 144u);
  ConvDesc bf16 = desc;
  bf16.dtype = DType::bf16;
  EXPECT_EQ(reason(bf16, Direction::bwd_data), "");
  // bwd_weights (Note [narrow weight gradients]): 27 columns; the 9-wide rows take segments of
  // 16, 2 x 9 of them split 5 ways (at least 4 units a split), each split's f32 sums of 64 x 27.
  const AlgoInfo weights = cudnn::narrow_candidates(desc, Direction::bwd_weights).at(0);
  EXPECT_EQ(weights.id, narrow);
  EXPECT_TRUE(weights.supported) << weights.reason;
  EXPECT_TRUE(weights.deterministic);
  EXPECT_TRUE(weights.has_note("fixed_order_reduction"));
  EXPECT_EQ(weights.workspace_bytes, 5u * 64u * 27u * 4u);
  EXPECT_FALSE(info.has_note("fixed_order_reduction"));
  // A large problem: 512 splits at most.
  EXPECT_EQ(cudnn::narrow_candidates(conv({30, 3, 16, 112, 112}, {64, 3, 3, 3, 3}, {1}, {1}),
                                     Direction::bwd_weights)[0]
                .workspace_bytes,
            512u * 64u * 81u * 4u);
  EXPECT_EQ(reason(bf16, Direction::bwd_weights), "");
  // fwd (Note [narrow forward]): no workspace, deterministic.
  const AlgoInfo forward = cudnn::narrow_candidates(desc, Direction::fwd).at(0);
  EXPECT_EQ(forward.id, narrow);
  EXPECT_TRUE(forward.supported) << forward.reason;
  EXPECT_TRUE(forward.deterministic);
  EXPECT_EQ(forward.workspace_bytes, 0u);
  EXPECT_FALSE(forward.has_note("fixed_order_reduction"));
  EXPECT_EQ(reason(bf16, Direction::fwd), "");
}

TEST(CudnnConvNarrow, SaysWhyItCannotRun) {
  const ConvDesc desc = conv({2, 3, 9, 9}, {64, 3, 3, 3}, {1}, {1});
  EXPECT_EQ(reason(desc, Direction::fwd), "");
  ConvDesc f32 = desc;
  f32.dtype = DType::f32;
  EXPECT_NE(reason(f32, Direction::bwd_data).find("f16 and bf16"), std::string::npos);
  ConvDesc first = desc;
  first.layout = Layout::channels_first;
  EXPECT_NE(reason(first, Direction::bwd_data).find("channels_last"), std::string::npos);
  const ConvDesc wide = conv({2, 9, 9, 9}, {64, 9, 3, 3}, {1}, {1});
  EXPECT_NE(reason(wide, Direction::bwd_data).find("at most 8 input channels"), std::string::npos);
  EXPECT_NE(reason(wide, Direction::bwd_data).find("in_channels=9"), std::string::npos);
  ConvDesc grouped =
      ConvDesc::from_shapes({2, 4, 9, 9}, {8, 2, 3, 3}, {1}, {1}, {1}, 2, DType::f16);
  grouped.layout = Layout::channels_last;
  EXPECT_NE(reason(grouped, Direction::bwd_data).find("groups 1"), std::string::npos);
  // Coordinates beyond the kernel's 32-bit arithmetic, and beyond int.
  ConvDesc huge = conv({1, 3, 4, 4}, {8, 3, 3, 3}, {1}, {1});
  huge.pad_before[0] = huge.pad_after[0] = std::int64_t{1} << 29;
  EXPECT_NE(reason(huge, Direction::bwd_data).find("2^29"), std::string::npos);
  huge.pad_before[0] = huge.pad_after[0] = std::int64_t{1} << 30;
  EXPECT_NE(reason(huge, Direction::bwd_data).find("2^31"), std::string::npos);
  const ConvDesc phases = conv({1, 3, 300, 300}, {8, 3, 1, 1}, {256}, {0});
  EXPECT_NE(reason(phases, Direction::bwd_data).find("65535"), std::string::npos);
  // bwd_weights: stride 256 along W spreads 16 positions over 3841 input columns.
  EXPECT_NE(reason(phases, Direction::bwd_weights).find("12 KiB"), std::string::npos);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    EXPECT_NE(reason(f32, direction).find("f16 and bf16"), std::string::npos);
    EXPECT_NE(reason(wide, direction).find("in_channels=9"), std::string::npos);
    EXPECT_NE(reason(grouped, direction).find("groups 1"), std::string::npos);
  }
  // bwd_weights: the input rows of 16 positions beyond its 12 KiB tile (8 channels x (15 + 6 x
  // 126 + 1) positions + 7 halves, rounded up to a multiple of 8: 6184 halves), and just within
  // it (dilation 125: 6136).
  const ConvDesc far = conv({1, 8, 3, 1300}, {8, 8, 1, 7}, {1}, {0}, {1, 126});
  EXPECT_NE(reason(far, Direction::bwd_weights).find("12 KiB"), std::string::npos);
  EXPECT_EQ(reason(far, Direction::bwd_data), "");
  const ConvDesc near = conv({1, 8, 3, 1300}, {8, 8, 1, 7}, {1}, {0}, {1, 125});
  EXPECT_EQ(reason(near, Direction::bwd_weights), "");
  // fwd: its 8 KiB tile (4096 halves: the 6184 above are beyond it, 8 x (15 + 6 x 62 + 1) + 7
  // rounded up to 3112 within it) and its reduction of at most 192 columns (3 x 3 x 3 x 8 = 216
  // beyond it, 3 x 3 x 3 x 7 = 189 within it).
  EXPECT_NE(reason(far, Direction::fwd).find("8 KiB"), std::string::npos);
  EXPECT_EQ(reason(conv({1, 8, 3, 1300}, {8, 8, 1, 7}, {1}, {0}, {1, 62}), Direction::fwd), "");
  EXPECT_NE(reason(conv({1, 8, 4, 4, 4}, {8, 8, 3, 3, 3}, {1}, {1}), Direction::fwd).find("192"),
            std::string::npos);
  EXPECT_EQ(reason(conv({1, 7, 4, 4, 4}, {8, 7, 3, 3, 3}, {1}, {1}), Direction::fwd), "");
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

// The kernel against the reference in f16 and bf16; the output starts as NaN (an unwritten
// element fails), and a second run into an output holding the first run's values must give the
// same bits (overwrite, not accumulate, and determinism).
TEST(CudnnConvNarrow, MatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  std::size_t expected_runs = 0;
  for (const Case& c : cases()) {
    for (const auto& [dtype, direction] :
         {std::pair{DType::f16, Direction::fwd}, std::pair{DType::bf16, Direction::fwd},
          std::pair{DType::f16, Direction::bwd_data}, std::pair{DType::bf16, Direction::bwd_data},
          std::pair{DType::f16, Direction::bwd_weights},
          std::pair{DType::bf16, Direction::bwd_weights}}) {
      ConvDesc desc = c.desc;
      desc.dtype = dtype;
      if (direction == Direction::fwd) {
        // The forward kernel's reduction: kernel volume x C of at most 192 (3d_5x5x5_c8_k24's
        // 1000 beyond it).
        std::int64_t columns = desc.in_channels;
        for (const std::int64_t k : desc.kernel) columns *= k;
        if (columns > 192) {
          EXPECT_NE(reason(desc, direction).find("192"), std::string::npos) << c.name;
          continue;
        }
      }
      ++expected_runs;
      const std::string where = c.name + ": " + test::conv_context(desc, direction, narrow);
      const test::ConvOperands operands =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      const std::vector<float> expected =
          test::run_conv(reference, desc, direction, operands).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(desc, direction, operands);
      const std::vector<AlgoInfo> listed = conv_list(context, desc, direction);
      const auto info = std::find_if(listed.begin(), listed.end(),
                                     [](const AlgoInfo& a) { return a.id == narrow; });
      ASSERT_NE(info, listed.end()) << "not listed\n" << where;
      ASSERT_TRUE(info->supported) << info->reason << "\n" << where;
      const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
      if (!test::check_fixed_candidate(context, desc, direction, narrow, device, expected, scale,
                                       where))
        continue;
      ++checked;
    }
  }
  std::cout << "[ cudnn    ] " << narrow << ": " << checked << " runs matched the reference\n";
  EXPECT_EQ(checked, expected_runs);
  EXPECT_GE(expected_runs, 5 * cases().size());
}

// The value of `name` among the facts the context's backend reports ("" when absent).
std::string backend_fact(Context& context, const std::string& name) {
  for (const auto& [key, value] : detail::state_of(context).backend().environment()) {
    if (key == name) return value;
  }
  return "";
}

// The kernels launched dependent on the kernel before them (Note [dependent launches] in
// kernels/common.cuh: the default on sm_90 and later) give the bits they give without: each call
// is queued, with no synchronization, right behind the kernels that wrote its input (the forward
// pass's dst is the weight gradient's diff_dst, and the two are the backward data pass's
// diff_dst and weights), three rounds over the same buffers. bf16, whose range holds the chain's
// sums. Each pass has a context on a stream of its own: contexts on one stream share a backend
// instance, whose settings are read from the environment when it is made (Context::with_stream);
// the streams live as long as the process, as with_stream requires.
TEST(CudnnConvNarrow, DependentLaunchesGiveTheSameBits) {
  DNNX_REQUIRE_GPU();
  ConvDesc desc = conv({2, 3, 6, 19, 18}, {64, 3, 3, 3, 3}, {1}, {1});
  desc.dtype = DType::bf16;
  const test::ConvOperands operands =
      test::random_conv_operands(desc, Direction::fwd, test::seed_from(desc.key()));
  std::vector<Tensor> results[2];
  for (const bool dependent : {true, false}) {
    const test::ScopedEnv env("DNNX_CUDNN_DEPENDENT_LAUNCHES", dependent ? nullptr : "0");
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    Context context = Context(BackendKind::cudnn).with_stream(stream);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    // On, where the device has them (compute capability 9.0 or later); off with the variable.
    const bool sm90 = std::stoi(backend_fact(context, "compute_capability")) >= 9;
    EXPECT_EQ(backend_fact(context, "dependent_launches"), dependent && sm90 ? "on" : "off");
    for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights})
      context.tune().policy(direction) = AlgoPolicy::fixed(narrow);
    const auto nan = [&](Direction direction) {
      return test::device_copy(
          test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout),
          context);
    };
    const Tensor src = test::device_copy(operands.src, context);
    const Tensor weights = test::device_copy(operands.weights, context);
    Tensor dst = nan(Direction::fwd);
    Tensor diff_weights = nan(Direction::bwd_weights);
    Tensor diff_src = nan(Direction::bwd_data);
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(conv_fwd(context, desc, src, weights, dst)->algo.id, narrow);
      EXPECT_EQ(conv_bwd_weights(context, desc, src, dst, diff_weights)->algo.id, narrow);
      EXPECT_EQ(conv_bwd_data(context, desc, dst, diff_weights, diff_src)->algo.id, narrow);
    }
    results[dependent ? 0 : 1] = {test::host_copy_of(dst), test::host_copy_of(diff_weights),
                                  test::host_copy_of(diff_src)};
  }
  const char* names[] = {"dst", "diff_weights", "diff_src"};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(test::all_finite(results[0][i], names[i], "dependent launches"));
    EXPECT_TRUE(test::bitwise_equal(results[0][i], results[1][i], names[i],
                                    "dependent launches against DNNX_CUDNN_DEPENDENT_LAUNCHES=0"));
  }
}

// Exhaustive selection times the kernels with cuDNN's candidates.
TEST(CudnnConvNarrow, ExhaustiveSelectionTimesTheKernel) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  const ConvDesc desc = conv({4, 3, 8, 28, 28}, {64, 3, 3, 3, 3}, {1}, {1});
  for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const ProfileResult profile = conv_profile(context, desc, direction);
    bool timed = false;
    for (const auto& row : profile.rows) {
      if (row.algo.id != narrow) continue;
      EXPECT_TRUE(row.algo.supported) << row.algo.reason;
      timed = row.status == CandidateStatus::ok || row.status == CandidateStatus::abandoned;
      EXPECT_TRUE(timed) << to_string(row.status) << " " << row.detail;
    }
    EXPECT_TRUE(timed) << to_string(direction) << "\n" << profile.table();
  }
}

}  // namespace
}  // namespace dnnx
