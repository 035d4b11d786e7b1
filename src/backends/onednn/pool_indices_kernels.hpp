// The vector kernels of cpu:kernel:max_indices (Note [cpu max-pool indices] in pool.cpp), for one
// instruction set. pool.cpp includes this file once per ISA, each time inside its own namespace
// and with DNNX_POOL_ISA defined as the target attribute of that ISA (hence no include guard),
// after the types the kernels take: IndexGeometry, LoopGeometry, LoopSpan, loop_window,
// scan_window, BadIndex, SharedBadIndex, index_channel_block.
//
// Note [per-ISA pool kernels]
// The kernels hold 16 lanes in GCC vector types, as softmax_simd.hpp's do, but also compare and
// select lanes (the max rule, the NaN tests of the conversions). GCC lowers the vector operations
// of a function for that function's own target before inlining it or cloning it for
// target_clones: on the baseline target (SSE2) a 64-byte comparison or select becomes 16 scalar
// compares and branches, which inlining into an AVX-512 clone does not undo (the forward ran
// 40x slower so). Every function here therefore carries the ISA's target attribute itself, and
// pool.cpp picks one copy at run time (__builtin_cpu_supports). The copies compute the same bits:
// maxima are exact, sums add in the same order without FMA, conversions are integer code.

// NOLINTBEGIN(bugprone-macro-parentheses)
#define DNNX_POOL_INLINE [[gnu::always_inline]] inline DNNX_POOL_ISA
// NOLINTEND(bugprone-macro-parentheses)

using simd::Vec;
using simd::VecI;
using simd::VecS;
using simd::VecU;
using VecL = std::int64_t __attribute__((vector_size(128)));

// ---- 16 lanes in and out of storage (the formulas of softmax_simd.hpp, under this ISA) ------

DNNX_POOL_INLINE Vec load16(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// binary16 -> f32, exact (simd::load_vec(const F16*)).
DNNX_POOL_INLINE Vec load16(const simd::F16* p) {
  VecS half;
  std::memcpy(&half, p, sizeof half);
  const VecU h = __builtin_convertvector(half, VecU);
  const VecU magnitude = (h & 0x7fffu) << 13;
  const Vec scaled = reinterpret_cast<Vec>(magnitude) * 0x1p112f;
  const VecU special = magnitude | 0x7f800000u;
  const VecU bits = (h & 0x7c00u) == 0x7c00u ? special : reinterpret_cast<VecU>(scaled);
  return reinterpret_cast<Vec>(bits | ((h & 0x8000u) << 16));
}
DNNX_POOL_INLINE Vec load16(const simd::Bf16* p) {
  VecS bits;
  std::memcpy(&bits, p, sizeof bits);
  return reinterpret_cast<Vec>(__builtin_convertvector(bits, VecU) << 16);
}

DNNX_POOL_INLINE void store16(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
// f32 -> binary16, round to nearest even (simd::store_vec(F16*, Vec)).
DNNX_POOL_INLINE void store16(simd::F16* p, Vec v) {
  const VecU bits = reinterpret_cast<VecU>(v);
  const VecU sign = (bits >> 16) & 0x8000u;
  const VecU magnitude = bits & 0x7fffffffu;
  const VecU overflow = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;
  constexpr std::uint32_t denorm_magic = ((127 - 15) + (23 - 10) + 1) << 23;
  const VecU subnormal = reinterpret_cast<VecU>(reinterpret_cast<Vec>(magnitude) +
                                                std::bit_cast<float>(denorm_magic)) -
                         denorm_magic;
  const VecU normal = (magnitude + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu +
                       ((magnitude >> 13) & 1u)) >>
                      13;
  const VecU chosen = magnitude >= 0x477ff000u   ? overflow
                      : magnitude < (113u << 23) ? subnormal
                                                 : normal;
  const VecS narrow = __builtin_convertvector(chosen | sign, VecS);
  std::memcpy(p, &narrow, sizeof narrow);
}
// f32 -> bf16, round to nearest even, NaN stays NaN (simd::store_vec(Bf16*, Vec)).
DNNX_POOL_INLINE void store16(simd::Bf16* p, Vec v) {
  const VecU bits = reinterpret_cast<VecU>(v);
  const VecU rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const VecU nan = (bits >> 16) | 0x40u;
  const VecU chosen = (bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  const VecS narrow = __builtin_convertvector(chosen, VecS);
  std::memcpy(p, &narrow, sizeof narrow);
}

// 16 lanes of p[j * step], j = 0..15: one load for step 1, two and an even-lane shuffle for step
// 2 (which reads p[31] too), lane by lane otherwise.
template <typename T>
DNNX_POOL_INLINE Vec load_strided(const T* p, std::int64_t step) {
  if (step == 1) return load16(p);
  if (step == 2) {
    const Vec a = load16(p);
    const Vec b = load16(p + 16);
    return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  }
  // Through memory: lane-wise writes into a Vec make GCC split the caller's vectors.
  float lanes[16];
  for (int j = 0; j < 16; ++j) lanes[j] = simd::load(p, j * step);
  return load16(lanes);
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

// The running maximum of 16 lanes under PyTorch's rule, `v > best || isnan(v)` (the NaN test on
// the bits: AVX2 has no unordered compare of 16 lanes at once).
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
  for (; i + 16 <= count; i += 16) store16(out + i, load16(in + i));
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
  for (; i + 16 <= width; i += 16) store16(body + i, load16(row + i));
  for (; i < width; ++i) body[i] = simd::load(row, i);
  std::fill(body + width, out + length, low);
}

// Elements of a padded row (padded_row) for the windows of `outputs` outputs in groups of 16.
inline std::int64_t padded_length(const LoopGeometry& g, std::int64_t outputs) {
  const std::int64_t groups = (outputs + 15) / 16;
  // The last lane's window, plus load_strided's extra element for stride 2.
  return (groups * 16 - 1) * g.stride[2] + g.kernel[2] + 1;
}

// channels_first: the output rows [r0, r1) of all planes, a row being (plane, od, oh). The input
// rows of the windows are first copied to f32 with -inf padding (padded_row), so that every
// output of the row is one of 16 lanes (adjacent outputs) and no window is clipped along W;
// padding never wins, and each lane starts at its window's first input element, as PyTorch's.
// dst or indices may be null.
template <typename T, typename I>
DNNX_POOL_INLINE void fwd_first(const IndexGeometry& ig, const T* src, T* dst, I* indices,
                                std::int64_t r0, std::int64_t r1) {
  const LoopGeometry& g = ig.loops;
  const std::int64_t rows_per_plane = g.out[0] * g.out[1];
  const std::int64_t s = g.stride[2], k = g.kernel[2], pb = g.pad_before[2];
  const std::int64_t width = g.in[2];
  if (!ig.narrow) {
    // Lane indices are int32: planes of 2^31 elements or more are scanned one output at a time.
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
  const std::int64_t length = std::max(padded_length(g, g.out[2]), pb + width);
  std::vector<float> rows(static_cast<std::size_t>(g.kernel[0] * g.kernel[1] * length));
  const VecI lane =
      VecI{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} * static_cast<std::int32_t>(s);
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t p = r / rows_per_plane;
    const std::int64_t od = r % rows_per_plane / g.out[1];
    const std::int64_t oh = r % g.out[1];
    const T* plane = src + p * ig.in_plane;
    const std::int64_t out_row = p * ig.out_plane + (od * g.out[1] + oh) * g.out[2];
    const LoopSpan wd = loop_window(g, 0, od), wh = loop_window(g, 1, oh);
    std::int64_t count = 0;
    for (std::int64_t d = wd.begin; d < wd.end; ++d) {
      for (std::int64_t h = wh.begin; h < wh.end; ++h, ++count)
        padded_row(plane + (d * g.in[1] + h) * width, width, pb, length, &rows[count * length]);
    }
    const std::int64_t first_row = (wd.begin * g.in[1] + wh.begin) * width;
    for (std::int64_t ow = 0; ow < g.out[2]; ow += 16) {
      // Lane j: output ow + j, its window's first column (may be in the padding) and the index
      // of its first input element.
      const VecI column = lane + static_cast<std::int32_t>(ow * s - pb);
      Vec best = simd::splat(-std::numeric_limits<float>::infinity());
      VecI at = (column > 0 ? column : VecI{}) + static_cast<std::int32_t>(first_row);
      std::int64_t row_at = 0;
      for (std::int64_t d = wd.begin; d < wd.end; ++d) {
        for (std::int64_t h = wh.begin; h < wh.end; ++h, ++row_at) {
          const float* padded = &rows[row_at * length] + ow * s;
          const VecI base = column + static_cast<std::int32_t>((d * g.in[1] + h) * width);
          for (std::int64_t x = 0; x < k; ++x)
            take_max(load_strided(padded + x, s), base + static_cast<std::int32_t>(x), best, at);
        }
      }
      const std::int64_t lanes = std::min<std::int64_t>(16, g.out[2] - ow);
      if (lanes == 16) {
        if (dst != nullptr) store16(dst + out_row + ow, best);
        if (indices != nullptr) store_indices(indices + out_row + ow, at);
        continue;
      }
      // The row's last, partial group: through memory (lane reads would split the vectors).
      float values[16];
      std::int32_t places[16];
      std::memcpy(values, &best, sizeof values);
      std::memcpy(places, &at, sizeof places);
      for (std::int64_t j = 0; j < lanes; ++j) {
        if (dst != nullptr) simd::store(dst, out_row + ow + j, values[j]);
        if (indices != nullptr) indices[out_row + ow + j] = static_cast<I>(places[j]);
      }
    }
  }
}

// channels_last: the output positions [q0, q1) of all images, 16 channels at a time.
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
    for (; ig.narrow && c + 16 <= channels; c += 16) {
      Vec best = simd::splat(-std::numeric_limits<float>::infinity());
      VecI at = VecI{} + static_cast<std::int32_t>((w[0].begin * g.in[1] + w[1].begin) * g.in[2] +
                                                   w[2].begin);
      for (std::int64_t d = w[0].begin; d < w[0].end; ++d) {
        for (std::int64_t h = w[1].begin; h < w[1].end; ++h) {
          for (std::int64_t x = w[2].begin; x < w[2].end; ++x) {
            const std::int64_t at_in = (d * g.in[1] + h) * g.in[2] + x;
            take_max(load16(image + at_in * channels + c),
                     VecI{} + static_cast<std::int32_t>(at_in), best, at);
          }
        }
      }
      if (dst != nullptr) store16(dst + out_at + c, best);
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

// The f32 buffer of one backward work item and the diff_src slices it stands for (Note [cpu
// max-pool indices]): slices [base, base + filled) of the outermost spatial dim, each `size`
// positions x `block` channels.
template <typename T, bool ChannelsLast>
struct SliceBuffer {
  float* data;
  T* out;             // diff_src at (position 0, the item's first channel)
  std::int64_t size;  // positions of a slice
  std::int64_t block;
  std::int64_t step;  // elements between positions of `out`
  std::int64_t base = 0;
  std::int64_t filled = 0;

  // Slices [base, to) leave the buffer: those it holds converted to T, the others (no window
  // reached them) written as zeros; it keeps the rest, moved to its front.
  DNNX_POOL_INLINE void flush(std::int64_t to) {
    const std::int64_t held = std::min(to - base, filled);
    if (ChannelsLast) {
      for (std::int64_t i = 0; i < held * size; ++i)
        store_row(out + (base * size + i) * step, data + i * block, block);
      for (std::int64_t i = (base + held) * size; i < to * size; ++i)
        std::memset(static_cast<void*>(out + i * step), 0,
                    sizeof(T) * static_cast<std::size_t>(block));
    } else {
      store_row(out + base * size, data, held * size);
      std::memset(static_cast<void*>(out + (base + held) * size), 0,
                  sizeof(T) * static_cast<std::size_t>((to - base - held) * size));
    }
    filled -= held;
    if (filled > 0 && held > 0) {
      std::memmove(data, data + held * size * block,
                   sizeof(float) * static_cast<std::size_t>(filled * size * block));
    }
    base = to;
  }

  // Holds slices up to `end`, the new ones zero.
  DNNX_POOL_INLINE void extend(std::int64_t end) {
    std::fill(data + filled * size * block, data + (end - base) * size * block, 0.0f);
    filled = end - base;
  }
};

// One work item: the plane (n, c0) when channels_first (block 1), channels [c0, c0 + block) of
// image n when channels_last. `buffer` holds kernel[outer] slices x block floats.
template <typename T, typename I, bool ChannelsLast>
DNNX_POOL_INLINE void bwd_item(const IndexGeometry& ig, const T* diff_dst, const I* indices,
                               T* diff_src, std::int64_t n, std::int64_t c0, std::int64_t block,
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
  SliceBuffer<T, ChannelsLast> slices{buffer, diff_src + in_base, ig.in_slice, block, step};
  for (std::int64_t o = 0; o < g.out[k]; ++o) {
    const LoopSpan span = loop_window(g, static_cast<int>(k), o);
    slices.flush(span.begin);
    slices.extend(span.end);
    const std::int64_t offset = slices.base * ig.in_slice;
    const auto limit = static_cast<std::uint64_t>(slices.filled * ig.in_slice);
    const std::int64_t first = o * ig.out_slice;
    for (std::int64_t q = first; q < first + ig.out_slice; ++q) {
      const I* index = indices + out_base + q * step;
      const T* grad = diff_dst + out_base + q * step;
      for (std::int64_t c = 0; c < block; ++c) {
        const std::int64_t value = index[c];
        // One unsigned comparison: inside this outer output's slices (and so the plane).
        const std::uint64_t at =
            static_cast<std::uint64_t>(value) - static_cast<std::uint64_t>(offset);
        if (at < limit) {
          buffer[static_cast<std::int64_t>(at) * block + c] += simd::load(grad, c);
        } else {
          // Its place in dst's logical order (n, c, position).
          bad.note((n * channels + c0 + c) * ig.out_plane + q, value);
        }
      }
    }
  }
  slices.flush(g.in[k]);
}

// The work items [i0, i1): planes (channels_first) or (image, block of channels) pairs.
template <typename T, typename I>
DNNX_POOL_INLINE void bwd_items(const IndexGeometry& ig, const T* diff_dst, const I* indices,
                                T* diff_src, std::int64_t i0, std::int64_t i1,
                                SharedBadIndex& shared) {
  const LoopGeometry& g = ig.loops;
  const auto k = static_cast<std::size_t>(ig.outer);
  const std::int64_t block = g.channels_last ? std::min(index_channel_block, g.channels) : 1;
  const std::int64_t blocks = (g.channels + block - 1) / block;
  std::vector<float> buffer(static_cast<std::size_t>(g.kernel[k] * ig.in_slice * block));
  BadIndex bad;
  for (std::int64_t item = i0; item < i1; ++item) {
    if (g.channels_last) {
      const std::int64_t c0 = item % blocks * block;
      bwd_item<T, I, true>(ig, diff_dst, indices, diff_src, item / blocks, c0,
                           std::min(block, g.channels - c0), buffer.data(), bad);
    } else {
      bwd_item<T, I, false>(ig, diff_dst, indices, diff_src, item / g.channels, item % g.channels,
                            1, buffer.data(), bad);
    }
  }
  shared.merge(bad);
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
