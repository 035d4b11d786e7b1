#pragma once
/// \file
/// Batch normalization (Ioffe & Szegedy, 2015): per-activation or spatial statistics, training
/// (batch statistics, running statistics updated with momentum as PyTorch does) and inference
/// (running statistics), forward and backward. The backward pass also works in inference mode
/// (frozen statistics), unlike cuDNN's own backward call.
///
/// Data tensors (src, dst, diff_src, diff_dst) have desc.dtype (f32, f16 or bf16) and are dense in
/// desc.layout. Parameter and statistics tensors (scale, shift, running_mean, running_var,
/// saved_mean, saved_inv_std, diff_scale, diff_shift) are always f32, as in cuDNN and PyTorch's
/// mixed precision, with dims BatchNormDesc::param_dims().

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// Which elements share one mean and variance.
enum class BatchNormMode : std::uint8_t {
  /// One statistic per element of a sample (C x spatial...), over N: PyTorch's BatchNorm1d on
  /// N x F, cuDNN's CUDNN_BATCHNORM_PER_ACTIVATION.
  per_activation,
  /// One statistic per channel, over N and every spatial position: BatchNorm1d on N x C x L,
  /// BatchNorm2d, BatchNorm3d, cuDNN's CUDNN_BATCHNORM_SPATIAL (and SPATIAL_PERSISTENT, which is
  /// one of its candidates, not a mode).
  spatial,
};

/// "per_activation" or "spatial".
std::string_view to_string(BatchNormMode mode);
/// Parses "per_activation" (also "per-activation", "activation") and "spatial"; throws
/// InvalidArgument listing them.
BatchNormMode parse_batch_norm_mode(std::string_view text);

/// What a batch normalization computes. Plain data: comparable, hashable, printable; it is the
/// cache key, the error context and the test-case name.
struct BatchNormDesc {
  Dims dims;                                    ///< src dims N, C, [D,] [H,] W: rank 2 to 5
  BatchNormMode mode = BatchNormMode::spatial;  ///< which elements share statistics
  /// true: normalise with the batch statistics, update the running statistics, save the batch
  /// mean and inverse standard deviation for backward. false: normalise with the running ones.
  bool training = true;
  bool affine = true;  ///< scale and shift; false: scale 1, shift 0, no diff_scale/diff_shift
  double eps = 1e-5;   ///< added to the variance before the square root; > 0
  /// Running statistics after a training forward: running = (1 - momentum) * running +
  /// momentum * batch (running_var takes the unbiased batch variance); in [0, 1].
  double momentum = 0.1;
  DType dtype = DType::f32;                ///< dtype of src, dst, diff_src, diff_dst
  Layout layout = Layout::channels_first;  ///< memory order of the data tensors

  /// Builds a spatial desc for src dims `dims` (PyTorch's BatchNorm2d and friends).
  static BatchNormDesc spatial_of(const Dims& dims, bool training = true, DType dtype = DType::f32,
                                  Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value (including training on a
  /// batch where each statistic would see a single value, which PyTorch rejects too).
  void validate() const;

  /// dims of src, dst, diff_src and diff_dst (the `dims` field).
  const Dims& src_dims() const { return dims; }
  // param_dims(), statistics() and reduction_size() check `dims` first: InvalidArgument naming them
  // when they are out of range (a desc that was never validated), never a negative or wrapped size.
  /// dims of every parameter and statistics tensor: {C} for spatial, {1, C, spatial...} (one
  /// sample of src) for per_activation. Per-activation ones are dense in `layout`, so each holds
  /// its values in the memory order of one sample of src; rank-1 ones are contiguous.
  Dims param_dims() const;
  /// Number of statistics: C for spatial, C x spatial... for per_activation.
  std::int64_t statistics() const;
  /// Values behind each statistic: N x spatial... for spatial, N for per_activation.
  std::int64_t reduction_size() const;

  /// The `dnnx` CLI line reproducing this case, e.g. `dnnx profile bnorm --input 64x256x56x56
  /// --mode spatial --training --eps 1e-05 --momentum 0.1 --dtype f32 --layout nchw
  /// --direction fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const BatchNormDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const BatchNormDesc& desc);

/// The parameter and statistics tensors of a call (f32, dims desc.param_dims()). Which ones a
/// call needs:
///   scale, shift:   required when desc.affine (shift is not read by backward); must be null
///                   otherwise.
///   running_mean, running_var: training forward: optional (both or neither), updated in place;
///                   inference forward and backward: required, read.
///   saved_mean, saved_inv_std: training forward: optional outputs, both or neither (the batch
///                   mean and 1 / sqrt(biased batch variance + eps)); training backward: required
///                   inputs (what the training forward saved); inference: not used.
struct BatchNormTensors {
  const Tensor* scale = nullptr;    ///< gamma
  const Tensor* shift = nullptr;    ///< beta
  Tensor* running_mean = nullptr;   ///< running mean
  Tensor* running_var = nullptr;    ///< running (unbiased) variance
  Tensor* saved_mean = nullptr;     ///< batch mean of the training forward
  Tensor* saved_inv_std = nullptr;  ///< 1 / sqrt(biased batch variance + eps) of that forward
};

/// dst = (src - mean) / sqrt(var + eps) * scale + shift, with the batch statistics (training) or
/// the running ones (inference). Training also updates the running statistics (if given) and
/// writes saved_mean / saved_inv_std (if given). src and dst must not overlap. Returns the choice
/// that ran.
std::shared_ptr<const Choice> batch_norm_fwd(Context& context, const BatchNormDesc& desc,
                                             const Tensor& src, Tensor& dst,
                                             const BatchNormTensors& tensors = {});

/// The gradients of the forward pass given diff_dst: diff_src, and with desc.affine diff_scale
/// (sum of diff_dst x normalised src) and diff_shift (sum of diff_dst), both required then and
/// null otherwise. Training: the full batch-statistics gradient from saved_mean / saved_inv_std;
/// inference: the frozen-statistics gradient from the running statistics
/// (diff_src = diff_dst * scale / sqrt(running_var + eps)). Returns the choice that ran.
std::shared_ptr<const Choice> batch_norm_bwd(Context& context, const BatchNormDesc& desc,
                                             const Tensor& src, const Tensor& diff_dst,
                                             const BatchNormTensors& tensors, Tensor& diff_src,
                                             Tensor* diff_scale = nullptr,
                                             Tensor* diff_shift = nullptr);

/// Every candidate of the context's backend for (desc, direction) — fwd or bwd_data (the
/// backward pass) — with support status, workspace and determinism; nothing is run. Priority
/// order: the first supported one is the heuristic pick.
std::vector<AlgoInfo> batch_norm_list(Context& context, const BatchNormDesc& desc,
                                      Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates on scratch
/// tensors; cached).
std::shared_ptr<const Choice> batch_norm_select(Context& context, const BatchNormDesc& desc,
                                                Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult batch_norm_profile(Context& context, const BatchNormDesc& desc, Direction direction);

}  // namespace dnnx
