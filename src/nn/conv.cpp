#include <dnnx/init.hpp>
#include <dnnx/nn/layers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <cmath>

namespace dnnx::nn {

Conv::Conv(const Context& context, int spatial_dims, std::int64_t in_channels,
           std::int64_t out_channels, std::vector<std::int64_t> kernel_size, ConvOptions options)
    : Module(context, OpKind::conv),
      spatial_dims_(spatial_dims),
      in_channels_(in_channels),
      out_channels_(out_channels),
      options_(std::move(options)) {
  DNNX_CHECK_ARG(spatial_dims >= 1 && spatial_dims <= 3, "Conv: spatial_dims ", spatial_dims,
                 " must be 1, 2 or 3");
  DNNX_CHECK_ARG(in_channels >= 1 && out_channels >= 1, type_name(), ": in_channels ", in_channels,
                 " and out_channels ", out_channels, " must be >= 1");
  DNNX_CHECK_ARG(options_.groups >= 1, type_name(), ": groups ", options_.groups, " must be >= 1");
  DNNX_CHECK_ARG(in_channels % options_.groups == 0 && out_channels % options_.groups == 0,
                 type_name(), ": in_channels ", in_channels, " and out_channels ", out_channels,
                 " must be divisible by groups ", options_.groups);
  kernel_ = detail::expand(type_name() + " kernel_size", kernel_size, spatial_dims, 1);
  options_.stride = detail::expand(type_name() + " stride", options_.stride, spatial_dims, 1);
  options_.padding = detail::expand(type_name() + " padding", options_.padding, spatial_dims, 0);
  options_.dilation = detail::expand(type_name() + " dilation", options_.dilation, spatial_dims, 1);

  std::vector<std::int64_t> weight_dims{out_channels, in_channels / options_.groups};
  weight_dims.insert(weight_dims.end(), kernel_.begin(), kernel_.end());
  const Dims dims(weight_dims);
  // torch.nn.ConvNd.reset_parameters.
  Tensor weight = detail::empty(this->context(), dims, DType::f32);
  init::kaiming_uniform(this->context(), default_generator(), weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (options_.bias) {
    Tensor bias = detail::empty(this->context(), Dims{out_channels}, DType::f32);
    const auto fan_in = init::calculate_fans(dims).fan_in;
    const float bound = fan_in > 0 ? static_cast<float>(1.0 / std::sqrt(double(fan_in))) : 0.0f;
    init::uniform(this->context(), default_generator(), bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

std::string Conv::type_name() const { return detail::cat("Conv", spatial_dims_, "d"); }

std::string Conv::extra_repr() const {
  std::string out =
      detail::cat(in_channels_, ", ", out_channels_, ", kernel_size=", detail::tuple(kernel_),
                  ", stride=", detail::tuple(options_.stride));
  const auto all = [](const std::vector<std::int64_t>& values, std::int64_t value) {
    for (auto v : values) {
      if (v != value) return false;
    }
    return true;
  };
  if (!all(options_.padding, 0)) out += ", padding=" + detail::tuple(options_.padding);
  if (!all(options_.dilation, 1)) out += ", dilation=" + detail::tuple(options_.dilation);
  if (options_.groups != 1) out += detail::cat(", groups=", options_.groups);
  if (!options_.bias) out += ", bias=False";
  return out;
}

Tensor Conv::forward(const Tensor& src) {
  detail::check_input(type_name(), src, spatial_dims_ + 2, spatial_dims_ + 2);
  const Tensor& weights = weight().value;
  // Note [nn layouts]: the weights' layout decides when the input is dense in both.
  const Layout weights_layout = weights_layout_;
  const Layout layout = src.is_dense(weights_layout) ? weights_layout : detail::layout_of(src);
  DNNX_CHECK_ARG(layout == weights_layout, type_name(), ": input ", describe(src), " is ",
                 to_string(layout), " but the weights ", describe(weights), " are ",
                 to_string(weights_layout), "; call nn::to_layout(model, Layout::",
                 layout == Layout::channels_last ? "channels_last" : "channels_first",
                 ") first (PyTorch's model.to(memory_format=...)), then build the optimizer");
  DNNX_CHECK_ARG(src.dtype() == weights.dtype(), type_name(), ": input ", describe(src),
                 " must have the weights' dtype ", to_string(weights.dtype()),
                 " (nn::convert the model, or feed it ", to_string(weights.dtype()), " data)");
  DNNX_CHECK_ARG(src.dims()[1] == in_channels_, type_name(), ": input ", describe(src), " has ",
                 src.dims()[1], " channels; expected ", in_channels_);
  ConvDesc desc =
      ConvDesc::from_shapes(src.dims(), weights.dims(), options_.stride, options_.padding,
                            options_.dilation, options_.groups, src.dtype(), layout);
  desc.validate();
  Tensor dst = detail::empty(context(), desc.dst_dims(), desc.dtype, layout);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return conv_list(c, desc, Direction::fwd); });
  record(Direction::fwd,
         conv_fwd(run_context, desc, src, weights, dst, has_bias() ? &bias().value : nullptr), key);
  desc_ = desc;
  src_ = is_grad_enabled() ? src : Tensor();
  return dst;
}

Tensor Conv::backward(const Tensor& diff_dst) {
  require_forward(src_);
  const ConvDesc desc = *desc_;
  check_diff(diff_dst, desc.dst_dims(), desc.dtype, desc.layout);
  const std::string key = desc.key();
  Tensor diff_src = detail::empty(context(), desc.src_dims(), desc.dtype, desc.layout);
  Context& data_context = call_context(Direction::bwd_data, key, [&](Context& c) {
    return conv_list(c, desc, Direction::bwd_data);
  });
  record(Direction::bwd_data, conv_bwd_data(data_context, desc, diff_dst, weight().value, diff_src),
         key);
  std::vector<Parameter*> targets{&weight()};
  if (has_bias()) targets.push_back(&bias());
  detail::accumulate(context(), targets, [&](std::vector<Tensor*>& out) {
    Context& weights_context = call_context(Direction::bwd_weights, key, [&](Context& c) {
      return conv_list(c, desc, Direction::bwd_weights);
    });
    record(Direction::bwd_weights,
           conv_bwd_weights(weights_context, desc, src_, diff_dst, *out[0],
                            has_bias() ? out[1] : nullptr),
           key);
  });
  src_ = Tensor();
  return diff_src;
}

void Conv::to_layout(Layout layout) {
  Module::to_layout(layout);
  weights_layout_ = layout;
}

std::shared_ptr<const Choice> Conv::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::conv, direction, desc_, conv_select);
}

std::optional<ProfileResult> Conv::profile(Direction direction) {
  return detail::profile(context(), OpKind::conv, direction, desc_, conv_profile);
}

}  // namespace dnnx::nn
