// Elementwise dtype conversions (convert.hpp).
//
// Note [dtype conversions]
// oneDNN 3.2 converts f16 and bf16 <-> f32 on CPUs without native f16/bf16 support only with its
// reference reorder ("simple:any"), which takes 60-80 ns per value on the AVX2 development machine:
// 100-130 ms for one 8x64x56x56 activation, three times what the f32 convolution of that layer
// takes. convert() does it in a few ns per value with plain C++ (bf16 is the upper half of an f32;
// f16 through detail::half_to_float / float_to_half) and, for f16 where the CPU has F16C (every
// AVX2 CPU), with vcvtph2ps / vcvtps2ph, 8 values per instruction. Both round f32 to nearest even
// and agree on every value (NaN stays NaN, its payload may differ), as oneDNN's reorders do.
// The F16C code lives in functions compiled for F16C and AVX (GCC's target attribute), chosen at
// run time; the build targets baseline x86-64.

#include "backends/onednn/convert.hpp"

#include "backends/onednn/loop_pool.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>

namespace dnnx::onednn {
namespace {

// Note [dtype conversions]: values [first, last) of one conversion.
struct ConvertRange {
  const void* from;
  DType from_type;
  void* to;
  DType to_type;
  float scale;
};

template <DType Type>
float load(const void* values, std::int64_t i) {
  if constexpr (Type == DType::f16) {
    return detail::half_to_float(static_cast<const std::uint16_t*>(values)[i]);
  } else if constexpr (Type == DType::bf16) {
    return detail::bf16_to_float(static_cast<const std::uint16_t*>(values)[i]);
  } else {
    return static_cast<const float*>(values)[i];
  }
}

template <DType Type>
void store(void* values, std::int64_t i, float value) {
  if constexpr (Type == DType::f16) {
    static_cast<std::uint16_t*>(values)[i] = detail::float_to_half(value);
  } else if constexpr (Type == DType::bf16) {
    static_cast<std::uint16_t*>(values)[i] = detail::float_to_bf16(value);
  } else {
    static_cast<float*>(values)[i] = value;
  }
}

// One loop per pair of types, so that the compiler sees straight-line conversions (and
// vectorises those it can: bf16 -> f32 is a shift).
template <DType From, DType To>
void convert_scalar(const ConvertRange& c, std::int64_t first, std::int64_t last) {
  if (c.scale == 1.0f) {
    for (std::int64_t i = first; i < last; ++i) store<To>(c.to, i, load<From>(c.from, i));
  } else {
    for (std::int64_t i = first; i < last; ++i) store<To>(c.to, i, c.scale * load<From>(c.from, i));
  }
}

constexpr int type_pair(DType from, DType to) {
  return static_cast<int>(from) * 8 + static_cast<int>(to);
}

__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const std::uint16_t* from, float* to,
                                                         std::int64_t first, std::int64_t last,
                                                         float scale) {
  const __m256 factor = _mm256_set1_ps(scale);
  std::int64_t i = first;
  for (; i + 8 <= last; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
    _mm256_storeu_ps(to + i, scale == 1.0f ? v : _mm256_mul_ps(v, factor));
  }
  for (; i < last; ++i) to[i] = scale * detail::half_to_float(from[i]);
}

__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* from, std::uint16_t* to,
                                                         std::int64_t first, std::int64_t last,
                                                         float scale) {
  const __m256 factor = _mm256_set1_ps(scale);
  std::int64_t i = first;
  for (; i + 8 <= last; i += 8) {
    __m256 v = _mm256_loadu_ps(from + i);
    if (scale != 1.0f) v = _mm256_mul_ps(v, factor);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < last; ++i) to[i] = detail::float_to_half(scale * from[i]);
}

void convert_range(const ConvertRange& c, std::int64_t first, std::int64_t last,
                   ConvertLevel level) {
  using enum DType;
  if (level == ConvertLevel::f16c && c.from_type == f16 && c.to_type == f32) {
    f16_to_f32_f16c(static_cast<const std::uint16_t*>(c.from), static_cast<float*>(c.to), first,
                    last, c.scale);
    return;
  }
  if (level == ConvertLevel::f16c && c.from_type == f32 && c.to_type == f16) {
    f32_to_f16_f16c(static_cast<const float*>(c.from), static_cast<std::uint16_t*>(c.to), first,
                    last, c.scale);
    return;
  }
  switch (type_pair(c.from_type, c.to_type)) {
    case type_pair(f16, f32): return convert_scalar<f16, f32>(c, first, last);
    case type_pair(bf16, f32): return convert_scalar<bf16, f32>(c, first, last);
    case type_pair(f32, f16): return convert_scalar<f32, f16>(c, first, last);
    case type_pair(f32, bf16): return convert_scalar<f32, bf16>(c, first, last);
    case type_pair(f32, f32): return convert_scalar<f32, f32>(c, first, last);
    case type_pair(f16, f16): return convert_scalar<f16, f16>(c, first, last);
    case type_pair(bf16, bf16): return convert_scalar<bf16, bf16>(c, first, last);
    case type_pair(f16, bf16): return convert_scalar<f16, bf16>(c, first, last);
    case type_pair(bf16, f16): return convert_scalar<bf16, f16>(c, first, last);
    default: break;
  }
  DNNX_ASSERT(false, "convert from ", to_string(c.from_type), " to ", to_string(c.to_type));
}

}  // namespace

ConvertLevel best_convert_level() {
  static const ConvertLevel level = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c") ? ConvertLevel::f16c
                                                                           : ConvertLevel::scalar;
  }();
  return level;
}

void convert(const void* from, DType from_type, void* to, DType to_type, std::int64_t count,
             float scale, ConvertLevel level) {
  const ConvertRange range{from, from_type, to, to_type, scale};
  // Ranges of whole cache lines, so that no two threads write one.
  constexpr std::int64_t chunk = 1024;
  const std::int64_t chunks = (count + chunk - 1) / chunk;
  threads::run_ranges(chunks, count, [&](std::int64_t c0, std::int64_t c1) {
    convert_range(range, c0 * chunk, std::min(c1 * chunk, count), level);
  });
}

}  // namespace dnnx::onednn
