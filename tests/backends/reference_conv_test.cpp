// The reference convolution is the oracle of every other backend, so it is checked against things
// that do not depend on it: finite differences, the adjoint identities, hand-computed numbers,
// rounding of the f32 result for f16/bf16, and layout/stride independence.

#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>
#include <dnnx/version.hpp>

#include "backends/reference/reference.hpp"
#include "core/dtype.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace dnnx {
namespace {

constexpr const char* direct_id = "reference:direct";

// ---------------------------------------------------------------------------------------------
// Cases.

struct Case {
  std::string name;
  ConvDesc desc;
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.name; }

ConvDesc make_desc(const Dims& src, const Dims& weights, std::vector<std::int64_t> stride,
                   std::vector<std::int64_t> pad_before, std::vector<std::int64_t> pad_after,
                   std::vector<std::int64_t> dilation, std::int64_t groups,
                   Layout layout = Layout::channels_first) {
  ConvDesc desc =
      ConvDesc::from_shapes(src, weights, stride, {0}, dilation, groups, DType::f32, layout);
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto k = static_cast<std::size_t>(i);
    desc.pad_before[k] = pad_before.size() == 1 ? pad_before[0] : pad_before[k];
    desc.pad_after[k] = pad_after.size() == 1 ? pad_after[0] : pad_after[k];
  }
  desc.validate();
  return desc;
}

// Small enough for finite differences (every src and weights element is perturbed twice), yet
// covering every feature the loops handle.
std::vector<Case> small_cases() {
  const Layout nhwc = Layout::channels_last;
  return {
      {"conv1d_pad1", make_desc({2, 3, 9}, {4, 3, 3}, {1}, {1}, {1}, {1}, 1)},
      {"conv1d_stride2_dilation2_asym_pad",
       make_desc({1, 2, 11}, {3, 2, 3}, {2}, {2}, {1}, {2}, 1)},
      {"conv2d_3x3_pad1", make_desc({2, 3, 5, 5}, {4, 3, 3, 3}, {1}, {1}, {1}, {1}, 1)},
      {"conv2d_stride2_asym_pad",
       make_desc({1, 2, 7, 6}, {3, 2, 3, 2}, {2}, {0, 1}, {2, 0}, {1}, 1)},
      {"conv2d_dilation2", make_desc({1, 2, 7, 7}, {2, 2, 3, 3}, {1}, {2}, {2}, {2}, 1)},
      {"conv2d_groups2_stride2", make_desc({2, 4, 5, 5}, {6, 2, 3, 3}, {2}, {1}, {1}, {1}, 2)},
      {"conv2d_depthwise", make_desc({1, 3, 6, 5}, {3, 1, 3, 3}, {1}, {1}, {1}, {1}, 3)},
      {"conv2d_depthwise_multiplier2",
       make_desc({1, 2, 5, 5}, {4, 1, 2, 2}, {1}, {0}, {1}, {1}, 2)},
      // Stride 3 over a 1x1 kernel skips inputs; padding 2 with a 2x2 kernel makes outputs that
      // see only padding.
      {"conv2d_stride3_skips_inputs", make_desc({1, 2, 7, 8}, {2, 2, 1, 1}, {3}, {0}, {0}, {1}, 1)},
      {"conv2d_all_padding_outputs", make_desc({1, 1, 3, 3}, {2, 1, 2, 2}, {1}, {2}, {2}, {1}, 1)},
      {"conv2d_kernel_equals_input", make_desc({2, 2, 3, 4}, {3, 2, 3, 4}, {1}, {0}, {0}, {1}, 1)},
      {"conv3d_stride_asym_pad",
       make_desc({1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {2, 1, 1}, {1, 0, 1}, {0, 1, 0}, {1}, 1)},
      {"conv3d_groups2_dilation",
       make_desc({1, 4, 5, 4, 5}, {2, 2, 2, 2, 2}, {1}, {1}, {0}, {2}, 2)},
      {"conv1d_nwc", make_desc({2, 3, 9}, {4, 3, 3}, {2}, {1}, {0}, {1}, 1, nhwc)},
      {"conv2d_nhwc_groups2_stride2",
       make_desc({2, 4, 5, 5}, {6, 2, 3, 3}, {2}, {1}, {1}, {1}, 2, nhwc)},
      {"conv2d_nhwc_depthwise_dilation2",
       make_desc({1, 3, 7, 6}, {3, 1, 3, 3}, {1}, {2, 1}, {1, 2}, {2}, 3, nhwc)},
      {"conv3d_ndhwc",
       make_desc({1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {2, 1, 1}, {1}, {0}, {1}, 1, nhwc)},
  };
}

// ---------------------------------------------------------------------------------------------
// Running the backend.

class ReferenceConv : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<detail::Backend> backend_ = reference::make_backend();

  detail::ConvBackend& conv() { return backend_->conv(); }
  const ConvDesc& desc() const { return GetParam().desc; }
};

std::vector<float> random_values(std::int64_t count, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) v = uniform(generator);
  return values;
}

// A dense tensor in `layout` holding `values` (logical row-major order).
Tensor make_tensor(const Dims& dims, DType dtype, Layout layout, const std::vector<float>& values) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  tensor.copy_from_f32(values);
  return tensor;
}

// Runs one direction: `a` and `b` are its two inputs in ConvArgs order (fwd: src, weights;
// bwd_data: diff_dst, weights; bwd_weights: src, diff_dst), given in logical order; returns the
// output in logical order.
std::vector<float> run(detail::ConvBackend& conv, const ConvDesc& desc, Direction direction,
                       const std::vector<float>& a, const std::vector<float>& b) {
  const DType dtype = desc.dtype;
  const Layout layout = desc.layout;
  detail::ConvArgs args;
  Tensor first, second, out;
  switch (direction) {
    case Direction::fwd:
      first = make_tensor(desc.src_dims(), dtype, layout, a);
      second = make_tensor(desc.weights_dims(), dtype, layout, b);
      out = Tensor::empty(desc.dst_dims(), dtype, layout);
      args.src = &first;
      args.weights = &second;
      args.dst = &out;
      break;
    case Direction::bwd_data:
      first = make_tensor(desc.dst_dims(), dtype, layout, a);
      second = make_tensor(desc.weights_dims(), dtype, layout, b);
      out = Tensor::empty(desc.src_dims(), dtype, layout);
      args.diff_dst = &first;
      args.weights = &second;
      args.diff_src = &out;
      break;
    case Direction::bwd_weights:
      first = make_tensor(desc.src_dims(), dtype, layout, a);
      second = make_tensor(desc.dst_dims(), dtype, layout, b);
      out = Tensor::empty(desc.weights_dims(), dtype, layout);
      args.src = &first;
      args.diff_dst = &second;
      args.diff_weights = &out;
      break;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  // Garbage in the output proves every element is written.
  out.fill(std::numeric_limits<float>::quiet_NaN());
  conv.plan(desc, direction, direct_id)->execute(args, {});
  return out.to_f32();
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

double dot_abs(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(static_cast<double>(a[i]) * b[i]);
  return sum;
}

// ---------------------------------------------------------------------------------------------
// (1) Finite differences: bwd_data and bwd_weights are the derivatives of
// loss(src, weights) = sum(fwd(src, weights) * g).

TEST_P(ReferenceConv, BackwardMatchesFiniteDifferences) {
  const ConvDesc& d = desc();
  const std::vector<float> src = random_values(d.src_dims().product(), 1);
  const std::vector<float> weights = random_values(d.weights_dims().product(), 2);
  const std::vector<float> g = random_values(d.dst_dims().product(), 3);

  const std::vector<float> diff_src = run(conv(), d, Direction::bwd_data, g, weights);
  const std::vector<float> diff_weights = run(conv(), d, Direction::bwd_weights, src, g);

  // The conv is linear, so central differences are exact up to the f32 rounding of the outputs
  // that the perturbed element reaches (the others are bitwise unchanged and cancel):
  // about 6e-8 * a few dozen terms / (2 * step) ~ 1e-4 at worst for values in [-1, 1].
  const float step = 1e-2f;
  const auto check = [&](std::vector<float> x, bool perturb_src, const std::vector<float>& analytic,
                         const char* what) {
    ASSERT_EQ(x.size(), analytic.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float saved = x[i];
      x[i] = saved + step;
      const double plus =
          dot(run(conv(), d, Direction::fwd, perturb_src ? x : src, perturb_src ? weights : x), g);
      x[i] = saved - step;
      const double minus =
          dot(run(conv(), d, Direction::fwd, perturb_src ? x : src, perturb_src ? weights : x), g);
      x[i] = saved;
      // The step is not exact in f32: divide by the distance actually taken.
      const double taken = static_cast<double>(saved + step) - static_cast<double>(saved - step);
      const double numeric = (plus - minus) / taken;
      const double expected = analytic[i];
      ASSERT_NEAR(numeric, expected, 1e-3 * std::max(1.0, std::abs(expected)))
          << what << "[" << i << "] | "
          << d.repro(perturb_src ? Direction::bwd_data : Direction::bwd_weights);
    }
  };
  check(src, true, diff_src, "diff_src");
  check(weights, false, diff_weights, "diff_weights");
}

// ---------------------------------------------------------------------------------------------
// (2) Adjoint identities: <fwd(x, w), g> == <x, bwd_data(g, w)> == <w, bwd_weights(x, g)>.

TEST_P(ReferenceConv, AdjointIdentities) {
  const ConvDesc& d = desc();
  const std::vector<float> src = random_values(d.src_dims().product(), 11);
  const std::vector<float> weights = random_values(d.weights_dims().product(), 12);
  const std::vector<float> g = random_values(d.dst_dims().product(), 13);

  const std::vector<float> dst = run(conv(), d, Direction::fwd, src, weights);
  const std::vector<float> diff_src = run(conv(), d, Direction::bwd_data, g, weights);
  const std::vector<float> diff_weights = run(conv(), d, Direction::bwd_weights, src, g);

  // Each side differs from the exact value only by the f32 rounding of its output vector:
  // at most 2^-24 of the sum of absolute terms.
  const double forward = dot(dst, g);
  const double scale = dot_abs(dst, g) + dot_abs(src, diff_src) + dot_abs(weights, diff_weights);
  EXPECT_NEAR(dot(src, diff_src), forward, 1e-6 * scale) << d.repro(Direction::bwd_data);
  EXPECT_NEAR(dot(weights, diff_weights), forward, 1e-6 * scale) << d.repro(Direction::bwd_weights);
}

// ---------------------------------------------------------------------------------------------
// (4) f16 and bf16: inputs rounded to the dtype give the f32 result rounded once.

float ulp(DType dtype, float value) {
  const float rounded = std::abs(detail::round_to(dtype, value));
  const std::uint16_t bits =
      dtype == DType::f16 ? detail::float_to_half(rounded) : detail::float_to_bf16(rounded);
  const auto next = static_cast<std::uint16_t>(bits + 1);
  const float above =
      dtype == DType::f16 ? detail::half_to_float(next) : detail::bf16_to_float(next);
  return above - rounded;
}

std::vector<float> rounded(DType dtype, std::vector<float> values) {
  for (float& v : values) v = detail::round_to(dtype, v);
  return values;
}

TEST_P(ReferenceConv, HalfPrecisionIsTheF32ResultRoundedOnce) {
  for (const DType dtype : {DType::f16, DType::bf16}) {
    ConvDesc low = desc();
    low.dtype = dtype;
    // The same logical inputs for both runs: values already representable in the dtype.
    const std::vector<float> src = rounded(dtype, random_values(low.src_dims().product(), 21));
    const std::vector<float> weights =
        rounded(dtype, random_values(low.weights_dims().product(), 22));
    const std::vector<float> g = rounded(dtype, random_values(low.dst_dims().product(), 23));

    const auto compare = [&](Direction direction, const std::vector<float>& a,
                             const std::vector<float>& b) {
      const std::vector<float> exact = run(conv(), desc(), direction, a, b);
      const std::vector<float> result = run(conv(), low, direction, a, b);
      ASSERT_EQ(exact.size(), result.size());
      for (std::size_t i = 0; i < exact.size(); ++i) {
        const float expected = detail::round_to(dtype, exact[i]);
        // The f32 result is itself rounded, so its rounding to the dtype may sit one ulp from the
        // correctly rounded value the backend stores.
        ASSERT_LE(std::abs(result[i] - expected), ulp(dtype, expected))
            << to_string(dtype) << " " << to_string(direction) << " element " << i << ": got "
            << result[i] << ", f32 result " << exact[i] << " | " << low.repro(direction);
      }
    };
    compare(Direction::fwd, src, weights);
    compare(Direction::bwd_data, g, weights);
    compare(Direction::bwd_weights, src, g);
  }
}

// ---------------------------------------------------------------------------------------------
// (5) The layout only changes strides: both layouts give bitwise the same logical result.

TEST_P(ReferenceConv, LayoutsAgreeBitwise) {
  ConvDesc first = desc();
  first.layout = Layout::channels_first;
  ConvDesc last = desc();
  last.layout = Layout::channels_last;
  const std::vector<float> src = random_values(first.src_dims().product(), 31);
  const std::vector<float> weights = random_values(first.weights_dims().product(), 32);
  const std::vector<float> g = random_values(first.dst_dims().product(), 33);
  EXPECT_EQ(run(conv(), first, Direction::fwd, src, weights),
            run(conv(), last, Direction::fwd, src, weights));
  EXPECT_EQ(run(conv(), first, Direction::bwd_data, g, weights),
            run(conv(), last, Direction::bwd_data, g, weights));
  EXPECT_EQ(run(conv(), first, Direction::bwd_weights, src, g),
            run(conv(), last, Direction::bwd_weights, src, g));
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceConv, ::testing::ValuesIn(small_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------------------------
// (3) Hand-computed cases.

class ReferenceConvByHand : public ::testing::Test {
 protected:
  std::unique_ptr<detail::Backend> backend_ = reference::make_backend();
  detail::ConvBackend& conv() { return backend_->conv(); }
};

TEST_F(ReferenceConvByHand, TwoByTwoKernelOnThreeByThree) {
  // x = 1 2 3    w = 1 2
  //     4 5 6        3 4
  //     7 8 9
  const ConvDesc d = ConvDesc::from_shapes({1, 1, 3, 3}, {1, 1, 2, 2});
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> ones(4, 1.0f);
  // dst[i][j] = sum of w * the 2x2 window at (i, j): 1*1 + 2*2 + 4*3 + 5*4 = 37, ...
  EXPECT_EQ(run(conv(), d, Direction::fwd, x, w), (std::vector<float>{37, 47, 67, 77}));
  // With diff_dst = 1, diff_src counts the weights covering each input.
  EXPECT_EQ(run(conv(), d, Direction::bwd_data, ones, w),
            (std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
  // With diff_dst = 1, diff_weights[a][b] is the sum of the window shifted by (a, b).
  EXPECT_EQ(run(conv(), d, Direction::bwd_weights, x, ones), (std::vector<float>{12, 16, 24, 28}));
}

TEST_F(ReferenceConvByHand, StrideTwoWithPadding) {
  // Padding 1, stride 2, 2x2 ones kernel over 1..9: windows rows/cols {-1,0} and {1,2}.
  const ConvDesc d = ConvDesc::from_shapes({1, 1, 3, 3}, {1, 1, 2, 2}, {2}, {1});
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> w = {1, 1, 1, 1};
  EXPECT_EQ(run(conv(), d, Direction::fwd, x, w), (std::vector<float>{1, 5, 11, 28}));
  // diff_dst = 1, 10, 100, 1000: each input gets the output whose window holds it (weights 1).
  EXPECT_EQ(run(conv(), d, Direction::bwd_data, {1, 10, 100, 1000}, w),
            (std::vector<float>{1, 10, 10, 100, 1000, 1000, 100, 1000, 1000}));
}

TEST_F(ReferenceConvByHand, DilatedOneD) {
  // dst[i] = x[i] + 10 * x[i + 2]
  const ConvDesc d = ConvDesc::from_shapes({1, 1, 5}, {1, 1, 2}, {1}, {0}, {2});
  EXPECT_EQ(run(conv(), d, Direction::fwd, {1, 2, 3, 4, 5}, {1, 10}),
            (std::vector<float>{31, 42, 53}));
  EXPECT_EQ(run(conv(), d, Direction::bwd_data, {1, 1, 1}, {1, 10}),
            (std::vector<float>{1, 1, 11, 10, 10}));
  EXPECT_EQ(run(conv(), d, Direction::bwd_weights, {1, 2, 3, 4, 5}, {1, 1, 1}),
            (std::vector<float>{6, 12}));
}

TEST_F(ReferenceConvByHand, GroupsKeepChannelsApart) {
  // Two groups of one channel each: channel 0 scaled by 2, channel 1 by -3 (1x1 kernels).
  const ConvDesc d = ConvDesc::from_shapes({1, 2, 1, 2}, {2, 1, 1, 1}, {1}, {0}, {1}, 2);
  EXPECT_EQ(run(conv(), d, Direction::fwd, {1, 2, 3, 4}, {2, -3}),
            (std::vector<float>{2, 4, -9, -12}));
}

TEST_F(ReferenceConvByHand, Bias) {
  const ConvDesc d = ConvDesc::from_shapes({2, 1, 2, 2}, {2, 1, 1, 1});
  Tensor dst = make_tensor(d.dst_dims(), DType::f32, Layout::channels_first,
                           {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  const Tensor bias = make_tensor(d.bias_dims(), DType::f32, Layout::channels_first, {100, -100});
  conv().bias_fwd(d, bias, dst);
  EXPECT_EQ(dst.to_f32(), (std::vector<float>{100, 101, 102, 103, -96, -95, -94, -93, 108, 109, 110,
                                              111, -88, -87, -86, -85}));
  Tensor diff_bias = Tensor::empty(d.bias_dims(), DType::f32);
  const Tensor diff_dst = make_tensor(d.dst_dims(), DType::f32, Layout::channels_last,
                                      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  ConvDesc last = d;
  last.layout = Layout::channels_last;
  conv().bias_bwd(last, diff_dst, diff_bias);
  // Channel 0: 0+1+2+3 + 8+9+10+11; channel 1: 4+5+6+7 + 12+13+14+15.
  EXPECT_EQ(diff_bias.to_f32(), (std::vector<float>{44, 76}));
}

// ---------------------------------------------------------------------------------------------
// Strides, rounding, determinism, the candidate record and bad calls.

TEST_F(ReferenceConvByHand, ReadsAndWritesNonDenseViews) {
  const ConvDesc d = ConvDesc::from_shapes({2, 3, 5, 4}, {2, 3, 3, 3}, {1}, {1});
  const std::vector<float> src = random_values(d.src_dims().product(), 41);
  const std::vector<float> weights = random_values(d.weights_dims().product(), 42);
  const std::vector<float> expected = run(conv(), d, Direction::fwd, src, weights);

  // src with every W element followed by a gap, extra room after rows, channels and images;
  // the gaps hold NaN, so reading one would show in the result.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Dims src_strides{3 * 64 + 5, 64, 2 * 4 + 3, 2};
  std::vector<float> src_memory(static_cast<std::size_t>(2 * src_strides[0]), nan);
  Tensor src_view = Tensor::view(src_memory.data(), d.src_dims(), DType::f32, src_strides);
  src_view.copy_from_f32(src);
  const Tensor weights_tensor = make_tensor(d.weights_dims(), DType::f32, d.layout, weights);
  // dst with the batch dim interleaved with W and each row padded to 12 elements.
  const Dims dst_dims = d.dst_dims();  // 2x2x5x4
  const Dims view_strides{1, 5 * 12, 12, 2};
  std::vector<float> dst_memory(static_cast<std::size_t>(2 * 5 * 12), -7.0f);
  Tensor dst_view = Tensor::view(dst_memory.data(), dst_dims, DType::f32, view_strides);

  detail::ConvArgs args;
  args.src = &src_view;
  args.weights = &weights_tensor;
  args.dst = &dst_view;
  conv().plan(d, Direction::fwd, direct_id)->execute(args, {});
  EXPECT_EQ(dst_view.to_f32(), expected);
  // Every byte outside the view is untouched.
  std::int64_t untouched = 0;
  for (const float v : dst_memory) untouched += v == -7.0f;
  EXPECT_EQ(untouched, static_cast<std::int64_t>(dst_memory.size()) - dst_dims.product());
}

TEST_F(ReferenceConvByHand, HalfPrecisionRoundsOnceNotTwice) {
  // 1 + 2^-11 + 2^-30 lies just above the f16 tie between 1 and 1 + 2^-10, so rounded once it
  // becomes 1 + 2^-10. Through f32 it would first round onto the tie 1 + 2^-11 and then to even,
  // 1.0: one ulp off. Built as 1 * 1 + 2^-11 * 1 + 2^-15 * 2^-15, every input exact in f16.
  const ConvDesc d = [] {
    ConvDesc desc = ConvDesc::from_shapes({1, 3, 1}, {1, 3, 1});
    desc.dtype = DType::f16;
    return desc;
  }();
  const float src_values[] = {1.0f, std::ldexp(1.0f, -11), std::ldexp(1.0f, -15)};
  const float weight_values[] = {1.0f, 1.0f, std::ldexp(1.0f, -15)};
  const std::vector<float> result =
      run(conv(), d, Direction::fwd, {src_values[0], src_values[1], src_values[2]},
          {weight_values[0], weight_values[1], weight_values[2]});
  EXPECT_EQ(result, (std::vector<float>{1.0f + std::ldexp(1.0f, -10)}));
}

// Textbook loops, independent of the backend's tap lists: dst of a 2-D channels_first conv.
std::vector<double> naive_fwd_2d(const ConvDesc& d, const std::vector<float>& src,
                                 const std::vector<float>& weights) {
  const std::int64_t in_h = d.input[0], in_w = d.input[1], out_h = d.output_size(0),
                     out_w = d.output_size(1), k_h = d.kernel[0], k_w = d.kernel[1];
  const std::int64_t in_per_group = d.in_channels / d.groups;
  const std::int64_t out_per_group = d.out_channels / d.groups;
  std::vector<double> dst;
  for (std::int64_t n = 0; n < d.batch; ++n) {
    for (std::int64_t oc = 0; oc < d.out_channels; ++oc) {
      for (std::int64_t oh = 0; oh < out_h; ++oh) {
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          double sum = 0.0;
          for (std::int64_t icg = 0; icg < in_per_group; ++icg) {
            const std::int64_t ic = oc / out_per_group * in_per_group + icg;
            for (std::int64_t kh = 0; kh < k_h; ++kh) {
              for (std::int64_t kw = 0; kw < k_w; ++kw) {
                const std::int64_t ih = oh * d.stride[0] - d.pad_before[0] + kh * d.dilation[0];
                const std::int64_t iw = ow * d.stride[1] - d.pad_before[1] + kw * d.dilation[1];
                if (ih < 0 || ih >= in_h || iw < 0 || iw >= in_w) continue;
                sum += static_cast<double>(src[static_cast<std::size_t>(
                           ((n * d.in_channels + ic) * in_h + ih) * in_w + iw)]) *
                       weights[static_cast<std::size_t>(
                           ((oc * in_per_group + icg) * k_h + kh) * k_w + kw)];
              }
            }
          }
          dst.push_back(sum);
        }
      }
    }
  }
  return dst;
}

TEST_F(ReferenceConvByHand, ThreadedPathMatchesNaiveLoopsAndIsDeterministic) {
  // ~7M multiply-adds per direction: enough to be split over threads.
  ConvDesc d = ConvDesc::from_shapes({2, 16, 40, 40}, {32, 8, 3, 3}, {1}, {1}, {1}, 2);
  d.pad_after = {2, 0, 0};
  d.stride = {1, 2, 1};
  const std::vector<float> src = random_values(d.src_dims().product(), 51);
  const std::vector<float> weights = random_values(d.weights_dims().product(), 52);
  const std::vector<float> g = random_values(d.dst_dims().product(), 53);

  const std::vector<float> dst = run(conv(), d, Direction::fwd, src, weights);
  const std::vector<double> expected = naive_fwd_2d(d, src, weights);
  ASSERT_EQ(dst.size(), expected.size());
  for (std::size_t i = 0; i < dst.size(); ++i) {
    ASSERT_EQ(dst[i], static_cast<float>(expected[i])) << "dst element " << i;
  }
  // The backward passes through the adjoint identities with the checked forward.
  const std::vector<float> diff_src = run(conv(), d, Direction::bwd_data, g, weights);
  const std::vector<float> diff_weights = run(conv(), d, Direction::bwd_weights, src, g);
  const double scale = dot_abs(dst, g) + dot_abs(src, diff_src) + dot_abs(weights, diff_weights);
  EXPECT_NEAR(dot(src, diff_src), dot(dst, g), 1e-6 * scale);
  EXPECT_NEAR(dot(weights, diff_weights), dot(dst, g), 1e-6 * scale);

  EXPECT_EQ(run(conv(), d, Direction::fwd, src, weights), dst);
  EXPECT_EQ(run(conv(), d, Direction::bwd_data, g, weights), diff_src);
  EXPECT_EQ(run(conv(), d, Direction::bwd_weights, src, g), diff_weights);
}

TEST(ReferenceBackend, DescribesItself) {
  const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  EXPECT_EQ(backend->kind(), BackendKind::reference);
  EXPECT_EQ(backend->name(), "reference");
  EXPECT_EQ(backend->fingerprint(), "reference dnnx-" + std::string(version()));
  EXPECT_EQ(backend->device(), Device::cpu());
  EXPECT_EQ(&backend->allocator(), &host_allocator());
  const double ms =
      backend->time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  EXPECT_GE(ms, 5.0);
  EXPECT_LT(ms, 5000.0);
}

TEST(ReferenceBackend, ListsOneDirectCandidate) {
  const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  const ConvDesc d = ConvDesc::from_shapes({1, 4, 6, 6}, {4, 1, 3, 3}, {2}, {1}, {1}, 4,
                                           DType::bf16, Layout::channels_last);
  for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    const std::vector<AlgoInfo> algos = backend->conv().list(d, direction);
    ASSERT_EQ(algos.size(), 1u);
    const AlgoInfo& algo = algos[0];
    EXPECT_EQ(algo.id, "reference:direct");
    EXPECT_EQ(algo.name, "direct loops (f64 accumulation)");
    EXPECT_TRUE(algo.supported) << algo.reason;
    EXPECT_TRUE(algo.reason.empty());
    EXPECT_EQ(algo.workspace_bytes, 0u);
    EXPECT_TRUE(algo.deterministic);
    EXPECT_EQ(algo.notes, (std::vector<std::string>{"direct", "reference"}));
    EXPECT_EQ(algo.families, (std::vector<std::string>{"none"}));
    EXPECT_EQ(backend->conv().plan(d, direction, algo.id)->algo().id, algo.id);
  }
}

// As every backend's listing (ListedOpBackend): an invalid desc is an InvalidArgument naming the
// field, from list() and plan() alike.
TEST(ReferenceBackend, InvalidDescIsRejectedWithTheReason) {
  const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  ConvDesc d = ConvDesc::from_shapes({1, 4, 6, 6}, {4, 4, 3, 3});
  d.groups = 3;  // does not divide 4 channels
  for (const bool listing : {true, false}) {
    try {
      if (listing) {
        backend->conv().list(d, Direction::fwd);
      } else {
        backend->conv().plan(d, Direction::fwd, direct_id);
      }
      FAIL() << (listing ? "list" : "plan") << " accepted groups=3 for 4 channels";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find("groups"), std::string::npos) << error.what();
    }
  }
}

TEST(ReferenceBackend, UnknownIdListsTheValidOnes) {
  const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  const ConvDesc d = ConvDesc::from_shapes({1, 1, 4, 4}, {1, 1, 3, 3});
  try {
    backend->conv().plan(d, Direction::bwd_data, "onednn:jit:avx2");
    FAIL() << "plan accepted an unknown id";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("'onednn:jit:avx2'"), std::string::npos) << error.what();
    EXPECT_NE(error.message().find("reference:direct"), std::string::npos) << error.what();
  }
}

TEST(ReferenceBackend, BadTensorsNameTheArgument) {
  const std::unique_ptr<detail::Backend> backend = reference::make_backend();
  const ConvDesc d = ConvDesc::from_shapes({1, 2, 4, 4}, {3, 2, 3, 3});
  const std::shared_ptr<detail::ConvPlan> plan = backend->conv().plan(d, Direction::fwd, direct_id);
  Tensor src = Tensor::zeros(d.src_dims(), DType::f32);
  Tensor weights = Tensor::zeros(d.weights_dims(), DType::f32);
  Tensor wrong_shape = Tensor::zeros({1, 3, 3, 3}, DType::f32);
  Tensor wrong_dtype = Tensor::zeros(d.dst_dims(), DType::f16);

  const auto expect_error = [&](detail::ConvArgs args, const std::string& role,
                                const std::string& value) {
    try {
      plan->execute(args, {});
      FAIL() << "execute accepted a bad " << role;
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find(role), std::string::npos) << error.what();
      EXPECT_NE(error.message().find(value), std::string::npos) << error.what();
    }
  };
  detail::ConvArgs missing_dst;
  missing_dst.src = &src;
  missing_dst.weights = &weights;
  expect_error(missing_dst, "dst", "missing");
  detail::ConvArgs bad_shape = missing_dst;
  bad_shape.dst = &wrong_shape;
  expect_error(bad_shape, "dst", "1x3x3x3");
  detail::ConvArgs bad_dtype = missing_dst;
  bad_dtype.dst = &wrong_dtype;
  expect_error(bad_dtype, "dst", "f16");
}

}  // namespace
}  // namespace dnnx
