// Seeded fill and dropout on the cudnn backend (label "gpu"): the bits of dnnx's kernels equal
// the reference's for every distribution, dtype and layout (odd sizes, no elements, a non-zero
// offset); dropout's masks, outputs and gradients likewise; cuDNN's own dropout (admitted only
// with reproducible = false) keeps elements at the right rate and scale and its backward uses its
// own mask; Tensor::zeros and Tensor::fill on the device. Every test skips with the reason when no
// usable GPU is present.

#include <dnnx/dnnx.hpp>

#include "support/gpu.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

Context reference_context() {
  Context context(BackendKind::reference);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

std::vector<std::uint32_t> bits_of(const Tensor& host) {
  const std::vector<float> values = host.to_f32();
  std::vector<std::uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

const std::vector<Dims>& shapes() {
  static const std::vector<Dims> list = {
      {0}, {1}, {7}, {3, 5}, {2, 3, 5, 7}, {2, 5, 3, 4, 3}, {1, 1000003}, {64, 3, 7, 7}};
  return list;
}

TEST(CudnnFill, BitsEqualTheReferences) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context reference = reference_context();
  const std::vector<std::pair<Distribution, FillParams>> draws = {
      {Distribution::constant, FillParams::constant(0.75f)},
      {Distribution::uniform, FillParams::uniform(-3.0f, 5.0f)},
      {Distribution::normal, FillParams::normal(0.5f, 2.0f)},
      {Distribution::trunc_normal, FillParams::trunc_normal(0.25f, 1.5f, -1.0f, 2.0f)}};
  for (const auto& [distribution, params] : draws) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        for (const Dims& dims : shapes()) {
          FillDesc desc;
          desc.dims = dims, desc.dtype = dtype, desc.layout = layout;
          desc.distribution = distribution;
          Generator a(4321), b(4321);
          a.set_offset(11), b.set_offset(11);
          Tensor host = Tensor::empty(dims, dtype, layout);
          fill_fwd(reference, desc, params, a, host);
          Tensor device = Tensor::empty(dims, dtype, layout, gpu.allocator());
          const auto choice = fill_fwd(gpu, desc, params, b, device);
          EXPECT_EQ(choice->algo.id, "cudnn:kernel:fill");
          ASSERT_EQ(bits_of(host), bits_of(host_copy_of(device))) << desc.repro();
          EXPECT_EQ(a.offset(), b.offset());
        }
      }
    }
  }
}

TEST(CudnnDropout, MasksAndOutputsEqualTheReferences) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context reference = reference_context();
  for (const float p : {0.0f, 0.2f, 0.5f, 1.0f}) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        for (const Dims& dims : shapes()) {
          DropoutDesc desc;
          desc.dims = dims, desc.p = p, desc.dtype = dtype, desc.layout = layout;
          FillDesc input;
          input.dims = dims, input.dtype = dtype, input.layout = layout;
          Generator inputs(3);
          Tensor src = Tensor::empty(dims, dtype, layout), dy = Tensor::empty(dims, dtype, layout);
          fill_fwd(reference, input, FillParams::uniform(-2, 2), inputs, src);
          fill_fwd(reference, input, FillParams::uniform(-2, 2), inputs, dy);
          Generator a(8), b(8);
          Tensor dst = Tensor::empty(dims, dtype, layout), dx = Tensor::empty(dims, dtype, layout);
          SavedState host_state, device_state;
          dropout_fwd_training(reference, desc, a, src, dst, host_state);
          dropout_bwd(reference, desc, dy, dx, host_state);
          Tensor src_d = device_copy(src, gpu), dy_d = device_copy(dy, gpu);
          Tensor dst_d = Tensor::empty(dims, dtype, layout, gpu.allocator());
          Tensor dx_d = Tensor::empty(dims, dtype, layout, gpu.allocator());
          EXPECT_EQ(dropout_fwd_training(gpu, desc, b, src_d, dst_d, device_state)->algo.id,
                    "cudnn:kernel:dropout");
          dropout_bwd(gpu, desc, dy_d, dx_d, device_state);
          ASSERT_EQ(bits_of(dst), bits_of(host_copy_of(dst_d)))
              << desc.repro(Direction::fwd_training);
          ASSERT_EQ(bits_of(dx), bits_of(host_copy_of(dx_d))) << desc.repro(Direction::bwd_data);
          ASSERT_EQ(host_state.bytes(), device_state.bytes());
          if (host_state.bytes() > 0) {
            const Dims words{static_cast<std::int64_t>(host_state.bytes() / 4)};
            Tensor mask = Tensor::empty(words, DType::i32);
            Tensor view = Tensor::view(device_state.data(), words, DType::i32,
                                       Layout::channels_first, device_state.device());
            copy(view, mask);
            ASSERT_EQ(std::memcmp(mask.data(), host_state.data(), host_state.bytes()), 0)
                << desc.repro(Direction::fwd_training);
          }
          // Inference is a copy.
          Tensor copied = Tensor::empty(dims, dtype, layout, gpu.allocator());
          dropout_fwd(gpu, desc, src_d, copied);
          ASSERT_EQ(bits_of(src), bits_of(host_copy_of(copied)));
        }
      }
    }
  }
}

TEST(CudnnDropout, CudnnsOwnDropoutOnlyWhenNotReproducible) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  DropoutDesc desc;
  desc.dims = {1 << 20};
  desc.p = 0.3f;
  auto find = [&](Direction direction) {
    for (const AlgoInfo& algo : dropout_list(gpu, desc, direction))
      if (algo.id == "cudnn:dropout") return algo;
    ADD_FAILURE() << "cudnn:dropout not listed";
    return AlgoInfo();
  };
  EXPECT_FALSE(find(Direction::fwd_training).supported);
  EXPECT_NE(find(Direction::fwd_training).reason.find("reproducible = false"), std::string::npos);
  desc.reproducible = false;
  const AlgoInfo forward = find(Direction::fwd_training);
  ASSERT_TRUE(forward.supported) << forward.reason;
  EXPECT_FALSE(forward.deterministic);
  EXPECT_EQ(forward.saved_state_format, "cudnn:dropout_reserve");
  EXPECT_GT(forward.saved_state_bytes, 0u);

  Context fixed = gpu_test_context();
  fixed.tune().policy(OpKind::dropout, Direction::fwd_training) =
      AlgoPolicy::fixed("cudnn:dropout");
  Tensor ones = Tensor::empty(desc.dims, DType::f32);
  ones.fill(1.0f);
  Tensor src = device_copy(ones, gpu);
  Tensor dst = Tensor::empty(desc.dims, DType::f32, Layout::channels_first, gpu.allocator());
  Tensor dx = Tensor::empty(desc.dims, DType::f32, Layout::channels_first, gpu.allocator());
  Generator generator(12);
  SavedState state;
  EXPECT_EQ(dropout_fwd_training(fixed, desc, generator, src, dst, state)->algo.id,
            "cudnn:dropout");
  EXPECT_EQ(state.format(), "cudnn:dropout_reserve");
  // The backward selects among candidates of the state's format: cuDNN's.
  EXPECT_EQ(dropout_bwd(gpu, desc, src, dx, state)->algo.id, "cudnn:dropout");
  const std::vector<float> y = host_copy_of(dst).to_f32();
  const std::vector<float> g = host_copy_of(dx).to_f32();
  const double n = static_cast<double>(y.size());
  const float scale = desc.scale();
  double kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(y[i] == 0.0f || std::abs(y[i] - scale) <= 1e-6f * scale) << i << " " << y[i];
    ASSERT_EQ(y[i], g[i]) << i;  // the backward uses the forward's mask and scale
    if (y[i] != 0.0f) ++kept;
  }
  EXPECT_NEAR(kept, n * (1 - desc.p), 3 * std::sqrt(n * desc.p * (1 - desc.p)));
}

TEST(CudnnTensor, DeviceZerosAndFill) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    Tensor zeros = Tensor::zeros({3, 1001}, dtype, Layout::channels_first, gpu.allocator());
    for (const float v : host_copy_of(zeros).to_f32()) ASSERT_EQ(v, 0.0f) << to_string(dtype);
    zeros.fill(-3.0f);
    for (const float v : host_copy_of(zeros).to_f32()) ASSERT_EQ(v, -3.0f) << to_string(dtype);
  }
  Tensor nhwc = Tensor::empty({2, 3, 4, 5}, DType::f16, Layout::channels_last, gpu.allocator());
  nhwc.fill(0.1f);
  Tensor expected = Tensor::empty({1}, DType::f16);
  expected.fill(0.1f);
  for (const float v : host_copy_of(nhwc).to_f32()) ASSERT_EQ(v, expected.to_f32()[0]);
  Tensor empty = Tensor::zeros({0, 4}, DType::f32, Layout::channels_first, gpu.allocator());
  EXPECT_EQ(empty.numel(), 0);
}

TEST(CudnnInit, InitialisersRunOnTheDevice) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context reference = reference_context();
  Generator a(1), b(1);
  Tensor host = Tensor::empty({64, 32, 3, 3}, DType::f32);
  Tensor device =
      Tensor::empty({64, 32, 3, 3}, DType::f32, Layout::channels_first, gpu.allocator());
  init::kaiming_uniform(reference, a, host, std::sqrt(5.0));
  init::kaiming_uniform(gpu, b, device, std::sqrt(5.0));
  EXPECT_EQ(bits_of(host), bits_of(host_copy_of(device)));
  init::ones(gpu, device);
  for (const float v : host_copy_of(device).to_f32()) ASSERT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace dnnx::test
