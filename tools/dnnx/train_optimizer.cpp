#include "train_optimizer.hpp"

#include <stdexcept>

namespace dnnx::cli {
namespace {

// Note [train optimizer state]
// Resuming a run must restore what the optimizer accumulated, or its first steps after the
// resume differ from an uninterrupted run's (Adam's bias correction restarts, momentum is lost).
// nn::SGD and nn::Adam hold that state privately, so `dnnx train` drives the same ops itself
// with the state in named tensors, saved beside the weights.

Tensor zeros(const Context& context, const Dims& dims) {
  return Tensor::zeros(dims, DType::f32, Layout::channels_first, context.allocator());
}

}  // namespace

const char* to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

TrainOptimizer::TrainOptimizer(Context context, nn::Module& model, OptimizerConfig config)
    : context_(std::move(context)), config_(config) {
  const auto named = model.named_parameters();
  std::vector<nn::Parameter*> parameters;
  for (const auto& item : named) parameters.push_back(item.second);
  std::vector<nn::ParameterGroup> groups = nn::group_parameters(parameters);
  for (nn::ParameterGroup& tensors : groups) {
    Group group;
    for (const auto& [name, parameter] : named) {
      if (parameter->value.dtype() != tensors.dtype) continue;
      group.names.push_back(name);
      group.stored.emplace_back(parameter->value.dims(),
                                parameter->value.layout().value_or(Layout::channels_first));
    }
    const bool master = !tensors.master.empty();
    if (config_.kind == OptimizerKind::sgd) {
      group.sgd.shapes = tensors.shapes;
      group.sgd.dtype = tensors.dtype;
      group.sgd.master_weights = master;
      group.sgd.momentum = config_.momentum > 0;
      group.sgd.nesterov = config_.nesterov;
      group.sgd.validate();
      if (group.sgd.momentum) {
        for (const Dims& dims : tensors.shapes) group.first.push_back(zeros(context_, dims));
      }
    } else {
      group.adam.shapes = tensors.shapes;
      group.adam.dtype = tensors.dtype;
      group.adam.master_weights = master;
      group.adam.decoupled_weight_decay = config_.kind == OptimizerKind::adamw;
      group.adam.validate();
      for (const Dims& dims : tensors.shapes) {
        group.first.push_back(zeros(context_, dims));
        group.second.push_back(zeros(context_, dims));
      }
    }
    group.step = zeros(context_, Dims{1});
    group.tensors = std::move(tensors);
    groups_.push_back(std::move(group));
  }
}

void TrainOptimizer::step() {
  for (Group& group : groups_) {
    if (config_.kind == OptimizerKind::sgd) {
      SgdHyper hyper;
      hyper.lr = config_.lr;
      hyper.momentum = config_.momentum;
      hyper.weight_decay = config_.weight_decay;
      SgdTensors tensors;
      tensors.params = group.tensors.params;
      tensors.grads = group.tensors.grads;
      tensors.master = group.tensors.master;
      tensors.momentum_buffers = group.first;
      tensors.step = &group.step;
      sgd_step(context_, group.sgd, hyper, tensors);
    } else {
      AdamHyper hyper;
      hyper.lr = config_.lr;
      hyper.weight_decay = config_.weight_decay;
      AdamTensors tensors;
      tensors.params = group.tensors.params;
      tensors.grads = group.tensors.grads;
      tensors.master = group.tensors.master;
      tensors.exp_avg = group.first;
      tensors.exp_avg_sq = group.second;
      tensors.step = &group.step;
      adam_step(context_, group.adam, hyper, tensors);
    }
  }
}

namespace {

// `tensor` (a parameter's state, flat when the parameter is channels_last) as a view in the
// parameter's dims and layout.
Tensor as_stored(const Tensor& tensor, const std::pair<Dims, Layout>& stored) {
  if (tensor.dims() == stored.first) return tensor;
  return Tensor::view(tensor.data(), stored.first, tensor.dtype(), stored.second, tensor.device());
}

}  // namespace

void TrainOptimizer::save_state(safetensors::File& file) const {
  const char* first = config_.kind == OptimizerKind::sgd ? ".momentum_buffer" : ".exp_avg";
  for (const Group& group : groups_) {
    for (std::size_t i = 0; i < group.names.size(); ++i) {
      const auto& stored = group.stored[i];
      if (!group.first.empty()) file.set(group.names[i] + first, as_stored(group.first[i], stored));
      if (!group.second.empty()) {
        file.set(group.names[i] + ".exp_avg_sq", as_stored(group.second[i], stored));
      }
      if (!group.tensors.master.empty()) {
        file.set(group.names[i] + ".master", as_stored(group.tensors.master[i], stored));
      }
    }
    file.set("step." + std::string(dnnx::to_string(group.tensors.dtype)), group.step);
  }
  file.metadata()["optimizer"] = to_string(config_.kind);
}

void TrainOptimizer::load_state(const safetensors::File& file) {
  const auto found = file.metadata().find("optimizer");
  if (found == file.metadata().end() || found->second != to_string(config_.kind)) {
    throw Error(ErrorKind::InvalidArgument,
                "the optimizer state in '" + file.source() + "' is of optimizer '" +
                    (found == file.metadata().end() ? std::string("?") : found->second) +
                    "', this run uses '" + to_string(config_.kind) + "'");
  }
  const char* first = config_.kind == OptimizerKind::sgd ? ".momentum_buffer" : ".exp_avg";
  for (Group& group : groups_) {
    for (std::size_t i = 0; i < group.names.size(); ++i) {
      const auto& stored = group.stored[i];
      if (!group.first.empty()) {
        Tensor target = as_stored(group.first[i], stored);
        file.copy_to(group.names[i] + first, target);
      }
      if (!group.second.empty()) {
        Tensor target = as_stored(group.second[i], stored);
        file.copy_to(group.names[i] + ".exp_avg_sq", target);
      }
      if (!group.tensors.master.empty()) {
        Tensor target = as_stored(group.tensors.master[i], stored);
        file.copy_to(group.names[i] + ".master", target);
      }
    }
    file.copy_to("step." + std::string(dnnx::to_string(group.tensors.dtype)), group.step);
  }
}

}  // namespace dnnx::cli
