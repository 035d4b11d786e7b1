// Matrix multiply: MatmulDesc and matmul_fwd / fwd_training / bwd_data / bwd_weights
// (include/dnnx/ops/matmul.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_matmul(nb::module_& module) {
  DescClass<MatmulDesc> desc(module, "MatmulDesc", OpKind::matmul,
                             "dst = act(alpha * op(a) op(b) + beta * dst (+ bias)), batched "
                             "(dnnx::MatmulDesc).");
  desc.field("batch", &MatmulDesc::batch, "independent products")
      .field("m", &MatmulDesc::m, "rows of op(a) and dst")
      .field("n", &MatmulDesc::n, "columns of op(b) and dst")
      .field("k", &MatmulDesc::k, "columns of op(a), rows of op(b)")
      .field("transpose_a", &MatmulDesc::transpose_a, "a is stored k x m")
      .field("transpose_b", &MatmulDesc::transpose_b, "b is stored n x k")
      .field("broadcast_b", &MatmulDesc::broadcast_b, "one b for every product")
      .field("broadcast_a", &MatmulDesc::broadcast_a, "one a for every product")
      .field("bias", &MatmulDesc::bias, "add bias[j] to column j")
      .field("alpha", &MatmulDesc::alpha, "scale of the product")
      .field("beta", &MatmulDesc::beta, "scale of the output's previous contents")
      .enum_field("dtype", &MatmulDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("activation", &MatmulDesc::activation, &parse_matmul_activation,
                  "'none', 'relu' or 'gelu_tanh' (also spelled 'gelu'), applied to the result")
      .shape("a_dims", &MatmulDesc::a_dims, "dims of a")
      .shape("b_dims", &MatmulDesc::b_dims, "dims of b")
      .shape("dst_dims", &MatmulDesc::dst_dims, "dims of dst")
      .shape("bias_dims", &MatmulDesc::bias_dims, "(n,)");
  desc.cls().def("flops", &MatmulDesc::flops);
  desc.cls().def_static(
      "linear",
      [](std::int64_t rows, std::int64_t in, std::int64_t out, bool bias, std::string_view dtype) {
        return MatmulDesc::linear(rows, in, out, bias, parse_dtype(dtype));
      },
      nb::arg("rows"), nb::arg("in_features"), nb::arg("out_features"), nb::arg("bias") = true,
      nb::arg("dtype") = "f32", "A linear layer: dst (rows, out) = src (rows, in) weight^T.");
  bind_selection<MatmulDesc>(module, OpKind::matmul, &matmul_list, &matmul_select, &matmul_profile);
  module.def(
      "matmul_fwd",
      [](Context& context, const MatmulDesc& desc, InArray a, InArray b,
         std::optional<InArray> bias, OutArray dst) {
        const Tensor ta = to_tensor(a, "a"), tb = to_tensor(b, "b");
        Optional tbias(bias, "bias");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        matmul_fwd(context, desc, ta, tb, tbias.or_empty(), d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("a"), nb::arg("b"), nb::arg("bias").none(),
      nb::arg("dst"));
  module.def(
      "matmul_fwd_training",
      [](Context& context, const MatmulDesc& desc, InArray a, InArray b,
         std::optional<InArray> bias, OutArray dst, SavedState& state) {
        const Tensor ta = to_tensor(a, "a"), tb = to_tensor(b, "b");
        Optional tbias(bias, "bias");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        matmul_fwd_training(context, desc, ta, tb, tbias.or_empty(), d, state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("a"), nb::arg("b"), nb::arg("bias").none(),
      nb::arg("dst"), nb::arg("state"));
  module.def(
      "matmul_bwd_data",
      [](Context& context, const MatmulDesc& desc, InArray diff_dst, InArray b, OutArray diff_a,
         const SavedState* state) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst"), tb = to_tensor(b, "b");
        Tensor da = to_tensor(diff_a, "diff_a");
        nb::gil_scoped_release released;
        if (state != nullptr)
          matmul_bwd_data(context, desc, dd, tb, da, *state);
        else
          matmul_bwd_data(context, desc, dd, tb, da);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("b"), nb::arg("diff_a"),
      nb::arg("state").none() = nb::none());
  module.def(
      "matmul_bwd_weights",
      [](Context& context, const MatmulDesc& desc, InArray a, InArray diff_dst, OutArray diff_b,
         std::optional<OutArray> diff_bias, const SavedState* state) {
        const Tensor ta = to_tensor(a, "a"), dd = to_tensor(diff_dst, "diff_dst");
        Tensor db = to_tensor(diff_b, "diff_b");
        Optional dbias(diff_bias, "diff_bias");
        nb::gil_scoped_release released;
        Tensor none;
        if (state != nullptr)
          matmul_bwd_weights(context, desc, ta, dd, db, dbias.present ? dbias.tensor : none,
                             *state);
        else
          matmul_bwd_weights(context, desc, ta, dd, db, dbias.present ? dbias.tensor : none);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("a"), nb::arg("diff_dst"), nb::arg("diff_b"),
      nb::arg("diff_bias").none() = nb::none(), nb::arg("state").none() = nb::none());
}

}  // namespace dnnx::python
