#pragma once
// Assertions shared by the parity tests: NaN/Inf checks, an error-bound comparison against a
// per-element scale, and bitwise equality. Each returns a gtest AssertionResult whose failure
// message carries `context` (the caller puts the desc's repro() and the candidate id there).

#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// An error bound of the form |actual - expected| <= rel * scale[i] + abs, where scale[i] is a
/// per-element magnitude (for convolution: the sum of |products| that formed the element).
struct Tolerance {
  double rel = 0;  ///< multiple of the element's scale
  double abs = 0;  ///< absolute slack, for values near the bottom of the dtype's range
};

/// "[n,c,h,w]": the logical multi-index of row-major flat index `flat` in `dims`.
std::string index_string(const Dims& dims, std::int64_t flat);

/// Fails if any of `values` (logical order of a tensor of `dims`) is NaN or infinite, naming the
/// first few offenders. Run it before comparing: a NaN compares false and hides the cause.
::testing::AssertionResult all_finite(const std::vector<float>& values, const Dims& dims,
                                      std::string_view what, std::string_view context);
/// The same for a host tensor.
::testing::AssertionResult all_finite(const Tensor& tensor, std::string_view what,
                                      std::string_view context);

/// Fails if any element breaks `tolerance`; the message gives the number of offenders, the
/// worst ratio |actual - expected| / bound, and the worst few elements with their index.
/// `worst_ratio`, if given, receives the largest ratio seen (also on success), which lets tests
/// report how much of the tolerance was used.
::testing::AssertionResult close_within_scale(const std::vector<float>& actual,
                                              const std::vector<float>& expected,
                                              const std::vector<float>& scale, const Dims& dims,
                                              const Tolerance& tolerance, std::string_view what,
                                              std::string_view context,
                                              double* worst_ratio = nullptr);

/// Fails unless the two host tensors have the same dims, dtype and strides and identical bytes.
::testing::AssertionResult bitwise_equal(const Tensor& first, const Tensor& second,
                                         std::string_view what, std::string_view context);

}  // namespace dnnx::test
