#include "ops/conv_fused_support.hpp"

#include <dnnx/ops/conv.hpp>

#include "support/conv.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx::test {
namespace {

struct Shape {
  Dims src, weights;
  std::vector<std::int64_t> stride{1}, pad{0}, dilation{1};
  std::int64_t groups = 1;
};

struct Epilogue {
  bool bias = false;
  bool residual = false;
  float scale = 1.0f;
  FusedActivation activation = FusedActivation::relu;
};

ConvFusedCase make_case(std::string name, const Shape& shape, DType dtype, Layout layout,
                        const Epilogue& epilogue, bool in_place = false) {
  ConvFusedCase c;
  c.name = std::move(name);
  c.desc.conv = ConvDesc::from_shapes(shape.src, shape.weights, shape.stride, shape.pad,
                                      shape.dilation, shape.groups, dtype, layout);
  c.desc.bias = epilogue.bias;
  c.desc.residual = epilogue.residual;
  c.desc.residual_scale = epilogue.scale;
  c.desc.activation = epilogue.activation;
  c.in_place = in_place;
  c.desc.validate();
  return c;
}

}  // namespace

void PrintTo(const ConvFusedCase& param, std::ostream* out) {
  *out << param.name << " (" << param.desc << (param.in_place ? ", in place" : "") << ")";
}

std::vector<ConvFusedCase> conv_fused_cases() {
  using enum DType;
  constexpr Layout nchw = Layout::channels_first;
  constexpr Layout nhwc = Layout::channels_last;
  constexpr FusedActivation relu = FusedActivation::relu;
  constexpr FusedActivation identity = FusedActivation::identity;
  const Epilogue none{false, false, 1.0f, identity};
  const Epilogue bias_relu{true, false, 1.0f, relu};
  const Epilogue bias_identity{true, false, 1.0f, identity};
  const Epilogue residual_relu{false, true, 1.0f, relu};
  const Epilogue all_relu{true, true, 1.0f, relu};

  std::vector<ConvFusedCase> cases;
  cases.push_back(make_case("d2_f32_nchw_bias_relu", {{2, 4, 8, 8}, {8, 4, 3, 3}, {1}, {1}}, f32,
                            nchw, bias_relu));
  cases.push_back(make_case("d2_f32_nhwc_1x1_bias_res_relu", {{2, 8, 7, 7}, {16, 8, 1, 1}}, f32,
                            nhwc, all_relu));
  cases.push_back(make_case("d2_f16_nhwc_s2_res_half_identity",
                            {{1, 16, 9, 9}, {16, 16, 3, 3}, {2}, {1}}, f16, nhwc,
                            {false, true, 0.5f, identity}));
  cases.push_back(make_case("d2_bf16_nchw_bias_identity", {{2, 6, 6, 5}, {4, 6, 3, 3}, {1}, {1}},
                            bf16, nchw, bias_identity));
  cases.push_back(make_case("d1_f32_nchw_dil2_bias_relu", {{2, 4, 17}, {6, 4, 3}, {1}, {2}, {2}},
                            f32, nchw, bias_relu));
  cases.push_back(make_case("d3_f32_nhwc_g2_bias_res_relu",
                            {{1, 4, 4, 5, 6}, {6, 2, 3, 3, 3}, {1}, {1}, {1}, 2}, f32, nhwc,
                            all_relu));
  cases.push_back(make_case("dw_f32_nchw_res_relu", {{2, 8, 9, 9}, {8, 1, 3, 3}, {1}, {1}, {1}, 8},
                            f32, nchw, residual_relu));
  cases.push_back(
      make_case("d2_f32_nhwc_no_epilogue", {{2, 4, 6, 6}, {8, 4, 3, 3}}, f32, nhwc, none));
  cases.push_back(make_case("inplace_f32_nchw_bias_res_relu",
                            {{2, 4, 8, 8}, {8, 4, 3, 3}, {1}, {1}}, f32, nchw, all_relu, true));
  cases.push_back(make_case("inplace_f16_nhwc_bias_res_scaled_relu",
                            {{2, 8, 6, 6}, {8, 8, 3, 3}, {1}, {1}}, f16, nhwc,
                            {true, true, -1.5f, relu}, true));
  {
    ConvFusedCase asymmetric = make_case(
        "asym_f32_nchw_s2_res_relu", {{1, 3, 9, 8}, {5, 3, 3, 3}, {2}}, f32, nchw, residual_relu);
    asymmetric.desc.conv.pad_before = {1, 0, 0};
    asymmetric.desc.conv.pad_after = {0, 2, 0};
    asymmetric.desc.validate();
    cases.push_back(asymmetric);
  }
  cases.push_back(make_case("inplace_bf16_nhwc_1x1_s2_bias_res_relu",
                            {{2, 16, 8, 8}, {32, 16, 1, 1}, {2}}, bf16, nhwc, all_relu, true));
  cases.push_back(
      make_case("odd_f32_nhwc_n1_bias_relu", {{1, 3, 5, 7}, {3, 3, 2, 3}}, f32, nhwc, bias_relu));
  cases.push_back(make_case("d2_f16_nchw_g2_dil2_bias_relu",
                            {{2, 4, 9, 9}, {6, 2, 3, 3}, {1}, {2}, {2}, 2}, f16, nchw, bias_relu));
  cases.push_back(make_case("d3_bf16_nchw_res_twice_identity",
                            {{1, 4, 4, 4, 4}, {4, 4, 3, 3, 3}, {1}, {1}}, bf16, nchw,
                            {false, true, 2.0f, identity}));
  cases.push_back(make_case("inplace_d1_f16_nhwc_bias_res_relu", {{2, 8, 16}, {8, 8, 5}, {1}, {2}},
                            f16, nhwc, all_relu, true));
  cases.push_back(make_case("d2_f32_nchw_res_scaled_identity",
                            {{2, 4, 7, 7}, {4, 4, 3, 3}, {1}, {1}}, f32, nchw,
                            {true, true, 0.3f, identity}));
  cases.push_back(make_case("d2_bf16_nhwc_g4_bias_relu",
                            {{1, 8, 7, 7}, {8, 2, 3, 3}, {1}, {1}, {1}, 4}, bf16, nhwc, bias_relu));
  // Batch 1 and a spatial dim of 1: descriptors of the same bytes may differ in those strides.
  cases.push_back(make_case("odd_f32_nchw_n1_h1_res_scaled_relu", {{1, 8, 1, 5}, {4, 8, 1, 3}}, f32,
                            nchw, {false, true, 0.5f, relu}));
  cases.push_back(make_case("inplace_odd_f16_nhwc_n1_h1_res_relu", {{1, 8, 1, 5}, {8, 8, 1, 3}},
                            f16, nhwc, residual_relu, true));
  return cases;
}

ConvFusedOperands random_conv_fused_operands(const ConvFusedDesc& desc, std::uint64_t seed) {
  const ConvDesc& conv = desc.conv;
  ConvFusedOperands operands;
  operands.src = random_tensor(conv.src_dims(), conv.dtype, conv.layout, seed ^ 0x5352ull);
  operands.weights = random_tensor(conv.weights_dims(), conv.dtype, conv.layout, seed ^ 0x5745ull);
  if (desc.bias) {
    operands.bias =
        random_tensor(conv.bias_dims(), conv.dtype, Layout::channels_first, seed ^ 0x4249ull);
  }
  if (desc.residual) {
    operands.residual = random_tensor(conv.dst_dims(), conv.dtype, conv.layout, seed ^ 0x5245ull);
  }
  return operands;
}

Tensor host_copy(const Tensor& tensor) {
  Tensor copy_of = Tensor::empty(tensor.dims(), tensor.dtype(),
                                 tensor.layout().value_or(Layout::channels_first));
  copy(tensor, copy_of);
  return copy_of;
}

ConvFusedRun run_conv_fused(Context& context, const ConvFusedDesc& desc,
                            const ConvFusedOperands& operands, bool in_place) {
  ConvFusedRun run;
  const ConvDesc& conv = desc.conv;
  run.dst = in_place ? host_copy(operands.residual)
                     : nan_tensor(conv.dst_dims(), conv.dtype, conv.layout);
  const Tensor* bias = desc.bias ? &operands.bias : nullptr;
  const Tensor* residual = desc.residual ? (in_place ? &run.dst : &operands.residual) : nullptr;
  run.choice =
      conv_fused_fwd(context, desc, operands.src, operands.weights, bias, residual, run.dst);
  return run;
}

std::vector<float> independent_conv_fused(const ConvFusedDesc& desc,
                                          const ConvFusedOperands& operands) {
  ConvDesc wide = desc.conv;
  wide.dtype = DType::f32;
  const auto widen = [&](const Tensor& tensor) {
    return tensor_from(tensor.dims(), DType::f32, wide.layout, tensor.to_f32());
  };
  Context reference(BackendKind::reference);
  Tensor conv_out = Tensor::empty(wide.dst_dims(), DType::f32, wide.layout);
  conv_fwd(reference, wide, widen(operands.src), widen(operands.weights), conv_out);
  const std::vector<float> values = conv_out.to_f32();
  const std::vector<float> bias = desc.bias ? operands.bias.to_f32() : std::vector<float>{};
  const std::vector<float> residual =
      desc.residual ? operands.residual.to_f32() : std::vector<float>{};
  const std::int64_t channels = wide.out_channels;
  const std::int64_t plane = wide.dst_dims().product() / (wide.batch * channels);
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    const auto channel =
        static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % channels);
    if (desc.bias) v += bias[channel];
    if (desc.residual) v += static_cast<double>(desc.residual_scale) * residual[i];
    if (desc.activation == FusedActivation::relu && v < 0) v = 0;
    out[i] = static_cast<float>(v);
  }
  // Round to the dtype the way a stored result would be.
  return tensor_from(wide.dst_dims(), desc.conv.dtype, wide.layout, out).to_f32();
}

std::vector<float> conv_fused_error_scale(const ConvFusedDesc& desc,
                                          const ConvFusedOperands& operands) {
  ConvOperands conv_operands;
  conv_operands.src = operands.src;
  conv_operands.weights = operands.weights;
  std::vector<float> scale = conv_error_scale(desc.conv, Direction::fwd, conv_operands);
  const std::int64_t channels = desc.conv.out_channels;
  const std::int64_t plane = desc.dst_dims().product() / (desc.conv.batch * channels);
  const std::vector<float> bias = desc.bias ? operands.bias.to_f32() : std::vector<float>{};
  const std::vector<float> residual =
      desc.residual ? operands.residual.to_f32() : std::vector<float>{};
  for (std::size_t i = 0; i < scale.size(); ++i) {
    const auto channel =
        static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % channels);
    if (desc.bias) scale[i] += std::fabs(bias[channel]);
    if (desc.residual) scale[i] += std::fabs(desc.residual_scale * residual[i]);
  }
  return scale;
}

// Note [conv_fused tolerances]: convolution's bounds (Note [conv tolerances], tests/support/
// conv.cpp) relative to the scale above. A fused candidate rounds its f32 result once, like the
// reference; an unfused one rounds the convolution to the dtype first (one more unit on at most
// the scale), and oneDNN's scaled residual is rounded to the dtype before its sum post-op (one
// more unit on |residual_scale * residual|). With the reference's rounding that is at most three
// units of the dtype plus the f32 accumulation: inside convolution's four. relu is 1-Lipschitz.
Tolerance conv_fused_tolerance(DType dtype) { return conv_tolerance(dtype); }

std::string conv_fused_context(const ConvFusedDesc& desc, std::string_view candidate,
                               bool in_place) {
  std::ostringstream out;
  out << "conv_fused fwd, candidate " << candidate << (in_place ? " (residual in place)" : "")
      << "\n  desc: " << desc << "\n  repro: " << desc.repro();
  return out.str();
}

}  // namespace dnnx::test
