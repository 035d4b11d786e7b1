// The fused forward convolution: ConvFusedDesc and conv_fused_fwd
// (include/dnnx/ops/conv_fused.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_conv_fused(nb::module_& module) {
  DescClass<ConvFusedDesc> desc(module, "ConvFusedDesc", OpKind::conv_fused,
                                "act(conv(src, weights) + bias + residual_scale * residual) "
                                "(dnnx::ConvFusedDesc).");
  desc.field("conv", &ConvFusedDesc::conv, "the convolution (a ConvDesc)")
      .field("bias", &ConvFusedDesc::bias, "add a bias of O values")
      .field("residual", &ConvFusedDesc::residual, "add residual_scale * residual")
      .field("residual_scale", &ConvFusedDesc::residual_scale, "scale of the residual")
      .enum_field("activation", &ConvFusedDesc::activation, &parse_fused_activation,
                  "'identity' or 'relu'")
      .shape("src_dims", &ConvFusedDesc::src_dims, "N, C, spatial...")
      .shape("weights_dims", &ConvFusedDesc::weights_dims, "O, C/groups, kernel...")
      .shape("dst_dims", &ConvFusedDesc::dst_dims, "N, O, output spatial...")
      .shape("bias_dims", &ConvFusedDesc::bias_dims, "O")
      .shape("residual_dims", &ConvFusedDesc::residual_dims, "dst's dims");
  bind_selection<ConvFusedDesc>(module, OpKind::conv_fused, &conv_fused_list, &conv_fused_select,
                                &conv_fused_profile);
  module.def(
      "conv_fused_fwd",
      [](Context& context, const ConvFusedDesc& desc, InArray src, InArray weights,
         std::optional<InArray> bias, std::optional<InArray> residual, OutArray dst) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Optional b(bias, "bias"), r(residual, "residual");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        conv_fused_fwd(context, desc, s, w, b.get(), r.get(), d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("weights"),
      nb::arg("bias").none(), nb::arg("residual").none(), nb::arg("dst"));
}

}  // namespace dnnx::python
