// Dropout: DropoutDesc, the SavedState its training forward fills, and dropout_fwd /
// dropout_fwd_training / dropout_bwd (include/dnnx/ops/dropout.hpp).

#include "bindings.hpp"

namespace dnnx::python {

void bind_dropout(nb::module_& module) {
  nb::class_<SavedState>(module, "SavedState",
                         "What a training forward keeps for its backward (dnnx::SavedState): "
                         "filled by the forward, read by the backward of the same desc.")
      .def(nb::init<>())
      .def_prop_ro("empty", &SavedState::empty, "True until a forward has filled it.")
      .def_prop_ro("op", [](const SavedState& state) { return std::string(to_string(state.op())); })
      .def_prop_ro(
          "direction",
          [](const SavedState& state) { return std::string(to_string(state.direction())); })
      .def_prop_ro("desc", &SavedState::desc, "The key() of the forward's desc.")
      .def_prop_ro("producer", &SavedState::producer, "The id of the candidate that filled it.")
      .def_prop_ro("format", &SavedState::format)
      .def_prop_ro("bytes", &SavedState::bytes)
      .def("__repr__", [](const SavedState& state) {
        if (state.empty()) return std::string("SavedState(empty)");
        return "SavedState(op=" + std::string(to_string(state.op())) +
               ", producer=" + state.producer() + ", bytes=" + std::to_string(state.bytes()) + ")";
      });

  DescClass<DropoutDesc> desc(module, "DropoutDesc", OpKind::dropout,
                              "Dropout, training or inference (dnnx::DropoutDesc).");
  desc.dims("dims", &DropoutDesc::dims, "rank 1 to 5")
      .field("p", &DropoutDesc::p, "probability of dropping an element, in [0, 1]")
      .enum_field("dtype", &DropoutDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .enum_field("layout", &DropoutDesc::layout, &parse_layout, "'nchw' or 'nhwc'")
      .field("reproducible", &DropoutDesc::reproducible,
             "the mask is dnnx's Philox stream (False also admits cuDNN's own dropout)");
  desc.cls().def("scale", &DropoutDesc::scale, "1 / (1 - p) in f32 (0 when p = 1).");
  bind_selection<DropoutDesc>(module, OpKind::dropout, &dropout_list, &dropout_select,
                              &dropout_profile);
  module.def(
      "dropout_fwd",
      [](Context& context, const DropoutDesc& desc, InArray src, OutArray dst) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        dropout_fwd(context, desc, s, d);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("dst"));
  module.def(
      "dropout_fwd_training",
      [](Context& context, const DropoutDesc& desc, Generator& generator, InArray src, OutArray dst,
         SavedState& state) {
        const Tensor s = to_tensor(src, "src");
        Tensor d = to_tensor(dst, "dst");
        nb::gil_scoped_release released;
        dropout_fwd_training(context, desc, generator, s, d, state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("generator"), nb::arg("src"), nb::arg("dst"),
      nb::arg("state"));
  module.def(
      "dropout_bwd",
      [](Context& context, const DropoutDesc& desc, InArray diff_dst, OutArray diff_src,
         const SavedState& state) {
        const Tensor dd = to_tensor(diff_dst, "diff_dst");
        Tensor ds = to_tensor(diff_src, "diff_src");
        nb::gil_scoped_release released;
        dropout_bwd(context, desc, dd, ds, state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("diff_dst"), nb::arg("diff_src"),
      nb::arg("state"));
}

}  // namespace dnnx::python
