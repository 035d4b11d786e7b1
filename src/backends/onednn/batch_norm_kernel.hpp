#pragma once
// dnnx's own batch normalization on the cpu, the cpu backend's cpu:kernel:bnorm candidate
// (batch_norm.cpp): every dtype, layout and mode, forward and backward, training and inference,
// at either simd level (Note [simd levels]); Note [batch-norm loops] in batch_norm_kernel.cpp.

#include <dnnx/ops/batch_norm.hpp>

#include "backends/onednn/layer_simd.hpp"

#include <cstdint>

namespace dnnx::onednn::bnorm {

/// The f32 parameter and statistics arrays of one call, desc.statistics() values each, in the
/// order of BatchNormDesc::param_dims(); null when the call has none (scale: 1, shift: 0).
struct Stats {
  const float* scale = nullptr;
  const float* shift = nullptr;
  float* running_mean = nullptr;   ///< read (inference) or updated (training forward)
  float* running_var = nullptr;    ///< likewise; unbiased
  float* saved_mean = nullptr;     ///< written by a training forward, read by its backward
  float* saved_inv_std = nullptr;  ///< likewise: 1 / sqrt(biased variance + eps)
  float* diff_scale = nullptr;     ///< written by backward
  float* diff_shift = nullptr;     ///< written by backward
};

/// What a training forward leaves besides dst, for statistics [first, last) from their batch mean
/// and biased variance (mean[k - first], var[k - first]): saved_mean, saved_inv_std and PyTorch's
/// update of the running statistics (Note [batch-norm on oneDNN] in batch_norm.cpp).
void finish_training_fwd(const BatchNormDesc& desc, const Stats& s, const float* mean,
                         const float* var, std::int64_t first, std::int64_t last);

/// How a planes walk (spatial, channels-first data) shares its work among threads (Note
/// [batch-norm loops] in batch_norm_kernel.cpp): the results are the same bits either way.
enum class Schedule : std::uint8_t {
  automatic,     ///< by_statistic with at least 4 statistics per thread, else by_piece
  by_statistic,  ///< each thread sums and normalises a range of statistics
  by_piece,      ///< all pieces summed in parallel, then normalised in parallel
};

/// The forward pass of `desc` on dense `src` and `dst` (desc.dtype, desc.layout; not
/// overlapping) at `level`: training normalises with the batch statistics and writes
/// s.saved_mean / s.saved_inv_std and updates s.running_* (those given); inference normalises
/// with s.running_*. Throws Internal if this CPU cannot run `level`.
void forward(const BatchNormDesc& desc, simd::Level level, const void* src, void* dst,
             const Stats& s, Schedule schedule = Schedule::automatic);

/// The backward pass: `diff_src` from `src` and `diff_dst`, and s.diff_scale / s.diff_shift when
/// given; training reads s.saved_mean / s.saved_inv_std, inference s.running_*. Throws Internal if
/// this CPU cannot run `level`.
void backward(const BatchNormDesc& desc, simd::Level level, const void* src, const void* diff_dst,
              void* diff_src, const Stats& s, Schedule schedule = Schedule::automatic);

}  // namespace dnnx::onednn::bnorm
