#pragma once
// Tensor helpers the modules share: allocation on a module's context, layout and dtype changes
// through the reorder op (Flatten, convert, load_state_dict), gradient accumulation, and the
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

/// A dense tensor of `dims` and `dtype` in `layout` on `context`'s device (uninitialised).
Tensor empty(const Context& context, const Dims& dims, DType dtype,
             Layout layout = Layout::channels_first);
/// The same filled with zeros.
Tensor zeros(const Context& context, const Dims& dims, DType dtype,
             Layout layout = Layout::channels_first);
/// The dense layout of `tensor` (channels_first for rank <= 2, and for a tensor dense in both).
Layout layout_of(const Tensor& tensor);
/// The layout `tensor` was made in: channels_first or channels_last when its strides are exactly
/// that layout's dense strides (size-1 dims included, as Tensor::empty makes them; channels_first
/// when they are both's), else layout_of. A 1x1 convolution's weights are dense in both layouts;
/// this keeps the one Module::to_layout made them in through convert.
Layout stored_layout(const Tensor& tensor);
/// A copy of `src` converted to `dtype` on `context`'s device, dense in src's layout (floating
/// dtypes only when the dtype changes), through assign(context, ...).
Tensor converted(Context& context, const Tensor& src, DType dtype);
/// `src` itself when it is dense in `layout`, else a copy of it dense in `layout` on `context`'s
/// device, through assign(context, ...) (Note [layout changes in nn]).
Tensor relayout(Context& context, const Tensor& src, Layout layout);
/// Copies `src` into `dst` (same dims). When both are dense floating tensors in `context`'s
/// memory and the dtype or the layout changes (or they are on a device), the reorder op runs on
/// `context` (queued on its stream, no host wait); otherwise as assign(src, dst).
void assign(Context& context, const Tensor& src, Tensor& dst);
/// Copies `src` into `dst` (same dims) with copy(), converting the dtype, and changing the
/// layout of device tensors, through the host.
void assign(const Tensor& src, Tensor& dst);

/// Sets `tensor` (on `context`'s device) to zeros with the fill op on the context: queued on its
/// stream like the ops around it, where Tensor::fill waits for the device (Note [zero_grad
/// without waiting]).
void fill_zeros(Context& context, Tensor& tensor);

/// zero_grad for one parameter: its grad to zeros with fill_zeros, or with `set_to_none` nothing
/// written and the grad flagged grad_none (Note [gradients set to none]); not live either way.
void zero_grad(Context& context, Parameter& parameter, bool set_to_none);
/// Marks the grad of `parameter` written by a backward: live, not none.
inline void mark_written(Parameter& parameter) {
  parameter.grad_live = true;
  parameter.grad_none = false;
}

/// Runs `compute` on the tensor the gradients of `parameters` should be written to and makes the
/// parameters' grads hold the sum of what they held and what was computed: a parameter whose
/// grad is not live (Parameter::grad_live) is written directly, the others through a scratch
/// tensor added with the add op. Marks every grad live.
void accumulate(Context& context, const std::vector<Parameter*>& parameters,
                const std::function<void(std::vector<Tensor*>&)>& compute);

/// Which memory orders a module accepts.
enum class Accepts : std::uint8_t { channels_first, any_dense };
/// Throws InvalidArgument naming `who` unless `src` has rank in [min_rank, max_rank], a floating
/// dtype and is dense channels_first or (with Accepts::any_dense) channels_last. Returns its
/// layout (layout_of): what the module's ops run in and its outputs keep.
Layout check_input(std::string_view who, const Tensor& src, int min_rank, int max_rank,
                   Accepts accepts = Accepts::any_dense);

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
