// reduce, argmax and accuracy on the cudnn backend (label "gpu"): the listings and their support
// rules (Note [cudnn reduce candidates], Note [cudnn argmax candidates]), every supported
// candidate against the reference backend on the whole case tables, forward and backward, bitwise
// repeatability, long groups (the kernel's chunked reductions), accumulating an accuracy count
// over calls, and the deferred bad-label report. Every test skips with the reason when no usable
// GPU is present.

#include <dnnx/dnnx.hpp>

#include "ops/reduce_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

const AlgoInfo* find(const std::vector<AlgoInfo>& algos, const std::string& id) {
  for (const AlgoInfo& algo : algos)
    if (algo.id == id) return &algo;
  return nullptr;
}

TEST(CudnnReduce, ListsTheKernelAndReduceTensor) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_test_context();
  const ReduceDesc sum = ReduceDesc::over(ReduceKind::sum, Dims{8, 16, 5, 5}, {2, 3});
  const auto fwd = reduce_list(context, sum, Direction::fwd);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd.front().id, "cudnn:kernel:reduce");
  ASSERT_NE(find(fwd, "cudnn:legacy:reduce_tensor"), nullptr);
  EXPECT_TRUE(find(fwd, "cudnn:legacy:reduce_tensor")->supported)
      << find(fwd, "cudnn:legacy:reduce_tensor")->reason;
  const auto bwd = reduce_list(context, sum, Direction::bwd_data);
  ASSERT_EQ(bwd.size(), 1u);
  EXPECT_EQ(bwd.front().id, "cudnn:kernel:reduce");

  ReduceDesc bf16 = sum;
  bf16.dtype = DType::bf16;
  const AlgoInfo* legacy =
      find(reduce_list(context, bf16, Direction::fwd), "cudnn:legacy:reduce_tensor");
  ASSERT_NE(legacy, nullptr);
  EXPECT_FALSE(legacy->supported);
  EXPECT_NE(legacy->reason.find("bf16"), std::string::npos) << legacy->reason;
  const ReduceDesc none = ReduceDesc::over(ReduceKind::max, Dims{4, 5}, {});
  legacy = find(reduce_list(context, none, Direction::fwd), "cudnn:legacy:reduce_tensor");
  ASSERT_NE(legacy, nullptr);
  EXPECT_FALSE(legacy->supported);
  EXPECT_NE(legacy->reason.find("no axis to reduce"), std::string::npos) << legacy->reason;
}

// Every supported candidate of `desc` in `direction` against the reference, twice (bitwise).
void check_reduce(const ReduceDesc& desc, const std::string& name, Direction direction) {
  Context listing = gpu_test_context();
  const ReduceInputs host = reduce_inputs(desc, name);
  const Tensor expected = direction == Direction::fwd ? reference_reduce_fwd(desc, host.src)
                                                      : reference_reduce_bwd(desc, host);
  Context context = gpu_test_context();
  const Tensor src = device_copy(host.src, context);
  const Tensor dst_saved = device_copy(host.dst, context);
  const Tensor diff_dst = device_copy(host.diff_dst, context);
  for (const AlgoInfo& algo : reduce_list(listing, desc, direction)) {
    if (!algo.supported) continue;
    const std::string where = op_case_context("reduce", desc, direction, algo.id);
    Context fixed = gpu_test_context();
    fixed.tune().policy(OpKind::reduce, direction) = AlgoPolicy::fixed(algo.id);
    Tensor first;
    for (int run = 0; run < 2; ++run) {
      const Dims& out_dims = direction == Direction::fwd ? desc.dst_dims : desc.src_dims;
      Tensor out = device_copy(nan_tensor(out_dims, desc.dtype, desc.layout), context);
      if (direction == Direction::fwd) {
        reduce_fwd(fixed, desc, src, out);
      } else {
        reduce_bwd(fixed, desc, src, dst_saved, diff_dst, out);
      }
      Tensor result = host_copy_of(out);
      if (run == 0) {
        EXPECT_TRUE(reduce_close(desc, direction, result, expected, host, where));
        first = std::move(result);
      } else {
        EXPECT_TRUE(bitwise_equal(first, result, "output", where));
      }
    }
  }
}

class CudnnReduceParity : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(CudnnReduceParity, EverySupportedCandidate) {
  DNNX_REQUIRE_GPU();
  check_reduce(GetParam().desc, GetParam().name, Direction::fwd);
  check_reduce(GetParam().desc, GetParam().name, Direction::bwd_data);
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnReduceParity, ::testing::ValuesIn(reduce_cases()),
                         [](const auto& info) { return info.param.name; });

// Groups long enough to be split into chunks (Note [reduce kernels]), in both layouts.
TEST(CudnnReduce, LongGroups) {
  DNNX_REQUIRE_GPU();
  const struct {
    const char* name;
    ReduceDesc desc;
  } cases[] = {
      {"all_1m", ReduceDesc::all(ReduceKind::sum, Dims{1 << 20})},
      {"batch_nhwc", ReduceDesc::over(ReduceKind::mean, Dims{256, 64, 8, 8}, {0, 2, 3}, DType::f16,
                                      Layout::channels_last)},
      {"norm2_all", ReduceDesc::all(ReduceKind::norm2, Dims{64, 3, 32, 32})},
      {"max_rows", ReduceDesc::over(ReduceKind::max, Dims{4, 300000}, {1})},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    check_reduce(c.desc, c.name, Direction::fwd);
    check_reduce(c.desc, c.name, Direction::bwd_data);
  }
}

TEST(CudnnArgmax, MatchesTheReferenceOnEveryCase) {
  DNNX_REQUIRE_GPU();
  Context reference(BackendKind::reference);
  Context context = gpu_test_context();
  const std::vector<ArgmaxCase> cases = argmax_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ArgmaxDesc& desc = cases[i].desc;
    const std::string where = op_case_context("argmax", desc, Direction::fwd, "cudnn");
    const Tensor src = i % 2 == 0 ? tied_tensor(desc.src_dims, desc.dtype, desc.layout, i)
                                  : random_tensor(desc.src_dims, desc.dtype, desc.layout, i);
    Tensor expected = Tensor::empty(desc.dst_dims(), desc.index_dtype, desc.layout);
    argmax_fwd(reference, desc, src, expected);
    Tensor out = Tensor::empty(desc.dst_dims(), desc.index_dtype, desc.layout, context.allocator());
    const auto choice = argmax_fwd(context, desc, device_copy(src, context), out);
    EXPECT_EQ(choice->algo.id, "cudnn:kernel:argmax");
    EXPECT_TRUE(bitwise_equal(host_copy_of(out), expected, "indices", where));
  }
  const AlgoInfo* legacy = find(argmax_list(context, cases[0].desc, Direction::fwd),
                                "cudnn:legacy:reduce_tensor_indices");
  ASSERT_NE(legacy, nullptr);
  EXPECT_FALSE(legacy->supported);
}

TEST(CudnnAccuracy, MatchesTheReferenceAndAccumulates) {
  DNNX_REQUIRE_GPU();
  Context reference(BackendKind::reference);
  Context context = gpu_test_context();
  for (const AccuracyCase& c : accuracy_cases()) {
    const AccuracyDesc& desc = c.desc;
    SCOPED_TRACE(op_case_context("accuracy", desc, Direction::fwd, "cudnn"));
    const Tensor logits = tied_tensor(desc.dims, desc.dtype, desc.layout, seed_from(c.name));
    const Tensor labels = random_label_tensor(desc.labels_dims(), desc.label_dtype, desc.classes(),
                                              desc.ignore_index, seed_from(c.name + "labels"));
    Tensor expected = count_tensor(desc.count_dtype, 5);
    accuracy_fwd(reference, desc, logits, labels, expected);
    const Tensor device_logits = device_copy(logits, context);
    const Tensor device_labels = device_copy(labels, context);
    Tensor count = device_copy(count_tensor(desc.count_dtype, 5), context);
    accuracy_fwd(context, desc, device_logits, device_labels, count);
    EXPECT_EQ(count_value(host_copy_of(count)), count_value(expected));
    if (desc.accumulate) {
      // Two more batches: the count stays on the device, nothing synchronizes in between.
      accuracy_fwd(context, desc, device_logits, device_labels, count);
      accuracy_fwd(context, desc, device_logits, device_labels, count);
      EXPECT_EQ(count_value(host_copy_of(count)), 3 * count_value(expected) - 2 * 5);
    }
  }
}

TEST(CudnnAccuracy, BadLabelIsReportedByTheNextCall) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_test_context();
  AccuracyDesc desc;
  desc.dims = Dims{8, 4};
  Tensor labels = random_label_tensor(desc.labels_dims(), DType::i64, 4, -100, 3);
  const std::int64_t bad = 9;
  std::memcpy(static_cast<std::int64_t*>(labels.data()) + 5, &bad, sizeof bad);
  const Tensor logits = device_copy(random_tensor(desc.dims, desc.dtype, desc.layout, 4), context);
  const Tensor device_labels = device_copy(labels, context);
  Tensor count = device_copy(count_tensor(DType::i64, 0), context);
  accuracy_fwd(context, desc, logits, device_labels, count);
  context.synchronize();
  try {
    accuracy_fwd(context, desc, logits, device_labels, count);
    FAIL() << "the bad label of the first call was not reported";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
    EXPECT_NE(error.message().find("labels[n=5] (position 5) is 9"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
