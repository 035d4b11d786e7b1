#pragma once
// The tensors of one activation call (Note [op dispatch]); the op layer has validated them
// against the desc: dims, dtype, density in desc.layout, device, and the aliasing rules.

#include <dnnx/ops/activation.hpp>
#include <dnnx/tensor.hpp>

namespace dnnx::detail {

/// Which tensors are set depends on the direction:
///   fwd:      src -> dst                       (dst may be src's memory: in place)
///   bwd_data: [src] [saved_dst] diff_dst -> diff_src
///             (src and saved_dst as desc.saved says, the other null; diff_src may be diff_dst's
///             memory: in place)
struct ActivationArgs {
  const Tensor* src = nullptr;        ///< fwd: read. bwd: the forward input, if saved
  Tensor* dst = nullptr;              ///< fwd: written
  const Tensor* saved_dst = nullptr;  ///< bwd: the forward output, if saved
  const Tensor* diff_dst = nullptr;   ///< bwd: read
  Tensor* diff_src = nullptr;         ///< bwd: written
};

}  // namespace dnnx::detail
