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

// The reference forward of `src` (logical order); with desc.indices its indices go to `indices`.
std::vector<float> forward(const PoolDesc& desc, const std::vector<float>& src,
                           std::vector<std::int64_t>* indices = nullptr) {
  Context context = reference();
  Tensor in = tensor_from(desc.src_dims(), desc.dtype, desc.layout, src);
  Tensor out = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  if (desc.indices) {
    Tensor saved = Tensor::empty(desc.dst_dims(), DType::i64, desc.layout);
    pool_fwd(context, desc, in, out, saved);
    if (indices != nullptr) *indices = index_values(saved);
  } else {
    pool_fwd(context, desc, in, out);
  }
  return out.to_f32();
}

// The reference backward after its forward of `src`; with desc.indices through the indices.
std::vector<float> backward(const PoolDesc& desc, const std::vector<float>& src,
                            const std::vector<float>& diff_dst) {
  Context context = reference();
  Tensor in = tensor_from(desc.src_dims(), desc.dtype, desc.layout, src);
  Tensor out = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  Tensor grad = tensor_from(desc.dst_dims(), desc.dtype, desc.layout, diff_dst);
  Tensor diff_src = Tensor::empty(desc.src_dims(), desc.dtype, desc.layout);
  if (desc.indices) {
    Tensor saved = Tensor::empty(desc.dst_dims(), DType::i64, desc.layout);
    pool_fwd(context, desc, in, out, saved);
    pool_bwd(context, desc, grad, saved, diff_src);
  } else {
    pool_fwd(context, desc, in, out);
    pool_bwd(context, desc, in, out, grad, diff_src);
  }
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

// Dilated windows: torch's F.max_pool1d(tensor([[[1., 5, 2, 4, 3, 6]]]), 2, 2, 1, dilation=2,
// ceil_mode=True, return_indices=True) holds positions (-1, 1), (1, 3), (3, 5), (5, 7) of the
// padded input [-1, 7): [5, 5, 6, 6] at [1, 1, 5, 5]. The averages (which PyTorch has no dilation
// for) take the same positions: include-pad counts the ones inside the padded input (2, 2, 2, 1),
// exclude-pad the input elements (1, 2, 2, 1).
TEST(PoolReference, DilatedWindowsHoldEveryDilationthPosition) {
  const std::vector<float> src{1, 5, 2, 4, 3, 6};
  const auto dilated = [](PoolMode mode) {
    return PoolDesc::from_shapes({1, 1, 6}, {2}, {2}, {1}, {2}, mode, /*ceil_mode=*/true);
  };
  std::vector<std::int64_t> indices;
  PoolDesc max_indices = dilated(PoolMode::max);
  max_indices.indices = true;
  expect_values(forward(max_indices, src, &indices), {5, 5, 6, 6}, "max");
  EXPECT_EQ(indices, (std::vector<std::int64_t>{1, 1, 5, 5}));
  expect_values(forward(dilated(PoolMode::avg_include_pad), src), {2.5, 4.5, 5, 6},
                "avg_include_pad");
  expect_values(forward(dilated(PoolMode::avg_exclude_pad), src), {5, 4.5, 5, 6},
                "avg_exclude_pad");
  const std::vector<float> ones{1, 1, 1, 1};
  expect_values(backward(dilated(PoolMode::max), src, ones), {0, 2, 0, 0, 0, 2}, "max backward");
  expect_values(backward(dilated(PoolMode::avg_include_pad), src, ones),
                {0, 0.5 + 0.5, 0, 0.5 + 0.5, 0, 0.5 + 1}, "avg_include_pad backward");
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

PoolDesc with_indices(PoolDesc desc) {
  desc.indices = true;
  return desc;
}

// Values and indices printed by torch 1.13's F.max_pool{1,2,3}d(..., return_indices=True): ties
// go to the first maximum, a NaN wins (the last one when a window holds several), padding never
// wins, and a window of -inf keeps its first input element.
TEST(PoolReferenceIndices, MatchPyTorchValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Row {
    const char* what;
    PoolDesc desc;
    std::vector<float> src;
    std::vector<double> dst;  // NaN where torch gives NaN
    std::vector<std::int64_t> indices;
  };
  const std::vector<Row> rows{
      {"ties",
       with_indices(one_d(4, 2, 1, 0, false, PoolMode::max)),
       {1, 5, 5, 2},
       {5, 5, 5},
       {1, 1, 2}},
      {"nan",
       with_indices(one_d(4, 2, 1, 0, false, PoolMode::max)),
       {1, nan, 7, nan},
       {NAN, NAN, NAN},
       {1, 1, 3}},
      {"two nans",
       with_indices(one_d(4, 4, 1, 0, false, PoolMode::max)),
       {nan, 1, nan, 2},
       {NAN},
       {2}},
      {"padding",
       with_indices(one_d(4, 2, 2, 1, false, PoolMode::max)),
       {-3, -1, -2, -5},
       {-3, -1, -5},
       {0, 1, 3}},
      {"all -inf",
       with_indices(one_d(4, 2, 2, 1, false, PoolMode::max)),
       {-inf, -inf, -inf, -inf},
       {-inf, -inf, -inf},
       {0, 1, 3}},
      {"ceil overhang",
       with_indices(one_d(10, 3, 2, 0, true, PoolMode::max)),
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
       {2, 4, 6, 8, 9},
       {2, 4, 6, 8, 9}},
      {"ties with padding",
       with_indices(one_d(4, 3, 1, 1, false, PoolMode::max)),
       {3, 3, 3, 3},
       {3, 3, 3, 3},
       {0, 0, 1, 2}},
  };
  for (const Row& row : rows) {
    for (const DType dtype : {DType::f32, DType::bf16}) {
      PoolDesc desc = row.desc;
      desc.dtype = dtype;
      std::vector<std::int64_t> indices;
      const std::vector<float> dst = forward(desc, row.src, &indices);
      ASSERT_EQ(dst.size(), row.dst.size()) << row.what;
      for (std::size_t i = 0; i < dst.size(); ++i) {
        if (std::isnan(row.dst[i])) {
          EXPECT_TRUE(std::isnan(dst[i])) << row.what << " element " << i;
        } else {
          EXPECT_EQ(dst[i], row.dst[i]) << row.what << " element " << i;
        }
      }
      EXPECT_EQ(indices, row.indices) << row.what << " " << to_string(dtype);
    }
  }
}

// 2-D and 3-D: flat indices into the whole (n, c) plane. torch: F.max_pool2d(arange(16.)
// .reshape(1, 1, 4, 4), 3, 2, 1, ceil_mode=True, return_indices=True) and F.max_pool3d(arange(60.)
// .reshape(1, 1, 3, 4, 5), 2, 2, 1, return_indices=True).
TEST(PoolReferenceIndices, FlatIndicesIntoThePlane) {
  std::vector<float> ramp(60);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i);
  const PoolDesc two_d = with_indices(
      PoolDesc::from_shapes({1, 1, 4, 4}, {3}, {2}, {1}, PoolMode::max, /*ceil_mode=*/true));
  std::vector<std::int64_t> indices;
  forward(two_d, std::vector<float>(ramp.begin(), ramp.begin() + 16), &indices);
  EXPECT_EQ(indices, (std::vector<std::int64_t>{5, 7, 7, 13, 15, 15, 13, 15, 15}));
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    PoolDesc three_d = with_indices(PoolDesc::from_shapes({1, 1, 3, 4, 5}, {2}, {2}, {1}));
    three_d.layout = layout;
    forward(three_d, ramp, &indices);
    EXPECT_EQ(indices, (std::vector<std::int64_t>{0, 2, 4, 10, 12, 14, 15, 17, 19, 40, 42, 44, 50,
                                                  52, 54, 55, 57, 59}))
        << to_string(layout);
  }
}

// Overlapping windows that pick the same element add up, as PyTorch's scatter does: torch's
// max_pool1d(tensor([1., 9, 2, 3, 0]), 3, 1) has indices [1, 1, 3], and backward([1, 2, 4]) gives
// [0, 3, 0, 4, 0].
TEST(PoolReferenceIndices, BackwardAccumulatesOverlappingWindows) {
  const PoolDesc desc = with_indices(one_d(5, 3, 1, 0, false, PoolMode::max));
  std::vector<std::int64_t> indices;
  forward(desc, {1, 9, 2, 3, 0}, &indices);
  EXPECT_EQ(indices, (std::vector<std::int64_t>{1, 1, 3}));
  expect_values(backward(desc, {1, 9, 2, 3, 0}, {1, 2, 4}), {0, 3, 0, 4, 0}, "accumulated");
}

// With tie-free inputs the backward through indices is the backward from src and dst, on every
// shape of the table.
TEST(PoolReferenceIndices, BackwardThroughIndicesEqualsBackwardFromSrc) {
  for (const PoolShape& shape : pool_edge_shapes()) {
    PoolDesc desc = shape.desc;
    const std::vector<float> src = pool_src(desc, 31).to_f32();
    const std::vector<float> diff_dst = pool_diff_dst(desc, 32).to_f32();
    const std::vector<float> plain = backward(desc, src, diff_dst);
    desc.indices = true;
    EXPECT_EQ(backward(desc, src, diff_dst), plain) << shape.name;
  }
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
  for (const char* shape :
       {"1d_ceil_asym_pad", "2d_ceil_overhang", "2d_asym_pad", "2d_half_kernel_pad",
        "3d_asym_pad_ceil", "1d_dilated_ceil", "2d_dilated_odd", "3d_dilated_asym_pad"}) {
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
