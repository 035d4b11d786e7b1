#include <dnnx/nn/loss.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

namespace dnnx::nn {

CrossEntropyLoss::CrossEntropyLoss(const Context& context, CrossEntropyOptions options)
    : Module(context, OpKind::cross_entropy), options_(std::move(options)) {
  if (options_.label_smoothing != 0.0) {
    dnnx::detail::raise(ErrorKind::Unsupported,
                        detail::cat("CrossEntropyLoss: label_smoothing ", options_.label_smoothing,
                                    " is not offered (the xent op has no smoothing); use 0"));
  }
  if (!options_.weight.is_null()) {
    DNNX_CHECK_ARG(options_.weight.rank() == 1 && options_.weight.dtype() == DType::f32,
                   "CrossEntropyLoss: weight ", describe(options_.weight),
                   " must be f32 with one dim (the classes)");
    register_buffer("weight", options_.weight);
  }
}

std::string CrossEntropyLoss::extra_repr() const { return {}; }

Tensor CrossEntropyLoss::forward(const Tensor&) {
  dnnx::detail::raise(ErrorKind::InvalidArgument,
                      "CrossEntropyLoss needs labels: call forward(logits, labels)");
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  const Layout layout = detail::check_input("CrossEntropyLoss", logits, 2, Dims::max_rank);
  CrossEntropyDesc desc;
  desc.dims = logits.dims();
  desc.layout = layout;
  desc.reduction = options_.reduction;
  desc.ignore_index = options_.ignore_index;
  const bool weighted = !options_.weight.is_null();
  desc.weighted = weighted;
  desc.label_dtype = labels.dtype();
  desc.dtype = logits.dtype();
  desc.validate();
  if (weighted) {
    DNNX_CHECK_ARG(buffer("weight").dims() == desc.weights_dims(), "CrossEntropyLoss: weight ",
                   describe(buffer("weight")),
                   " must have one entry per class: ", desc.weights_dims());
  }
  Tensor loss = detail::empty(context(), desc.loss_dims(), desc.dtype);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return cross_entropy_list(c, desc, Direction::fwd); });
  record(Direction::fwd,
         cross_entropy_fwd(run_context, desc, logits, labels,
                           weighted ? &buffer("weight") : nullptr, loss),
         key);
  desc_ = desc;
  logits_ = logits;
  labels_ = labels;
  return loss;
}

Tensor CrossEntropyLoss::backward() {
  DNNX_CHECK_ARG(desc_.has_value() && !logits_.is_null(),
                 "CrossEntropyLoss.backward called without a forward before it");
  Tensor ones = detail::empty(context(), desc_->loss_dims(), desc_->dtype);
  ones.fill(1.0f);
  return backward(ones);
}

Tensor CrossEntropyLoss::backward(const Tensor& diff_loss) {
  DNNX_CHECK_ARG(desc_.has_value() && !logits_.is_null(),
                 "CrossEntropyLoss.backward called without a forward before it");
  const CrossEntropyDesc desc = *desc_;
  check_diff(diff_loss, desc.loss_dims(), desc.dtype);
  Tensor diff_logits = detail::empty(context(), desc.dims, desc.dtype, desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return cross_entropy_list(c, desc, Direction::bwd_data);
  });
  record(Direction::bwd_data,
         cross_entropy_bwd(run_context, desc, logits_, labels_,
                           desc.weighted ? &buffer("weight") : nullptr, diff_loss, diff_logits),
         key);
  logits_ = labels_ = Tensor();
  return diff_logits;
}

std::shared_ptr<const Choice> CrossEntropyLoss::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::cross_entropy, direction, desc_,
                           cross_entropy_select);
}

std::optional<ProfileResult> CrossEntropyLoss::profile(Direction direction) {
  return detail::profile(context(), OpKind::cross_entropy, direction, desc_, cross_entropy_profile);
}

}  // namespace dnnx::nn
