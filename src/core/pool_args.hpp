#pragma once
// The tensors of one pooling call, by role (the Args of detail::PoolBackend).

#include <dnnx/ops/pool.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"

#include <cstdint>
#include <string>

namespace dnnx::detail {

/// The tensors of one pooling call. Which are set depends on the direction and on desc.indices:
///   fwd:      src                   -> dst            (desc.indices: -> dst, indices)
///   bwd_data: src, dst, diff_dst    -> diff_src       (desc.indices: diff_dst, indices_in
///                                                      -> diff_src; src and dst null)
/// (Note [directions of single-backward ops]). The op layer has validated shapes, dtypes, layouts
/// and devices against the desc (indices: i64 or i32, dst's dims and layout), and that no output
/// overlaps an input or another output. Index values are the backends' to check.
struct PoolArgs {
  const Tensor* src = nullptr;
  const Tensor* dst_in = nullptr;  ///< bwd: the forward output (read only)
  const Tensor* diff_dst = nullptr;
  const Tensor* indices_in = nullptr;  ///< bwd with indices: the forward's argmax indices
  Tensor* dst = nullptr;               ///< fwd: the output
  Tensor* indices = nullptr;           ///< fwd with indices: the argmax indices written
  Tensor* diff_src = nullptr;
};

/// The message of a bad argmax index (pool_bwd with indices): `element` is the position of the
/// index in dst's logical (row-major N, C, spatial...) order, `value` the index read there. Names
/// the position as [n, c, o...] and the value, and says what is accepted: an index inside the
/// (n, c) input plane, [0, desc.input_plane()), that names an element of that output's window.
std::string bad_pool_index_message(const PoolDesc& desc, std::int64_t element, std::int64_t value);

/// Whether `value` names an element of the window of output `element` (dst's logical order).
bool pool_index_in_window(const PoolDesc& desc, std::int64_t element, std::int64_t value);

/// A ready-to-run pooling for one (desc, direction, candidate).
using PoolPlan = OpPlan<PoolArgs>;

}  // namespace dnnx::detail
