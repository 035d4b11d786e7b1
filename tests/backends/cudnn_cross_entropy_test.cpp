// The cudnn backend's cross-entropy on a GPU (label "gpu"): every candidate (the fused kernel,
// cuDNN's softmax + gradient kernel) against the reference backend for every case of the xent
// table in f32, f16 and bf16 (where representable, large-logit rows included), forward and
// backward; bitwise determinism; the LOG + NLL forward listed unsupported; the deferred label
// check (Note [deferred label check] in src/backends/cudnn/cross_entropy.cpp); no per-call
// cudaMalloc.
// Every test skips with the reason when no usable GPU is present (CI has none).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "backends/cudnn/allocator.hpp"
#include "ops/cross_entropy_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <regex>

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

struct DeviceInputs {
  Tensor logits, labels, weights, diff_loss;
  const Tensor* weights_or_null() const { return weights.is_null() ? nullptr : &weights; }
};

DeviceInputs upload(const test::XentInputs& host, Context& context) {
  DeviceInputs device;
  device.logits = to_device(host.logits, context);
  device.labels = to_device(host.labels, context);
  if (!host.weights.is_null()) device.weights = to_device(host.weights, context);
  device.diff_loss = to_device(host.diff_loss, context);
  return device;
}

// Runs on the GPU into a NaN-poisoned device output; returns the output on the host.
test::XentRun run_gpu(Context& context, const CrossEntropyDesc& desc, Direction direction,
                      const DeviceInputs& in) {
  test::XentRun run;
  if (direction == Direction::fwd) {
    Tensor loss =
        to_device(test::nan_tensor(desc.loss_dims(), desc.dtype, Layout::channels_first), context);
    run.choice = cross_entropy_fwd(context, desc, in.logits, in.labels, in.weights_or_null(), loss);
    run.output = to_host(loss);
  } else {
    Tensor diff = to_device(test::nan_tensor(desc.dims, desc.dtype, desc.layout), context);
    run.choice = cross_entropy_bwd(context, desc, in.logits, in.labels, in.weights_or_null(),
                                   in.diff_loss, diff);
    run.output = to_host(diff);
  }
  return run;
}

// Note [expected unsupported cudnn xent]: cuDNN's legacy softmax may reject bf16 (before compute
// capability 8.0, or in some releases); the LOG + NLL forward is never offered (Note [cuDNN
// log-softmax] in src/backends/cudnn/softmax.cpp); the fused kernel runs every desc.
bool expected_unsupported(const CrossEntropyDesc& desc, const AlgoInfo& algo) {
  if (algo.id == "cudnn:legacy:log+nll")
    return algo.reason.find("max + log(sum) as one rounded value") != std::string::npos;
  return algo.id.rfind("cudnn:legacy:", 0) == 0 && desc.dtype == DType::bf16 &&
         algo.reason.find("cuDNN's softmax rejects") != std::string::npos;
}

struct Param {
  test::XentCase c;
  DType dtype;
};

void PrintTo(const Param& p, std::ostream* out) { *out << p.c.name << " " << to_string(p.dtype); }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const test::XentCase& c : test::xent_cases()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
      if (test::representable(c, dtype)) out.push_back({c, dtype});
  }
  return out;
}

class CudnnXentParity : public ::testing::TestWithParam<Param> {
 protected:
  void check(Direction direction) {
    DNNX_REQUIRE_GPU();
    const test::XentCase& c = GetParam().c;
    const CrossEntropyDesc desc = test::with_dtype(c.desc, GetParam().dtype);
    const test::XentInputs host = test::xent_inputs(c, desc);
    Context reference =
        test::xent_context_for(BackendKind::reference, direction, AlgoPolicy::heuristic());
    const std::vector<float> expected =
        test::run_xent(reference, desc, direction, host).output.to_f32();
    const std::vector<float> backward_scale =
        direction == Direction::fwd ? std::vector<float>() : test::xent_backward_scale(desc, host);
    const Dims dims = direction == Direction::fwd ? desc.loss_dims() : desc.dims;

    Context lister(BackendKind::cudnn);
    int ran = 0;
    for (const AlgoInfo& algo : cross_entropy_list(lister, desc, direction)) {
      const std::string where = test::xent_context(desc, direction, algo.id);
      if (!algo.supported) {
        EXPECT_TRUE(expected_unsupported(desc, algo)) << algo.reason << "\n  " << where;
        continue;
      }
      Context context =
          test::xent_context_for(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
      const DeviceInputs in = upload(host, context);
      const test::XentRun first = run_gpu(context, desc, direction, in);
      ASSERT_EQ(first.choice->algo.id, algo.id) << where;
      const test::XentBound bound =
          direction == Direction::fwd
              ? test::xent_forward_bound(c, desc, host, algo)
              : test::XentBound{backward_scale, test::xent_tolerance(desc.dtype)};
      EXPECT_TRUE(
          test::xent_close(first.output, expected, bound.scale, dims, bound.tolerance, where));
      ASSERT_TRUE(algo.deterministic) << where;
      const test::XentRun second = run_gpu(context, desc, direction, in);
      EXPECT_TRUE(test::bitwise_equal(first.output, second.output, "output of two runs", where));
      ++ran;
    }
    EXPECT_GT(ran, 0) << desc.repro(direction);
  }
};

TEST_P(CudnnXentParity, Forward) { check(Direction::fwd); }
TEST_P(CudnnXentParity, Backward) { check(Direction::bwd_data); }

INSTANTIATE_TEST_SUITE_P(Table, CudnnXentParity, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string name =
                               info.param.c.name + "_" + std::string(to_string(info.param.dtype));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(CudnnXent, Candidates) {
  DNNX_REQUIRE_GPU();
  Context context(BackendKind::cudnn);
  CrossEntropyDesc desc;
  desc.dims = Dims{64, 1000};
  const auto fwd = cross_entropy_list(context, desc, Direction::fwd);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].id, "cudnn:kernel:fused");
  EXPECT_EQ(fwd[1].id, "cudnn:legacy:log+nll");
  // Listed with the reason it is not offered (Note [cuDNN log-softmax]).
  EXPECT_FALSE(fwd[1].supported);
  EXPECT_NE(fwd[1].reason.find("CUDNN_SOFTMAX_LOG forward"), std::string::npos) << fwd[1].reason;
  const auto bwd = cross_entropy_list(context, desc, Direction::bwd_data);
  ASSERT_EQ(bwd.size(), 2u);
  EXPECT_EQ(bwd[1].id, "cudnn:legacy:accurate+nll");
}

// Note [deferred label check]: a bad label poisons its position with NaN and is reported, with
// its position and value, by the next call of the same plan once the GPU has finished the bad
// call; the report is then cleared.
TEST(CudnnXent, DeferredLabelCheck) {
  DNNX_REQUIRE_GPU();
  for (const Reduction reduction : {Reduction::none, Reduction::mean}) {
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      CrossEntropyDesc desc;
      desc.dims = Dims{2, 5, 3, 1};
      desc.reduction = reduction;
      desc.label_dtype = DType::i32;
      Context lister(BackendKind::cudnn);
      for (const AlgoInfo& algo : cross_entropy_list(lister, desc, direction)) {
        if (!algo.supported) continue;
        SCOPED_TRACE(test::xent_context(desc, direction, algo.id));
        Context context =
            test::xent_context_for(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
        test::XentInputs host;
        host.logits = test::random_tensor(desc.dims, desc.dtype, desc.layout, 3);
        host.diff_loss =
            test::random_tensor(desc.loss_dims(), desc.dtype, Layout::channels_first, 4);
        host.labels =
            test::labels_tensor(desc.labels_dims(), desc.label_dtype, {0, 1, 2, 4, 7, -3});
        const DeviceInputs bad = upload(host, context);
        host.labels = test::labels_tensor(desc.labels_dims(), desc.label_dtype, {0, 1, 2, 4, 3, 2});
        const DeviceInputs good = upload(host, context);

        const test::XentRun poisoned = run_gpu(context, desc, direction, bad);  // synchronizes
        const auto values = poisoned.output.to_f32();
        if (direction == Direction::fwd && reduction == Reduction::none) {
          EXPECT_TRUE(std::isnan(values[4])) << "the loss of the bad position is NaN";
          EXPECT_TRUE(std::isfinite(values[0]));
        } else if (direction == Direction::fwd) {
          EXPECT_TRUE(std::isnan(values[0])) << "a mean over a bad position is NaN";
        } else {
          // diff_logits of position 4 (n=1, h=1): classes at (1, c, 1, 0) in nchw.
          EXPECT_TRUE(std::isnan(values[static_cast<std::size_t>((1 * 5 + 0) * 3 + 1)]));
        }
        try {
          run_gpu(context, desc, direction, good);
          ADD_FAILURE() << "the bad label of the previous call was not reported";
        } catch (const Error& error) {
          EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
          EXPECT_TRUE(std::regex_search(
              error.message(), std::regex("labels\\[n=1, h=1, w=0\\] \\(position 4\\) is 7")))
              << error.message();
          EXPECT_NE(error.message().find("earlier call"), std::string::npos) << error.message();
        }
        // Reported once; good labels run clean afterwards.
        EXPECT_NO_THROW(run_gpu(context, desc, direction, good));
        const auto clean = run_gpu(context, desc, direction, good).output.to_f32();
        for (float v : clean) EXPECT_TRUE(std::isfinite(v));
      }
    }
  }
}

TEST(CudnnXent, RepeatedCallsDoNotAllocate) {
  DNNX_REQUIRE_GPU();
  test::XentCase c;
  c.name = "gpu_repeat";
  c.desc.dims = Dims{64, 1000};
  c.desc.dtype = DType::f16;
  const test::XentInputs host = test::xent_inputs(c, c.desc);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    Context lister(BackendKind::cudnn);
    for (const AlgoInfo& algo : cross_entropy_list(lister, c.desc, direction)) {
      if (!algo.supported) continue;
      Context context =
          test::xent_context_for(BackendKind::cudnn, direction, AlgoPolicy::fixed(algo.id));
      const DeviceInputs in = upload(host, context);
      Tensor out =
          direction == Direction::fwd
              ? Tensor::empty(c.desc.loss_dims(), c.desc.dtype, Layout::channels_first,
                              context.allocator())
              : Tensor::empty(c.desc.dims, c.desc.dtype, c.desc.layout, context.allocator());
      auto call = [&] {
        if (direction == Direction::fwd) {
          cross_entropy_fwd(context, c.desc, in.logits, in.labels, nullptr, out);
        } else {
          cross_entropy_bwd(context, c.desc, in.logits, in.labels, nullptr, in.diff_loss, out);
        }
      };
      call();
      const Tensor first = to_host(out);
      auto* allocator = dynamic_cast<cudnn::CachingAllocator*>(&context.allocator());
      ASSERT_NE(allocator, nullptr);
      const std::size_t mallocs = allocator->device_allocations();
      for (int i = 0; i < 5; ++i) call();
      EXPECT_EQ(allocator->device_allocations(), mallocs) << algo.id;
      EXPECT_TRUE(test::bitwise_equal(to_host(out), first, "repeated output", algo.id));
    }
  }
}

TEST(CudnnXent, ProfileBenchmarkShapes) {
  DNNX_REQUIRE_GPU();
  for (const DType dtype : {DType::f32, DType::f16}) {
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      CrossEntropyDesc desc;
      desc.dims = Dims{64, 1000};
      desc.dtype = dtype;
      Context context =
          test::xent_context_for(BackendKind::cudnn, direction, AlgoPolicy::heuristic());
      // Time every candidate fully: a slower one is otherwise abandoned after one run.
      context.tune().abandon_factor = 1e9;
      const ProfileResult result = cross_entropy_profile(context, desc, direction);
      std::cout << result.table();
      ASSERT_EQ(result.rows.size(), 2u);
      for (const ProfileRow& row : result.rows) {
        // Note [expected unsupported cudnn xent]: the LOG + NLL forward is listed, not run.
        const CandidateStatus expected = row.algo.id == "cudnn:legacy:log+nll"
                                             ? CandidateStatus::unsupported
                                             : CandidateStatus::ok;
        EXPECT_EQ(row.status, expected) << row.algo.id << ": " << row.detail;
      }
    }
  }
}

}  // namespace
}  // namespace dnnx
