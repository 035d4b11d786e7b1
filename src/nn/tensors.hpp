#pragma once
// Tensor helpers the modules share: allocation on a module's context, dtype conversion through
// the host (for convert and load_state_dict, never per step), gradient accumulation, and the
// PyTorch-style formatting of argument tuples.

#include <dnnx/context.hpp>
#include <dnnx/nn/module.hpp>
#include <dnnx/tensor.hpp>

#include "core/strings.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::nn::detail {

using ::dnnx::detail::cat;
using ::dnnx::detail::join;

/// A dense channels_first tensor of `dims` and `dtype` on `context`'s device (uninitialised).
Tensor empty(const Context& context, const Dims& dims, DType dtype);
/// The same filled with zeros.
Tensor zeros(const Context& context, const Dims& dims, DType dtype);
/// A copy of `src` converted to `dtype` on `context`'s device (through the host when the dtype
/// changes; floating dtypes only then).
Tensor converted(const Context& context, const Tensor& src, DType dtype);
/// Copies `src` into `dst` (same dims), converting the dtype through the host when it differs.
void assign(const Tensor& src, Tensor& dst);

/// Runs `compute` on the tensor the gradients of `parameters` should be written to and makes the
/// parameters' grads hold the sum of what they held and what was computed: a parameter whose
/// grad is not live (Parameter::grad_live) is written directly, the others through a scratch
/// tensor added with the add op. Marks every grad live.
void accumulate(Context& context, const std::vector<Parameter*>& parameters,
                const std::function<void(std::vector<Tensor*>&)>& compute);

/// Throws InvalidArgument "<who>: input must be dense channels_first ... got ..." unless `src`
/// is dense channels_first with rank in [min_rank, max_rank] and a floating dtype.
void check_input(std::string_view who, const Tensor& src, int min_rank, int max_rank);

/// PyTorch's tuple text: "(3, 3)" for {3, 3}, "(3,)" for {3}.
std::string tuple(const std::vector<std::int64_t>& values);
/// `values` expanded to `count` entries (a single entry repeated); InvalidArgument naming `what`
/// when the length is neither 1 nor count, or an entry is below `minimum`.
std::vector<std::int64_t> expand(std::string_view what, const std::vector<std::int64_t>& values,
                                 int count, std::int64_t minimum);
/// "True" / "False".
inline const char* py_bool(bool value) { return value ? "True" : "False"; }
/// A double as Python prints it (1e-05, 0.1, 6.0).
std::string py_float(double value);

}  // namespace dnnx::nn::detail

namespace dnnx::nn::detail {

/// The choice a heuristic policy makes for `desc` and `direction` under `context`'s other
/// constraints (null when no desc ran or the op lacks the direction): Module::heuristic_choice.
template <typename Desc, typename Select>
std::shared_ptr<const Choice> heuristic(const Context& context, OpKind op, Direction direction,
                                        const std::optional<Desc>& desc, Select select) {
  if (!desc || !op_info(op).has(direction)) return nullptr;
  Context heuristic_context = context;
  heuristic_context.tune().policy(op, direction) = AlgoPolicy::heuristic();
  return select(heuristic_context, *desc, direction);
}

/// A profile of every candidate of `desc` and `direction` (nullopt when no desc ran or the op
/// lacks the direction): Module::profile.
template <typename Desc, typename Profile>
std::optional<ProfileResult> profile(const Context& context, OpKind op, Direction direction,
                                     const std::optional<Desc>& desc, Profile run) {
  if (!desc || !op_info(op).has(direction)) return std::nullopt;
  Context profile_context = context;
  return run(profile_context, *desc, direction);
}

}  // namespace dnnx::nn::detail
