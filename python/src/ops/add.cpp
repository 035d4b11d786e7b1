// Broadcasting tensor add: AddDesc and add_fwd / add_bwd (include/dnnx/ops/add.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_add(nb::module_& module) {
  DescClass<AddDesc> desc(module, "AddDesc", OpKind::add,
                          "dst = alpha * broadcast(src) + beta * dst (dnnx::AddDesc).");
  desc.dims("src_dims", &AddDesc::src_dims, "each equal to dst's or 1 (broadcast), same rank")
      .dims("dst_dims", &AddDesc::dst_dims, "N, C, spatial... (rank 1 to 5)")
      .field("alpha", &AddDesc::alpha, "scale of src")
      .field("beta", &AddDesc::beta, "scale of dst's previous contents (0: not read)")
      .enum_field("dtype", &AddDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &AddDesc::layout, &parse_layout, "'nchw' or 'nhwc'");
  desc.cls().def("reduction_size", &AddDesc::reduction_size);
  bind_selection<AddDesc>(module, OpKind::add, &add_list, &add_select, &add_profile);
  module.def(
      "add_fwd",
      [](Context& context, const AddDesc& desc, InArray src, OutArray dst) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        add_fwd(context, desc, s, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"));
  module.def(
      "add_bwd",
      [](Context& context, const AddDesc& desc, InArray diff_dst, OutArray diff_src) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        add_bwd(context, desc, dd, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("diff_src"));
}

}  // namespace dnnx::python
