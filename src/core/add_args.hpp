#pragma once
// The tensors of one tensor-add call (Note [op dispatch]); the op layer has validated them against
// the desc: dims, dtype, density in desc.layout, device, no overlap.

#include <dnnx/ops/add.hpp>
#include <dnnx/tensor.hpp>

namespace dnnx::detail {

/// Which tensors are set depends on the direction:
///   fwd:      src, dst -> dst   (dst = alpha * broadcast(src) + beta * dst)
///   bwd_data: diff_dst -> diff_src
struct AddArgs {
  const Tensor* src = nullptr;       ///< fwd: read (src_dims)
  Tensor* dst = nullptr;             ///< fwd: read unless beta = 0, then written (dst_dims)
  const Tensor* diff_dst = nullptr;  ///< bwd: read (dst_dims)
  Tensor* diff_src = nullptr;        ///< bwd: written (src_dims)
};

}  // namespace dnnx::detail
