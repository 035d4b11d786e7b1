// Activations: ActivationDesc and activation_fwd / activation_bwd
// (include/dnnx/ops/activation.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_activation(nb::module_& module) {
  DescClass<ActivationDesc> desc(module, "ActivationDesc", OpKind::activation,
                                 "An elementwise activation (dnnx::ActivationDesc).");
  desc.enum_field("kind", &ActivationDesc::kind, &parse_activation_kind,
                  "'identity', 'relu', 'clipped_relu', 'tanh', 'sigmoid', 'elu' or 'swish'")
      .field("alpha", &ActivationDesc::alpha, "elu: scale of the negative branch")
      .field("ceiling", &ActivationDesc::ceiling, "clipped_relu: the upper clip")
      .dims("dims", &ActivationDesc::dims, "logical dims of src and dst (rank 1 to 5)")
      .enum_field("dtype", &ActivationDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &ActivationDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .enum_field("saved", &ActivationDesc::saved, &parse_activation_saved,
                  "what the backward is given: 'src_and_dst', 'dst' or 'src'");
  desc.cls().def("numel", &ActivationDesc::numel);
  desc.cls().def("bwd_computable", &ActivationDesc::bwd_computable);
  bind_selection<ActivationDesc>(module, OpKind::activation, &activation_list, &activation_select,
                                 &activation_profile);
  module.def(
      "activation_fwd",
      [](Context& context, const ActivationDesc& desc, InArray src, OutArray dst) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        activation_fwd(context, desc, s, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"));
  module.def(
      "activation_bwd",
      [](Context& context, const ActivationDesc& desc, std::optional<InArray> src,
         std::optional<InArray> dst, InArray diff_dst, OutArray diff_src) {
        Optional s(src, "src"), d(dst, "dst");
        const Tensor dd = to_tensor(diff_dst, "diff_dst");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        activation_bwd(context, desc, s.get(), d.get(), dd, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src").none(), nb::arg("dst").none(),
      nb::arg("diff_dst"), nb::arg("diff_src"));
}

}  // namespace dnnx::python
