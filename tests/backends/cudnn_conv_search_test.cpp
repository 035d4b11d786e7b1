// The cudnn convolution's search (label "gpu"): runtime-compiled engines as candidates by default
// under the compile budget (Note [runtime-compiled engines] in conv_engine.cpp, Note [compile
// budget] in src/ops/dispatch.cpp), saved plans across contexts (Note [saved plans] in
// src/tune/plan_store.hpp), the heuristics' top configs among the timed ones (Note [knob search]),
// knob variants of slow seeds left out (Note [pruning variants]), and the search's time split.
// Tests that need a GPU skip with the reason where there is none; the settings tests run anywhere.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_depthwise.hpp"
#include "backends/cudnn/conv_engine.hpp"
#include "backends/cudnn/conv_folds.hpp"
#include "backends/cudnn/conv_frames.hpp"
#include "backends/cudnn/conv_grouped.hpp"
#include "backends/cudnn/conv_narrow.hpp"
#include "backends/cudnn/runtime.hpp"
#include "ops/context_state.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/scoped.hpp"
#include "tune/plan_store.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dnnx {
namespace {

namespace fs = std::filesystem;

using test::ScopedEnv;

ConvDesc make_desc(const Dims& src, const Dims& weights, std::int64_t stride, std::int64_t pad,
                   std::int64_t dilation, std::int64_t groups, DType dtype, Layout layout) {
  return ConvDesc::from_shapes(src, weights, {stride}, {pad}, {dilation}, groups, dtype, layout);
}

// MobileNetV2's first depthwise layer at batch 16 (the benchmark runs batch 128): 96 channels,
// 112x112, 3x3 stride 2, f16 NHWC. Its bwd_data is where cuDNN's runtime-compiled engine 6 runs
// 5x faster than any precompiled one on an H100.
ConvDesc depthwise_desc() {
  return make_desc({16, 96, 112, 112}, {96, 1, 3, 3}, 2, 1, 1, 96, DType::f16,
                   Layout::channels_last);
}

// A 3-D f16 conv with dilation (the shapes where PyTorch's search found segment-k kernels).
ConvDesc dilated_3d_desc() {
  return make_desc({2, 32, 8, 16, 16}, {32, 32, 3, 3, 3}, 1, 2, 2, 1, DType::f16,
                   Layout::channels_last);
}

// DeepLabV3's l4.downsample (a dense 1x1 of 1024 -> 2048 channels at 65x65, batch 16, f16 NHWC),
// whose bwd_weights lists cuDNN's runtime-compiled engine 19: seconds per run on it.
ConvDesc downsample_desc() {
  return make_desc({16, 1024, 65, 65}, {2048, 1024, 1, 1}, 1, 0, 1, 1, DType::f16,
                   Layout::channels_last);
}

// An exhaustive bwd_weights selection of `desc` in `context` (random operands seeded by the desc,
// a NaN-poisoned output).
std::shared_ptr<const Choice> exhaustive_bwd_weights(Context& context, const ConvDesc& desc) {
  context.tune().bwd_weights = AlgoPolicy::exhaustive();
  const test::ConvOperands host =
      test::random_conv_operands(desc, Direction::bwd_weights, test::seed_from(desc.key()));
  Tensor diff_weights =
      test::device_copy(test::nan_tensor(test::conv_output_dims(desc, Direction::bwd_weights),
                                         desc.dtype, desc.layout),
                        context);
  return conv_bwd_weights(context, desc, test::device_copy(host.src, context),
                          test::device_copy(host.diff_dst, context), diff_weights);
}

// Note [packed gemm]: supported candidates of the packed form (ids starting with
// `packed_prefix`) are listed for the bwd_weights of an NCHW batch and for nothing else.
void expect_packed_form_where_due(const std::vector<AlgoInfo>& algos,
                                  std::string_view packed_prefix, const ConvDesc& desc,
                                  Direction direction) {
  const auto packed = std::count_if(algos.begin(), algos.end(), [&](const AlgoInfo& a) {
    return a.supported && a.id.starts_with(packed_prefix);
  });
  const bool has_packed = direction == Direction::bwd_weights && desc.batch > 1 &&
                          desc.layout == Layout::channels_first;
  EXPECT_EQ(packed > 0, has_packed) << desc.repro(direction);
}

std::vector<AlgoInfo> runtime_compiled(const std::vector<AlgoInfo>& algos, bool supported) {
  std::vector<AlgoInfo> out;
  for (const AlgoInfo& info : algos) {
    if (info.has_note("runtime_compiled") && info.supported == supported) out.push_back(info);
  }
  return out;
}

// A context on a CUDA stream of its own: contexts on one stream share one backend instance, whose
// settings are read from the environment once, when it is made (Context::with_stream), so a
// context of the process's default backend would not see what a test's ScopedEnv sets. The
// stream lives as long as the process, as with_stream requires.
Context cudnn_context(std::shared_ptr<ChoiceCache> cache = std::make_shared<ChoiceCache>()) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Context context = Context(BackendKind::cudnn).with_stream(stream);
  context.set_choice_cache(std::move(cache));
  return context;
}

// A choice-cache file (readwrite) in `folder`, as a process keeping its choices would use.
CacheFileOptions cache_file_in(const test::TempFolder& folder) {
  CacheFileOptions file;
  file.mode = CacheMode::readwrite;
  file.path = folder.file("tune.json");
  return file;
}

// The device operands of bwd_data and a NaN-poisoned device output.
struct BwdData {
  Tensor diff_dst, weights, diff_src;
};

BwdData bwd_data_operands(const ConvDesc& desc, Context& context) {
  const test::ConvOperands host =
      test::random_conv_operands(desc, Direction::bwd_data, test::seed_from(desc.key()));
  BwdData d;
  d.diff_dst = test::device_copy(host.diff_dst, context);
  d.weights = test::device_copy(host.weights, context);
  d.diff_src = test::device_copy(
      test::nan_tensor(test::conv_output_dims(desc, Direction::bwd_data), desc.dtype, desc.layout),
      context);
  return d;
}

std::vector<float> output_of(const Tensor& device) { return test::host_copy_of(device).to_f32(); }

// ---- settings (no GPU needed) --------------------------------------------------------------

// Each of `values` in `variable` makes settings_from_env() throw an InvalidArgument naming the
// variable and the value.
void expect_rejected(const char* variable, std::initializer_list<const char*> values) {
  for (const char* bad : values) {
    const ScopedEnv set(variable, bad);
    try {
      cudnn::settings_from_env();
      ADD_FAILURE() << variable << "=" << bad << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find(variable), std::string::npos) << error.message();
      EXPECT_NE(error.message().find(bad), std::string::npos) << error.message();
    }
  }
}

// A switch of Settings on by default: `variable` unset leaves `field` on, "0" turns it off, and
// values that are no switch are rejected (expect_rejected()).
void expect_switch_on_by_default(const char* variable, bool cudnn::Settings::*field,
                                 std::initializer_list<const char*> rejected) {
  {
    const ScopedEnv unset(variable, nullptr);
    EXPECT_TRUE(cudnn::settings_from_env().*field) << variable;
  }
  {
    const ScopedEnv off(variable, "0");
    EXPECT_FALSE(cudnn::settings_from_env().*field) << variable;
  }
  expect_rejected(variable, rejected);
}

// DNNX_CUDNN_BUILD_THREADS: how many threads compile in the background; 0 (the default) leaves
// it to the host's thread count.
TEST(CudnnSearchSettings, BuildThreadsFromTheEnvironment) {
  {
    const ScopedEnv unset("DNNX_CUDNN_BUILD_THREADS", nullptr);
    EXPECT_EQ(cudnn::settings_from_env().build_threads, 0);
  }
  {
    const ScopedEnv set("DNNX_CUDNN_BUILD_THREADS", "3");
    EXPECT_EQ(cudnn::settings_from_env().build_threads, 3);
  }
  expect_rejected("DNNX_CUDNN_BUILD_THREADS", {"-1", "65", "two", "2x"});
}

TEST(CudnnSearchSettings, RuntimeCompiledOnByDefaultWithABudget) {
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", nullptr);
  const cudnn::Settings defaults = cudnn::settings_from_env();
  EXPECT_TRUE(defaults.runtime_compiled);
  EXPECT_FALSE(defaults.runtime_compiled_fused);
  EXPECT_GT(defaults.compile_budget_s, 0.0);
  EXPECT_LT(defaults.compile_budget_s, 1.0)
      << "a search that waits for its compiles must end within the 1 s search-time target";
  {
    const ScopedEnv off("DNNX_CUDNN_RUNTIME_COMPILED", "0");
    const cudnn::Settings s = cudnn::settings_from_env();
    EXPECT_FALSE(s.runtime_compiled);
    EXPECT_FALSE(s.runtime_compiled_fused);
  }
  {
    const ScopedEnv on("DNNX_CUDNN_RUNTIME_COMPILED", "1");
    const cudnn::Settings s = cudnn::settings_from_env();
    EXPECT_TRUE(s.runtime_compiled);
    EXPECT_TRUE(s.runtime_compiled_fused);
  }
  {
    const ScopedEnv set("DNNX_CUDNN_COMPILE_BUDGET", "0.25");
    EXPECT_DOUBLE_EQ(cudnn::settings_from_env().compile_budget_s, 0.25);
  }
  expect_rejected("DNNX_CUDNN_COMPILE_BUDGET", {"-1", "soon", "1s", "4000"});
}

// Note [gemm candidates], Note [im2col candidates]: the gemm candidates on by default and the
// im2col ones off; DNNX_CUDNN_CONV_IM2COL takes off, f32 and on (and the switch words), and
// anything else is an InvalidArgument naming the variable.
TEST(CudnnSearchSettings, GemmOnAndIm2colOffByDefault) {
  const ScopedEnv gemm("DNNX_CUDNN_CONV_GEMM", nullptr);
  const ScopedEnv im2col("DNNX_CUDNN_CONV_IM2COL", nullptr);
  const cudnn::Settings defaults = cudnn::settings_from_env();
  EXPECT_TRUE(defaults.conv_gemm);
  EXPECT_EQ(defaults.conv_im2col, cudnn::ListedFor::off);
  for (const auto& [text, expected] : {std::pair{"f32", cudnn::ListedFor::f32},
                                       {"F32", cudnn::ListedFor::f32},
                                       {"on", cudnn::ListedFor::on},
                                       {"1", cudnn::ListedFor::on},
                                       {"off", cudnn::ListedFor::off},
                                       {"0", cudnn::ListedFor::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_IM2COL", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_im2col, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_IM2COL", {"f16", "all", "2"});
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_GEMM", "0");
    EXPECT_FALSE(cudnn::settings_from_env().conv_gemm);
  }
}

// Note [winograd candidates]: on by default; DNNX_CUDNN_CONV_WINOGRAD=0 turns them off, and a
// value that is no switch is an InvalidArgument naming the variable.
TEST(CudnnSearchSettings, WinogradOnByDefault) {
  expect_switch_on_by_default("DNNX_CUDNN_CONV_WINOGRAD", &cudnn::Settings::conv_winograd,
                              {"f32", "maybe"});
}

// Note [tap-region candidates]: listed for fp32 convolutions whose taps read mostly padding by
// default; DNNX_CUDNN_CONV_TAPS takes off, f32, sparse and on (and the switch words), and
// anything else is an InvalidArgument naming the variable.
TEST(CudnnSearchSettings, TapRegionsForF32ByDefault) {
  const ScopedEnv unset("DNNX_CUDNN_CONV_TAPS", nullptr);
  EXPECT_EQ(cudnn::settings_from_env().conv_taps, cudnn::TapCandidates::f32);
  for (const auto& [text, expected] : {std::pair{"sparse", cudnn::TapCandidates::sparse},
                                       {"F32", cudnn::TapCandidates::f32},
                                       {"ON", cudnn::TapCandidates::on},
                                       {"1", cudnn::TapCandidates::on},
                                       {"off", cudnn::TapCandidates::off},
                                       {"0", cudnn::TapCandidates::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_TAPS", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_taps, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_TAPS", {"boxes", "f16", "2"});
}

TEST(CudnnSearchSettings, FramesForF32ByDefault) {
  const ScopedEnv unset("DNNX_CUDNN_CONV_FRAMES", nullptr);
  EXPECT_EQ(cudnn::settings_from_env().conv_frames, cudnn::ListedFor::f32);
  for (const auto& [text, expected] : {std::pair{"f32", cudnn::ListedFor::f32},
                                       {"ON", cudnn::ListedFor::on},
                                       {"1", cudnn::ListedFor::on},
                                       {"off", cudnn::ListedFor::off},
                                       {"0", cudnn::ListedFor::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_FRAMES", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_frames, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_FRAMES", {"frames", "f16", "2"});
}

// Note [frame candidates]: the 2-D convolution each output frame of a 3-D one is (no GPU needed).
TEST(CudnnFrames, FrameDescIsTheConvolutionOfOneFrame) {
  const ConvDesc video =
      ConvDesc::from_shapes({24, 64, 16, 56, 56}, {144, 64, 1, 3, 3}, {2, 2, 1}, {0, 1, 0},
                            {1, 2, 1}, 1, DType::f32, Layout::channels_last);
  const std::optional<ConvDesc> frame = cudnn::frame_desc(video);
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->spatial_dims, 2);
  EXPECT_EQ(frame->batch, 24);
  EXPECT_EQ(frame->in_channels, 64);
  EXPECT_EQ(frame->out_channels, 144);
  EXPECT_EQ(frame->layout, Layout::channels_last);
  EXPECT_EQ(frame->src_dims(), (Dims{24, 64, 56, 56}));
  EXPECT_EQ(frame->weights_dims(), (Dims{144, 64, 3, 3}));
  EXPECT_EQ(frame->output_size(0), video.output_size(1));
  EXPECT_EQ(frame->output_size(1), video.output_size(2));
  EXPECT_EQ(frame->stride[0], 2);
  EXPECT_EQ(frame->stride[1], 1);
  EXPECT_EQ(frame->pad_before[0], 1);
  EXPECT_EQ(frame->dilation[0], 2);
  EXPECT_NO_THROW(frame->validate());
  // A kernel depth over 1, depth padding, or a 2-D convolution: no frames.
  EXPECT_FALSE(cudnn::frame_desc(ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 3, 3, 3})));
  EXPECT_FALSE(
      cudnn::frame_desc(ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 1, 3, 3}, {1}, {1, 1, 1})));
  EXPECT_FALSE(cudnn::frame_desc(ConvDesc::from_shapes({2, 8, 6, 6}, {8, 8, 1, 3})));
}

TEST(CudnnSearchSettings, FoldsForF32ByDefault) {
  const ScopedEnv unset("DNNX_CUDNN_CONV_FOLDS", nullptr);
  EXPECT_EQ(cudnn::settings_from_env().conv_folds, cudnn::ListedFor::f32);
  for (const auto& [text, expected] : {std::pair{"f32", cudnn::ListedFor::f32},
                                       {"ON", cudnn::ListedFor::on},
                                       {"1", cudnn::ListedFor::on},
                                       {"off", cudnn::ListedFor::off},
                                       {"0", cudnn::ListedFor::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_FOLDS", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_folds, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_FOLDS", {"planes", "f16", "2"});
}

// Note [stacked folds]: listed for every dtype by default.
TEST(CudnnSearchSettings, StackedFoldsOnByDefault) {
  const ScopedEnv unset("DNNX_CUDNN_CONV_STACKED", nullptr);
  EXPECT_EQ(cudnn::settings_from_env().conv_stacked, cudnn::ListedFor::on);
  for (const auto& [text, expected] : {std::pair{"f32", cudnn::ListedFor::f32},
                                       {"on", cudnn::ListedFor::on},
                                       {"off", cudnn::ListedFor::off},
                                       {"0", cudnn::ListedFor::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_STACKED", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_stacked, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_STACKED", {"stacked", "f16", "2"});
}

// Note [phase folds]: listed for every dtype by default.
TEST(CudnnSearchSettings, PhaseFoldsOnByDefault) {
  const ScopedEnv unset("DNNX_CUDNN_CONV_PHASES", nullptr);
  EXPECT_EQ(cudnn::settings_from_env().conv_phases, cudnn::ListedFor::on);
  for (const auto& [text, expected] : {std::pair{"f32", cudnn::ListedFor::f32},
                                       {"on", cudnn::ListedFor::on},
                                       {"off", cudnn::ListedFor::off},
                                       {"0", cudnn::ListedFor::off}}) {
    const ScopedEnv set("DNNX_CUDNN_CONV_PHASES", text);
    EXPECT_EQ(cudnn::settings_from_env().conv_phases, expected) << text;
  }
  expect_rejected("DNNX_CUDNN_CONV_PHASES", {"phases", "f16", "2"});
}

// dnnx's own convolution kernels: candidates by default; DNNX_CUDNN_CONV_KERNELS=0 lists each
// of them unsupported, naming the variable, and a value that is no switch is an InvalidArgument.
TEST(CudnnSearchSettings, KernelsOnByDefault) {
  expect_switch_on_by_default("DNNX_CUDNN_CONV_KERNELS", &cudnn::Settings::conv_kernels,
                              {"f32", "cudnn"});
}

// dnnx's own convolution kernels launched dependent on the kernel before them (Note [dependent
// launches] in kernels/common.cuh): on by default, off with DNNX_CUDNN_DEPENDENT_LAUNCHES=0, and
// a value that is no switch is an InvalidArgument.
TEST(CudnnSearchSettings, DependentLaunchesOnByDefault) {
  expect_switch_on_by_default("DNNX_CUDNN_DEPENDENT_LAUNCHES", &cudnn::Settings::dependent_launches,
                              {"pdl", "2"});
}

// kernel_candidates(): the depthwise, grouped and narrow-channel kernels' entries in that order,
// the same ids with the switch off, each then unsupported for that reason (no GPU needed).
TEST(CudnnSearchSettings, KernelCandidatesFollowTheSwitch) {
  const auto nhwc = [](ConvDesc desc) {
    desc.layout = Layout::channels_last;
    return desc;
  };
  const ConvDesc descs[] = {
      nhwc(ConvDesc::from_shapes({8, 32, 28, 28}, {32, 1, 3, 3}, {1}, {1}, {1}, 32, DType::f16)),
      nhwc(ConvDesc::from_shapes({8, 64, 28, 28}, {64, 4, 3, 3}, {1}, {1}, {1}, 16, DType::f16)),
      nhwc(ConvDesc::from_shapes({8, 3, 56, 56}, {32, 3, 3, 3}, {1}, {1}, {1}, 1, DType::f16)),
  };
  std::size_t supported = 0;
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      std::vector<AlgoInfo> expected = cudnn::depthwise_candidates(desc, direction);
      for (AlgoInfo& info : cudnn::grouped_candidates(desc, direction))
        expected.push_back(std::move(info));
      for (AlgoInfo& info : cudnn::narrow_candidates(desc, direction))
        expected.push_back(std::move(info));
      const std::vector<AlgoInfo> on = cudnn::kernel_candidates(desc, direction, true);
      const std::vector<AlgoInfo> off = cudnn::kernel_candidates(desc, direction, false);
      ASSERT_EQ(on.size(), expected.size());
      ASSERT_EQ(off.size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(on[i].id, expected[i].id);
        EXPECT_EQ(on[i].supported, expected[i].supported) << on[i].id;
        EXPECT_EQ(on[i].reason, expected[i].reason) << on[i].id;
        EXPECT_EQ(off[i].id, expected[i].id);
        EXPECT_FALSE(off[i].supported) << off[i].id;
        EXPECT_NE(off[i].reason.find("DNNX_CUDNN_CONV_KERNELS=0"), std::string::npos)
            << off[i].reason;
        EXPECT_EQ(off[i].workspace_bytes, 0u) << off[i].id;
        supported += on[i].supported ? 1 : 0;
      }
    }
  }
  // The depthwise kernels, the grouped one and the narrow one each run some of these.
  EXPECT_GE(supported, 5u);
}

// Note [fold candidates]: the 2-D convolutions a 3-D one folds into, their ids, and where they
// need copies (no GPU needed).
TEST(CudnnFolds, FoldsAreTheTwoDimensionalConvolutionsOfOtherViews) {
  using cudnn::FoldKind;
  // R(2+1)D's l2.temporal.s2, NCDHW: planes (depth x rows*columns), no copy.
  const ConvDesc temporal = ConvDesc::from_shapes({24, 230, 16, 28, 28}, {128, 230, 3, 1, 1},
                                                  {2, 1, 1}, {1, 0, 0}, {1}, 1, DType::f32);
  const std::optional<cudnn::ConvFold> planes = cudnn::conv_fold(temporal, FoldKind::planes);
  ASSERT_TRUE(planes.has_value());
  EXPECT_FALSE(planes->copies);
  const ConvDesc& p = planes->folded;
  EXPECT_EQ(p.spatial_dims, 2);
  EXPECT_EQ(p.src_dims(), (Dims{24, 230, 16, 28 * 28}));
  EXPECT_EQ(p.weights_dims(), (Dims{128, 230, 3, 1}));
  EXPECT_EQ(p.dst_dims(), (Dims{24, 128, 8, 28 * 28}));
  EXPECT_EQ(p.stride[0], 2);
  EXPECT_EQ(p.pad_before[0], 1);
  EXPECT_EQ(p.pad_after[0], 1);
  EXPECT_NO_THROW(p.validate());
  EXPECT_FALSE(cudnn::conv_fold(temporal, FoldKind::frames));  // kernel depth 3, padded
  // Each element of the 3-D output is the same element of the 2-D one: the same count.
  EXPECT_EQ(temporal.dst_dims()[2] * temporal.dst_dims()[3] * temporal.dst_dims()[4],
            p.dst_dims()[2] * p.dst_dims()[3]);

  // R(2+1)D's l1.spatial: frames, a batch of N x T; NCDHW copies them, NDHWC does not.
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    const ConvDesc spatial = ConvDesc::from_shapes({24, 64, 16, 56, 56}, {144, 64, 1, 3, 3}, {1},
                                                   {0, 1, 1}, {1}, 1, DType::f32, layout);
    const std::optional<cudnn::ConvFold> frames = cudnn::conv_fold(spatial, FoldKind::frames);
    ASSERT_TRUE(frames.has_value());
    EXPECT_EQ(frames->copies, layout == Layout::channels_first);
    EXPECT_EQ(frames->folded.src_dims(), (Dims{24 * 16, 64, 56, 56}));
    EXPECT_EQ(frames->folded.dst_dims(), (Dims{24 * 16, 144, 56, 56}));
    EXPECT_EQ(frames->folded.layout, layout);
    EXPECT_FALSE(cudnn::conv_fold(spatial, FoldKind::planes));  // a 3x3 over the rows
  }
  // A depth stride: a batch of the output frames, copied in either layout.
  const ConvDesc strided =
      ConvDesc::from_shapes({2, 8, 7, 6, 6}, {8, 8, 1, 3, 3}, {2, 1, 1}, {0, 1, 1}, {1}, 1,
                            DType::f16, Layout::channels_last);
  const std::optional<cudnn::ConvFold> frames = cudnn::conv_fold(strided, FoldKind::frames);
  ASSERT_TRUE(frames.has_value());
  EXPECT_TRUE(frames->copies);
  EXPECT_EQ(frames->folded.batch, 2 * 4);
  // A pointwise 3-D convolution of stride 1 folds both ways; 2-D and 3x3x3 ones not at all.
  EXPECT_EQ(cudnn::conv_folds(ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 1, 1, 1})).size(), 2u);
  EXPECT_TRUE(cudnn::conv_folds(ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 3, 3, 3})).empty());
  EXPECT_TRUE(cudnn::conv_folds(ConvDesc::from_shapes({2, 8, 6, 6}, {8, 8, 3, 1})).empty());
  // Rows or columns strided or padded: no planes.
  EXPECT_FALSE(cudnn::conv_fold(
      ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 3, 1, 1}, {1, 2, 2}, {1, 0, 0}),
      FoldKind::planes));
  EXPECT_FALSE(cudnn::conv_fold(
      ConvDesc::from_shapes({2, 8, 4, 6, 6}, {8, 8, 3, 1, 1}, {1}, {1, 1, 0}), FoldKind::planes));

  // Ids: "cudnn:fold:<kind>:<inner id>", inner ids with colons of their own.
  AlgoInfo inner;
  inner.id = "cudnn:engine:70:tile_size=4,idx_mode=0";
  inner.variant_of = "cudnn:engine:70";
  inner.supported = true;
  inner.workspace_bytes = 1000;
  inner.notes = {"heuristics_top", "implicit_gemm"};
  const AlgoInfo wrapped = cudnn::fold_info(strided, *frames, inner);
  EXPECT_EQ(wrapped.id, "cudnn:fold:frames:cudnn:engine:70:tile_size=4,idx_mode=0");
  EXPECT_EQ(wrapped.variant_of, "cudnn:fold:frames:cudnn:engine:70");
  EXPECT_FALSE(wrapped.has_note("heuristics_top"));
  EXPECT_TRUE(wrapped.has_note("implicit_gemm"));
  EXPECT_TRUE(wrapped.has_note("fold_frames"));
  // The inner workspace (aligned to 256 bytes), then the packed frames of x and of y: 2 x 4
  // frames of 8 x 6 x 6 f16 each.
  EXPECT_EQ(wrapped.workspace_bytes, 1024u + 2 * (8u * 8 * 6 * 6 * 2));
  EXPECT_EQ(cudnn::fold_info(temporal, *planes, inner).workspace_bytes, 1000u);
  const std::optional<cudnn::FoldInnerId> parsed = cudnn::fold_inner_id(wrapped.id);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, FoldKind::frames);
  EXPECT_EQ(parsed->inner, inner.id);
  EXPECT_EQ(cudnn::fold_inner_id("cudnn:fold:planes:cudnn:legacy:fwd:fft:fma")->kind,
            FoldKind::planes);
  for (const char* other : {"cudnn:fold", "cudnn:fold:", "cudnn:fold:planes:", "cudnn:fold:rows:x",
                            "cudnn:frames:fft", "cudnn:engine:1"})
    EXPECT_FALSE(cudnn::fold_inner_id(other)) << other;
}

TEST(CudnnSearchSettings, PlanFolderFollowsTheCacheOrTheVariable) {
  const ScopedEnv cache_file("DNNX_CACHE_FILE", "/tmp/dnnx-search-settings/tune.json");
  {
    const ScopedEnv cache("DNNX_CACHE", "readwrite");
    const ScopedEnv dir("DNNX_PLAN_DIR", nullptr);
    EXPECT_EQ(cudnn::settings_from_env().plan_dir, "/tmp/dnnx-search-settings/tune.json.plans");
  }
  {
    const ScopedEnv cache("DNNX_CACHE", "off");
    const ScopedEnv dir("DNNX_PLAN_DIR", nullptr);
    EXPECT_EQ(cudnn::settings_from_env().plan_dir, "");
  }
  {
    const ScopedEnv dir("DNNX_PLAN_DIR", "/tmp/dnnx-search-settings/plans");
    EXPECT_EQ(cudnn::settings_from_env().plan_dir, "/tmp/dnnx-search-settings/plans");
  }
  {
    const ScopedEnv dir("DNNX_PLAN_DIR", "off");
    EXPECT_EQ(cudnn::settings_from_env().plan_dir, "");
  }
}

// ---- runtime-compiled candidates -------------------------------------------------------------

TEST(CudnnSearch, DepthwiseHalfListsARuntimeCompiledCandidateByDefault) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  Context context = cudnn_context();
  EXPECT_NE(context.fingerprint().find("rtc=on/"), std::string::npos) << context.fingerprint();
  const ConvDesc desc = depthwise_desc();
  const std::vector<AlgoInfo> algos = conv_list(context, desc, Direction::bwd_data);
  const std::vector<AlgoInfo> supported = runtime_compiled(algos, true);
  ASSERT_FALSE(supported.empty()) << "no runtime-compiled candidate is supported for "
                                  << test::conv_context(desc, Direction::bwd_data, "(list)")
                                  << "; unsupported ones: "
                                  << runtime_compiled(algos, false).size();
  for (const AlgoInfo& info : supported)
    std::cout << "[ cudnn    ] runtime-compiled: " << info.id << '\n';
  // After every other supported candidate: the heuristic pick compiles nothing.
  const auto first_supported =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
  ASSERT_NE(first_supported, algos.end());
  const bool only_compiled = std::all_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
    return !a.supported || a.has_note("runtime_compiled");
  });
  if (!only_compiled) {
    EXPECT_FALSE(first_supported->has_note("runtime_compiled")) << first_supported->id;
  }
  bool in_block = false, block_done = false;
  for (const AlgoInfo& info : algos) {
    if (!info.supported) break;
    const bool compiled = info.has_note("runtime_compiled");
    if (compiled) {
      EXPECT_FALSE(block_done) << info.id << ": runtime-compiled candidates are not contiguous";
      in_block = true;
    } else if (in_block) {
      block_done = true;
      EXPECT_NE(info.name.find("knob variant"), std::string::npos)
          << info.id << " (" << info.name << ") listed after a runtime-compiled candidate";
    }
  }

  // The opt-out lists them unsupported, saying so.
  const ScopedEnv off("DNNX_CUDNN_RUNTIME_COMPILED", "0");
  Context opted_out = cudnn_context();
  const std::vector<AlgoInfo> off_algos = conv_list(opted_out, desc, Direction::bwd_data);
  EXPECT_TRUE(runtime_compiled(off_algos, true).empty());
  for (const AlgoInfo& info : runtime_compiled(off_algos, false)) {
    const bool explained = info.reason.find("DNNX_CUDNN_RUNTIME_COMPILED=0") != std::string::npos ||
                           info.reason.find("TF32") != std::string::npos;
    EXPECT_TRUE(explained) << info.id << ": " << info.reason;
  }
}

// Note [depthwise candidates]: dnnx's supported depthwise kernels come right after the last
// config the heuristics rank first, so that a search times them early; the heuristic pick stays
// cuDNN's. fwd and bwd_data of the depthwise layer, whose heuristics have top configs
// (HeuristicTopConfigsAreAmongTheTimed).
TEST(CudnnSearch, DepthwiseKernelsFollowTheHeuristicsTopConfigs) {
  DNNX_REQUIRE_GPU();
  Context context = cudnn_context();
  const ConvDesc desc = depthwise_desc();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    SCOPED_TRACE(to_string(direction));
    const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
    auto is_kernel = [](const AlgoInfo& a) {
      return a.id.rfind("cudnn:kernel:depthwise:", 0) == 0;
    };
    const auto first_kernel = std::find_if(
        algos.begin(), algos.end(), [&](const AlgoInfo& a) { return a.supported && is_kernel(a); });
    ASSERT_NE(first_kernel, algos.end()) << "no supported depthwise kernel";
    // Runtime-compiled top configs are listed last (Note [runtime-compiled engines]).
    const auto last_top = std::find_if(algos.rbegin(), algos.rend(), [](const AlgoInfo& a) {
      return a.supported && a.has_note("heuristics_top") && !a.has_note("runtime_compiled");
    });
    ASSERT_NE(last_top, algos.rend()) << "no heuristics_top config";
    EXPECT_EQ(first_kernel, last_top.base()) << "the kernels do not follow " << last_top->id;
    // The supported kernels are contiguous, and none of them is the heuristic pick.
    const auto after = std::find_if_not(
        first_kernel, algos.end(), [&](const AlgoInfo& a) { return a.supported && is_kernel(a); });
    EXPECT_TRUE(std::none_of(after, algos.end(),
                             [&](const AlgoInfo& a) { return a.supported && is_kernel(a); }));
    EXPECT_FALSE(is_kernel(algos.front())) << algos.front().id;
  }
}

// Runs every candidate listed for each desc and direction that `pick` selects, each fixed in
// turn, and compares its output with the reference's; returns how many runs matched.
// Runs `direction` of desc on copies of `host` into `output` (on the device), by the context's
// policy.
void run_on_device(Context& context, const ConvDesc& desc, Direction direction,
                   const test::ConvOperands& host, Tensor& output) {
  switch (direction) {
    case Direction::fwd:
      conv_fwd(context, desc, test::device_copy(host.src, context),
               test::device_copy(host.weights, context), output);
      break;
    case Direction::bwd_data:
      conv_bwd_data(context, desc, test::device_copy(host.diff_dst, context),
                    test::device_copy(host.weights, context), output);
      break;
    default:
      conv_bwd_weights(context, desc, test::device_copy(host.src, context),
                       test::device_copy(host.diff_dst, context), output);
      break;
  }
}

std::size_t picked_candidates_match_the_reference(
    Context& context, const std::vector<ConvDesc>& descs,
    const std::function<bool(const AlgoInfo&)>& pick) {
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0;
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const test::ConvOperands host =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      const std::vector<float> expected =
          test::run_conv(reference, desc, direction, host).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(desc, direction, host);
      const Dims out_dims = test::conv_output_dims(desc, direction);
      for (const AlgoInfo& info : conv_list(context, desc, direction)) {
        if (!info.supported || !pick(info)) continue;
        const std::string where = test::conv_context(desc, direction, info.id);
        context.tune().policy(direction) = AlgoPolicy::fixed(info.id);
        Tensor output =
            test::device_copy(test::nan_tensor(out_dims, desc.dtype, desc.layout), context);
        try {
          run_on_device(context, desc, direction, host, output);
        } catch (const Error& error) {
          ADD_FAILURE() << "listed as supported but failed: " << error.what() << "\n" << where;
          continue;
        }
        const std::vector<float> actual = output_of(output);
        EXPECT_TRUE(test::all_finite(actual, out_dims, "output", where));
        EXPECT_TRUE(test::close_within_scale(actual, expected, scale, out_dims,
                                             test::conv_tolerance(desc.dtype), "output", where));
        ++checked;
      }
      context.tune().policy(direction) = AlgoPolicy::heuristic();
    }
  }
  return checked;
}

// Note [tap-region candidates]: with DNNX_CUDNN_CONV_TAPS=sparse a convolution whose taps read
// mostly padding lists cudnn:taps:boxes (and :rows and the nondeterministic algorithms' variants
// where they differ) after every other supported candidate, and each computes what the
// reference does in every direction: 2-D and 3-D, 1-D, NCHW and NHWC, f32, f16 and bf16,
// stride, groups, and padding beyond the kernel's reach (outputs no tap reaches). By default an
// f16 one lists one unsupported cudnn:taps naming the variable and an f32 one the candidates; a
// dense 3x3 lists none unless DNNX_CUDNN_CONV_TAPS=on; =off lists the one unsupported entry.
TEST(CudnnSearch, TapRegionCandidatesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv sparse("DNNX_CUDNN_CONV_TAPS", "sparse");
  const ConvDesc aspp =
      make_desc({2, 8, 17, 15}, {12, 8, 3, 3}, 1, 6, 6, 1, DType::f32, Layout::channels_first);
  const std::vector<ConvDesc> descs{
      aspp,
      make_desc({2, 16, 13, 11}, {24, 16, 3, 3}, 2, 5, 5, 1, DType::f16, Layout::channels_last),
      make_desc({2, 16, 11, 11}, {16, 8, 3, 3}, 1, 4, 4, 2, DType::bf16, Layout::channels_first),
      make_desc({2, 8, 7, 9, 8}, {8, 8, 3, 3, 3}, 1, 3, 3, 1, DType::f32, Layout::channels_last),
      make_desc({2, 4, 6, 6}, {8, 4, 3, 3}, 1, 5, 1, 1, DType::f32, Layout::channels_first),
      make_desc({2, 8, 40}, {8, 8, 3}, 1, 16, 16, 1, DType::f32, Layout::channels_first)};
  const auto is_taps = [](const AlgoInfo& info) { return info.has_note("tap_regions"); };
  Context context = cudnn_context();
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      const auto boxes = std::find_if(algos.begin(), algos.end(),
                                      [](const AlgoInfo& a) { return a.id == "cudnn:taps:boxes"; });
      ASSERT_NE(boxes, algos.end()) << desc.repro(direction);
      EXPECT_TRUE(boxes->supported) << boxes->reason << "\n" << desc.repro(direction);
      EXPECT_TRUE(boxes->deterministic);
      EXPECT_FALSE(is_taps(algos.front())) << algos.front().id;
    }
  }
  const ConvDesc dense =
      make_desc({2, 8, 12, 12}, {8, 8, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first);
  {
    const std::vector<AlgoInfo> algos = conv_list(context, dense, Direction::fwd);
    EXPECT_EQ(std::count_if(algos.begin(), algos.end(), is_taps), 0);
  }
  {
    const ScopedEnv unset("DNNX_CUDNN_CONV_TAPS", nullptr);
    Context defaults = cudnn_context();
    const std::vector<AlgoInfo> f32 = conv_list(defaults, aspp, Direction::fwd);
    EXPECT_GT(std::count_if(f32.begin(), f32.end(),
                            [&](const AlgoInfo& a) { return a.supported && is_taps(a); }),
              0);
    const std::vector<AlgoInfo> f16 = conv_list(defaults, descs[1], Direction::fwd);
    ASSERT_EQ(std::count_if(f16.begin(), f16.end(), is_taps), 1);
    const auto entry = std::find_if(f16.begin(), f16.end(), is_taps);
    EXPECT_FALSE(entry->supported);
    EXPECT_NE(entry->reason.find("DNNX_CUDNN_CONV_TAPS"), std::string::npos) << entry->reason;
  }
  {
    const ScopedEnv on("DNNX_CUDNN_CONV_TAPS", "on");
    Context all = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(all, dense, Direction::fwd);
    EXPECT_GT(std::count_if(algos.begin(), algos.end(),
                            [&](const AlgoInfo& a) { return a.supported && is_taps(a); }),
              0);
  }
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_TAPS", "off");
    Context none = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(none, aspp, Direction::fwd);
    ASSERT_EQ(std::count_if(algos.begin(), algos.end(), is_taps), 1);
    const auto entry = std::find_if(algos.begin(), algos.end(), is_taps);
    EXPECT_EQ(entry->id, "cudnn:taps");
    EXPECT_FALSE(entry->supported);
    EXPECT_NE(entry->reason.find("DNNX_CUDNN_CONV_TAPS"), std::string::npos) << entry->reason;
  }
  const std::size_t checked = picked_candidates_match_the_reference(context, descs, is_taps);
  std::cout << "[ cudnn    ] " << checked << " tap-region candidate runs matched\n";
  EXPECT_GE(checked, descs.size() * 3);
}

// Note [frame candidates]: with DNNX_CUDNN_CONV_FRAMES=on a 3-D convolution whose kernel has a
// depth of 1 and no depth padding lists supported cudnn:frames:<algorithm> candidates, never
// first, and each computes what the reference does in every direction: NCDHW f32 (strided
// frames), NDHWC f16 with a spatial stride, a depth stride of 2 (bwd_data zeroes the frames it
// skips), bf16 with groups. By default (f32) an f16 one lists one unsupported cudnn:frames naming
// the variable; =off keeps them from f32 too; a 2-D convolution or one with a kernel depth over 1
// lists none.
TEST(CudnnSearch, FrameCandidatesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv on("DNNX_CUDNN_CONV_FRAMES", "on");
  auto frames3d = [](const Dims& src, const Dims& weights, std::vector<std::int64_t> stride,
                     std::int64_t groups, DType dtype, Layout layout) {
    return ConvDesc::from_shapes(src, weights, stride, {0, 1, 1}, {1}, groups, dtype, layout);
  };
  const ConvDesc spatial =
      frames3d({2, 8, 5, 9, 10}, {12, 8, 1, 3, 3}, {1}, 1, DType::f32, Layout::channels_first);
  const std::vector<ConvDesc> descs{
      spatial,
      frames3d({2, 16, 4, 8, 8}, {16, 16, 1, 3, 3}, {1, 2, 2}, 1, DType::f16,
               Layout::channels_last),
      frames3d({2, 8, 7, 6, 6}, {8, 8, 1, 3, 3}, {2, 1, 1}, 1, DType::f32, Layout::channels_first),
      frames3d({2, 16, 3, 7, 7}, {16, 8, 1, 3, 3}, {1}, 2, DType::bf16, Layout::channels_first)};
  const auto is_frames = [](const AlgoInfo& info) { return info.has_note("frames"); };
  Context context = cudnn_context();
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      EXPECT_GT(std::count_if(algos.begin(), algos.end(),
                              [&](const AlgoInfo& a) { return a.supported && is_frames(a); }),
                0)
          << desc.repro(direction);
      EXPECT_FALSE(is_frames(algos.front())) << algos.front().id;
      // Each carries the families of its legacy algorithm, as the listing's legacy entries do.
      for (const AlgoInfo& frames : algos) {
        if (!frames.supported || !is_frames(frames)) continue;
        const std::string legacy_prefix =
            detail::cat("cudnn:legacy:", to_string(direction), ":",
                        frames.id.substr(std::string("cudnn:frames:").size()), ":");
        const auto legacy = std::find_if(algos.begin(), algos.end(), [&](const AlgoInfo& a) {
          return a.id.starts_with(legacy_prefix);
        });
        ASSERT_NE(legacy, algos.end()) << legacy_prefix;
        EXPECT_EQ(frames.families, legacy->families) << frames.id;
      }
    }
  }
  for (const ConvDesc& none :
       {make_desc({2, 8, 12, 12}, {8, 8, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first),
        make_desc({2, 8, 4, 6, 6}, {8, 8, 3, 3, 3}, 1, 1, 1, 1, DType::f32,
                  Layout::channels_first)}) {
    const std::vector<AlgoInfo> algos = conv_list(context, none, Direction::fwd);
    EXPECT_EQ(std::count_if(algos.begin(), algos.end(), is_frames), 0) << none;
  }
  {
    const ScopedEnv unset("DNNX_CUDNN_CONV_FRAMES", nullptr);
    Context defaults = cudnn_context();
    const std::vector<AlgoInfo> f32 = conv_list(defaults, spatial, Direction::fwd);
    EXPECT_GT(std::count_if(f32.begin(), f32.end(),
                            [&](const AlgoInfo& a) { return a.supported && is_frames(a); }),
              0);
    const std::vector<AlgoInfo> f16 = conv_list(defaults, descs[1], Direction::fwd);
    ASSERT_EQ(std::count_if(f16.begin(), f16.end(), is_frames), 1);
    const auto entry = std::find_if(f16.begin(), f16.end(), is_frames);
    EXPECT_EQ(entry->id, "cudnn:frames");
    EXPECT_FALSE(entry->supported);
    EXPECT_NE(entry->reason.find("DNNX_CUDNN_CONV_FRAMES"), std::string::npos) << entry->reason;
  }
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_FRAMES", "off");
    Context none = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(none, spatial, Direction::fwd);
    ASSERT_EQ(std::count_if(algos.begin(), algos.end(), is_frames), 1);
    EXPECT_FALSE(std::find_if(algos.begin(), algos.end(), is_frames)->supported);
  }
  const std::size_t checked = picked_candidates_match_the_reference(context, descs, is_frames);
  std::cout << "[ cudnn    ] " << checked << " frame candidate runs matched\n";
  EXPECT_GE(checked, descs.size() * 3);
}

// Note [fold candidates]: with DNNX_CUDNN_CONV_FOLDS=on a 3-D convolution that folds into a 2-D
// one lists supported cudnn:fold:<kind>:<inner id> candidates after every other supported one,
// and each computes what the reference does in every direction: planes of a 3x1x1 in NCDHW f32
// and NDHWC f16 with a depth stride of 2, frames of a 1x3x3 in NCDHW f32 (copies), NDHWC f32
// (no copy), NCDHW f32 with a depth stride of 2 (bwd_data zeroes the skipped frames), NDHWC bf16
// with groups, a spatial and a depth stride (copies), and a 1x1x1 with both folds. By default an
// f16 one lists one unsupported cudnn:fold naming the variable; =off keeps them from f32 too.
TEST(CudnnSearch, FoldCandidatesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv on("DNNX_CUDNN_CONV_FOLDS", "on");
  const ScopedEnv frames("DNNX_CUDNN_CONV_FRAMES", "off");
  auto conv3d = [](const Dims& src, const Dims& weights, std::vector<std::int64_t> stride,
                   std::vector<std::int64_t> pad, std::int64_t groups, DType dtype, Layout layout) {
    return ConvDesc::from_shapes(src, weights, stride, pad, {1}, groups, dtype, layout);
  };
  const ConvDesc temporal = conv3d({2, 8, 6, 5, 7}, {12, 8, 3, 1, 1}, {1}, {1, 0, 0}, 1, DType::f32,
                                   Layout::channels_first);
  const ConvDesc f16_temporal = conv3d({2, 16, 7, 4, 5}, {8, 16, 3, 1, 1}, {2, 1, 1}, {1, 0, 0}, 1,
                                       DType::f16, Layout::channels_last);
  const std::vector<ConvDesc> descs{
      temporal,
      f16_temporal,
      conv3d({2, 8, 5, 9, 10}, {12, 8, 1, 3, 3}, {1}, {0, 1, 1}, 1, DType::f32,
             Layout::channels_first),
      conv3d({2, 8, 5, 9, 10}, {12, 8, 1, 3, 3}, {1}, {0, 1, 1}, 1, DType::f32,
             Layout::channels_last),
      conv3d({2, 8, 7, 6, 6}, {8, 8, 1, 3, 3}, {2, 1, 1}, {0, 1, 1}, 1, DType::f32,
             Layout::channels_first),
      conv3d({2, 16, 5, 8, 8}, {16, 8, 1, 3, 3}, {2}, {0, 1, 1}, 2, DType::bf16,
             Layout::channels_last),
      conv3d({2, 8, 4, 5, 6}, {16, 8, 1, 1, 1}, {1}, {0}, 1, DType::f32, Layout::channels_first)};
  const auto is_fold = [](const AlgoInfo& info) { return info.has_note("fold"); };
  Context context = cudnn_context();
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      const auto first_fold = std::find_if(
          algos.begin(), algos.end(), [&](const AlgoInfo& a) { return a.supported && is_fold(a); });
      ASSERT_NE(first_fold, algos.end()) << desc.repro(direction);
      // After every other supported candidate, with no heuristics' top note of their own.
      EXPECT_TRUE(std::none_of(first_fold, algos.end(), [&](const AlgoInfo& a) {
        return a.supported && !is_fold(a);
      })) << desc.repro(direction);
      EXPECT_TRUE(std::none_of(first_fold, algos.end(),
                               [](const AlgoInfo& a) { return a.has_note("heuristics_top"); }));
      // No FFT over planes (Note [fold candidates]).
      EXPECT_TRUE(std::none_of(algos.begin(), algos.end(), [](const AlgoInfo& a) {
        return a.id.starts_with("cudnn:fold:planes:") && a.has_note("fft");
      }));
      // Described alone by id, as a persisted choice is re-validated.
      Context fresh = cudnn_context();
      const std::optional<AlgoInfo> described =
          detail::state_of(fresh).backend().conv().describe_candidate(desc, direction,
                                                                      first_fold->id);
      ASSERT_TRUE(described.has_value()) << first_fold->id;
      EXPECT_TRUE(described->supported) << described->reason;
      EXPECT_EQ(described->id, first_fold->id);
    }
  }
  {
    const std::vector<AlgoInfo> algos = conv_list(context, descs.back(), Direction::fwd);
    for (const char* kind : {"cudnn:fold:planes:", "cudnn:fold:frames:"}) {
      EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [&](const AlgoInfo& a) {
        return a.id.starts_with(kind);
      })) << kind;
    }
  }
  {
    const ScopedEnv unset("DNNX_CUDNN_CONV_FOLDS", nullptr);
    Context defaults = cudnn_context();
    const std::vector<AlgoInfo> f32 = conv_list(defaults, temporal, Direction::fwd);
    EXPECT_GT(std::count_if(f32.begin(), f32.end(),
                            [&](const AlgoInfo& a) { return a.supported && is_fold(a); }),
              0);
    // Its depth stride of 2 with 16 channels also gets phase folds, which have a variable of
    // their own (DNNX_CUDNN_CONV_PHASES, on by default).
    const auto is_plane_or_frame_fold = [&](const AlgoInfo& a) {
      return is_fold(a) && !a.has_note("fold_phases");
    };
    const std::vector<AlgoInfo> f16 = conv_list(defaults, f16_temporal, Direction::fwd);
    EXPECT_GT(std::count_if(f16.begin(), f16.end(),
                            [](const AlgoInfo& a) { return a.has_note("fold_phases"); }),
              0);
    ASSERT_EQ(std::count_if(f16.begin(), f16.end(), is_plane_or_frame_fold), 1);
    const auto entry = std::find_if(f16.begin(), f16.end(), is_plane_or_frame_fold);
    EXPECT_EQ(entry->id, "cudnn:fold");
    EXPECT_FALSE(entry->supported);
    EXPECT_NE(entry->reason.find("DNNX_CUDNN_CONV_FOLDS"), std::string::npos) << entry->reason;
  }
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_FOLDS", "off");
    Context none = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(none, temporal, Direction::fwd);
    ASSERT_EQ(std::count_if(algos.begin(), algos.end(), is_fold), 1);
    EXPECT_FALSE(std::find_if(algos.begin(), algos.end(), is_fold)->supported);
  }
  const std::size_t checked = picked_candidates_match_the_reference(context, descs, is_fold);
  std::cout << "[ cudnn    ] " << checked << " fold candidate runs matched\n";
  EXPECT_GE(checked, descs.size() * 3);
}

// Runtime-compiled candidates compute what the reference does (the parity runner runs with them
// off, to keep its time; these descs cover them).
TEST(CudnnSearch, RuntimeCompiledCandidatesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  Context context = cudnn_context();
  const std::size_t checked = picked_candidates_match_the_reference(
      context,
      {make_desc({2, 32, 14, 14}, {32, 1, 3, 3}, 2, 1, 1, 32, DType::f16, Layout::channels_last),
       make_desc({1, 8, 6, 7, 5}, {16, 8, 3, 3, 3}, 1, 2, 2, 1, DType::f16, Layout::channels_last),
       make_desc({2, 16, 9, 9}, {16, 16, 3, 3}, 1, 1, 1, 1, DType::bf16, Layout::channels_last)},
      [](const AlgoInfo& info) { return info.has_note("runtime_compiled"); });
  std::cout << "[ cudnn    ] " << checked << " runtime-compiled candidate runs matched\n";
  EXPECT_GT(checked, 0u) << "no runtime-compiled candidate on any of the descs";
}

// Note [gemm candidates]: by default a 1x1 convolution of stride 1 lists matrix products in
// every direction, in NCHW (the batch sharing the weights, or batch 1) and NHWC, 2-D and 3-D, and
// each computes what the reference does, the packed form of an NCHW batch's bwd_weights too
// (Note [packed gemm]); a 3x3 lists none. With DNNX_CUDNN_CONV_GEMM=0 a 1x1
// lists one unsupported entry saying what turned them off. The weight gradient over 25,088
// positions, which cuBLASLt splits, lists split-K variants of its products (Note [split-K
// variants] in matmul.cpp), each naming a gemm candidate listed before it; they run too.
TEST(CudnnSearch, GemmCandidatesOfOneByOneConvolutionsMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ConvDesc long_reduction =
      make_desc({32, 64, 28, 28}, {32, 64, 1, 1}, 1, 0, 1, 1, DType::f16, Layout::channels_last);
  const std::vector<ConvDesc> descs{
      long_reduction,
      make_desc({3, 24, 9, 11}, {40, 24, 1, 1}, 1, 0, 1, 1, DType::f32, Layout::channels_first),
      make_desc({1, 24, 9, 11}, {40, 24, 1, 1}, 1, 0, 1, 1, DType::f32, Layout::channels_first),
      make_desc({2, 32, 7, 5}, {48, 32, 1, 1}, 1, 0, 2, 1, DType::f16, Layout::channels_last),
      make_desc({2, 16, 6, 6}, {24, 16, 1, 1}, 1, 0, 1, 1, DType::bf16, Layout::channels_first),
      make_desc({2, 16, 3, 4, 5}, {8, 16, 1, 1, 1}, 1, 0, 1, 1, DType::f32, Layout::channels_last)};
  const ConvDesc three =
      make_desc({2, 16, 9, 9}, {16, 16, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first);
  const auto is_gemm = [](const AlgoInfo& info) { return info.has_note("conv_gemm"); };
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_GEMM", "0");
    Context context = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(context, descs[0], Direction::fwd);
    const auto gemms = std::count_if(algos.begin(), algos.end(), is_gemm);
    EXPECT_EQ(gemms, 1);
    const auto off_entry = std::find_if(algos.begin(), algos.end(), is_gemm);
    ASSERT_NE(off_entry, algos.end());
    EXPECT_FALSE(off_entry->supported);
    EXPECT_NE(off_entry->reason.find("DNNX_CUDNN_CONV_GEMM=0"), std::string::npos)
        << off_entry->reason;
  }
  const ScopedEnv on("DNNX_CUDNN_CONV_GEMM", nullptr);  // the default
  Context context = cudnn_context();
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      const auto supported = std::count_if(
          algos.begin(), algos.end(), [&](const AlgoInfo& a) { return a.supported && is_gemm(a); });
      EXPECT_GT(supported, 0) << desc.repro(direction);
      // After every other supported candidate: the heuristic pick stays cuDNN's.
      EXPECT_FALSE(is_gemm(algos.front())) << algos.front().id;
      expect_packed_form_where_due(algos, "cudnn:gemm:packed:", desc, direction);
    }
    const std::vector<AlgoInfo> algos = conv_list(context, three, Direction::fwd);
    EXPECT_EQ(std::count_if(algos.begin(), algos.end(), is_gemm), 0);
  }
  {
    const std::vector<AlgoInfo> algos = conv_list(context, long_reduction, Direction::bwd_weights);
    std::size_t variants = 0;
    for (std::size_t i = 0; i < algos.size(); ++i) {
      if (!is_gemm(algos[i]) || algos[i].variant_of.empty()) continue;
      ++variants;
      EXPECT_TRUE(algos[i].has_note("split_k_variant")) << algos[i].id;
      EXPECT_TRUE(std::any_of(algos.begin(), algos.begin() + static_cast<std::ptrdiff_t>(i),
                              [&](const AlgoInfo& a) { return a.id == algos[i].variant_of; }))
          << algos[i].id << " names " << algos[i].variant_of;
    }
    EXPECT_GT(variants, 0u) << long_reduction.repro(Direction::bwd_weights);
    std::cout << "[ cudnn    ] " << variants << " split-K variants among the gemm candidates of "
              << long_reduction.repro(Direction::bwd_weights) << '\n';
  }
  const std::size_t checked = picked_candidates_match_the_reference(context, descs, is_gemm);
  std::cout << "[ cudnn    ] " << checked << " gemm candidate runs matched\n";
  EXPECT_GT(checked, 0u);
}

// Note [im2col candidates]: off by default, an ungrouped convolution that is no 1x1 product
// lists one unsupported "cudnn:im2col" naming the variable; with DNNX_CUDNN_CONV_IM2COL=f32 only
// the fp32 ones list theirs; with =on every direction of 2-D and 3-D, NCHW and NHWC layers
// (stride, padding, dilation) lists supported candidates after every other supported one, the
// packed form exactly for the bwd_weights of an NCHW batch, and each computes what the reference
// does; grouped and 1x1 layers list none.
TEST(CudnnSearch, Im2colCandidatesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const ConvDesc f32 =
      make_desc({3, 24, 9, 11}, {40, 24, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first);
  const ConvDesc f16 =
      make_desc({2, 32, 13, 10}, {48, 32, 3, 3}, 2, 2, 2, 1, DType::f16, Layout::channels_last);
  const std::vector<ConvDesc> descs{
      f32, f16,
      make_desc({2, 16, 7, 7}, {24, 16, 5, 5}, 1, 2, 1, 1, DType::bf16, Layout::channels_first),
      make_desc({2, 8, 5, 6, 7}, {12, 8, 3, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_last),
      make_desc({2, 8, 5, 6, 7}, {12, 8, 3, 1, 1}, 2, 1, 1, 1, DType::f32, Layout::channels_first)};
  const auto is_im2col = [](const AlgoInfo& info) { return info.has_note("conv_im2col"); };
  const auto supported_im2cols = [&](const std::vector<AlgoInfo>& algos) {
    return std::count_if(algos.begin(), algos.end(),
                         [&](const AlgoInfo& a) { return a.supported && is_im2col(a); });
  };
  {
    const ScopedEnv off("DNNX_CUDNN_CONV_IM2COL", nullptr);
    Context context = cudnn_context();
    const std::vector<AlgoInfo> algos = conv_list(context, f32, Direction::fwd);
    EXPECT_EQ(std::count_if(algos.begin(), algos.end(), is_im2col), 1);
    EXPECT_EQ(supported_im2cols(algos), 0);
    const auto entry = std::find_if(algos.begin(), algos.end(), is_im2col);
    ASSERT_NE(entry, algos.end());
    EXPECT_NE(entry->reason.find("DNNX_CUDNN_CONV_IM2COL"), std::string::npos) << entry->reason;
  }
  {
    const ScopedEnv only("DNNX_CUDNN_CONV_IM2COL", "f32");
    Context context = cudnn_context();
    EXPECT_GT(supported_im2cols(conv_list(context, f32, Direction::fwd)), 0);
    EXPECT_EQ(supported_im2cols(conv_list(context, f16, Direction::fwd)), 0);
  }
  const ScopedEnv on("DNNX_CUDNN_CONV_IM2COL", "on");
  Context context = cudnn_context();
  for (const ConvDesc& desc : descs) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      EXPECT_GT(supported_im2cols(algos), 0) << desc.repro(direction);
      EXPECT_FALSE(is_im2col(algos.front())) << algos.front().id;
      expect_packed_form_where_due(algos, "cudnn:im2col:packed:", desc, direction);
    }
  }
  for (const ConvDesc& none :
       {make_desc({2, 16, 9, 9}, {16, 8, 3, 3}, 1, 1, 1, 2, DType::f32, Layout::channels_first),
        make_desc({2, 16, 9, 9}, {24, 16, 1, 1}, 1, 0, 1, 1, DType::f32, Layout::channels_first)}) {
    const std::vector<AlgoInfo> algos = conv_list(context, none, Direction::fwd);
    EXPECT_EQ(std::count_if(algos.begin(), algos.end(), is_im2col), 0) << none;
  }
  const std::size_t checked = picked_candidates_match_the_reference(context, descs, is_im2col);
  std::cout << "[ cudnn    ] " << checked << " im2col candidate runs matched\n";
  EXPECT_GT(checked, 0u);

  // A batch whose column matrix is over the cap runs in passes (1.2 GB here: two of 16
  // samples); too large for the reference, so the first candidate of each form is compared with
  // cuDNN's heuristic pick.
  const ConvDesc large =
      make_desc({32, 64, 128, 128}, {64, 64, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first);
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const test::ConvOperands host =
        test::random_conv_operands(large, direction, test::seed_from(large.key()));
    const Dims out_dims = test::conv_output_dims(large, direction);
    const std::vector<float> scale = test::conv_error_scale(large, direction, host);
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    Tensor expected_output =
        test::device_copy(test::nan_tensor(out_dims, large.dtype, large.layout), context);
    run_on_device(context, large, direction, host, expected_output);
    const std::vector<float> expected = output_of(expected_output);
    std::set<bool> forms;
    for (const AlgoInfo& info : conv_list(context, large, direction)) {
      if (!info.supported || !is_im2col(info)) continue;
      const bool packed = info.id.starts_with("cudnn:im2col:packed:");
      if (!forms.insert(packed).second) continue;
      const std::string where = test::conv_context(large, direction, info.id);
      context.tune().policy(direction) = AlgoPolicy::fixed(info.id);
      Tensor output =
          test::device_copy(test::nan_tensor(out_dims, large.dtype, large.layout), context);
      run_on_device(context, large, direction, host, output);
      EXPECT_TRUE(test::close_within_scale(output_of(output), expected, scale, out_dims,
                                           test::conv_tolerance(large.dtype), "output", where));
    }
    EXPECT_EQ(forms.size(), direction == Direction::bwd_weights ? 2u : 1u)
        << "im2col forms listed for " << large.repro(direction);
    context.tune().policy(direction) = AlgoPolicy::heuristic();
  }
}

// Note [compile budget]: with a budget of 0 nothing compiles in the search; every
// runtime-compiled row says why it was skipped, the search still picks a timed candidate, and
// the time split adds up.
TEST(CudnnSearch, OverBudgetPlansAreSkippedWithTheReason) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "0");
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  Context context = cudnn_context();
  context.tune().bwd_data = AlgoPolicy::exhaustive();
  const ConvDesc desc = depthwise_desc();
  const std::vector<AlgoInfo> compiled =
      runtime_compiled(conv_list(context, desc, Direction::bwd_data), true);
  ASSERT_FALSE(compiled.empty()) << "no runtime-compiled candidate to skip";
  const std::uint64_t compiled_before = cudnn::engine_plan_counts().runtime_compiled;
  BwdData d = bwd_data_operands(desc, context);
  const std::shared_ptr<const Choice> choice =
      conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
  EXPECT_FALSE(choice->algo.has_note("runtime_compiled")) << choice->algo.id;
  std::size_t skipped = 0;
  for (const ProfileRow& row : choice->timings) {
    if (!row.algo.has_note("runtime_compiled")) continue;
    EXPECT_EQ(row.status, CandidateStatus::not_timed) << row.algo.id << ": " << row.detail;
    EXPECT_NE(row.detail.find("compile budget"), std::string::npos) << row.detail;
    EXPECT_NE(row.detail.find("DNNX_CUDNN_COMPILE_BUDGET"), std::string::npos) << row.detail;
    ++skipped;
  }
  EXPECT_EQ(skipped, compiled.size());
  EXPECT_EQ(choice->search.plans_skipped, static_cast<int>(compiled.size()));
  EXPECT_EQ(cudnn::engine_plan_counts().runtime_compiled, compiled_before)
      << "a compile started after the budget ran out";
  EXPECT_GE(choice->search.list_ms, 0.0);
  EXPECT_GT(choice->search.build_ms, 0.0);
  EXPECT_GT(choice->search.time_ms, 0.0);
  EXPECT_NEAR(choice->tuning_ms,
              choice->search.list_ms + choice->search.build_ms + choice->search.time_ms, 1e-6);
  std::cout << "[ cudnn    ] search: list " << choice->search.list_ms << " ms, build "
            << choice->search.build_ms << " ms, time " << choice->search.time_ms << " ms\n";

  // A profile applies the same budget and says so in its rows.
  const ProfileResult profile = conv_profile(context, desc, Direction::bwd_data);
  EXPECT_EQ(profile.search.plans_skipped, static_cast<int>(compiled.size()));
  EXPECT_NE(profile.table().find("compile budget"), std::string::npos) << profile.table();
}

// With a budget that lets them compile, the runtime-compiled candidates are timed, and the search
// stays within the target for the depthwise layer (reported, not asserted: shared CI GPUs vary).
TEST(CudnnSearch, RuntimeCompiledCandidatesAreTimedWithinTheBudget) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "60");
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  Context context = cudnn_context();
  context.tune().bwd_data = AlgoPolicy::exhaustive();
  const ConvDesc desc = depthwise_desc();
  BwdData d = bwd_data_operands(desc, context);
  const std::shared_ptr<const Choice> choice =
      conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
  std::size_t timed = 0;
  for (const ProfileRow& row : choice->timings) {
    if (!row.algo.has_note("runtime_compiled")) continue;
    EXPECT_NE(row.status, CandidateStatus::not_timed) << row.algo.id << ": " << row.detail;
    timed += row.runs > 0;
  }
  EXPECT_GT(timed, 0u);
  EXPECT_EQ(choice->search.plans_skipped, 0);
  std::cout << "[ cudnn    ] depthwise bwd_data: " << choice->algo.id << " " << choice->time_ms
            << " ms; search " << choice->tuning_ms << " ms (list " << choice->search.list_ms
            << ", build " << choice->search.build_ms << ", time " << choice->search.time_ms
            << ")\n";
}

// Note [probing runtime-compiled candidates]: on DeepLabV3's l4.downsample bwd_weights (a dense
// 1x1 of 1024 -> 2048 channels at 65x65, batch 16, f16), one run of cuDNN's runtime-compiled
// engine 19 took 3.7 s against 0.36 ms for the best before its plan for the probe's slice was
// compiled too. With a budget that lets every plan compile, a runtime-compiled candidate that
// is not one of the heuristics' top picks is timed on a slice before any full run, so one that
// slow is abandoned there.
TEST(CudnnSearch, RuntimeCompiledCandidatesAreProbedOnASlice) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "60");
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  Context context = cudnn_context();
  const ConvDesc desc = downsample_desc();
  const std::shared_ptr<const Choice> choice = exhaustive_bwd_weights(context, desc);
  std::size_t compiled = 0, on_a_slice = 0;
  for (const ProfileRow& row : choice->timings) {
    if (!row.algo.has_note("runtime_compiled")) continue;
    ++compiled;
    EXPECT_NE(row.status, CandidateStatus::not_timed) << row.algo.id << ": " << row.detail;
    on_a_slice += row.detail.find("a run on a slice") != std::string::npos;
    std::cout << "[ cudnn    ] " << row.algo.id << ' ' << to_string(row.status) << ' '
              << row.median_ms << " ms: " << row.detail << '\n';
  }
  ASSERT_GT(compiled, 0u) << "no runtime-compiled candidate listed for " << desc;
  EXPECT_GT(on_a_slice, 0u) << "no runtime-compiled candidate was probed on a slice";
  std::cout << "[ cudnn    ] dense 1x1 bwd_weights: " << choice->algo.id << ' ' << choice->time_ms
            << " ms; search " << choice->tuning_ms << " ms (time " << choice->search.time_ms
            << ")\n";
}

// Note [conv probe slices] (src/ops/conv_slices.cpp): a convolution of one sample, which has no
// batch to slice, is probed on the first rows of its output (U-Net's layers, where cuDNN's FFT
// candidates ran 240-340 ms in full against 0.4-0.7 ms for the best). Some candidate of each
// search is ruled out on such a slice, and the choice computes what the reference does: the
// probes' writes into the prefix of the output (and the whole weight gradient) are overwritten.
TEST(CudnnSearch, ABatchOfOneIsProbedOnRowsOfItsOutput) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  const ConvDesc desc =
      make_desc({1, 128, 64, 64}, {128, 128, 3, 3}, 1, 1, 1, 1, DType::f32, Layout::channels_first);
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t on_a_slice = 0;
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const std::string where = test::conv_context(desc, direction, "(search)");
    Context context = cudnn_context();
    context.tune().policy(direction) = AlgoPolicy::exhaustive();
    const test::ConvOperands host =
        test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
    const Dims out_dims = test::conv_output_dims(desc, direction);
    Tensor output =
        test::device_copy(test::nan_tensor(out_dims, desc.dtype, desc.layout), context);
    const std::shared_ptr<const Choice> choice =
        direction == Direction::fwd
            ? conv_fwd(context, desc, test::device_copy(host.src, context),
                       test::device_copy(host.weights, context), output)
        : direction == Direction::bwd_data
            ? conv_bwd_data(context, desc, test::device_copy(host.diff_dst, context),
                            test::device_copy(host.weights, context), output)
            : conv_bwd_weights(context, desc, test::device_copy(host.src, context),
                               test::device_copy(host.diff_dst, context), output);
    ASSERT_NE(choice, nullptr) << where;
    const std::vector<float> expected =
        test::run_conv(reference, desc, direction, host).output.to_f32();
    const std::vector<float> actual = output_of(output);
    EXPECT_TRUE(test::all_finite(actual, out_dims, "output", where));
    EXPECT_TRUE(test::close_within_scale(actual, expected,
                                         test::conv_error_scale(desc, direction, host), out_dims,
                                         test::conv_tolerance(desc.dtype), "output", where));
    std::size_t here = 0;
    for (const ProfileRow& row : choice->timings)
      here += row.detail.find("a run on a slice of the problem") != std::string::npos;
    on_a_slice += here;
    std::cout << "[ cudnn    ] batch 1 " << to_string(direction) << ": " << choice->algo.id << ' '
              << choice->time_ms << " ms; " << here << " candidates ruled out on rows; "
              << choice->search.probes << " probes " << choice->search.probe_ms << " ms, "
              << choice->search.full_runs << " full runs " << choice->search.full_run_ms
              << " ms; search " << choice->tuning_ms << " ms\n";
  }
  EXPECT_GT(on_a_slice, 0u) << "no candidate of a batch-1 convolution was probed on a slice";
}

// Note [probing runtime-compiled candidates]: under the default compile budget, a
// runtime-compiled candidate of the same layer is never run in full for a second or more (engine
// 19's full run took 4.2 s of a 4.8 s search on an H200): it is abandoned on a slice, or skipped
// when its plan for the slice was still compiling. A skipped one is a late plan: the next context
// loads the slice plan the first one saved once built and probes it before any full run.
TEST(CudnnSearch, ARuntimeCompiledCandidateWithALateSlicePlanIsNotRunInFull) {
  DNNX_REQUIRE_GPU();
  test::TempFolder folder("dnnx-search");
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", nullptr);
  const ScopedEnv dir("DNNX_PLAN_DIR", folder.file("plans").c_str());
  const CacheFileOptions file = cache_file_in(folder);
  const ConvDesc desc = downsample_desc();
  const Direction direction = Direction::bwd_weights;
  // A search in `context`; every runtime-compiled row it ran in full took under a second.
  auto search = [&](Context& context) {
    const std::shared_ptr<const Choice> choice = exhaustive_bwd_weights(context, desc);
    for (const ProfileRow& row : choice->timings) {
      if (!row.algo.has_note("runtime_compiled") || row.runs == 0) continue;
      EXPECT_LT(row.median_ms, 1000.0) << row.algo.id << " ran in full: " << row.detail;
    }
    return choice;
  };
  Context first = cudnn_context(std::make_shared<ChoiceCache>(file));
  const std::shared_ptr<const Choice> choice = search(first);
  std::vector<std::string> skipped;
  for (const ProfileRow& row : choice->timings) {
    if (row.status != CandidateStatus::not_timed ||
        row.detail.find("for a slice of the problem") == std::string::npos)
      continue;
    skipped.push_back(row.algo.id);
    EXPECT_TRUE(row.algo.has_note("runtime_compiled")) << row.algo.id;
    EXPECT_NE(std::find(choice->late_plans.begin(), choice->late_plans.end(), row.algo.id),
              choice->late_plans.end())
        << row.algo.id << " was skipped but is not a late plan";
  }
  std::cout << "[ cudnn    ] " << skipped.size() << " candidates skipped for a late slice plan; "
            << choice->algo.id << ", search " << choice->tuning_ms << " ms\n";
  if (skipped.empty()) {
    std::cout << "[ cudnn    ] every slice plan was built in time here: the next context's "
                 "probe of a saved slice plan is not exercised\n";
    return;
  }
  // The first context's backend saves each skipped candidate's slice plan once built, and says
  // its full plan is at hand only then.
  auto& conv = detail::state_of(first).backend().conv();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (const std::string& id : skipped) {
    while (!conv.plan_at_hand(desc, direction, id) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(conv.plan_at_hand(desc, direction, id)) << id << "'s slice plan was never built";
  }
  // The next context (a backend of its own) settles the late plans from the file: probed first
  // (all of them: no share of the search bounds it).
  const auto cache = std::make_shared<ChoiceCache>(file);
  Context second = cudnn_context(cache);
  second.tune().late_plan_share = 0;
  const std::shared_ptr<const Choice> settled = search(second);
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_TRUE(settled->late_plans.empty());
  for (const std::string& id : skipped) {
    const auto row = std::find_if(settled->timings.begin(), settled->timings.end(),
                                  [&](const ProfileRow& r) { return r.algo.id == id; });
    ASSERT_NE(row, settled->timings.end()) << id;
    EXPECT_TRUE(row->status == CandidateStatus::ok || row->status == CandidateStatus::abandoned)
        << id << ": " << to_string(row->status) << " " << row->detail;
    std::cout << "[ cudnn    ] next context: " << id << ' ' << to_string(row->status) << ": "
              << row->detail << '\n';
  }
}

// ---- saved plans -----------------------------------------------------------------------------

// Note [saved plans]: a runtime-compiled plan kept by one context is loaded, not compiled, by the
// next; a corrupt or stale file is dropped with a warning and the plan built again.
TEST(CudnnSearch, SavedPlansAreLoadedByTheNextContextAndBadOnesDropped) {
  DNNX_REQUIRE_GPU();
  test::TempFolder folder("dnnx-search");
  const std::string plans = folder.file("plans");
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv dir("DNNX_PLAN_DIR", plans.c_str());
  const ConvDesc desc = depthwise_desc();
  const Direction direction = Direction::bwd_data;
  std::string id;
  std::vector<float> first_output;
  {
    Context context = cudnn_context();
    const std::vector<AlgoInfo> compiled =
        runtime_compiled(conv_list(context, desc, direction), true);
    ASSERT_FALSE(compiled.empty());
    id = compiled.front().id;
    context.tune().bwd_data = AlgoPolicy::fixed(id);
    BwdData d = bwd_data_operands(desc, context);
    const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
    conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
    EXPECT_EQ(cudnn::engine_plan_counts().runtime_compiled, before.runtime_compiled + 1);
    first_output = output_of(d.diff_src);
    detail::state_of(context).backend().conv().keep_plan(desc, direction, id);
  }
  const tune::PlanStore::Summary saved = tune::PlanStore::summarize(plans);
  ASSERT_EQ(saved.files, 1u) << "the kept plan was not saved (does cuDNN serialize " << id
                             << "'s plans?)";

  auto run_again = [&](const char* what) {
    Context context = cudnn_context();
    context.tune().bwd_data = AlgoPolicy::fixed(id);
    BwdData d = bwd_data_operands(desc, context);
    conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
    const std::vector<float> output = output_of(d.diff_src);
    EXPECT_EQ(output, first_output) << what << ": the same kernel gave other values";
    detail::state_of(context).backend().conv().keep_plan(desc, direction, id);
  };
  {
    const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
    run_again("loaded");
    const cudnn::EnginePlanCounts after = cudnn::engine_plan_counts();
    EXPECT_EQ(after.built, before.built) << "the saved plan was built again";
    EXPECT_EQ(after.loaded, before.loaded + 1);
  }

  // A file cut short: the store drops it, the plan is compiled again and saved anew.
  const std::string file = (fs::directory_iterator(plans))->path().string();
  {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() / 2);
    ::testing::internal::CaptureStderr();
    const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
    run_again("after a truncated file");
    const std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(warning.find("dropped"), std::string::npos) << warning;
    EXPECT_NE(warning.find(file), std::string::npos) << warning;
    EXPECT_EQ(cudnn::engine_plan_counts().runtime_compiled, before.runtime_compiled + 1);
    EXPECT_EQ(tune::PlanStore::summarize(plans).files, 1u) << "not saved anew";
  }
  // A whole file whose plan cuDNN cannot load (a stale or foreign plan): dropped with cuDNN's
  // reason, compiled again.
  {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    const std::string key_line = text.substr(0, text.find("\npayload "));
    const std::string key = key_line.substr(key_line.find('\n', key_line.find("key ")) + 1);
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        << tune::PlanStore::encode(key, "{\"not\": \"a cudnn plan\"}");
    ::testing::internal::CaptureStderr();
    const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
    run_again("after a plan cuDNN rejects");
    const std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(warning.find("cuDNN cannot load it"), std::string::npos) << warning;
    EXPECT_EQ(cudnn::engine_plan_counts().runtime_compiled, before.runtime_compiled + 1);
  }
}

// A second context with the same cache file and saved plans: the choice comes from the file (no
// candidate timed) with the same id, and its plan is loaded, not built, where cuDNN serializes it
// (runtime-compiled engines; other engines' plans build in about a millisecond).
TEST(CudnnSearch, ASecondContextWithTheCacheNeitherTimesNorCompiles) {
  DNNX_REQUIRE_GPU();
  test::TempFolder folder("dnnx-search");
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "60");
  const ScopedEnv dir("DNNX_PLAN_DIR", folder.file("plans").c_str());
  const CacheFileOptions file = cache_file_in(folder);
  const ConvDesc desc = depthwise_desc();
  std::string chosen;
  {
    Context context = cudnn_context(std::make_shared<ChoiceCache>(file));
    context.tune().bwd_data = AlgoPolicy::exhaustive();
    BwdData d = bwd_data_operands(desc, context);
    const auto choice = conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
    chosen = choice->algo.id;
    EXPECT_GT(choice->candidates_timed, 0);
  }
  const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
  const auto start = std::chrono::steady_clock::now();
  const auto cache = std::make_shared<ChoiceCache>(file);
  Context context = cudnn_context(cache);
  context.tune().bwd_data = AlgoPolicy::exhaustive();
  BwdData d = bwd_data_operands(desc, context);
  const auto choice = conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
  const double second_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(choice->algo.id, chosen);
  // From the file and still valid here: nothing was selected (so nothing timed) again.
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_EQ(cache->misses(), 0u);
  const cudnn::EnginePlanCounts after = cudnn::engine_plan_counts();
  EXPECT_EQ(after.runtime_compiled, before.runtime_compiled) << "compiled again";
  EXPECT_LE(after.built, before.built + 1) << "more than the chosen plan was built";
  if (tune::PlanStore::summarize(folder.file("plans")).files > 0) {
    EXPECT_EQ(after.built, before.built) << "a saved plan was built again";
  }
  std::cout << "[ cudnn    ] second context: " << chosen << " in " << second_ms << " ms (built "
            << after.built - before.built << ", loaded " << after.loaded - before.loaded << ")\n";
}

// ---- knob coverage -----------------------------------------------------------------------------

// Note [late plans] (src/ops/dispatch.cpp): with a budget shorter than any compile, the
// runtime-compiled plans still compiling or not started are skipped by the search and listed with
// the choice; their builds finish in the background (those not started as late builds) and are
// saved, and the next context with the cache file
// loads them (compiling nothing), times them against the kept choice, and writes the entry back
// without the list.
TEST(CudnnSearch, LatePlansAreSavedAndTimedByTheNextContext) {
  DNNX_REQUIRE_GPU();
  test::TempFolder folder("dnnx-search");
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "0.02");
  const ScopedEnv dir("DNNX_PLAN_DIR", folder.file("plans").c_str());
  const CacheFileOptions file = cache_file_in(folder);
  // A depthwise desc of its own: cuDNN keeps the kernels it compiled for a shape for the rest of
  // the process, so the shapes of the other tests here would compile at once.
  const ConvDesc desc =
      make_desc({8, 48, 60, 60}, {48, 1, 3, 3}, 2, 1, 1, 48, DType::f16, Layout::channels_last);
  const Direction direction = Direction::bwd_data;
  std::vector<std::string> late;
  {
    Context context = cudnn_context(std::make_shared<ChoiceCache>(file));
    ASSERT_FALSE(runtime_compiled(conv_list(context, desc, direction), true).empty())
        << "no runtime-compiled candidate for " << desc;
    context.tune().bwd_data = AlgoPolicy::exhaustive();
    BwdData d = bwd_data_operands(desc, context);
    const auto choice = conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
    late = choice->late_plans;
    EXPECT_GE(choice->search.plans_skipped, static_cast<int>(late.size()));
    for (const std::string& id : late) {
      const auto row = std::find_if(choice->timings.begin(), choice->timings.end(),
                                    [&](const ProfileRow& r) { return r.algo.id == id; });
      ASSERT_NE(row, choice->timings.end()) << id;
      EXPECT_EQ(row->status, CandidateStatus::not_timed) << id;
      // Skipped by the full run (still compiling) or by a probe (its slice plan not compiled).
      EXPECT_TRUE(row->detail.find("still compiling") != std::string::npos ||
                  row->detail.find("not compiled within the compile budget") != std::string::npos)
          << row->detail;
    }
    // Note [late builds]: a candidate whose build had not started when the budget ran out is
    // built late and listed like the others.
    int cancelled = 0;
    for (const ProfileRow& row : choice->timings) {
      if (row.detail.find("ran out before its turn") == std::string::npos) continue;
      ++cancelled;
      EXPECT_NE(std::find(late.begin(), late.end(), row.algo.id), late.end())
          << row.algo.id << " was cancelled while queued but is not a late plan";
    }
    std::cout << "[ cudnn    ] " << late.size() << " late plans, " << cancelled
              << " of them cancelled while queued and built late\n";
  }
  ASSERT_FALSE(late.empty()) << "no runtime-compiled plan was still compiling after 20 ms";

  const auto cache = std::make_shared<ChoiceCache>(file);
  Context context = cudnn_context(cache);
  context.tune().bwd_data = AlgoPolicy::exhaustive();
  context.tune().late_plan_share = 0;  // every late plan in this context
  // The first context's builds save their plans when they finish.
  auto& conv = detail::state_of(context).backend().conv();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (const std::string& id : late) {
    while (!conv.plan_at_hand(desc, direction, id) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(conv.plan_at_hand(desc, direction, id)) << id << "'s plan was never saved";
  }
  const cudnn::EnginePlanCounts before = cudnn::engine_plan_counts();
  BwdData d = bwd_data_operands(desc, context);
  const auto choice = conv_bwd_data(context, desc, d.diff_dst, d.weights, d.diff_src);
  const cudnn::EnginePlanCounts after = cudnn::engine_plan_counts();
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_EQ(after.runtime_compiled, before.runtime_compiled) << "a late plan was compiled again";
  // Each late plan timed from a saved plan: its full plan, or the slice plan of its probe.
  EXPECT_GT(after.loaded, before.loaded);
  for (const std::string& id : late) {
    const auto row = std::find_if(choice->timings.begin(), choice->timings.end(),
                                  [&](const ProfileRow& r) { return r.algo.id == id; });
    ASSERT_NE(row, choice->timings.end()) << id;
    // Timed: ok, or abandoned after a run (or a probe) far slower than the best.
    EXPECT_TRUE(row->status == CandidateStatus::ok || row->status == CandidateStatus::abandoned)
        << id << ": " << to_string(row->status) << " " << row->detail;
    std::cout << "[ cudnn    ] late plan " << id << ": " << to_string(row->status) << " "
              << row->detail << "\n";
  }
  std::cout << "[ cudnn    ] plans loaded by the next context: " << after.loaded - before.loaded
            << " for " << late.size() << " late plans\n";
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_EQ(cache->file_stats().writes, 1u) << "the settled entry was not written back";
  CacheFileOptions reader = file;
  reader.mode = CacheMode::read;
  for (const auto& [key, entry] : ChoiceCache(reader).entries())
    EXPECT_TRUE(entry->late_plans.empty()) << "the file still lists late plans for " << key;
  std::cout << "[ cudnn    ] late plans: " << late.size() << " timed by the next context; chose "
            << choice->algo.id << " " << choice->time_ms << " ms\n";
}

// Note [knob search]: the configs heuristics modes A and B rank first are always timed by an
// exhaustive search (when dnnx supports them), checked against cuDNN's own answer: in full, or
// on a slice that alone took over abandon_factor x the best (Note [heuristics' top configs]).
TEST(CudnnSearch, HeuristicTopConfigsAreAmongTheTimed) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv rtc("DNNX_CUDNN_RUNTIME_COMPILED", nullptr);
  const ScopedEnv budget("DNNX_CUDNN_COMPILE_BUDGET", "60");
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  for (const ConvDesc& desc : {depthwise_desc(), dilated_3d_desc()}) {
    for (Direction direction : {Direction::fwd, Direction::bwd_data}) {
      SCOPED_TRACE(test::conv_context(desc, direction, "(search)"));
      Context context = cudnn_context();
      context.tune().policy(direction) = AlgoPolicy::exhaustive();
      const std::vector<AlgoInfo> listed = conv_list(context, desc, direction);
      const test::ConvOperands host =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      Tensor output = test::device_copy(
          test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout),
          context);
      const std::shared_ptr<const Choice> choice =
          direction == Direction::fwd
              ? conv_fwd(context, desc, test::device_copy(host.src, context),
                         test::device_copy(host.weights, context), output)
              : conv_bwd_data(context, desc, test::device_copy(host.diff_dst, context),
                              test::device_copy(host.weights, context), output);
      for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
        const std::vector<std::string> ids = cudnn::heuristic_ids(desc, direction, mode);
        std::size_t top_checked = 0;
        for (const std::string& id : ids) {
          const auto info = std::find_if(listed.begin(), listed.end(),
                                         [&](const AlgoInfo& a) { return a.id == id; });
          ASSERT_NE(info, listed.end()) << id << " (heuristics) is not listed";
          if (!info->supported) continue;  // dnnx rules it out, saying why
          const auto row = std::find_if(choice->timings.begin(), choice->timings.end(),
                                        [&](const ProfileRow& r) { return r.algo.id == id; });
          ASSERT_NE(row, choice->timings.end()) << id << " has no row";
          const bool on_a_slice = row->status == CandidateStatus::abandoned &&
                                  row->detail.find("a run on a slice") != std::string::npos;
          EXPECT_TRUE(row->runs > 0 || on_a_slice || row->status == CandidateStatus::failed)
              << id << " (heuristics " << (mode == CUDNN_HEUR_MODE_A ? 'A' : 'B') << " #"
              << (&id - ids.data()) + 1 << ") was not timed: " << to_string(row->status) << " "
              << row->detail;
          if (++top_checked == 3) break;
        }
      }
      std::cout << "[ cudnn    ] " << desc << " " << to_string(direction) << ": " << choice->algo.id
                << " " << choice->time_ms << " ms, search " << choice->tuning_ms << " ms\n";
    }
  }
}

// Note [pruning variants] in src/tune/select.cpp: EfficientNet-B0's first depthwise layer in f32,
// where one knob variant of an FFT engine, whose seed is 20x slower than the best, cost 5 s of a
// search's host time. A profile applies the rule as the search does: no variant of an abandoned
// or failed seed runs, and each one not run names a seed that earned it.
TEST(CudnnSearch, VariantsOfSlowSeedsAreNotRun) {
  DNNX_REQUIRE_GPU();
  const ScopedEnv dir("DNNX_PLAN_DIR", "off");
  const ConvDesc desc = make_desc({128, 32, 112, 112}, {32, 1, 3, 3}, 1, 1, 1, 32, DType::f32,
                                  Layout::channels_first);
  Context context = cudnn_context();
  ASSERT_EQ(context.tune().variant_factor, 2.0);
  std::size_t pruned = 0;
  for (Direction direction : {Direction::fwd, Direction::bwd_weights}) {
    SCOPED_TRACE(test::conv_context(desc, direction, "(profile)"));
    const ProfileResult profile = conv_profile(context, desc, direction);
    auto row_of = [&](const std::string& id) {
      return std::find_if(profile.rows.begin(), profile.rows.end(),
                          [&](const ProfileRow& r) { return r.algo.id == id; });
    };
    double best = std::numeric_limits<double>::infinity();
    for (const ProfileRow& row : profile.rows) {
      if (row.status == CandidateStatus::ok) best = std::min(best, row.median_ms);
    }
    for (const ProfileRow& row : profile.rows) {
      if (row.algo.variant_of.empty()) continue;
      const auto seed = row_of(row.algo.variant_of);
      ASSERT_NE(seed, profile.rows.end())
          << "seed " << row.algo.variant_of << " of " << row.algo.id;
      const bool not_run = row.detail.find("variant_factor") != std::string::npos;
      if (!not_run) {
        EXPECT_TRUE(seed->status != CandidateStatus::abandoned &&
                    seed->status != CandidateStatus::failed)
            << row.algo.id << " ran although its seed " << seed->algo.id << " is "
            << to_string(seed->status) << " (" << seed->detail << ")";
        continue;
      }
      ++pruned;
      EXPECT_EQ(row.status, CandidateStatus::abandoned) << row.algo.id;
      EXPECT_EQ(row.runs, 0) << row.algo.id;
      EXPECT_NE(row.detail.find(seed->algo.id), std::string::npos) << row.detail;
      if (seed->status == CandidateStatus::ok) {
        // Over 2x the best so far, which is no faster than the best of all.
        EXPECT_GT(seed->median_ms, 2.0 * best) << row.algo.id << ": " << row.detail;
      } else {
        EXPECT_TRUE(seed->status == CandidateStatus::abandoned ||
                    seed->status == CandidateStatus::failed)
            << row.algo.id << ": " << row.detail;
      }
    }
    std::cout << "[ cudnn    ] " << desc << " " << to_string(direction) << ": " << profile.chosen
              << " " << best << " ms, profile " << profile.wall_ms << " ms\n";
  }
  std::cout << "[ cudnn    ] knob variants not run: " << pruned << '\n';
  EXPECT_GT(pruned, 0u) << "no variant of a slow seed was pruned on the layer that motivated it";
}

}  // namespace
}  // namespace dnnx
