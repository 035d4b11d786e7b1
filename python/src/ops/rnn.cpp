// Recurrent layers: RnnDesc and rnn_fwd / fwd_training / bwd_data / bwd_weights
// (include/dnnx/ops/rnn.hpp).

#include "bindings.hpp"

namespace dnnx::python {
namespace {

RnnWeight parse_rnn_weight(std::string_view text) {
  if (text == "w_ih" || text == "weight_ih") return RnnWeight::w_ih;
  if (text == "w_hh" || text == "weight_hh") return RnnWeight::w_hh;
  if (text == "b_ih" || text == "bias_ih") return RnnWeight::b_ih;
  if (text == "b_hh" || text == "bias_hh") return RnnWeight::b_hh;
  throw Error(ErrorKind::InvalidArgument,
              "rnn: weight '" + std::string(text) + "' must be one of w_ih, w_hh, b_ih, b_hh");
}

/// The optional arrays of a call, as tensors (null pointers for the ones not given).
template <typename Array>
using Maybe = std::optional<Array>;

}  // namespace

void bind_rnn(nb::module_& module) {
  DescClass<RnnDesc> desc(module, "RnnDesc", OpKind::rnn,
                          "Recurrent layers as torch.nn.RNN / LSTM / GRU compute them "
                          "(dnnx::RnnDesc).");
  desc.enum_field("cell", &RnnDesc::cell, &parse_rnn_cell,
                  "'rnn_relu', 'rnn_tanh', 'lstm' or 'gru' (also 'relu', 'tanh')")
      .field("seq_length", &RnnDesc::seq_length, "T: the padded length")
      .field("batch", &RnnDesc::batch, "N: sequences")
      .field("input_size", &RnnDesc::input_size, "features of src")
      .field("hidden_size", &RnnDesc::hidden_size, "H")
      .field("layers", &RnnDesc::layers, "stacked layers")
      .field("bidirectional", &RnnDesc::bidirectional, "a reverse direction per layer")
      .field("bias", &RnnDesc::bias, "b_ih and b_hh in every layer and direction")
      .field("batch_first", &RnnDesc::batch_first, "src and dst are (N, T, C)")
      .field("variable_lengths", &RnnDesc::variable_lengths, "calls pass per-sequence lengths")
      .field("dropout", &RnnDesc::dropout, "between layers in training forwards, in [0, 1)")
      .enum_field("dtype", &RnnDesc::dtype, &parse_dtype, "'f32', 'f16' or 'bf16'")
      .shape("src_dims", &RnnDesc::src_dims, "dims of src")
      .shape("dst_dims", &RnnDesc::dst_dims, "dims of dst")
      .shape("state_dims", &RnnDesc::state_dims, "dims of hx, hy, cx, cy");
  desc.cls()
      .def("directions", &RnnDesc::directions, "1, or 2 when bidirectional.")
      .def("gates", &RnnDesc::gates, "Gates per cell: 1 (rnn), 4 (lstm), 3 (gru).")
      .def("layer_input_size", &RnnDesc::layer_input_size, nb::arg("layer"),
           "Features of a layer's input: input_size for layer 0, D * H above.")
      .def("weights_count", &RnnDesc::weights_count, "Elements of the flat weights.")
      .def("dropout_draws", &RnnDesc::dropout_draws, "Elements a training forward's dropout draws.")
      .def(
          "weight_offset",
          [](const RnnDesc& desc, std::int64_t layer, std::int64_t direction,
             std::string_view which) {
            return desc.weight_offset(layer, direction, parse_rnn_weight(which));
          },
          nb::arg("layer"), nb::arg("direction"), nb::arg("which"),
          "Where matrix `which` ('w_ih', 'w_hh', 'b_ih', 'b_hh') of (layer, direction) starts "
          "in the flat weights.")
      .def(
          "weight_dims",
          [](const RnnDesc& desc, std::int64_t layer, std::int64_t direction,
             std::string_view which) {
            return dims_tuple(desc.weight_dims(layer, direction, parse_rnn_weight(which)));
          },
          nb::arg("layer"), nb::arg("direction"), nb::arg("which"),
          "The dims of matrix `which` of (layer, direction).");
  bind_selection<RnnDesc>(module, OpKind::rnn, &rnn_list, &rnn_select, &rnn_profile);

  module.def(
      "rnn_fwd",
      [](Context& context, const RnnDesc& desc, InArray src, InArray weights, Maybe<InArray> hx,
         Maybe<InArray> cx, Maybe<InArray> lengths, OutArray dst, Maybe<OutArray> hy,
         Maybe<OutArray> cy, std::uint64_t weights_version) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Optional thx(hx, "hx"), tcx(cx, "cx"), tlengths(lengths, "lengths");
        Tensor d = to_tensor(dst, "dst");
        Optional thy(hy, "hy"), tcy(cy, "cy");
        nb::gil_scoped_release released;
        rnn_fwd(context, desc,
                RnnForward{&s, &w, thx.get(), tcx.get(), tlengths.get(), &d, thy.get(), tcy.get(),
                           weights_version});
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("weights"), nb::arg("hx").none(),
      nb::arg("cx").none(), nb::arg("lengths").none(), nb::arg("dst"), nb::arg("hy").none(),
      nb::arg("cy").none(), nb::arg("weights_version") = 0);
  module.def(
      "rnn_fwd_training",
      [](Context& context, const RnnDesc& desc, Generator& generator, InArray src, InArray weights,
         Maybe<InArray> hx, Maybe<InArray> cx, Maybe<InArray> lengths, OutArray dst,
         Maybe<OutArray> hy, Maybe<OutArray> cy, SavedState& state, std::uint64_t weights_version) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Optional thx(hx, "hx"), tcx(cx, "cx"), tlengths(lengths, "lengths");
        Tensor d = to_tensor(dst, "dst");
        Optional thy(hy, "hy"), tcy(cy, "cy");
        nb::gil_scoped_release released;
        rnn_fwd_training(context, desc, generator,
                         RnnForward{&s, &w, thx.get(), tcx.get(), tlengths.get(), &d, thy.get(),
                                    tcy.get(), weights_version},
                         state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("generator"), nb::arg("src"), nb::arg("weights"),
      nb::arg("hx").none(), nb::arg("cx").none(), nb::arg("lengths").none(), nb::arg("dst"),
      nb::arg("hy").none(), nb::arg("cy").none(), nb::arg("state"), nb::arg("weights_version") = 0);
  module.def(
      "rnn_bwd_data",
      [](Context& context, const RnnDesc& desc, InArray src, InArray weights, Maybe<InArray> hx,
         Maybe<InArray> cx, Maybe<InArray> lengths, InArray dst, InArray diff_dst,
         Maybe<InArray> diff_hy, Maybe<InArray> diff_cy, OutArray diff_src, Maybe<OutArray> diff_hx,
         Maybe<OutArray> diff_cx, SavedState& state, std::uint64_t weights_version) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Optional thx(hx, "hx"), tcx(cx, "cx"), tlengths(lengths, "lengths");
        const Tensor d = to_tensor(dst, "dst"), dd = to_tensor(diff_dst, "diff_dst");
        Optional tdhy(diff_hy, "diff_hy"), tdcy(diff_cy, "diff_cy");
        Tensor ds = to_tensor(diff_src, "diff_src");
        Optional tdhx(diff_hx, "diff_hx"), tdcx(diff_cx, "diff_cx");
        nb::gil_scoped_release released;
        rnn_bwd_data(
            context, desc,
            RnnBackwardData{&s, &w, thx.get(), tcx.get(), tlengths.get(), &d, &dd, tdhy.get(),
                            tdcy.get(), &ds, tdhx.get(), tdcx.get(), weights_version},
            state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("weights"), nb::arg("hx").none(),
      nb::arg("cx").none(), nb::arg("lengths").none(), nb::arg("dst"), nb::arg("diff_dst"),
      nb::arg("diff_hy").none(), nb::arg("diff_cy").none(), nb::arg("diff_src"),
      nb::arg("diff_hx").none(), nb::arg("diff_cx").none(), nb::arg("state"),
      nb::arg("weights_version") = 0);
  module.def(
      "rnn_bwd_weights",
      [](Context& context, const RnnDesc& desc, InArray src, InArray weights, Maybe<InArray> hx,
         Maybe<InArray> cx, Maybe<InArray> lengths, InArray dst, OutArray diff_weights,
         bool accumulate, SavedState& state) {
        const Tensor s = to_tensor(src, "src"), w = to_tensor(weights, "weights");
        Optional thx(hx, "hx"), tcx(cx, "cx"), tlengths(lengths, "lengths");
        const Tensor d = to_tensor(dst, "dst");
        Tensor dw = to_tensor(diff_weights, "diff_weights");
        nb::gil_scoped_release released;
        rnn_bwd_weights(
            context, desc,
            RnnBackwardWeights{&s, &w, thx.get(), tcx.get(), tlengths.get(), &d, &dw, accumulate},
            state);
      },
      nb::arg("context"), nb::arg("desc"), nb::arg("src"), nb::arg("weights"), nb::arg("hx").none(),
      nb::arg("cx").none(), nb::arg("lengths").none(), nb::arg("dst"), nb::arg("diff_weights"),
      nb::arg("accumulate"), nb::arg("state"));
}

}  // namespace dnnx::python
