#include "support/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace dnnx::test {

std::string index_string(const Dims& dims, std::int64_t flat) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(dims.rank()));
  for (int i = dims.rank() - 1; i >= 0; --i) {
    const std::int64_t extent = std::max<std::int64_t>(dims[i], 1);
    index[static_cast<std::size_t>(i)] = flat % extent;
    flat /= extent;
  }
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < index.size(); ++i) out << (i ? "," : "") << index[i];
  out << ']';
  return out.str();
}

::testing::AssertionResult all_finite(const std::vector<float>& values, const Dims& dims,
                                      std::string_view what, std::string_view context) {
  constexpr int shown = 5;
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    if (bad < shown) {
      first << "\n    " << what << index_string(dims, static_cast<std::int64_t>(i)) << " = "
            << values[i];
    }
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << values.size()
         << " elements are NaN or Inf (outputs start as NaN, so NaN can also mean 'never written')"
         << first.str() << "\n  " << context;
}

::testing::AssertionResult all_finite(const Tensor& tensor, std::string_view what,
                                      std::string_view context) {
  return all_finite(tensor.to_f32(), tensor.dims(), what, context);
}

::testing::AssertionResult close_within_scale(const std::vector<float>& actual,
                                              const std::vector<float>& expected,
                                              const std::vector<float>& scale, const Dims& dims,
                                              const Tolerance& tolerance, std::string_view what,
                                              std::string_view context, double* worst_ratio) {
  if (actual.size() != expected.size() || actual.size() != scale.size()) {
    return ::testing::AssertionFailure()
           << what << ": sizes differ: actual " << actual.size() << ", expected "
           << expected.size() << ", scale " << scale.size() << "\n  " << context;
  }
  struct Offender {
    std::size_t index;
    double ratio;
  };
  std::vector<Offender> offenders;
  double worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double bound = tolerance.rel * scale[i] + tolerance.abs;
    // A zero bound (an output made of padding only) demands exact equality.
    const double ratio = bound > 0 ? error / bound : (error > 0 ? HUGE_VAL : 0.0);
    if (!(ratio <= 1.0)) offenders.push_back({i, ratio});
    if (!(ratio <= worst)) worst = ratio;
  }
  if (worst_ratio) *worst_ratio = worst;
  if (offenders.empty()) return ::testing::AssertionSuccess();

  std::sort(offenders.begin(), offenders.end(),
            [](const Offender& a, const Offender& b) { return a.ratio > b.ratio; });
  std::ostringstream out;
  out.precision(9);
  out << what << ": " << offenders.size() << " of " << actual.size()
      << " elements outside |actual - expected| <= " << tolerance.rel << " * scale + "
      << tolerance.abs << " (worst at " << worst << "x the bound)";
  const std::size_t shown = std::min<std::size_t>(offenders.size(), 5);
  for (std::size_t k = 0; k < shown; ++k) {
    const std::size_t i = offenders[k].index;
    out << "\n    " << what << index_string(dims, static_cast<std::int64_t>(i))
        << ": actual " << actual[i] << ", expected " << expected[i] << ", scale " << scale[i]
        << " (" << offenders[k].ratio << "x)";
  }
  out << "\n  " << context;
  return ::testing::AssertionFailure() << out.str();
}

::testing::AssertionResult bitwise_equal(const Tensor& first, const Tensor& second,
                                         std::string_view what, std::string_view context) {
  if (!(first.dims() == second.dims()) || first.dtype() != second.dtype() ||
      !(first.strides() == second.strides())) {
    return ::testing::AssertionFailure() << what << ": tensors differ in shape: "
                                         << describe(first) << " vs " << describe(second)
                                         << "\n  " << context;
  }
  const std::size_t bytes = first.span_bytes();
  if (bytes == 0 || std::memcmp(first.data(), second.data(), bytes) == 0) {
    return ::testing::AssertionSuccess();
  }
  const std::vector<float> a = first.to_f32();
  const std::vector<float> b = second.to_f32();
  std::int64_t differing = 0;
  std::size_t first_index = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      if (differing == 0) first_index = i;
      ++differing;
    }
  }
  std::ostringstream out;
  out.precision(9);
  out << what << ": two runs of a candidate that claims to be deterministic differ in "
      << differing << " of " << a.size() << " elements";
  if (differing > 0) {
    out << "; first at " << index_string(first.dims(), static_cast<std::int64_t>(first_index))
        << ": " << a[first_index] << " vs " << b[first_index];
  }
  out << "\n  " << context;
  return ::testing::AssertionFailure() << out.str();
}

}  // namespace dnnx::test
