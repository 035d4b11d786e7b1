#pragma once
// Seeded, portable random inputs for tests: the same seed gives the same values on every
// platform and standard library (std::uniform_real_distribution does not promise that).

#include <dnnx/tensor.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// A stable 64-bit seed derived from text (FNV-1a), e.g. from a test-case name, so that a case
/// keeps its inputs when other cases are added or reordered.
std::uint64_t seed_from(std::string_view text);

/// `count` values uniform in [lo, hi), reproducible from `seed`.
std::vector<float> random_uniform(std::size_t count, std::uint64_t seed, float lo = -1.0f,
                                  float hi = 1.0f);

/// Values clustered near large centers (the large-logit rows of softmax and cross-entropy): `count`
/// values uniform in [-magnitude, magnitude) from `seed`, each plus one of `centers` drawn
/// uniformly with `centers_seed` (nothing is drawn or added when the only center is 0).
std::vector<float> clustered_uniform(std::size_t count, std::uint64_t seed,
                                     std::uint64_t centers_seed, float magnitude,
                                     const std::vector<float>& centers);
/// The largest |value| clustered_uniform can give (before rounding to a dtype).
float clustered_largest(float magnitude, const std::vector<float>& centers);
/// Whether some center is large (|center| >= 1e3): the rows held to the large-logit tolerances.
bool has_large_center(const std::vector<float>& centers);

/// A dense host tensor in `layout` filled with values uniform in [-1, 1) rounded to `dtype`.
Tensor random_tensor(const Dims& dims, DType dtype, Layout layout, std::uint64_t seed);

/// A dense host tensor holding `values` (logical order), rounded to `dtype`.
Tensor tensor_from(const Dims& dims, DType dtype, Layout layout, const std::vector<float>& values);

/// A dense host tensor whose every element is a quiet NaN: outputs start like this so that an
/// implementation that leaves an element unwritten fails the NaN/Inf check.
Tensor nan_tensor(const Dims& dims, DType dtype, Layout layout);

/// The same logical values as `tensor`, with every element replaced by its absolute value.
Tensor abs_tensor(const Tensor& tensor, DType dtype, Layout layout);

}  // namespace dnnx::test
