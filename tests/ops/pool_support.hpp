#pragma once
// Pooling helpers for tests: the operands of a direction, running one direction into a fresh
// output, and the error bound every implementation is held to (Note [pool tolerances]).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/pool.hpp>
#include <dnnx/tensor.hpp>

#include "support/compare.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// The host tensors of one case: src (tie-free for max, Note [tie-free inputs]), dst = the
/// reference forward of src, and diff_dst; dense in desc.layout, desc.dtype. With desc.indices
/// also the reference forward's argmax indices (i64, desc.layout), which the backward reads.
struct PoolOperands {
  Tensor src;
  Tensor dst;
  Tensor diff_dst;
  Tensor indices;
};

/// Operands of `desc` reproducible from `seed`; dst comes from the reference backend.
PoolOperands pool_operands(const PoolDesc& desc, std::uint64_t seed);

/// One direction's output (dst or diff_src, on the host) and the choice that produced it; the
/// forward with indices also brings back the indices (on the host, in the dtype they were
/// written in).
struct PoolRun {
  Tensor output;
  Tensor indices;
  std::shared_ptr<const Choice> choice;
};

/// Runs `direction` (fwd or bwd_data) on `context` with its current TuneOptions into an output that
/// starts as all-NaN (so unwritten elements fail the finiteness check). Device contexts get
/// device copies of the operands and the output is brought back. With desc.indices the forward
/// writes indices of `index_dtype` (starting as -7, which no forward writes) and the backward
/// reads operands.indices converted to `index_dtype`.
PoolRun run_pool(Context& context, const PoolDesc& desc, Direction direction,
                 const PoolOperands& operands, DType index_dtype = DType::i64);

/// The values of an integer (i32 or i64) host tensor in logical (row-major) order, any strides.
std::vector<std::int64_t> index_values(const Tensor& indices);

/// A dense host tensor of `dtype` (i32 or i64) in `layout` holding `values` (logical order).
Tensor index_tensor(const Dims& dims, DType dtype, Layout layout,
                    const std::vector<std::int64_t>& values);

/// The magnitude each output element's rounding errors are proportional to: for the averages
/// the same direction on |operands| (sum of |terms| / divisor), for max backward the sum of
/// |gradients| routed to the element, for max forward the value itself (Note [pool tolerances]).
std::vector<float> pool_error_scale(const PoolDesc& desc, Direction direction,
                                    const PoolOperands& operands);

/// The error bound relative to pool_error_scale() (Note [pool tolerances]).
Tolerance pool_tolerance(const PoolDesc& desc, Direction direction);

/// Failure context: direction, candidate id, the desc and its `dnnx` reproduction line.
std::string pool_context(const PoolDesc& desc, Direction direction, std::string_view candidate);

/// "fwd" or "bwd".
const char* pool_direction_name(Direction direction);

}  // namespace dnnx::test
