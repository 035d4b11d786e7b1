#pragma once
// The cudnn backend's own batch-normalization kernels (candidates "cudnn:kernel:bnorm" and
// "cudnn:kernel:bnorm_fused"): training and inference, forward and backward, both layouts, f32 /
// f16 / bf16 data with f32 parameters, on plain device pointers. No cuDNN types; the host code of
// the backend translates its desc into a Shape. Every index fits in 32 bits (numel < 2^31).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::batch_norm {

/// Storage type of the data tensors; parameters and statistics are f32, arithmetic f32 with f64
/// sums.
enum class Element : int { f32, f16, bf16 };

/// The data as the kernels walk it (Note [batch-norm kernel layouts] in batch_norm.cu).
struct Shape {
  /// true: statistic k owns `runs` runs of `run` contiguous values, run r starting at
  /// (r * statistics + k) * run (channels-first spatial data with spatial size > 1). false: a
  /// `runs` x `statistics` row-major matrix whose column k is statistic k (`run` is 1).
  bool planes = false;
  std::int64_t statistics = 0;  ///< K
  std::int64_t runs = 0;        ///< planes: N; columns: rows
  std::int64_t run = 1;         ///< planes: spatial positions; columns: 1
  /// Values behind each statistic.
  std::int64_t count() const { return runs * run; }
  std::int64_t numel() const { return statistics * runs * run; }
};

/// How a plan launches the kernels, fixed when it is built.
struct Geometry {
  bool fused = false;    ///< one block per statistic, its values held in registers
  int splits = 1;        ///< two-pass path: reduction chunks per statistic
  int row_threads = 32;  ///< two-pass planes: threads sharing one run (a power of two, 32..256)
};

/// The most values per statistic the fused path holds (its block's registers).
std::int64_t fused_capacity();
/// The two-pass geometry of `shape` on a GPU with `sm_count` multiprocessors.
Geometry split_geometry(const Shape& shape, Element element, int sm_count);
/// The fused geometry; valid only for planes with count() <= fused_capacity().
Geometry fused_geometry();
/// Workspace bytes a (shape, geometry, direction) needs; exact.
std::size_t workspace_bytes(const Shape& shape, const Geometry& geometry, bool training,
                            bool backward);

/// What every launch takes besides the tensors.
struct Params {
  Element element = Element::f32;
  bool training = true;
  double eps = 1e-5;
  double momentum = 0.1;
};

/// The tensors of a forward. Null scale / shift mean 1 / 0. Training: running_mean / running_var
/// are updated when given (both or neither), saved_mean / saved_inv_std written when given;
/// inference: running_mean / running_var are read.
struct Forward {
  const void* x = nullptr;
  void* y = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* saved_mean = nullptr;
  float* saved_inv_std = nullptr;
};

/// The tensors of a backward. Training reads saved_mean / saved_inv_std, inference
/// running_mean / running_var. Null scale means 1; null diff_scale / diff_shift are not written.
struct Backward {
  const void* x = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  const float* scale = nullptr;
  const float* saved_mean = nullptr;
  const float* saved_inv_std = nullptr;
  const float* running_mean = nullptr;
  const float* running_var = nullptr;
  float* diff_scale = nullptr;
  float* diff_shift = nullptr;
};

/// Queues the forward on `stream`; `workspace` holds workspace_bytes(). Returns the launch status.
cudaError_t forward(const Params& params, const Shape& shape, const Geometry& geometry,
                    const Forward& tensors, void* workspace, cudaStream_t stream);
/// Queues the backward on `stream`; `workspace` holds workspace_bytes(). Returns the status.
cudaError_t backward(const Params& params, const Shape& shape, const Geometry& geometry,
                     const Backward& tensors, void* workspace, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::batch_norm
