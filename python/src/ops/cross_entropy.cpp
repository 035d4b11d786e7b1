// Cross-entropy: CrossEntropyDesc and cross_entropy_fwd / cross_entropy_bwd
// (include/dnnx/ops/cross_entropy.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_cross_entropy(nb::module_& module) {
  DescClass<CrossEntropyDesc> desc(module, "CrossEntropyDesc", OpKind::cross_entropy,
                                   "Log-softmax over the channels and the negative "
                                   "log-likelihood of each label (dnnx::CrossEntropyDesc).");
  desc.dims("dims", &CrossEntropyDesc::dims, "logits: N, C, spatial... (rank 2 to 5)")
      .enum_field("reduction", &CrossEntropyDesc::reduction, &parse_reduction,
                  "'none', 'mean' or 'sum'")
      .field("ignore_index", &CrossEntropyDesc::ignore_index,
             "label that marks an ignored position")
      .field("weighted", &CrossEntropyDesc::weighted, "per-class weights are given")
      .enum_field("label_dtype", &CrossEntropyDesc::label_dtype, &parse_dtype, "'i32' or 'i64'")
      .enum_field("dtype", &CrossEntropyDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &CrossEntropyDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .shape("labels_dims", &CrossEntropyDesc::labels_dims, "N, spatial...")
      .shape("loss_dims", &CrossEntropyDesc::loss_dims, "labels_dims() for none, (1,) otherwise")
      .shape("weights_dims", &CrossEntropyDesc::weights_dims, "(C,)");
  desc.cls().def("classes", &CrossEntropyDesc::classes);
  desc.cls().def("positions", &CrossEntropyDesc::positions);
  bind_selection<CrossEntropyDesc>(module, OpKind::cross_entropy, &cross_entropy_list,
                                   &cross_entropy_select, &cross_entropy_profile);
  module.def(
      "cross_entropy_fwd",
      [](Context& context, const CrossEntropyDesc& desc, InArray logits, InArray labels,
         std::optional<InArray> weights, OutArray loss) {
        const Tensor x = to_tensor(logits, "logits"), y = to_tensor(labels, "labels");
        Optional w(weights, "weights");
        Tensor l = to_tensor(loss, "loss");
        nb::gil_scoped_release released;
        cross_entropy_fwd(context, desc, x, y, w.get(), l);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("logits"), nb::arg("labels"),
      nb::arg("weights").none(), nb::arg("loss"));
  module.def(
      "cross_entropy_bwd",
      [](Context& context, const CrossEntropyDesc& desc, InArray logits, InArray labels,
         std::optional<InArray> weights, InArray diff_loss, OutArray diff_logits) {
        const Tensor x = to_tensor(logits, "logits"), y = to_tensor(labels, "labels"),
                     dl = to_tensor(diff_loss, "diff_loss");
        Optional w(weights, "weights");
        Tensor dx = to_tensor(diff_logits, "diff_logits");
        nb::gil_scoped_release released;
        cross_entropy_bwd(context, desc, x, y, w.get(), dl, dx);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("logits"), nb::arg("labels"),
      nb::arg("weights").none(), nb::arg("diff_loss"), nb::arg("diff_logits"));
}

}  // namespace dnnx::python
