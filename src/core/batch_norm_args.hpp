#pragma once
// The tensors of one batch-normalization call, by role. Which are set depends on the direction
// and the desc (the op layer has validated them against it; see BatchNormTensors):
//   fwd:      src -> dst; scale, shift (affine); training: running_mean/var (optional, updated in
//             place), saved_mean/saved_inv_std (optional outputs); inference: running_mean/var.
//   bwd_data: src, diff_dst -> diff_src, diff_scale/diff_shift (affine); scale (affine);
//             training: saved_mean/saved_inv_std; inference: running_mean/var.
// Parameter and statistics tensors are f32 with dims desc.param_dims().

#include <dnnx/ops/batch_norm.hpp>
#include <dnnx/tensor.hpp>

namespace dnnx::detail {

struct BatchNormArgs {
  const Tensor* src = nullptr;
  const Tensor* diff_dst = nullptr;
  Tensor* dst = nullptr;
  Tensor* diff_src = nullptr;
  const Tensor* scale = nullptr;
  const Tensor* shift = nullptr;
  Tensor* running_mean = nullptr;
  Tensor* running_var = nullptr;
  Tensor* saved_mean = nullptr;
  Tensor* saved_inv_std = nullptr;
  Tensor* diff_scale = nullptr;
  Tensor* diff_shift = nullptr;
};

}  // namespace dnnx::detail
