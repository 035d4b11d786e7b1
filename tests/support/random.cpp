#include "support/random.hpp"

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
