// The vector kernels of cpu:kernel:max_indices (Note [cpu max-pool indices] in pool.cpp), for one
// instruction set. pool.cpp includes this file once per ISA, each time inside its own namespace
// and with DNNX_POOL_ISA defined as the target attribute of that ISA and DNNX_POOL_LANES as its
// vector width in floats (hence no include guard), after the types the kernels take:
// IndexGeometry, Divider, LoopGeometry, LoopSpan, loop_window, scan_window, BadIndex,
// SharedBadIndex, index_channel_block.
//
// Note [per-ISA pool kernels]
// The kernels hold a vector register of lanes in GCC vector types, as simd.hpp's do, but
// also compare and select lanes (the max rule, the NaN tests of the conversions). GCC lowers the
// vector operations of a function for that function's own target before inlining it or cloning
// it for target_clones, and a comparison or select wider than the target's registers becomes one
// scalar compare and branch per lane, which inlining into an AVX-512 clone does not undo (the
// forward ran 40x slower so). Every function here therefore carries the ISA's target attribute
// itself, its vectors are that ISA's registers (16 lanes for AVX-512, 8 for AVX2, 4 for the
// SSE2 baseline), and pool.cpp picks one copy at run time (__builtin_cpu_supports). The copies
// compute the same bits: maxima are exact, sums add in the same order without FMA, conversions
// are integer code.

// NOLINTBEGIN(bugprone-macro-parentheses)
#define DNNX_POOL_INLINE [[gnu::always_inline]] inline DNNX_POOL_ISA
// NOLINTEND(bugprone-macro-parentheses)

// One register of lanes: floats, their bits, and their indices (int32, widened to int64 on
// their way out), and 16-bit storage.
constexpr int lanes = DNNX_POOL_LANES;
using Vec = float __attribute__((vector_size(4 * lanes)));
using VecI = std::int32_t __attribute__((vector_size(4 * lanes)));
using VecU = std::uint32_t __attribute__((vector_size(4 * lanes)));
using VecS = std::uint16_t __attribute__((vector_size(2 * lanes)));
using VecL = std::int64_t __attribute__((vector_size(8 * lanes)));

DNNX_POOL_INLINE Vec splat(float value) { return Vec{} + value; }

// 0, 1, ..., lanes - 1.
DNNX_POOL_INLINE VecI iota() {
  constexpr std::int32_t values[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  VecI v;
  std::memcpy(&v, values, sizeof v);
  return v;
}

// ---- lanes in and out of storage (simd.hpp's formulas, under this ISA) -------------------

#define DNNX_LANE_INLINE DNNX_POOL_INLINE
#include "backends/onednn/lane_storage.hpp"  // NOLINT(bugprone-suspicious-include)

// The even lanes of a and b, in order.
DNNX_POOL_INLINE Vec even_lanes(Vec a, Vec b) {
#if DNNX_POOL_LANES == 16
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
#elif DNNX_POOL_LANES == 8
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
#else
  return __builtin_shufflevector(a, b, 0, 2, 4, 6);
#endif
}

// Lanes of p[j * step], j = 0 .. lanes - 1: one load for step 1, two and an even-lane shuffle
// for step 2 (which reads p[2 lanes - 1] too), lane by lane otherwise.
template <typename T>
DNNX_POOL_INLINE Vec load_strided(const T* p, std::int64_t step) {
  if (step == 1) return load_lanes(p);
  if (step == 2) return even_lanes(load_lanes(p), load_lanes(p + lanes));
  // Through memory: lane-wise writes into a Vec make GCC split the caller's vectors.
  float values[lanes];
  for (int j = 0; j < lanes; ++j) values[j] = simd::load(p, j * step);
  return load_lanes(values);
}

template <typename I>
DNNX_POOL_INLINE void store_indices(I* p, VecI at) {
  if constexpr (sizeof(I) == 4) {
    std::memcpy(p, &at, sizeof at);
  } else {
    const VecL wide = __builtin_convertvector(at, VecL);
    std::memcpy(p, &wide, sizeof wide);
  }
}

// The running maximum of the lanes under PyTorch's rule, `v > best || isnan(v)` (the NaN test on
// the bits, which every ISA compares as integers).
DNNX_POOL_INLINE void take_max(Vec v, VecI index, Vec& best, VecI& at) {
  const VecI nan = (reinterpret_cast<VecI>(v) & 0x7fffffff) > 0x7f800000;
  const VecI wins = (v > best) | nan;
  best = wins ? v : best;
  at = wins ? index : at;
}

// `count` f32 values to storage type T.
template <typename T>
DNNX_POOL_INLINE void store_row(T* out, const float* in, std::int64_t count) {
  std::int64_t i = 0;
  for (; i + lanes <= count; i += lanes) store_lanes(out + i, load_lanes(in + i));
  for (; i < count; ++i) simd::store(out, i, in[i]);
}

// ---- forward ----------------------------------------------------------------------------------

// Input row `row` (W elements) as f32 at `out` + pad, with -inf in the `pad` elements before it
// and up to `length` after it: padding that never wins a max.
template <typename T>
DNNX_POOL_INLINE void padded_row(const T* row, std::int64_t width, std::int64_t pad,
                                 std::int64_t length, float* out) {
  constexpr float low = -std::numeric_limits<float>::infinity();
  std::fill(out, out + pad, low);
  float* body = out + pad;
  std::int64_t i = 0;
  for (; i + lanes <= width; i += lanes) store_lanes(body + i, load_lanes(row + i));
  for (; i < width; ++i) body[i] = simd::load(row, i);
  std::fill(body + width, out + length, low);
}

// Lanes of p[j * step] for a stride known at compile time (Step 1 or 2) or not (0).
template <int Step, typename T>
DNNX_POOL_INLINE Vec load_step(const T* p, std::int64_t step) {
  return load_strided(p, Step > 0 ? Step : step);
}

// Stores the first `count` (1 to lanes) outputs of a group.
template <typename T, typename I>
DNNX_POOL_INLINE void store_group(T* dst, I* indices, std::int64_t count, Vec best, VecI at) {
  if (count == lanes) {
    if (dst != nullptr) store_lanes(dst, best);
    if (indices != nullptr) store_indices(indices, at);
    return;
  }
  // A row's last, partial group: through memory (lane reads would split the vectors).
  float values[lanes];
  std::int32_t places[lanes];
  std::memcpy(values, &best, sizeof values);
  std::memcpy(places, &at, sizeof places);
  for (std::int64_t j = 0; j < count; ++j) {
    if (dst != nullptr) simd::store(dst, j, values[j]);
    if (indices != nullptr) indices[j] = static_cast<I>(places[j]);
  }
}

// The padded f32 input rows (padded_row) the windows of output rows read, converted one output
// row ahead: a row's loads then never wait on its own copy's stores (store forwarding fails on
// loads that straddle stores, and the copy had just run). When windows span one input slice
// along D (kernel 1 along D: every 1-D and 2-D pooling), rows are kept by input row in a ring of
// window extent + stride slots (the rows of one output row's windows lie within the extent, so
// they never share a slot), so the rows shared with the previous output row are not copied
// again; otherwise an output row's rows are copied into its own slots, one per window position.
template <typename T>
struct PaddedRows {
  const IndexGeometry& ig;
  const T* src;
  std::int64_t length;  // floats of a padded row
  bool ring;            // kernel 1 along D
  std::int64_t slots;
  std::vector<float> data;
  std::vector<std::int64_t> held;  // the input row id in each ring slot (-1: none)

  PaddedRows(const IndexGeometry& geometry, const T* source, std::int64_t row_length)
      : ig(geometry),
        src(source),
        length(row_length),
        ring(geometry.loops.kernel[0] == 1),
        slots(ring ? geometry.loops.extent[1] + geometry.loops.stride[1]
                   : geometry.loops.kernel[0] * geometry.loops.kernel[1]),
        data(static_cast<std::size_t>(slots * length)),
        held(static_cast<std::size_t>(slots), -1) {}

  // The slot of input row (plane p, d, h) for an output row whose windows' first input elements
  // are (d0, h0).
  DNNX_POOL_INLINE std::int64_t slot(std::int64_t d, std::int64_t h, std::int64_t d0,
                                     std::int64_t h0) const {
    const LoopGeometry& g = ig.loops;
    if (ring) return h % slots;
    const std::int64_t jd = g.dilation[0] == 1 ? d - d0 : (d - d0) / g.dilation[0];
    const std::int64_t jh = g.dilation[1] == 1 ? h - h0 : (h - h0) / g.dilation[1];
    return jd * g.kernel[1] + jh;
  }

  DNNX_POOL_INLINE const float* row(std::int64_t d, std::int64_t h, std::int64_t d0,
                                    std::int64_t h0) const {
    return data.data() + slot(d, h, d0, h0) * length;
  }

  // Converts the rows output row r (plane, od, oh) reads that are not held yet, and prefetches
  // the ones the output row after it adds.
  DNNX_POOL_INLINE void prepare(std::int64_t r) {
    const LoopGeometry& g = ig.loops;
    const std::int64_t rows_per_plane = g.out[0] * g.out[1];
    const std::int64_t p = r / rows_per_plane;
    const std::int64_t od = r % rows_per_plane / g.out[1];
    const std::int64_t oh = r % g.out[1];
    const T* plane = src + p * ig.in_plane;
    const LoopSpan wd = loop_window(g, 0, od), wh = loop_window(g, 1, oh);
    for (std::int64_t d = wd.begin; d < wd.end; d += wd.step) {
      for (std::int64_t h = wh.begin; h < wh.end; h += wh.step) {
        const std::int64_t at = slot(d, h, wd.begin, wh.begin);
        const std::int64_t id = (p * g.in[0] + d) * g.in[1] + h;
        if (ring && held[static_cast<std::size_t>(at)] == id) continue;
        padded_row(plane + (d * g.in[1] + h) * g.in[2], g.in[2], g.pad_before[2], length,
                   data.data() + at * length);
        held[static_cast<std::size_t>(at)] = id;
      }
    }
    if (ring && wh.end < g.in[1]) {
      const T* next = plane + (wd.begin * g.in[1] + wh.end) * g.in[2];
      const std::int64_t bytes =
          std::min(g.stride[1], g.in[1] - wh.end) * g.in[2] * static_cast<std::int64_t>(sizeof(T));
      for (std::int64_t at = 0; at < bytes; at += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(next) + at);
    }
  }
};

// channels_first, for passes of G groups of `lanes` outputs and a stride Step (0: the runtime
// stride): the output rows [r0, r1) of all planes, a row being (plane, od, oh). The windows read
// padded f32 copies of the input rows (PaddedRows), so that every output of the row is a lane of
// a group (adjacent outputs) and no window is clipped along W; padding never wins, and each lane
// starts at its window's first input element, as PyTorch's. The G groups of a pass are updated
// side by side, window position by window position: their maxima are independent chains the
// core overlaps. dst or indices may be null.
template <int G, int Step, bool Dilated, typename T, typename I>
DNNX_POOL_INLINE void fwd_first_rows(const IndexGeometry& ig, const T* src, T* dst, I* indices,
                                     std::int64_t r0, std::int64_t r1) {
  const LoopGeometry& g = ig.loops;
  const std::int64_t rows_per_plane = g.out[0] * g.out[1];
  const std::int64_t s = Step > 0 ? Step : g.stride[2];
  // Steps of 1 known at compile time for dense windows: runtime ones cost the dense loop.
  const std::int64_t dw = Dilated ? g.dilation[2] : 1;
  const std::int64_t k = g.kernel[2], pb = g.pad_before[2];
  const std::int64_t width = g.in[2], outputs = g.out[2];
  constexpr std::int64_t pass = std::int64_t{lanes} * G;
  // Every lane of every pass reads inside the padded row (load_strided reads one more element
  // for stride 2).
  const std::int64_t passes = (outputs + pass - 1) / pass;
  PaddedRows<T> rows(ig, src, std::max((passes * pass - 1) * s + g.extent[2] + 1, pb + width));
  const VecI lane = iota() * static_cast<std::int32_t>(s);
  const auto dilation = static_cast<std::int32_t>(dw);
  if (r0 < r1) rows.prepare(r0);
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t p = r / rows_per_plane;
    const std::int64_t od = r % rows_per_plane / g.out[1];
    const std::int64_t oh = r % g.out[1];
    const std::int64_t out_row = p * ig.out_plane + (od * g.out[1] + oh) * outputs;
    const LoopSpan wd = loop_window(g, 0, od), wh = loop_window(g, 1, oh);
    const auto first_row = static_cast<std::int32_t>((wd.begin * g.in[1] + wh.begin) * width);
    for (std::int64_t ow = 0; ow < outputs; ow += pass) {
      // Lane j of group i: output ow + lanes i + j, its window's first column (may be in the
      // padding), and the index of its first input element (the first position at or past
      // column 0: the column mod the dilation when the window starts in the padding).
      Vec best[G];
      VecI at[G], column[G];
      for (int i = 0; i < G; ++i) {
        column[i] = lane + static_cast<std::int32_t>((ow + std::int64_t{lanes} * i) * s - pb);
        best[i] = splat(-std::numeric_limits<float>::infinity());
        if constexpr (Dilated) {
          const VecI inside = (column[i] % dilation + dilation) % dilation;
          at[i] = (column[i] >= 0 ? column[i] : inside) + first_row;
        } else {
          at[i] = (column[i] > 0 ? column[i] : VecI{}) + first_row;
        }
      }
      for (std::int64_t d = wd.begin; d < wd.end; d += Dilated ? wd.step : 1) {
        for (std::int64_t h = wh.begin; h < wh.end; h += Dilated ? wh.step : 1) {
          const float* padded = rows.row(d, h, wd.begin, wh.begin) + ow * s;
          const auto base = static_cast<std::int32_t>((d * g.in[1] + h) * width);
          for (std::int64_t x = 0; x < k * dw; x += dw) {
            for (int i = 0; i < G; ++i) {
              take_max(load_step<Step>(padded + std::int64_t{lanes} * i * s + x, s),
                       column[i] + static_cast<std::int32_t>(base + x), best[i], at[i]);
            }
          }
        }
      }
      for (int i = 0; i < G; ++i) {
        const std::int64_t first = ow + std::int64_t{lanes} * i;
        if (first >= outputs) break;
        store_group(dst == nullptr ? nullptr : dst + out_row + first,
                    indices == nullptr ? nullptr : indices + out_row + first,
                    std::min<std::int64_t>(lanes, outputs - first), best[i], at[i]);
      }
    }
    // The next output row's rows now, so that their stores have retired when it loads them.
    if (r + 1 < r1) rows.prepare(r + 1);
  }
}

// channels_first: picks fwd_first_rows' pass width, stride and dilation. Planes near 2^31 elements
// (int32 lane indices would overflow) are scanned one output at a time.
template <typename T, typename I>
DNNX_POOL_INLINE void fwd_first(const IndexGeometry& ig, const T* src, T* dst, I* indices,
                                std::int64_t r0, std::int64_t r1) {
  const LoopGeometry& g = ig.loops;
  if (!ig.narrow) {
    const std::int64_t rows_per_plane = g.out[0] * g.out[1];
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t p = r / rows_per_plane;
      const std::int64_t od = r % rows_per_plane / g.out[1], oh = r % g.out[1];
      const std::int64_t out_row = p * ig.out_plane + (od * g.out[1] + oh) * g.out[2];
      for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
        const std::array<LoopSpan, 3> w{loop_window(g, 0, od), loop_window(g, 1, oh),
                                        loop_window(g, 2, ow)};
        float best = 0;
        const std::int64_t at = scan_window(g, src + p * ig.in_plane, 1, w, best);
        if (dst != nullptr) simd::store(dst, out_row + ow, best);
        if (indices != nullptr) indices[out_row + ow] = static_cast<I>(at);
      }
    }
    return;
  }
  // One group per pass for short rows (no lanes computed for nothing), four otherwise.
  const bool short_rows = g.out[2] <= lanes;
  if (ig.dilated) {  // dilated windows: any stride
    return short_rows ? fwd_first_rows<1, 0, true>(ig, src, dst, indices, r0, r1)
                      : fwd_first_rows<4, 0, true>(ig, src, dst, indices, r0, r1);
  }
  switch (g.stride[2]) {
    case 1:
      return short_rows ? fwd_first_rows<1, 1, false>(ig, src, dst, indices, r0, r1)
                        : fwd_first_rows<4, 1, false>(ig, src, dst, indices, r0, r1);
    case 2:
      return short_rows ? fwd_first_rows<1, 2, false>(ig, src, dst, indices, r0, r1)
                        : fwd_first_rows<4, 2, false>(ig, src, dst, indices, r0, r1);
    default:
      return short_rows ? fwd_first_rows<1, 0, false>(ig, src, dst, indices, r0, r1)
                        : fwd_first_rows<4, 0, false>(ig, src, dst, indices, r0, r1);
  }
}

// channels_last: the output positions [q0, q1) of all images, `lanes` channels at a time.
template <typename T, typename I>
DNNX_POOL_INLINE void fwd_last(const IndexGeometry& ig, const T* src, T* dst, I* indices,
                               std::int64_t q0, std::int64_t q1) {
  const LoopGeometry& g = ig.loops;
  const std::int64_t channels = g.channels;
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t n = q / ig.out_plane;
    const std::int64_t position = q % ig.out_plane;
    const std::array<LoopSpan, 3> w{loop_window(g, 0, position / (g.out[1] * g.out[2])),
                                    loop_window(g, 1, position / g.out[2] % g.out[1]),
                                    loop_window(g, 2, position % g.out[2])};
    const T* image = src + n * ig.in_plane * channels;
    const std::int64_t out_at = q * channels;
    std::int64_t c = 0;
    for (; ig.narrow && c + lanes <= channels; c += lanes) {
      Vec best = splat(-std::numeric_limits<float>::infinity());
      VecI at = VecI{} + static_cast<std::int32_t>((w[0].begin * g.in[1] + w[1].begin) * g.in[2] +
                                                   w[2].begin);
      for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step) {
        for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step) {
          for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step) {
            const std::int64_t at_in = (d * g.in[1] + h) * g.in[2] + x;
            take_max(load_lanes(image + at_in * channels + c),
                     VecI{} + static_cast<std::int32_t>(at_in), best, at);
          }
        }
      }
      if (dst != nullptr) store_lanes(dst + out_at + c, best);
      if (indices != nullptr) store_indices(indices + out_at + c, at);
    }
    for (; c < channels; ++c) {
      float best = 0;
      const std::int64_t at = scan_window(g, image + c, channels, w, best);
      if (dst != nullptr) simd::store(dst, out_at + c, best);
      if (indices != nullptr) indices[out_at + c] = static_cast<I>(at);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------

// Where one backward work item accumulates (Note [cpu max-pool indices]): the diff_src slices
// [base, base + filled) of the outermost spatial dim that the current outer output's windows
// cover, each `size` positions x `block` channels. f32 diff_src is its own accumulator: slices
// are zeroed in place when the windows first reach them. f16/bf16 accumulate in an f32 buffer
// whose slices leave for diff_src, converted, once the windows have passed them; the buffer
// slides over `capacity` slices and moves its live slices to the front only when it reaches the
// end.
template <typename T, bool ChannelsLast>
struct Accumulator {
  static constexpr bool direct = std::is_same_v<T, float>;
  T* out;              // diff_src at (position 0, the item's first channel)
  std::int64_t size;   // positions of a slice
  std::int64_t block;  // channels of the item (1 for channels_first)
  std::int64_t step;   // elements between positions of `out`
  float* buffer;       // f16/bf16: `capacity` slices x size x block floats
  std::int64_t capacity;
  std::int64_t base = 0;    // the first slice held
  std::int64_t filled = 0;  // slices held
  std::int64_t origin = 0;  // f16/bf16: the buffer slice holding `base`

  // The floats of `count` slices.
  DNNX_POOL_INLINE std::int64_t floats(std::int64_t count) const { return count * size * block; }

  // Writes zeros to diff_src slices [from, to).
  DNNX_POOL_INLINE void zero(std::int64_t from, std::int64_t to) {
    if (from >= to) return;
    if (ChannelsLast) {
      for (std::int64_t i = from * size; i < to * size; ++i)
        std::memset(static_cast<void*>(out + i * step), 0,
                    sizeof(T) * static_cast<std::size_t>(block));
    } else {
      std::memset(static_cast<void*>(out + from * size), 0,
                  sizeof(T) * static_cast<std::size_t>((to - from) * size));
    }
  }

  // Slices before `to` are final: f16/bf16 write the ones held, converted; slices no window
  // reached are written as zeros.
  DNNX_POOL_INLINE void retire(std::int64_t to) {
    const std::int64_t held = std::min(to - base, filled);
    if constexpr (!direct) {
      const float* from = buffer + floats(origin);
      if (ChannelsLast) {
        for (std::int64_t i = 0; i < held * size; ++i)
          store_row(out + (base * size + i) * step, from + i * block, block);
      } else {
        store_row(out + base * size, from, held * size);
      }
      origin += held;
    }
    zero(base + held, to);
    filled -= held;
    base = to;
  }

  // Holds slices up to `end`; the new ones are zero.
  DNNX_POOL_INLINE void extend(std::int64_t end) {
    if constexpr (direct) {
      zero(base + filled, end);
    } else {
      if (origin + (end - base) > capacity) {
        std::memmove(buffer, buffer + floats(origin),
                     sizeof(float) * static_cast<std::size_t>(floats(filled)));
        origin = 0;
      }
      std::fill(buffer + floats(origin + filled), buffer + floats(origin + end - base), 0.0f);
    }
    filled = end - base;
  }

  // The sums of the slices held: position p (counted from slice `base`'s first) and channel c
  // of the item at sums()[p * sum_step() + c].
  DNNX_POOL_INLINE float* sums() {
    if constexpr (direct) {
      return out + base * size * step;
    } else {
      return buffer + floats(origin);
    }
  }
  DNNX_POOL_INLINE std::int64_t sum_step() const { return direct ? step : block; }
};

// Buffer slices an f16/bf16 work item keeps (Accumulator): the windows' extent along the
// outermost dim, plus room to slide of up to 16 slices within 256 KiB.
inline std::int64_t accumulator_capacity(const IndexGeometry& ig, std::int64_t block) {
  const std::int64_t kernel = ig.loops.extent[static_cast<std::size_t>(ig.outer)];
  const std::int64_t slice_bytes = ig.in_slice * block * static_cast<std::int64_t>(sizeof(float));
  return kernel + std::clamp<std::int64_t>((std::int64_t{1} << 18) / slice_bytes, 0, 16);
}

// The exact index checks of the backward (Note [cpu pool index check]): whether the index at
// offset `at` from the first element of the slices held (at < their size, so inside the plane
// and the window's extent along the outermost dim) names a position of its window. `outer` is the
// offset of the first slice held from the window's first position along the outermost dim, `row`
// and `column` the window's first positions along H and W (those of the dims after the outermost).

// 1-D dense windows: the slices held are the window.
struct WholeCheck {
  DNNX_POOL_INLINE bool operator()(std::uint64_t, std::int64_t, std::int64_t, std::int64_t) const {
    return true;
  }
};

// 2-D dense windows: the column, by a reciprocal of W.
struct ColumnCheck {
  Divider per_row;
  std::uint64_t width, extent;
  DNNX_POOL_INLINE bool operator()(std::uint64_t at, std::int64_t, std::int64_t,
                                   std::int64_t column) const {
    const std::uint64_t w = at - per_row.divide(at) * width;
    return w - static_cast<std::uint64_t>(column) < extent;
  }
};

// 3-D dense windows: H and W, by reciprocals of H x W and W.
struct RowColumnCheck {
  Divider per_slice, per_row;
  std::uint64_t slice, width, extent_h, extent_w;
  DNNX_POOL_INLINE bool operator()(std::uint64_t at, std::int64_t, std::int64_t row,
                                   std::int64_t column) const {
    const std::uint64_t rest = at - per_slice.divide(at) * slice;
    const std::uint64_t h = per_row.divide(rest);
    const std::uint64_t w = rest - h * width;
    return (h - static_cast<std::uint64_t>(row) < extent_h) &
           (w - static_cast<std::uint64_t>(column) < extent_w);
  }
};

// Any window, dilated ones and planes of 2^31 elements or more: plain divisions.
struct GridCheck {
  const IndexGeometry* ig;
  DNNX_POOL_INLINE bool operator()(std::uint64_t at, std::int64_t outer, std::int64_t row,
                                   std::int64_t column) const {
    const LoopGeometry& g = ig->loops;
    // An offset from a window's first position along (3-D) dim k: inside the extent, on a
    // multiple of the dilation.
    const auto on_grid = [&g](std::size_t k, std::int64_t offset) {
      return offset >= 0 && offset < g.extent[k] && offset % g.dilation[k] == 0;
    };
    const auto k = static_cast<std::size_t>(ig->outer);
    const auto slice = static_cast<std::int64_t>(at) / ig->in_slice;
    const std::int64_t rest = static_cast<std::int64_t>(at) - slice * ig->in_slice;
    if (!on_grid(k, slice + outer)) return false;
    if (ig->outer == 2) return true;
    if (ig->outer == 1) return on_grid(2, rest - column);
    const std::int64_t h = rest / g.in[2];
    return on_grid(1, h - row) && on_grid(2, rest - h * g.in[2] - column);
  }
};

// The scatter of the outputs [w0, w1) of one row along W of the slices held (Note [cpu max-pool
// indices]), each index checked by `inside` or, with UseTable, by the table of window positions
// (IndexGeometry::positions, shifted back by the row's offset in the slice: `table`).
template <typename T, typename I, bool ChannelsLast>
struct ScatterRun {
  const I* index;             // at the row's first output
  const T* grad;              // at the row's first output
  float* sums;                // Accumulator::sums()
  std::int64_t step;          // between outputs' indices and gradients
  std::int64_t sum_step;      // between positions of `sums`
  std::int64_t block;         // channels per output
  std::uint64_t offset;       // index of the first element of the slices held
  std::uint64_t limit;        // elements of the slices held
  std::int64_t logical;       // dst's logical position of the row's first output, channel 0
  std::int64_t channel_step;  // between channels in dst's logical order

  template <bool UseTable, typename Check>
  DNNX_POOL_INLINE void run(const IndexGeometry& ig, const Check& inside, std::int64_t w0,
                            std::int64_t w1, std::int64_t outer, std::int64_t row,
                            const std::uint8_t* table, BadIndex& bad) const {
    const LoopGeometry& g = ig.loops;
    const std::int64_t column_step = g.stride[2];
    std::int64_t column = w0 * column_step - g.pad_before[2];
    // Along W the table moves back by the window's first column (not in 1-D: W is outermost).
    const std::int64_t shift_step = ig.outer <= 1 ? column_step : 0;
    const std::uint8_t* shifted = UseTable ? table - (ig.outer <= 1 ? column : 0) : nullptr;
    // channels_first: one channel, adjacent outputs and sums, known at compile time.
    const std::int64_t steps = ChannelsLast ? step : 1;
    const std::int64_t sum_steps = ChannelsLast ? sum_step : 1;
    const std::int64_t channels = ChannelsLast ? block : 1;
    const I* idx = index + w0 * steps;
    const T* grd = grad + w0 * steps;
    for (std::int64_t w = w0; w < w1; ++w, column += column_step, idx += steps, grd += steps) {
      for (std::int64_t c = 0; c < channels; ++c) {
        const std::int64_t value = idx[c];
        // Relative to the slices held: outside the plane or the window's extent along the
        // outermost dim, it is at least `limit`.
        const std::uint64_t at = static_cast<std::uint64_t>(value) - offset;
        bool good = at < limit;
        if constexpr (UseTable) {
          good = good && shifted[at] != 0;
        } else {
          good = good && inside(at, outer, row, column);
        }
        if (good) [[likely]] {
          sums[static_cast<std::int64_t>(at) * sum_steps + c] += simd::load(grd, c);
        } else {
          bad.note(logical + c * channel_step + w, value);
        }
      }
      if constexpr (UseTable) shifted -= shift_step;
    }
  }
};

// One work item: the plane (n, c0) when channels_first (block 1), channels [c0, c0 + block) of
// image n when channels_last; indices are checked by the table of window positions or `inside`
// (Note [cpu pool index check]). Not inlined: in one function with all its siblings, the
// scatter loop's state did not fit the registers (the loop reloaded it from the stack per
// index).
template <typename T, typename I, bool ChannelsLast, typename Check>
[[gnu::noinline]] DNNX_POOL_ISA void bwd_item(const IndexGeometry& ig, const Check& inside,
                                              const T* diff_dst, const I* indices, T* diff_src,
                                              std::int64_t n, std::int64_t c0, std::int64_t block,
                                              float* buffer, BadIndex& bad) {
  const LoopGeometry& g = ig.loops;
  const auto k = static_cast<std::size_t>(ig.outer);
  const std::int64_t channels = g.channels;
  // Element offsets of (position 0, channel c0) and the step between positions.
  const std::int64_t step = ChannelsLast ? channels : 1;
  const std::int64_t in_base =
      ChannelsLast ? n * ig.in_plane * channels + c0 : (n * channels + c0) * ig.in_plane;
  const std::int64_t out_base =
      ChannelsLast ? n * ig.out_plane * channels + c0 : (n * channels + c0) * ig.out_plane;
  Accumulator<T, ChannelsLast> sums{
      diff_src + in_base, ig.in_slice, block, step, buffer, accumulator_capacity(ig, block)};
  // Outputs of a slice along W (2-D and 3-D; rows of them along H in 3-D).
  const std::int64_t rows = ig.outer == 0 ? g.out[1] : 1;
  const std::int64_t columns = ig.outer <= 1 ? g.out[2] : 1;
  const std::int64_t column_step = g.stride[2];
  // The table of window positions (IndexGeometry::positions), past its front padding.
  const std::uint8_t* const table =
      ig.positions.empty() ? nullptr : ig.positions.data() + ig.in_slice;
  // The outputs along W whose windows lie inside the input: [inner_first, inner_last).
  const std::int64_t inner_first = (g.pad_before[2] + column_step - 1) / column_step;
  const std::int64_t room = g.in[2] + g.pad_before[2] - g.extent[2];
  const std::int64_t inner_last = room < 0 ? 0 : room / column_step + 1;
  for (std::int64_t o = 0; o < g.out[k]; ++o) {
    // The slices of the window's extent inside the input: both bounds grow with o (a dilated
    // window's first and last input elements need not).
    const std::int64_t start = o * g.stride[k] - g.pad_before[k];
    const std::int64_t begin = std::max<std::int64_t>(start, 0);
    const std::int64_t end = std::min(start + g.extent[k], g.in[k]);
    sums.retire(begin);
    sums.extend(end);
    if (!ChannelsLast && end < g.in[k]) {
      // The diff_src slices the next outer output adds (f32: zeroed there; f16/bf16: written
      // soon after): ask for them, for writing, while this one is scattered.
      const T* next = diff_src + in_base + end * ig.in_slice;
      const std::int64_t bytes =
          std::min(g.stride[k], g.in[k] - end) * ig.in_slice * static_cast<std::int64_t>(sizeof(T));
      for (std::int64_t at = 0; at < bytes; at += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(next) + at, 1);
    }
    const std::int64_t offset = sums.base * ig.in_slice;
    const auto limit = static_cast<std::uint64_t>(sums.filled * ig.in_slice);
    const std::int64_t outer = sums.base - start;
    const std::int64_t first = o * ig.out_slice;
    const I* index = indices + out_base + first * step;
    const T* grad = diff_dst + out_base + first * step;
    float* const held = sums.sums();
    const std::int64_t sum_step = ChannelsLast ? sums.sum_step() : 1;
    // Windows that start inside the input along the outermost dim (then the slices held start
    // at their first position) and lie inside it along the others check with the table.
    const bool aligned = table != nullptr && start >= 0;
    std::int64_t q = first;
    std::int64_t row = -g.pad_before[1];
    for (std::int64_t r = 0; r < rows; ++r, row += g.stride[1], q += columns) {
      const bool row_inside = ig.outer != 0 || (row >= 0 && row + g.extent[1] <= g.in[1]);
      const std::int64_t row_offset = ig.outer == 0 ? row * g.in[2] : 0;
      // The outputs whose windows lie inside the input along W: [inner_begin, inner_end).
      std::int64_t inner_begin = columns, inner_end = columns;
      if (aligned && row_inside) {
        inner_begin = ig.outer == 2 ? 0 : std::min(columns, inner_first);
        inner_end = ig.outer == 2 ? columns : std::max(inner_begin, std::min(columns, inner_last));
      }
      // The table, shifted so that it is indexed by the offset from the slices held.
      const std::uint8_t* shifted = table == nullptr ? nullptr : table - row_offset;
      const ScatterRun<T, I, ChannelsLast> at_row{index + (q - first) * step,
                                                  grad + (q - first) * step,
                                                  held,
                                                  step,
                                                  sum_step,
                                                  ChannelsLast ? block : 1,
                                                  static_cast<std::uint64_t>(offset),
                                                  limit,
                                                  (n * channels + c0) * ig.out_plane + q,
                                                  ig.out_plane};
      at_row.template run<false>(ig, inside, 0, inner_begin, outer, row, shifted, bad);
      at_row.template run<true>(ig, inside, inner_begin, inner_end, outer, row, shifted, bad);
      at_row.template run<false>(ig, inside, inner_end, columns, outer, row, shifted, bad);
    }
  }
  sums.retire(g.in[k]);
}

// The work items [i0, i1): planes (channels_first) or (image, block of channels) pairs.
template <typename T, typename I, typename Check>
DNNX_POOL_INLINE void bwd_items_checked(const IndexGeometry& ig, const Check& inside,
                                        const T* diff_dst, const I* indices, T* diff_src,
                                        std::int64_t i0, std::int64_t i1, SharedBadIndex& shared) {
  const LoopGeometry& g = ig.loops;
  const std::int64_t block = g.channels_last ? std::min(index_channel_block, g.channels) : 1;
  const std::int64_t blocks = (g.channels + block - 1) / block;
  std::vector<float> buffer;
  if (!std::is_same_v<T, float>) {
    buffer.resize(static_cast<std::size_t>(accumulator_capacity(ig, block) * ig.in_slice * block));
  }
  BadIndex bad;
  for (std::int64_t item = i0; item < i1; ++item) {
    if (g.channels_last) {
      const std::int64_t c0 = item % blocks * block;
      bwd_item<T, I, true>(ig, inside, diff_dst, indices, diff_src, item / blocks, c0,
                           std::min(block, g.channels - c0), buffer.data(), bad);
    } else {
      bwd_item<T, I, false>(ig, inside, diff_dst, indices, diff_src, item / g.channels,
                            item % g.channels, 1, buffer.data(), bad);
    }
  }
  shared.merge(bad);
}

// The same with the index check the geometry needs (Note [cpu pool index check]).
template <typename T, typename I>
DNNX_POOL_INLINE void bwd_items(const IndexGeometry& ig, const T* diff_dst, const I* indices,
                                T* diff_src, std::int64_t i0, std::int64_t i1,
                                SharedBadIndex& shared) {
  const LoopGeometry& g = ig.loops;
  const auto width = static_cast<std::uint64_t>(g.in[2]);
  if (ig.outer == 2 && !ig.dilated) {
    bwd_items_checked(ig, WholeCheck{}, diff_dst, indices, diff_src, i0, i1, shared);
  } else if (ig.outer == 1 && ig.reciprocal) {
    const ColumnCheck check{ig.per_row, width, static_cast<std::uint64_t>(g.extent[2])};
    bwd_items_checked(ig, check, diff_dst, indices, diff_src, i0, i1, shared);
  } else if (ig.outer == 0 && ig.reciprocal) {
    const RowColumnCheck check{ig.per_slice,
                               ig.per_row,
                               static_cast<std::uint64_t>(ig.in_slice),
                               width,
                               static_cast<std::uint64_t>(g.extent[1]),
                               static_cast<std::uint64_t>(g.extent[2])};
    bwd_items_checked(ig, check, diff_dst, indices, diff_src, i0, i1, shared);
  } else {
    bwd_items_checked(ig, GridCheck{&ig}, diff_dst, indices, diff_src, i0, i1, shared);
  }
}

// ---- entry points -------------------------------------------------------------------------

template <typename T, typename I>
DNNX_POOL_INLINE void fwd_typed(const IndexGeometry& ig, const void* src, void* dst, void* indices,
                                std::int64_t i0, std::int64_t i1) {
  const auto* in = static_cast<const T*>(src);
  auto* out = static_cast<T*>(dst);
  auto* index = static_cast<I*>(indices);
  if (ig.loops.channels_last) {
    fwd_last(ig, in, out, index, i0, i1);
  } else {
    fwd_first(ig, in, out, index, i0, i1);
  }
}

/// Forward over work items [i0, i1) (output rows for channels_first, output positions for
/// channels_last); `dst` and `indices` (of `index_dtype`) may be null.
DNNX_POOL_ISA void max_fwd(const IndexGeometry& ig, DType dtype, DType index_dtype, const void* src,
                           void* dst, void* indices, std::int64_t i0, std::int64_t i1) {
  const bool wide = index_dtype == DType::i64;
  switch (dtype) {
    case DType::f16:
      return wide ? fwd_typed<simd::F16, std::int64_t>(ig, src, dst, indices, i0, i1)
                  : fwd_typed<simd::F16, std::int32_t>(ig, src, dst, indices, i0, i1);
    case DType::bf16:
      return wide ? fwd_typed<simd::Bf16, std::int64_t>(ig, src, dst, indices, i0, i1)
                  : fwd_typed<simd::Bf16, std::int32_t>(ig, src, dst, indices, i0, i1);
    default:
      return wide ? fwd_typed<float, std::int64_t>(ig, src, dst, indices, i0, i1)
                  : fwd_typed<float, std::int32_t>(ig, src, dst, indices, i0, i1);
  }
}

/// Backward over work items [i0, i1) (Note [cpu max-pool indices]).
DNNX_POOL_ISA void max_bwd(const IndexGeometry& ig, DType dtype, DType index_dtype,
                           const void* diff_dst, const void* indices, void* diff_src,
                           std::int64_t i0, std::int64_t i1, SharedBadIndex& bad) {
  const bool wide = index_dtype == DType::i64;
  switch (dtype) {
    case DType::f16:
      return wide ? bwd_items(ig, static_cast<const simd::F16*>(diff_dst),
                              static_cast<const std::int64_t*>(indices),
                              static_cast<simd::F16*>(diff_src), i0, i1, bad)
                  : bwd_items(ig, static_cast<const simd::F16*>(diff_dst),
                              static_cast<const std::int32_t*>(indices),
                              static_cast<simd::F16*>(diff_src), i0, i1, bad);
    case DType::bf16:
      return wide ? bwd_items(ig, static_cast<const simd::Bf16*>(diff_dst),
                              static_cast<const std::int64_t*>(indices),
                              static_cast<simd::Bf16*>(diff_src), i0, i1, bad)
                  : bwd_items(ig, static_cast<const simd::Bf16*>(diff_dst),
                              static_cast<const std::int32_t*>(indices),
                              static_cast<simd::Bf16*>(diff_src), i0, i1, bad);
    default:
      return wide ? bwd_items(ig, static_cast<const float*>(diff_dst),
                              static_cast<const std::int64_t*>(indices),
                              static_cast<float*>(diff_src), i0, i1, bad)
                  : bwd_items(ig, static_cast<const float*>(diff_dst),
                              static_cast<const std::int32_t*>(indices),
                              static_cast<float*>(diff_src), i0, i1, bad);
  }
}

#undef DNNX_POOL_INLINE
