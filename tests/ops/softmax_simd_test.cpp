// The building blocks of the cpu backend's own softmax and cross-entropy kernels
// (src/backends/onednn/simd.hpp), checked exhaustively where that is cheap: every f16
// and bf16 value through the 16-lane loads, a sweep of f32 values through the rounding stores
// (against core/dtype.hpp's scalar conversions), and exp's error over the range it serves.

#include "backends/onednn/simd.hpp"

#include "core/dtype.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

namespace dnnx::onednn::simd {
namespace {

bool same_bits_or_both_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(SoftmaxSimd, EveryHalfLoadsExactly) {
  for (std::uint32_t first = 0; first < 65536; first += 16) {
    F16 in[16];
    for (std::uint32_t j = 0; j < 16; ++j) in[j].bits = static_cast<std::uint16_t>(first + j);
    const Vec v = load_vec(in);
    for (int j = 0; j < 16; ++j) {
      const float expected = detail::half_to_float(in[j].bits);
      ASSERT_TRUE(same_bits_or_both_nan(v[j], expected))
          << "f16 bits 0x" << std::hex << in[j].bits << ": " << v[j] << " vs " << expected;
      ASSERT_TRUE(same_bits_or_both_nan(load(in, j), expected));
    }
  }
}

TEST(SoftmaxSimd, EveryBf16LoadsExactly) {
  for (std::uint32_t first = 0; first < 65536; first += 16) {
    Bf16 in[16];
    for (std::uint32_t j = 0; j < 16; ++j) in[j].bits = static_cast<std::uint16_t>(first + j);
    const Vec v = load_vec(in);
    for (int j = 0; j < 16; ++j)
      ASSERT_TRUE(same_bits_or_both_nan(v[j], detail::bf16_to_float(in[j].bits)));
  }
}

// Stores round to nearest even like the scalar conversions, including ties, subnormals,
// overflow to inf and NaN.
TEST(SoftmaxSimd, StoresRoundLikeTheScalarConversions) {
  std::mt19937 rng(42);
  std::vector<float> values;
  values.reserve(200064);
  for (int i = 0; i < 200000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  // Ties and edges: halfway between f16 / bf16 neighbours, the overflow threshold, subnormals.
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f,
                        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                        0.0f, -0.0f, INFINITY, -INFINITY, NAN}) {
    values.push_back(f);
    values.push_back(-f);
  }
  while (values.size() % 16 != 0) values.push_back(1.0f);
  for (std::size_t first = 0; first < values.size(); first += 16) {
    Vec v;
    for (int j = 0; j < 16; ++j) v[j] = values[first + static_cast<std::size_t>(j)];
    F16 half[16];
    Bf16 brain[16];
    store_vec(half, v);
    store_vec(brain, v);
    for (int j = 0; j < 16; ++j) {
      const float f = v[j];
      const std::uint16_t h = detail::float_to_half(f);
      const std::uint16_t b = detail::float_to_bf16(f);
      if (std::isnan(f)) {
        EXPECT_TRUE(std::isnan(detail::half_to_float(half[j].bits))) << f;
        EXPECT_TRUE(std::isnan(detail::bf16_to_float(brain[j].bits))) << f;
        continue;
      }
      ASSERT_EQ(half[j].bits, h) << "f16 of " << f << " (bits 0x" << std::hex
                                 << std::bit_cast<std::uint32_t>(f) << ")";
      ASSERT_EQ(brain[j].bits, b) << "bf16 of " << f;
    }
  }
}

// exp(x) for x in [-87, 0] within 4 ulps (Cephes' polynomial is specified at 2); below -87 the
// documented clamp; NaN propagates.
TEST(SoftmaxSimd, ExpIsAccurateOnItsRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double exact = std::exp(static_cast<double>(x));
    const float got = exp_nonpositive(x);
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::abs(got - exact) / ulp);
    Vec v = splat(x);
    ASSERT_EQ(exp_vec(v)[3], got) << "vector and scalar exp differ at " << x;
  }
  EXPECT_LE(worst, 4.0);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_GT(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_LT(exp_nonpositive(-1000.0f), 2e-38f);
  EXPECT_TRUE(std::isnan(exp_nonpositive(NAN)));
}

TEST(SoftmaxSimd, RowAndColumnStatistics) {
  float row[37];
  for (int i = 0; i < 37; ++i) row[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  float max = 0, sum = 0;
  row_max_sum(row, 37, max, sum);
  double expected = 0;
  for (float v : row) expected += std::exp(static_cast<double>(v) - 5.0);
  EXPECT_EQ(max, 5.0f);
  EXPECT_NEAR(sum, expected, 1e-5 * expected);
  row[20] = NAN;
  row_max_sum(row, 37, max, sum);
  EXPECT_TRUE(std::isnan(sum)) << "a NaN element must poison the sum";
  // Columns: 3 positions of a 4-class group laid out with stride 3.
  const float columns[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  float cmax[3], csum[3];
  column_max_sum(columns, 4, 3, 3, cmax, csum);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cmax[i], 9.0f + i);
    double s = 0;
    for (int a = 0; a < 4; ++a) s += std::exp(columns[a * 3 + i] - (9.0 + i));
    EXPECT_NEAR(csum[i], s, 1e-6);
  }
}

}  // namespace
}  // namespace dnnx::onednn::simd
