// The phase fold's copies (kernels/phases.hpp). The input copies go by rows: a block's threads
// take consecutive positions of one row of the innermost spatial dim (a row: a sample and the
// outer dims' coordinates, with the channel in channels_first), so that the row's coordinates
// are worked out once per thread and the innermost coordinate is an addition; in channels_last a
// thread then copies all channels of its position, the phases' channels one run of C each. The
// weights' copies are one thread per element: a few thousand of them.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/phases.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

namespace dnnx::cudnn::kernels::phases {
namespace {

constexpr int row_threads = 128;
constexpr int weight_threads = 256;
constexpr std::int64_t max_grid_y = 65535;

// The rows of a tensor over `dims` with `channels` channels: every coordinate but the innermost
// spatial one (channels_first: the channel included).
std::int64_t rows_of(const Geometry& g, std::int64_t channels, const std::int64_t dims[3]) {
  return g.batch * dims[0] * dims[1] * (g.channels_last ? 1 : channels);
}

// Row `row`'s sample, channel (channels_first) and outer coordinates.
struct Row {
  std::int64_t n, c, outer[2];
};
__device__ inline Row row_at(bool channels_last, std::int64_t row, std::int64_t channels,
                             const std::int64_t dims[3]) {
  Row r{};
  r.outer[1] = row % dims[1];
  row /= dims[1];
  r.outer[0] = row % dims[0];
  row /= dims[0];
  if (channels_last) {
    r.n = row;
  } else {
    r.c = row % channels;
    r.n = row / channels;
  }
  return r;
}

// What the threads of a block need of its row of X' (fold_input), per phase in channels_last
// (one in channels_first, the row's channel's): whether the phase's input row exists, where it
// begins in x (the innermost coordinate 0), and the phase's offset along the innermost dim.
struct FoldRow {
  std::int64_t out;  // X''s row (channels_last: its first channel)
  std::int64_t from[max_phases];
  std::int64_t p2[max_phases];
  bool inside[max_phases];
};

__device__ inline void fold_row(const Geometry& g, std::int64_t row, FoldRow& info) {
  const Row r = row_at(g.channels_last, row, g.folded_channels, g.folded);
  const std::int64_t f[3] = {r.outer[0], r.outer[1], 0};
  info.out = offset(g.channels_last, r.n, r.c, f, g.folded_channels, g.folded);
  const std::int64_t phases = phase_count(g);
  const std::int64_t first = g.channels_last ? 0 : r.c / g.channels;
  const std::int64_t count = g.channels_last ? phases : 1;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t phase = first + i;
    info.from[i] = 0;
    info.p2[i] = 0;
    info.inside[i] = phase < phases;
    if (!info.inside[i]) continue;
    std::int64_t p[3];
    offsets_of(g, phase, p);
    std::int64_t at[3] = {0, 0, 0};
    for (int k = 0; k < 2; ++k) {
      at[k] = f[k] * g.stride[k] + p[k] - g.pad[k];
      info.inside[i] = info.inside[i] && at[k] >= 0 && at[k] < g.input[k];
    }
    info.p2[i] = p[2] - g.pad[2];
    const std::int64_t c = g.channels_last ? 0 : r.c % g.channels;
    info.from[i] = offset(g.channels_last, r.n, c, at, g.channels, g.input);
  }
}

// The most channels of X' (phase_channels_max, rounded up to 8) a thread of fold_input gathers.
constexpr int max_folded_channels = 32;

template <typename T>
__global__ void fold_input_kernel(Geometry g, const T* __restrict__ x, T* __restrict__ folded,
                                  std::int64_t rows, bool packed) {
  wait_for_prior_grids();
  __shared__ FoldRow info;
  const std::int64_t f2 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t phases = phase_count(g);
  const std::int64_t C = g.channels;
  for (std::int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    __syncthreads();  // the previous row's info read
    if (threadIdx.x == 0) fold_row(g, row, info);
    __syncthreads();
    if (f2 >= g.folded[2]) continue;
    if (!g.channels_last) {
      const std::int64_t at2 = f2 * g.stride[2] + info.p2[0];
      const bool inside = info.inside[0] && at2 >= 0 && at2 < g.input[2];
      folded[info.out + f2] = inside ? x[info.from[0] + at2] : T{};
      continue;
    }
    // The position's channels gathered first, then stored by 16-byte packs where they fill
    // whole packs and the buffer is aligned to 16 bytes, else one by one.
    T values[max_folded_channels];
    int v = 0;
    for (std::int64_t phase = 0; phase < phases; ++phase) {
      const std::int64_t at2 = f2 * g.stride[2] + info.p2[phase];
      const bool inside = info.inside[phase] && at2 >= 0 && at2 < g.input[2];
      const T* in = x + info.from[phase] + (inside ? at2 * C : 0);
      for (std::int64_t c = 0; c < C; ++c) values[v++] = inside ? in[c] : T{};
    }
    while (v < g.folded_channels) values[v++] = T{};
    T* out = folded + info.out + f2 * g.folded_channels;
    if (packed) {
      constexpr int per_pack = 16 / sizeof(T);
      for (int i = 0; i < v; i += per_pack) {
        uint4 pack;
        memcpy(&pack, values + i, 16);
        *reinterpret_cast<uint4*>(out + i) = pack;
      }
    } else {
      for (int i = 0; i < v; ++i) out[i] = values[i];
    }
  }
}

// What the threads of a block need of its row of x (unfold_input): where it begins in x, and in
// X' the element of its first position's phase 0 along the innermost dim (the outer dims'
// phases in it); each position adds its innermost coordinate's fold and phase.
struct UnfoldRow {
  std::int64_t out, from;
  bool inside;  // the row's outer coordinates read by some output
};

__device__ inline void unfold_row(const Geometry& g, std::int64_t row, UnfoldRow& info) {
  const Row r = row_at(g.channels_last, row, g.channels, g.input);
  const std::int64_t at[3] = {r.outer[0], r.outer[1], 0};
  info.out = offset(g.channels_last, r.n, r.c, at, g.channels, g.input);
  std::int64_t f[3] = {0, 0, 0}, p[3] = {0, 0, 0};
  info.inside = true;
  for (int k = 0; k < 2; ++k) {
    f[k] = (at[k] + g.pad[k]) / g.stride[k];
    p[k] = (at[k] + g.pad[k]) % g.stride[k];
    info.inside = info.inside && at[k] + g.pad[k] < g.reach[k];
  }
  info.from = offset(g.channels_last, r.n, phase_of(g, p) * g.channels + r.c, f, g.folded_channels,
                     g.folded);
}

template <typename T>
__global__ void unfold_input_kernel(Geometry g, const T* __restrict__ folded, T* __restrict__ x,
                                    std::int64_t rows) {
  wait_for_prior_grids();
  __shared__ UnfoldRow info;
  const std::int64_t i2 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t padded = i2 + g.pad[2];
  const std::int64_t f2 = padded / g.stride[2], p2 = padded % g.stride[2];
  // Phase p2 of the innermost dim: the next p2 runs of C channels (channels_last) or planes of
  // C channels (channels_first) of X'.
  const std::int64_t plane = g.folded[0] * g.folded[1] * g.folded[2];
  const std::int64_t phase_step = g.channels * (g.channels_last ? 1 : plane);
  const std::int64_t position_step = g.channels_last ? g.folded_channels : 1;
  for (std::int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    __syncthreads();
    if (threadIdx.x == 0) unfold_row(g, row, info);
    __syncthreads();
    if (i2 >= g.input[2]) continue;
    // An element no output reads has a gradient of zero.
    const bool inside = info.inside && padded < g.reach[2];
    const T* in = folded + info.from + p2 * phase_step + f2 * position_step;
    if (!g.channels_last) {
      x[info.out + i2] = inside ? *in : T{};
      continue;
    }
    T* out = x + info.out + i2 * g.channels;
    for (std::int64_t c = 0; c < g.channels; ++c) out[c] = inside ? in[c] : T{};
  }
}

// The coordinates of element `index` of a dense weight tensor of `channels` channels over
// `dims` taps.
__device__ inline void weight_at(bool channels_last, std::int64_t index, std::int64_t channels,
                                 const std::int64_t dims[3], std::int64_t& o, std::int64_t& c,
                                 std::int64_t tap[3]) {
  if (channels_last) {
    c = index % channels;
    index /= channels;
  }
  tap[2] = index % dims[2];
  index /= dims[2];
  tap[1] = index % dims[1];
  index /= dims[1];
  tap[0] = index % dims[0];
  index /= dims[0];
  if (!channels_last) {
    c = index % channels;
    index /= channels;
  }
  o = index;
}

template <typename T>
__global__ void fold_weights_kernel(Geometry g, const T* __restrict__ w, T* __restrict__ folded,
                                    std::int64_t total) {
  wait_for_prior_grids();
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    std::int64_t o = 0, c = 0, q[3];
    weight_at(g.channels_last, i, g.folded_channels, g.folded_kernel, o, c, q);
    const std::int64_t from = weight_source(g, o, c, q);
    folded[i] = from < 0 ? T{} : w[from];
  }
}

template <typename T>
__global__ void unfold_weights_kernel(Geometry g, const T* __restrict__ folded, T* __restrict__ w,
                                      std::int64_t total) {
  wait_for_prior_grids();
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    std::int64_t o = 0, c = 0, tap[3];
    weight_at(g.channels_last, i, g.channels, g.kernel, o, c, tap);
    w[i] = folded[weight_image(g, o, c, tap)];
  }
}

std::int64_t product(const std::int64_t dims[3]) { return dims[0] * dims[1] * dims[2]; }

dim3 row_grid(std::int64_t extent, std::int64_t rows) {
  return dim3(static_cast<unsigned>((extent + row_threads - 1) / row_threads),
              static_cast<unsigned>(std::min(rows, max_grid_y)));
}

unsigned weight_grid(std::int64_t total) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(
      (total + weight_threads - 1) / weight_threads, 1, std::int64_t{1} << 16));
}

template <typename T>
cudaError_t run_fold_input(const Geometry& g, const void* x, void* folded, const Queue& queue) {
  const std::int64_t rows = rows_of(g, g.folded_channels, g.folded);
  const bool packed =
      g.folded_channels * static_cast<std::int64_t>(sizeof(T)) % 16 == 0 && aligned(folded, 16);
  return launch(queue, fold_input_kernel<T>, row_grid(g.folded[2], rows), dim3(row_threads), 0, g,
                static_cast<const T*>(x), static_cast<T*>(folded), rows, packed);
}

template <typename T>
cudaError_t run_unfold_input(const Geometry& g, const void* folded, void* x, const Queue& queue) {
  const std::int64_t rows = rows_of(g, g.channels, g.input);
  return launch(queue, unfold_input_kernel<T>, row_grid(g.input[2], rows), dim3(row_threads), 0, g,
                static_cast<const T*>(folded), static_cast<T*>(x), rows);
}

template <typename T>
cudaError_t run_fold_weights(const Geometry& g, const void* w, void* folded, const Queue& queue) {
  const std::int64_t total = g.out_channels * g.folded_channels * product(g.folded_kernel);
  return launch(queue, fold_weights_kernel<T>, dim3(weight_grid(total)), dim3(weight_threads), 0, g,
                static_cast<const T*>(w), static_cast<T*>(folded), total);
}

template <typename T>
cudaError_t run_unfold_weights(const Geometry& g, const void* folded, void* w, const Queue& queue) {
  const std::int64_t total = g.out_channels * g.channels * product(g.kernel);
  return launch(queue, unfold_weights_kernel<T>, dim3(weight_grid(total)), dim3(weight_threads), 0,
                g, static_cast<const T*>(folded), static_cast<T*>(w), total);
}

// The launch of `Run` for the element size (the copies move bits), or cudaErrorInvalidValue.
template <template <typename> class Run, typename... Args>
cudaError_t by_element(const Geometry& g, int element_bytes, Args... args) {
  if (geometry_unsupported(g) != nullptr) return cudaErrorInvalidValue;
  if (element_bytes == 2) return Run<std::uint16_t>::run(g, args...);
  if (element_bytes == 4) return Run<std::uint32_t>::run(g, args...);
  return cudaErrorInvalidValue;
}

template <typename T>
struct FoldInput {
  static cudaError_t run(const Geometry& g, const void* x, void* folded, const Queue& queue) {
    return run_fold_input<T>(g, x, folded, queue);
  }
};
template <typename T>
struct UnfoldInput {
  static cudaError_t run(const Geometry& g, const void* folded, void* x, const Queue& queue) {
    return run_unfold_input<T>(g, folded, x, queue);
  }
};
template <typename T>
struct FoldWeights {
  static cudaError_t run(const Geometry& g, const void* w, void* folded, const Queue& queue) {
    return run_fold_weights<T>(g, w, folded, queue);
  }
};
template <typename T>
struct UnfoldWeights {
  static cudaError_t run(const Geometry& g, const void* folded, void* w, const Queue& queue) {
    return run_unfold_weights<T>(g, folded, w, queue);
  }
};

}  // namespace

const char* geometry_unsupported(const Geometry& g) {
  if (g.batch < 1 || g.channels < 1 || g.out_channels < 1) return "empty tensors";
  for (int k = 0; k < 3; ++k) {
    if (g.stride[k] < 1 || g.stride[k] > max_phases || g.input[k] < 1 || g.kernel[k] < 1 ||
        g.pad[k] < 0)
      return "strides of 1 to 32, sizes and kernels of at least 1, paddings of at least 0";
    if (g.reach[k] < 1 || g.reach[k] > g.folded[k] * g.stride[k])
      return "a reach of the outputs beyond the folded input";
    if (g.folded_kernel[k] != (g.kernel[k] + g.stride[k] - 1) / g.stride[k])
      return "a folded kernel other than ceil(kernel / stride)";
  }
  if (phase_count(g) > max_phases) return "more phases than the copies take";
  if (g.channels_last && g.folded_channels > max_folded_channels)
    return "more than 32 folded channels in channels_last";
  if (g.folded_channels < phase_count(g) * g.channels)
    return "fewer folded channels than phases x channels";
  if (g.folded[2] > std::int64_t{INT_MAX} * row_threads ||
      g.input[2] > std::int64_t{INT_MAX} * row_threads)
    return "rows longer than the copies index";
  return nullptr;
}

cudaError_t fold_input(const Geometry& g, const void* x, void* folded, int element_bytes,
                       const Queue& queue) {
  return by_element<FoldInput>(g, element_bytes, x, folded, queue);
}

cudaError_t unfold_input(const Geometry& g, const void* folded, void* x, int element_bytes,
                         const Queue& queue) {
  return by_element<UnfoldInput>(g, element_bytes, folded, x, queue);
}

cudaError_t fold_weights(const Geometry& g, const void* w, void* folded, int element_bytes,
                         const Queue& queue) {
  return by_element<FoldWeights>(g, element_bytes, w, folded, queue);
}

cudaError_t unfold_weights(const Geometry& g, const void* folded, void* w, int element_bytes,
                           const Queue& queue) {
  return by_element<UnfoldWeights>(g, element_bytes, folded, w, queue);
}

}  // namespace dnnx::cudnn::kernels::phases
