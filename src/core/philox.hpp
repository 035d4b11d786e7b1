#pragma once
// Counter-based random numbers shared by every backend: Philox4x32-10, the conversion of its words
// to f32 values of each distribution, dnnx's own log, sin(pi x) / cos(pi x) and erfinv, and the
// f32 -> f16 / bf16 rounding. One header compiled by the host compiler (reference and cpu backends,
// tests) and by nvcc (src/backends/cudnn/kernels), C++17, so that every backend computes the same
// bits.
//
// Note [counter-based random numbers]
// Element i (the logical row-major index of a tensor, whatever its layout) of a call whose
// generator state is (seed, offset) takes its random word from Philox block offset + i / 4, lane
// i % 4: the block is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011; Random123's known-answer vectors are in tests/ops/random_test.cpp) of the counter
// {block low 32 bits, block high 32 bits, 0, 0} under the key {seed low 32 bits, seed high 32
// bits}. A call over n elements uses ceil(n / 4) blocks and advances the generator's offset by as
// many (Generator::consume), so consecutive calls never share a block. Nothing depends on launch
// geometry or thread count: a thread or loop iteration computes whole blocks from their index.
//
// Note [bit-identical draws]
// Every backend must give the same bits for the same (seed, offset), so the arithmetic from the
// random word to the stored value is fixed to the last bit:
// - a word u becomes the f32 (u >> 8) * 2^-24 in [0, 1): exact integer-to-float arithmetic;
// - every product, sum, quotient and square root goes through mul / add / sub / div / sqrt_rn
//   below (IEEE round to nearest; on the device the __f*_rn intrinsics, which nvcc never fuses
//   into an FMA), and every multiply-add that should be fused is an explicit fma: no result
//   depends on whether a compiler contracts a * b + c (nvcc does by default; the host files that
//   include this header also build with -ffp-contract=off);
// - the normal distribution (Box-Muller) and trunc_normal (inverse error function) use dnnx's
//   own log (the classic FreeBSD / musl logf reduction and polynomial, < 1 ulp), sincospi (exact
//   range reduction of pi x, Taylor polynomials) and erfinv (Giles' single-precision
//   approximation), never libm's or CUDA's, whose last bits differ;
// - f16 / bf16 values are the f32 value rounded to nearest even by to_half_bits / to_bf16_bits.
// tests/ops/random_test.cpp checks the accuracy of log and sincospi against libm in double on a
// dense sweep, and the fill and dropout tests compare the backends bitwise.

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DNNX_RANDOM_FN __host__ __device__ __forceinline__
#else
#define DNNX_RANDOM_FN inline
#endif

namespace dnnx::detail::random {

// ---- IEEE arithmetic that no compiler contracts (Note [bit-identical draws]) --------------------

DNNX_RANDOM_FN float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DNNX_RANDOM_FN float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DNNX_RANDOM_FN float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DNNX_RANDOM_FN float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DNNX_RANDOM_FN float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DNNX_RANDOM_FN float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
/// Round to the nearest integer, ties to even (the default rounding mode on the host).
DNNX_RANDOM_FN float rint(float a) {
#if defined(__CUDA_ARCH__)
  return rintf(a);
#else
  return std::nearbyint(a);
#endif
}

DNNX_RANDOM_FN std::uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}
DNNX_RANDOM_FN float float_of(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// ---- Philox4x32-10 ------------------------------------------------------------------------------

/// Four 32-bit words: a Philox counter or its output.
struct Words {
  std::uint32_t v[4];
};

/// Philox4x32 with 10 rounds of `counter` under the key {key0, key1} (Random123's philox4x32_R).
DNNX_RANDOM_FN Words philox4x32_10(Words counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;  // multipliers
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;  // key schedule (Weyl)
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += w0;
      key1 += w1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * counter.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * counter.v[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    counter = Words{{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
  }
  return counter;
}

/// Block `block` of the stream of `seed` (Note [counter-based random numbers]).
DNNX_RANDOM_FN Words block_words(std::uint64_t seed, std::uint64_t block) {
  const Words counter{
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                       static_cast<std::uint32_t>(seed >> 32));
}

/// A word as an f32 in [0, 1): (u >> 8) * 2^-24, exact.
DNNX_RANDOM_FN float unit(std::uint32_t word) {
  return static_cast<float>(word >> 8) * 5.9604644775390625e-8f;  // 2^-24
}
/// A word as an f32 in (0, 1]: ((u >> 8) + 1) * 2^-24, exact (the argument of log).
DNNX_RANDOM_FN float unit_open_zero(std::uint32_t word) {
  return static_cast<float>((word >> 8) + 1u) * 5.9604644775390625e-8f;
}

// ---- dnnx's own elementary functions ------------------------------------------------------------

/// Natural logarithm of an f32, < 1 ulp (FreeBSD's e_logf.c reduction to [sqrt(2)/2, sqrt(2))
/// and its polynomial, as musl's logf had it). log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
DNNX_RANDOM_FN float log(float x) {
  constexpr float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f;
  constexpr float lg1 = 0.66666662693f, lg2 = 0.40000972152f, lg3 = 0.28498786688f,
                  lg4 = 0.24279078841f;
  std::uint32_t ix = bits_of(x);
  int k = 0;
  if (ix < 0x00800000u || (ix >> 31) != 0) {            // zero, subnormal or negative
    if ((ix << 1) == 0) return float_of(0xff800000u);   // -inf
    if ((ix >> 31) != 0) return float_of(0x7fc00000u);  // NaN
    k -= 25;                                            // subnormal: scale up by 2^25
    x = mul(x, 33554432.0f);
    ix = bits_of(x);
  } else if (ix >= 0x7f800000u) {
    return x;  // inf or NaN
  } else if (ix == 0x3f800000u) {
    return 0.0f;
  }
  // x = 2^k (1 + f) with 1 + f in [sqrt(2)/2, sqrt(2)).
  ix += 0x3f800000u - 0x3f3504f3u;
  k += static_cast<int>(ix >> 23) - 0x7f;
  ix = (ix & 0x007fffffu) + 0x3f3504f3u;
  const float f = sub(float_of(ix), 1.0f);
  const float s = div(f, add(2.0f, f));
  const float z = mul(s, s);
  const float w = mul(z, z);
  const float t1 = mul(w, fma(w, lg4, lg2));
  const float t2 = mul(z, fma(w, lg3, lg1));
  const float r = add(t2, t1);
  const float hfsq = mul(mul(0.5f, f), f);
  const float dk = static_cast<float>(k);
  const float sum = sub(fma(s, add(hfsq, r), mul(dk, ln2_lo)), hfsq);
  return fma(dk, ln2_hi, add(sum, f));
}

/// sin(pi x) and cos(pi x) of an f32, a few ulp (tests/ops/random_test.cpp measures them). The
/// reduction is exact: x = n / 2 + y with n = rint(2 x) and |y| <= 1/4 (both exact in f32), then
/// the Taylor polynomials of sin(pi y) and cos(pi y), whose truncation error at |y| = 1/4 is below
/// 1e-8 relative, rotated by the quadrant n mod 4. Non-finite x gives NaN for both.
DNNX_RANDOM_FN void sincospi(float x, float* sin_out, float* cos_out) {
  if (!(bits_of(x) << 1 < 0xff000000u)) {  // inf or NaN
    *sin_out = *cos_out = float_of(0x7fc00000u);
    return;
  }
  const float n = rint(mul(2.0f, x));  // 2x is exact (no overflow below 2^127)
  const float y = fma(-0.5f, n, x);    // exact: |y| <= 1/4 on x's grid
  // n mod 4 from n, an integer-valued f32: below 2^24 through an integer; above, n is a
  // multiple of 4 (its ulp is >= 2 and 2x is even there).
  int quadrant = 0;
  const float magnitude = n < 0.0f ? -n : n;
  if (magnitude < 16777216.0f) {
    const auto whole = static_cast<std::int32_t>(n);
    quadrant = static_cast<int>(static_cast<std::uint32_t>(whole) & 3u);
  }
  const float y2 = mul(y, y);
  // sin(pi y) = y (pi + y^2 (s1 + y^2 (s2 + y^2 (s3 + y^2 s4)))), pi split in two.
  constexpr float pi_hi = 3.14159274101257324f, pi_lo = -8.74227766e-08f;
  float p = 0.08214588661112819f;
  p = fma(p, y2, -0.5992645293207919f);
  p = fma(p, y2, 2.550164039877345f);
  p = fma(p, y2, -5.167712780049969f);
  const float sin_pi_y = fma(y, pi_hi, fma(mul(y, y2), p, mul(y, pi_lo)));
  // cos(pi y) = 1 + y^2 (c1 + y^2 (c2 + y^2 (c3 + y^2 (c4 + y^2 c5)))).
  float q = -0.02580689139001405f;
  q = fma(q, y2, 0.23533063035889312f);
  q = fma(q, y2, -1.3352627688545893f);
  q = fma(q, y2, 4.058712126416768f);
  q = fma(q, y2, -4.934802200544679f);
  const float cos_pi_y = fma(q, y2, 1.0f);
  switch (quadrant) {
    case 0: *sin_out = sin_pi_y, *cos_out = cos_pi_y; break;
    case 1: *sin_out = cos_pi_y, *cos_out = -sin_pi_y; break;
    case 2: *sin_out = -sin_pi_y, *cos_out = -cos_pi_y; break;
    default: *sin_out = -cos_pi_y, *cos_out = sin_pi_y; break;
  }
  // sin(pi n) is +0 for even integers n >= 0 (and -0 for negative ones): keep x's sign on zeros.
  if (*sin_out == 0.0f) *sin_out = x < 0.0f ? -0.0f : 0.0f;
}

/// The inverse error function of an f32 in [-1, 1] (M. Giles, "Approximating the erfinv
/// function", GPU Computing Gems, 2010, single-precision version), with dnnx's log:
/// +-inf at +-1, NaN outside [-1, 1].
DNNX_RANDOM_FN float erfinv(float x) {
  float w = -log(mul(sub(1.0f, x), add(1.0f, x)));
  float p;
  if (w < 5.0f) {
    w = sub(w, 2.5f);
    p = 2.81022636e-08f;
    p = fma(p, w, 3.43273939e-07f);
    p = fma(p, w, -3.5233877e-06f);
    p = fma(p, w, -4.39150654e-06f);
    p = fma(p, w, 0.00021858087f);
    p = fma(p, w, -0.00125372503f);
    p = fma(p, w, -0.00417768164f);
    p = fma(p, w, 0.246640727f);
    p = fma(p, w, 1.50140941f);
  } else {
    w = sub(sqrt_rn(w), 3.0f);
    p = -0.000200214257f;
    p = fma(p, w, 0.000100950558f);
    p = fma(p, w, 0.00134934322f);
    p = fma(p, w, -0.00367342844f);
    p = fma(p, w, 0.00573950773f);
    p = fma(p, w, -0.0076224613f);
    p = fma(p, w, 0.00943887047f);
    p = fma(p, w, 1.00167406f);
    p = fma(p, w, 2.83297682f);
  }
  if (x == 1.0f || x == -1.0f) return x < 0.0f ? float_of(0xff800000u) : float_of(0x7f800000u);
  if (!(x > -1.0f && x < 1.0f)) return float_of(0x7fc00000u);
  return mul(p, x);
}

// ---- f32 -> f16 / bf16, round to nearest even ---------------------------------------------------
// The rounding of core/dtype.hpp's float_to_half / float_to_bf16, written again here because
// that header is host-only C++20 (std::bit_cast) and nvcc compiles this one as C++17 device code;
// tests/ops/random_test.cpp checks that the two agree on a sweep of f32 values.

/// IEEE binary16 bits of `value` rounded to nearest even; overflow gives inf, NaN stays NaN.
DNNX_RANDOM_FN std::uint16_t to_half_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf
  if (abs < 0x38800000u) {  // subnormal or zero in binary16
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t half_mantissa = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u) != 0)) ++half_mantissa;
    return static_cast<std::uint16_t>(sign | half_mantissa);
  }
  std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  rounded -= 0x38000000u;  // rebias 127 -> 15
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

/// bfloat16 bits of `value` rounded to nearest even; NaN stays NaN.
DNNX_RANDOM_FN std::uint16_t to_bf16_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// ---- element order ------------------------------------------------------------------------------

/// Where the elements of a dense tensor lie: the memory offset (in elements) of each logical
/// row-major index, which is the index itself when the layout's memory order is row-major (every
/// channels_first tensor, and channels_last ones whose channel or spatial extent is 1).
struct Geometry {
  static constexpr int max_rank = 5;
  int rank = 1;
  bool identity = true;                 ///< offset(i) == i
  std::int64_t dims[max_rank] = {};     ///< logical dims
  std::int64_t strides[max_rank] = {};  ///< element strides of the logical dims

  /// The memory offset of logical row-major index `index`.
  DNNX_RANDOM_FN std::int64_t offset(std::int64_t index) const {
    if (identity) return index;
    std::int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (index % dims[d]) * strides[d];
      index /= dims[d];
    }
    return offset;
  }
};

// ---- distributions ------------------------------------------------------------------------------

/// What fill draws, with the parameters the op layer derives once per call on the host (so every
/// backend computes from the same f32 values).
enum class DrawKind : int { constant, uniform, normal, trunc_normal };

struct DrawParams {
  DrawKind kind = DrawKind::constant;
  float value = 0.0f;  ///< constant: every element
  float low = 0.0f;    ///< uniform: low + range u; trunc_normal: the uniform's low in (-1, 1)
  float range = 1.0f;  ///< uniform, trunc_normal: high - low (f32)
  float mean = 0.0f;   ///< normal, trunc_normal: mean + scale z
  float scale = 1.0f;  ///< normal: std; trunc_normal: std sqrt(2)
  float min = 0.0f;    ///< trunc_normal: values below are clamped to it (a)
  float max = 0.0f;    ///< trunc_normal: values above are clamped to it (b)
};

/// The values of elements 4 * block_index .. + 3 relative to the call (Note [counter-based
/// random numbers]): `block` is the absolute Philox block (offset + block_index). Normal values
/// come in Box-Muller pairs: words (0, 1) give elements 0 (cosine) and 1 (sine), words (2, 3)
/// elements 2 and 3.
DNNX_RANDOM_FN void draw4(const DrawParams& params, std::uint64_t seed, std::uint64_t block,
                          float out[4]) {
  if (params.kind == DrawKind::constant) {
    out[0] = out[1] = out[2] = out[3] = params.value;
    return;
  }
  const Words words = block_words(seed, block);
  switch (params.kind) {
    case DrawKind::uniform:
      for (int i = 0; i < 4; ++i) out[i] = fma(unit(words.v[i]), params.range, params.low);
      return;
    case DrawKind::normal:
      for (int pair = 0; pair < 2; ++pair) {
        const float radius = sqrt_rn(mul(-2.0f, log(unit_open_zero(words.v[2 * pair]))));
        float sine = 0.0f, cosine = 0.0f;
        sincospi(mul(2.0f, unit(words.v[2 * pair + 1])), &sine, &cosine);
        out[2 * pair] = fma(mul(radius, cosine), params.scale, params.mean);
        out[2 * pair + 1] = fma(mul(radius, sine), params.scale, params.mean);
      }
      return;
    case DrawKind::trunc_normal:
      for (int i = 0; i < 4; ++i) {
        const float v = fma(unit(words.v[i]), params.range, params.low);
        const float x = fma(erfinv(v), params.scale, params.mean);
        out[i] = x < params.min ? params.min : (x > params.max ? params.max : x);
      }
      return;
    case DrawKind::constant: break;
  }
}

/// Dropout's keep decision for a word: unit(word) >= p (Note [dropout mask] in
/// src/core/dropout_desc.cpp): element i is kept when the uniform value fill would draw for it
/// from the same generator state is >= p.
DNNX_RANDOM_FN bool keep(std::uint32_t word, float p) { return unit(word) >= p; }

/// The keep bits of elements start .. start + 31 of a dropout call at Philox `offset` (start a
/// multiple of 32: the eight blocks from offset + start / 4), bit k for element start + k; bits
/// at or past `count` are 0, so a mask word is a function of the call's elements alone.
DNNX_RANDOM_FN std::uint32_t mask_word(std::uint64_t seed, std::uint64_t offset, std::int64_t start,
                                       std::int64_t count, float p) {
  std::uint32_t bits = 0;
  for (int b = 0; b < 8; ++b) {
    if (start + 4 * b >= count) break;
    const Words drawn = block_words(seed, offset + static_cast<std::uint64_t>(start / 4 + b));
    for (int k = 0; k < 4; ++k) {
      if (keep(drawn.v[k], p)) bits |= 1u << (4 * b + k);
    }
  }
  const std::int64_t valid = count - start;
  if (valid < 32) bits &= (1u << valid) - 1u;
  return bits;
}

}  // namespace dnnx::detail::random
