#pragma once
// The tensors of one reorder call (Note [op dispatch]); the op layer has validated them against
// the desc: dims, each one's dtype and density in its own layout, device, no overlap.

#include <dnnx/ops/reorder.hpp>
#include <dnnx/tensor.hpp>

namespace dnnx::detail {

/// fwd: src -> dst (dst = alpha * src + beta * dst).
struct ReorderArgs {
  const Tensor* src = nullptr;  ///< read (desc.src_dtype, desc.src_layout)
  Tensor* dst = nullptr;        ///< read unless beta = 0, then written (desc.dst_dtype, dst_layout)
};

}  // namespace dnnx::detail
