// Convolution: ConvDesc and conv_fwd / bwd_data / bwd_weights / bias (include/dnnx/ops/conv.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_conv(nb::module_& module) {
  DescClass<ConvDesc> desc(module, "ConvDesc", OpKind::conv,
                           "What a convolution computes (dnnx::ConvDesc); cross-correlation as "
                           "PyTorch's conv1d/2d/3d.");
  desc.field("spatial_dims", &ConvDesc::spatial_dims, "1, 2 or 3")
      .field("batch", &ConvDesc::batch, "N")
      .field("in_channels", &ConvDesc::in_channels, "C of src")
      .field("out_channels", &ConvDesc::out_channels, "C of dst (O of weights)")
      .field("groups", &ConvDesc::groups, "channel groups")
      .spatial("input", &ConvDesc::input, "src spatial sizes (D, H, W order)")
      .spatial("kernel", &ConvDesc::kernel, "weights spatial sizes")
      .spatial("stride", &ConvDesc::stride, "strides")
      .spatial("pad_before", &ConvDesc::pad_before, "zero padding before each spatial dim")
      .spatial("pad_after", &ConvDesc::pad_after, "zero padding after each spatial dim")
      .spatial("dilation", &ConvDesc::dilation, "1 = dense kernel")
      .enum_field("dtype", &ConvDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &ConvDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .shape("src_dims", &ConvDesc::src_dims, "N, C, spatial...")
      .shape("weights_dims", &ConvDesc::weights_dims, "O, C/groups, kernel...")
      .shape("dst_dims", &ConvDesc::dst_dims, "N, O, output spatial...")
      .shape("bias_dims", &ConvDesc::bias_dims, "O");
  desc.cls().def("macs", &ConvDesc::macs, "Multiply-accumulates of one direction.");
  desc.cls().def_static(
      "from_shapes",
      [](nb::handle src, nb::handle weights, nb::handle stride, nb::handle pad, nb::handle dilation,
         std::int64_t groups, std::string_view dtype, std::string_view layout) {
        return ConvDesc::from_shapes(
            dims_from_python(src, "src"), dims_from_python(weights, "weights"),
            ints_from_python(stride, "stride"), ints_from_python(pad, "pad"),
            ints_from_python(dilation, "dilation"), groups, parse_dtype(dtype),
            parse_layout(layout));
      },
      nb::arg("src"), nb::arg("weights"), nb::arg("stride") = 1, nb::arg("pad") = 0,
      nb::arg("dilation") = 1, nb::arg("groups") = 1, nb::arg("dtype") = "f32",
      nb::arg("layout") = "nchw",
      "From PyTorch-style shapes: src N,C,spatial...; weights O,C/groups,kernel...");
  bind_selection<ConvDesc>(module, OpKind::conv, &conv_list, &conv_select, &conv_profile);

  module.def(
      "conv_fwd",
      [](Context& context, const ConvDesc& desc, InArray src, InArray weights, OutArray dst,
         std::optional<InArray> bias) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Tensor d = to_tensor(dst, "dst");
        Optional b(bias, "bias");
        nb::gil_scoped_release released;
        conv_fwd(context, desc, s, w, d, b.get());
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("weights"), nb::arg("dst"),
      nb::arg("bias").none() = nb::none());
  module.def(
      "conv_bwd_data",
      [](Context& context, const ConvDesc& desc, InArray diff_dst, InArray weights,
         OutArray diff_src) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst"), w = to_tensor(weights, "weights");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        conv_bwd_data(context, desc, dd, w, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("weights"),
      nb::arg("diff_src"));
  module.def(
      "conv_bwd_weights",
      [](Context& context, const ConvDesc& desc, InArray src, InArray diff_dst,
         OutArray diff_weights, std::optional<OutArray> diff_bias) {
        const Tensor s = to_tensor(src, "src"), dd = to_tensor(diff_dst, "diff_dst");
        Tensor dw = to_tensor(diff_weights, "diff_weights");
        Optional db(diff_bias, "diff_bias");
        nb::gil_scoped_release released;
        conv_bwd_weights(context, desc, s, dd, dw, db.get());
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("diff_dst"),
      nb::arg("diff_weights"), nb::arg("diff_bias").none() = nb::none());
  module.def(
      "conv_bias_fwd",
      [](Context& context, const ConvDesc& desc, InArray bias, OutArray dst) {
        const Tensor b = to_tensor(bias, "bias");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        conv_bias_fwd(context, desc, b, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("bias"), nb::arg("dst"));
  module.def(
      "conv_bias_bwd",
      [](Context& context, const ConvDesc& desc, InArray diff_dst, OutArray diff_bias) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst");
        Tensor db = to_tensor(diff_bias, "diff_bias");
        nb::gil_scoped_release released;
        conv_bias_bwd(context, desc, dd, db);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("diff_bias"));
}

}  // namespace dnnx::python
