#pragma once
// The copies of a strided convolution's phase fold (Note [phase folds] in conv_phases.cpp): the
// input's phases of the stride as channels of a denser input (space to depth, its padding
// written as zeros) and back, and the weights' taps regrouped by phase and back. Plain pointers,
// sizes and a Queue; no cuDNN types. The index functions are shared by the kernels and the host
// (a test runs the fold's copies with them on the host).

#include "backends/cudnn/kernels/queue.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_PHASES_HD __host__ __device__
#else
#define DNNX_PHASES_HD
#endif

namespace dnnx::cudnn::kernels::phases {

/// A convolution of 1 to 3 spatial dims lifted to three (leading dims of size 1, stride 1) and
/// its phase fold. Per dim k: the stride s[k] is the fold's phase count along k, input x's size
/// in[k] with pad[k] before, the folded input X' of size folded[k], the kernel's taps kernel[k]
/// and the folded kernel's folded_kernel[k] = ceil(kernel[k] / s[k]); reach[k] the padded
/// positions the outputs read, (out - 1) x s + (kernel - 1) x dilation + 1 (past them, input
/// elements no output reads, which may still lie within X').
///   X'[n][c'][f] = x[n][c][f x s + p - pad] (0 outside x), c' = phase(p) x C + c, for
///                  c' < phases x C; 0 for the channels after those (the rounding up);
///   W'[o][c'][q] = w[o][c][q x s + p] (0 beyond the kernel), c' as for X'.
/// Tensors are dense: channels_first x {N, C, D, H, W}, w {K, C, kernel}; channels_last x
/// {N, D, H, W, C}, w {K, kernel, C}; X' and W' alike with C' channels.
struct Geometry {
  bool channels_last = false;
  std::int64_t batch = 1, channels = 1, folded_channels = 1, out_channels = 1;
  std::int64_t input[3] = {1, 1, 1};
  std::int64_t folded[3] = {1, 1, 1};
  std::int64_t kernel[3] = {1, 1, 1};
  std::int64_t folded_kernel[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t pad[3] = {0, 0, 0};
  std::int64_t reach[3] = {1, 1, 1};
};

/// The most phases (the product of the strides) the kernels take.
inline constexpr int max_phases = 32;

/// The phases: the product of the strides.
DNNX_PHASES_HD inline std::int64_t phase_count(const Geometry& g) {
  return g.stride[0] * g.stride[1] * g.stride[2];
}

/// The phase of the offsets p[3] (each below its stride), the first dim's slowest.
DNNX_PHASES_HD inline std::int64_t phase_of(const Geometry& g, const std::int64_t p[3]) {
  return (p[0] * g.stride[1] + p[1]) * g.stride[2] + p[2];
}

/// The offsets of `phase` (the inverse of phase_of()).
DNNX_PHASES_HD inline void offsets_of(const Geometry& g, std::int64_t phase, std::int64_t p[3]) {
  p[2] = phase % g.stride[2];
  p[1] = phase / g.stride[2] % g.stride[1];
  p[0] = phase / (g.stride[2] * g.stride[1]);
}

/// The offset of element (n, c, at[3]) of a dense tensor of `channels` channels over `dims`.
DNNX_PHASES_HD inline std::int64_t offset(bool channels_last, std::int64_t n, std::int64_t c,
                                          const std::int64_t at[3], std::int64_t channels,
                                          const std::int64_t dims[3]) {
  const std::int64_t position = (at[0] * dims[1] + at[1]) * dims[2] + at[2];
  const std::int64_t positions = dims[0] * dims[1] * dims[2];
  return channels_last ? (n * positions + position) * channels + c
                       : (n * channels + c) * positions + position;
}

/// The element of x that X'[n][c'][f] holds: its offset in x, or -1 where it holds a zero (the
/// padding, or a channel of the rounding up).
DNNX_PHASES_HD inline std::int64_t input_source(const Geometry& g, std::int64_t n,
                                                std::int64_t folded_c, const std::int64_t f[3]) {
  const std::int64_t phase = folded_c / g.channels;
  if (phase >= phase_count(g)) return -1;
  std::int64_t p[3];
  offsets_of(g, phase, p);
  std::int64_t at[3];
  for (int k = 0; k < 3; ++k) {
    at[k] = f[k] * g.stride[k] + p[k] - g.pad[k];
    if (at[k] < 0 || at[k] >= g.input[k]) return -1;
  }
  return offset(g.channels_last, n, folded_c % g.channels, at, g.channels, g.input);
}

/// The element of X' that x[n][c][at] is: its offset in X', or -1 where no output reads it (past
/// reach: its gradient is zero, not what an inner algorithm that rounds, an FFT, leaves there).
DNNX_PHASES_HD inline std::int64_t input_image(const Geometry& g, std::int64_t n, std::int64_t c,
                                               const std::int64_t at[3]) {
  std::int64_t f[3], p[3];
  for (int k = 0; k < 3; ++k) {
    const std::int64_t padded = at[k] + g.pad[k];
    if (padded >= g.reach[k]) return -1;
    f[k] = padded / g.stride[k];
    p[k] = padded % g.stride[k];
  }
  return offset(g.channels_last, n, phase_of(g, p) * g.channels + c, f, g.folded_channels,
                g.folded);
}

/// The element of w that W'[o][c'][q] holds: its offset in w, or -1 where it holds a zero.
DNNX_PHASES_HD inline std::int64_t weight_source(const Geometry& g, std::int64_t o,
                                                 std::int64_t folded_c, const std::int64_t q[3]) {
  const std::int64_t phase = folded_c / g.channels;
  if (phase >= phase_count(g)) return -1;
  std::int64_t p[3];
  offsets_of(g, phase, p);
  std::int64_t tap[3];
  for (int k = 0; k < 3; ++k) {
    tap[k] = q[k] * g.stride[k] + p[k];
    if (tap[k] >= g.kernel[k]) return -1;
  }
  return offset(g.channels_last, o, folded_c % g.channels, tap, g.channels, g.kernel);
}

/// The element of W' that w[o][c][tap] is: its offset in W'.
DNNX_PHASES_HD inline std::int64_t weight_image(const Geometry& g, std::int64_t o, std::int64_t c,
                                                const std::int64_t tap[3]) {
  std::int64_t q[3], p[3];
  for (int k = 0; k < 3; ++k) {
    q[k] = tap[k] / g.stride[k];
    p[k] = tap[k] % g.stride[k];
  }
  return offset(g.channels_last, o, phase_of(g, p) * g.channels + c, q, g.folded_channels,
                g.folded_kernel);
}

/// Why the kernels cannot take `g` (a static string), or nullptr: strides of 1 to max_phases and
/// at most max_phases phases, C' at least phases x C, the folded kernel ceil(kernel / s), the
/// reach within X' (at most folded x s), and
/// rows of the innermost dim within what a launch's blocks index (2^31 blocks of 128).
const char* geometry_unsupported(const Geometry& g);

/// X' from x (`element_bytes` 2 or 4: the copies move bits). Queued on `queue`; returns the
/// launch status (cudaErrorInvalidValue where geometry_unsupported()).
cudaError_t fold_input(const Geometry& g, const void* x, void* folded, int element_bytes,
                       const Queue& queue);

/// x's gradient from X''s: each element of x is one element of X' (the rest of X', the padding
/// and the channels of the rounding up, is dropped), or zero where no output reads it.
cudaError_t unfold_input(const Geometry& g, const void* folded, void* x, int element_bytes,
                         const Queue& queue);

/// W' from w.
cudaError_t fold_weights(const Geometry& g, const void* w, void* folded, int element_bytes,
                         const Queue& queue);

/// w's gradient from W''s: each element of w is one element of W' (the rest dropped).
cudaError_t unfold_weights(const Geometry& g, const void* folded, void* w, int element_bytes,
                           const Queue& queue);

}  // namespace dnnx::cudnn::kernels::phases
