#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <array>
#include <cmath>

namespace dnnx::nn {

BatchNorm::BatchNorm(const Context& context, int spatial_dims, std::int64_t num_features,
                     BatchNormOptions options)
    : Module(context, OpKind::batch_norm),
      class_dims_(spatial_dims == 0 ? 1 : spatial_dims),
      features_(num_features),
      options_(options) {
  DNNX_CHECK_ARG(spatial_dims >= 0 && spatial_dims <= 3, "BatchNorm: spatial_dims ", spatial_dims,
                 " must be 0 (BatchNorm1d), 2 or 3");
  DNNX_CHECK_ARG(num_features >= 1, type_name(), ": num_features ", num_features, " must be >= 1");
  DNNX_CHECK_ARG(options.eps > 0 && std::isfinite(options.eps), type_name(), ": eps ", options.eps,
                 " must be finite and > 0");
  if (options.momentum) {
    DNNX_CHECK_ARG(*options.momentum >= 0 && *options.momentum <= 1, type_name(), ": momentum ",
                   *options.momentum, " must be in [0, 1], or std::nullopt (PyTorch's None)");
  }
  const Dims dims{num_features};
  if (options.affine) {
    Tensor weight = detail::empty(this->context(), dims, DType::f32);
    weight.fill(1.0f);
    register_parameter("weight", weight);
    register_parameter("bias", detail::zeros(this->context(), dims, DType::f32));
  }
  if (options.track_running_stats) {
    register_buffer("running_mean", detail::zeros(this->context(), dims, DType::f32));
    Tensor running_var = detail::empty(this->context(), dims, DType::f32);
    running_var.fill(1.0f);
    register_buffer("running_var", running_var);
    register_buffer("num_batches_tracked", Tensor::zeros(Dims{}, DType::i64));
  }
}

std::string BatchNorm::type_name() const { return detail::cat("BatchNorm", class_dims_, "d"); }

std::string BatchNorm::extra_repr() const {
  return detail::cat(features_, ", eps=", detail::py_float(options_.eps), ", momentum=",
                     options_.momentum ? detail::py_float(*options_.momentum) : std::string("None"),
                     ", affine=", detail::py_bool(options_.affine),
                     ", track_running_stats=", detail::py_bool(options_.track_running_stats));
}

BatchNormDesc BatchNorm::desc_for(const Tensor& src, bool training) const {
  BatchNormDesc desc =
      BatchNormDesc::spatial_of(src.dims(), training, src.dtype(), detail::layout_of(src));
  desc.eps = options_.eps;
  // momentum=None runs the op with momentum 1 into batch_stats_ (Note [batch norm cumulative
  // average]), so the desc is the same at every step.
  desc.momentum = options_.momentum.value_or(1.0);
  desc.affine = options_.affine;
  return desc;
}

// Note [batch norm cumulative average]
// PyTorch's momentum=None keeps the cumulative average of the batch statistics: at the n-th
// training forward (n = num_batches_tracked after the increment) running += (batch - running) / n.
// A momentum of 1 / n in the bnorm desc would give a new desc, hence a new choice-cache key and
// a new selection, at every step. Instead the op runs with momentum 1 on two scratch tensors
// (batch_stats_), which then hold the batch mean and the unbiased batch variance exactly
// ((1 - 1) * scratch + 1 * batch; the scratch tensors start as zeros and afterwards hold finite
// statistics, or the running ones become non-finite anyway), and one sgd op call folds both into
// the running statistics: with maximize, weight_decay 1 and lr 1 / n the sgd update is
// p -= lr * (-batch + p), i.e. running + (batch - running) / n, with lr a per-call value (Note
// [optimizer desc and hyperparameters]), so its desc is fixed too. Two op calls per training
// forward on every backend, no host round trip; f32 arithmetic (the reference backend's f64),
// where PyTorch computes (1 - f) * running + f * batch: the two differ by rounding only, relative
// to the larger of running and batch. The first training forward (n = 1) skips all this: the op's
// momentum 1 writes the batch statistics straight into the running buffers, exactly as PyTorch's
// (1 - 1) * running + batch (running + (batch - running) would round a tiny batch variance
// against the initial running_var of 1).
void BatchNorm::update_cumulative_average() {
  if (!average_desc_) {
    SgdDesc desc;
    desc.shapes = {Dims{features_}, Dims{features_}};
    desc.dtype = DType::f32;
    desc.maximize = true;
    desc.validate();
    average_desc_ = desc;
    average_step_ = detail::zeros(context(), Dims{1}, DType::f32);
  }
  std::array<Tensor, 2> running{buffer("running_mean"), buffer("running_var")};
  SgdTensors tensors;
  tensors.params = running;
  tensors.grads = batch_stats_;
  tensors.step = &average_step_;
  sgd_step(context(), *average_desc_, SgdHyper{1.0 / static_cast<double>(batches_), 0.0, 0.0, 1.0},
           tensors);
}

void BatchNorm::on_tensors_changed() {
  batch_stats_ = {};
  average_desc_.reset();
  average_step_ = Tensor();
}

Tensor BatchNorm::forward(const Tensor& src) {
  const int min_rank = class_dims_ == 1 ? 2 : class_dims_ + 2;
  detail::check_input(type_name(), src, min_rank, class_dims_ + 2);
  DNNX_CHECK_ARG(src.dims()[1] == features_, type_name(), ": input ", describe(src), " has ",
                 src.dims()[1], " channels; expected ", features_);
  // Without running statistics PyTorch normalises with the batch's in both modes.
  const bool batch_statistics = is_training() || !options_.track_running_stats;
  const BatchNormDesc desc = desc_for(src, batch_statistics);
  desc.validate();
  BatchNormTensors tensors;
  if (options_.affine) {
    tensors.scale = &weight().value;
    tensors.shift = &bias().value;
  }
  // momentum=None after the first training forward (the first one's statistics are the average:
  // the op's momentum 1 writes them into the running buffers).
  const bool cumulative =
      is_training() && options_.track_running_stats && !options_.momentum && batches_ > 0;
  if (cumulative) {
    if (batch_stats_[0].is_null()) {
      for (Tensor& stat : batch_stats_)
        stat = detail::zeros(context(), Dims{features_}, DType::f32);
    }
    tensors.running_mean = &batch_stats_[0];
    tensors.running_var = &batch_stats_[1];
  } else if (options_.track_running_stats && (is_training() || !batch_statistics)) {
    tensors.running_mean = &buffer("running_mean");
    tensors.running_var = &buffer("running_var");
  }
  Tensor saved_mean, saved_inv_std;
  if (batch_statistics) {
    saved_mean = detail::empty(context(), desc.param_dims(), DType::f32);
    saved_inv_std = detail::empty(context(), desc.param_dims(), DType::f32);
    tensors.saved_mean = &saved_mean;
    tensors.saved_inv_std = &saved_inv_std;
  }
  Tensor dst = detail::empty(context(), src.dims(), src.dtype(), desc.layout);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return batch_norm_list(c, desc, Direction::fwd); });
  record(Direction::fwd, batch_norm_fwd(run_context, desc, src, dst, tensors), key);
  if (is_training() && options_.track_running_stats) ++batches_;
  if (cumulative) update_cumulative_average();
  desc_ = desc;
  // Eval mode keeps the input too: its backward uses the running statistics (Note [eval mode
  // and gradients]).
  if (is_grad_enabled()) {
    src_ = src;
    saved_mean_ = saved_mean;
    saved_inv_std_ = saved_inv_std;
  } else {
    src_ = Tensor();
  }
  return dst;
}

Tensor BatchNorm::backward(const Tensor& diff_dst) {
  require_forward(src_);
  const BatchNormDesc desc = *desc_;
  check_diff(diff_dst, desc.dims, desc.dtype, desc.layout);
  BatchNormTensors tensors;
  if (options_.affine) {
    tensors.scale = &weight().value;
    tensors.shift = &bias().value;
  }
  if (desc.training) {
    tensors.saved_mean = &saved_mean_;
    tensors.saved_inv_std = &saved_inv_std_;
  } else {
    tensors.running_mean = &buffer("running_mean");
    tensors.running_var = &buffer("running_var");
  }
  Tensor diff_src = detail::empty(context(), desc.dims, desc.dtype, desc.layout);
  const std::string key = desc.key();
  const auto run = [&](Tensor* diff_scale, Tensor* diff_shift) {
    Context& run_context = call_context(Direction::bwd_data, key, [&](Context& c) {
      return batch_norm_list(c, desc, Direction::bwd_data);
    });
    record(Direction::bwd_data,
           batch_norm_bwd(run_context, desc, src_, diff_dst, tensors, diff_src, diff_scale,
                          diff_shift),
           key);
  };
  if (options_.affine) {
    detail::accumulate(context(), {&weight(), &bias()},
                       [&](std::vector<Tensor*>& out) { run(out[0], out[1]); });
  } else {
    run(nullptr, nullptr);
  }
  src_ = Tensor();
  saved_mean_ = Tensor();
  saved_inv_std_ = Tensor();
  return diff_src;
}

void BatchNorm::load_buffer(const std::string& name, const Tensor& value, Tensor& target) {
  if (name != "num_batches_tracked") {
    Module::load_buffer(name, value, target);
    return;
  }
  DNNX_CHECK_ARG(value.dtype() == DType::i64 || value.dtype() == DType::i32,
                 "num_batches_tracked must be i64 (or i32); got ", to_string(value.dtype()));
  Tensor host = Tensor::empty(value.dims(), value.dtype());
  copy(value, host);
  batches_ = value.dtype() == DType::i64 ? *static_cast<const std::int64_t*>(host.data())
                                         : *static_cast<const std::int32_t*>(host.data());
  refresh_buffers();
}

void BatchNorm::refresh_buffers() {
  if (!options_.track_running_stats) return;
  // The counter lives on the host (counting needs no op); the buffer shows it.
  Tensor host = Tensor::empty(Dims{}, DType::i64);
  *static_cast<std::int64_t*>(host.data()) = batches_;
  copy(host, buffer("num_batches_tracked"));
}

std::shared_ptr<const Choice> BatchNorm::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::batch_norm, direction, desc_, batch_norm_select);
}

std::optional<ProfileResult> BatchNorm::profile(Direction direction) {
  return detail::profile(context(), OpKind::batch_norm, direction, desc_, batch_norm_profile);
}

}  // namespace dnnx::nn
