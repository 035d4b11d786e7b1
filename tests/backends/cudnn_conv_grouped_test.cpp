// dnnx's grouped convolution kernel for small groups in the cudnn backend
// (cudnn:kernel:grouped:strips, Note [grouped candidates]): where it is listed as supported and
// why not (host-side), its per-thread code run on the host against the reference over a case
// table (no GPU either), and on a GPU every supported case in every dtype against the reference,
// the overwrite of the output and bitwise determinism.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_grouped.hpp"
#include "backends/cudnn/kernels/grouped.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {
namespace {

namespace grouped = cudnn::kernels::grouped;

constexpr DType all_dtypes[] = {DType::f32, DType::f16, DType::bf16};

struct Case {
  std::string name;
  ConvDesc desc;  // f32 channels_last; the GPU test runs it in every dtype
};

// A grouped convolution of `groups` groups of `per_group` channels in and out.
ConvDesc grouped_desc(const Dims& src, std::int64_t groups, const Dims& kernel,
                      const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& pad,
                      const std::vector<std::int64_t>& dilation = {1}) {
  std::vector<std::int64_t> weights{src[1], src[1] / groups};
  for (int i = 0; i < kernel.rank(); ++i) weights.push_back(kernel[i]);
  ConvDesc desc =
      ConvDesc::from_shapes(src, Dims(weights), stride, pad, dilation, groups, DType::f32);
  desc.layout = Layout::channels_last;
  return desc;
}

std::vector<Case> cases() {
  std::vector<Case> table{
      {"4_per_group_odd_sizes", grouped_desc({2, 16, 13, 11}, 4, {3, 3}, {1}, {1})},
      {"8_per_group", grouped_desc({2, 32, 9, 10}, 4, {3, 3}, {1}, {1})},
      {"4_per_group_stride2", grouped_desc({3, 24, 15, 14}, 6, {3, 3}, {2}, {1})},
      {"8_per_group_stride_2x1", grouped_desc({2, 16, 12, 9}, 2, {3, 3}, {2, 1}, {1})},
      {"stride_1x2_height1", grouped_desc({2, 8, 1, 17}, 2, {3, 3}, {1, 2}, {1})},
      {"height2_no_padding", grouped_desc({2, 12, 4, 6}, 3, {3, 3}, {1}, {0})},
      {"batch1_1x1_spatial", grouped_desc({1, 32, 1, 1}, 8, {3, 3}, {1}, {1})},
      {"many_groups", grouped_desc({2, 160, 7, 6}, 40, {3, 3}, {1}, {1})},
      {"3d_1x3x3_depth_stride2", grouped_desc({2, 8, 5, 6, 7}, 2, {1, 3, 3}, {2, 1, 1}, {0, 1, 1})},
  };
  // Per-side padding (TensorFlow's SAME for even sizes), and padding beyond the window.
  ConvDesc after = grouped_desc({2, 16, 10, 12}, 4, {3, 3}, {2}, {0});
  after.pad_after = {1, 1, 0};
  table.push_back({"stride2_pad_after_only", after});
  ConvDesc wide = grouped_desc({2, 8, 9, 8}, 2, {3, 3}, {1}, {0});
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
  const ConvDesc base = with(grouped_desc({2, 16, 13, 11}, 4, {3, 3}, {1}, {1}), DType::f16);
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const std::vector<AlgoInfo> infos = cudnn::grouped_candidates(base, direction);
    ASSERT_EQ(infos.size(), 1u);
    const AlgoInfo& info = infos[0];
    EXPECT_EQ(info.id, cudnn::grouped_id);
    EXPECT_TRUE(cudnn::is_grouped_id(info.id));
    EXPECT_TRUE(info.deterministic);
    EXPECT_TRUE(info.has_note("kernel"));
    EXPECT_EQ(info.supported, direction != Direction::bwd_weights) << info.reason;
    // The weights laid out in f32: 4 groups x 9 taps x 4 x 4.
    EXPECT_EQ(info.workspace_bytes, info.supported ? 4u * 9u * 16u * 4u : 0u);
  }
  EXPECT_NE(reason(base, Direction::bwd_weights).find("fwd and bwd_data only"), std::string::npos);
  EXPECT_FALSE(cudnn::is_grouped_id("cudnn:kernel:grouped:"));
}

TEST(CudnnConvGrouped, SaysWhyItCannotRun) {
  const ConvDesc base = grouped_desc({2, 16, 13, 11}, 4, {3, 3}, {1}, {1});
  EXPECT_EQ(reason(base, Direction::fwd), "");
  EXPECT_EQ(reason(with(base, DType::bf16), Direction::bwd_data), "");
  const ConvDesc dense = grouped_desc({2, 16, 9, 9}, 1, {3, 3}, {1}, {1});
  EXPECT_NE(reason(dense, Direction::fwd).find("groups=1"), std::string::npos);
  const ConvDesc depthwise = grouped_desc({2, 16, 9, 9}, 16, {3, 3}, {1}, {1});
  EXPECT_NE(reason(depthwise, Direction::fwd).find("depthwise"), std::string::npos);
  EXPECT_NE(
      reason(with(base, DType::f32, Layout::channels_first), Direction::fwd).find("channels_last"),
      std::string::npos);
  const ConvDesc sixteen = grouped_desc({2, 64, 9, 9}, 4, {3, 3}, {1}, {1});
  EXPECT_NE(reason(sixteen, Direction::fwd).find("4 or 8 channels"), std::string::npos);
  ConvDesc uneven =
      ConvDesc::from_shapes({2, 16, 9, 9}, {32, 4, 3, 3}, {1}, {1}, {1}, 4, DType::f32);
  uneven.layout = Layout::channels_last;
  EXPECT_NE(reason(uneven, Direction::fwd).find("in and out alike"), std::string::npos);
  const ConvDesc k5 = grouped_desc({2, 16, 9, 9}, 4, {5, 5}, {1}, {2});
  EXPECT_NE(reason(k5, Direction::fwd).find("3x3 kernels"), std::string::npos);
  const ConvDesc k333 = grouped_desc({2, 16, 4, 9, 9}, 4, {3, 3, 3}, {1}, {1});
  EXPECT_NE(reason(k333, Direction::fwd).find("3x3 kernels"), std::string::npos);
  const ConvDesc dilated = grouped_desc({2, 16, 9, 9}, 4, {3, 3}, {1}, {2}, {2});
  EXPECT_NE(reason(dilated, Direction::fwd).find("without dilation"), std::string::npos);
  const ConvDesc s3 = grouped_desc({2, 16, 9, 9}, 4, {3, 3}, {3, 1}, {1});
  EXPECT_NE(reason(s3, Direction::fwd).find("stride of 1 or 2 along H"), std::string::npos);
  const ConvDesc s2 = grouped_desc({2, 16, 9, 9}, 4, {3, 3}, {2}, {1});
  EXPECT_EQ(reason(s2, Direction::fwd), "");
  EXPECT_NE(reason(s2, Direction::bwd_data).find("stride 1 along H and W"), std::string::npos);
  // 2048 groups of 4: 1.2 MB of f32 weights, beyond the 96 KiB of shared memory.
  const ConvDesc big = grouped_desc({1, 8192, 4, 4}, 2048, {3, 3}, {1}, {1});
  EXPECT_NE(reason(big, Direction::fwd).find("96 KiB"), std::string::npos);
  // Sizes beyond the kernel's 32-bit spatial arithmetic.
  ConvDesc huge = grouped_desc({1, 8, 4, 4}, 2, {3, 3}, {1}, {1});
  huge.pad_before[0] = huge.pad_after[0] = std::int64_t{1} << 30;
  EXPECT_NE(reason(huge, Direction::fwd).find("2^29"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The per-thread code on the host (no GPU needed): grouped::strip() over every item of every
// sample in f32, the weights laid out by grouped::weight_source(), with packs of 4 channels (the
// launch's for f32) and of 1 (its fallback for unaligned tensors).

struct HostConvert {
  static float widen(float v) { return v; }
  static float narrow(float v) { return v; }
};

template <int C, int P, int S, bool Backward>
void run_strips(const grouped::Geo& g, std::int64_t batch, const float* a, const float* w,
                float* out) {
  for (std::int64_t n = 0; n < batch; ++n) {
    for (int item = 0; item < g.items; ++item) {
      grouped::strip<float, C, C, P, S, Backward, HostConvert>(g, item, a + n * g.a_sample, w,
                                                               out + n * g.o_sample);
    }
  }
}

template <int C, int P>
void run_sized(const grouped::Geo& g, std::int64_t batch, int stride_h, bool forward,
               const float* a, const float* w, float* out) {
  if (!forward) {
    run_strips<C, P, 1, true>(g, batch, a, w, out);
  } else if (stride_h == 1) {
    run_strips<C, P, 1, false>(g, batch, a, w, out);
  } else {
    run_strips<C, P, 2, false>(g, batch, a, w, out);
  }
}

// What the kernel writes for (desc, direction) with packs of `pack` channels, in the output's
// memory order; NaN where nothing was written.
std::vector<float> host_strips(const ConvDesc& desc, Direction direction, int pack,
                               const test::ConvOperands& operands) {
  const cudnn::kernels::GroupedShape shape = cudnn::grouped_shape(desc);
  const bool forward = direction == Direction::fwd;
  const grouped::Geo g = grouped::geo(shape, forward);
  const int c = static_cast<int>(shape.in_per_group);
  const auto* w = static_cast<const float*>(operands.weights.data());
  std::vector<float> laid(static_cast<std::size_t>(g.groups * 9 * c * c));
  for (std::size_t i = 0; i < laid.size(); ++i)
    laid[i] = w[grouped::weight_source(static_cast<std::int64_t>(i), g.groups, c, c, !forward)];
  std::vector<float> out(
      static_cast<std::size_t>(test::conv_output_dims(desc, direction).product()),
      std::numeric_limits<float>::quiet_NaN());
  const auto* a = static_cast<const float*>((forward ? operands.src : operands.diff_dst).data());
  const int stride_h = shape.stride[1];
  if (c == 4) {
    if (pack == 4) {
      run_sized<4, 4>(g, desc.batch, stride_h, forward, a, laid.data(), out.data());
    } else {
      run_sized<4, 1>(g, desc.batch, stride_h, forward, a, laid.data(), out.data());
    }
  } else if (pack == 4) {
    run_sized<8, 4>(g, desc.batch, stride_h, forward, a, laid.data(), out.data());
  } else {
    run_sized<8, 1>(g, desc.batch, stride_h, forward, a, laid.data(), out.data());
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
      const test::ConvOperands operands =
          test::random_conv_operands(c.desc, direction, test::seed_from(c.desc.key()));
      const std::vector<float> expected =
          test::run_conv(reference, c.desc, direction, operands).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(c.desc, direction, operands);
      const Dims dims = test::conv_output_dims(c.desc, direction);
      for (int pack : {4, 1}) {
        const std::string where = c.name + " (pack " + std::to_string(pack) +
                                  "): " + test::conv_context(c.desc, direction, "host");
        std::vector<float> memory = host_strips(c.desc, direction, pack, operands);
        const std::vector<float> actual =
            Tensor::view(memory.data(), dims, DType::f32, c.desc.layout).to_f32();
        EXPECT_TRUE(test::all_finite(actual, dims, "output", where));
        EXPECT_TRUE(test::close_within_scale(actual, expected, scale, dims,
                                             test::conv_tolerance(DType::f32), "output", where));
        ++checked;
      }
    }
  }
  std::cout << "[ grouped  ] " << checked << " host runs checked against the reference\n";
  // Every case forward (11), and bwd_data where the stride is 1 along H and W (7), two packs.
  EXPECT_EQ(checked, 36u);
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

struct DeviceOperands {
  Tensor src, weights, diff_dst;
};

DeviceOperands upload(const test::ConvOperands& host, Context& context) {
  DeviceOperands device;
  if (!host.src.is_null()) device.src = test::device_copy(host.src, context);
  if (!host.weights.is_null()) device.weights = test::device_copy(host.weights, context);
  if (!host.diff_dst.is_null()) device.diff_dst = test::device_copy(host.diff_dst, context);
  return device;
}

std::shared_ptr<const Choice> run_into(Context& context, const ConvDesc& desc, Direction direction,
                                       const DeviceOperands& operands, Tensor& output) {
  if (direction == Direction::fwd)
    return conv_fwd(context, desc, operands.src, operands.weights, output);
  return conv_bwd_data(context, desc, operands.diff_dst, operands.weights, output);
}

// Every supported case and direction against the reference in every dtype; the output starts as
// NaN (an unwritten element fails), and a second run into the first run's values must give the
// same bits (overwrite, not accumulate, and determinism).
TEST(CudnnConvGrouped, MatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  for (const Case& c : cases()) {
    for (DType dtype : all_dtypes) {
      const ConvDesc desc = with(c.desc, dtype);
      for (Direction direction : {Direction::fwd, Direction::bwd_data}) {
        if (!reason(desc, direction).empty()) continue;
        const std::string where = c.name + ": " + test::conv_context(desc, direction, "grouped");
        const test::ConvOperands operands =
            test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
        const DeviceOperands device = upload(operands, context);
        const std::vector<float> expected =
            test::run_conv(reference, desc, direction, operands).output.to_f32();
        const Dims out_dims = test::conv_output_dims(desc, direction);
        context.tune().policy(direction) = AlgoPolicy::fixed(cudnn::grouped_id);
        Tensor output =
            test::device_copy(test::nan_tensor(out_dims, desc.dtype, desc.layout), context);
        Tensor first, second;
        try {
          const auto choice = run_into(context, desc, direction, device, output);
          EXPECT_EQ(choice->algo.id, cudnn::grouped_id) << where;
          first = test::host_copy_of(output);
          run_into(context, desc, direction, device, output);
          second = test::host_copy_of(output);
        } catch (const Error& error) {
          ADD_FAILURE() << "listed as supported but failed: " << error.what() << "\n" << where;
          continue;
        }
        const std::vector<float> actual = first.to_f32();
        EXPECT_TRUE(test::all_finite(actual, out_dims, "output", where));
        EXPECT_TRUE(test::close_within_scale(
            actual, expected, test::conv_error_scale(desc, direction, operands), out_dims,
            test::conv_tolerance(desc.dtype), "output", where));
        EXPECT_TRUE(test::bitwise_equal(first, second, "second run", where));
        context.tune().policy(direction) = AlgoPolicy::heuristic();
        ++checked;
      }
    }
  }
  std::cout << "[ cudnn    ] " << cudnn::grouped_id << ": " << checked
            << " runs matched the reference\n";
  EXPECT_GT(checked, 40u);
}

}  // namespace
}  // namespace dnnx
