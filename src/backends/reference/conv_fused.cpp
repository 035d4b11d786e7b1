// The reference fused convolution, "reference:direct": the oracle of every other backend's fused
// and unfused candidates. Each output element is the convolution sum over its window, in f64,
// plus the bias and the scaled residual, through the activation, rounded once to the dtype.
// It shares no code with the reference convolution (backends/reference/conv.cpp), so that the
// tests can check one against the other.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/conv_fused_args.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::reference {
namespace {


AlgoInfo info_of(const ConvFusedDesc&, Direction) {
  return direct_info("direct loops, epilogue fused (f64 accumulation)",
                     {"direct", "reference", "fused"});
}

ErrorContext context_of(const ConvFusedDesc& desc, std::string implementation) {
  return detail::op_context(BackendKind::reference, desc, Direction::fwd, std::move(implementation));
}

// Reads a host tensor of `dims` and `dtype` in logical (row-major N, C, ...) order.
std::vector<float> logical_values(const Tensor* tensor, const char* role, const Dims& dims,
                                  DType dtype, const ErrorContext& context) {
  return host_tensor(tensor, role, dims, dtype, context).to_f32();
}

class DirectPlan final : public detail::LayerPlanBase<detail::ConvFusedArgs> {
 public:
  DirectPlan(const ConvFusedDesc& desc, Direction /*fwd*/)
      : LayerPlanBase(info_of(desc, Direction::fwd), context_of(desc, direct_id)), desc_(desc) {}

  void execute(const detail::ConvFusedArgs& args, detail::Workspace) override {
    const ConvDesc& conv = desc_.conv;
    const DType dtype = conv.dtype;
    // Every input is read before dst is written, so a residual that is dst itself is fine.
    const std::vector<float> src =
        logical_values(args.src, "src", conv.src_dims(), dtype, context_);
    const std::vector<float> weights =
        logical_values(args.weights, "weights", conv.weights_dims(), dtype, context_);
    std::vector<float> bias;
    if (desc_.bias) bias = logical_values(args.bias, "bias", conv.bias_dims(), dtype, context_);
    std::vector<float> residual;
    if (desc_.residual) {
      residual = logical_values(args.residual, "residual", conv.dst_dims(), dtype, context_);
    }
    Tensor& dst = host_tensor(args.dst, "dst", conv.dst_dims(), dtype, context_);

    // Sizes with 3 spatial dims; 1-D and 2-D convolutions have leading dims of size 1, kernel 1,
    // stride 1, dilation 1, no padding (their row-major offsets are unchanged).
    const int missing = 3 - conv.spatial_dims;
    std::array<std::int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1},
        dilation{1, 1, 1}, pad{0, 0, 0};
    for (int i = 0; i < conv.spatial_dims; ++i) {
      const auto s = static_cast<std::size_t>(i);
      const int shifted = i + missing;
      const auto d = static_cast<std::size_t>(shifted);
      in[d] = conv.input[s];
      out[d] = conv.output_size(i);
      kernel[d] = conv.kernel[s];
      stride[d] = conv.stride[s];
      dilation[d] = conv.dilation[s];
      pad[d] = conv.pad_before[s];
    }
    const std::int64_t in_per_group = conv.in_channels / conv.groups;
    const std::int64_t out_per_group = conv.out_channels / conv.groups;
    const std::int64_t out_plane = out[0] * out[1] * out[2];

    std::vector<float> result(static_cast<std::size_t>(dst.numel()));
    std::size_t flat = 0;  // logical index of dst: n, oc, od, oh, ow
    for (std::int64_t n = 0; n < conv.batch; ++n) {
      for (std::int64_t oc = 0; oc < conv.out_channels; ++oc) {
        const std::int64_t group = oc / out_per_group;
        for (std::int64_t o = 0; o < out_plane; ++o, ++flat) {
          const std::array<std::int64_t, 3> position{o / (out[1] * out[2]), o / out[2] % out[1],
                                                     o % out[2]};
          double sum = 0.0;
          for (std::int64_t icg = 0; icg < in_per_group; ++icg) {
            const std::int64_t ic = group * in_per_group + icg;
            for (std::int64_t kd = 0; kd < kernel[0]; ++kd) {
              const std::int64_t id = position[0] * stride[0] - pad[0] + kd * dilation[0];
              if (id < 0 || id >= in[0]) continue;
              for (std::int64_t kh = 0; kh < kernel[1]; ++kh) {
                const std::int64_t ih = position[1] * stride[1] - pad[1] + kh * dilation[1];
                if (ih < 0 || ih >= in[1]) continue;
                for (std::int64_t kw = 0; kw < kernel[2]; ++kw) {
                  const std::int64_t iw = position[2] * stride[2] - pad[2] + kw * dilation[2];
                  if (iw < 0 || iw >= in[2]) continue;
                  const std::int64_t x =
                      (((n * conv.in_channels + ic) * in[0] + id) * in[1] + ih) * in[2] + iw;
                  const std::int64_t w =
                      (((oc * in_per_group + icg) * kernel[0] + kd) * kernel[1] + kh) * kernel[2] +
                      kw;
                  // Products of two f32 values are exact in f64.
                  sum += static_cast<double>(src[static_cast<std::size_t>(x)]) *
                         static_cast<double>(weights[static_cast<std::size_t>(w)]);
                }
              }
            }
          }
          if (desc_.bias) sum += bias[static_cast<std::size_t>(oc)];
          if (desc_.residual) {
            sum += static_cast<double>(desc_.residual_scale) * residual[flat];
          }
          if (desc_.activation == FusedActivation::relu) sum = std::max(sum, 0.0);
          result[flat] = dtype == DType::f32 ? static_cast<float>(sum) : detail::round_to_odd(sum);
        }
      }
    }
    // copy_from_f32 rounds f32 to the dtype to nearest even: with the round-to-odd above, the
    // f64 value is rounded once.
    dst.copy_from_f32(result);
  }

 private:
  ConvFusedDesc desc_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv_fused>> make_conv_fused_backend(const detail::OpBackends&) {
  return DirectBackend<ConvFusedDesc, detail::ConvFusedArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
