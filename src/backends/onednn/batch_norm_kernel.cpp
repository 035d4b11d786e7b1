// dnnx's own batch normalization on the cpu (cpu:kernel:bnorm).
//
// Note [batch-norm loops]
// The data is walked in memory order, in one of two shapes: "planes" (spatial mode, channels
// first, more than one spatial position: statistic k owns N runs of S contiguous values) and
// "columns" (everything else: an M x K row-major matrix whose column k is statistic k; channels-
// last spatial data, per-activation data, N x C).
//   Statistics are one pass of shifted sums in f64: with p the statistic's first value, sum (x - p)
// and sum (x - p)^2 give mean = p + s1 / n and var = s2 / n - (s1 / n)^2 without the cancellation
// of raw sums of squares (Chan, Golub & LeVeque, "Algorithms for computing the sample variance",
// 1983); backward sums dy and dy (x - mean). The sums follow a fixed tree, whatever the thread
// count and however the work is split (Note [loop threads]):
//   - planes: each run is cut into pieces of piece_values values (the last one shorter). A piece
//     is summed alone (in independent partial sums, added up in a fixed order at its end), and a
//     statistic's total is the sum of its pieces in memory order. With at least 4 statistics per
//     thread, each thread takes a range of statistics and normalises each one right after summing
//     it, while its values are still in the core's L2, so the data is read from memory once. With
//     fewer, all pieces are summed in parallel into a buffer, each total is formed from it in the
//     same order, and the normalisation runs over the pieces in parallel: the same bits, with every
//     thread busy.
//   - columns: the rows are cut into blocks of block_rows rows (a function of M and K only) and
//     the columns into tiles; a (block, tile) item sums its values row by row per column, and a
//     column's total is the sum of its blocks' partial sums in block order. Items run in
//     parallel, then the totals, then the normalisation over the items again.
//   Outputs are y = x a + b (forward) and dx = a dy + b x + c (training backward) or dx = a dy
// (inference backward) with per-statistic f32 coefficients formed in f64. The vector level keeps
// the same tree with its own partial sums and contracts the multiply-adds into FMAs (Note [simd
// levels]). Plane outputs of at least simd::streaming_min_bytes use streaming stores (Note
// [streaming stores]); column outputs do not (a tile writes part of each row).

#include "backends/onednn/batch_norm_kernel.hpp"

#include "backends/onednn/loop_pool.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace dnnx::onednn::bnorm {
namespace {

using simd::Bf16;
using simd::F16;
using simd::Level;

// Note [batch-norm loops]: the size of a piece of a plane run; of a columns block, in values, and
// the most (block, column) partial sums a call keeps; the columns of a tile.
constexpr std::int64_t piece_values = 8192;
constexpr std::int64_t block_values = 1 << 14;
constexpr std::int64_t max_partials = 1 << 18;
constexpr std::int64_t tile_columns = 256;

// The partial sums of the column walk, per calling thread and kept from call to call: allocated
// per call, their pages were given back to the system and faulted in again on every call (a few
// percent of a normalisation).
std::vector<double>& scratch() {
  thread_local std::vector<double> buffer;
  return buffer;
}

// Two sums of one statistic (moments: of x - p and (x - p)^2; gradient: of dy and dy (x - mean)).
struct Sums {
  double a = 0, b = 0;
};

// ---- the scalar level ---------------------------------------------------------------------------

template <typename T>
struct ScalarLevel {
  static float in(const T* p, std::int64_t i) { return simd::load(p, i); }
  static void out(T* p, std::int64_t i, float v) { simd::store(p, i, v); }

  // A piece is `runs` runs of `length` values, `stride` apart (Note [batch-norm loops]). Four
  // independent chains of f64 adds (one would cost an add latency per value).
  static Sums moments(const T* x, std::int64_t runs, std::int64_t length, std::int64_t stride,
                      double pivot, std::int64_t /*prefetch*/) {
    double a[4] = {}, b[4] = {};
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* run = x + r * stride;
      std::int64_t i = 0;
      for (; i + 4 <= length; i += 4) {
        for (int j = 0; j < 4; ++j) {
          const double d = static_cast<double>(in(run, i + j)) - pivot;
          a[j] += d;
          b[j] += d * d;
        }
      }
      for (; i < length; ++i) {
        const double d = static_cast<double>(in(run, i)) - pivot;
        a[0] += d;
        b[0] += d * d;
      }
    }
    return {(a[0] + a[1]) + (a[2] + a[3]), (b[0] + b[1]) + (b[2] + b[3])};
  }

  static Sums gradient_sums(const T* x, const T* dy, std::int64_t runs, std::int64_t length,
                            std::int64_t stride, double mean, std::int64_t /*prefetch*/) {
    double a[4] = {}, b[4] = {};
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* x_run = x + r * stride;
      const T* dy_run = dy + r * stride;
      std::int64_t i = 0;
      for (; i + 4 <= length; i += 4) {
        for (int j = 0; j < 4; ++j) {
          const double g = in(dy_run, i + j);
          a[j] += g;
          b[j] += g * (static_cast<double>(in(x_run, i + j)) - mean);
        }
      }
      for (; i < length; ++i) {
        const double g = in(dy_run, i);
        a[0] += g;
        b[0] += g * (static_cast<double>(in(x_run, i)) - mean);
      }
    }
    return {(a[0] + a[1]) + (a[2] + a[3]), (b[0] + b[1]) + (b[2] + b[3])};
  }

  static void affine(const T* x, T* y, std::int64_t runs, std::int64_t length, std::int64_t stride,
                     float a, float b, bool /*streaming*/) {
    for (std::int64_t r = 0; r < runs; ++r) {
      const std::int64_t o = r * stride;
      for (std::int64_t i = 0; i < length; ++i) out(y + o, i, in(x + o, i) * a + b);
    }
  }

  static void affine2(const T* x, const T* dy, T* dx, std::int64_t runs, std::int64_t length,
                      std::int64_t stride, float a, float b, float c, bool /*streaming*/) {
    for (std::int64_t r = 0; r < runs; ++r) {
      const std::int64_t o = r * stride;
      for (std::int64_t i = 0; i < length; ++i)
        out(dx + o, i, a * in(dy + o, i) + b * in(x + o, i) + c);
    }
  }

  static void block_moments(const T* x, std::int64_t rows, std::int64_t stride, std::int64_t width,
                            const double* pivot, double* sum_a, double* sum_b) {
    std::fill(sum_a, sum_a + width, 0.0);
    std::fill(sum_b, sum_b + width, 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * stride;
      for (std::int64_t c = 0; c < width; ++c) {
        const double d = static_cast<double>(in(row, c)) - pivot[c];
        sum_a[c] += d;
        sum_b[c] += d * d;
      }
    }
  }

  static void block_gradient_sums(const T* x, const T* dy, std::int64_t rows, std::int64_t stride,
                                  std::int64_t width, const double* mean, double* sum_a,
                                  double* sum_b) {
    std::fill(sum_a, sum_a + width, 0.0);
    std::fill(sum_b, sum_b + width, 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* x_row = x + r * stride;
      const T* dy_row = dy + r * stride;
      for (std::int64_t c = 0; c < width; ++c) {
        const double g = in(dy_row, c);
        sum_a[c] += g;
        sum_b[c] += g * (static_cast<double>(in(x_row, c)) - mean[c]);
      }
    }
  }

  static void block_affine(const T* x, T* y, std::int64_t rows, std::int64_t stride,
                           std::int64_t width, const float* a, const float* b) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < width; ++c)
        out(y + r * stride, c, in(x + r * stride, c) * a[c] + b[c]);
    }
  }

  static void block_affine2(const T* x, const T* dy, T* dx, std::int64_t rows, std::int64_t stride,
                            std::int64_t width, const float* a, const float* b, const float* c) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r * stride;
      for (std::int64_t j = 0; j < width; ++j)
        out(dx + o, j, a[j] * in(dy + o, j) + b[j] * in(x + o, j) + c[j]);
    }
  }
};

// ---- the AVX-512 level --------------------------------------------------------------------------

template <typename T, simd::Bf16Rounding R>
struct Avx512Level {
  // Asks for the lines of 32 elements at `p` (Note [batch-norm loops]: the next statistic's run,
  // which the hardware prefetchers do not see coming).
  DNNX_AVX512_INLINE static void prefetch(const T* p) {
    const auto* bytes = reinterpret_cast<const char*>(p);
    _mm_prefetch(bytes, _MM_HINT_T0);
    if constexpr (sizeof(T) == 4) _mm_prefetch(bytes + 64, _MM_HINT_T0);
  }

  // 32 values per step into eight f64 partial sums per sum; masked vectors for each run's tail.
  DNNX_AVX512 static Sums moments(const T* x, std::int64_t runs, std::int64_t length,
                                  std::int64_t stride, double pivot, std::int64_t ahead) {
    using namespace simd::avx512;
    const __m512d p = _mm512_set1_pd(pivot);
    __m512d s1[4], s2[4];
    for (int j = 0; j < 4; ++j) s1[j] = s2[j] = _mm512_setzero_pd();
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* run = x + r * stride;
      std::int64_t i = 0;
      for (; i + 2 * width <= length; i += 2 * width) {
        if (ahead != 0) prefetch(run + i + ahead);
        const __m512 v0 = load(run + i);
        const __m512 v1 = load(run + i + width);
        const __m512d d[4] = {_mm512_sub_pd(low_pd(v0), p), _mm512_sub_pd(high_pd(v0), p),
                              _mm512_sub_pd(low_pd(v1), p), _mm512_sub_pd(high_pd(v1), p)};
        for (int j = 0; j < 4; ++j) {
          s1[j] = _mm512_add_pd(s1[j], d[j]);
          s2[j] = _mm512_fmadd_pd(d[j], d[j], s2[j]);
        }
      }
      for (; i < length; i += width) {
        const __mmask16 m = first_lanes(length - i);
        const __m512 v = load(run + i, m);
        const __m512d d0 = _mm512_maskz_sub_pd(static_cast<__mmask8>(m), low_pd(v), p);
        const __m512d d1 = _mm512_maskz_sub_pd(static_cast<__mmask8>(m >> 8), high_pd(v), p);
        s1[0] = _mm512_add_pd(s1[0], d0);
        s1[1] = _mm512_add_pd(s1[1], d1);
        s2[0] = _mm512_fmadd_pd(d0, d0, s2[0]);
        s2[1] = _mm512_fmadd_pd(d1, d1, s2[1]);
      }
    }
    return {sum_lanes(_mm512_add_pd(_mm512_add_pd(s1[0], s1[1]), _mm512_add_pd(s1[2], s1[3]))),
            sum_lanes(_mm512_add_pd(_mm512_add_pd(s2[0], s2[1]), _mm512_add_pd(s2[2], s2[3])))};
  }

  // Masked lanes load dy = 0 and add nothing.
  DNNX_AVX512 static Sums gradient_sums(const T* x, const T* dy, std::int64_t runs,
                                        std::int64_t length, std::int64_t stride, double mean,
                                        std::int64_t ahead) {
    using namespace simd::avx512;
    const __m512d mu = _mm512_set1_pd(mean);
    __m512d s1[4], s2[4];
    for (int j = 0; j < 4; ++j) s1[j] = s2[j] = _mm512_setzero_pd();
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* x_run = x + r * stride;
      const T* dy_run = dy + r * stride;
      std::int64_t i = 0;
      for (; i + 2 * width <= length; i += 2 * width) {
        if (ahead != 0) {
          prefetch(x_run + i + ahead);
          prefetch(dy_run + i + ahead);
        }
        const __m512 g0 = load(dy_run + i);
        const __m512 g1 = load(dy_run + i + width);
        const __m512 x0 = load(x_run + i);
        const __m512 x1 = load(x_run + i + width);
        const __m512d g[4] = {low_pd(g0), high_pd(g0), low_pd(g1), high_pd(g1)};
        const __m512d d[4] = {_mm512_sub_pd(low_pd(x0), mu), _mm512_sub_pd(high_pd(x0), mu),
                              _mm512_sub_pd(low_pd(x1), mu), _mm512_sub_pd(high_pd(x1), mu)};
        for (int j = 0; j < 4; ++j) {
          s1[j] = _mm512_add_pd(s1[j], g[j]);
          s2[j] = _mm512_fmadd_pd(g[j], d[j], s2[j]);
        }
      }
      for (; i < length; i += width) {
        const __mmask16 m = first_lanes(length - i);
        const __m512 g = load(dy_run + i, m);
        const __m512 v = load(x_run + i, m);
        const __m512d g0 = low_pd(g);
        const __m512d g1 = high_pd(g);
        s1[0] = _mm512_add_pd(s1[0], g0);
        s1[1] = _mm512_add_pd(s1[1], g1);
        s2[0] = _mm512_fmadd_pd(g0, _mm512_sub_pd(low_pd(v), mu), s2[0]);
        s2[1] = _mm512_fmadd_pd(g1, _mm512_sub_pd(high_pd(v), mu), s2[1]);
      }
    }
    return {sum_lanes(_mm512_add_pd(_mm512_add_pd(s1[0], s1[1]), _mm512_add_pd(s1[2], s1[3]))),
            sum_lanes(_mm512_add_pd(_mm512_add_pd(s2[0], s2[1]), _mm512_add_pd(s2[2], s2[3])))};
  }

  DNNX_AVX512 static void affine(const T* x, T* y, std::int64_t runs, std::int64_t length,
                                 std::int64_t stride, float a, float b, bool streaming) {
    using namespace simd::avx512;
    const __m512 va = _mm512_set1_ps(a);
    const __m512 vb = _mm512_set1_ps(b);
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* in = x + r * stride;
      for_each_vector<R>(y + r * stride, length, streaming,
                         [&](std::int64_t i, __mmask16 m) DNNX_AVX512_LAMBDA {
                           return _mm512_fmadd_ps(load(in + i, m), va, vb);
                         });
    }
  }

  DNNX_AVX512 static void affine2(const T* x, const T* dy, T* dx, std::int64_t runs,
                                  std::int64_t length, std::int64_t stride, float a, float b,
                                  float c, bool streaming) {
    using namespace simd::avx512;
    const __m512 va = _mm512_set1_ps(a);
    const __m512 vb = _mm512_set1_ps(b);
    const __m512 vc = _mm512_set1_ps(c);
    for (std::int64_t r = 0; r < runs; ++r) {
      const T* x_run = x + r * stride;
      const T* dy_run = dy + r * stride;
      for_each_vector<R>(dx + r * stride, length, streaming,
                         [&](std::int64_t i, __mmask16 m) DNNX_AVX512_LAMBDA {
                           return _mm512_fmadd_ps(va, load(dy_run + i, m),
                                                  _mm512_fmadd_ps(vb, load(x_run + i, m), vc));
                         });
    }
  }

  // A few vectors of columns at a time down the block's rows, each column's sums in its own f64
  // lane (32 columns for the moments, 64 for the gradient sums: the fastest on the AVX-512 VM of
  // docs/benchmarks.md). Masked columns load x = 0 and pivot = 0 and add nothing.
  DNNX_AVX512 static void block_moments(const T* x, std::int64_t rows, std::int64_t stride,
                                        std::int64_t width, const double* pivot, double* sum_a,
                                        double* sum_b) {
    using namespace simd::avx512;
    constexpr std::int64_t vectors = 2;
    for (std::int64_t c = 0; c < width; c += vectors * simd::avx512::width) {
      __mmask16 m[vectors];
      __m512d p[2 * vectors], s1[2 * vectors], s2[2 * vectors];
      for (std::int64_t v = 0; v < vectors; ++v) m[v] = some_lanes(width - c - 16 * v);
      for (std::int64_t j = 0; j < 2 * vectors; ++j) {
        p[j] = _mm512_maskz_loadu_pd(half_lanes(m[j / 2], j % 2), pivot + c + 8 * j);
        s1[j] = s2[j] = _mm512_setzero_pd();
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = x + r * stride + c;
        for (std::int64_t v = 0; v < vectors; ++v) {
          const __m512 in = load(row + 16 * v, m[v]);
          const __m512d d0 = _mm512_sub_pd(low_pd(in), p[2 * v]);
          const __m512d d1 = _mm512_sub_pd(high_pd(in), p[2 * v + 1]);
          s1[2 * v] = _mm512_add_pd(s1[2 * v], d0);
          s1[2 * v + 1] = _mm512_add_pd(s1[2 * v + 1], d1);
          s2[2 * v] = _mm512_fmadd_pd(d0, d0, s2[2 * v]);
          s2[2 * v + 1] = _mm512_fmadd_pd(d1, d1, s2[2 * v + 1]);
        }
      }
      for (std::int64_t j = 0; j < 2 * vectors; ++j) {
        _mm512_mask_storeu_pd(sum_a + c + 8 * j, half_lanes(m[j / 2], j % 2), s1[j]);
        _mm512_mask_storeu_pd(sum_b + c + 8 * j, half_lanes(m[j / 2], j % 2), s2[j]);
      }
    }
  }

  // Masked columns load dy = 0 and add nothing.
  DNNX_AVX512 static void block_gradient_sums(const T* x, const T* dy, std::int64_t rows,
                                              std::int64_t stride, std::int64_t width,
                                              const double* mean, double* sum_a, double* sum_b) {
    using namespace simd::avx512;
    constexpr std::int64_t vectors = 4;
    for (std::int64_t c = 0; c < width; c += vectors * simd::avx512::width) {
      __mmask16 m[vectors];
      __m512d mu[2 * vectors], s1[2 * vectors], s2[2 * vectors];
      for (std::int64_t v = 0; v < vectors; ++v) m[v] = some_lanes(width - c - 16 * v);
      for (std::int64_t j = 0; j < 2 * vectors; ++j) {
        mu[j] = _mm512_maskz_loadu_pd(half_lanes(m[j / 2], j % 2), mean + c + 8 * j);
        s1[j] = s2[j] = _mm512_setzero_pd();
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t o = r * stride + c;
        for (std::int64_t v = 0; v < vectors; ++v) {
          const __m512 g = load(dy + o + 16 * v, m[v]);
          const __m512 in = load(x + o + 16 * v, m[v]);
          const __m512d g0 = low_pd(g);
          const __m512d g1 = high_pd(g);
          s1[2 * v] = _mm512_add_pd(s1[2 * v], g0);
          s1[2 * v + 1] = _mm512_add_pd(s1[2 * v + 1], g1);
          s2[2 * v] = _mm512_fmadd_pd(g0, _mm512_sub_pd(low_pd(in), mu[2 * v]), s2[2 * v]);
          s2[2 * v + 1] =
              _mm512_fmadd_pd(g1, _mm512_sub_pd(high_pd(in), mu[2 * v + 1]), s2[2 * v + 1]);
        }
      }
      for (std::int64_t j = 0; j < 2 * vectors; ++j) {
        _mm512_mask_storeu_pd(sum_a + c + 8 * j, half_lanes(m[j / 2], j % 2), s1[j]);
        _mm512_mask_storeu_pd(sum_b + c + 8 * j, half_lanes(m[j / 2], j % 2), s2[j]);
      }
    }
  }

  DNNX_AVX512 static void block_affine(const T* x, T* y, std::int64_t rows, std::int64_t stride,
                                       std::int64_t width, const float* a, const float* b) {
    using namespace simd::avx512;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r * stride;
      for (std::int64_t c = 0; c < width; c += simd::avx512::width) {
        const __mmask16 m = first_lanes(width - c);
        const __m512 v = _mm512_fmadd_ps(load(x + o + c, m), _mm512_maskz_loadu_ps(m, a + c),
                                         _mm512_maskz_loadu_ps(m, b + c));
        store<R>(y + o + c, v, m);
      }
    }
  }

  DNNX_AVX512 static void block_affine2(const T* x, const T* dy, T* dx, std::int64_t rows,
                                        std::int64_t stride, std::int64_t width, const float* a,
                                        const float* b, const float* c) {
    using namespace simd::avx512;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r * stride;
      for (std::int64_t j = 0; j < width; j += simd::avx512::width) {
        const __mmask16 m = first_lanes(width - j);
        const __m512 inner = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, b + j), load(x + o + j, m),
                                             _mm512_maskz_loadu_ps(m, c + j));
        const __m512 a_dy =
            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), load(dy + o + j, m), inner);
        store<R>(dx + o + j, a_dy, m);
      }
    }
  }
};

// ---- one level's primitives, by pointer
// -----------------------------------------------------------

template <typename T>
struct Primitives {
  Sums (*moments)(const T*, std::int64_t, std::int64_t, std::int64_t, double, std::int64_t);
  Sums (*gradient_sums)(const T*, const T*, std::int64_t, std::int64_t, std::int64_t, double,
                        std::int64_t);
  void (*affine)(const T*, T*, std::int64_t, std::int64_t, std::int64_t, float, float, bool);
  void (*affine2)(const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, float, float,
                  float, bool);
  void (*block_moments)(const T*, std::int64_t, std::int64_t, std::int64_t, const double*, double*,
                        double*);
  void (*block_gradient_sums)(const T*, const T*, std::int64_t, std::int64_t, std::int64_t,
                              const double*, double*, double*);
  void (*block_affine)(const T*, T*, std::int64_t, std::int64_t, std::int64_t, const float*,
                       const float*);
  void (*block_affine2)(const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t,
                        const float*, const float*, const float*);
};

template <typename T, typename L>
Primitives<T> primitives_of() {
  return {&L::moments,       &L::gradient_sums,       &L::affine,       &L::affine2,
          &L::block_moments, &L::block_gradient_sums, &L::block_affine, &L::block_affine2};
}

template <typename T>
Primitives<T> primitives(Level level) {
  constexpr auto integer = simd::Bf16Rounding::integer;
  if (level == Level::avx512_bf16 && std::is_same_v<T, Bf16>)
    return primitives_of<T, Avx512Level<T, simd::Bf16Rounding::native>>();
  if (level != Level::scalar) return primitives_of<T, Avx512Level<T, integer>>();
  return primitives_of<T, ScalarLevel<T>>();
}

// ---- the walk (Note [batch-norm loops])
// -----------------------------------------------------------

struct Shape {
  bool planes = false;
  std::int64_t k = 0;           // statistics
  double count = 0;             // values per statistic
  std::int64_t n = 0;           // planes: runs per statistic
  std::int64_t s = 0;           // planes: run length
  std::int64_t run_pieces = 0;  // planes: pieces per run (1 for runs shorter than a piece)
  std::int64_t piece_runs = 0;  // planes: whole runs per piece (1 for longer runs)
  std::int64_t pieces = 0;      // planes: pieces per statistic
  std::int64_t rows = 0;        // columns: M
  std::int64_t block_rows = 0, blocks = 0, tiles = 0;  // columns

  std::int64_t elements() const { return planes ? n * k * s : rows * k; }
};

Shape shape_of(const BatchNormDesc& desc) {
  Shape shape;
  shape.k = desc.statistics();
  shape.count = static_cast<double>(desc.reduction_size());
  const std::int64_t batch = desc.dims[0];
  const std::int64_t spatial = desc.reduction_size() / batch;
  shape.planes =
      desc.mode == BatchNormMode::spatial && desc.layout == Layout::channels_first && spatial > 1;
  if (shape.planes) {
    shape.n = batch;
    shape.s = spatial;
    if (spatial >= piece_values) {
      shape.run_pieces = (spatial + piece_values - 1) / piece_values;
      shape.piece_runs = 1;
      shape.pieces = batch * shape.run_pieces;
    } else {
      shape.run_pieces = 1;
      shape.piece_runs = piece_values / spatial;
      shape.pieces = (batch + shape.piece_runs - 1) / shape.piece_runs;
    }
    return shape;
  }
  shape.rows = desc.reduction_size();
  const std::int64_t k = shape.k;
  std::int64_t rows = std::max<std::int64_t>((block_values + k - 1) / k,
                                             (shape.rows * k + max_partials - 1) / max_partials);
  rows = std::clamp<std::int64_t>(rows, 1, shape.rows);
  shape.block_rows = rows;
  shape.blocks = (shape.rows + rows - 1) / rows;
  shape.tiles = (k + tile_columns - 1) / tile_columns;
  return shape;
}

// The per-statistic arithmetic shared by both walks: statistics from sums, the saved and running
// statistics, and the coefficients of the outputs.
class Terms {
 public:
  Terms(const BatchNormDesc& desc, const Stats& stats, double count)
      : desc_(desc), stats_(stats), count_(count) {
    if (desc.training) {
      batch_mean_.resize(static_cast<std::size_t>(desc.statistics()));
      batch_var_.resize(static_cast<std::size_t>(desc.statistics()));
    }
  }

  // The batch mean and biased variance from moment sums around `pivot`.
  void moments(const Sums& sums, double pivot, double& mean, double& var) const {
    const double shifted = sums.a / count_;
    mean = pivot + shifted;
    var = std::max(0.0, sums.b / count_ - shifted * shifted);
  }

  // Keeps statistic k's batch mean and variance for finish_all(); threads keep different ones.
  void finish(std::int64_t k, double mean, double var) {
    batch_mean_[static_cast<std::size_t>(k)] = static_cast<float>(mean);
    batch_var_[static_cast<std::size_t>(k)] = static_cast<float>(var);
  }

  // The saved and running statistics of a training forward, from what finish() kept.
  void finish_all() const {
    finish_training_fwd(desc_, stats_, batch_mean_.data(), batch_var_.data(), 0,
                        desc_.statistics());
  }

  // y = (x - mean) inv_std scale + shift = x a + b; inference reads the running statistics.
  void forward_coefficients(std::int64_t k, double mean, double var, float& a, float& b) const {
    if (!desc_.training) mean = stats_.running_mean[k];
    const double scale = stats_.scale != nullptr ? stats_.scale[k] : 1.0;
    const double shift = stats_.shift != nullptr ? stats_.shift[k] : 0.0;
    const double a64 = scale * inv_std(k, var);
    a = static_cast<float>(a64);
    b = static_cast<float>(shift - mean * a64);
  }

  double used_mean(std::int64_t k) const {
    return desc_.training ? stats_.saved_mean[k] : stats_.running_mean[k];
  }

  // Writes diff_scale / diff_shift of statistic k and gives dx = a dy + b x + c (b = c = 0 in
  // inference).
  void backward_coefficients(std::int64_t k, double mean, const Sums& sums, float& a, float& b,
                             float& c) const {
    const double sum_dy = sums.a;
    const double inv =
        desc_.training ? static_cast<double>(stats_.saved_inv_std[k]) : inv_std(k, 0);
    const double sum_dy_xhat = sums.b * inv;
    if (stats_.diff_scale != nullptr) stats_.diff_scale[k] = static_cast<float>(sum_dy_xhat);
    if (stats_.diff_shift != nullptr) stats_.diff_shift[k] = static_cast<float>(sum_dy);
    const double scale = stats_.scale != nullptr ? stats_.scale[k] : 1.0;
    const double a64 = scale * inv;
    a = static_cast<float>(a64);
    b = c = 0.0f;
    if (!desc_.training) return;
    // The batch statistics' terms: -a (sum dy + x_hat sum dy x_hat) / n.
    const double b64 = -a64 * inv * sum_dy_xhat / count_;
    b = static_cast<float>(b64);
    c = static_cast<float>(-a64 * sum_dy / count_ - b64 * mean);
  }

  // The backward pass needs sums unless it is an inference one without diff_scale / diff_shift.
  bool backward_sums() const {
    return desc_.training || stats_.diff_scale != nullptr || stats_.diff_shift != nullptr;
  }

 private:
  double inv_std(std::int64_t k, double var) const {
    if (!desc_.training) var = stats_.running_var[k];
    return 1.0 / std::sqrt(var + desc_.eps);
  }

  const BatchNormDesc& desc_;
  const Stats& stats_;
  double count_;
  std::vector<float> batch_mean_, batch_var_;  // training forward
};

// Per-statistic f32 coefficients of the outputs, as arrays (the column walk loads them as
// vectors).
struct Coefficients {
  std::vector<float> a, b, c;
  explicit Coefficients(std::int64_t k)
      : a(static_cast<std::size_t>(k)),
        b(static_cast<std::size_t>(k)),
        c(static_cast<std::size_t>(k)) {}
};

template <typename T>
class Walk {
 public:
  Walk(const BatchNormDesc& desc, const Stats& stats, Level level, Schedule schedule)
      : desc_(desc),
        schedule_(schedule),
        shape_(shape_of(desc)),
        terms_(desc, stats, shape_.count),
        p_(primitives<T>(level)),
        f_(shape_.k) {}

  void forward(const T* x, T* y) {
    streaming_ = output_bytes() >= simd::streaming_min_bytes;
    if (shape_.planes) {
      forward_planes(x, y);
    } else {
      forward_columns(x, y);
    }
    if (desc_.training) terms_.finish_all();
  }

  void backward(const T* x, const T* dy, T* dx) {
    streaming_ = output_bytes() >= simd::streaming_min_bytes;
    if (shape_.planes) {
      backward_planes(x, dy, dx);
    } else {
      backward_columns(x, dy, dx);
    }
  }

 private:
  std::size_t output_bytes() const {
    return static_cast<std::size_t>(shape_.elements()) * sizeof(T);
  }

  // ---- planes

  // Piece q = k pieces + i of statistic k (Note [batch-norm loops]): a part of one run, or
  // whole runs; its first value and shape.
  struct Piece {
    std::int64_t k, offset, runs, length;
  };
  Piece piece(std::int64_t q) const {
    const std::int64_t k = q / shape_.pieces;
    const std::int64_t i = q % shape_.pieces;
    if (shape_.run_pieces > 1) {
      const std::int64_t n = i / shape_.run_pieces;
      const std::int64_t first = (i % shape_.run_pieces) * piece_values;
      return {k, (n * shape_.k + k) * shape_.s + first, 1,
              std::min(piece_values, shape_.s - first)};
    }
    const std::int64_t n = i * shape_.piece_runs;
    return {k, (n * shape_.k + k) * shape_.s, std::min(shape_.piece_runs, shape_.n - n), shape_.s};
  }
  std::int64_t piece_count() const { return shape_.k * shape_.pieces; }
  // Runs of one statistic are k s apart.
  std::int64_t run_stride() const { return shape_.k * shape_.s; }
  // How far ahead a piece prefetches: the same run of the next statistic, right after it in
  // memory. A run shorter than a piece ends before the hardware prefetchers get going; longer ones
  // are left to them.
  std::int64_t ahead() const { return shape_.run_pieces > 1 ? 0 : shape_.s; }

  // Whether threads take ranges of statistics (Note [batch-norm loops]); the bits are the same
  // either way.
  bool by_statistic() const {
    if (schedule_ != Schedule::automatic) return schedule_ == Schedule::by_statistic;
    return shape_.k >= std::int64_t{4} * threads::count();
  }

  // The sums of statistic k from its pieces, in order; `sums(q)` gives piece q's.
  template <typename PieceSums>
  Sums total(std::int64_t k, PieceSums&& sums) const {
    Sums t;
    for (std::int64_t q = k * shape_.pieces; q < (k + 1) * shape_.pieces; ++q) {
      const Sums s = sums(q);
      t.a += s.a;
      t.b += s.b;
    }
    return t;
  }

  double pivot(const T* x, std::int64_t k) const { return simd::load(x, k * shape_.s); }

  void forward_planes(const T* x, T* y) {
    const std::int64_t elements = shape_.elements();
    const std::int64_t stride = run_stride();
    auto normalise = [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) {
        const Piece pc = piece(q);
        const auto k = static_cast<std::size_t>(pc.k);
        p_.affine(x + pc.offset, y + pc.offset, pc.runs, pc.length, stride, f_.a[k], f_.b[k],
                  streaming_);
      }
    };
    auto moments_of = [&](std::int64_t q) {
      const Piece pc = piece(q);
      return p_.moments(x + pc.offset, pc.runs, pc.length, stride, pivot(x, pc.k), ahead());
    };
    auto coefficients = [&](std::int64_t k, const Sums& sums) {
      double mean = 0, var = 0;
      terms_.moments(sums, pivot(x, k), mean, var);
      terms_.finish(k, mean, var);
      const auto i = static_cast<std::size_t>(k);
      terms_.forward_coefficients(k, mean, var, f_.a[i], f_.b[i]);
    };
    if (!desc_.training) {
      for (std::int64_t k = 0; k < shape_.k; ++k) {
        const auto i = static_cast<std::size_t>(k);
        terms_.forward_coefficients(k, 0, 0, f_.a[i], f_.b[i]);
      }
      threads::run_ranges(piece_count(), elements * 2, normalise);
      return;
    }
    const std::int64_t per = shape_.pieces;
    if (by_statistic()) {
      threads::run_ranges(shape_.k, elements * 3, [&](std::int64_t k0, std::int64_t k1) {
        for (std::int64_t k = k0; k < k1; ++k) {
          coefficients(k, total(k, moments_of));
          normalise(k * per, (k + 1) * per);
        }
      });
      return;
    }
    std::vector<Sums> partial(static_cast<std::size_t>(piece_count()));
    threads::run_ranges(piece_count(), elements, [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) partial[static_cast<std::size_t>(q)] = moments_of(q);
    });
    for (std::int64_t k = 0; k < shape_.k; ++k)
      coefficients(k,
                   total(k, [&](std::int64_t q) { return partial[static_cast<std::size_t>(q)]; }));
    threads::run_ranges(piece_count(), elements * 2, normalise);
  }

  void backward_planes(const T* x, const T* dy, T* dx) {
    const std::int64_t elements = shape_.elements();
    const std::int64_t stride = run_stride();
    const bool training = desc_.training;
    auto gradient = [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) {
        const Piece pc = piece(q);
        const auto k = static_cast<std::size_t>(pc.k);
        const std::int64_t o = pc.offset;
        if (training) {
          p_.affine2(x + o, dy + o, dx + o, pc.runs, pc.length, stride, f_.a[k], f_.b[k], f_.c[k],
                     streaming_);
        } else {
          p_.affine(dy + o, dx + o, pc.runs, pc.length, stride, f_.a[k], 0.0f, streaming_);
        }
      }
    };
    auto sums_of = [&](std::int64_t q) {
      const Piece pc = piece(q);
      return p_.gradient_sums(x + pc.offset, dy + pc.offset, pc.runs, pc.length, stride,
                              terms_.used_mean(pc.k), ahead());
    };
    auto coefficients = [&](std::int64_t k, const Sums& sums) {
      const auto i = static_cast<std::size_t>(k);
      terms_.backward_coefficients(k, terms_.used_mean(k), sums, f_.a[i], f_.b[i], f_.c[i]);
    };
    if (!terms_.backward_sums()) {
      for (std::int64_t k = 0; k < shape_.k; ++k) coefficients(k, Sums{});
      threads::run_ranges(piece_count(), elements * 2, gradient);
      return;
    }
    const std::int64_t per = shape_.pieces;
    if (by_statistic()) {
      threads::run_ranges(shape_.k, elements * 4, [&](std::int64_t k0, std::int64_t k1) {
        for (std::int64_t k = k0; k < k1; ++k) {
          coefficients(k, total(k, sums_of));
          gradient(k * per, (k + 1) * per);
        }
      });
      return;
    }
    std::vector<Sums> partial(static_cast<std::size_t>(piece_count()));
    threads::run_ranges(piece_count(), elements * 2, [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) partial[static_cast<std::size_t>(q)] = sums_of(q);
    });
    for (std::int64_t k = 0; k < shape_.k; ++k)
      coefficients(k,
                   total(k, [&](std::int64_t q) { return partial[static_cast<std::size_t>(q)]; }));
    threads::run_ranges(piece_count(), elements * 3, gradient);
  }

  // ---- columns

  // Item q = block * tiles + tile: its first row, rows, first column and columns.
  struct Item {
    std::int64_t block, row, rows, column, columns;
  };
  Item item(std::int64_t q) const {
    const std::int64_t block = q / shape_.tiles;
    const std::int64_t tile = q % shape_.tiles;
    const std::int64_t row = block * shape_.block_rows;
    const std::int64_t column = tile * tile_columns;
    return {block, row, std::min(shape_.block_rows, shape_.rows - row), column,
            std::min(tile_columns, shape_.k - column)};
  }
  std::int64_t item_count() const { return shape_.blocks * shape_.tiles; }

  // Runs sums(item, sum_a, sum_b) over every item into per-block partial sums, then gives
  // total(k, Sums) each column's sums in block order, in parallel over columns.
  template <typename ItemSums, typename Totals>
  void column_sums(std::int64_t work, ItemSums&& sums, Totals&& totals) {
    const auto size = static_cast<std::size_t>(shape_.blocks * shape_.k);
    std::vector<double>& buffer = scratch();
    if (buffer.size() < 2 * size) buffer.resize(2 * size);
    double* partial_a = buffer.data();
    double* partial_b = partial_a + size;
    threads::run_ranges(item_count(), work, [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) {
        const Item it = item(q);
        const auto at = static_cast<std::size_t>(it.block * shape_.k + it.column);
        sums(it, partial_a + at, partial_b + at);
      }
    });
    // Each column's total in block order, added row-wise (contiguous reads) into block 0's
    // partial sums.
    threads::run_ranges(shape_.k, shape_.k * shape_.blocks, [&](std::int64_t k0, std::int64_t k1) {
      for (std::int64_t b = 1; b < shape_.blocks; ++b) {
        const double* row_a = partial_a + b * shape_.k;
        const double* row_b = partial_b + b * shape_.k;
        for (std::int64_t k = k0; k < k1; ++k) {
          partial_a[k] += row_a[k];
          partial_b[k] += row_b[k];
        }
      }
      for (std::int64_t k = k0; k < k1; ++k) totals(k, Sums{partial_a[k], partial_b[k]});
    });
  }

  void forward_columns(const T* x, T* y) {
    const std::int64_t elements = shape_.elements();
    const std::int64_t stride = shape_.k;
    if (desc_.training) {
      std::vector<double> pivots(static_cast<std::size_t>(shape_.k));
      for (std::int64_t k = 0; k < shape_.k; ++k)
        pivots[static_cast<std::size_t>(k)] = simd::load(x, k);
      column_sums(
          elements,
          [&](const Item& it, double* sum_a, double* sum_b) {
            p_.block_moments(x + it.row * stride + it.column, it.rows, stride, it.columns,
                             pivots.data() + it.column, sum_a, sum_b);
          },
          [&](std::int64_t k, const Sums& sums) {
            const auto i = static_cast<std::size_t>(k);
            double mean = 0, var = 0;
            terms_.moments(sums, pivots[i], mean, var);
            terms_.finish(k, mean, var);
            terms_.forward_coefficients(k, mean, var, f_.a[i], f_.b[i]);
          });
    } else {
      for (std::int64_t k = 0; k < shape_.k; ++k) {
        const auto i = static_cast<std::size_t>(k);
        terms_.forward_coefficients(k, 0, 0, f_.a[i], f_.b[i]);
      }
    }
    threads::run_ranges(item_count(), elements * 2, [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) {
        const Item it = item(q);
        const std::int64_t o = it.row * stride + it.column;
        const auto c = static_cast<std::size_t>(it.column);
        p_.block_affine(x + o, y + o, it.rows, stride, it.columns, f_.a.data() + c,
                        f_.b.data() + c);
      }
    });
  }

  void backward_columns(const T* x, const T* dy, T* dx) {
    const std::int64_t elements = shape_.elements();
    const std::int64_t stride = shape_.k;
    std::vector<double> means(static_cast<std::size_t>(shape_.k));
    for (std::int64_t k = 0; k < shape_.k; ++k)
      means[static_cast<std::size_t>(k)] = terms_.used_mean(k);
    auto coefficients = [&](std::int64_t k, const Sums& sums) {
      const auto i = static_cast<std::size_t>(k);
      terms_.backward_coefficients(k, means[i], sums, f_.a[i], f_.b[i], f_.c[i]);
    };
    if (terms_.backward_sums()) {
      column_sums(
          elements * 2,
          [&](const Item& it, double* sum_a, double* sum_b) {
            const std::int64_t o = it.row * stride + it.column;
            p_.block_gradient_sums(x + o, dy + o, it.rows, stride, it.columns,
                                   means.data() + it.column, sum_a, sum_b);
          },
          coefficients);
    } else {
      for (std::int64_t k = 0; k < shape_.k; ++k) coefficients(k, Sums{});
    }
    const bool training = desc_.training;
    threads::run_ranges(item_count(), elements * 3, [&](std::int64_t q0, std::int64_t q1) {
      for (std::int64_t q = q0; q < q1; ++q) {
        const Item it = item(q);
        const std::int64_t o = it.row * stride + it.column;
        const auto c = static_cast<std::size_t>(it.column);
        if (training) {
          p_.block_affine2(x + o, dy + o, dx + o, it.rows, stride, it.columns, f_.a.data() + c,
                           f_.b.data() + c, f_.c.data() + c);
        } else {
          // dx = a dy: the zero shift of a forward-style affine map.
          p_.block_affine(dy + o, dx + o, it.rows, stride, it.columns, f_.a.data() + c,
                          f_.b.data() + c);
        }
      }
    });
  }

  const BatchNormDesc& desc_;
  Schedule schedule_;
  Shape shape_;
  Terms terms_;
  Primitives<T> p_;
  Coefficients f_;
  bool streaming_ = false;
};

void check_level(Level level) {
  if (!simd::level_supported(level)) {
    detail::raise(ErrorKind::Internal,
                  detail::cat("the batch-norm kernel was asked for simd level ",
                              simd::to_string(level), ", which this CPU does not support"));
  }
}

}  // namespace

void finish_training_fwd(const BatchNormDesc& desc, const Stats& s, const float* mean,
                         const float* var, std::int64_t first, std::int64_t last) {
  const auto count = static_cast<double>(desc.reduction_size());
  const double m = desc.momentum;
  for (std::int64_t k = first; k < last; ++k) {
    const double v = var[k - first];
    const float batch_mean = mean[k - first];
    if (s.saved_inv_std != nullptr)
      s.saved_inv_std[k] = static_cast<float>(1.0 / std::sqrt(v + desc.eps));
    if (s.saved_mean != nullptr) s.saved_mean[k] = batch_mean;
    if (s.running_mean != nullptr) {
      s.running_mean[k] = static_cast<float>((1 - m) * s.running_mean[k] + m * batch_mean);
      s.running_var[k] =
          static_cast<float>((1 - m) * s.running_var[k] + m * v * count / (count - 1));
    }
  }
}

void forward(const BatchNormDesc& desc, Level level, const void* src, void* dst, const Stats& s,
             Schedule schedule) {
  check_level(level);
  switch (desc.dtype) {
    case DType::f16:
      return Walk<F16>(desc, s, level, schedule)
          .forward(static_cast<const F16*>(src), static_cast<F16*>(dst));
    case DType::bf16:
      return Walk<Bf16>(desc, s, level, schedule)
          .forward(static_cast<const Bf16*>(src), static_cast<Bf16*>(dst));
    default:
      return Walk<float>(desc, s, level, schedule)
          .forward(static_cast<const float*>(src), static_cast<float*>(dst));
  }
}

void backward(const BatchNormDesc& desc, Level level, const void* src, const void* diff_dst,
              void* diff_src, const Stats& s, Schedule schedule) {
  check_level(level);
  switch (desc.dtype) {
    case DType::f16:
      return Walk<F16>(desc, s, level, schedule)
          .backward(static_cast<const F16*>(src), static_cast<const F16*>(diff_dst),
                    static_cast<F16*>(diff_src));
    case DType::bf16:
      return Walk<Bf16>(desc, s, level, schedule)
          .backward(static_cast<const Bf16*>(src), static_cast<const Bf16*>(diff_dst),
                    static_cast<Bf16*>(diff_src));
    default:
      return Walk<float>(desc, s, level, schedule)
          .backward(static_cast<const float*>(src), static_cast<const float*>(diff_dst),
                    static_cast<float*>(diff_src));
  }
}

}  // namespace dnnx::onednn::bnorm
