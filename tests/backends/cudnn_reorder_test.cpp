// Reorder on the cudnn backend (label "gpu"): the candidate list and its support rules, every
// supported candidate against the reference backend on the whole reorder table (through the
// parity runner: NaN-filled outputs, beta = 0 never reading dst, bitwise determinism), larger
// transposes in both directions and dtypes, stream order with the ops around it, and the nn
// paths that now reorder on the device (Flatten of a channels_last input, convert). Every test
// skips with the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/reorder.hpp>

#include "ops/reorder_cases.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dnnx::test {
namespace {

const AlgoInfo* find(const std::vector<AlgoInfo>& algos, const std::string& id) {
  for (const AlgoInfo& algo : algos)
    if (algo.id == id) return &algo;
  return nullptr;
}

ReorderDesc desc_of(const Dims& dims, DType src_dtype, Layout src_layout, DType dst_dtype,
                    Layout dst_layout, float alpha = 1.0f, float beta = 0.0f) {
  ReorderDesc desc;
  desc.dims = dims;
  desc.src_dtype = src_dtype;
  desc.dst_dtype = dst_dtype;
  desc.src_layout = src_layout;
  desc.dst_layout = dst_layout;
  desc.alpha = alpha;
  desc.beta = beta;
  return desc;
}

TEST(CudnnReorder, ListsTheKernelThenCudnnTransformTensor) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_test_context();
  const ReorderDesc layout_change = desc_of(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_first,
                                            DType::f32, Layout::channels_last);
  const auto algos = reorder_list(context, layout_change, Direction::fwd);
  ASSERT_EQ(algos.size(), 2u);
  EXPECT_EQ(algos[0].id, "cudnn:kernel:reorder");
  EXPECT_TRUE(algos[0].supported);
  EXPECT_TRUE(algos[0].deterministic);
  const AlgoInfo* transform = find(algos, "cudnn:legacy:transform_tensor");
  ASSERT_NE(transform, nullptr);
  EXPECT_TRUE(transform->supported) << transform->reason;

  const ReorderDesc conversion = desc_of(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_first,
                                         DType::bf16, Layout::channels_last);
  const auto converting = reorder_list(context, conversion, Direction::fwd);
  EXPECT_EQ(converting[0].id, "cudnn:kernel:reorder");
  EXPECT_TRUE(converting[0].supported);
  transform = find(converting, "cudnn:legacy:transform_tensor");
  ASSERT_NE(transform, nullptr);
  EXPECT_FALSE(transform->supported);
  EXPECT_NE(transform->reason.find("one data type"), std::string::npos) << transform->reason;
}

class CudnnReorderParity : public ::testing::TestWithParam<ReorderShape> {};

TEST_P(CudnnReorderParity, EveryCandidateEveryPair) {
  DNNX_REQUIRE_GPU();
  for (const ReorderCase& c : GetParam().cases) {
    SCOPED_TRACE(c.name);
    check_parity(ReorderParityCase(c), BackendKind::cudnn, Direction::fwd);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnReorderParity, ::testing::ValuesIn(reorder_shapes()),
                         [](const auto& info) { return info.param.name; });

// Larger tensors than the table's: many tiles per image, a batch, both directions of the
// transpose, a conversion on the way; every candidate against the reference.
TEST(CudnnReorder, LargeTransposesMatchTheReference) {
  DNNX_REQUIRE_GPU();
  const std::vector<ReorderCase> cases = {
      {"nchw_to_nhwc_f32", desc_of(Dims{8, 96, 28, 29}, DType::f32, Layout::channels_first,
                                   DType::f32, Layout::channels_last)},
      {"nhwc_to_nchw_f16_to_f32", desc_of(Dims{4, 130, 17, 15}, DType::f16, Layout::channels_last,
                                          DType::f32, Layout::channels_first)},
      {"ncdhw_to_ndhwc_bf16_beta",
       desc_of(Dims{2, 33, 5, 6, 7}, DType::bf16, Layout::channels_first, DType::bf16,
               Layout::channels_last, 0.5f, 1.0f)},
      {"same_order_f32_to_f16", desc_of(Dims{3, 1, 257, 129}, DType::f32, Layout::channels_first,
                                        DType::f16, Layout::channels_last)},
  };
  for (const ReorderCase& c : cases) {
    SCOPED_TRACE(c.name);
    check_parity(ReorderParityCase(c), BackendKind::cudnn, Direction::fwd);
  }
}

// A reorder queued between other ops on the context's stream sees the fill before it and is
// seen by the copy after it, with no host wait of its own.
TEST(CudnnReorder, RunsInStreamOrderWithTheOpsAroundIt) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_test_context();
  const Dims dims{4, 64, 33, 31};
  Tensor src = Tensor::empty(dims, DType::f32, Layout::channels_first, context.allocator());
  Tensor dst = Tensor::empty(dims, DType::f16, Layout::channels_last, context.allocator());
  for (const float value : {1.5f, -3.0f, 0.25f}) {
    src.fill(value);
    reorder_fwd(context, ReorderDesc::of(src, dst), src, dst);
    const Tensor host = host_copy_of(dst);
    for (const float got : host.to_f32()) {
      ASSERT_EQ(got, value);
    }
  }
}

// nn's layout changes and conversions now run on the device through reorder: Flatten of a
// channels_last input gives PyTorch's (channels_first) order forward and backward, and convert to
// f16 and back keeps values representable in f16.
TEST(CudnnReorder, FlattenOfChannelsLastInputOnTheDevice) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_test_context();
  const Dims dims{2, 3, 4, 5};
  const Tensor host = random_tensor(dims, DType::f32, Layout::channels_last, 7);
  const Tensor input = device_copy(host, context);
  nn::Flatten flatten(context);
  const Tensor out = flatten.forward(input);
  ASSERT_EQ(out.dims(), (Dims{2, 60}));
  const std::vector<float> expected = host.to_f32();  // logical NCHW order = PyTorch's flatten
  EXPECT_EQ(host_copy_of(out).to_f32(), expected);
  const Tensor grad_host = random_tensor(Dims{2, 60}, DType::f32, Layout::channels_first, 8);
  const Tensor grad = flatten.backward(device_copy(grad_host, context));
  ASSERT_EQ(grad.dims(), dims);
  EXPECT_EQ(grad.strides(), dense_strides(dims, Layout::channels_last));
  const Tensor grad_back = host_copy_of(grad);
  EXPECT_EQ(grad_back.to_f32(), grad_host.to_f32());
}

}  // namespace
}  // namespace dnnx::test
