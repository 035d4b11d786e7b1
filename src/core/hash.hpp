#pragma once
// How every desc's hash() folds its fields into one value, so that the descs of different ops mix
// alike and a change to the mixing is made once.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace dnnx::detail {

/// Folds `value` into `seed` (boost::hash_combine's mixing, with the 64-bit golden ratio).
inline void hash_mix(std::size_t& seed, std::uint64_t value) {
  seed ^= std::hash<std::uint64_t>{}(value) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

/// The bits of `value` to hash: -0.0 == 0.0, so both give the bits of 0.0.
inline std::uint64_t hash_bits(double value) {
  return std::bit_cast<std::uint64_t>(value == 0 ? 0.0 : value);
}

/// The bits of `value` to hash: -0.0f == 0.0f, so both give the bits of 0.0f.
inline std::uint32_t hash_bits(float value) {
  return std::bit_cast<std::uint32_t>(value == 0 ? 0.0f : value);
}

/// Folds `dims` (a Dims) into `seed`: its rank, then each entry.
template <typename DimsType>
void hash_dims(std::size_t& seed, const DimsType& dims) {
  hash_mix(seed, static_cast<std::uint64_t>(dims.rank()));
  for (const std::int64_t d : dims) hash_mix(seed, static_cast<std::uint64_t>(d));
}

}  // namespace dnnx::detail
