#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <cmath>

namespace dnnx::nn {

Activation::Activation(const Context& context, ActivationKind kind, bool inplace, double alpha,
                       double ceiling)
    : Module(context, OpKind::activation),
      kind_(kind),
      inplace_(inplace),
      alpha_(alpha),
      ceiling_(ceiling) {
  DNNX_CHECK_ARG(kind != ActivationKind::identity, "Activation: kind identity; use nn::Identity");
  DNNX_CHECK_ARG(std::isfinite(alpha), type_name(), ": alpha ", alpha, " must be finite");
  DNNX_CHECK_ARG(std::isfinite(ceiling) && ceiling > 0, type_name(), ": ceiling ", ceiling,
                 " must be finite and > 0");
  // Note [activation saved tensors].
  if (inplace && !activation_bwd_from_dst(kind, alpha)) {
    dnnx::detail::raise(ErrorKind::Unsupported,
                        detail::cat(type_name(), "(inplace=True) with alpha ", alpha,
                                    ": its backward needs the input, which an in-place forward "
                                    "overwrites; use inplace=False"));
  }
}

std::string Activation::type_name() const {
  switch (kind_) {
    case ActivationKind::relu: return "ReLU";
    case ActivationKind::clipped_relu: return ceiling_ == 6.0 ? "ReLU6" : "Hardtanh";
    case ActivationKind::tanh: return "Tanh";
    case ActivationKind::sigmoid: return "Sigmoid";
    case ActivationKind::elu: return "ELU";
    case ActivationKind::swish: return "SiLU";
    case ActivationKind::identity: break;
  }
  return "Identity";
}

std::string Activation::extra_repr() const {
  const std::string inplace = inplace_ ? "inplace=True" : "";
  switch (kind_) {
    case ActivationKind::clipped_relu:
      if (ceiling_ != 6.0) {
        return detail::cat("min_val=0.0, max_val=", detail::py_float(ceiling_),
                           inplace_ ? ", inplace=True" : "");
      }
      return inplace;
    case ActivationKind::elu:
      return detail::cat("alpha=", detail::py_float(alpha_), inplace_ ? ", inplace=True" : "");
    default: return inplace;
  }
}

ActivationDesc Activation::desc_for(const Tensor& src) const {
  ActivationDesc desc =
      ActivationDesc::from_dims(kind_, src.dims(), src.dtype(), detail::layout_of(src));
  desc.alpha = alpha_;
  desc.ceiling = ceiling_;
  desc.saved = inplace_ ? ActivationSaved::dst : ActivationSaved::src;
  return desc;
}

Tensor Activation::forward_at(std::size_t slot, const Tensor& src) {
  detail::check_input(type_name(), src, 1, Dims::max_rank);
  const ActivationDesc desc = desc_for(src);
  desc.validate();
  Tensor dst = inplace_ ? src : detail::empty(context(), src.dims(), src.dtype(), desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return activation_list(c, desc, Direction::fwd); });
  record(Direction::fwd, activation_fwd(run_context, desc, src, dst), key);
  descs_[static_cast<std::size_t>(Direction::fwd)] = desc;
  if (saved_.size() <= slot) saved_.resize(slot + 1);
  saved_[slot] = is_grad_enabled() ? (inplace_ ? dst : src) : Tensor();
  return dst;
}

Tensor Activation::backward_at(std::size_t slot, const Tensor& diff_dst) {
  require_forward(slot < saved_.size() ? saved_[slot] : Tensor());
  const Tensor saved = saved_[slot];
  ActivationDesc desc = desc_for(saved);
  check_diff(diff_dst, desc.dims, desc.dtype, desc.layout);
  Tensor diff_src = detail::empty(context(), desc.dims, desc.dtype, desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return activation_list(c, desc, Direction::bwd_data);
  });
  record(Direction::bwd_data,
         activation_bwd(run_context, desc, inplace_ ? nullptr : &saved, inplace_ ? &saved : nullptr,
                        diff_dst, diff_src),
         key);
  descs_[static_cast<std::size_t>(Direction::bwd_data)] = desc;
  saved_[slot] = Tensor();
  return diff_src;
}

std::shared_ptr<const Choice> Activation::heuristic_choice(Direction direction) {
  if (direction == Direction::bwd_weights || direction == Direction::fwd_training) return nullptr;
  return detail::heuristic(context(), OpKind::activation, direction,
                           descs_[static_cast<std::size_t>(direction)], activation_select);
}

std::optional<ProfileResult> Activation::profile(Direction direction) {
  if (direction == Direction::bwd_weights || direction == Direction::fwd_training) {
    return std::nullopt;
  }
  return detail::profile(context(), OpKind::activation, direction,
                         descs_[static_cast<std::size_t>(direction)], activation_profile);
}

}  // namespace dnnx::nn
