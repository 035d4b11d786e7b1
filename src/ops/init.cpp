// torch.nn.init's initialisers on the fill op: the formulas of PyTorch's torch/nn/init.py in
// double, each distribution's parameters rounded once to f32 for the fill.

#include <dnnx/init.hpp>
#include <dnnx/ops/fill.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <string>

namespace dnnx::init {
namespace {

using detail::shortest;

void run_fill(Context& context, Generator& generator, Tensor& tensor, Distribution distribution,
              const FillParams& params) {
  const FillDesc desc = FillDesc::of(tensor, distribution);
  fill_fwd(context, desc, params, generator, tensor);
}

std::int64_t fan_of(const Dims& dims, FanMode mode) {
  const Fans fans = calculate_fans(dims);
  return mode == FanMode::fan_in ? fans.fan_in : fans.fan_out;
}

}  // namespace

std::string_view to_string(FanMode mode) { return mode == FanMode::fan_in ? "fan_in" : "fan_out"; }

FanMode parse_fan_mode(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "fan_in") return FanMode::fan_in;
  if (name == "fan_out") return FanMode::fan_out;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("Mode ", text, " not supported, please use one of fan_in, fan_out"));
}

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  static constexpr std::string_view unit_gain[] = {
      "linear",           "conv1d",           "conv2d",           "conv3d",
      "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid"};
  for (std::string_view name : unit_gain) {
    if (nonlinearity == name) return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    DNNX_CHECK_ARG(std::isfinite(slope), "negative_slope ", shortest(slope), " not a valid number");
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("Unsupported nonlinearity ", nonlinearity,
                            "; accepted: linear, conv1d, conv2d, conv3d, conv_transpose1d, "
                            "conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, "
                            "leaky_relu, selu"));
}

Fans calculate_fans(const Dims& dims) {
  DNNX_CHECK_ARG(dims.rank() >= 2,
                 "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                 "(got dims '",
                 dims, "' of rank ", dims.rank(), ")");
  std::int64_t receptive = 1;
  for (int i = 2; i < dims.rank(); ++i) receptive *= dims[i];
  return {dims[1] * receptive, dims[0] * receptive};
}

double xavier_uniform_bound(const Dims& dims, double gain) {
  return std::sqrt(3.0) * xavier_normal_std(dims, gain);
}

double xavier_normal_std(const Dims& dims, double gain) {
  const Fans fans = calculate_fans(dims);
  DNNX_CHECK_ARG(fans.fan_in + fans.fan_out > 0, "xavier initialisation of dims ", dims,
                 " divides by fan_in + fan_out = 0");
  return gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
}

double kaiming_std(const Dims& dims, double a, FanMode mode, std::string_view nonlinearity) {
  const std::int64_t fan = fan_of(dims, mode);
  const double gain = calculate_gain(nonlinearity, a);
  DNNX_CHECK_ARG(fan > 0, "kaiming initialisation of dims ", dims, " divides by ", to_string(mode),
                 " = 0");
  return gain / std::sqrt(static_cast<double>(fan));
}

double kaiming_uniform_bound(const Dims& dims, double a, FanMode mode,
                             std::string_view nonlinearity) {
  return std::sqrt(3.0) * kaiming_std(dims, a, mode, nonlinearity);
}

void uniform(Context& context, Generator& generator, Tensor& tensor, float low, float high) {
  run_fill(context, generator, tensor, Distribution::uniform, FillParams::uniform(low, high));
}

void normal(Context& context, Generator& generator, Tensor& tensor, float mean, float std) {
  run_fill(context, generator, tensor, Distribution::normal, FillParams::normal(mean, std));
}

void trunc_normal(Context& context, Generator& generator, Tensor& tensor, float mean, float std,
                  float a, float b) {
  run_fill(context, generator, tensor, Distribution::trunc_normal,
           FillParams::trunc_normal(mean, std, a, b));
}

void constant(Context& context, Tensor& tensor, float value) {
  Generator unused;  // a constant draws nothing
  run_fill(context, unused, tensor, Distribution::constant, FillParams::constant(value));
}

void zeros(Context& context, Tensor& tensor) { constant(context, tensor, 0.0f); }

void ones(Context& context, Tensor& tensor) { constant(context, tensor, 1.0f); }

void xavier_uniform(Context& context, Generator& generator, Tensor& tensor, double gain) {
  const auto bound = static_cast<float>(xavier_uniform_bound(tensor.dims(), gain));
  uniform(context, generator, tensor, -bound, bound);
}

void xavier_normal(Context& context, Generator& generator, Tensor& tensor, double gain) {
  normal(context, generator, tensor, 0.0f,
         static_cast<float>(xavier_normal_std(tensor.dims(), gain)));
}

void kaiming_uniform(Context& context, Generator& generator, Tensor& tensor, double a, FanMode mode,
                     std::string_view nonlinearity) {
  if (tensor.numel() == 0) return;
  const auto bound =
      static_cast<float>(kaiming_uniform_bound(tensor.dims(), a, mode, nonlinearity));
  uniform(context, generator, tensor, -bound, bound);
}

void kaiming_normal(Context& context, Generator& generator, Tensor& tensor, double a, FanMode mode,
                    std::string_view nonlinearity) {
  if (tensor.numel() == 0) return;
  normal(context, generator, tensor, 0.0f,
         static_cast<float>(kaiming_std(tensor.dims(), a, mode, nonlinearity)));
}

}  // namespace dnnx::init
