#include <dnnx/nn/optim.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

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

void zero_all(Context& context, const std::vector<Parameter*>& parameters) {
  for (Parameter* parameter : parameters) {
    detail::fill_zeros(context, parameter->grad);
    parameter->grad_live = false;
  }
}

}  // namespace

SGD::SGD(Context context, const std::vector<Parameter*>& parameters, SgdHyper hyper, bool nesterov)
    : context_(std::move(context)), hyper_(hyper), parameters_(parameters) {
  groups_ = group_parameters(parameters);
  for (const ParameterGroup& group : groups_) {
    SgdDesc desc;
    desc.shapes = group.shapes;
    desc.dtype = group.dtype;
    desc.master_weights = !group.master.empty();
    desc.momentum = hyper.momentum > 0;
    desc.nesterov = nesterov;
    desc.validate();
    descs_.push_back(desc);
    buffers_.push_back(desc.momentum ? zeros_like(context_, group.shapes) : std::vector<Tensor>{});
    steps_.push_back(detail::zeros(context_, Dims{1}, DType::f32));
  }
  choices_.resize(groups_.size());
}

void SGD::step() {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    ParameterGroup& group = groups_[i];
    SgdTensors tensors;
    tensors.params = group.params;
    tensors.grads = group.grads;
    tensors.master = group.master;
    tensors.momentum_buffers = buffers_[i];
    tensors.step = &steps_[i];
    choices_[i] = sgd_step(context_, descs_[i], hyper_, tensors);
  }
}

void SGD::zero_grad() { zero_all(context_, parameters_); }

Adam::Adam(Context context, const std::vector<Parameter*>& parameters, AdamHyper hyper,
           bool decoupled_weight_decay, bool amsgrad)
    : context_(std::move(context)), hyper_(hyper), parameters_(parameters) {
  groups_ = group_parameters(parameters);
  for (const ParameterGroup& group : groups_) {
    AdamDesc desc;
    desc.shapes = group.shapes;
    desc.dtype = group.dtype;
    desc.master_weights = !group.master.empty();
    desc.decoupled_weight_decay = decoupled_weight_decay;
    desc.amsgrad = amsgrad;
    desc.validate();
    descs_.push_back(desc);
    exp_avg_.push_back(zeros_like(context_, group.shapes));
    exp_avg_sq_.push_back(zeros_like(context_, group.shapes));
    max_exp_avg_sq_.push_back(amsgrad ? zeros_like(context_, group.shapes) : std::vector<Tensor>{});
    steps_.push_back(detail::zeros(context_, Dims{1}, DType::f32));
  }
  choices_.resize(groups_.size());
}

void Adam::step() {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    ParameterGroup& group = groups_[i];
    AdamTensors tensors;
    tensors.params = group.params;
    tensors.grads = group.grads;
    tensors.master = group.master;
    tensors.exp_avg = exp_avg_[i];
    tensors.exp_avg_sq = exp_avg_sq_[i];
    tensors.max_exp_avg_sq = max_exp_avg_sq_[i];
    tensors.step = &steps_[i];
    choices_[i] = adam_step(context_, descs_[i], hyper_, tensors);
  }
}

void Adam::zero_grad() { zero_all(context_, parameters_); }

}  // namespace dnnx::nn
