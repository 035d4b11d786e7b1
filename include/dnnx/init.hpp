#pragma once
/// \file
/// Initialisers of torch.nn.init, on tensors of any device, drawing through the fill op (the
/// same bits on every backend for the same Generator state). Names, defaults and formulas are
/// PyTorch's; bad arguments throw InvalidArgument where PyTorch raises ValueError.

#include <dnnx/context.hpp>
#include <dnnx/random.hpp>
#include <dnnx/tensor.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace dnnx::init {

/// Which fan a Kaiming initialiser preserves: fan_in keeps the variance of the forward pass's
/// outputs, fan_out that of the backward pass's gradients.
enum class FanMode : std::uint8_t { fan_in, fan_out };
/// "fan_in", "fan_out".
std::string_view to_string(FanMode mode);
/// Parses "fan_in" / "fan_out"; throws InvalidArgument ("Mode <text> not supported, please use
/// one of fan_in, fan_out").
FanMode parse_fan_mode(std::string_view text);

/// torch.nn.init.calculate_gain: 1 for linear, conv1d/2d/3d, conv_transpose1d/2d/3d and sigmoid;
/// 5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`,
/// default 0.01); 3/4 for selu. Throws InvalidArgument for another nonlinearity, and for a
/// leaky_relu slope that is not finite.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

/// Fan in and fan out of a weight tensor of `dims` as torch.nn.init._calculate_fan_in_and_fan_out
/// computes them: dims are O, I/groups, k... (a linear layer's O x I); fan_in = dims[1] x
/// receptive field, fan_out = dims[0] x receptive field, the receptive field being the product
/// of dims[2:]. Throws InvalidArgument for fewer than 2 dims.
struct Fans {
  std::int64_t fan_in = 0;
  std::int64_t fan_out = 0;
};
Fans calculate_fans(const Dims& dims);

/// The bound a of xavier_uniform on `dims`: gain sqrt(6 / (fan_in + fan_out)).
double xavier_uniform_bound(const Dims& dims, double gain = 1.0);
/// The std of xavier_normal on `dims`: gain sqrt(2 / (fan_in + fan_out)).
double xavier_normal_std(const Dims& dims, double gain = 1.0);
/// The std of kaiming_normal on `dims`: calculate_gain(nonlinearity, a) / sqrt(fan), fan the
/// mode's. Throws InvalidArgument for a fan of 0.
double kaiming_std(const Dims& dims, double a = 0.0, FanMode mode = FanMode::fan_in,
                   std::string_view nonlinearity = "leaky_relu");
/// The bound of kaiming_uniform on `dims`: sqrt(3) kaiming_std.
double kaiming_uniform_bound(const Dims& dims, double a = 0.0, FanMode mode = FanMode::fan_in,
                             std::string_view nonlinearity = "leaky_relu");

/// U(low, high) (torch.nn.init.uniform_).
void uniform(Context& context, Generator& generator, Tensor& tensor, float low = 0.0f,
             float high = 1.0f);
/// N(mean, std^2) (torch.nn.init.normal_).
void normal(Context& context, Generator& generator, Tensor& tensor, float mean = 0.0f,
            float std = 1.0f);
/// N(mean, std^2) truncated to [a, b] (torch.nn.init.trunc_normal_'s formulation).
void trunc_normal(Context& context, Generator& generator, Tensor& tensor, float mean = 0.0f,
                  float std = 1.0f, float a = -2.0f, float b = 2.0f);
/// Every element `value` (torch.nn.init.constant_).
void constant(Context& context, Tensor& tensor, float value);
/// Every element 0 (torch.nn.init.zeros_).
void zeros(Context& context, Tensor& tensor);
/// Every element 1 (torch.nn.init.ones_).
void ones(Context& context, Tensor& tensor);
/// U(-a, a), a = xavier_uniform_bound (torch.nn.init.xavier_uniform_).
void xavier_uniform(Context& context, Generator& generator, Tensor& tensor, double gain = 1.0);
/// N(0, std^2), std = xavier_normal_std (torch.nn.init.xavier_normal_).
void xavier_normal(Context& context, Generator& generator, Tensor& tensor, double gain = 1.0);
/// U(-bound, bound), bound = kaiming_uniform_bound (torch.nn.init.kaiming_uniform_). Like
/// PyTorch, a tensor with no elements is left alone.
void kaiming_uniform(Context& context, Generator& generator, Tensor& tensor, double a = 0.0,
                     FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu");
/// N(0, std^2), std = kaiming_std (torch.nn.init.kaiming_normal_). Like PyTorch, a tensor with
/// no elements is left alone.
void kaiming_normal(Context& context, Generator& generator, Tensor& tensor, double a = 0.0,
                    FanMode mode = FanMode::fan_in, std::string_view nonlinearity = "leaky_relu");

}  // namespace dnnx::init
