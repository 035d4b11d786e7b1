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
/// reference forward of src, and diff_dst; dense in desc.layout, desc.dtype.
struct PoolOperands {
  Tensor src;
  Tensor dst;
  Tensor diff_dst;
};

/// Operands of `desc` reproducible from `seed`; dst comes from the reference backend.
PoolOperands pool_operands(const PoolDesc& desc, std::uint64_t seed);

/// One direction's output (dst or diff_src, on the host) and the choice that produced it.
struct PoolRun {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};

/// Runs `direction` (fwd or bwd_data) on `context` with its current TuneOptions into an output that
/// starts as all-NaN (so unwritten elements fail the finiteness check). Device contexts get
/// device copies of the operands and the output is brought back.
PoolRun run_pool(Context& context, const PoolDesc& desc, Direction direction,
                 const PoolOperands& operands);

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
