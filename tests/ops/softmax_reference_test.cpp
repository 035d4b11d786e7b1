// The reference softmax on its own: hand-computed values, large inputs, the groups of each mode
// and layout, in place, and the backward pass against central finite differences of the forward.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "ops/softmax_cases.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace dnnx::test {
namespace {

Context reference() {
  return softmax_context_for(BackendKind::reference, Direction::fwd, AlgoPolicy::heuristic());
}

SoftmaxDesc desc_of(const Dims& dims, SoftmaxMode mode, bool log,
                    Layout layout = Layout::channels_first, DType dtype = DType::f32) {
  SoftmaxDesc desc;
  desc.dims = dims;
  desc.mode = mode;
  desc.log = log;
  desc.layout = layout;
  desc.dtype = dtype;
  return desc;
}

std::vector<float> forward(const SoftmaxDesc& desc, const std::vector<float>& src) {
  Context context = reference();
  const Tensor input = tensor_from(desc.dims, desc.dtype, desc.layout, src);
  return run_softmax(context, desc, Direction::fwd, input).output.to_f32();
}

TEST(SoftmaxReference, HandComputedValues) {
  const SoftmaxDesc desc = desc_of({2, 2}, SoftmaxMode::channel, false);
  const std::vector<float> y = forward(desc, {0.0f, std::log(2.0f), 3.0f, 3.0f});
  EXPECT_NEAR(y[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(y[1], 2.0 / 3.0, 1e-7);
  EXPECT_FLOAT_EQ(y[2], 0.5f);
  EXPECT_FLOAT_EQ(y[3], 0.5f);
  const std::vector<float> log_y =
      forward(desc_of({2, 2}, SoftmaxMode::channel, true), {0.0f, std::log(2.0f), 3.0f, 3.0f});
  EXPECT_NEAR(log_y[0], std::log(1.0 / 3.0), 1e-6);
  EXPECT_NEAR(log_y[1], std::log(2.0 / 3.0), 1e-6);
  EXPECT_NEAR(log_y[2], std::log(0.5), 1e-6);
}

TEST(SoftmaxReference, LargeInputsAreExact) {
  const std::vector<float> y =
      forward(desc_of({1, 3}, SoftmaxMode::channel, false), {1e4f, 0.0f, -1e4f});
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  const std::vector<float> log_y =
      forward(desc_of({1, 3}, SoftmaxMode::channel, true), {1e4f, 0.0f, -1e4f});
  EXPECT_EQ(log_y[0], 0.0f);
  EXPECT_EQ(log_y[1], -1e4f);
  EXPECT_EQ(log_y[2], -2e4f);
}

// Channel mode normalizes over C at every position, instance mode over C*H*W, in either layout.
TEST(SoftmaxReference, GroupsOfEachModeAndLayout) {
  const Dims dims{2, 3, 2, 2};
  const std::vector<float> src = random_uniform(24, 7, -3.0f, 3.0f);
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    const std::vector<float> channel =
        forward(desc_of(dims, SoftmaxMode::channel, false, layout), src);
    for (std::size_t n = 0; n < 2; ++n) {
      for (std::size_t p = 0; p < 4; ++p) {
        double sum = 0;
        for (std::size_t c = 0; c < 3; ++c) sum += channel[(n * 3 + c) * 4 + p];
        EXPECT_NEAR(sum, 1.0, 1e-6) << "channel mode, n=" << n << " position " << p;
      }
    }
    const std::vector<float> instance =
        forward(desc_of(dims, SoftmaxMode::instance, false, layout), src);
    for (std::size_t n = 0; n < 2; ++n) {
      double sum = 0;
      for (std::size_t k = 0; k < 12; ++k) sum += instance[n * 12 + k];
      EXPECT_NEAR(sum, 1.0, 1e-6) << "instance mode, n=" << n;
    }
    // Independent of the layout: the same logical values.
    EXPECT_EQ(channel, forward(desc_of(dims, SoftmaxMode::channel, false), src));
  }
}

TEST(SoftmaxReference, InPlace) {
  const SoftmaxDesc desc = desc_of({3, 7}, SoftmaxMode::channel, true);
  Tensor data = random_tensor(desc.dims, desc.dtype, desc.layout, 11);
  const std::vector<float> expected = forward(desc, data.to_f32());
  Context context = reference();
  softmax_fwd(context, desc, data, data);
  EXPECT_EQ(data.to_f32(), expected);
}

// The backward pass is the gradient of L(src) = sum(diff_dst * softmax(src)), checked by central
// differences of the reference's own forward in f32 (step 1e-2 on inputs of magnitude ~2: the
// truncation error O(h^2) and f32 rounding / h are both well under the 2e-3 bound).
void check_finite_differences(const SoftmaxDesc& desc) {
  SCOPED_TRACE(desc.repro(Direction::bwd_data));
  const auto count = static_cast<std::size_t>(desc.dims.product());
  const std::vector<float> src = random_uniform(count, seed_from(desc.key()), -2.0f, 2.0f);
  const std::vector<float> dy = random_uniform(count, seed_from(desc.key() + "dy"), -1.0f, 1.0f);
  auto loss = [&](const std::vector<float>& x) {
    const std::vector<float> y = forward(desc, x);
    double total = 0;
    for (std::size_t k = 0; k < count; ++k) total += static_cast<double>(dy[k]) * y[k];
    return total;
  };
  Context context = reference();
  const Tensor dst = tensor_from(desc.dims, desc.dtype, desc.layout, forward(desc, src));
  const Tensor diff_dst = tensor_from(desc.dims, desc.dtype, desc.layout, dy);
  const std::vector<float> analytic =
      run_softmax(context, desc, Direction::bwd_data, dst, &diff_dst).output.to_f32();
  constexpr float h = 1e-2f;
  for (std::size_t k = 0; k < count; ++k) {
    std::vector<float> plus = src, minus = src;
    plus[k] += h;
    minus[k] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (2.0 * h);
    EXPECT_NEAR(analytic[k], numeric, 2e-3 * (1 + std::abs(numeric))) << "element " << k;
  }
}

TEST(SoftmaxReference, BackwardMatchesFiniteDifferences) {
  check_finite_differences(desc_of({2, 5}, SoftmaxMode::channel, false));
  check_finite_differences(desc_of({2, 5}, SoftmaxMode::channel, true));
  check_finite_differences(
      desc_of({1, 3, 2, 2}, SoftmaxMode::channel, false, Layout::channels_last));
  check_finite_differences(desc_of({1, 3, 2, 2}, SoftmaxMode::channel, true));
  check_finite_differences(desc_of({2, 2, 3}, SoftmaxMode::instance, false));
  check_finite_differences(
      desc_of({1, 2, 2, 1, 2}, SoftmaxMode::instance, true, Layout::channels_last));
}

TEST(SoftmaxReference, OutputsAreRoundedOnceToTheDtype) {
  for (const DType dtype : {DType::f16, DType::bf16}) {
    const SoftmaxDesc desc =
        desc_of({1, 5}, SoftmaxMode::channel, false, Layout::channels_first, dtype);
    const std::vector<float> src{0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    const Tensor input = tensor_from(desc.dims, dtype, desc.layout, src);
    const std::vector<float> in = input.to_f32();
    Context context = reference();
    const std::vector<float> y = run_softmax(context, desc, Direction::fwd, input).output.to_f32();
    double sum = 0;
    for (float v : in) sum += std::exp(static_cast<double>(v));
    const double ulp = dtype == DType::f16 ? 0x1.0p-11 : 0x1.0p-8;
    for (std::size_t k = 0; k < y.size(); ++k) {
      const double exact = std::exp(static_cast<double>(in[k])) / sum;
      EXPECT_LE(std::abs(y[k] - exact), 0.5 * ulp * 2 * exact)
          << to_string(dtype) << " element " << k;
    }
  }
}

}  // namespace
}  // namespace dnnx::test
