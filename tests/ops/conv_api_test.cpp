// The public conv API as a user calls it, on every backend: conv_fwd / conv_bwd_data /
// conv_bwd_weights with the default (heuristic) policy against the reference, and the bias paths
// (conv_fwd with bias, conv_bwd_weights with diff_bias, conv_bias_fwd, conv_bias_bwd) against a
// direct computation in double precision.

#include <dnnx/dnnx.hpp>

#include "ops/conv_cases.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace dnnx::test {
namespace {

struct ApiCase {
  BackendKind backend;
  ConvCase conv;
};

// A handful of edge shapes in every dtype and layout: the parity suite covers breadth, this
// suite covers the call path.
std::vector<ApiCase> api_cases() {
  const std::set<std::string> shapes = {"1d_stride2_dilation2_asym_pad",
                                        "2d_basic",
                                        "2d_groups4",
                                        "2d_depthwise_multiplier2",
                                        "2d_kernel_eq_padded_input",
                                        "3d_stride_dilation_asym_pad"};
  std::vector<ApiCase> cases;
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    for (const ConvCase& conv : conv_edge_cases()) {
      const std::string shape = conv.name.substr(0, conv.name.rfind('_', conv.name.rfind('_') - 1));
      if (shapes.count(shape)) cases.push_back({backend, conv});
    }
  }
  return cases;
}

void PrintTo(const ApiCase& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.conv.name << " (" << param.conv.desc << ")";
}

std::string api_name(const ::testing::TestParamInfo<ApiCase>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.conv.name;
}

// Per output channel of an N, C, spatial... tensor: the sum and the sum of magnitudes, in double.
struct ChannelSums {
  std::vector<double> sum;
  std::vector<double> magnitude;
};
ChannelSums channel_sums(const Tensor& tensor) {
  const Dims& dims = tensor.dims();
  const std::int64_t channels = dims[1];
  const std::int64_t inner = tensor.numel() / (dims[0] * channels);
  ChannelSums sums{std::vector<double>(static_cast<std::size_t>(channels)),
                   std::vector<double>(static_cast<std::size_t>(channels))};
  const std::vector<float> values = tensor.to_f32();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto c = static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % channels);
    sums.sum[c] += values[i];
    sums.magnitude[c] += std::fabs(values[i]);
  }
  return sums;
}

class ConvApi : public ::testing::TestWithParam<ApiCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_available(GetParam().backend, &why)) {
      GTEST_SKIP() << "backend " << to_string(GetParam().backend)
                   << " is not available here: " << why;
    }
  }
  const ConvDesc& desc() const { return GetParam().conv.desc; }
  std::uint64_t seed(std::string_view what) const {
    return seed_from(GetParam().conv.name + std::string(what));
  }
  Tensor bias() const {
    return random_tensor(desc().bias_dims(), desc().dtype, Layout::channels_first, seed("bias"));
  }
  // Channel index of logical flat index `i` of an N, C, spatial... tensor.
  std::size_t channel_of(const Dims& dims, std::size_t i) const {
    const std::int64_t inner = dims.product() / (dims[0] * dims[1]);
    return static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % dims[1]);
  }
};

TEST_P(ConvApi, HeuristicMatchesReference) {
  const auto& [backend, conv] = GetParam();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    SCOPED_TRACE(to_string(direction));
    const ConvOperands operands =
        random_conv_operands(desc(), direction, seed(to_string(direction)));
    Context context(backend);
    const std::vector<AlgoInfo> algos = conv_list(context, desc(), direction);
    const auto first_supported =
        std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
    // The cpu backend runs every desc on every CPU (f16/bf16 through f32-compute candidates
    // where oneDNN has no native kernel).
    if (backend == BackendKind::cpu) {
      EXPECT_NE(first_supported, algos.end())
          << "no supported cpu candidate\n  " << conv_context(desc(), direction, "(heuristic)");
    }
    if (first_supported == algos.end()) {
      // Nothing can run it: the op must say Unsupported (the parity budget test tallies these).
      try {
        run_conv(context, desc(), direction, operands);
        ADD_FAILURE() << "no supported candidate, yet the op ran\n  "
                      << conv_context(desc(), direction, "(heuristic)");
      } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
      }
      continue;
    }
    const ConvRun run = run_conv(context, desc(), direction, operands);
    const std::string where =
        conv_context(desc(), direction, run.choice ? run.choice->algo.id : "?");
    ASSERT_NE(run.choice, nullptr) << where;
    EXPECT_EQ(run.choice->op, "conv") << where;
    EXPECT_EQ(run.choice->direction, direction) << where;
    EXPECT_EQ(run.choice->policy.kind, PolicyKind::heuristic) << where;
    // Heuristic = the backend's first supported candidate when no constraint is set.
    EXPECT_EQ(run.choice->algo.id, first_supported->id) << where;
    ASSERT_TRUE(all_finite(run.output, "output", where));

    Context reference(BackendKind::reference);
    const ConvRun expected = run_conv(reference, desc(), direction, operands);
    EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected.output.to_f32(),
                                   conv_error_scale(desc(), direction, operands), run.output.dims(),
                                   conv_tolerance(desc().dtype), "output", where));
  }
}

TEST_P(ConvApi, FwdWithBias) {
  const Direction direction = Direction::fwd;
  const ConvOperands operands = random_conv_operands(desc(), direction, seed("fwd_bias"));
  const Tensor bias_values = bias();
  Context context(GetParam().backend);
  Tensor dst = nan_tensor(desc().dst_dims(), desc().dtype, desc().layout);
  const auto choice = conv_fwd(context, desc(), operands.src, operands.weights, dst, &bias_values);
  ASSERT_NE(choice, nullptr);
  const std::string where = conv_context(desc(), direction, choice->algo.id) + " (with bias)";
  ASSERT_TRUE(all_finite(dst, "dst", where));

  // Direct: the f32 reference conv (f64 accumulation, no bias) plus bias, added in double.
  ConvDesc wide = desc();
  wide.dtype = DType::f32;
  ConvOperands wide_operands{
      tensor_from(operands.src.dims(), DType::f32, wide.layout, operands.src.to_f32()),
      tensor_from(operands.weights.dims(), DType::f32, wide.layout, operands.weights.to_f32()),
      {}};
  Context reference(BackendKind::reference);
  const std::vector<float> conv_only =
      run_conv(reference, wide, direction, wide_operands).output.to_f32();
  std::vector<float> scale = conv_error_scale(desc(), direction, operands);
  const std::vector<float> b = bias_values.to_f32();
  std::vector<float> expected(conv_only.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const std::size_t c = channel_of(dst.dims(), i);
    expected[i] = static_cast<float>(static_cast<double>(conv_only[i]) + b[c]);
    scale[i] += std::fabs(b[c]);
  }
  EXPECT_TRUE(close_within_scale(dst.to_f32(), expected, scale, dst.dims(),
                                 conv_tolerance(desc().dtype), "dst", where));
}

TEST_P(ConvApi, BiasFwd) {
  Tensor dst = random_tensor(desc().dst_dims(), desc().dtype, desc().layout, seed("dst"));
  const std::vector<float> before = dst.to_f32();
  const Tensor bias_values = bias();
  Context context(GetParam().backend);
  conv_bias_fwd(context, desc(), bias_values, dst);
  const std::string where = conv_context(desc(), Direction::fwd, "conv_bias_fwd");
  ASSERT_TRUE(all_finite(dst, "dst", where));
  const std::vector<float> b = bias_values.to_f32();
  std::vector<float> expected(before.size());
  std::vector<float> scale(before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    const std::size_t c = channel_of(dst.dims(), i);
    expected[i] = static_cast<float>(static_cast<double>(before[i]) + b[c]);
    scale[i] = std::fabs(before[i]) + std::fabs(b[c]);
  }
  EXPECT_TRUE(close_within_scale(dst.to_f32(), expected, scale, dst.dims(),
                                 conv_tolerance(desc().dtype), "dst", where));
}

TEST_P(ConvApi, BwdWeightsWithDiffBias) {
  const Direction direction = Direction::bwd_weights;
  const ConvOperands operands = random_conv_operands(desc(), direction, seed("bwd_weights_bias"));
  Context context(GetParam().backend);
  Tensor diff_weights = nan_tensor(desc().weights_dims(), desc().dtype, desc().layout);
  Tensor diff_bias = nan_tensor(desc().bias_dims(), desc().dtype, Layout::channels_first);
  const auto choice =
      conv_bwd_weights(context, desc(), operands.src, operands.diff_dst, diff_weights, &diff_bias);
  ASSERT_NE(choice, nullptr);
  const std::string where = conv_context(desc(), direction, choice->algo.id) + " (with diff_bias)";
  ASSERT_TRUE(all_finite(diff_weights, "diff_weights", where));
  ASSERT_TRUE(all_finite(diff_bias, "diff_bias", where));

  Context reference(BackendKind::reference);
  const ConvRun expected = run_conv(reference, desc(), direction, operands);
  EXPECT_TRUE(close_within_scale(diff_weights.to_f32(), expected.output.to_f32(),
                                 conv_error_scale(desc(), direction, operands), diff_weights.dims(),
                                 conv_tolerance(desc().dtype), "diff_weights", where));

  const ChannelSums sums = channel_sums(operands.diff_dst);
  EXPECT_TRUE(
      close_within_scale(diff_bias.to_f32(), std::vector<float>(sums.sum.begin(), sums.sum.end()),
                         std::vector<float>(sums.magnitude.begin(), sums.magnitude.end()),
                         diff_bias.dims(), conv_tolerance(desc().dtype), "diff_bias", where));
}

TEST_P(ConvApi, BiasBwd) {
  const Tensor diff_dst =
      random_tensor(desc().dst_dims(), desc().dtype, desc().layout, seed("diff_dst"));
  Tensor diff_bias = nan_tensor(desc().bias_dims(), desc().dtype, Layout::channels_first);
  Context context(GetParam().backend);
  conv_bias_bwd(context, desc(), diff_dst, diff_bias);
  const std::string where = conv_context(desc(), Direction::bwd_weights, "conv_bias_bwd");
  ASSERT_TRUE(all_finite(diff_bias, "diff_bias", where));
  const ChannelSums sums = channel_sums(diff_dst);
  EXPECT_TRUE(
      close_within_scale(diff_bias.to_f32(), std::vector<float>(sums.sum.begin(), sums.sum.end()),
                         std::vector<float>(sums.magnitude.begin(), sums.magnitude.end()),
                         diff_bias.dims(), conv_tolerance(desc().dtype), "diff_bias", where));
}

INSTANTIATE_TEST_SUITE_P(Edge, ConvApi, ::testing::ValuesIn(api_cases()), api_name);

}  // namespace
}  // namespace dnnx::test
