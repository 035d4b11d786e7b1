#pragma once
// The vector level of the cpu backend's own layer kernels (batch-norm: cpu:kernel:bnorm,
// activations: cpu:kernel:act) and their AVX-512 loads and stores of the three storage types.
//
// Note [simd levels]
// The build targets baseline x86-64, so the AVX-512 code of these kernels lives in functions
// marked DNNX_AVX512 (GCC's target attribute: the intrinsics below compile inside them only), next
// to a scalar version of each, and a kernel picks one at run time through simd::best_level():
//   avx512_bf16  AVX-512 and AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later);
//   avx512       AVX-512 F, BW, VL, DQ with F16C and FMA (x86-64-v4);
//   scalar       any x86-64;
// the best the CPU and the OS support. Unlike simd.hpp's target_clones, the choice is an
// argument, so the tests run every level the machine has and compare them
// (tests/ops/batch_norm_kernel_test.cpp, tests/ops/activation_kernel_test.cpp). A level is a fixed
// sequence of operations, so each is bitwise reproducible run to run; levels may differ in the
// last bits (FMA contraction, summation order of the vector lanes).
//   Conversions: bf16 -> f32 is a 16-bit shift. f32 -> bf16 rounds to nearest even: at the avx512
// level in integer arithmetic (detail::float_to_bf16's formula, 9 instructions for 16 values), at
// the avx512_bf16 level with vcvtneps2bf16 (one: batch-norm training on 8x256x56x56 bf16, one
// thread, went from 2.12 / 2.96 ms to 1.97 / 2.65 ms forward / backward), which gives the same
// bits except that it flushes results below 2^-126 (f32 subnormals) to zero.
// The instruction is written as inline assembly: GCC lets only functions targeted at avx512bf16
// use its intrinsic, which would keep the whole kernel off CPUs without it. f16 <-> f32 are
// F16C's vcvtph2ps / vcvtps2ph (round to nearest even), which agree with detail::half_to_float /
// float_to_half on every non-NaN value (LayerSimd in tests/ops/batch_norm_kernel_test.cpp checks
// all 65536 halves and bf16s and the rounding of a sweep of floats; NaN stays NaN, its payload may
// differ).
//   Tails are masked loads and stores, so the vector code handles any length.
//
// Note [streaming stores]
// An output much larger than the caches is written with non-temporal stores (vmovntps and
// friends): a normal store first reads the line it writes (read for ownership), so a kernel that
// reads one tensor and writes another moves three bytes per two it needs (relu on an 8x256x56x56
// tensor: docs/benchmarks.md, "Kernel design measurements"). Below streaming_min_bytes the output is
// left in the cache for the next layer to read.

#include "backends/onednn/simd.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

/// The target of the AVX-512 functions of the layer kernels (Note [simd levels]).
#define DNNX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))
/// An always-inlined AVX-512 helper.
#define DNNX_AVX512_INLINE DNNX_AVX512 __attribute__((always_inline)) inline
/// The attributes of a lambda inside an AVX-512 function, written after its parameter list: GCC
/// does not pass a function's target on to the lambdas it contains.
#define DNNX_AVX512_LAMBDA DNNX_AVX512 __attribute__((always_inline))

namespace dnnx::onednn::simd {

/// The code a layer kernel runs (Note [simd levels]).
enum class Level : std::uint8_t {
  scalar,       ///< plain C++, any x86-64
  avx512,       ///< AVX-512 F/BW/VL/DQ with F16C and FMA
  avx512_bf16,  ///< the same, and AVX512_BF16's f32 -> bf16 conversion
};

/// Every level, in increasing order.
inline constexpr Level levels[] = {Level::scalar, Level::avx512, Level::avx512_bf16};

/// "scalar", "avx512" or "avx512_bf16".
constexpr std::string_view to_string(Level level) {
  switch (level) {
    case Level::avx512: return "avx512";
    case Level::avx512_bf16: return "avx512_bf16";
    case Level::scalar: break;
  }
  return "scalar";
}

/// Whether this CPU (and OS) can run `level`.
inline bool level_supported(Level level) {
  if (level == Level::scalar) return true;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  return avx512 && (level == Level::avx512 || __builtin_cpu_supports("avx512bf16"));
}

/// The best level this CPU runs, worked out once.
inline Level best_level() {
  static const Level level = level_supported(Level::avx512_bf16) ? Level::avx512_bf16
                             : level_supported(Level::avx512)    ? Level::avx512
                                                                 : Level::scalar;
  return level;
}

/// How the vector code rounds f32 to bf16 (Note [simd levels]).
enum class Bf16Rounding : bool {
  integer,  ///< integer arithmetic (avx512)
  native,   ///< vcvtneps2bf16 (avx512_bf16)
};

/// The rounding of `level`.
constexpr Bf16Rounding rounding_of(Level level) {
  return level == Level::avx512_bf16 ? Bf16Rounding::native : Bf16Rounding::integer;
}

/// Outputs of at least this many bytes are written with streaming stores (Note [streaming
/// stores]): four times the 2 MiB L2 of one core of the machine measured, so that what a core
/// writes cannot stay in its L2 anyway.
inline constexpr std::size_t streaming_min_bytes = std::size_t{8} << 20;

namespace avx512 {

/// Lanes of one f32 vector.
inline constexpr std::int64_t width = 16;

// The intrinsics below are the zero-masking forms under an all-lanes mask where a plain form
// exists, and halves of vectors are __builtin_shufflevector rather than casts or extracts: GCC
// 12's plain forms start from a self-initialised _mm512_undefined_*() value that -Wuninitialized
// reports wherever they are inlined (GCC bug 105593); the code is the same.
inline constexpr __mmask16 all16 = 0xffff;
inline constexpr __mmask8 all8 = 0xff;

/// The mask of the first min(n, 16) lanes; n >= 1.
DNNX_AVX512_INLINE __mmask16 first_lanes(std::int64_t n) {
  return n >= width ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}
/// The same for any n (none for n <= 0).
DNNX_AVX512_INLINE __mmask16 some_lanes(std::int64_t n) {
  return n <= 0 ? static_cast<__mmask16>(0) : first_lanes(n);
}
/// Lanes 0-7 (half 0) or 8-15 (half 1) of `mask`, as the mask of 8 f64 lanes.
DNNX_AVX512_INLINE __mmask8 half_lanes(__mmask16 mask, int half) {
  return static_cast<__mmask8>(mask >> (8 * half));
}

// ---- loads: 16 elements (or the lanes of `mask`, the others 0) as f32

DNNX_AVX512_INLINE __m512 load(const float* p) { return _mm512_loadu_ps(p); }
DNNX_AVX512_INLINE __m512 load(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, p);
}
DNNX_AVX512_INLINE __m512 widen_bf16(__m256i bits) {
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(all16, _mm512_maskz_cvtepu16_epi32(all16, bits), 16));
}
DNNX_AVX512_INLINE __m512 load(const Bf16* p) {
  return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
DNNX_AVX512_INLINE __m512 load(const Bf16* p, __mmask16 mask) {
  return widen_bf16(_mm256_maskz_loadu_epi16(mask, p));
}
DNNX_AVX512_INLINE __m512 load(const F16* p) {
  return _mm512_maskz_cvtph_ps(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
DNNX_AVX512_INLINE __m512 load(const F16* p, __mmask16 mask) {
  return _mm512_maskz_cvtph_ps(all16, _mm256_maskz_loadu_epi16(mask, p));
}

// ---- conversions to the 16-bit storage types

template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE __m256i narrow_bf16(__m512 v) {
  if constexpr (R == Bf16Rounding::native) {
    __m256i narrow;
    asm("vcvtneps2bf16 %1, %0" : "=v"(narrow) : "v"(v));
    return narrow;
  }
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i high = _mm512_maskz_srli_epi32(all16, bits, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lsb);
  const __m512i rounded = _mm512_maskz_srli_epi32(all16, sum, 16);
  const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_maskz_cvtepi32_epi16(all16, _mm512_mask_blend_epi32(nan, rounded, quiet));
}
DNNX_AVX512_INLINE __m256i narrow_f16(__m512 v) {
  return _mm512_maskz_cvtps_ph(all16, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// ---- stores: 16 elements (or the lanes of `mask`); R matters for bf16 only

template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(float* p, __m512 v) {
  _mm512_storeu_ps(p, v);
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(float* p, __m512 v, __mmask16 mask) {
  _mm512_mask_storeu_ps(p, mask, v);
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(Bf16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_bf16<R>(v));
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(Bf16* p, __m512 v, __mmask16 mask) {
  _mm256_mask_storeu_epi16(p, mask, narrow_bf16<R>(v));
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(F16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_f16(v));
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void store(F16* p, __m512 v, __mmask16 mask) {
  _mm256_mask_storeu_epi16(p, mask, narrow_f16(v));
}

// ---- streaming stores (Note [streaming stores]): `p` aligned to 16 elements' bytes

template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void stream(float* p, __m512 v) {
  _mm512_stream_ps(p, v);
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void stream(Bf16* p, __m512 v) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow_bf16<R>(v));
}
template <Bf16Rounding R = Bf16Rounding::integer>
DNNX_AVX512_INLINE void stream(F16* p, __m512 v) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow_f16(v));
}

/// Elements before `p` reaches the alignment streaming stores of 16 elements need (64 bytes for
/// f32, 32 for the 16-bit types).
template <typename T>
DNNX_AVX512_INLINE std::int64_t to_stream_alignment(const T* p) {
  constexpr std::uintptr_t bytes = sizeof(T) * width;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return static_cast<std::int64_t>(((bytes - address % bytes) % bytes) / sizeof(T));
}

/// Writes out[0, n) in vectors of 16, rounding bf16 as R says: `body(i, mask)` (a
/// DNNX_AVX512_LAMBDA) returns the f32 values of elements [i, i + 16), of which the lanes of
/// `mask` are stored (a masked tail, and a masked head up to the alignment of streaming stores).
/// With `streaming` the aligned vectors are streaming stores, followed by an sfence (their order is
/// weak).
template <Bf16Rounding R = Bf16Rounding::integer, typename T, typename Body>
DNNX_AVX512_INLINE void for_each_vector(T* out, std::int64_t n, bool streaming, Body&& body) {
  std::int64_t i = 0;
  if (streaming) {
    const std::int64_t head = to_stream_alignment(out);
    if (head > 0 && head < n) {
      const __mmask16 mask = first_lanes(head);
      store<R>(out, body(std::int64_t{0}, mask), mask);
      i = head;
    }
    for (; i + width <= n; i += width) stream<R>(out + i, body(i, first_lanes(width)));
  } else {
    for (; i + width <= n; i += width) store<R>(out + i, body(i, first_lanes(width)));
  }
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    store<R>(out + i, body(i, mask), mask);
  }
  if (streaming) _mm_sfence();
}

/// The sum of the 8 lanes in a fixed order.
DNNX_AVX512_INLINE double sum_lanes(__m512d v) {
  const __m256d half = _mm256_add_pd(__builtin_shufflevector(v, v, 0, 1, 2, 3),
                                     __builtin_shufflevector(v, v, 4, 5, 6, 7));
  const __m128d quarter = _mm_add_pd(_mm256_castpd256_pd128(half), _mm256_extractf128_pd(half, 1));
  return _mm_cvtsd_f64(_mm_add_sd(quarter, _mm_unpackhi_pd(quarter, quarter)));
}

/// Lanes 0-7 and 8-15 of `v` in f64.
DNNX_AVX512_INLINE __m512d low_pd(__m512 v) {
  return _mm512_maskz_cvtps_pd(all8, __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7));
}
DNNX_AVX512_INLINE __m512d high_pd(__m512 v) {
  return _mm512_maskz_cvtps_pd(all8, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
}

}  // namespace avx512
}  // namespace dnnx::onednn::simd
