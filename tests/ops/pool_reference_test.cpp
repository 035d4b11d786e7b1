// The reference pooling, the oracle of every other backend: hand-computed values (every mode, ceil
// mode, padding, ties, NaN) and its backward pass against finite differences of its forward pass.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"
#include "ops/pool_support.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dnnx::test {
namespace {

Context reference() {
  Context context(BackendKind::reference);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

std::vector<float> forward(const PoolDesc& desc, const std::vector<float>& src) {
  Context context = reference();
  Tensor in = tensor_from(desc.src_dims(), desc.dtype, desc.layout, src);
  Tensor out = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  pool_fwd(context, desc, in, out);
  return out.to_f32();
}

std::vector<float> backward(const PoolDesc& desc, const std::vector<float>& src,
                            const std::vector<float>& diff_dst) {
  Context context = reference();
  Tensor in = tensor_from(desc.src_dims(), desc.dtype, desc.layout, src);
  Tensor out = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  pool_fwd(context, desc, in, out);
  Tensor grad = tensor_from(desc.dst_dims(), desc.dtype, desc.layout, diff_dst);
  Tensor diff_src = Tensor::empty(desc.src_dims(), desc.dtype, desc.layout);
  pool_bwd(context, desc, in, out, grad, diff_src);
  return diff_src.to_f32();
}

void expect_values(const std::vector<float>& actual, const std::vector<double>& expected,
                   const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-6) << what << " element " << i;
}

PoolDesc one_d(std::int64_t input, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
               bool ceil, PoolMode mode) {
  return PoolDesc::from_shapes({1, 1, input}, {kernel}, {stride}, {pad}, mode, ceil);
}

// torch 1.13: F.avg_pool1d(tensor([[[1., 2, 3, 4]]]), 3, 2, 1, ceil_mode=True,
// count_include_pad=True) = [1, 3, 2]; count_include_pad=False: [1.5, 3, 4]; max_pool1d: [2, 4, 4].
// The last window starts at 3 and reaches 5, past input + padding = 5: the include-pad divisor
// is 2.
TEST(PoolReference, CeilModeMatchesPyTorchValues) {
  const std::vector<float> src{1, 2, 3, 4};
  expect_values(forward(one_d(4, 3, 2, 1, true, PoolMode::max), src), {2, 4, 4}, "max");
  expect_values(forward(one_d(4, 3, 2, 1, true, PoolMode::avg_include_pad), src), {1, 3, 2},
                "avg_include_pad");
  expect_values(forward(one_d(4, 3, 2, 1, true, PoolMode::avg_exclude_pad), src), {1.5, 3, 4},
                "avg_exclude_pad");
  // torch: F.avg_pool1d(tensor([[[1., 2, 3, 4, 5]]]), 2, 2, ceil_mode=True) = [1.5, 3.5, 5].
  expect_values(forward(one_d(5, 2, 2, 0, true, PoolMode::avg_include_pad), {1, 2, 3, 4, 5}),
                {1.5, 3.5, 5}, "avg_include_pad overhang without padding");
}

// The adjoints of the three windows above, with diff_dst = 1.
TEST(PoolReference, BackwardRoutesAsPyTorch) {
  const std::vector<float> src{1, 2, 3, 4};
  const std::vector<float> ones{1, 1, 1};
  expect_values(backward(one_d(4, 3, 2, 1, true, PoolMode::max), src, ones), {0, 1, 0, 2}, "max");
  expect_values(backward(one_d(4, 3, 2, 1, true, PoolMode::avg_include_pad), src, ones),
                {1.0 / 3, 2.0 / 3, 1.0 / 3, 1.0 / 3 + 0.5}, "avg_include_pad");
  expect_values(backward(one_d(4, 3, 2, 1, true, PoolMode::avg_exclude_pad), src, ones),
                {0.5, 0.5 + 1.0 / 3, 1.0 / 3, 1.0 / 3 + 1}, "avg_exclude_pad");
}

// Padding never wins a max, even over negative values; it counts as zeros only in include-pad.
TEST(PoolReference, PaddingIsNeitherAMaximumNorAnExcludedCount) {
  const std::vector<float> src{-3, -1, -2, -5};
  expect_values(forward(one_d(4, 2, 2, 1, false, PoolMode::max), src), {-3, -1, -5}, "max");
  expect_values(forward(one_d(4, 2, 2, 1, false, PoolMode::avg_include_pad), src),
                {-1.5, -1.5, -2.5}, "avg_include_pad");
  expect_values(forward(one_d(4, 2, 2, 1, false, PoolMode::avg_exclude_pad), src), {-3, -1.5, -5},
                "avg_exclude_pad");
}

// Ties go to the first maximum in scan order (H before W); NaN wins and propagates.
TEST(PoolReference, TiesGoToTheFirstMaximumAndNaNPropagates) {
  const PoolDesc desc = PoolDesc::from_shapes({1, 1, 2, 2}, {2});
  expect_values(backward(desc, {1, 5, 5, 2}, {1}), {0, 1, 0, 0}, "tie in a row");
  expect_values(backward(desc, {5, 1, 5, 5}, {1}), {1, 0, 0, 0}, "tie across rows");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(forward(desc, {1, nan, 7, 2})[0]));
  const std::vector<float> grad = backward(desc, {1, nan, 7, 2}, {1});
  EXPECT_EQ(grad[1], 1.0f);
  EXPECT_EQ(grad[2], 0.0f);
}

// Layouts change memory order only.
TEST(PoolReference, LayoutsAgree) {
  PoolDesc first =
      PoolDesc::from_shapes({2, 3, 6, 7}, {3, 2}, {2, 1}, {1, 1}, PoolMode::avg_exclude_pad, true);
  PoolDesc last = first;
  last.layout = Layout::channels_last;
  const std::vector<float> src =
      random_uniform(static_cast<std::size_t>(first.src_dims().product()), 3);
  EXPECT_EQ(forward(first, src), forward(last, src));
}

// Backward against central finite differences of L(src) = <forward(src), diff_dst>. Max inputs
// are tie-free integers (Note [tie-free inputs]) and a step of 1/8 changes no argmax, so the
// difference is exact up to f32 rounding of the sum; the averages are linear.
class PoolFiniteDifferences : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolFiniteDifferences, BackwardIsTheGradient) {
  const PoolDesc& desc = GetParam().desc;
  const std::vector<float> src = pool_src(desc, 21).to_f32();
  const std::vector<float> diff_dst = pool_diff_dst(desc, 22).to_f32();
  const std::vector<float> grad = backward(desc, src, diff_dst);
  const auto loss = [&](const std::vector<float>& x) {
    const std::vector<float> y = forward(desc, x);
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * diff_dst[i];
    return sum;
  };
  constexpr float step = 0.125f;
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::vector<float> plus = src, minus = src;
    plus[i] += step;
    minus[i] -= step;
    const double numeric = (loss(plus) - loss(minus)) / (2.0 * step);
    EXPECT_NEAR(grad[i], numeric, 1e-5)
        << GetParam().name << " element " << i << "\n  " << desc.repro(Direction::bwd_data);
  }
}

std::vector<PoolCase> finite_difference_cases() {
  std::vector<PoolCase> cases;
  for (const char* shape : {"1d_ceil_asym_pad", "2d_ceil_overhang", "2d_asym_pad",
                            "2d_half_kernel_pad", "3d_asym_pad_ceil"}) {
    for (const PoolShape& s : pool_edge_shapes()) {
      if (s.name != shape) continue;
      PoolShape small = s;
      small.desc.batch = 1;
      small.desc.channels = std::min<std::int64_t>(s.desc.channels, 2);
      for (const PoolCase& c : pool_variants(small)) {
        if (c.desc.dtype == DType::f32 && c.desc.layout == Layout::channels_first)
          cases.push_back(c);
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Edge, PoolFiniteDifferences,
                         ::testing::ValuesIn(finite_difference_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dnnx::test
