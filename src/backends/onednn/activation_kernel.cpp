// dnnx's own elementwise activations on the cpu (cpu:kernel:act, cpu:kernel:act:dst,
// cpu:kernel:act:src).
//
// Note [cpu activation kernel]
// The tensors of an activation are dense buffers of one layout, so the kernel walks the buffer
// in order, whatever the layout: one contiguous range per thread (Note [loop threads]), 16
// elements at a time (masked at the ends) at the AVX-512 level, one at a time at the scalar level.
// The scalar level computes each element in f64 with <cmath> (the reference's formulas) and
// rounds once. The AVX-512 level computes in f32:
//   relu, clipped relu, identity: exact (x < 0 ? 0 : x keeps NaN and -0 as PyTorch does); the
//     gradients multiply dy by 0 or 1, exact too. "x < ceiling" against the f64 ceiling is
//     "x < the smallest float >= ceiling" on floats, so the kinks match the reference's bit for
//     bit.
//   sigmoid 1 / (1 + e) or e / (1 + e) with e = exp(-|x|); tanh Cephes' tanhf (an odd polynomial
//     below |x| = 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) above); elu alpha expm1(x), expm1 a
//     degree-9 Taylor polynomial above -0.5 (no cancellation near 0) and exp(x) - 1 below; swish
//     x sigmoid(x). exp is simd.hpp's exp_nonpositive (within 2 ulps): every argument
//     above is <= 0. The results are within a few f32 ulps (Note [activation tolerances] in
//     tests/ops/activation_cases.cpp).
// The elementwise loops are memory-bound: outputs of at least simd::streaming_min_bytes use
// streaming stores (Note [streaming stores]), which is what makes the kernel faster than oneDNN's
// eltwise on large tensors. Nothing is reduced, so every element's bits are fixed whatever the
// thread count; in place (dst over src) reads each vector before writing it.

#include "backends/onednn/activation_kernel.hpp"

#include "backends/onednn/loop_pool.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace dnnx::onednn::act {
namespace {

using simd::Bf16;
using simd::F16;
using simd::Level;
using simd::Vec;
using simd::VecU;
using Kind = ActivationKind;

// Elements per work item of the thread split: a multiple of 16 (items start 64-byte aligned when
// the buffer does) large enough that an item costs more than waking a thread.
constexpr std::int64_t chunk = std::int64_t{1} << 14;

// The desc's parameters as the formulas use them.
struct Params {
  float alpha = 1;
  float ceiling = 6;     // the f32 nearest the ceiling (the forward's clip)
  float ceiling_up = 6;  // the smallest f32 >= the ceiling: x < ceiling iff x < ceiling_up
};

Params params_of(const ActivationDesc& desc) {
  Params p;
  p.alpha = static_cast<float>(desc.alpha);
  p.ceiling = static_cast<float>(desc.ceiling);
  p.ceiling_up = static_cast<double>(p.ceiling) >= desc.ceiling
                     ? p.ceiling
                     : std::nextafter(p.ceiling, std::numeric_limits<float>::infinity());
  return p;
}

// ---- the scalar level: each element in f64 (<cmath>), rounded once
// ---------------------------------

template <Kind K>
double scalar_forward(double x, const Params& p) {
  switch (K) {
    case Kind::identity: return x;
    case Kind::relu: return x < 0 ? 0.0 : x;
    case Kind::clipped_relu: return x < 0 ? 0.0 : (x > p.ceiling ? p.ceiling : x);
    case Kind::tanh: return std::tanh(x);
    case Kind::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Kind::elu: return x > 0 ? x : p.alpha * std::expm1(x);
    case Kind::swish: return x / (1.0 + std::exp(-x));
  }
  return x;
}

template <Kind K, From F>
double scalar_derivative(double v, const Params& p) {
  if constexpr (F == From::src) {
    switch (K) {
      case Kind::identity: return 1.0;
      case Kind::relu: return v > 0 ? 1.0 : 0.0;
      case Kind::clipped_relu: return v > 0 && v < p.ceiling_up ? 1.0 : 0.0;
      case Kind::tanh: {
        const double t = std::tanh(v);
        return 1.0 - t * t;
      }
      case Kind::sigmoid: {
        const double s = 1.0 / (1.0 + std::exp(-v));
        return s * (1.0 - s);
      }
      case Kind::elu: return v > 0 ? 1.0 : p.alpha * std::exp(v);
      case Kind::swish: {
        const double s = 1.0 / (1.0 + std::exp(-v));
        return s * (1.0 + v * (1.0 - s));
      }
    }
  } else {
    switch (K) {
      case Kind::identity:
      case Kind::swish: return 1.0;
      case Kind::relu: return v > 0 ? 1.0 : 0.0;
      case Kind::clipped_relu: return v > 0 && v < p.ceiling_up ? 1.0 : 0.0;
      case Kind::tanh: return 1.0 - v * v;
      case Kind::sigmoid: return v * (1.0 - v);
      case Kind::elu: return v > 0 ? 1.0 : v + p.alpha;
    }
  }
  return 1.0;
}

template <Kind K, typename T>
void forward_scalar(const T* x, T* y, std::int64_t n, bool /*streaming*/, const Params& p) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<float>(scalar_forward<K>(simd::load(x, i), p));
    simd::store(y, i, v);
  }
}

template <Kind K, From F, typename T>
void backward_scalar(const T* data, const T* dy, T* dx, std::int64_t n, bool /*streaming*/,
                     const Params& p) {
  for (std::int64_t i = 0; i < n; ++i) {
    // The identity reads no data (it may be null).
    const double v = K == Kind::identity ? 0.0 : simd::load(data, i);
    const double g = simd::load(dy, i);
    simd::store(dx, i, static_cast<float>(g * scalar_derivative<K, F>(v, p)));
  }
}

// ---- the AVX-512 level: f32 formulas on 16 lanes (Note [cpu activation kernel])
// -------------------
//
// Every helper is a DNNX_AVX512 function: GCC 12 folds the vector selects of a default-target
// helper (before inlining it) into forms that it then compiles to scalar code inside the AVX-512
// function (16 vcomiss per vector: clipped relu's backward took 9 ms instead of 1.3 on
// 8x256x56x56).

// The desc's parameters as vectors, made once per loop.
struct Coefficients {
  Vec alpha, ceiling, ceiling_up;
};

DNNX_AVX512_INLINE Vec constant(float c) { return simd::splat(c); }
DNNX_AVX512_INLINE Vec exp_np(Vec x) { return simd::exp_vec(x); }
DNNX_AVX512_INLINE Vec magnitude(Vec x) {
  return reinterpret_cast<Vec>(reinterpret_cast<VecU>(x) & 0x7fffffffu);
}
// |t| with the sign of x.
DNNX_AVX512_INLINE Vec with_sign_of(Vec t, Vec x) {
  return reinterpret_cast<Vec>((reinterpret_cast<VecU>(t) & 0x7fffffffu) |
                               (reinterpret_cast<VecU>(x) & 0x80000000u));
}

DNNX_AVX512_INLINE Vec sigmoid(Vec x) {
  const Vec e = exp_np(-magnitude(x));
  const Vec r = 1.0f / (e + 1.0f);
  return x >= constant(0.0f) ? r : e * r;
}

// Cephes' tanhf.
DNNX_AVX512_INLINE Vec hyperbolic_tangent(Vec x) {
  const Vec a = magnitude(x);
  const Vec z = x * x;
  Vec p = constant(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const Vec small = p * z * x + x;
  const Vec e = exp_np(a * -2.0f);
  const Vec large = with_sign_of((1.0f - e) / (e + 1.0f), x);
  return a < constant(0.625f) ? small : large;
}

// exp(x) - 1 for x <= 0.
DNNX_AVX512_INLINE Vec expm1_nonpositive(Vec x) {
  Vec q = constant(1.0f / 362880.0f);
  q = q * x + 1.0f / 40320.0f;
  q = q * x + 1.0f / 5040.0f;
  q = q * x + 1.0f / 720.0f;
  q = q * x + 1.0f / 120.0f;
  q = q * x + 1.0f / 24.0f;
  q = q * x + 1.0f / 6.0f;
  q = q * x + 0.5f;
  q = q * x + 1.0f;
  const Vec small = x * q;
  const Vec large = exp_np(x) - 1.0f;
  return x > constant(-0.5f) ? small : large;
}

template <Kind K>
DNNX_AVX512_INLINE Vec forward_value(Vec x, const Coefficients& p) {
  const Vec zero = constant(0.0f);
  if constexpr (K == Kind::identity) return x;
  if constexpr (K == Kind::relu) return x < zero ? zero : x;
  if constexpr (K == Kind::clipped_relu) {
    const Vec clipped = x > p.ceiling ? p.ceiling : x;
    return x < zero ? zero : clipped;
  }
  if constexpr (K == Kind::tanh) return hyperbolic_tangent(x);
  if constexpr (K == Kind::sigmoid) return sigmoid(x);
  if constexpr (K == Kind::elu) return x > zero ? x : expm1_nonpositive(x) * p.alpha;
  if constexpr (K == Kind::swish) return x * sigmoid(x);
}

// f'(x) from x (the reference's derivative_from_src, in f32).
template <Kind K>
DNNX_AVX512_INLINE Vec derivative_from_src(Vec x, const Coefficients& p) {
  const Vec zero = constant(0.0f);
  const Vec one = constant(1.0f);
  if constexpr (K == Kind::identity) return one;
  if constexpr (K == Kind::relu) return x > zero ? one : zero;
  if constexpr (K == Kind::clipped_relu) {
    return (x > zero ? one : zero) * (x < p.ceiling_up ? one : zero);
  }
  if constexpr (K == Kind::tanh) {
    const Vec t = hyperbolic_tangent(x);
    return one - t * t;
  }
  if constexpr (K == Kind::sigmoid) {
    const Vec s = sigmoid(x);
    return s * (one - s);
  }
  if constexpr (K == Kind::elu) return x > zero ? one : exp_np(x) * p.alpha;
  if constexpr (K == Kind::swish) {
    const Vec s = sigmoid(x);
    return s * (x * (one - s) + 1.0f);
  }
}

// f'(x) from y = f(x) (Note [backward from dst]); swish has none.
template <Kind K>
DNNX_AVX512_INLINE Vec derivative_from_dst(Vec y, const Coefficients& p) {
  const Vec zero = constant(0.0f);
  const Vec one = constant(1.0f);
  if constexpr (K == Kind::identity || K == Kind::swish) return one;
  if constexpr (K == Kind::relu) return y > zero ? one : zero;
  if constexpr (K == Kind::clipped_relu) {
    return (y > zero ? one : zero) * (y < p.ceiling_up ? one : zero);
  }
  if constexpr (K == Kind::tanh) return one - y * y;
  if constexpr (K == Kind::sigmoid) return y * (one - y);
  if constexpr (K == Kind::elu) return y > zero ? one : y + p.alpha;
}

template <Kind K, From F>
DNNX_AVX512_INLINE Vec gradient(Vec data, Vec dy, const Coefficients& p) {
  if constexpr (F == From::src) {
    return dy * derivative_from_src<K>(data, p);
  } else {
    return dy * derivative_from_dst<K>(data, p);
  }
}

DNNX_AVX512_INLINE Coefficients coefficients_of(const Params& params) {
  return {constant(params.alpha), constant(params.ceiling), constant(params.ceiling_up)};
}

template <Kind K, typename T, simd::Bf16Rounding R>
DNNX_AVX512 void forward_avx512(const T* x, T* y, std::int64_t n, bool streaming,
                                const Params& params) {
  using namespace simd::avx512;
  const Coefficients p = coefficients_of(params);
  for_each_vector<R>(y, n, streaming, [&](std::int64_t i, __mmask16 m) DNNX_AVX512_LAMBDA {
    const Vec v = reinterpret_cast<Vec>(load(x + i, m));
    return reinterpret_cast<__m512>(forward_value<K>(v, p));
  });
}

template <Kind K, From F, typename T, simd::Bf16Rounding R>
DNNX_AVX512 void backward_avx512(const T* data, const T* dy, T* dx, std::int64_t n, bool streaming,
                                 const Params& params) {
  using namespace simd::avx512;
  const Coefficients p = coefficients_of(params);
  for_each_vector<R>(dx, n, streaming, [&](std::int64_t i, __mmask16 m) DNNX_AVX512_LAMBDA {
    const Vec g = reinterpret_cast<Vec>(load(dy + i, m));
    const Vec v = K == Kind::identity ? constant(0.0f) : reinterpret_cast<Vec>(load(data + i, m));
    return reinterpret_cast<__m512>(gradient<K, F>(v, g, p));
  });
}

// ---- relu on bf16 / f16 bit patterns
// --------------------------------------------------------------
//
// Note [relu on 16-bit storage]
// Relu and its gradient only compare and select, so on the 16-bit dtypes the AVX-512 level works
// on the stored bits, 32 elements a vector, without converting to f32 and back (a third of the
// instructions; docs/benchmarks.md, "Kernel design measurements"). With `inf` the dtype's infinity
// (0x7f80 bf16, 0x7c00 f16):
//   forward:  x is replaced by +0 when it is negative, non-zero and not NaN (bits in
//             (0x8000, 0x8000 | inf]); -0 and NaN stay, as in the f32 formula;
//   backward: dy passes where x (or y) is positive and not NaN (0 < bits <= inf as int16), else dy
//             times 0: a zero of dy's sign, or a NaN when dy is infinite or NaN.
// These are the f32 formulas' results bit for bit, NaN payloads aside.

template <typename T>
constexpr std::uint16_t infinity_bits() {
  return std::is_same_v<T, Bf16> ? 0x7f80 : 0x7c00;
}

// Writes out[0, n) in vectors of 32 16-bit elements, as for_each_vector (layer_simd.hpp) does 16.
template <typename Body>
DNNX_AVX512_INLINE void for_each_vector32(std::uint16_t* out, std::int64_t n, bool streaming,
                                          Body&& body) {
  auto mask = [](std::int64_t count) DNNX_AVX512_LAMBDA {
    return count >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((std::uint32_t{1} << count) - 1);
  };
  std::int64_t i = 0;
  if (streaming) {
    const auto head =
        static_cast<std::int64_t>((64 - reinterpret_cast<std::uintptr_t>(out) % 64) % 64 / 2);
    if (head > 0 && head < n) {
      _mm512_mask_storeu_epi16(out, mask(head), body(std::int64_t{0}, mask(head)));
      i = head;
    }
    for (; i + 32 <= n; i += 32)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), body(i, mask(32)));
  } else {
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512(out + i, body(i, mask(32)));
  }
  if (i < n) _mm512_mask_storeu_epi16(out + i, mask(n - i), body(i, mask(n - i)));
  if (streaming) _mm_sfence();
}

template <typename T>
DNNX_AVX512 void relu_forward_bits(const T* x, T* y, std::int64_t n, bool streaming,
                                   const Params& /*params*/) {
  const auto* in = reinterpret_cast<const std::uint16_t*>(x);
  const __m512i sign = _mm512_set1_epi16(static_cast<short>(0x8000));
  const __m512i negative_inf = _mm512_set1_epi16(static_cast<short>(0x8000 | infinity_bits<T>()));
  for_each_vector32(reinterpret_cast<std::uint16_t*>(y), n, streaming,
                    [&](std::int64_t i, __mmask32 m) DNNX_AVX512_LAMBDA {
                      const __m512i v = _mm512_maskz_loadu_epi16(m, in + i);
                      const __mmask32 zeroed = _mm512_cmpgt_epu16_mask(v, sign) &
                                               _mm512_cmple_epu16_mask(v, negative_inf);
                      return _mm512_maskz_mov_epi16(~zeroed, v);
                    });
}

template <typename T>
DNNX_AVX512 void relu_backward_bits(const T* data, const T* dy, T* dx, std::int64_t n,
                                    bool streaming, const Params& /*params*/) {
  const auto* v_bits = reinterpret_cast<const std::uint16_t*>(data);
  const auto* g_bits = reinterpret_cast<const std::uint16_t*>(dy);
  const __m512i inf = _mm512_set1_epi16(static_cast<short>(infinity_bits<T>()));
  const __m512i sign = _mm512_set1_epi16(static_cast<short>(0x8000));
  const __m512i magnitude = _mm512_set1_epi16(0x7fff);
  const __m512i nan =
      _mm512_set1_epi16(static_cast<short>(std::is_same_v<T, Bf16> ? 0x7fc0 : 0x7e00));
  for_each_vector32(
      reinterpret_cast<std::uint16_t*>(dx), n, streaming,
      [&](std::int64_t i, __mmask32 m) DNNX_AVX512_LAMBDA {
        const __m512i v = _mm512_maskz_loadu_epi16(m, v_bits + i);
        const __m512i g = _mm512_maskz_loadu_epi16(m, g_bits + i);
        const __mmask32 pass =
            _mm512_cmpgt_epi16_mask(v, _mm512_setzero_si512()) & _mm512_cmple_epi16_mask(v, inf);
        const __mmask32 invalid = _mm512_cmpge_epu16_mask(_mm512_and_si512(g, magnitude), inf);
        const __m512i zero_times = _mm512_mask_mov_epi16(_mm512_and_si512(g, sign), invalid, nan);
        return _mm512_mask_mov_epi16(zero_times, pass, g);
      });
}

template <typename T>
using ForwardLoop = void (*)(const T*, T*, std::int64_t, bool, const Params&);
template <typename T>
using BackwardLoop = void (*)(const T*, const T*, T*, std::int64_t, bool, const Params&);

template <Kind K, typename T>
ForwardLoop<T> forward_loop(Level level) {
  constexpr auto native = simd::Bf16Rounding::native;
  constexpr auto integer = simd::Bf16Rounding::integer;
  if (level == Level::avx512_bf16 && std::is_same_v<T, Bf16>) return &forward_avx512<K, T, native>;
  return level != Level::scalar ? &forward_avx512<K, T, integer> : &forward_scalar<K, T>;
}

template <Kind K, From F, typename T>
BackwardLoop<T> backward_loop(Level level) {
  constexpr auto native = simd::Bf16Rounding::native;
  constexpr auto integer = simd::Bf16Rounding::integer;
  if (level == Level::avx512_bf16 && std::is_same_v<T, Bf16>)
    return &backward_avx512<K, F, T, native>;
  return level != Level::scalar ? &backward_avx512<K, F, T, integer> : &backward_scalar<K, F, T>;
}

template <typename T>
ForwardLoop<T> forward_loop(Kind kind, Level level) {
  // Note [relu on 16-bit storage]
  if constexpr (sizeof(T) == 2) {
    if (kind == Kind::relu && level != Level::scalar) return &relu_forward_bits<T>;
  }
  switch (kind) {
    case Kind::identity: return forward_loop<Kind::identity, T>(level);
    case Kind::relu: return forward_loop<Kind::relu, T>(level);
    case Kind::clipped_relu: return forward_loop<Kind::clipped_relu, T>(level);
    case Kind::tanh: return forward_loop<Kind::tanh, T>(level);
    case Kind::sigmoid: return forward_loop<Kind::sigmoid, T>(level);
    case Kind::elu: return forward_loop<Kind::elu, T>(level);
    case Kind::swish: return forward_loop<Kind::swish, T>(level);
  }
  return nullptr;
}

template <From F, typename T>
BackwardLoop<T> backward_loop(Kind kind, Level level) {
  // Note [relu on 16-bit storage]: y > 0 exactly where x > 0, so both read alike.
  if constexpr (sizeof(T) == 2) {
    if (kind == Kind::relu && level != Level::scalar) return &relu_backward_bits<T>;
  }
  switch (kind) {
    case Kind::identity: return backward_loop<Kind::identity, F, T>(level);
    case Kind::relu: return backward_loop<Kind::relu, F, T>(level);
    case Kind::clipped_relu: return backward_loop<Kind::clipped_relu, F, T>(level);
    case Kind::tanh: return backward_loop<Kind::tanh, F, T>(level);
    case Kind::sigmoid: return backward_loop<Kind::sigmoid, F, T>(level);
    case Kind::elu: return backward_loop<Kind::elu, F, T>(level);
    case Kind::swish: return backward_loop<Kind::swish, F, T>(level);
  }
  return nullptr;
}

// Runs body(first, count) over [0, count) in contiguous ranges of whole chunks, one per thread.
template <typename Body>
void for_ranges(std::int64_t count, std::int64_t work, Body&& body) {
  const std::int64_t chunks = (count + chunk - 1) / chunk;
  threads::run_ranges(chunks, work, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t first = c0 * chunk;
    body(first, std::min(count, c1 * chunk) - first);
  });
}

template <typename T>
void run_forward(const ActivationDesc& desc, Level level, const void* src, void* dst,
                 std::int64_t count) {
  const ForwardLoop<T> loop = forward_loop<T>(desc.kind, level);
  const Params p = params_of(desc);
  const bool streaming = static_cast<std::size_t>(count) * sizeof(T) >= simd::streaming_min_bytes;
  const auto* x = static_cast<const T*>(src);
  auto* y = static_cast<T*>(dst);
  for_ranges(count, count * 2, [&](std::int64_t first, std::int64_t n) {
    loop(x + first, y + first, n, streaming, p);
  });
}

template <typename T>
void run_backward(const ActivationDesc& desc, Level level, From from, const void* data,
                  const void* diff_dst, void* diff_src, std::int64_t count) {
  const BackwardLoop<T> loop = from == From::src ? backward_loop<From::src, T>(desc.kind, level)
                                                 : backward_loop<From::dst, T>(desc.kind, level);
  const Params p = params_of(desc);
  const bool streaming = static_cast<std::size_t>(count) * sizeof(T) >= simd::streaming_min_bytes;
  const auto* v = static_cast<const T*>(data);
  const auto* dy = static_cast<const T*>(diff_dst);
  auto* dx = static_cast<T*>(diff_src);
  for_ranges(count, count * 3, [&](std::int64_t first, std::int64_t n) {
    loop(v == nullptr ? nullptr : v + first, dy + first, dx + first, n, streaming, p);
  });
}

void check_level(Level level) {
  if (!simd::level_supported(level)) {
    detail::raise(ErrorKind::Internal,
                  detail::cat("the activation kernel was asked for simd level ",
                              simd::to_string(level), ", which this CPU does not support"));
  }
}

}  // namespace

bool backward_supported(const ActivationDesc& desc, From from, std::string* why) {
  if (from == From::src || activation_bwd_from_dst(desc.kind, desc.alpha)) return true;
  if (why != nullptr) {
    *why = desc.kind == Kind::elu
               ? detail::cat(
                     "elu backward from dst needs alpha >= 0 (dst does not tell the "
                     "branches apart otherwise), got alpha ",
                     desc.alpha)
               : detail::cat(to_string(desc.kind),
                             " has no derivative as a function of dst (it is not monotonic)");
  }
  return false;
}

void forward(const ActivationDesc& desc, Level level, const void* src, void* dst,
             std::int64_t count) {
  check_level(level);
  switch (desc.dtype) {
    case DType::f16: return run_forward<F16>(desc, level, src, dst, count);
    case DType::bf16: return run_forward<Bf16>(desc, level, src, dst, count);
    default: return run_forward<float>(desc, level, src, dst, count);
  }
}

void backward(const ActivationDesc& desc, Level level, From from, const void* data,
              const void* diff_dst, void* diff_src, std::int64_t count) {
  check_level(level);
  std::string why;
  if (!backward_supported(desc, from, &why)) detail::raise(ErrorKind::Unsupported, why);
  switch (desc.dtype) {
    case DType::f16: return run_backward<F16>(desc, level, from, data, diff_dst, diff_src, count);
    case DType::bf16: return run_backward<Bf16>(desc, level, from, data, diff_dst, diff_src, count);
    default: return run_backward<float>(desc, level, from, data, diff_dst, diff_src, count);
  }
}

}  // namespace dnnx::onednn::act
