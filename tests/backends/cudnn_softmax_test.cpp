// The cudnn backend's softmax on a GPU (label "gpu"): every candidate (dnnx's kernel and each
// legacy cuDNN algorithm) against the reference backend for every case of the softmax table in
// f32, f16 and bf16 (where representable), forward and backward, large-logit rows and the
// reported large-logit case included; bitwise determinism; in place; the FAST candidate on
// moderate inputs only and never as the heuristic choice; the LOG forward listed unsupported;
// graph replay; no per-call cudaMalloc.
// Every test skips with the reason when no usable GPU is present (CI has none).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "backends/cudnn/allocator.hpp"
#include "ops/softmax_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>

namespace dnnx {
namespace {

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

// Runs on the GPU into a NaN-poisoned device output; returns the output on the host.
test::SoftmaxRun run_gpu(Context& context, const SoftmaxDesc& desc, Direction direction,
                         const Tensor& first, const Tensor* diff_dst = nullptr) {
  const Tensor a = to_device(first, context);
  Tensor out = to_device(test::nan_tensor(desc.dims, desc.dtype, desc.layout), context);
  test::SoftmaxRun run;
  if (direction == Direction::fwd) {
    run.choice = softmax_fwd(context, desc, a, out);
  } else {
    const Tensor b = to_device(*diff_dst, context);
    run.choice = softmax_bwd(context, desc, a, b, out);
  }
  run.output = to_host(out);
  return run;
}

// Note [expected unsupported cudnn softmax]: cuDNN's legacy softmax may reject bf16 (before
// compute capability 8.0, or in some releases); its LOG forward is never offered (Note [cuDNN
// log-softmax] in src/backends/cudnn/softmax.cpp); dnnx's kernel runs every desc.
bool expected_unsupported(const SoftmaxDesc& desc, Direction direction, const AlgoInfo& algo) {
  if (algo.id == "cudnn:legacy:softmax:log" && direction == Direction::fwd)
    return algo.reason.find("max + log(sum) as one rounded value") != std::string::npos;
  return algo.id.rfind("cudnn:legacy:", 0) == 0 && desc.dtype == DType::bf16 &&
         algo.reason.find("cuDNN rejects it") != std::string::npos;
}

struct Param {
  test::SoftmaxCase c;
  DType dtype;
};

void PrintTo(const Param& p, std::ostream* out) { *out << p.c.name << " " << to_string(p.dtype); }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const test::SoftmaxCase& c : test::softmax_cases()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
      if (test::representable(c, dtype)) out.push_back({c, dtype});
  }
  return out;
}

class CudnnSoftmaxParity : public ::testing::TestWithParam<Param> {
 protected:
  void check(Direction direction) {
    DNNX_REQUIRE_GPU();
    const test::SoftmaxCase& c = GetParam().c;
    const SoftmaxDesc desc = test::with_dtype(c.desc, GetParam().dtype);
    const Tensor src = test::softmax_src(c, desc);
    Context reference =
        test::softmax_context_for(BackendKind::reference, Direction::fwd, AlgoPolicy::heuristic());
    const Tensor dst = test::run_softmax(reference, desc, Direction::fwd, src).output;
    const Tensor diff_dst = test::softmax_diff_dst(c, desc);
    const Tensor expected =
        direction == Direction::fwd
            ? dst
            : test::run_softmax(reference, desc, direction, dst, &diff_dst).output;
    const std::vector<float> expected_values = expected.to_f32();
    const std::vector<float> dst_values = dst.to_f32();
    const std::vector<float> diff_dst_values = diff_dst.to_f32();
    const Tensor& input = direction == Direction::fwd ? src : dst;
    const Tensor* diff = direction == Direction::fwd ? nullptr : &diff_dst;

    Context lister(BackendKind::cudnn);
    int ran = 0;
    for (const AlgoInfo& algo : softmax_list(lister, desc, direction)) {
      const std::string where = test::softmax_context(desc, direction, algo.id);
      if (!algo.supported) {
        EXPECT_TRUE(expected_unsupported(desc, direction, algo)) << algo.reason << "\n  " << where;
        continue;
      }
      // CUDNN_SOFTMAX_FAST overflows on large inputs by design: tested on moderate ones.
      if (algo.has_note("overflow_risk") && c.largest() > 10) continue;
      Context context =
          test::softmax_context_for(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
      const test::SoftmaxRun first = run_gpu(context, desc, direction, input, diff);
      ASSERT_EQ(first.choice->algo.id, algo.id) << where;
      ASSERT_TRUE(test::all_finite(first.output, "output", where));
      const test::SoftmaxBound bound =
          direction == Direction::fwd
              ? test::softmax_forward_bound(c, desc, expected_values, algo)
              : test::softmax_backward_bound(desc, dst_values, diff_dst_values);
      EXPECT_TRUE(test::close_within_scale(first.output.to_f32(), expected_values, bound.scale,
                                           desc.dims, bound.tolerance, "output", where));
      if (algo.deterministic) {
        const test::SoftmaxRun second = run_gpu(context, desc, direction, input, diff);
        EXPECT_TRUE(test::bitwise_equal(first.output, second.output, "output of two runs", where));
      }
      ++ran;
    }
    EXPECT_GT(ran, 0) << desc.repro(direction);
  }
};

TEST_P(CudnnSoftmaxParity, Forward) { check(Direction::fwd); }
TEST_P(CudnnSoftmaxParity, Backward) { check(Direction::bwd_data); }

INSTANTIATE_TEST_SUITE_P(Table, CudnnSoftmaxParity, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string name =
                               info.param.c.name + "_" + std::string(to_string(info.param.dtype));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(CudnnSoftmax, CandidatesAndHeuristic) {
  DNNX_REQUIRE_GPU();
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  for (const bool log : {false, true}) {
    SoftmaxDesc desc;
    desc.dims = Dims{64, 1000};
    desc.log = log;
    const auto algos = softmax_list(context, desc, Direction::fwd);
    ASSERT_FALSE(algos.empty());
    EXPECT_EQ(algos.front().id, "cudnn:kernel:softmax");
    std::vector<std::string> ids;
    for (const AlgoInfo& algo : algos) {
      ids.push_back(algo.id);
      EXPECT_TRUE(algo.deterministic) << algo.id;
      EXPECT_EQ(algo.workspace_bytes, 0u) << algo.id;
    }
    if (log) {
      // Listed, with the reason it is not offered (Note [cuDNN log-softmax]).
      const auto legacy = std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& algo) {
        return algo.id == "cudnn:legacy:softmax:log";
      });
      ASSERT_NE(legacy, algos.end());
      EXPECT_FALSE(legacy->supported);
      EXPECT_NE(legacy->reason.find("CUDNN_SOFTMAX_LOG forward"), std::string::npos)
          << legacy->reason;
      const auto backward = softmax_list(context, desc, Direction::bwd_data);
      EXPECT_TRUE(std::any_of(backward.begin(), backward.end(), [](const AlgoInfo& algo) {
        return algo.id == "cudnn:legacy:softmax:log" && algo.supported;
      })) << "the LOG backward stays a candidate";
    } else {
      EXPECT_NE(std::find(ids.begin(), ids.end(), "cudnn:legacy:softmax:accurate"), ids.end());
      // FAST is listed, last, and the heuristic never takes it.
      EXPECT_EQ(ids.back(), "cudnn:legacy:softmax:fast");
      EXPECT_TRUE(algos.back().has_note("overflow_risk"));
    }
    EXPECT_NE(softmax_select(context, desc, Direction::fwd)->algo.id, "cudnn:legacy:softmax:fast");
  }
}

// The reported case of Note [large-logit rows] (tests/ops/softmax_cases.cpp) on every supported
// candidate, through each kernel shape (column: 4 values; warp: 12; block: 1028), within
// large_logit_ulps() of max(1, |y|).
TEST(CudnnSoftmax, LargeLogitReportedCase) {
  DNNX_REQUIRE_GPU();
  for (const test::LargeLogitExample& example : test::large_logit_examples()) {
    const SoftmaxDesc& desc = example.desc;
    std::vector<float> scale(example.expected.size());
    for (std::size_t k = 0; k < scale.size(); ++k)
      scale[k] = std::max(1.0f, std::abs(example.expected[k]));
    Context lister(BackendKind::cudnn);
    for (const AlgoInfo& algo : softmax_list(lister, desc, Direction::fwd)) {
      if (!algo.supported) continue;
      const std::string where = test::softmax_context(desc, Direction::fwd, algo.id) + " logits " +
                                std::to_string(example.base) + " + (c mod 4)";
      Context context =
          test::softmax_context_for(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(algo.id));
      const test::SoftmaxRun run = run_gpu(context, desc, Direction::fwd, example.src);
      EXPECT_TRUE(test::close_within_scale(run.output.to_f32(), example.expected, scale, desc.dims,
                                           {test::large_logit_ulps(algo) * 0x1p-23, 0}, "output",
                                           where));
    }
  }
}

// Accurate candidates stay finite on logits of magnitude 1e4; FAST does not (which is why it is
// never the heuristic choice).
TEST(CudnnSoftmax, FastOverflowsAccurateDoesNot) {
  DNNX_REQUIRE_GPU();
  SoftmaxDesc desc;
  desc.dims = Dims{2, 8};
  const Tensor src =
      test::tensor_from(desc.dims, desc.dtype, desc.layout, std::vector<float>(16, 1e4f));
  for (const char* id : {"cudnn:kernel:softmax", "cudnn:legacy:softmax:accurate"}) {
    Context context =
        test::softmax_context_for(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(id));
    const auto run = run_gpu(context, desc, Direction::fwd, src);
    for (float v : run.output.to_f32()) EXPECT_FLOAT_EQ(v, 0.125f) << id;
  }
  Context fast = test::softmax_context_for(BackendKind::cudnn, Direction::fwd,
                                           AlgoPolicy::fixed("cudnn:legacy:softmax:fast"));
  const auto run = run_gpu(fast, desc, Direction::fwd, src);
  const auto values = run.output.to_f32();
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }))
      << "CUDNN_SOFTMAX_FAST stayed finite on 1e4 inputs; its note overstates the risk";
}

TEST(CudnnSoftmax, InPlaceEveryCandidate) {
  DNNX_REQUIRE_GPU();
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    SoftmaxDesc desc;
    desc.dims = Dims{3, 5, 4, 7};
    desc.layout = layout;
    desc.log = layout == Layout::channels_last;
    const Tensor src = test::random_tensor(desc.dims, desc.dtype, desc.layout, 17);
    Context lister(BackendKind::cudnn);
    for (const AlgoInfo& algo : softmax_list(lister, desc, Direction::fwd)) {
      if (!algo.supported) continue;
      Context context =
          test::softmax_context_for(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(algo.id));
      const Tensor out_of_place = run_gpu(context, desc, Direction::fwd, src).output;
      // Twice in place on fresh data: the first call primes, the second may replay a graph.
      for (int call = 0; call < 2; ++call) {
        Tensor data = to_device(src, context);
        softmax_fwd(context, desc, data, data);
        EXPECT_TRUE(test::bitwise_equal(to_host(data), out_of_place, "in-place dst",
                                        test::softmax_context(desc, Direction::fwd, algo.id)))
            << "call " << call;
      }
    }
  }
}

// Repeated calls on the same buffers (Note [graph replay] for the legacy plans) give the same
// bits and allocate no device memory.
TEST(CudnnSoftmax, RepeatedCallsReplayWithoutAllocating) {
  DNNX_REQUIRE_GPU();
  SoftmaxDesc desc;
  desc.dims = Dims{64, 1000};
  desc.dtype = DType::f16;
  const Tensor host = test::random_tensor(desc.dims, desc.dtype, desc.layout, 5);
  Context lister(BackendKind::cudnn);
  for (const AlgoInfo& algo : softmax_list(lister, desc, Direction::fwd)) {
    Context context =
        test::softmax_context_for(BackendKind::cudnn, Direction::fwd, AlgoPolicy::fixed(algo.id));
    const Tensor src = to_device(host, context);
    Tensor dst = Tensor::empty(desc.dims, desc.dtype, desc.layout, context.allocator());
    softmax_fwd(context, desc, src, dst);
    const Tensor first = to_host(dst);
    auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
    ASSERT_NE(allocator, nullptr);
    const std::size_t mallocs = allocator->device_allocations();
    for (int i = 0; i < 5; ++i) softmax_fwd(context, desc, src, dst);
    EXPECT_EQ(allocator->device_allocations(), mallocs) << algo.id;
    EXPECT_TRUE(test::bitwise_equal(to_host(dst), first, "replayed dst", algo.id));
  }
}

// The benchmark shapes: every candidate's time, for the record (no assertion on speed here;
// bench/compare_layers.py measures against PyTorch).
TEST(CudnnSoftmax, ProfileBenchmarkShapes) {
  DNNX_REQUIRE_GPU();
  for (const DType dtype : {DType::f32, DType::f16}) {
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      SoftmaxDesc desc;
      desc.dims = Dims{64, 1000};
      desc.dtype = dtype;
      Context context =
          test::softmax_context_for(BackendKind::cudnn, direction, AlgoPolicy::heuristic());
      const ProfileResult result = softmax_profile(context, desc, direction);
      std::cout << result.table();
      ASSERT_FALSE(result.rows.empty());
      EXPECT_EQ(result.rows.front().status, CandidateStatus::ok);
    }
  }
}

}  // namespace
}  // namespace dnnx
