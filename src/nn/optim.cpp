#include <dnnx/nn/optim.hpp>
#include <dnnx/ops/fill.hpp>
#include <dnnx/random.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

namespace dnnx::nn {

std::vector<ParameterGroup> group_parameters(const std::vector<Parameter*>& parameters) {
  std::vector<ParameterGroup> groups;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = *parameters[i];
    DNNX_CHECK_ARG(!parameter.value.is_null(), "parameter ", i, " is a null tensor");
    ParameterGroup* group = nullptr;
    for (auto& existing : groups) {
      if (existing.dtype == parameter.value.dtype()) group = &existing;
    }
    if (group == nullptr) {
      groups.push_back(ParameterGroup{parameter.value.dtype(), {}, {}, {}, {}, {}});
      group = &groups.back();
    } else {
      DNNX_CHECK_ARG(group->params.front().device() == parameter.value.device(), "parameter ", i,
                     " lives on ", to_string(parameter.value.device()),
                     ", the others of its dtype on ", to_string(group->params.front().device()));
      DNNX_CHECK_ARG(group->master.empty() == parameter.master.is_null(), "parameter ", i, " (",
                     to_string(parameter.value.dtype()),
                     ") and the earlier ones of its dtype do not all have master copies");
    }
    if (parameter.value.is_dense(Layout::channels_first)) {
      group->shapes.push_back(parameter.value.dims());
      group->params.push_back(parameter.value);
      group->grads.push_back(parameter.grad);
      if (!parameter.master.is_null()) group->master.push_back(parameter.master);
      continue;
    }
    // Note [nn layouts]: a channels_last parameter is updated as the flat array it is.
    const Dims flat{parameter.value.numel()};
    const auto flat_view = [&](const Tensor& tensor, const char* what) {
      DNNX_CHECK_ARG(tensor.is_dense(Layout::channels_last), "parameter ", i, ": its ", what, " ",
                     describe(tensor), " is not dense channels_last like its value ",
                     describe(parameter.value));
      group->owners.push_back(tensor);
      return Tensor::view(tensor.data(), flat, tensor.dtype(), Layout::channels_first,
                          tensor.device());
    };
    group->shapes.push_back(flat);
    group->params.push_back(flat_view(parameter.value, "value"));
    group->grads.push_back(flat_view(parameter.grad, "gradient"));
    if (!parameter.master.is_null()) group->master.push_back(flat_view(parameter.master, "master"));
  }
  return groups;
}

namespace {

std::vector<Tensor> zeros_like(const Context& context, const std::vector<Dims>& shapes) {
  std::vector<Tensor> out;
  for (const Dims& dims : shapes) out.push_back(detail::zeros(context, dims, DType::f32));
  return out;
}

// An f32 {1} (or i32) tensor holding `value` on `context`'s device.
Tensor scalar(const Context& context, DType dtype, float value) {
  Tensor tensor = detail::empty(context, Dims{1}, dtype);
  tensor.fill(value);
  return tensor;
}

}  // namespace

Optimizer::Optimizer(Context context, const std::vector<Parameter*>& parameters)
    : context_(std::move(context)), parameters_(parameters) {
  groups_ = group_parameters(parameters);
  choices_.resize(groups_.size());
}

Optimizer::~Optimizer() = default;

void Optimizer::step(const Tensor* grad_scale, const Tensor* found_inf) {
  zero_none_grads();
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    choices_[i] = step_group(i, grad_scale, found_inf);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Parameter* parameter : parameters_) detail::zero_grad(context_, *parameter, set_to_none);
}

void Optimizer::zero_none_grads() {
  for (Parameter* parameter : parameters_) {
    if (!parameter->grad_none) continue;
    detail::fill_zeros(context_, parameter->grad);
    parameter->grad_none = false;
  }
}

const std::vector<UnscaleDesc>& Optimizer::unscale_descs(bool from_scale, bool reset) {
  std::vector<UnscaleDesc>& descs = unscale_descs_[from_scale ? 1 : 0][reset ? 1 : 0];
  if (descs.empty()) {
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      UnscaleDesc desc;
      desc.shapes = groups_[i].shapes;
      desc.dtype = groups_[i].dtype;
      desc.reset_found_inf = reset && i == 0;
      desc.from_scale = from_scale;
      desc.validate();
      descs.push_back(std::move(desc));
    }
  }
  return descs;
}

SGD::SGD(Context context, const std::vector<Parameter*>& parameters, SgdHyper hyper, bool nesterov)
    : Optimizer(std::move(context), parameters), hyper_(hyper) {
  for (const ParameterGroup& group : groups_) {
    SgdDesc desc;
    desc.shapes = group.shapes;
    desc.dtype = group.dtype;
    desc.master_weights = !group.master.empty();
    desc.momentum = hyper.momentum > 0;
    desc.nesterov = nesterov;
    desc.validate();
    buffers_.push_back(desc.momentum ? zeros_like(context_, group.shapes) : std::vector<Tensor>{});
    descs_[0].push_back(std::move(desc));
    steps_.push_back(detail::zeros(context_, Dims{1}, DType::f32));
  }
}

std::shared_ptr<const Choice> SGD::step_group(std::size_t group, const Tensor* grad_scale,
                                              const Tensor* found_inf) {
  std::vector<SgdDesc>& descs = descs_[variant(grad_scale, found_inf)];
  if (descs.empty()) {
    for (SgdDesc desc : descs_[0]) {
      desc.grad_scale = grad_scale != nullptr;
      desc.found_inf = found_inf != nullptr;
      descs.push_back(std::move(desc));
    }
  }
  ParameterGroup& parameters = groups_[group];
  SgdTensors tensors;
  tensors.params = parameters.params;
  tensors.grads = parameters.grads;
  tensors.master = parameters.master;
  tensors.momentum_buffers = buffers_[group];
  tensors.step = &steps_[group];
  tensors.grad_scale = grad_scale;
  tensors.found_inf = found_inf;
  return sgd_step(context_, descs[group], hyper_, tensors);
}

Adam::Adam(Context context, const std::vector<Parameter*>& parameters, AdamHyper hyper,
           bool decoupled_weight_decay, bool amsgrad)
    : Optimizer(std::move(context), parameters), hyper_(hyper) {
  for (const ParameterGroup& group : groups_) {
    AdamDesc desc;
    desc.shapes = group.shapes;
    desc.dtype = group.dtype;
    desc.master_weights = !group.master.empty();
    desc.decoupled_weight_decay = decoupled_weight_decay;
    desc.amsgrad = amsgrad;
    desc.validate();
    descs_[0].push_back(std::move(desc));
    exp_avg_.push_back(zeros_like(context_, group.shapes));
    exp_avg_sq_.push_back(zeros_like(context_, group.shapes));
    max_exp_avg_sq_.push_back(amsgrad ? zeros_like(context_, group.shapes) : std::vector<Tensor>{});
    steps_.push_back(detail::zeros(context_, Dims{1}, DType::f32));
  }
}

std::shared_ptr<const Choice> Adam::step_group(std::size_t group, const Tensor* grad_scale,
                                               const Tensor* found_inf) {
  std::vector<AdamDesc>& descs = descs_[variant(grad_scale, found_inf)];
  if (descs.empty()) {
    for (AdamDesc desc : descs_[0]) {
      desc.grad_scale = grad_scale != nullptr;
      desc.found_inf = found_inf != nullptr;
      descs.push_back(std::move(desc));
    }
  }
  ParameterGroup& parameters = groups_[group];
  AdamTensors tensors;
  tensors.params = parameters.params;
  tensors.grads = parameters.grads;
  tensors.master = parameters.master;
  tensors.exp_avg = exp_avg_[group];
  tensors.exp_avg_sq = exp_avg_sq_[group];
  tensors.max_exp_avg_sq = max_exp_avg_sq_[group];
  tensors.step = &steps_[group];
  tensors.grad_scale = grad_scale;
  tensors.found_inf = found_inf;
  return adam_step(context_, descs[group], hyper_, tensors);
}

// Note [nn grad scaler]
// torch.cuda.amp.GradScaler on dnnx's loss-scaling ops, with nothing read back on the host:
// - loss_gradient: the backward starts from `scale` instead of 1 (torch's scale(loss).backward()).
//   A dynamic scale lives on the device, so the seed is the fill op's 1 multiplied by it with the
//   unscale op (from_scale off: it multiplies by the scalar given; the seed's own inf check goes
//   to a scratch found_inf). A static scale is a host constant: one tensor filled once.
// - step without unscale_: the unscale op with an inverse scale of 1 only checks the gradients
//   (found_inf reset by the first group's call of the iteration, then set by any non-finite
//   value), and the optimizer op divides by the scale itself (grad_scale) and skips the step on
//   the device when found_inf is set: torch's path for fused optimizers. One multi-tensor launch
//   per group for the check and one for the step, as a hand-written loop would do.
// - unscale_: the unscale op divides the gradients by the scale in place (from_scale), and the
//   step passes found_inf only.
// - update: the update_scale op (torch._amp_update_scale_) with the options' factors; nothing for
//   a static scale.
GradScaler::GradScaler(Context context, GradScalerOptions options)
    : context_(std::move(context)), options_(options) {
  DNNX_CHECK_ARG(std::isfinite(options.init_scale) && options.init_scale > 0 &&
                     std::isfinite(static_cast<float>(options.init_scale)),
                 "GradScaler: init_scale ", options.init_scale, " must be finite (in f32) and > 0");
  DNNX_CHECK_ARG(std::isfinite(options.growth_factor) && options.growth_factor > 1,
                 "GradScaler: growth_factor ", options.growth_factor, " must be finite and > 1");
  DNNX_CHECK_ARG(options.backoff_factor > 0 && options.backoff_factor < 1,
                 "GradScaler: backoff_factor ", options.backoff_factor, " must be in (0, 1)");
  DNNX_CHECK_ARG(options.growth_interval >= 1 && options.growth_interval <= INT32_MAX,
                 "GradScaler: growth_interval ", options.growth_interval,
                 " must be in [1, 2^31 - 1]");
  scale_ = scalar(context_, DType::f32, static_cast<float>(options.init_scale));
  growth_tracker_ = scalar(context_, DType::i32, 0.0f);
  found_inf_ = scalar(context_, DType::f32, 0.0f);
  one_ = scalar(context_, DType::f32, 1.0f);
  seed_found_inf_ = scalar(context_, DType::f32, 0.0f);
}

Tensor GradScaler::loss_gradient(const Tensor& loss) {
  DNNX_CHECK_ARG(
      !loss.is_null() && is_floating(loss.dtype()) && loss.is_dense(Layout::channels_first),
      "GradScaler.loss_gradient: loss ", describe(loss),
      " must be a dense f32, f16 or bf16 tensor");
  if (!options_.enabled || !options_.dynamic) {
    for (const Constant& constant : constants_) {
      if (constant.dims == loss.dims() && constant.dtype == loss.dtype()) return constant.tensor;
    }
    Tensor tensor = detail::empty(context_, loss.dims(), loss.dtype());
    tensor.fill(options_.enabled ? static_cast<float>(options_.init_scale) : 1.0f);
    constants_.push_back(Constant{loss.dims(), loss.dtype(), tensor});
    return tensor;
  }
  Tensor seed = detail::empty(context_, loss.dims(), loss.dtype());
  if (seed.numel() == 0) return seed;
  Generator unused(0);  // a constant fill draws nothing
  fill_fwd(context_, FillDesc::of(seed, Distribution::constant), FillParams::constant(1.0f), unused,
           seed);
  UnscaleDesc desc;
  desc.shapes = {seed.dims()};
  desc.dtype = seed.dtype();
  desc.reset_found_inf = true;
  desc.validate();
  std::array<Tensor, 1> tensors{seed};
  unscale(context_, desc, tensors, seed_found_inf_, scale_);
  return seed;
}

GradScaler::Entry* GradScaler::entry(Optimizer& optimizer) {
  for (Entry& existing : entries_) {
    if (existing.optimizer == &optimizer) return &existing;
  }
  return nullptr;
}

void GradScaler::check_gradients(Optimizer& optimizer, bool from_scale) {
  optimizer.zero_none_grads();
  // found_inf starts the iteration cleared by the first unscale call after update().
  const bool reset = entries_.empty();
  const std::vector<UnscaleDesc>& descs = optimizer.unscale_descs(from_scale, reset);
  for (std::size_t i = 0; i < descs.size(); ++i) {
    unscale(optimizer.context(), descs[i], optimizer.groups()[i].grads, found_inf_,
            from_scale ? scale_ : one_);
  }
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  DNNX_CHECK_ARG(entry(optimizer) == nullptr,
                 "GradScaler.unscale_ has already been called on this optimizer since the last "
                 "update(), or step() has");
  check_gradients(optimizer, true);
  entries_.push_back(Entry{&optimizer, State::unscaled});
}

void GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return;
  }
  Entry* existing = entry(optimizer);
  DNNX_CHECK_ARG(existing == nullptr || existing->state != State::stepped,
                 "GradScaler.step has already been called on this optimizer since the last "
                 "update()");
  if (existing != nullptr) {
    optimizer.step(nullptr, &found_inf_);
    existing->state = State::stepped;
    return;
  }
  check_gradients(optimizer, false);
  optimizer.step(&scale_, &found_inf_);
  entries_.push_back(Entry{&optimizer, State::stepped});
}

void GradScaler::update() {
  if (!options_.enabled) return;
  DNNX_CHECK_ARG(!entries_.empty(),
                 "GradScaler.update: no step() or unscale_() since the last update() (no inf "
                 "checks were recorded)");
  entries_.clear();
  if (!options_.dynamic) return;
  UpdateScaleHyper hyper;
  hyper.growth_factor = options_.growth_factor;
  hyper.backoff_factor = options_.backoff_factor;
  hyper.growth_interval = options_.growth_interval;
  update_scale(context_, UpdateScaleDesc{}, hyper, scale_, growth_tracker_, found_inf_);
}

float GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0f;
  Tensor host = Tensor::empty(Dims{1}, DType::f32);
  copy(scale_, host);
  return host.to_f32()[0];
}

}  // namespace dnnx::nn
