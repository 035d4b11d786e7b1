// The cudnn backend on a GPU (label "gpu"): device tensors and copies, the caching allocator,
// candidate enumeration (legacy algorithms and graph-API engines), every supported candidate of
// every direction against the reference backend, determinism, workspace limits, errors, bias.
// Every test skips with the reason when no usable GPU is present (CI has none).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/allocator.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/strings.hpp"
#include "ops/context_state.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/conv_gpu.hpp"
#include "support/errors.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dnnx {
namespace {

constexpr Direction all_directions[] = {Direction::fwd, Direction::bwd_data,
                                        Direction::bwd_weights};

// Skips the calling test when the cudnn backend cannot run here, saying why.

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

struct GpuRun {
  Tensor output;  // on the host
  std::shared_ptr<const Choice> choice;
};

// Runs `direction` with the context's policy `calls` times into one device output, poisoned with
// NaN before each call, and brings each call's output back. On the same buffers a plan's second
// call captures its launches and the third replays them (Note [graph replay]), so each of the
// three ways a candidate runs is read.
std::vector<GpuRun> run_gpu_calls(Context& context, const ConvDesc& desc, Direction direction,
                                  const test::DeviceConvOperands& operands, int calls) {
  const Tensor poison =
      test::nan_tensor(test::conv_output_dims(desc, direction), desc.dtype, desc.layout);
  Tensor output = to_device(poison, context);
  std::vector<GpuRun> runs;
  for (int call = 0; call < calls; ++call) {
    if (call > 0) copy(poison, output);
    GpuRun run;
    switch (direction) {
      case Direction::fwd:
        run.choice = conv_fwd(context, desc, operands.src, operands.weights, output);
        break;
      case Direction::bwd_data:
        run.choice = conv_bwd_data(context, desc, operands.diff_dst, operands.weights, output);
        break;
      case Direction::bwd_weights:
        run.choice = conv_bwd_weights(context, desc, operands.src, operands.diff_dst, output);
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
    run.output = to_host(output);
    runs.push_back(std::move(run));
  }
  return runs;
}

// Runs `direction` with the context's policy once into a device output poisoned with NaN
// (unwritten elements then fail the finiteness check) and brings the output back.
GpuRun run_gpu(Context& context, const ConvDesc& desc, Direction direction,
               const test::DeviceConvOperands& operands) {
  return std::move(run_gpu_calls(context, desc, direction, operands, 1).front());
}

using test::expect_error;

ConvDesc make_desc(const Dims& src, const Dims& weights, const std::vector<std::int64_t>& stride,
                   const std::vector<std::int64_t>& pad, const std::vector<std::int64_t>& dilation,
                   std::int64_t groups, DType dtype, Layout layout) {
  return ConvDesc::from_shapes(src, weights, stride, pad, dilation, groups, dtype, layout);
}

// The representative desc matrix: every dtype, both layouts, 1/2/3-D, strides, dilation, groups
// (depthwise too), asymmetric padding, odd sizes, batch 1.
std::vector<ConvDesc> desc_matrix() {
  std::vector<ConvDesc> descs{
      make_desc({2, 16, 12, 12}, {32, 16, 3, 3}, {1}, {1}, {1}, 1, DType::f32,
                Layout::channels_first),
      make_desc({2, 16, 12, 12}, {32, 16, 3, 3}, {1}, {1}, {1}, 1, DType::f16,
                Layout::channels_last),
      make_desc({2, 32, 9, 9}, {16, 32, 1, 1}, {2}, {0}, {1}, 1, DType::bf16,
                Layout::channels_last),
      make_desc({3, 8, 13, 11}, {16, 8, 5, 5}, {2}, {2}, {1}, 1, DType::f32, Layout::channels_last),
      make_desc({2, 16, 10, 10}, {32, 4, 3, 3}, {1}, {2}, {2}, 4, DType::f32,
                Layout::channels_last),
      make_desc({1, 32, 14, 14}, {32, 1, 3, 3}, {1}, {1}, {1}, 32, DType::f16,
                Layout::channels_first),
      make_desc({2, 8, 33}, {16, 8, 5}, {1}, {2}, {1}, 1, DType::f32, Layout::channels_first),
      make_desc({1, 8, 6, 7, 5}, {8, 8, 3, 3, 3}, {1}, {1}, {1}, 1, DType::f32,
                Layout::channels_first),
      make_desc({2, 16, 10, 10}, {16, 16, 3, 3}, {1}, {1}, {1}, 1, DType::f16,
                Layout::channels_last),
  };
  // Unaligned channel counts in f16/bf16, where channel-padded candidates are listed too (Note
  // [channel padding]): a first layer (3 -> 16, 7x7/2), both counts padded (5 -> 6), 3-D.
  const std::vector<ConvDesc> unaligned{
      make_desc({2, 3, 17, 15}, {16, 3, 7, 7}, {2}, {3}, {1}, 1, DType::f16, Layout::channels_last),
      make_desc({2, 5, 9, 8}, {6, 5, 3, 3}, {1}, {1}, {1}, 1, DType::bf16, Layout::channels_first),
      make_desc({1, 3, 5, 6, 7}, {8, 3, 3, 3, 3}, {1}, {1}, {1}, 1, DType::f16,
                Layout::channels_last),
  };
  descs.insert(descs.end() - 1, unaligned.begin(), unaligned.end());
  // Asymmetric padding (what TensorFlow's SAME gives for even sizes): graph API only. The f16
  // case is last (the error tests use it).
  ConvDesc asymmetric_f32 = make_desc({2, 8, 11, 12}, {16, 8, 3, 3}, {2}, {1}, {1}, 1, DType::f32,
                                      Layout::channels_first);
  asymmetric_f32.pad_before = {1, 0, 0};
  asymmetric_f32.pad_after = {0, 1, 0};
  descs.insert(descs.end() - 1, asymmetric_f32);
  descs.back().pad_before = {0, 0, 0};
  descs.back().pad_after = {1, 1, 0};
  return descs;
}

// ---------------------------------------------------------------------------------------------
// Availability, facts, memory.

TEST(CudnnBackend, AvailableOrSaysWhy) {
  std::string why;
  if (!backend_available(BackendKind::cudnn, &why)) {
    EXPECT_FALSE(why.empty());
    expect_error(ErrorKind::Unsupported, {"cudnn", why}, [] { Context c(BackendKind::cudnn); });
    GTEST_SKIP() << "no usable GPU: " << why;
  }
  Context context(BackendKind::cudnn);
  EXPECT_EQ(context.device(), Device::cuda(0));
  EXPECT_EQ(resolve_backend(BackendKind::automatic), BackendKind::cudnn);
  const detail::Backend& backend = detail::state_of(context).backend();
  const std::string fingerprint = backend.fingerprint();
  for (const char* part : {"cuDNN 9.", "CUDA ", "driver ", " sm_", "SMs=", "tf32=off", "rpr=off",
                           "rtc=", "knobs=top/24", " conv_gemm=on", " kernels=on"})
    EXPECT_NE(fingerprint.find(part), std::string::npos) << fingerprint;
  std::set<std::string> keys;
  for (const auto& [key, value] : backend.environment()) {
    keys.insert(key);
    EXPECT_FALSE(value.empty()) << key;
  }
  for (const char* key : {"device_name", "compute_capability", "sm_count", "cuda_driver",
                          "cuda_runtime", "cudnn_version", "tf32", "reduced_precision_reduction"})
    EXPECT_TRUE(keys.count(key)) << key;
  std::cout << "[ cudnn    ] " << context.describe() << "\n[ cudnn    ] " << fingerprint << '\n';
  expect_error(ErrorKind::InvalidArgument, {"CUDA device 4096 does not exist"},
               [] { Context c(BackendKind::cudnn, 4096); });
}

TEST(CudnnBackend, CopyRoundTripsEveryDirectionAndLayout) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Dims dims{2, 3, 5, 7};
    const Tensor host = test::random_tensor(dims, dtype, Layout::channels_first, 7);
    // Host nchw -> device nhwc (packed through a host copy) -> device nhwc -> host nchw.
    Tensor device = Tensor::empty(dims, dtype, Layout::channels_last, context.allocator());
    EXPECT_EQ(device.device(), Device::cuda(0));
    copy(host, device);
    Tensor device2 = Tensor::empty(dims, dtype, Layout::channels_last, context.allocator());
    copy(device, device2);
    Tensor back = Tensor::empty(dims, dtype, Layout::channels_first);
    copy(device2, back);
    EXPECT_TRUE(test::bitwise_equal(host, back, "round trip", to_string(dtype)));
  }
  Tensor a = Tensor::empty({2, 3}, DType::f32, Layout::channels_first, context.allocator());
  Tensor b = Tensor::empty({2, 4}, DType::f32, Layout::channels_first, context.allocator());
  expect_error(ErrorKind::InvalidArgument, {"dims 2x3", "2x4"}, [&] { copy(a, b); });
  Tensor c = Tensor::empty({2, 3}, DType::f16, Layout::channels_first);
  expect_error(ErrorKind::InvalidArgument, {"dtype f32", "f16"}, [&] { copy(a, c); });
  Tensor nhwc = Tensor::empty({1, 2, 3, 4}, DType::f32, Layout::channels_last, context.allocator());
  Tensor nchw =
      Tensor::empty({1, 2, 3, 4}, DType::f32, Layout::channels_first, context.allocator());
  expect_error(ErrorKind::Unsupported, {"transpose"}, [&] { copy(nhwc, nchw); });
}

TEST(CudnnBackend, CachingAllocatorReusesBlocks) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
  ASSERT_NE(allocator, nullptr);
  void* first = allocator->allocate(1000);
  allocator->deallocate(first, 1000);
  const std::size_t mallocs = allocator->device_allocations();
  for (int i = 0; i < 100; ++i) {
    void* p = allocator->allocate(900);  // same 512-byte bucket
    EXPECT_EQ(p, first);
    allocator->deallocate(p, 900);
  }
  EXPECT_EQ(allocator->device_allocations(), mallocs);
  // More than the device has: released cache, one retry, then OutOfMemory naming the size.
  expect_error(ErrorKind::OutOfMemory, {"device allocation of", "cudaErrorMemoryAllocation"},
               [&] { allocator->allocate(std::size_t{1} << 50); });
  void* after = allocator->allocate(1000);  // still usable after the failure
  allocator->deallocate(after, 1000);
}

// Note [caching allocator]: a request takes the lowest free address of its bucket whatever the
// order of the frees, so the same sequence of requests gets the same memory again.
TEST(CudnnBackend, CachingAllocatorHandsOutTheLowestAddress) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
  ASSERT_NE(allocator, nullptr);
  constexpr std::size_t bytes = 3u << 20;  // one 4 MiB bucket
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(allocator->allocate(bytes));
  std::vector<void*> sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  // Freed highest first, then in a shuffled order: handed out lowest first both times.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) allocator->deallocate(*it, bytes);
  std::vector<void*> again;
  for (int i = 0; i < 4; ++i) again.push_back(allocator->allocate(bytes));
  EXPECT_EQ(again, sorted);
  for (int i : {2, 0, 3, 1}) allocator->deallocate(again[static_cast<std::size_t>(i)], bytes);
  std::vector<void*> third;
  for (int i = 0; i < 4; ++i) third.push_back(allocator->allocate(bytes));
  EXPECT_EQ(third, sorted);
  for (void* block : third) allocator->deallocate(block, bytes);
}

// Note [gated timing]: the device clock starts once a run is queued, so host work while queuing
// (a 0.1 ms pause, under the gate's 0.25 ms timeout) stays out of the reading and the run is not
// repeated; a longer pause (5 ms) outlasts the gate, and the run is repeated until one fits (at
// most twice); a CUDA graph can be captured on the held stream (plans capture on their second
// call); a run that throws opens the gate (else the next run would wait for the timeout and be
// repeated); work that waits for its own stream costs the gate's timeout and is timed again.
TEST(CudnnBackend, TimingLeavesHostQueuingOut) {
  DNNX_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buffer = nullptr;
  constexpr std::size_t bytes = 1 << 20;
  ASSERT_EQ(cudaMalloc(&buffer, bytes), cudaSuccess);
  {
    Context own = gpu_context();
    Context context = own.with_stream(stream);
    detail::Backend& backend = detail::state_of(context).backend();
    EXPECT_TRUE(backend.warm_timing());
    // The claims below are about warm runs; the process's first gate launch may also load the
    // module (lazy loading), which can outlast the gate and force a repeat: without this warm-up
    // the first check below can see two runs instead of one.
    backend.time_ms([&] { EXPECT_EQ(cudaMemsetAsync(buffer, 0, bytes, stream), cudaSuccess); });
    int runs = 0;
    const double paused = backend.time_ms([&] {
      ++runs;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      EXPECT_EQ(cudaMemsetAsync(buffer, 0, bytes, stream), cudaSuccess);
    });
    EXPECT_EQ(runs, 1);
    EXPECT_LT(paused, 0.08);

    runs = 0;
    const double cold = backend.time_ms([&] {
      if (runs++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(cudaMemsetAsync(buffer, 0, bytes, stream), cudaSuccess);
    });
    EXPECT_EQ(runs, 2);
    EXPECT_LT(cold, 0.08);

    cudaGraph_t graph = nullptr;
    backend.time_ms([&] {
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      EXPECT_EQ(cudaMemsetAsync(buffer, 0, bytes, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    });
    EXPECT_NE(graph, nullptr);
    if (graph != nullptr) cudaGraphDestroy(graph);

    EXPECT_THROW(backend.time_ms([] { throw std::runtime_error("a failing candidate"); }),
                 std::runtime_error);
    runs = 0;
    backend.time_ms([&] {
      ++runs;
      EXPECT_EQ(cudaMemsetAsync(buffer, 0, bytes, stream), cudaSuccess);
    });
    EXPECT_EQ(runs, 1);

    runs = 0;
    backend.time_ms([&] {
      ++runs;
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    });
    EXPECT_EQ(runs, 3);
  }
  EXPECT_EQ(cudaFree(buffer), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Note [no capture in a repeated timing run]: each launch records whether its stream was
// capturing. Without a pause a key's second call is a capture and its third a replay (the launch
// does not run); under a pause a key's later calls run directly, a key first seen under a pause
// takes no slot (its next call outside is a first sighting), and a graph captured before the
// pause still replays.
TEST(CudnnLaunchGraph, RepeatedTimingRunsMakeNoCapture) {
  DNNX_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 4096), cudaSuccess);
  {
    std::vector<std::string> seen;  // one entry per launch that ran
    auto launch = [&] {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
      seen.emplace_back(status == cudaStreamCaptureStatusNone ? "direct" : "capture");
      EXPECT_EQ(cudaMemsetAsync(buffer, 0, 4096, stream), cudaSuccess);
    };
    cudnn::Settings settings;
    settings.graphs = true;
    const ErrorContext context{"test", "", "cudnn", "launch graph", ""};
    cudnn::LaunchGraph graph;
    const int a = 0, b = 0, c = 0;  // three pointer sets: their addresses
    auto call = [&](const void* key) { graph.run(settings, stream, {key}, launch, context); };
    using Seen = std::vector<std::string>;

    call(&a);  // first sighting
    {
      const cudnn::CapturePause pause;
      EXPECT_TRUE(cudnn::CapturePause::active());
      call(&a);  // would be the capture
      call(&a);
    }
    EXPECT_FALSE(cudnn::CapturePause::active());
    EXPECT_EQ(seen, (Seen{"direct", "direct", "direct"}));
    seen.clear();
    call(&a);  // the second call outside a pause: the capture
    call(&a);  // a replay: the launch does not run
    EXPECT_EQ(seen, (Seen{"capture"}));

    seen.clear();
    {
      const cudnn::CapturePause pause;
      call(&a);  // its graph exists: a replay
      call(&b);  // first seen under the pause: no slot
      call(&b);
    }
    EXPECT_EQ(seen, (Seen{"direct", "direct"}));
    seen.clear();
    call(&b);  // a first sighting now
    call(&b);  // the capture
    call(&c);
    EXPECT_EQ(seen, (Seen{"direct", "capture", "direct"}));
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  EXPECT_EQ(cudaFree(buffer), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(CudnnAllocator, Buckets) {
  using cudnn::CachingAllocator;
  EXPECT_EQ(CachingAllocator::bucket(0), 512u);
  EXPECT_EQ(CachingAllocator::bucket(1), 512u);
  EXPECT_EQ(CachingAllocator::bucket(513), 1024u);
  EXPECT_EQ(CachingAllocator::bucket(1 << 20), std::size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::bucket((1 << 20) + 1), std::size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::bucket(100u << 20), 104u << 20);  // above 64 MiB: steps of 8 MiB
  for (std::size_t bytes :
       {std::size_t{3}, std::size_t{777777}, std::size_t{5} << 20, (std::size_t{1} << 33) + 5}) {
    EXPECT_GE(CachingAllocator::bucket(bytes), bytes);
    EXPECT_LE(CachingAllocator::bucket(bytes), bytes + bytes / 8 + (2u << 20));
  }
}

// ---------------------------------------------------------------------------------------------
// Enumeration.

TEST(CudnnConv, ListsLegacyAndEngineCandidates) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const ConvDesc desc = desc_matrix()[0];  // f32, TF32 off
  const std::map<Direction, std::size_t> legacy_count{
      {Direction::fwd, 8 * 4}, {Direction::bwd_data, 6 * 4}, {Direction::bwd_weights, 7 * 4}};
  for (Direction direction : all_directions) {
    SCOPED_TRACE(test::conv_context(desc, direction, "(list)"));
    const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
    std::set<std::string> ids;
    std::size_t legacy = 0, engines = 0, supported_engines = 0, textures = 0;
    bool seen_unsupported = false;
    for (std::size_t i = 0; i < algos.size(); ++i) {
      const AlgoInfo& info = algos[i];
      EXPECT_TRUE(ids.insert(info.id).second) << "duplicate id " << info.id;
      EXPECT_EQ(info.priority, static_cast<int>(i));
      if (info.supported) {
        EXPECT_FALSE(seen_unsupported) << info.id << " listed after an unsupported one";
        EXPECT_TRUE(info.reason.empty()) << info.id;
      } else {
        seen_unsupported = true;
        EXPECT_FALSE(info.reason.empty()) << info.id;
      }
      if (info.id.rfind("cudnn:legacy:", 0) == 0) {
        ++legacy;
        const bool tf32_math = info.id.ends_with(":tensor_op") ||
                               info.id.ends_with(":tensor_op_allow_conversion") ||
                               info.id.ends_with(":default");
        if (tf32_math) {
          EXPECT_FALSE(info.supported) << info.id;
          EXPECT_NE(info.reason.find("TF32"), std::string::npos) << info.reason;
        }
      } else if (info.id.rfind("cudnn:kernel:depthwise:", 0) == 0) {
        // dnnx's depthwise kernels (cudnn_conv_depthwise_test): this desc is not depthwise.
        EXPECT_FALSE(info.supported) << info.id;
        EXPECT_NE(info.reason.find("not a depthwise convolution"), std::string::npos)
            << info.reason;
      } else if (info.id.rfind("cudnn:kernel:grouped:", 0) == 0) {
        // dnnx's grouped kernel (cudnn_conv_grouped_test): this desc is not grouped.
        EXPECT_FALSE(info.supported) << info.id;
        EXPECT_FALSE(info.reason.empty()) << info.id;
      } else if (info.id.rfind("cudnn:kernel:narrow:", 0) == 0) {
        // dnnx's narrow-channel kernel (cudnn_conv_narrow_test): this desc has 16 channels.
        EXPECT_FALSE(info.supported) << info.id;
        EXPECT_FALSE(info.reason.empty()) << info.id;
      } else if (info.id.rfind("cudnn:winograd", 0) == 0) {
        // Winograd's products (cudnn_conv_winograd_test): listed after cuDNN's candidates where
        // the desc has the form, else one entry saying why.
        EXPECT_TRUE(info.supported || !info.reason.empty()) << info.id;
      } else if (info.id.rfind("cudnn:gemm", 0) == 0 || info.id.rfind("cudnn:im2col", 0) == 0) {
        // Products of cuBLASLt (cudnn_conv_search_test): listed after cuDNN's candidates, the
        // 1x1 ones unsupported here (a 3x3), the im2col ones off by default (one entry saying so).
        EXPECT_FALSE(info.supported && info.id.rfind("cudnn:gemm", 0) == 0) << info.id;
      } else {
        EXPECT_EQ(info.id.rfind("cudnn:engine:", 0), 0u) << info.id;
        ++engines;
        supported_engines += info.supported;
        // Note [texture reads in long loops]: a config reading through textures runs without
        // graph replay, so it is host-heavy as the legacy calls are; no other engine config is.
        const bool texture = info.id.find("use_tex=1") != std::string::npos;
        EXPECT_EQ(info.has_note("texture_reads"), texture) << info.id;
        EXPECT_EQ(info.has_note("host_heavy"), texture) << info.id;
        textures += texture;
      }
      if (info.supported && desc.dtype == DType::f32) {
        EXPECT_FALSE(info.has_note("tensor_cores")) << info.id << " would run f32 as TF32";
      }
      // Runtime-compiled engines are candidates by default (Note [runtime-compiled engines]);
      // one ruled out says why (TF32 here, f32 with TF32 off). cudnn_conv_search_test checks
      // the rest: their order, the opt-out, the budget.
      if (info.has_note("runtime_compiled") && !info.supported) {
        EXPECT_FALSE(info.reason.empty()) << info.id;
      }
    }
    EXPECT_EQ(legacy, legacy_count.at(direction));
    EXPECT_GT(engines, 10u);
    EXPECT_GT(supported_engines, 0u);
    ASSERT_FALSE(algos.empty());
    EXPECT_TRUE(algos.front().supported);
    // The first candidate is heuristics mode A's first admissible config.
    EXPECT_EQ(algos.front().id.rfind("cudnn:engine:", 0), 0u) << algos.front().id;
    EXPECT_NE(algos.front().name.find("heuristics A #1"), std::string::npos) << algos.front().name;
    std::cout << "[ cudnn    ] " << to_string(direction) << ": " << algos.size() << " candidates ("
              << engines << " engine configs, " << supported_engines << " supported, " << textures
              << " reading through textures; " << legacy << " legacy)\n";
  }
}

// The "cudnn:engine:<index>:<knob>=<v>,..." id as (index, knobs).
std::pair<std::string, std::map<std::string, std::string>> parse_engine_id(const std::string& id) {
  const std::string rest = id.substr(std::string("cudnn:engine:").size());
  const std::size_t colon = rest.find(':');
  std::map<std::string, std::string> knobs;
  if (colon != std::string::npos) {
    std::size_t begin = colon + 1;
    while (begin < rest.size()) {
      std::size_t end = rest.find(',', begin);
      if (end == std::string::npos) end = rest.size();
      const std::string part = rest.substr(begin, end - begin);
      knobs[part.substr(0, part.find('='))] = part.substr(part.find('=') + 1);
      begin = end + 1;
    }
  }
  return {rest.substr(0, colon), knobs};
}

// Sets an environment variable for one scope, restoring the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      ::unsetenv(name_.c_str());
    } else {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
};

// Note [knob search]: variants of at most 4 engines, at most 24 each, all supported, after every
// other supported candidate, each one knob away from a listed config of its engine (its seed).
TEST(CudnnConv, KnobSearchListsVariantsAfterEveryOtherCandidate) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  std::size_t total_variants = 0;
  for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1]}) {
    for (Direction direction : all_directions) {
      SCOPED_TRACE(test::conv_context(desc, direction, "(list)"));
      const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
      std::map<std::string, std::size_t> per_engine;
      bool seen_variant = false;
      for (const AlgoInfo& info : algos) {
        const std::string::size_type at = info.name.find("knob variant of ");
        if (at == std::string::npos) {
          // cuDNN's own candidates before the variants; dnnx's products (here Winograd's) after
          // them (Note [cudnn candidate order]).
          const bool cudnn_own =
              info.id.rfind("cudnn:engine:", 0) == 0 || info.id.rfind("cudnn:legacy:", 0) == 0;
          if (info.supported && cudnn_own) {
            EXPECT_FALSE(seen_variant) << info.id << " after a knob variant";
          }
          EXPECT_EQ(info.variant_of, "") << info.id;
          continue;
        }
        seen_variant = true;
        ++total_variants;
        EXPECT_TRUE(info.supported) << info.id << ": " << info.reason;
        const std::string seed_id = info.name.substr(at + std::string("knob variant of ").size());
        const auto seed = std::find_if(algos.begin(), algos.end(),
                                       [&](const AlgoInfo& a) { return a.id == seed_id; });
        ASSERT_NE(seed, algos.end()) << "seed " << seed_id << " of " << info.id << " not listed";
        // The structured field the search prunes by (Note [pruning variants]) names the same
        // seed, listed before the variant.
        EXPECT_EQ(info.variant_of, seed_id) << info.id;
        EXPECT_LT(seed - algos.begin(), &info - algos.data()) << info.id;
        EXPECT_TRUE(seed->supported) << seed_id;
        const auto [engine, knobs] = parse_engine_id(info.id);
        const auto [seed_engine, seed_knobs] = parse_engine_id(seed_id);
        EXPECT_EQ(engine, seed_engine) << info.id;
        ++per_engine[engine];
        // One knob changed (or, on a default-knob seed, one knob set).
        std::size_t changed = 0;
        for (const auto& [name, value] : knobs) {
          auto found = seed_knobs.find(name);
          changed += found == seed_knobs.end() || found->second != value;
        }
        EXPECT_EQ(changed, 1u) << info.id << " vs its seed " << seed_id;
        EXPECT_GE(knobs.size(), seed_knobs.size()) << info.id;
        // Its plan builds from the id alone.
        EXPECT_NO_THROW(detail::state_of(context).backend().conv().plan(desc, direction, info.id)) << info.id;
      }
      EXPECT_LE(per_engine.size(), 4u);
      for (const auto& [engine, count] : per_engine) EXPECT_LE(count, 24u) << "engine " << engine;
    }
  }
  EXPECT_GT(total_variants, 0u) << "the default knob search found no variant at all";
  std::cout << "[ cudnn    ] " << total_variants << " knob variants over 2 descs x 3 directions\n";
}

// One backend per device per process (the shared context state), so the other modes are checked
// through the settings the environment gives; bench/compare_gpu.py runs each mode in its own
// process. Needs no GPU.
// Note [channel padding]: f16/bf16 convs with unaligned channel counts also list every supported
// candidate of the padded conv, after every other supported candidate but dnnx's tap regions and
// folds (Note [cudnn candidate order]; this stride-2 stem of 3 channels gets phase folds); aligned
// or f32 ones do not.
TEST(CudnnConv, ChannelPaddedCandidatesForUnalignedHalfConvs) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const ConvDesc first_layer =
      make_desc({2, 3, 17, 15}, {16, 3, 7, 7}, {2}, {3}, {1}, 1, DType::f16, Layout::channels_last);
  ConvDesc as_f32 = first_layer;
  as_f32.dtype = DType::f32;
  const ConvDesc aligned = desc_matrix()[1];
  for (Direction direction : all_directions) {
    const std::vector<AlgoInfo> algos = conv_list(context, first_layer, direction);
    std::size_t padded = 0;
    bool seen_padded = false;
    for (const AlgoInfo& info : algos) {
      const bool is_padded = info.id.rfind("cudnn:padc:", 0) == 0;
      if (is_padded) {
        ++padded;
        EXPECT_TRUE(info.supported) << info.id;
        EXPECT_NE(std::find(info.notes.begin(), info.notes.end(), "channel_padding"),
                  info.notes.end())
            << info.id;
        // The padded copies are in the workspace: at least the padded weights (16 x 7 x 7 x 4).
        EXPECT_GE(info.workspace_bytes, std::size_t{16 * 7 * 7 * 4 * 2}) << info.id;
        EXPECT_NE(info.name.find("channels padded 3->4"), std::string::npos) << info.name;
        seen_padded = true;
      } else if (info.supported && !info.has_note("tap_regions") && !info.has_note("fold")) {
        EXPECT_FALSE(seen_padded) << info.id << " is listed after a padded candidate";
      }
    }
    EXPECT_GT(padded, 0U) << to_string(direction);
    std::cout << "[ cudnn    ] " << to_string(direction) << ": " << padded << " of " << algos.size()
              << " candidates channel-padded\n";
    for (const ConvDesc& desc : {as_f32, aligned}) {
      for (const AlgoInfo& info : conv_list(context, desc, direction)) {
        EXPECT_NE(info.id.rfind("cudnn:padc:", 0), 0U) << desc << ": " << info.id;
      }
    }
  }
}

TEST(CudnnSettings, L2SweepFromTheEnvironment) {
  EXPECT_TRUE(cudnn::settings_from_env().l2_sweep);
  {
    const ScopedEnv off("DNNX_CUDNN_L2_SWEEP", "0");
    EXPECT_FALSE(cudnn::settings_from_env().l2_sweep);
  }
  {
    const ScopedEnv bad("DNNX_CUDNN_L2_SWEEP", "maybe");
    expect_error(ErrorKind::InvalidArgument, {"DNNX_CUDNN_L2_SWEEP", "maybe"},
                 [] { cudnn::settings_from_env(); });
  }
}

TEST(CudnnSettings, ReducedPrecisionReductionFromTheEnvironment) {
  EXPECT_FALSE(cudnn::settings_from_env().allow_reduced_precision_reduction);
  {
    const ScopedEnv on("DNNX_ALLOW_REDUCED_PRECISION_REDUCTION", "1");
    EXPECT_TRUE(cudnn::settings_from_env().allow_reduced_precision_reduction);
    EXPECT_FALSE(cudnn::settings_from_env().allow_tf32);
  }
  {
    const ScopedEnv bad("DNNX_ALLOW_REDUCED_PRECISION_REDUCTION", "sometimes");
    expect_error(ErrorKind::InvalidArgument,
                 {"DNNX_ALLOW_REDUCED_PRECISION_REDUCTION", "sometimes"},
                 [] { cudnn::settings_from_env(); });
  }
}

TEST(CudnnSettings, KnobSearchFromTheEnvironment) {
  {
    const cudnn::Settings settings = cudnn::settings_from_env();
    EXPECT_EQ(settings.knob_search, cudnn::KnobSearch::top);
    EXPECT_EQ(settings.knob_variants, 24);
  }
  {
    const ScopedEnv off("DNNX_CUDNN_KNOB_SEARCH", "OFF");
    EXPECT_EQ(cudnn::settings_from_env().knob_search, cudnn::KnobSearch::off);
  }
  {
    const ScopedEnv all("DNNX_CUDNN_KNOB_SEARCH", "all");
    const ScopedEnv cap("DNNX_CUDNN_KNOB_VARIANTS", "2");
    const cudnn::Settings settings = cudnn::settings_from_env();
    EXPECT_EQ(settings.knob_search, cudnn::KnobSearch::all);
    EXPECT_EQ(settings.knob_variants, 2);
  }
  {
    const ScopedEnv bad("DNNX_CUDNN_KNOB_SEARCH", "some");
    expect_error(ErrorKind::InvalidArgument, {"DNNX_CUDNN_KNOB_SEARCH", "'some'", "off, top, all"},
                 [] { cudnn::settings_from_env(); });
  }
  for (const char* value : {"0", "-3", "12x", "5000"}) {
    const ScopedEnv bad("DNNX_CUDNN_KNOB_VARIANTS", value);
    expect_error(ErrorKind::InvalidArgument,
                 {"DNNX_CUDNN_KNOB_VARIANTS", detail::cat('\'', value, '\''), "1..4096"},
                 [] { cudnn::settings_from_env(); });
  }
}

// Note [TF32] (conv_engine.cpp): f16 / bf16 engines noted REDUCED_PRECISION_REDUCTION are listed
// unsupported, naming the switch; DNNX_ALLOW_REDUCED_PRECISION_REDUCTION=1 lifts that reason, and
// a candidate without the note listed both ways is supported alike (the knob search may list other
// variants once more engines are supported, so only those listed both ways are compared).
TEST(CudnnConv, ReducedPrecisionReductionIsASwitch) {
  DNNX_REQUIRE_GPU();
  // A context of its own stream has a backend of its own, which reads the settings when it is made
  // (the stream lives as long as the process, as Context::with_stream requires).
  Context allowed = [] {
    const ScopedEnv allow("DNNX_ALLOW_REDUCED_PRECISION_REDUCTION", "1");
    cudaStream_t stream = nullptr;
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    return gpu_context().with_stream(stream);
  }();
  std::size_t noted = 0;
  for (const ConvDesc& desc : desc_matrix()) {
    if (desc.dtype == DType::f32) continue;
    for (Direction direction : all_directions) {
      std::map<std::string, AlgoInfo> strict;
      std::map<std::string, bool> others;  // the candidates without the note: supported?
      {
        Context context = gpu_context();
        for (const AlgoInfo& info : conv_list(context, desc, direction)) {
          if (!info.has_note("reduced_precision_reduction")) {
            others.emplace(info.id, info.supported);
            continue;
          }
          ++noted;
          EXPECT_FALSE(info.supported) << desc << ": " << info.id;
          EXPECT_NE(info.reason.find("DNNX_ALLOW_REDUCED_PRECISION_REDUCTION=1"), std::string::npos)
              << info.id << ": " << info.reason;
          strict.emplace(info.id, info);
        }
      }
      for (const AlgoInfo& info : conv_list(allowed, desc, direction)) {
        if (const auto other = others.find(info.id); other != others.end()) {
          EXPECT_EQ(info.supported, other->second)
              << desc << ": " << info.id << ": " << info.reason;
        }
        if (!strict.count(info.id)) continue;
        EXPECT_EQ(info.reason.find("accumulates in"), std::string::npos)
            << info.id << ": " << info.reason;
      }
    }
  }
  std::cout << "[ cudnn    ] " << noted
            << " candidates noted reduced_precision_reduction over the f16/bf16 descs\n";
}

TEST(CudnnConv, NondeterministicAlgorithmsAreMarked) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  ConvDesc desc = desc_matrix()[1];
  for (const AlgoInfo& info : conv_list(context, desc, Direction::bwd_data)) {
    if (info.id.rfind("cudnn:legacy:bwd_data:algo_0:", 0) == 0) {
      EXPECT_FALSE(info.deterministic);
    }
    if (info.id.rfind("cudnn:legacy:bwd_data:algo_1:", 0) == 0) {
      EXPECT_TRUE(info.deterministic);
    }
  }
  for (const AlgoInfo& info : conv_list(context, desc, Direction::bwd_weights)) {
    if (info.id.rfind("cudnn:legacy:bwd_weights:algo_0:", 0) == 0 ||
        info.id.rfind("cudnn:legacy:bwd_weights:algo_3:", 0) == 0) {
      EXPECT_FALSE(info.deterministic) << info.id;
    }
    if (info.id.rfind("cudnn:engine:", 0) == 0) {
      EXPECT_EQ(info.deterministic, !info.has_note("nondeterministic")) << info.id;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Parity: every supported candidate of every direction against the reference backend, each
// called three times on the same buffers so that its direct run, its capture and its graph's
// replay are all checked (a replay runs what the capture recorded, the parameters of that call).

TEST(CudnnConv, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  // Runtime-compiled candidates would compile for seconds each on every desc here:
  // cudnn_conv_search_test's RuntimeCompiledCandidatesMatchTheReference checks them.
  const ScopedEnv no_runtime_compiled("DNNX_CUDNN_RUNTIME_COMPILED", "0");
  Context context = gpu_context();
  Context reference(BackendKind::reference);
  reference.set_choice_cache(std::make_shared<ChoiceCache>());
  std::size_t checked = 0, unsupported = 0;
  std::map<std::string, std::size_t> unsupported_by_kind;
  for (const ConvDesc& desc : desc_matrix()) {
    const auto start = std::chrono::steady_clock::now();
    std::size_t desc_checked = 0;
    for (Direction direction : all_directions) {
      const test::ConvOperands operands =
          test::random_conv_operands(desc, direction, test::seed_from(desc.key()));
      const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
      const std::vector<float> expected =
          test::run_conv(reference, desc, direction, operands).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(desc, direction, operands);
      const Dims out_dims = test::conv_output_dims(desc, direction);
      bool any = false;
      for (const AlgoInfo& info : conv_list(context, desc, direction)) {
        if (!info.supported) {
          ++unsupported;
          ++unsupported_by_kind[info.id.rfind("cudnn:legacy:", 0) == 0   ? "legacy"
                                : info.id.rfind("cudnn:kernel:", 0) == 0 ? "kernel"
                                                                         : "engine"];
          continue;
        }
        context.tune().policy(direction) = AlgoPolicy::fixed(info.id);
        std::vector<GpuRun> runs;
        try {
          runs = run_gpu_calls(context, desc, direction, device, 3);
        } catch (const Error& error) {
          ADD_FAILURE() << "listed as supported but failed: " << error.what() << "\n"
                        << test::conv_context(desc, direction, info.id);
          continue;
        }
        for (std::size_t call = 0; call < runs.size(); ++call) {
          const std::string where = test::conv_context(desc, direction, info.id) + " call " +
                                    std::to_string(call) +
                                    (call == 0   ? " (direct)"
                                     : call == 1 ? " (capture)"
                                                 : " (replay)");
          EXPECT_EQ(runs[call].choice->algo.id, info.id);
          const std::vector<float> actual = runs[call].output.to_f32();
          EXPECT_TRUE(test::all_finite(actual, out_dims, "output", where));
          EXPECT_TRUE(test::close_within_scale(actual, expected, scale, out_dims,
                                               test::conv_tolerance(desc.dtype), "output", where));
        }
        ++checked;
        ++desc_checked;
        any = true;
      }
      context.tune().policy(direction) = AlgoPolicy::heuristic();
      EXPECT_TRUE(any) << "no supported candidate for " << test::conv_context(desc, direction, "");
    }
    std::cout << "[ cudnn    ] " << desc << ": " << desc_checked << " candidate runs checked in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
              << " s\n";
  }
  std::cout << "[ cudnn    ] " << checked << " candidate runs matched the reference; "
            << unsupported << " unsupported listings (legacy " << unsupported_by_kind["legacy"]
            << ", engine " << unsupported_by_kind["engine"] << ", kernel "
            << unsupported_by_kind["kernel"] << ")\n";
}

TEST(CudnnConv, BiasMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  Context reference(BackendKind::reference);
  for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1], desc_matrix()[7]}) {
    const std::string where = test::conv_context(desc, Direction::fwd, "bias");
    const Tensor bias =
        test::random_tensor(desc.bias_dims(), desc.dtype, Layout::channels_first, 3);
    const Tensor dst = test::random_tensor(desc.dst_dims(), desc.dtype, desc.layout, 4);
    Tensor dst_ref = test::tensor_from(desc.dst_dims(), desc.dtype, desc.layout, dst.to_f32());
    conv_bias_fwd(reference, desc, bias, dst_ref);
    Tensor dst_gpu = to_device(dst, context);
    conv_bias_fwd(context, desc, to_device(bias, context), dst_gpu);
    const std::vector<float> scale(static_cast<std::size_t>(dst.numel()), 2.0f);
    EXPECT_TRUE(test::close_within_scale(to_host(dst_gpu).to_f32(), dst_ref.to_f32(), scale,
                                         desc.dst_dims(), test::conv_tolerance(desc.dtype),
                                         "dst + bias", where));
    Tensor diff_bias_ref = Tensor::empty(desc.bias_dims(), desc.dtype);
    conv_bias_bwd(reference, desc, dst, diff_bias_ref);
    Tensor diff_bias_gpu =
        to_device(test::nan_tensor(desc.bias_dims(), desc.dtype, Layout::channels_first), context);
    conv_bias_bwd(context, desc, to_device(dst, context), diff_bias_gpu);
    // Elements summed per channel (numel is a multiple of the channel count).
    const auto count = static_cast<float>(dst.numel()) / static_cast<float>(desc.out_channels);
    const std::vector<float> bias_scale(static_cast<std::size_t>(desc.out_channels), count);
    EXPECT_TRUE(test::close_within_scale(to_host(diff_bias_gpu).to_f32(), diff_bias_ref.to_f32(),
                                         bias_scale, desc.bias_dims(),
                                         test::conv_tolerance(desc.dtype), "diff_bias", where));
  }
}

// Context::with_stream: ops of that context are queued on the caller's stream, through a backend
// instance of its own; copies wait for it, and the results match the reference.
TEST(CudnnConv, CallersStreamRunsTheOpsAndCopiesWaitForIt) {
  DNNX_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Context own = gpu_context();
  Context context = own.with_stream(stream);
  EXPECT_EQ(context.stream(), static_cast<void*>(stream));
  EXPECT_EQ(own.stream(), nullptr);
  EXPECT_NE(&detail::state_of(context), &detail::state_of(own));                      // an instance of its own
  EXPECT_EQ(&detail::state_of(context), &detail::state_of(own.with_stream(stream)));  // shared by that stream
  EXPECT_EQ(&detail::state_of(context.with_stream(nullptr)), &detail::state_of(own));
  EXPECT_NE(context.describe().find("caller's stream"), std::string::npos) << context.describe();
  Context reference(BackendKind::reference);
  const ConvDesc desc = desc_matrix()[1];
  const test::ConvOperands host = test::random_conv_operands(desc, Direction::fwd, 11);
  const test::DeviceConvOperands device = test::upload_conv_operands(host, context);
  Tensor dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout, context.allocator());
  // Several calls queued without waiting: the copy below must wait for the stream.
  for (int i = 0; i < 4; ++i) conv_fwd(context, desc, device.src, device.weights, dst);
  const std::vector<float> expected =
      test::run_conv(reference, desc, Direction::fwd, host).output.to_f32();
  EXPECT_TRUE(test::close_within_scale(to_host(dst).to_f32(), expected,
                                       test::conv_error_scale(desc, Direction::fwd, host),
                                       desc.dst_dims(), test::conv_tolerance(desc.dtype), "dst",
                                       test::conv_context(desc, Direction::fwd, "stream")));
  context.synchronize();
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
}

// Repeated calls on the same buffers are replayed from a captured CUDA graph (Note [graph
// replay]): the replayed calls must write the same, correct output. The output is poisoned before
// every call, so a replay that does nothing fails. Besides the heuristic pick and a legacy
// algorithm, the first GEMM candidate (cuBLASLt's, whose plan replays the product) and the first
// packed one (dnnx's packing kernels and the product under one graph, Note [packed gemm]) of a
// 1x1 desc that lists them.
TEST(CudnnConv, GraphReplayRecomputesEveryCall) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  Context reference(BackendKind::reference);
  const ConvDesc pointwise = make_desc({4, 32, 7, 7}, {64, 32, 1, 1}, {1}, {0}, {1}, 1, DType::f32,
                                       Layout::channels_first);
  int gemm_runs = 0, packed_runs = 0;
  for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1], pointwise}) {
    for (Direction direction : all_directions) {
      const test::ConvOperands operands = test::random_conv_operands(desc, direction, 21);
      const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
      const std::vector<float> expected =
          test::run_conv(reference, desc, direction, operands).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(desc, direction, operands);
      const Dims out_dims = test::conv_output_dims(desc, direction);
      const Tensor poison = test::nan_tensor(out_dims, desc.dtype, desc.layout);
      Tensor output = to_device(poison, context);
      std::vector<AlgoPolicy> policies{
          AlgoPolicy::heuristic(),
          AlgoPolicy::fixed(std::string("cudnn:legacy:") + std::string(to_string(direction)) +
                            (direction == Direction::fwd ? ":implicit_gemm:fma" : ":algo_1:fma"))};
      bool gemm = false, packed = false;
      for (const AlgoInfo& algo : conv_list(context, desc, direction)) {
        if (!algo.supported || algo.has_note("tf32")) continue;
        const bool is_packed = algo.id.starts_with("cudnn:gemm:packed:");
        if (is_packed ? packed : (gemm || !algo.id.starts_with("cudnn:gemm:"))) continue;
        (is_packed ? packed : gemm) = true;
        (is_packed ? packed_runs : gemm_runs) += 1;
        policies.push_back(AlgoPolicy::fixed(algo.id));
      }
      for (const AlgoPolicy& policy : policies) {
        context.tune().policy(direction) = policy;
        for (int call = 0; call < 4; ++call) {
          copy(poison, output);
          std::shared_ptr<const Choice> choice;
          switch (direction) {
            case Direction::fwd:
              choice = conv_fwd(context, desc, device.src, device.weights, output);
              break;
            case Direction::bwd_data:
              choice = conv_bwd_data(context, desc, device.diff_dst, device.weights, output);
              break;
            case Direction::bwd_weights:
              choice = conv_bwd_weights(context, desc, device.src, device.diff_dst, output);
              break;
            case Direction::fwd_training: break;  // not a convolution direction
          }
          const std::string where = test::conv_context(desc, direction, choice->algo.id) +
                                    " call " + std::to_string(call);
          const std::vector<float> actual = to_host(output).to_f32();
          ASSERT_TRUE(test::all_finite(actual, out_dims, "output", where));
          ASSERT_TRUE(test::close_within_scale(actual, expected, scale, out_dims,
                                               test::conv_tolerance(desc.dtype), "output", where));
        }
      }
      context.tune().policy(direction) = AlgoPolicy::heuristic();
    }
  }
  // The 1x1 desc lists GEMM candidates in every direction and a packed one for bwd_weights.
  EXPECT_GE(gemm_runs, 3);
  EXPECT_GE(packed_runs, 1);
}

// A caller's own CUDA graph capture (torch.cuda.graph does one in cudaStreamCaptureModeGlobal) on
// the stream of a with_stream context records the op's launches, also for a plan that replays a
// graph of its own after the warm-up's repeated calls (Note [inside a caller's capture]):
// capturing runs nothing, the caller's graph recomputes the output at each launch, and the op
// still works (and replays) after the capture. The output is poisoned before each check.
TEST(CudnnConv, CallersCaptureRecordsTheOps) {
  DNNX_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    Context own = gpu_context();
    Context context = own.with_stream(stream);
    Context reference(BackendKind::reference);
    for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1]}) {
      const test::ConvOperands host = test::random_conv_operands(desc, Direction::fwd, 31);
      const test::DeviceConvOperands device = test::upload_conv_operands(host, context);
      const std::vector<float> expected =
          test::run_conv(reference, desc, Direction::fwd, host).output.to_f32();
      const std::vector<float> scale = test::conv_error_scale(desc, Direction::fwd, host);
      const Tensor poison = test::nan_tensor(desc.dst_dims(), desc.dtype, desc.layout);
      Tensor dst = to_device(poison, context);
      const auto matches = [&](const std::string& when) -> ::testing::AssertionResult {
        const std::vector<float> actual = to_host(dst).to_f32();
        const std::string where = test::conv_context(desc, Direction::fwd, when);
        ::testing::AssertionResult finite = test::all_finite(actual, desc.dst_dims(), "dst", where);
        if (!finite) return finite;
        return test::close_within_scale(actual, expected, scale, desc.dst_dims(),
                                        test::conv_tolerance(desc.dtype), "dst", where);
      };
      // Warm-up on the stream: the choice, the plan, its workspace block and, from the second
      // call on the same buffers, the plan's own graph.
      for (int call = 0; call < 3; ++call) conv_fwd(context, desc, device.src, device.weights, dst);
      ASSERT_TRUE(matches("warm-up"));
      copy(poison, dst);

      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      std::string failure;
      try {
        conv_fwd(context, desc, device.src, device.weights, dst);
      } catch (const Error& error) {
        failure = error.what();
      }
      const cudaError_t ended = cudaStreamEndCapture(stream, &graph);  // whatever happened
      ASSERT_TRUE(failure.empty()) << "conv_fwd inside the capture: " << failure;
      ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);
      ASSERT_NE(graph, nullptr);
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
      ASSERT_EQ(instantiated, cudaSuccess) << cudaGetErrorString(instantiated);
      EXPECT_FALSE(test::all_finite(to_host(dst).to_f32(), desc.dst_dims(), "dst", "capture"))
          << "capturing must queue nothing";
      for (int launch = 0; launch < 2; ++launch) {
        copy(poison, dst);
        ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        EXPECT_TRUE(matches("the caller's graph, launch " + std::to_string(launch)));
      }
      EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
      for (int call = 0; call < 3; ++call) {
        copy(poison, dst);
        conv_fwd(context, desc, device.src, device.weights, dst);
        EXPECT_TRUE(matches("after the capture, call " + std::to_string(call)));
      }
    }
    context.synchronize();
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Determinism.

TEST(CudnnConv, DeterministicBackwardWeightsIsBitwiseStable) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1]}) {
    const Direction direction = Direction::bwd_weights;
    const test::ConvOperands operands = test::random_conv_operands(desc, direction, 11);
    const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
    int deterministic = 0;
    for (const AlgoInfo& info : conv_list(context, desc, direction)) {
      if (!info.supported || !info.deterministic) continue;
      ++deterministic;
      const std::string where = test::conv_context(desc, direction, info.id);
      context.tune().policy(direction) = AlgoPolicy::fixed(info.id);
      const Tensor first = run_gpu(context, desc, direction, device).output;
      for (int i = 1; i < 10; ++i) {
        const Tensor again = run_gpu(context, desc, direction, device).output;
        ASSERT_TRUE(test::bitwise_equal(first, again, "diff_weights", where)) << "run " << i;
      }
    }
    EXPECT_GT(deterministic, 0);
    // Exhaustive selection under the deterministic constraint never picks anything else.
    context.tune().policy(direction) = AlgoPolicy::exhaustive();
    context.tune().deterministic = true;
    const GpuRun run = run_gpu(context, desc, direction, device);
    EXPECT_TRUE(run.choice->algo.deterministic) << run.choice->algo.id;
    for (const ProfileRow& row : run.choice->timings) {
      if (!row.algo.deterministic && row.algo.supported) {
        EXPECT_EQ(row.status, CandidateStatus::not_deterministic) << row.algo.id;
      }
    }
    context.tune().deterministic = false;
    context.tune().policy(direction) = AlgoPolicy::heuristic();
  }
}

// ---------------------------------------------------------------------------------------------
// Selection: exhaustive, workspace limits.

TEST(CudnnConv, ExhaustiveTimesLegacyAndEnginesTogether) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const ConvDesc desc = desc_matrix()[1];
  context.tune().fwd = AlgoPolicy::exhaustive();
  const test::ConvOperands operands = test::random_conv_operands(desc, Direction::fwd, 5);
  const GpuRun run =
      run_gpu(context, desc, Direction::fwd, test::upload_conv_operands(operands, context));
  // Both kinds ran (on a conv this small, legacy algorithms may be abandoned after one run).
  bool legacy_timed = false, engine_timed = false;
  for (const ProfileRow& row : run.choice->timings) {
    if (row.runs == 0) continue;
    EXPECT_GT(row.median_ms, 0.0) << row.algo.id;
    legacy_timed |= row.algo.id.rfind("cudnn:legacy:", 0) == 0;
    engine_timed |= row.algo.id.rfind("cudnn:engine:", 0) == 0;
  }
  EXPECT_TRUE(legacy_timed);
  EXPECT_TRUE(engine_timed);
  EXPECT_EQ(run.choice->algo.id, run.choice->timings.front().algo.id);
  std::cout << "[ cudnn    ] exhaustive fwd " << desc << ": " << run.choice->algo.id << " "
            << run.choice->time_ms << " ms, " << run.choice->candidates_timed
            << " candidates timed, selection " << run.choice->tuning_ms << " ms\n";
  // conv_select without tensors times on device scratch tensors.
  context.tune().bwd_data = AlgoPolicy::exhaustive();
  const auto selected = conv_select(context, desc, Direction::bwd_data);
  EXPECT_GT(selected->candidates_timed, 1);
}

TEST(CudnnConv, WorkspaceLimits) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  for (const ConvDesc& desc : {desc_matrix()[0], desc_matrix()[1]}) {
    for (Direction direction : all_directions) {
      const std::string where = test::conv_context(desc, direction, "(workspace)");
      const test::ConvOperands operands = test::random_conv_operands(desc, direction, 9);
      const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
      for (PolicyKind kind : {PolicyKind::heuristic, PolicyKind::exhaustive}) {
        context.tune().policy(direction) =
            kind == PolicyKind::heuristic ? AlgoPolicy::heuristic() : AlgoPolicy::exhaustive();
        // A limit of 0 still succeeds, on a candidate that needs no workspace.
        context.tune().workspace_limit = 0;
        const GpuRun zero = run_gpu(context, desc, direction, device);
        EXPECT_EQ(zero.choice->algo.workspace_bytes, 0u) << where;
        EXPECT_TRUE(test::all_finite(zero.output, "output", where));
        // Just below the unconstrained winner's workspace: another candidate that fits.
        context.tune().workspace_limit.reset();
        const GpuRun free = run_gpu(context, desc, direction, device);
        const std::size_t winner = free.choice->algo.workspace_bytes;
        if (winner == 0) continue;  // nothing below it; the zero-limit case covered this one
        context.tune().workspace_limit = winner - 1;
        const GpuRun limited = run_gpu(context, desc, direction, device);
        EXPECT_NE(limited.choice->algo.id, free.choice->algo.id) << where;
        EXPECT_LE(limited.choice->algo.workspace_bytes, winner - 1) << where;
        context.tune().workspace_limit.reset();
      }
      context.tune().policy(direction) = AlgoPolicy::heuristic();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(CudnnConv, UnsupportedFixedIdsNameTheIdTheReasonAndTheValidIds) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const ConvDesc strided = desc_matrix()[3];  // stride 2: FFT cannot run it
  const test::ConvOperands operands = test::random_conv_operands(strided, Direction::fwd, 1);
  const test::DeviceConvOperands device = test::upload_conv_operands(operands, context);
  context.tune().fwd = AlgoPolicy::fixed("cudnn:legacy:fwd:fft:fma");
  expect_error(ErrorKind::Unsupported,
               {"cudnn:legacy:fwd:fft:fma", "CUDNN_STATUS_", "valid ids:", "cudnn:engine:"},
               [&] { run_gpu(context, strided, Direction::fwd, device); });
  // TF32 math for f32 is refused with the reason.
  context.tune().fwd = AlgoPolicy::fixed("cudnn:legacy:fwd:implicit_gemm:tensor_op");
  expect_error(
      ErrorKind::Unsupported,
      {"cudnn:legacy:fwd:implicit_gemm:tensor_op", "TF32", "DNNX_ALLOW_TF32", "valid ids:"},
      [&] { run_gpu(context, strided, Direction::fwd, device); });
  // Not a candidate at all.
  context.tune().fwd = AlgoPolicy::fixed("cudnn:engine:99999");
  expect_error(ErrorKind::InvalidArgument, {"cudnn:engine:99999", "valid ids:"},
               [&] { run_gpu(context, strided, Direction::fwd, device); });
  // Asymmetric padding: legacy algorithms say why.
  const ConvDesc asymmetric = desc_matrix().back();
  const test::DeviceConvOperands asym_device = test::upload_conv_operands(
      test::random_conv_operands(asymmetric, Direction::fwd, 2), context);
  context.tune().fwd = AlgoPolicy::fixed("cudnn:legacy:fwd:implicit_gemm:fma");
  expect_error(ErrorKind::Unsupported, {"asymmetric padding", "valid ids:"},
               [&] { run_gpu(context, asymmetric, Direction::fwd, asym_device); });
  // Host tensors on a cudnn context.
  context.tune().fwd = AlgoPolicy::heuristic();
  Tensor dst = Tensor::empty(strided.dst_dims(), strided.dtype, strided.layout);
  expect_error(ErrorKind::InvalidArgument, {"src is on cpu", "cuda:0"},
               [&] { conv_fwd(context, strided, operands.src, operands.weights, dst); });
}

}  // namespace
}  // namespace dnnx
