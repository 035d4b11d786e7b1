// The cudnn backend's fused convolution on a GPU (label "gpu"): every listed candidate — graph-API
// fused engines, legacy cudnnConvolutionBiasActivationForward, the unfused conv + epilogue kernel —
// against the reference backend over the conv_fused case table (in place included), determinism,
// the unsupported reasons, selection (heuristic, exhaustive, fixed and bad ids, workspace limit
// 0), and the ResNet-50 shapes the benchmark times. Every test skips with the reason when no
// usable GPU is present (CI has none).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv_fused.hpp>
#include <dnnx/tensor.hpp>

#include "ops/conv_fused_support.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// A cudnn context with a private, memory-only choice cache (fixed ids must not reach the
// persistent cache file).
Context gpu_context() {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

Tensor to_device(const Tensor& host, Context& context) {
  Tensor device =
      Tensor::empty(host.dims(), host.dtype(), host.layout().value(), context.allocator());
  copy(host, device);
  return device;
}

Tensor to_host(const Tensor& device) {
  Tensor host = Tensor::empty(device.dims(), device.dtype(), device.layout().value());
  copy(device, host);
  return host;
}

struct DeviceOperands {
  Tensor src, weights, bias, residual;
};

DeviceOperands upload(const ConvFusedDesc& desc, const ConvFusedOperands& host, Context& context) {
  DeviceOperands device;
  device.src = to_device(host.src, context);
  device.weights = to_device(host.weights, context);
  if (desc.bias) device.bias = to_device(host.bias, context);
  if (desc.residual) device.residual = to_device(host.residual, context);
  return device;
}

struct GpuRun {
  Tensor dst;  // on the host
  std::shared_ptr<const Choice> choice;
};

// dst starts as NaN, or in place as a copy of the residual (also passed as the residual).
GpuRun run_gpu(Context& context, const ConvFusedDesc& desc, const ConvFusedOperands& host,
               const DeviceOperands& device, bool in_place) {
  const ConvDesc& conv = desc.conv;
  Tensor dst = to_device(
      in_place ? host.residual : nan_tensor(conv.dst_dims(), conv.dtype, conv.layout), context);
  const Tensor* bias = desc.bias ? &device.bias : nullptr;
  const Tensor* residual = desc.residual ? (in_place ? &dst : &device.residual) : nullptr;
  GpuRun run;
  run.choice = conv_fused_fwd(context, desc, device.src, device.weights, bias, residual, dst);
  run.dst = to_host(dst);
  return run;
}

std::string kind_of(const std::string& id) {
  if (id.rfind("cudnn:fused:engine:", 0) == 0) return "engine";
  if (id.rfind("cudnn:fused:legacy:", 0) == 0) return "legacy";
  if (id.rfind("unfused:", 0) == 0) return "unfused";
  return "other";
}

// Note [expected unsupported fused cudnn]: the reasons a cudnn candidate may be unsupported. Any
// other fails, so a candidate cannot quietly stop being supported for a new reason.
const std::vector<std::pair<const char*, std::regex>>& expected_reasons() {
  static const std::vector<std::pair<const char*, std::regex>> reasons = {
      {"cuDNN rejects the config", std::regex("^cuDNN rejects it: CUDNN_STATUS_")},
      {"graph API rejects the graph", std::regex("^cuDNN's graph API rejects ")},
      {"TF32 off", std::regex("TF32 is off")},
      {"f16/bf16 accumulation", std::regex("REDUCED_PRECISION_REDUCTION")},
      {"int8x32 reorder", std::regex("int8x32")},
      {"runtime-compiled engine", std::regex("DNNX_CUDNN_RUNTIME_COMPILED=1")},
      {"legacy: no bias", std::regex("needs a bias and desc.bias is false")},
      {"legacy: identity needs implicit_precomp_gemm",
       std::regex("only with implicit_precomp_gemm")},
      {"legacy: asymmetric padding", std::regex("asymmetric padding")},
      {"legacy: beyond INT_MAX", std::regex("INT_MAX")},
  };
  return reasons;
}

const char* category_of(const AlgoInfo& algo) {
  for (const auto& [category, pattern] : expected_reasons()) {
    if (std::regex_search(algo.reason, pattern)) return category;
  }
  return nullptr;
}

class CudnnConvFused : public ::testing::TestWithParam<ConvFusedCase> {};

std::string case_name(const ::testing::TestParamInfo<ConvFusedCase>& info) {
  return info.param.name;
}

// ResNet-50 layers at batch 2 in f16 NHWC (the benchmark's fast path) and one in f32 NCHW.
std::vector<ConvFusedCase> resnet_cases() {
  std::vector<ConvFusedCase> cases;
  auto add = [&](const char* name, Dims src, Dims weights, std::int64_t stride, std::int64_t pad,
                 DType dtype, Layout layout, bool residual) {
    ConvFusedCase c;
    c.name = name;
    c.desc.conv = ConvDesc::from_shapes(src, weights, {stride}, {pad}, {1}, 1, dtype, layout);
    c.desc.bias = true;
    c.desc.residual = residual;
    c.desc.activation = FusedActivation::relu;
    cases.push_back(c);
  };
  add("resnet_56x56_64_3x3_f16_nhwc", {2, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, DType::f16,
      Layout::channels_last, false);
  add("resnet_56x56_64_256_1x1_res_f16_nhwc", {2, 64, 56, 56}, {256, 64, 1, 1}, 1, 0, DType::f16,
      Layout::channels_last, true);
  add("resnet_7x7_512_3x3_f32_nchw", {2, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, DType::f32,
      Layout::channels_first, false);
  ConvFusedCase in_place = cases[1];
  in_place.name = "resnet_56x56_64_256_1x1_res_inplace_f16_nhwc";
  in_place.in_place = true;
  cases.push_back(in_place);
  return cases;
}

TEST_P(CudnnConvFused, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  const ConvFusedCase& param = GetParam();
  const ConvFusedDesc& desc = param.desc;
  const ConvFusedOperands host = random_conv_fused_operands(desc, seed_from(param.name));
  Context reference(BackendKind::reference);
  const ConvFusedRun expected = run_conv_fused(reference, desc, host, param.in_place);
  const std::vector<float> expected_values = expected.dst.to_f32();
  const std::vector<float> scale = conv_fused_error_scale(desc, host);
  const Tolerance tolerance = conv_fused_tolerance(desc.conv.dtype);

  Context base = gpu_context();
  const DeviceOperands device = upload(desc, host, base);
  const std::vector<AlgoInfo> algos = conv_fused_list(base, desc);
  std::map<std::string, int> ran_by_kind, supported_by_kind;
  std::map<std::string, int> unsupported_by_category;
  std::ostringstream summary;
  double worst = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string context = conv_fused_context(desc, algo.id, param.in_place);
    if (!algo.supported) {
      const char* category = category_of(algo);
      ++unsupported_by_category[category ? category : "UNEXPECTED"];
      EXPECT_NE(category, nullptr) << "unexpected reason \"" << algo.reason << "\"\n  " << context;
      continue;
    }
    ++supported_by_kind[kind_of(algo.id)];
    Context fixed = base;
    fixed.tune().fwd = AlgoPolicy::fixed(algo.id);
    GpuRun run;
    try {
      run = run_gpu(fixed, desc, host, device, param.in_place);
    } catch (const Error& error) {
      ADD_FAILURE() << "supported candidate threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    ++ran_by_kind[kind_of(algo.id)];
    EXPECT_EQ(run.choice->algo.id, algo.id) << context;
    if (!all_finite(run.dst, "dst", context)) {
      ADD_FAILURE() << all_finite(run.dst, "dst", context).message();
      continue;
    }
    double ratio = 0;
    EXPECT_TRUE(close_within_scale(run.dst.to_f32(), expected_values, scale, run.dst.dims(),
                                   tolerance, "dst", context, &ratio));
    worst = std::max(worst, ratio);
    summary << "\n    ran " << algo.id << " (error " << ratio << " of the bound)";
    if (algo.deterministic) {
      // A second and a third call (the third replays a captured CUDA graph) give the same bits.
      for (int again = 0; again < 2; ++again) {
        const GpuRun repeat = run_gpu(fixed, desc, host, device, param.in_place);
        EXPECT_TRUE(bitwise_equal(run.dst, repeat.dst, "dst", context)) << "repeat " << again + 1;
      }
    }
  }
  EXPECT_EQ(ran_by_kind["unfused"], 1) << "the unfused candidate must run every case";
  std::cout << "[ cudnn    ] " << param.name << ": " << algos.size() << " listed; supported/ran:";
  for (const char* kind : {"engine", "legacy", "unfused"}) {
    std::cout << ' ' << kind << ' ' << supported_by_kind[kind] << '/' << ran_by_kind[kind];
  }
  std::cout << "; worst error " << worst << " of the bound; unsupported:";
  for (const auto& [category, count] : unsupported_by_category)
    std::cout << " [" << category << "] " << count;
  std::cout << summary.str() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Cases, CudnnConvFused, ::testing::ValuesIn(conv_fused_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(ResNet50, CudnnConvFused, ::testing::ValuesIn(resnet_cases()), case_name);

ConvFusedDesc small_desc(bool bias, bool residual) {
  ConvFusedDesc desc;
  desc.conv = ConvDesc::from_shapes({2, 16, 12, 12}, {32, 16, 3, 3}, {1}, {1}, {1}, 1, DType::f16,
                                    Layout::channels_last);
  desc.bias = bias;
  desc.residual = residual;
  desc.activation = FusedActivation::relu;
  return desc;
}

TEST(CudnnConvFusedPolicy, HeuristicRunsTheFirstSupportedCandidate) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const ConvFusedDesc desc = small_desc(true, true);
  const auto algos = conv_fused_list(context, desc);
  const auto first =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
  ASSERT_NE(first, algos.end());
  const ConvFusedOperands host = random_conv_fused_operands(desc, 11);
  const DeviceOperands device = upload(desc, host, context);
  EXPECT_EQ(run_gpu(context, desc, host, device, false).choice->algo.id, first->id);
}

TEST(CudnnConvFusedPolicy, ExhaustivePicksATimedCandidate) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  context.tune().fwd = AlgoPolicy::exhaustive();
  const ConvFusedDesc desc = small_desc(true, true);
  const ConvFusedOperands host = random_conv_fused_operands(desc, 12);
  const DeviceOperands device = upload(desc, host, context);
  const auto start = std::chrono::steady_clock::now();
  const GpuRun run = run_gpu(context, desc, host, device, false);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(run.choice->timings.empty());
  EXPECT_EQ(run.choice->timings.front().status, CandidateStatus::ok);
  EXPECT_EQ(run.choice->algo.id, run.choice->timings.front().algo.id);
  std::cout << "[ cudnn    ] exhaustive conv_fused: " << run.choice->algo.id << " "
            << run.choice->time_ms << " ms, " << run.choice->candidates_timed << " of "
            << run.choice->timings.size() << " timed, search " << ms << " ms\n";
}

TEST(CudnnConvFusedPolicy, BadFixedIdListsTheValidIds) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  context.tune().fwd = AlgoPolicy::fixed("cudnn:fused:engine:99999");
  const ConvFusedDesc desc = small_desc(true, false);
  const ConvFusedOperands host = random_conv_fused_operands(desc, 13);
  const DeviceOperands device = upload(desc, host, context);
  try {
    run_gpu(context, desc, host, device, false);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find("cudnn:fused:engine:99999"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("valid ids"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("unfused:"), std::string::npos) << error.what();
  }
}

TEST(CudnnConvFusedPolicy, WorkspaceLimitZeroStillRuns) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  context.tune().workspace_limit = 0;
  const ConvFusedDesc desc = small_desc(true, false);
  const ConvFusedOperands host = random_conv_fused_operands(desc, 14);
  const DeviceOperands device = upload(desc, host, context);
  const GpuRun run = run_gpu(context, desc, host, device, false);
  EXPECT_EQ(run.choice->algo.workspace_bytes, 0u) << run.choice->algo.id;
}

TEST(CudnnConvFusedPolicy, EveryCandidateKindIsListed) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const auto algos = conv_fused_list(context, small_desc(true, true));
  std::map<std::string, int> kinds;
  for (const AlgoInfo& algo : algos) ++kinds[kind_of(algo.id)];
  EXPECT_GT(kinds["engine"], 0);
  EXPECT_EQ(kinds["legacy"], 32) << "8 forward algorithms x 4 math modes";
  EXPECT_EQ(kinds["unfused"], 1);
  EXPECT_EQ(kinds["other"], 0);
  // Supported before unsupported (the heuristic pick is the first supported one).
  const auto first_unsupported =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return !a.supported; });
  EXPECT_TRUE(
      std::all_of(first_unsupported, algos.end(), [](const AlgoInfo& a) { return !a.supported; }));
}

}  // namespace
}  // namespace dnnx::test
