// Pooling: PoolDesc and pool_fwd / pool_bwd, with and without indices
// (include/dnnx/ops/pool.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_pool(nb::module_& module) {
  DescClass<PoolDesc> desc(module, "PoolDesc", OpKind::pool,
                           "What a pooling computes (dnnx::PoolDesc): max or average windows, "
                           "padding, dilation, ceil mode, argmax indices.");
  desc.field("spatial_dims", &PoolDesc::spatial_dims, "1, 2 or 3")
      .field("batch", &PoolDesc::batch, "N")
      .field("channels", &PoolDesc::channels, "C")
      .spatial("input", &PoolDesc::input, "src spatial sizes (D, H, W order)")
      .spatial("kernel", &PoolDesc::kernel, "window sizes")
      .spatial("stride", &PoolDesc::stride, "window steps")
      .spatial("pad_before", &PoolDesc::pad_before, "implicit padding before each spatial dim")
      .spatial("pad_after", &PoolDesc::pad_after, "implicit padding after each spatial dim")
      .spatial("dilation", &PoolDesc::dilation, "distance between a window's positions")
      .field("ceil_mode", &PoolDesc::ceil_mode, "round the output size up")
      .enum_field("mode", &PoolDesc::mode, &parse_pool_mode,
                  "'max', 'avg_include_pad' or 'avg_exclude_pad'")
      .field("indices", &PoolDesc::indices, "max pooling that saves argmax indices")
      .enum_field("dtype", &PoolDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &PoolDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .shape("src_dims", &PoolDesc::src_dims, "N, C, input...")
      .shape("dst_dims", &PoolDesc::dst_dims, "N, C, output...");
  desc.cls().def_static(
      "from_shapes",
      [](nb::handle src, nb::handle kernel, nb::handle stride, nb::handle pad, nb::handle dilation,
         std::string_view mode, bool ceil_mode, std::string_view dtype, std::string_view layout) {
        std::vector<std::int64_t> strides;
        if (!stride.is_none()) strides = ints_from_python(stride, "stride");
        return PoolDesc::from_shapes(
            dims_from_python(src, "src"), ints_from_python(kernel, "kernel"), strides,
            ints_from_python(pad, "pad"), ints_from_python(dilation, "dilation"),
            parse_pool_mode(mode), ceil_mode, parse_dtype(dtype), parse_layout(layout));
      },
      nb::arg("src"), nb::arg("kernel"), nb::arg("stride").none() = nb::none(), nb::arg("pad") = 0,
      nb::arg("dilation") = 1, nb::arg("mode") = "max", nb::arg("ceil_mode") = false,
      nb::arg("dtype") = "f32", nb::arg("layout") = "nchw",
      "From a PyTorch-style src shape; stride None = the kernel size.");
  bind_selection<PoolDesc>(module, OpKind::pool, &pool_list, &pool_select, &pool_profile);
  module.def(
      "pool_fwd",
      [](Context& context, const PoolDesc& desc, InArray src, OutArray dst,
         std::optional<OutArray> indices) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        Optional i(indices, "indices");
        nb::gil_scoped_release released;
        if (i.present)
          pool_fwd(context, desc, s, d, i.tensor);
        else
          pool_fwd(context, desc, s, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"),
      nb::arg("indices").none() = nb::none());
  module.def(
      "pool_bwd",
      [](Context& context, const PoolDesc& desc, InArray src, InArray dst, InArray diff_dst,
         OutArray diff_src) {
        const Tensor s = to_tensor(src, "src"), d = to_tensor(dst, "dst"),
                     dd = to_tensor(diff_dst, "diff_dst");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        pool_bwd(context, desc, s, d, dd, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"), nb::arg("diff_dst"),
      nb::arg("diff_src"));
  module.def(
      "pool_bwd_indices",
      [](Context& context, const PoolDesc& desc, InArray diff_dst, InArray indices,
         OutArray diff_src) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst"), i = to_tensor(indices, "indices");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        pool_bwd(context, desc, dd, i, ds);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("indices"),
      nb::arg("diff_src"));
}

}  // namespace dnnx::python
