#pragma once
// Scalar conversions between the storage dtypes and f32, shared by every backend.

#include <dnnx/tensor.hpp>

#include <bit>
#include <cstdint>
#include <cmath>
#include <cstring>

namespace dnnx::detail {

/// IEEE binary16 bits -> float (exact).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {  // inf / nan
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  return std::bit_cast<float>(bits);
}

/// float -> IEEE binary16 bits, round to nearest even; overflow gives inf, NaN stays NaN.
inline std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // nan
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // rounds to zero
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t half_mantissa = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<std::uint16_t>(sign | half_mantissa);
  }
  std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
  rounded -= 0x38000000u;                                     // rebias 127 -> 15
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

/// bfloat16 bits -> float (exact).
inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

/// The element at `p` (of type `dtype`) as float.
inline float load_f32(const void* p, DType dtype) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::f16: {
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return half_to_float(h);
    }
    case DType::bf16: {
      std::uint16_t b;
      std::memcpy(&b, p, sizeof b);
      return bf16_to_float(b);
    }
    case DType::i32: {
      std::int32_t i;
      std::memcpy(&i, p, sizeof i);
      return static_cast<float>(i);
    }
    case DType::i64: {
      std::int64_t i;
      std::memcpy(&i, p, sizeof i);
      return static_cast<float>(i);
    }
  }
  return 0.0f;
}

/// Stores `value` converted to `dtype` (round to nearest even) at `p`.
inline void store_f32(void* p, DType dtype, float value) {
  switch (dtype) {
    case DType::f32:
      std::memcpy(p, &value, sizeof value);
      return;
    case DType::f16: {
      const std::uint16_t h = float_to_half(value);
      std::memcpy(p, &h, sizeof h);
      return;
    }
    case DType::bf16: {
      const std::uint16_t b = float_to_bf16(value);
      std::memcpy(p, &b, sizeof b);
      return;
    }
    case DType::i32: {
      const auto i = static_cast<std::int32_t>(std::nearbyint(value));
      std::memcpy(p, &i, sizeof i);
      return;
    }
    case DType::i64: {
      const auto i = static_cast<std::int64_t>(std::nearbyint(value));
      std::memcpy(p, &i, sizeof i);
      return;
    }
  }
}

/// The integer element at `p` (dtype i32 or i64) — labels, exact beyond 2^24.
inline std::int64_t load_index(const void* p, DType dtype) {
  if (dtype == DType::i32) {
    std::int32_t i;
    std::memcpy(&i, p, sizeof i);
    return i;
  }
  std::int64_t i;
  std::memcpy(&i, p, sizeof i);
  return i;
}

/// f64 -> f32 rounded to odd: truncated, with the last bit set when anything was cut off (Note
/// [rounding once] in backends/reference/conv.cpp). The f32 -> f16/bf16 rounding to nearest even
/// that follows then rounds the f64 value once, correctly. NaN stays NaN.
inline float round_to_odd(double value) {
  const auto nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || std::isnan(value)) return nearest;
  float truncated = nearest;
  if (std::abs(static_cast<double>(nearest)) > std::abs(value))
    truncated = std::nextafter(nearest, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(truncated) | 1u);
}

/// Rounds `value` through `dtype` and back (what storing it would keep).
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32:
      return value;
    case DType::f16:
      return half_to_float(float_to_half(value));
    case DType::bf16:
      return bf16_to_float(float_to_bf16(value));
    case DType::i32:
    case DType::i64:
      return std::nearbyint(value);
  }
  return value;
}

}  // namespace dnnx::detail
