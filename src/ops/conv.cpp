// Convolution, backend-agnostic: the checks of a call against the desc, the scratch tensors for
// timing, bias, and the layer state; the call itself goes through Note [op dispatch].

#include <dnnx/ops/conv.hpp>
#include <dnnx/version.hpp>

#include "ops/conv_slices.hpp"
#include "ops/op_calls.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace dnnx {
namespace {

using detail::ContextState;
using detail::ConvArgs;

// ---- argument validation ------------------------------------------------------------------------

using detail::check_tensor;

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  detail::check_no_overlap("convolution", out_role, out, in_role, in);
}

void check_args(const Context& context, const ConvDesc& desc, Direction direction,
                const ConvArgs& args) {
  switch (direction) {
    case Direction::fwd:
      check_tensor(context, desc, "src", *args.src, desc.src_dims());
      check_tensor(context, desc, "weights", *args.weights, desc.weights_dims());
      check_tensor(context, desc, "dst", *args.dst, desc.dst_dims());
      check_no_alias("dst", *args.dst, "src", *args.src);
      check_no_alias("dst", *args.dst, "weights", *args.weights);
      break;
    case Direction::bwd_data:
      check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_tensor(context, desc, "weights", *args.weights, desc.weights_dims());
      check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims());
      check_no_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
      check_no_alias("diff_src", *args.diff_src, "weights", *args.weights);
      break;
    case Direction::bwd_weights:
      check_tensor(context, desc, "src", *args.src, desc.src_dims());
      check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_tensor(context, desc, "diff_weights", *args.diff_weights, desc.weights_dims());
      check_no_alias("diff_weights", *args.diff_weights, "src", *args.src);
      check_no_alias("diff_weights", *args.diff_weights, "diff_dst", *args.diff_dst);
      break;
    case Direction::fwd_training: break;  // not a convolution direction
  }
}

void check_bias(const Context& context, const ConvDesc& desc, const char* role,
                const Tensor& bias) {
  detail::check_bias(context, role, bias, desc.bias_dims(), desc.dtype);
}

// ---- scratch tensors for selection without user tensors ----------------------------------------

// Tensors for timing without the user's (Note [scratch data]).
struct Scratch {
  Tensor src, weights, dst;  // dst doubles as diff_dst, src as diff_src, weights as diff_weights
  ConvArgs args(Direction direction) { return ConvArgs::by_shape(direction, src, weights, dst); }
};

// The op's traits for Note [op dispatch].
struct ConvOp : detail::OpTraits<OpKind::conv> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const ConvDesc& desc, Direction) {
    return {detail::random_tensor(context, desc.src_dims(), desc.dtype, desc.layout, -1, 1, 1),
            detail::random_tensor(context, desc.weights_dims(), desc.dtype, desc.layout, -1, 1, 2),
            detail::random_tensor(context, desc.dst_dims(), desc.dtype, desc.layout, -1, 1, 3)};
  }

  // Note [probing slow candidates]: slices of the problem from the smallest up, each a few times
  // the one before and ending at half of it at most: of the groups of a convolution of 16 groups
  // or more (and of its batch where they are few), of the batch, or of the output's rows for a
  // batch under 16 (Note [conv probe slices] in ops/conv_slices.cpp). A slow candidate is ruled
  // out on the first slice already over the bound, which costs a few times the best candidate's
  // time whatever its own. The slice's activations are views of the prefix of each buffer; the
  // weights (and their gradient, which the slice overwrites) keep their shape, or are prefix
  // views too where the groups are sliced.
  struct Slice {
    ConvDesc desc;
    double fraction = 1;  // of the full problem
    Tensor src, diff_src, dst, diff_dst, weights, diff_weights;
    ConvArgs args;
  };
  static std::unique_ptr<Slice> slice(const ConvDesc& desc, Direction, const ConvArgs& full,
                                      int level) {
    const std::vector<detail::ConvSlice> slices = detail::conv_probe_slices(desc);
    if (level < 0 || static_cast<std::size_t>(level) >= slices.size()) return nullptr;
    auto slice = std::make_unique<Slice>();
    slice->desc = slices[static_cast<std::size_t>(level)].desc;
    slice->fraction = slices[static_cast<std::size_t>(level)].fraction;
    auto view = [&](const Tensor* tensor, const Dims& dims, Tensor& into) -> Tensor* {
      if (tensor == nullptr) return nullptr;
      into = Tensor::view(tensor->data(), dims, desc.dtype, desc.layout, tensor->device());
      return &into;
    };
    ConvArgs& args = slice->args;
    args.src = view(full.src, slice->desc.src_dims(), slice->src);
    args.diff_src = view(full.diff_src, slice->desc.src_dims(), slice->diff_src);
    args.dst = view(full.dst, slice->desc.dst_dims(), slice->dst);
    args.diff_dst = view(full.diff_dst, slice->desc.dst_dims(), slice->diff_dst);
    if (slice->desc.weights_dims() == desc.weights_dims()) {
      args.weights = full.weights;
      args.diff_weights = full.diff_weights;
    } else {
      args.weights = view(full.weights, slice->desc.weights_dims(), slice->weights);
      args.diff_weights = view(full.diff_weights, slice->desc.weights_dims(), slice->diff_weights);
    }
    return slice;
  }
};
using Dispatch = detail::Dispatch<ConvOp>;

template <typename F>
auto with_context(const Context& context, const ConvDesc& desc, Direction direction, F&& f) {
  return Dispatch::with_context(context, desc, direction, std::forward<F>(f));
}

ConvArgs fwd_args(const Tensor& src, const Tensor& weights, Tensor& dst) {
  ConvArgs args;
  args.src = &src, args.weights = &weights, args.dst = &dst;
  return args;
}
ConvArgs bwd_data_args(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  ConvArgs args;
  args.diff_dst = &diff_dst, args.weights = &weights, args.diff_src = &diff_src;
  return args;
}
ConvArgs bwd_weights_args(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights) {
  ConvArgs args;
  args.src = &src, args.diff_dst = &diff_dst, args.diff_weights = &diff_weights;
  return args;
}

void bias_fwd_locked(Context& context, const ConvDesc& desc, const Tensor& bias, Tensor& dst) {
  check_bias(context, desc, "bias", bias);
  check_tensor(context, desc, "dst", dst, desc.dst_dims());
  check_no_alias("dst", dst, "bias", bias);
  ContextState& state = detail::state_of(context);
  std::lock_guard lock(state.mutex());
  state.backend().conv().bias_fwd(desc, bias, dst);
}

void bias_bwd_locked(Context& context, const ConvDesc& desc, const Tensor& diff_dst,
                     Tensor& diff_bias) {
  check_bias(context, desc, "diff_bias", diff_bias);
  check_tensor(context, desc, "diff_dst", diff_dst, desc.dst_dims());
  check_no_alias("diff_bias", diff_bias, "diff_dst", diff_dst);
  ContextState& state = detail::state_of(context);
  std::lock_guard lock(state.mutex());
  state.backend().conv().bias_bwd(desc, diff_dst, diff_bias);
}

}  // namespace

// A bad bias must be reported before dst is overwritten.
void check_fwd_bias(const Context& context, const ConvDesc& desc, const Tensor& bias,
                    const Tensor& dst) {
  with_context(context, desc, Direction::fwd, [&] {
    check_bias(context, desc, "bias", bias);
    check_no_alias("dst", dst, "bias", bias);
  });
}

std::shared_ptr<const Choice> conv_fwd(Context& context, const ConvDesc& desc, const Tensor& src,
                                       const Tensor& weights, Tensor& dst, const Tensor* bias) {
  if (bias != nullptr) check_fwd_bias(context, desc, *bias, dst);
  auto choice = Dispatch::run(context, desc, Direction::fwd, fwd_args(src, weights, dst));
  if (bias != nullptr) conv_bias_fwd(context, desc, *bias, dst);
  return choice;
}

std::shared_ptr<const Choice> conv_bwd_data(Context& context, const ConvDesc& desc,
                                            const Tensor& diff_dst, const Tensor& weights,
                                            Tensor& diff_src) {
  return Dispatch::run(context, desc, Direction::bwd_data,
                       bwd_data_args(diff_dst, weights, diff_src));
}

std::shared_ptr<const Choice> conv_bwd_weights(Context& context, const ConvDesc& desc,
                                               const Tensor& src, const Tensor& diff_dst,
                                               Tensor& diff_weights, Tensor* diff_bias) {
  if (diff_bias != nullptr) {
    with_context(context, desc, Direction::bwd_weights, [&] {
      check_bias(context, desc, "diff_bias", *diff_bias);
      check_no_alias("diff_bias", *diff_bias, "diff_dst", diff_dst);
      check_no_alias("diff_bias", *diff_bias, "diff_weights", diff_weights);
    });
  }
  auto choice = Dispatch::run(context, desc, Direction::bwd_weights,
                              bwd_weights_args(src, diff_dst, diff_weights));
  if (diff_bias != nullptr) conv_bias_bwd(context, desc, diff_dst, *diff_bias);
  return choice;
}

void conv_bias_fwd(Context& context, const ConvDesc& desc, const Tensor& bias, Tensor& dst) {
  with_context(context, desc, Direction::fwd, [&] {
    desc.validate();
    bias_fwd_locked(context, desc, bias, dst);
  });
}

void conv_bias_bwd(Context& context, const ConvDesc& desc, const Tensor& diff_dst,
                   Tensor& diff_bias) {
  with_context(context, desc, Direction::bwd_weights, [&] {
    desc.validate();
    bias_bwd_locked(context, desc, diff_dst, diff_bias);
  });
}

DNNX_DEFINE_OP_CALLS(conv, ConvOp)

// ---- Convolution (layer state) ----------------------------------------------------------------

Convolution::Convolution(Context context) : context_(std::move(context)) {}

const std::shared_ptr<const Choice>& Convolution::choice(Direction direction) const {
  return slots_[static_cast<std::size_t>(direction)].choice;
}

std::shared_ptr<const Choice> Convolution::choose(const ConvDesc& desc, Direction direction) {
  Slot& slot = slots_[static_cast<std::size_t>(direction)];
  const AlgoPolicy& policy = context_.tune().policy(direction);
  if (policy.reuse != Reuse::once || !slot.choice) return nullptr;
  if (slot.desc == desc) return slot.choice;
  // Reuse::once on a new shape: keep the algorithm if it can still run under the constraints.
  for (const AlgoInfo& algo : conv_list(context_, desc, direction)) {
    if (algo.id != slot.choice->algo.id) continue;
    if (tune::exclusion(algo, context_.tune())) break;
    auto kept = std::make_shared<Choice>(*slot.choice);
    kept->algo = algo;
    kept->key.clear();  // no longer the cache entry of any key
    if (context_.tune().verbose) {
      std::cerr << "dnnx: conv " << to_string(direction) << " [" << to_string(context_.backend())
                << "] " << desc.key() << " keeps " << algo.id << " (reuse once, new shape)\n";
    }
    return kept;
  }
  return nullptr;
}

namespace {

template <typename Run>
std::shared_ptr<const Choice> layer_call(Context& context, const ConvDesc& desc,
                                         Direction direction, std::shared_ptr<const Choice> held,
                                         Run run_fresh, const ConvArgs& args) {
  if (held) return Dispatch::run_choice(context, desc, direction, args, std::move(held));
  return run_fresh();
}

}  // namespace

std::shared_ptr<const Choice> Convolution::fwd(const ConvDesc& desc, const Tensor& src,
                                               const Tensor& weights, Tensor& dst,
                                               const Tensor* bias) {
  const ConvArgs args = fwd_args(src, weights, dst);
  auto used = layer_call(
      context_, desc, Direction::fwd, choose(desc, Direction::fwd),
      [&] { return Dispatch::run(context_, desc, Direction::fwd, args); }, args);
  if (bias != nullptr) conv_bias_fwd(context_, desc, *bias, dst);
  slots_[0] = {used, desc};
  return used;
}

std::shared_ptr<const Choice> Convolution::bwd_data(const ConvDesc& desc, const Tensor& diff_dst,
                                                    const Tensor& weights, Tensor& diff_src) {
  const ConvArgs args = bwd_data_args(diff_dst, weights, diff_src);
  auto used = layer_call(
      context_, desc, Direction::bwd_data, choose(desc, Direction::bwd_data),
      [&] { return Dispatch::run(context_, desc, Direction::bwd_data, args); }, args);
  slots_[1] = {used, desc};
  return used;
}

std::shared_ptr<const Choice> Convolution::bwd_weights(const ConvDesc& desc, const Tensor& src,
                                                       const Tensor& diff_dst, Tensor& diff_weights,
                                                       Tensor* diff_bias) {
  const ConvArgs args = bwd_weights_args(src, diff_dst, diff_weights);
  auto used = layer_call(
      context_, desc, Direction::bwd_weights, choose(desc, Direction::bwd_weights),
      [&] { return Dispatch::run(context_, desc, Direction::bwd_weights, args); }, args);
  if (diff_bias != nullptr) conv_bias_bwd(context_, desc, diff_dst, *diff_bias);
  slots_[2] = {used, desc};
  return used;
}

}  // namespace dnnx
