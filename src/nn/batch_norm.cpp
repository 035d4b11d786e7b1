#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

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
  DNNX_CHECK_ARG(options.momentum >= 0 && options.momentum <= 1, type_name(), ": momentum ",
                 options.momentum,
                 " must be in [0, 1] (PyTorch's momentum=None, a cumulative "
                 "average, is not offered)");
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
  return detail::cat(features_, ", eps=", detail::py_float(options_.eps),
                     ", momentum=", detail::py_float(options_.momentum),
                     ", affine=", detail::py_bool(options_.affine),
                     ", track_running_stats=", detail::py_bool(options_.track_running_stats));
}

BatchNormDesc BatchNorm::desc_for(const Tensor& src, bool training) const {
  BatchNormDesc desc =
      BatchNormDesc::spatial_of(src.dims(), training, src.dtype(), detail::layout_of(src));
  desc.eps = options_.eps;
  desc.momentum = options_.momentum;
  desc.affine = options_.affine;
  return desc;
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
  if (options_.track_running_stats && (is_training() || !batch_statistics)) {
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
  desc_ = desc;
  if (is_training()) {
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
