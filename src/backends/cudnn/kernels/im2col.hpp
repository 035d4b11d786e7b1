#pragma once
// The column matrix of a convolution (Note [im2col candidates] in conv_im2col.cpp): im2col copies
// every input element a kernel tap reads into a matrix whose rows are the products' depth, col2im
// sums such a matrix's gradient back into the input's. Plain pointers, sizes and a stream; no
// cuDNN types. The index functions are shared by the kernels and the host (a test recomputes the
// column matrix with them).

#include <cuda_runtime_api.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_IM2COL_HD __host__ __device__
#else
#define DNNX_IM2COL_HD
#endif

namespace dnnx::cudnn::kernels::im2col {

/// Element type of both tensors (col2im sums in f32).
enum class Element : int { f32, f16, bf16 };

/// A convolution's geometry, `dims` spatial dims used of each array (row-major, outermost
/// first). `taps` = the product of `kernel`, `positions` of `output`, `in_positions` of `input`.
///   channels_first: src {batch, channels, input...}; col {batch, channels * taps, positions},
///                   row c * taps + tap (the order of weights {O, C, kernel...});
///   channels_last:  src {batch, input..., channels}; col {batch, positions, taps * channels},
///                   column tap * channels + c (the order of weights {O, kernel..., C});
///   packed (channels_first only): col {channels * taps, batch * positions}, the samples side by
///                   side (Note [packed gemm] in conv_gemm.cpp).
struct Geometry {
  int dims = 2;
  bool channels_last = false;
  bool packed = false;
  std::int64_t batch = 1, channels = 1;
  std::int64_t input[3] = {1, 1, 1};
  std::int64_t output[3] = {1, 1, 1};
  std::int64_t kernel[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t pad[3] = {0, 0, 0};  ///< before each dim
  std::int64_t dilation[3] = {1, 1, 1};
  std::int64_t taps = 1, positions = 1, in_positions = 1;
};

/// Elements of the column matrix.
DNNX_IM2COL_HD inline std::int64_t col_elements(const Geometry& g) {
  return g.batch * g.positions * g.channels * g.taps;
}

/// Where column element `index` (in col's memory order) comes from: its sample, channel, tap and
/// output position.
struct ColEntry {
  std::int64_t n, c, tap, p;
};
DNNX_IM2COL_HD inline ColEntry col_entry(const Geometry& g, std::int64_t index) {
  ColEntry e{};
  if (g.packed) {
    e.p = index % g.positions;
    const std::int64_t t = index / g.positions;
    e.n = t % g.batch;
    const std::int64_t row = t / g.batch;
    e.c = row / g.taps;
    e.tap = row % g.taps;
  } else if (!g.channels_last) {
    e.p = index % g.positions;
    const std::int64_t t = index / g.positions;
    const std::int64_t row = t % (g.channels * g.taps);
    e.n = t / (g.channels * g.taps);
    e.c = row / g.taps;
    e.tap = row % g.taps;
  } else {
    const std::int64_t column = index % (g.taps * g.channels);
    const std::int64_t t = index / (g.taps * g.channels);
    e.p = t % g.positions;
    e.n = t / g.positions;
    e.tap = column / g.channels;
    e.c = column % g.channels;
  }
  return e;
}

/// The offset in col of (n, c, tap, p).
DNNX_IM2COL_HD inline std::int64_t col_offset(const Geometry& g, std::int64_t n, std::int64_t c,
                                              std::int64_t tap, std::int64_t p) {
  if (g.packed) return ((c * g.taps + tap) * g.batch + n) * g.positions + p;
  return g.channels_last ? (n * g.positions + p) * (g.taps * g.channels) + tap * g.channels + c
                         : (n * g.channels * g.taps + c * g.taps + tap) * g.positions + p;
}

/// The offset in src of (n, c, input position q).
DNNX_IM2COL_HD inline std::int64_t src_offset(const Geometry& g, std::int64_t n, std::int64_t c,
                                              std::int64_t q) {
  return g.channels_last ? (n * g.in_positions + q) * g.channels + c
                         : (n * g.channels + c) * g.in_positions + q;
}

/// Splits `index` (row-major over sizes[0..dims)) into coords, in 32 bits (Note [im2col
/// kernels] in im2col.cu: positions and taps are below 2^31).
DNNX_IM2COL_HD inline void split(std::uint32_t index, const std::int64_t* sizes, int dims,
                                 int* coords) {
  for (int d = dims - 1; d > 0; --d) {
    const auto size = static_cast<std::uint32_t>(sizes[d]);
    const std::uint32_t rest = index / size;
    coords[d] = static_cast<int>(index - rest * size);
    index = rest;
  }
  coords[0] = static_cast<int>(index);
}

/// The input position that tap coords k read for output coords o, or -1 in the padding.
DNNX_IM2COL_HD inline std::int64_t source_position(const Geometry& g, const int* o, const int* k) {
  std::int64_t q = 0;
  for (int d = 0; d < g.dims; ++d) {
    const std::int64_t i = o[d] * g.stride[d] - g.pad[d] + k[d] * g.dilation[d];
    if (i < 0 || i >= g.input[d]) return -1;
    q = q * g.input[d] + i;
  }
  return q;
}

/// The input position tap `tap` reads for output position `p`, or -1 where it falls in the
/// padding.
DNNX_IM2COL_HD inline std::int64_t tap_source(const Geometry& g, std::int64_t tap, std::int64_t p) {
  int k[3] = {0, 0, 0}, o[3] = {0, 0, 0};
  split(static_cast<std::uint32_t>(tap), g.kernel, g.dims, k);
  split(static_cast<std::uint32_t>(p), g.output, g.dims, o);
  return source_position(g, o, k);
}

/// The sum over the taps, in tap order, of the column entries that im2col copies input element
/// (n, c, q) to: load(offset) reads a col entry as float. What col2im writes per element.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename Load>
DNNX_IM2COL_HD inline float gathered_sum(const Geometry& g, std::int64_t n, std::int64_t c,
                                         std::int64_t q, const Load& load) {
  int i[3] = {0, 0, 0};
  split(static_cast<std::uint32_t>(q), g.input, g.dims, i);
  // Tap k of dim d reaches output coordinate (i + pad - k * dilation) / stride when that divides
  // and lies inside the output; the last dim's tap fastest, as the tap index runs.
  int k[3] = {0, 0, 0};
  float sum = 0.0f;
  for (std::int64_t tap = 0; tap < g.taps; ++tap) {
    std::int64_t p = 0;
    bool valid = true;
    for (int d = 0; d < g.dims; ++d) {
      const std::int64_t shifted = i[d] + g.pad[d] - k[d] * g.dilation[d];
      const std::int64_t stride = g.stride[d];
      const std::int64_t o = stride == 1 ? shifted : shifted / stride;
      if (shifted < 0 || (stride != 1 && o * stride != shifted) || o >= g.output[d]) {
        valid = false;
        break;
      }
      p = p * g.output[d] + o;
    }
    if (valid) sum += load(col_offset(g, n, c, tap, p));
    for (int d = g.dims - 1; d >= 0; --d) {
      if (++k[d] < g.kernel[d]) break;
      k[d] = 0;
    }
  }
  return sum;
}

/// col = the column matrix of src (zeros where a tap falls in the padding), each element copied
/// bit for bit. Queues the work on `stream` and returns the launch status.
cudaError_t im2col(Element element, const Geometry& geometry, const void* src, void* col,
                   cudaStream_t stream);

/// src = the sum, per input element, of the col entries that im2col would copy it to (f32 sums
/// in tap order, rounded once; an element no tap reads gets 0). Queues the work on `stream` and
/// returns the launch status.
cudaError_t col2im(Element element, const Geometry& geometry, const void* col, void* src,
                   cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::im2col
