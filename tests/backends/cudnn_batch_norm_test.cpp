// The cudnn backend's batch normalization on a GPU (label "gpu"): every candidate (cuDNN's legacy
// and Ex calls in every mode, the two-pass and fused kernels) of every case of the batch-norm
// table against the reference, forward (dst, running statistics, saved statistics) and backward
// (diff_src, diff_scale, diff_shift; training and the frozen-statistics inference backward);
// bitwise determinism; workspace; the heuristic order; calls that allocate nothing; the L2 sweep
// after a timed selection; bad tensors.
// Every test skips with the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "backends/cudnn/allocator.hpp"
#include "core/strings.hpp"
#include "ops/batch_norm_cases.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace dnnx::test {
namespace {

// Note [expected unsupported] for the cudnn backend (Note [cudnn batch-norm candidates]): the
// only reasons a candidate may be unsupported on the case table.
struct ExpectedReason {
  const char* category;
  std::regex id;
  std::regex reason;
  bool (*applies)(const BatchNormDesc&, Direction);
};

const std::vector<ExpectedReason>& expected_reasons() {
  using D = const BatchNormDesc&;
  static const std::vector<ExpectedReason> reasons = {
      {"cuDNN mode keeps other statistics than the desc", std::regex("^cudnn:(legacy|ex):"),
       std::regex("mode keeps one statistic per"),
       [](D desc, Direction) { return desc.dims.rank() > 2; }},
      {"cuDNN cannot differentiate with frozen statistics", std::regex("^cudnn:(legacy|ex):"),
       std::regex("frozen-statistics"),
       [](D desc, Direction d) { return !desc.training && d == Direction::bwd_data; }},
      {"cuDNN has no Ex inference call", std::regex("^cudnn:ex:"), std::regex("no Ex variant"),
       [](D desc, Direction) { return !desc.training; }},
      {"cuDNN's inference call has no persistent mode", std::regex("spatial_persistent$"),
       std::regex("PER_ACTIVATION or SPATIAL only"),
       [](D desc, Direction) { return !desc.training; }},
      {"BackwardEx needs its forward's reserve space", std::regex("^cudnn:ex:"),
       std::regex("reserve space"), [](D, Direction d) { return d == Direction::bwd_data; }},
      {"fused kernels: planes with at most 4096 values per statistic",
       std::regex("^cudnn:kernel:bnorm_fused$"),
       std::regex("fused kernels hold|no reduction to fuse"), [](D, Direction) { return true; }},
      {"bf16 needs compute capability 8.0", std::regex("^cudnn:(legacy|ex):"),
       std::regex("compute capability 8.0"),
       [](D desc, Direction) { return desc.dtype == DType::bf16; }},
  };
  return reasons;
}

const char* unsupported_category(const BatchNormDesc& desc, Direction direction,
                                 const AlgoInfo& algo) {
  for (const ExpectedReason& reason : expected_reasons()) {
    if (std::regex_search(algo.id, reason.id) && std::regex_search(algo.reason, reason.reason) &&
        reason.applies(desc, direction)) {
      return reason.category;
    }
  }
  return nullptr;
}

// Runs every candidate of both directions of `desc` against the reference; returns the ids that
// ran, per direction.
std::map<Direction, std::vector<std::string>> check_every_candidate(const BatchNormDesc& desc,
                                                                    const std::string& name) {
  const BatchNormInputs inputs = batch_norm_inputs(desc, seed_from(name));
  Context reference = batch_norm_context_with(BackendKind::reference, Direction::fwd);
  const BatchNormFwdResult ref_fwd = run_batch_norm_fwd(reference, desc, inputs);
  const BatchNormBwdResult ref_bwd =
      run_batch_norm_bwd(reference, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std);

  Context gpu = batch_norm_context_with(BackendKind::cudnn, Direction::fwd);
  std::map<Direction, std::vector<std::string>> ran;
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const std::vector<AlgoInfo> algos = batch_norm_list(gpu, desc, direction);
    EXPECT_TRUE(
        std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; }))
        << "no supported candidate\n  " << batch_norm_context(desc, direction, "(none)");
    std::ostringstream summary;
    int unsupported = 0;
    double worst = 0;
    for (const AlgoInfo& algo : algos) {
      const std::string context = batch_norm_context(desc, direction, algo.id);
      if (!algo.supported) {
        ++unsupported;
        EXPECT_NE(unsupported_category(desc, direction, algo), nullptr)
            << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
            << "(Note [expected unsupported]): \"" << algo.reason << "\"\n  " << context;
        summary << "\n    skip " << algo.id << ": " << algo.reason;
        continue;
      }
      Context fixed = batch_norm_context_with(BackendKind::cudnn, direction, algo.id);
      try {
        if (direction == Direction::fwd) {
          const BatchNormFwdResult run = run_batch_norm_fwd(fixed, desc, inputs);
          EXPECT_EQ(run.choice->algo.id, algo.id) << context;
          EXPECT_EQ(run.choice->algo.workspace_bytes, algo.workspace_bytes) << context;
          EXPECT_TRUE(compare_batch_norm_fwd(desc, inputs, ref_fwd, run, context, &worst));
          if (algo.deterministic) {
            EXPECT_TRUE(bitwise_equal_fwd(run, run_batch_norm_fwd(fixed, desc, inputs), context));
          }
        } else {
          const BatchNormBwdResult run =
              run_batch_norm_bwd(fixed, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std);
          EXPECT_EQ(run.choice->algo.id, algo.id) << context;
          EXPECT_TRUE(compare_batch_norm_bwd(desc, inputs, ref_fwd.saved_mean,
                                             ref_fwd.saved_inv_std, ref_bwd, run, context, &worst));
          if (algo.deterministic) {
            EXPECT_TRUE(bitwise_equal_bwd(
                run,
                run_batch_norm_bwd(fixed, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std),
                context));
          }
        }
        ran[direction].push_back(algo.id);
        summary << "\n    ran  " << algo.id << " (workspace " << algo.workspace_bytes << " B)";
      } catch (const Error& error) {
        ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                      << error.what() << "\n  " << context;
      }
    }
    std::cout << "[ parity   ] cudnn " << name << ' ' << to_string(direction) << ": "
              << ran[direction].size() << " ran, " << unsupported
              << " unsupported (expected), worst error " << worst << " of the bound"
              << summary.str() << '\n';
  }
  return ran;
}

class CudnnBatchNormParity : public ::testing::TestWithParam<BatchNormCase> {};

TEST_P(CudnnBatchNormParity, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  const BatchNormCase& c = GetParam();
  auto ran = check_every_candidate(c.desc, c.name);
  // The kernels run every case of the table.
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const std::vector<std::string>& ids = ran[direction];
    EXPECT_NE(std::find(ids.begin(), ids.end(), "cudnn:kernel:bnorm"), ids.end())
        << "cudnn:kernel:bnorm did not run " << c.name << ' ' << to_string(direction);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudnnBatchNormParity, ::testing::ValuesIn(batch_norm_cases()),
                         [](const ::testing::TestParamInfo<BatchNormCase>& info) {
                           return info.param.name;
                         });

BatchNormDesc resnet_desc(Dims dims, DType dtype, Layout layout, bool training = true) {
  BatchNormDesc desc;
  desc.dims = dims;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.training = training;
  desc.validate();
  return desc;
}

// The layers benchmark's shapes (ResNet-50's 56x56x256 and 7x7x2048), at batches the
// reference computes in seconds, in both benchmark set-ups (f32 NCHW, f16 NHWC) and inference.
TEST(CudnnBatchNorm, ResNetShapesEveryCandidate) {
  DNNX_REQUIRE_GPU();
  const std::vector<BatchNormDesc> descs = {
      resnet_desc({8, 256, 56, 56}, DType::f32, Layout::channels_first),
      resnet_desc({8, 256, 56, 56}, DType::f16, Layout::channels_last),
      resnet_desc({64, 2048, 7, 7}, DType::f32, Layout::channels_first),
      resnet_desc({64, 2048, 7, 7}, DType::f16, Layout::channels_last),
      resnet_desc({64, 2048, 7, 7}, DType::f16, Layout::channels_first, false),
  };
  for (const BatchNormDesc& desc : descs) {
    auto ran = check_every_candidate(desc, batch_norm_case_name(desc));
    if (desc.layout == Layout::channels_first && desc.dims[2] == 7) {
      // 64 x 49 values per channel: the fused kernels fit.
      const auto& bwd = ran[Direction::bwd_data];
      EXPECT_NE(std::find(bwd.begin(), bwd.end(), "cudnn:kernel:bnorm_fused"), bwd.end());
    }
  }
}

// Note [cudnn batch-norm candidate order]: the heuristic takes PyTorch's route where cuDNN
// supports it, and the kernels for the inference backward.
TEST(CudnnBatchNorm, HeuristicFollowsPyTorch) {
  DNNX_REQUIRE_GPU();
  Context context = batch_norm_context_with(BackendKind::cudnn, Direction::fwd);
  auto first_supported = [&](const BatchNormDesc& desc, Direction direction) {
    for (const AlgoInfo& algo : batch_norm_list(context, desc, direction))
      if (algo.supported) return algo.id;
    return std::string("(none)");
  };
  auto listed = [&](const BatchNormDesc& desc, Direction direction, const std::string& id) {
    for (const AlgoInfo& algo : batch_norm_list(context, desc, direction))
      if (algo.id == id) return algo.supported;
    return false;
  };
  const BatchNormDesc nchw = resnet_desc({16, 64, 8, 8}, DType::f32, Layout::channels_first);
  if (listed(nchw, Direction::fwd, "cudnn:ex:spatial")) {
    EXPECT_EQ(first_supported(nchw, Direction::fwd), "cudnn:ex:spatial");
  }
  const BatchNormDesc nhwc = resnet_desc({16, 64, 8, 8}, DType::f16, Layout::channels_last);
  if (listed(nhwc, Direction::fwd, "cudnn:ex:spatial_persistent")) {
    EXPECT_EQ(first_supported(nhwc, Direction::fwd), "cudnn:ex:spatial_persistent");
  }
  const BatchNormDesc eval = resnet_desc({16, 64, 8, 8}, DType::f32, Layout::channels_first, false);
  EXPECT_EQ(first_supported(eval, Direction::fwd), "cudnn:legacy:spatial");
  EXPECT_TRUE(first_supported(eval, Direction::bwd_data).starts_with("cudnn:kernel:bnorm"));
  for (const AlgoInfo& algo : batch_norm_list(context, eval, Direction::bwd_data)) {
    EXPECT_EQ(algo.supported, algo.id.starts_with("cudnn:kernel:"))
        << algo.id << ": " << algo.reason;
  }
  const std::vector<AlgoInfo> algos = batch_norm_list(context, nchw, Direction::fwd);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < algos.size(); ++i) {
    EXPECT_EQ(algos[i].priority, static_cast<int>(i));
    EXPECT_TRUE(ids.insert(algos[i].id).second) << algos[i].id;
    if (i > 0 && algos[i].supported) {
      EXPECT_TRUE(algos[i - 1].supported) << algos[i].id;
    }
  }
  EXPECT_EQ(ids.size(), 8u);
}

// Note [timing stateful calls]: exhaustive selection of a training forward times on scratch
// tensors; the caller's running statistics see one update.
TEST(CudnnBatchNorm, ExhaustiveTrainingForwardUpdatesRunningStatisticsOnce) {
  DNNX_REQUIRE_GPU();
  BatchNormDesc desc = resnet_desc({8, 32, 6, 6}, DType::f32, Layout::channels_first);
  desc.momentum = 0.5;
  const BatchNormInputs in = batch_norm_inputs(desc, 17);
  Context reference = batch_norm_context_with(BackendKind::reference, Direction::fwd);
  const BatchNormFwdResult once = run_batch_norm_fwd(reference, desc, in);
  Context gpu = batch_norm_context_with(BackendKind::cudnn, Direction::fwd);
  gpu.tune().policy(OpKind::batch_norm, Direction::fwd) = AlgoPolicy::exhaustive();
  const BatchNormFwdResult timed = run_batch_norm_fwd(gpu, desc, in);
  EXPECT_GE(timed.choice->candidates_timed, 2);
  EXPECT_TRUE(compare_batch_norm_fwd(
      desc, in, once, timed, batch_norm_context(desc, Direction::fwd, timed.choice->algo.id)));
}

// Note [cache after timing]: a selection that timed candidates reads a block of three times the
// L2 size through the backend's caching allocator, which keeps it cached afterwards; one that
// timed nothing sweeps nothing, nor does one under DNNX_CUDNN_L2_SWEEP=0. Each context runs on a
// stream of its own, hence on a backend instance (allocator, settings) of its own.
TEST(CudnnBatchNorm, SelectionThatTimedSweepsTheL2) {
  DNNX_REQUIRE_GPU();
  int l2 = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), cudaSuccess);
  if (l2 <= 0) GTEST_SKIP() << "the device reports no L2 cache size; nothing is swept";
  const std::size_t sweep = 3 * static_cast<std::size_t>(l2);
  const BatchNormDesc desc = resnet_desc({8, 32, 6, 6}, DType::f32, Layout::channels_first);
  struct Case {
    bool exhaustive;
    bool sweep_off;
    bool swept;
  };
  for (const Case c :
       {Case{false, false, false}, Case{true, false, true}, Case{true, true, false}}) {
    const std::string what = detail::cat(c.exhaustive ? "exhaustive" : "heuristic",
                                         c.sweep_off ? ", DNNX_CUDNN_L2_SWEEP=0" : "");
    if (c.sweep_off) ::setenv("DNNX_CUDNN_L2_SWEEP", "0", 1);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    {
      Context context =
          batch_norm_context_with(BackendKind::cudnn, Direction::bwd_data).with_stream(stream);
      context.tune().policy(OpKind::batch_norm, Direction::bwd_data) =
          c.exhaustive ? AlgoPolicy::exhaustive() : AlgoPolicy::heuristic();
      const auto choice = batch_norm_select(context, desc, Direction::bwd_data);
      ::unsetenv("DNNX_CUDNN_L2_SWEEP");
      EXPECT_EQ(choice->candidates_timed > 0, c.exhaustive) << what;
      auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
      ASSERT_NE(allocator, nullptr);
      const std::size_t mallocs = allocator->device_allocations();
      void* block = allocator->allocate(sweep);
      allocator->deallocate(block, sweep);
      // Served from the cache exactly when the selection swept.
      EXPECT_EQ(allocator->device_allocations(), mallocs + (c.swept ? 0 : 1)) << what;
      context.synchronize();
    }
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
}

// Plans own their descriptors and buffers: repeated calls make no device allocation.
TEST(CudnnBatchNorm, RepeatedCallsAllocateNothing) {
  DNNX_REQUIRE_GPU();
  for (const bool affine : {true, false}) {
    BatchNormDesc desc = resnet_desc({4, 16, 8, 8}, DType::f16, Layout::channels_last);
    desc.affine = affine;
    const BatchNormInputs in = batch_norm_inputs(desc, 23);
    Context context = batch_norm_context_with(BackendKind::cudnn, Direction::fwd);
    auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
    ASSERT_NE(allocator, nullptr);
    auto upload = [&](const Tensor& host) {
      Tensor device =
          Tensor::empty(host.dims(), host.dtype(), host.layout().value(), context.allocator());
      copy(host, device);
      return device;
    };
    const Tensor src = upload(in.src), diff_dst = upload(in.diff_dst);
    Tensor dst = upload(in.src), diff_src = upload(in.src);
    const Tensor scale = upload(in.scale), shift = upload(in.shift);
    Tensor rm = upload(in.running_mean), rv = upload(in.running_var);
    Tensor sm = upload(in.running_mean), sv = upload(in.running_var);
    Tensor ds = upload(in.scale), db = upload(in.shift);
    BatchNormTensors t;
    if (affine) {
      t.scale = &scale;
      t.shift = &shift;
    }
    t.running_mean = &rm;
    t.running_var = &rv;
    t.saved_mean = &sm;
    t.saved_inv_std = &sv;
    auto step = [&] {
      batch_norm_fwd(context, desc, src, dst, t);
      batch_norm_bwd(context, desc, src, diff_dst, t, diff_src, affine ? &ds : nullptr,
                     affine ? &db : nullptr);
    };
    step();
    context.synchronize();
    const std::size_t mallocs = allocator->device_allocations();
    for (int i = 0; i < 5; ++i) step();
    context.synchronize();
    EXPECT_EQ(allocator->device_allocations(), mallocs) << "affine " << affine;
  }
}

TEST(CudnnBatchNorm, HostTensorsAreRejected) {
  DNNX_REQUIRE_GPU();
  const BatchNormDesc desc = resnet_desc({2, 3, 4, 4}, DType::f32, Layout::channels_first);
  const BatchNormInputs in = batch_norm_inputs(desc, 29);
  Context context = batch_norm_context_with(BackendKind::cudnn, Direction::fwd);
  Tensor dst = Tensor::empty(desc.dims, desc.dtype);
  BatchNormTensors t;
  t.scale = &in.scale;
  t.shift = &in.shift;
  try {
    batch_norm_fwd(context, desc, in.src, dst, t);
    FAIL() << "host tensors were accepted by a cudnn context";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("src is on cpu"), std::string::npos) << error.message();
  }
}

}  // namespace
}  // namespace dnnx::test
