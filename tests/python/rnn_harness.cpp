// The reference recurrent layer as a subprocess for tests/python/torch_rnn_parity.py:
//
//   rnn_harness CASE_DIR
//
// reads CASE_DIR/case.json ({"cell": "rnn_relu" | "rnn_tanh" | "lstm" | "gru", "seq", "batch",
// "input", "hidden", "layers": integers, "bidirectional", "bias", "batch_first": booleans,
// "lengths": null or one integer per sequence}) and the float32 .npy inputs src, weights, hx,
// diff_dst, diff_hy (and cx, diff_cy for lstm), each as RnnDesc's dims say; runs the training
// forward, the backward w.r.t. the data and the backward w.r.t. the weights (overwriting, then
// accumulating onto weights.npy's values: diff_weights_acc) on the reference backend in f32 and
// writes dst, hy, diff_src, diff_hx, diff_weights, diff_weights_acc (and cy, diff_cx) .npy next to
// them. Exit 0 on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>

#include "harness_common.hpp"

#include <cstdint>
#include <vector>

namespace {

using dnnx::test::harness::load;
using dnnx::test::harness::save;
using dnnx::test::harness::fs::path;

void run(const path& dir) {
  const nlohmann::json json = dnnx::test::harness::read_json(dir / "case.json");
  dnnx::RnnDesc d;
  d.cell = dnnx::parse_rnn_cell(json.at("cell").get<std::string>());
  d.seq_length = json.at("seq").get<std::int64_t>();
  d.batch = json.at("batch").get<std::int64_t>();
  d.input_size = json.at("input").get<std::int64_t>();
  d.hidden_size = json.at("hidden").get<std::int64_t>();
  d.layers = json.at("layers").get<std::int64_t>();
  d.bidirectional = json.at("bidirectional").get<bool>();
  d.bias = json.at("bias").get<bool>();
  d.batch_first = json.at("batch_first").get<bool>();
  d.variable_lengths = !json.at("lengths").is_null();
  d.validate();
  const bool lstm = d.cell == dnnx::RnnCell::lstm;
  const dnnx::Layout rows = dnnx::Layout::channels_first;
  const dnnx::Dims state = d.state_dims();
  const dnnx::Tensor src = load(dir, "src.npy", d.src_dims(), rows);
  const dnnx::Tensor weights = load(dir, "weights.npy", dnnx::Dims{d.weights_count()}, rows);
  const dnnx::Tensor hx = load(dir, "hx.npy", state, rows);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", d.dst_dims(), rows);
  const dnnx::Tensor diff_hy = load(dir, "diff_hy.npy", state, rows);
  const dnnx::Tensor cx = lstm ? load(dir, "cx.npy", state, rows) : dnnx::Tensor();
  const dnnx::Tensor diff_cy = lstm ? load(dir, "diff_cy.npy", state, rows) : dnnx::Tensor();
  dnnx::Tensor lengths;
  if (d.variable_lengths) {
    const auto values = json.at("lengths").get<std::vector<std::int32_t>>();
    lengths = dnnx::Tensor::empty(dnnx::Dims{d.batch}, dnnx::DType::i32);
    for (std::size_t n = 0; n < values.size() && n < static_cast<std::size_t>(d.batch); ++n)
      static_cast<std::int32_t*>(lengths.data())[n] = values[n];
  }
  dnnx::Tensor dst = dnnx::Tensor::empty(d.dst_dims(), d.dtype);
  dnnx::Tensor hy = dnnx::Tensor::empty(state, d.dtype);
  dnnx::Tensor cy = lstm ? dnnx::Tensor::empty(state, d.dtype) : dnnx::Tensor();
  dnnx::Tensor diff_src = dnnx::Tensor::empty(d.src_dims(), d.dtype);
  dnnx::Tensor diff_hx = dnnx::Tensor::empty(state, d.dtype);
  dnnx::Tensor diff_cx = lstm ? dnnx::Tensor::empty(state, d.dtype) : dnnx::Tensor();
  dnnx::Tensor diff_weights = dnnx::Tensor::empty(dnnx::Dims{d.weights_count()}, d.dtype);
  dnnx::Tensor diff_weights_acc = load(dir, "weights.npy", dnnx::Dims{d.weights_count()}, rows);

  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::Generator generator;
  dnnx::SavedState saved;
  const dnnx::Tensor* lengths_arg = d.variable_lengths ? &lengths : nullptr;
  dnnx::RnnForward fwd{&src,        &weights, &hx, lstm ? &cx : nullptr,
                       lengths_arg, &dst,     &hy, lstm ? &cy : nullptr};
  dnnx::rnn_fwd_training(context, d, generator, fwd, saved);
  dnnx::RnnBackwardData bwd{&src,
                            &weights,
                            &hx,
                            lstm ? &cx : nullptr,
                            lengths_arg,
                            &dst,
                            &diff_dst,
                            &diff_hy,
                            lstm ? &diff_cy : nullptr,
                            &diff_src,
                            &diff_hx,
                            lstm ? &diff_cx : nullptr};
  dnnx::rnn_bwd_data(context, d, bwd, saved);
  dnnx::RnnBackwardWeights wgrad{&src,        &weights, &hx,           lstm ? &cx : nullptr,
                                 lengths_arg, &dst,     &diff_weights, false};
  dnnx::rnn_bwd_weights(context, d, wgrad, saved);
  wgrad.diff_weights = &diff_weights_acc;
  wgrad.accumulate = true;
  dnnx::rnn_bwd_weights(context, d, wgrad, saved);
  save(dir, "dst.npy", dst);
  save(dir, "hy.npy", hy);
  save(dir, "diff_src.npy", diff_src);
  save(dir, "diff_hx.npy", diff_hx);
  save(dir, "diff_weights.npy", diff_weights);
  save(dir, "diff_weights_acc.npy", diff_weights_acc);
  if (lstm) {
    save(dir, "cy.npy", cy);
    save(dir, "diff_cx.npy", diff_cx);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(
      argc, argv, "rnn_harness",
      "(with case.json, src.npy, weights.npy, hx.npy, diff_dst.npy, diff_hy.npy, and cx.npy, "
      "diff_cy.npy for lstm)",
      run);
}
