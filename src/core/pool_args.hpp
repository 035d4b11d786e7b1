#pragma once
// The tensors of one pooling call, by role (the Args of detail::PoolBackend).

#include <dnnx/ops/pool.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"

namespace dnnx::detail {

/// The tensors of one pooling call. Which are set depends on the direction:
///   fwd:      src                   -> dst
///   bwd_data: src, dst, diff_dst    -> diff_src
/// (Note [directions of single-backward ops]). The op layer has validated shapes, dtypes, layouts
/// and devices against the desc, and that no output overlaps an input.
struct PoolArgs {
  const Tensor* src = nullptr;
  const Tensor* dst_in = nullptr;  ///< bwd: the forward output (read only)
  const Tensor* diff_dst = nullptr;
  Tensor* dst = nullptr;  ///< fwd: the output
  Tensor* diff_src = nullptr;
};

/// A ready-to-run pooling for one (desc, direction, candidate).
using PoolPlan = OpPlan<PoolArgs>;

}  // namespace dnnx::detail
