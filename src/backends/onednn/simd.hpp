#pragma once
// Vectorizable f32 building blocks of the cpu backend's own kernels (its normalization, loss,
// pooling and activation candidates): a branch-free exp, loads and stores of the three storage
// types, and the (max, sum of exp) of a group laid out as a row or as a column.
//
// Note [simd clones]
// The build targets baseline x86-64 (SSE2). Plain loops over these always-inline functions are
// compiled, in each entry point marked DNNX_SIMD_CLONES, once per target_clones variant: AVX-512
// (x86-64-v4), AVX2 + F16C + FMA (x86-64-v3) and the baseline; the dynamic loader picks the
// variant for the running CPU. Rows are processed 16 elements at a time in GCC/Clang vector types
// (`Vec`, lowered to one AVX-512, two AVX2 or four SSE registers), so reductions keep 16 partial
// results combined in a fixed order and nothing depends on the compiler's auto-vectorizer. The
// variants may differ in the last bit (AVX2 and AVX-512 contract multiply-adds into FMAs), but a
// machine always runs the same variant, so results are bitwise reproducible run to run.

#include "core/dtype.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

// The 64-byte vector helpers below are always inlined, so the ABI note GCC attaches to passing
// them by value in the baseline variant does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#define DNNX_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace dnnx::onednn::simd {

/// exp(x - n ln 2) for |x - n ln 2| <= ln 2 / 2: Cephes' expf polynomial, on a float or on the
/// lanes of a Vec (F), so that exp_nonpositive and exp_vec compute the same bits per lane.
template <typename F>
[[gnu::always_inline]] inline F exp_reduced(F x, F n) {
  F r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

/// exp(x) for x <= 0 (callers subtract the maximum first), Cephes' expf: range reduction by ln 2
/// and a degree-6 polynomial, within 2 ulp. Inputs below -87 give about 1.6e-38 instead of a
/// denormal or zero (a normalized value below 1e-38 either way); inputs above 0 give 1 (they only
/// arise from rounding, e.g. x - lse with x the maximum). NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 0.0f ? 0.0f : x;
  // Round to nearest through the 1.5 * 2^23 magic number (no libm rint, vectorizable).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float p = exp_reduced(x, n);
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

/// bf16 storage.
struct Bf16 {
  std::uint16_t bits;
};
/// IEEE binary16 storage (bit patterns, so that no compiler needs _Float16).
struct F16 {
  std::uint16_t bits;
};

[[gnu::always_inline]] inline float load(const float* p, std::int64_t k) { return p[k]; }
[[gnu::always_inline]] inline float load(const F16* p, std::int64_t k) {
  return detail::half_to_float(p[k].bits);
}
[[gnu::always_inline]] inline float load(const Bf16* p, std::int64_t k) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(p[k].bits) << 16);
}
[[gnu::always_inline]] inline void store(float* p, std::int64_t k, float v) { p[k] = v; }
[[gnu::always_inline]] inline void store(F16* p, std::int64_t k, float v) {
  p[k].bits = detail::float_to_half(v);
}
[[gnu::always_inline]] inline void store(Bf16* p, std::int64_t k, float v) {
  // Round to nearest even (detail::float_to_bf16), written branch-free.
  const auto bits = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (bits >> 16) | 0x40u;
  p[k].bits = static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// 16 floats (Note [simd clones]) and the integer vectors of the same shape.
using Vec = float __attribute__((vector_size(64)));
using VecI = std::int32_t __attribute__((vector_size(64)));
using VecU = std::uint32_t __attribute__((vector_size(64)));
using VecS = std::uint16_t __attribute__((vector_size(32)));

[[gnu::always_inline]] inline Vec splat(float v) { return Vec{} + v; }

// The conversions, shared with the per-ISA pool kernels, in a namespace of their own: there
// argument-dependent lookup of load_lanes on an F16 or Bf16 pointer in a pool kernel does not
// find them beside that kernel's own.
namespace wide {
#define DNNX_LANE_INLINE [[gnu::always_inline]] inline
#include "backends/onednn/lane_storage.hpp"  // NOLINT(bugprone-suspicious-include)
}  // namespace wide

/// 16 lanes from storage type T (float, F16 or Bf16), exactly.
template <typename T>
[[gnu::always_inline]] inline Vec load_vec(const T* p) {
  return wide::load_lanes(p);
}
/// 16 lanes to storage type T, rounded to nearest even as store() rounds.
template <typename T>
[[gnu::always_inline]] inline void store_vec(T* p, Vec v) {
  wide::store_lanes(p, v);
}

/// exp_nonpositive on 16 lanes.
[[gnu::always_inline]] inline Vec exp_vec(Vec x) {
  x = x < splat(-87.0f) ? splat(-87.0f) : x;
  x = x > splat(0.0f) ? splat(0.0f) : x;
  const Vec n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const Vec p = exp_reduced(x, n);
  const VecI exponent = (__builtin_convertvector(n, VecI) + 127) << 23;
  return p * reinterpret_cast<Vec>(exponent);
}

/// The largest lane (NaN lanes skipped) and the sum of the lanes, in lane order.
[[gnu::always_inline]] inline float max_lanes(Vec v) {
  float max = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < 16; ++j) max = max < v[j] ? v[j] : max;
  return max;
}
[[gnu::always_inline]] inline float sum_lanes(Vec v) {
  float sum = 0;
  for (int j = 0; j < 16; ++j) sum += v[j];
  return sum;
}

/// Partial results a reduction keeps (Note [simd clones]).
inline constexpr int lanes = 16;
/// Positions a column kernel handles at once (its per-position state lives on the stack).
inline constexpr std::int64_t column_block = 64;

/// The maximum and the sum of exp(x - maximum) of `n` contiguous elements. A NaN element is
/// skipped by the maximum but turns the sum into NaN.
template <typename T>
[[gnu::always_inline]] inline void row_max_sum(const T* row, std::int64_t n, float& max_out,
                                               float& sum_out) {
  Vec m = splat(-std::numeric_limits<float>::infinity());
  std::int64_t c = 0;
  for (; c + lanes <= n; c += lanes) {
    const Vec v = load_vec(row + c);
    m = m < v ? v : m;
  }
  float max = max_lanes(m);
  for (; c < n; ++c) {
    const float v = load(row, c);
    max = max < v ? v : max;
  }
  Vec s = splat(0.0f);
  c = 0;
  for (; c + lanes <= n; c += lanes) s += exp_vec(load_vec(row + c) - max);
  float sum = sum_lanes(s);
  for (; c < n; ++c) sum += exp_nonpositive(load(row, c) - max);
  max_out = max;
  sum_out = sum;
}

/// The same for the `n` <= column_block positions starting at `base` of a group laid out as
/// columns: element a of position i at base[a * stride + i]; vectorized over i.
template <typename T>
[[gnu::always_inline]] inline void column_max_sum(const T* base, std::int64_t axis,
                                                  std::int64_t stride, std::int64_t n, float* max,
                                                  float* sum) {
  for (std::int64_t i = 0; i < n; ++i) {
    max[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0;
  }
  for (std::int64_t a = 0; a < axis; ++a) {
    const T* column = base + a * stride;
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = load(column, i);
      max[i] = max[i] < v ? v : max[i];
    }
  }
  for (std::int64_t a = 0; a < axis; ++a) {
    const T* column = base + a * stride;
    for (std::int64_t i = 0; i < n; ++i) sum[i] += exp_nonpositive(load(column, i) - max[i]);
  }
}

/// Elements a thread must get before another one is started (starting one costs tens of
/// microseconds).
inline constexpr std::int64_t min_elements_per_thread = std::int64_t{1} << 18;

/// Runs body(first, end) over [0, blocks) split into contiguous ranges, one per thread when
/// `elements` (the work) is worth it; the calling thread takes the first range. Which block a
/// result comes from never depends on the split, so callers that reduce per block stay
/// deterministic for any thread count.
template <typename Body>
void parallel_blocks(std::int64_t blocks, std::int64_t elements, Body&& body) {
  const auto hardware = static_cast<std::int64_t>(detail::hardware_threads());
  const std::int64_t worth = std::max<std::int64_t>(1, elements / min_elements_per_thread);
  const std::int64_t threads = std::clamp<std::int64_t>(std::min(hardware, worth), 1, blocks);
  if (threads <= 1) {
    body(std::int64_t{0}, blocks);
    return;
  }
  std::vector<std::jthread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));
  for (std::int64_t t = 1; t < threads; ++t)
    workers.emplace_back(body, blocks * t / threads, blocks * (t + 1) / threads);
  body(std::int64_t{0}, blocks / threads);
}

}  // namespace dnnx::onednn::simd
