#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace dnnx::test {

std::uint64_t seed_from(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::vector<float> random_uniform(std::size_t count, std::uint64_t seed, float lo, float hi) {
  // mt19937_64's output sequence is fixed by the standard; the mapping to [0, 1) is ours
  // (24 high bits, exactly representable in float) so the values are portable too.
  std::mt19937_64 engine(seed);
  std::vector<float> values(count);
  const double width = static_cast<double>(hi) - static_cast<double>(lo);
  for (auto& value : values) {
    const double unit = static_cast<double>(engine() >> 40) * 0x1.0p-24;
    value = static_cast<float>(lo + width * unit);
  }
  return values;
}

Tensor tensor_from(const Dims& dims, DType dtype, Layout layout, const std::vector<float>& values) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  tensor.copy_from_f32(values);
  return tensor;
}

std::vector<float> clustered_uniform(std::size_t count, std::uint64_t seed,
                                     std::uint64_t centers_seed, float magnitude,
                                     const std::vector<float>& centers) {
  std::vector<float> values = random_uniform(count, seed, -magnitude, magnitude);
  if (centers.size() > 1 || centers.at(0) != 0.0f) {
    const auto n = static_cast<float>(centers.size());
    const std::vector<float> pick = random_uniform(count, centers_seed, 0, n);
    for (std::size_t k = 0; k < count; ++k)
      values[k] += centers[std::min(static_cast<std::size_t>(pick[k]), centers.size() - 1)];
  }
  return values;
}

float clustered_largest(float magnitude, const std::vector<float>& centers) {
  float center = 0;
  for (const float v : centers) center = std::max(center, std::abs(v));
  return center + magnitude;
}

bool has_large_center(const std::vector<float>& centers) {
  return std::any_of(centers.begin(), centers.end(), [](float v) { return std::abs(v) >= 1e3f; });
}

Tensor random_tensor(const Dims& dims, DType dtype, Layout layout, std::uint64_t seed) {
  return tensor_from(dims, dtype, layout,
                     random_uniform(static_cast<std::size_t>(dims.product()), seed));
}

Tensor nan_tensor(const Dims& dims, DType dtype, Layout layout) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  tensor.fill(std::numeric_limits<float>::quiet_NaN());
  return tensor;
}

Tensor abs_tensor(const Tensor& tensor, DType dtype, Layout layout) {
  std::vector<float> values = tensor.to_f32();
  for (auto& value : values) value = std::fabs(value);
  return tensor_from(tensor.dims(), dtype, layout, values);
}

}  // namespace dnnx::test
