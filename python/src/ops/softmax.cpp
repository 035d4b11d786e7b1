// Softmax / log-softmax: SoftmaxDesc and softmax_fwd / softmax_bwd
// (include/dnnx/ops/softmax.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_softmax(nb::module_& module) {
  DescClass<SoftmaxDesc> desc(module, "SoftmaxDesc", OpKind::softmax,
                              "Softmax or log-softmax over the channels or a whole instance "
                              "(dnnx::SoftmaxDesc).");
  desc.dims("dims", &SoftmaxDesc::dims, "N, C, spatial... (rank 2 to 5)")
      .enum_field("mode", &SoftmaxDesc::mode, &parse_softmax_mode, "'channel' or 'instance'")
      .field("log", &SoftmaxDesc::log, "log-softmax")
      .enum_field("dtype", &SoftmaxDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &SoftmaxDesc::layout, &parse_layout, "'nchw' or 'nhwc'");
  desc.cls().def("axis_size", &SoftmaxDesc::axis_size);
  desc.cls().def("groups", &SoftmaxDesc::groups);
  bind_selection<SoftmaxDesc>(module, OpKind::softmax, &softmax_list, &softmax_select,
                              &softmax_profile);
  module.def(
      "softmax_fwd",
      [](Context& context, const SoftmaxDesc& desc, InArray src, OutArray dst) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        softmax_fwd(context, desc, s, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"));
  module.def(
      "softmax_bwd",
      [](Context& context, const SoftmaxDesc& desc, InArray dst, InArray diff_dst,
         OutArray diff_src) {
        const Tensor d = to_tensor(dst, "dst"), dd = to_tensor(diff_dst, "diff_dst");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        softmax_bwd(context, desc, d, dd, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("dst"), nb::arg("diff_dst"),
      nb::arg("diff_src"));
}

}  // namespace dnnx::python
