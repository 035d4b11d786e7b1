#pragma once
// The tensors and values of one call of each optimizer and loss-scaling op (Note [op dispatch]);
// the op layer has validated the tensors against the desc: counts, dims, dtypes, density, device,
// no overlap of an output with anything else.

#include <dnnx/ops/optim.hpp>
#include <dnnx/tensor.hpp>

#include <span>

namespace dnnx::detail {

struct SgdArgs {
  SgdTensors tensors;
  SgdHyper hyper;
};

struct AdamArgs {
  AdamTensors tensors;
  AdamHyper hyper;
};

struct UnscaleArgs {
  std::span<Tensor> grads;            ///< updated in place
  Tensor* found_inf = nullptr;        ///< f32 {1}, set
  const Tensor* inv_scale = nullptr;  ///< f32 {1} (the scale when desc.from_scale)
};

struct UpdateScaleArgs {
  Tensor* scale = nullptr;            ///< f32 {1}
  Tensor* growth_tracker = nullptr;   ///< i32 {1}
  const Tensor* found_inf = nullptr;  ///< f32 {1}
  UpdateScaleHyper hyper;
};

}  // namespace dnnx::detail
