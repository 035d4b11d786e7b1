#pragma once
// The tensors of one fused convolution call, by role (the Args of detail::ConvFusedBackend).

#include <dnnx/ops/conv_fused.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"

namespace dnnx::detail {

/// The tensors of one fused forward convolution: src, weights [, bias] [, residual] -> dst.
/// The op layer has validated shapes, dtypes, layouts and devices against the desc, that bias and
/// residual are set exactly when the desc asks for them, and that dst overlaps no input except a
/// residual that is dst itself (same data pointer and strides: in place).
struct ConvFusedArgs {
  const Tensor* src = nullptr;
  const Tensor* weights = nullptr;
  const Tensor* bias = nullptr;      ///< desc.bias: O values; otherwise null
  const Tensor* residual = nullptr;  ///< desc.residual: dst's dims; may be dst; otherwise null
  Tensor* dst = nullptr;
};

/// A ready-to-run fused convolution for one (desc, candidate).
using ConvFusedPlan = OpPlan<ConvFusedArgs>;

/// Whether the residual of `args` is dst itself (in place).
inline bool residual_in_place(const ConvFusedArgs& args) {
  return args.residual != nullptr && args.dst != nullptr &&
         args.residual->data() == args.dst->data();
}

}  // namespace dnnx::detail
