#include "rnn_cases.hpp"

#include "support/gpu.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace dnnx::test {

RnnCase rnn_case(std::string name, RnnCell cell, std::int64_t seq, std::int64_t batch,
                 std::int64_t input, std::int64_t hidden, std::int64_t layers, bool bidirectional,
                 bool batch_first, std::vector<std::int32_t> lengths, bool bias) {
  RnnCase c;
  c.name = std::move(name);
  c.desc.cell = cell;
  c.desc.seq_length = seq;
  c.desc.batch = batch;
  c.desc.input_size = input;
  c.desc.hidden_size = hidden;
  c.desc.layers = layers;
  c.desc.bidirectional = bidirectional;
  c.desc.batch_first = batch_first;
  c.desc.bias = bias;
  c.desc.variable_lengths = !lengths.empty();
  c.lengths = std::move(lengths);
  return c;
}

namespace {

// `host` in the context's memory (itself on the cpu).
Tensor on(Context& context, const Tensor& host) {
  if (context.device() == Device::cpu() || host.data() == nullptr) return host;
  return device_copy(host, context);
}

Tensor output(Context& context, const Dims& dims, DType dtype) {
  return on(context, nan_tensor(dims, dtype, Layout::channels_first));
}

Tensor host_of(const Tensor& tensor) {
  return tensor.device() == Device::cpu() ? tensor : host_copy_of(tensor);
}

}  // namespace

std::vector<RnnCase> rnn_dropout_cases() {
  RnnCase dropout;
  dropout.name = "lstm_bi_3layers_dropout";
  dropout.desc.cell = RnnCell::lstm;
  dropout.desc.seq_length = 4;
  dropout.desc.batch = 3;
  dropout.desc.input_size = 5;
  dropout.desc.hidden_size = 4;
  dropout.desc.layers = 3;
  dropout.desc.bidirectional = true;
  dropout.desc.dropout = 0.4f;
  RnnCase gru = dropout;
  gru.name = "gru_2layers_dropout_batch_first";
  gru.desc.cell = RnnCell::gru;
  gru.desc.layers = 2;
  gru.desc.bidirectional = false;
  gru.desc.batch_first = true;
  gru.desc.dropout = 0.25f;
  RnnCase varlen = dropout;
  varlen.name = "lstm_bi_2layers_dropout_varlen";
  varlen.desc.seq_length = 5;
  varlen.desc.batch = 4;
  varlen.desc.layers = 2;
  varlen.desc.dropout = 0.3f;
  varlen.desc.variable_lengths = true;
  varlen.lengths = {3, 5, 1, 3};
  return {dropout, gru, varlen};
}

std::vector<RnnCase> rnn_cases() {
  using C = RnnCell;
  return {
      rnn_case("lstm_5x3x4h6", C::lstm, 5, 3, 4, 6),
      rnn_case("lstm_bi_2layers", C::lstm, 4, 2, 3, 5, 2, true),
      rnn_case("lstm_varlen_batch_first", C::lstm, 6, 4, 3, 4, 1, false, true, {6, 2, 5, 1}),
      rnn_case("lstm_seq1_batch1", C::lstm, 1, 1, 2, 3),
      rnn_case("gru_5x3x4h6", C::gru, 5, 3, 4, 6),
      rnn_case("gru_bi_varlen", C::gru, 5, 3, 2, 3, 1, true, false, {3, 5, 1}),
      rnn_case("gru_2layers_no_bias", C::gru, 3, 2, 5, 4, 2, false, false, {}, false),
      rnn_case("rnn_tanh_7x2x3h5", C::rnn_tanh, 7, 2, 3, 5),
      rnn_case("rnn_relu_bi_3layers", C::rnn_relu, 3, 2, 4, 3, 3, true),
      rnn_case("rnn_tanh_varlen_2layers", C::rnn_tanh, 4, 3, 3, 4, 2, false, false, {2, 4, 3}),
      rnn_case("gru_batch_first_bi_h33", C::gru, 3, 2, 3, 33, 1, true, true),
  };
}

RnnInputs rnn_inputs(const RnnDesc& desc, const std::vector<std::int32_t>& lengths,
                     std::uint64_t seed) {
  const Layout rows = Layout::channels_first;
  const Dims state = desc.state_dims();
  const Dims weights{desc.weights_count()};
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(desc.hidden_size)));
  auto draw = [&](const Dims& dims, std::uint64_t salt, float range) {
    return tensor_from(
        dims, desc.dtype, rows,
        random_uniform(static_cast<std::size_t>(dims.product()), seed + salt, -range, range));
  };
  RnnInputs in;
  in.src = draw(desc.src_dims(), 1, 1.0f);
  in.weights = draw(weights, 2, scale);
  in.hx = draw(state, 3, 1.0f);
  in.diff_dst = draw(desc.dst_dims(), 4, 1.0f);
  in.diff_hy = draw(state, 5, 1.0f);
  in.diff_weights0 = draw(weights, 6, 1.0f);
  if (desc.cell == RnnCell::lstm) {
    in.cx = draw(state, 7, 1.0f);
    in.diff_cy = draw(state, 8, 1.0f);
  }
  if (desc.variable_lengths) {
    in.lengths = Tensor::empty(Dims{desc.batch}, DType::i32);
    for (std::int64_t n = 0; n < desc.batch; ++n) {
      static_cast<std::int32_t*>(in.lengths.data())[n] =
          n < static_cast<std::int64_t>(lengths.size())
              ? lengths[static_cast<std::size_t>(n)]
              : static_cast<std::int32_t>(desc.seq_length);
    }
  }
  return in;
}

RnnStep run_rnn_step(Context& context, const RnnDesc& desc, const RnnInputs& in,
                     Generator generator, std::int64_t weight_shift) {
  const bool lstm = desc.cell == RnnCell::lstm;
  const Dims state = desc.state_dims();
  const Dims weights{desc.weights_count()};
  const DType dt = desc.dtype;
  // With weight_shift: the buffers the weight views lie in, alive until the outputs are copied.
  std::vector<Tensor> buffers;
  auto weight_tensor = [&](const Tensor& host) {
    if (weight_shift == 0) return on(context, host);
    const Tensor buffer =
        on(context, nan_tensor(Dims{host.numel() + weight_shift}, dt, Layout::channels_first));
    buffers.push_back(buffer);
    Tensor view = Tensor::view(static_cast<std::byte*>(buffer.data()) +
                                   static_cast<std::size_t>(weight_shift) * size_of(dt),
                               host.dims(), dt, Layout::channels_first, buffer.device());
    copy(host, view);
    return view;
  };
  const Tensor src = on(context, in.src), w = weight_tensor(in.weights), hx = on(context, in.hx);
  const Tensor cx = lstm ? on(context, in.cx) : Tensor();
  const Tensor diff_dst = on(context, in.diff_dst), diff_hy = on(context, in.diff_hy);
  const Tensor diff_cy = lstm ? on(context, in.diff_cy) : Tensor();
  const Tensor* lengths = desc.variable_lengths ? &in.lengths : nullptr;
  std::map<std::string, Tensor> out;
  RnnStep step;
  auto fresh = [&](const char* name, const Dims& dims) -> Tensor* {
    out[name] = output(context, dims, dt);
    return &out[name];
  };
  {
    RnnForward f{&src,
                 &w,
                 &hx,
                 lstm ? &cx : nullptr,
                 lengths,
                 fresh("dst_inference", desc.dst_dims()),
                 fresh("hy_inference", state),
                 lstm ? fresh("cy_inference", state) : nullptr};
    step.ran["fwd"] = rnn_fwd(context, desc, f)->algo.id;
  }
  SavedState saved;
  RnnForward f{&src,
               &w,
               &hx,
               lstm ? &cx : nullptr,
               lengths,
               fresh("dst", desc.dst_dims()),
               fresh("hy", state),
               lstm ? fresh("cy", state) : nullptr};
  step.ran["fwd_training"] = rnn_fwd_training(context, desc, generator, f, saved)->algo.id;
  RnnBackwardData b{&src,
                    &w,
                    &hx,
                    lstm ? &cx : nullptr,
                    lengths,
                    f.dst,
                    &diff_dst,
                    &diff_hy,
                    lstm ? &diff_cy : nullptr,
                    fresh("diff_src", desc.src_dims()),
                    fresh("diff_hx", state),
                    lstm ? fresh("diff_cx", state) : nullptr};
  step.ran["bwd_data"] = rnn_bwd_data(context, desc, b, saved)->algo.id;
  out["diff_weights"] = weight_tensor(nan_tensor(weights, dt, Layout::channels_first));
  RnnBackwardWeights g{&src, &w, &hx, lstm ? &cx : nullptr, lengths, f.dst, &out["diff_weights"],
                       false};
  step.ran["bwd_weights"] = rnn_bwd_weights(context, desc, g, saved)->algo.id;
  out["diff_weights_acc"] = weight_tensor(in.diff_weights0);
  // A copy: `on` returns the host input itself on the cpu.
  if (context.device() == Device::cpu() && weight_shift == 0) {
    Tensor copy_of = Tensor::empty(weights, dt);
    copy(in.diff_weights0, copy_of);
    out["diff_weights_acc"] = copy_of;
  }
  g.diff_weights = &out["diff_weights_acc"];
  g.accumulate = true;
  rnn_bwd_weights(context, desc, g, saved);
  // A host copy of each output (on the cpu a shifted view's buffer dies with this call).
  for (auto& [name, tensor] : out)
    step.outputs[name] = weight_shift > 0 ? host_copy_of(tensor) : host_of(tensor);
  return step;
}

std::map<std::string, Tensor> run_rnn_weight_versions(Context& context, const RnnDesc& desc,
                                                      const RnnInputs& in, const Tensor& first,
                                                      const Tensor& second) {
  const bool lstm = desc.cell == RnnCell::lstm;
  const Dims state = desc.state_dims();
  const DType dt = desc.dtype;
  const Tensor src = on(context, in.src), hx = on(context, in.hx);
  const Tensor cx = lstm ? on(context, in.cx) : Tensor();
  const Tensor diff_dst = on(context, in.diff_dst);
  const Tensor* lengths = desc.variable_lengths ? &in.lengths : nullptr;
  // A buffer of its own (on the cpu `on` would return `first` itself, which must not change).
  Tensor w = output(context, first.dims(), dt);
  std::map<std::string, Tensor> out;
  auto call = [&](const std::string& name, const Tensor& weights, std::uint64_t version) {
    copy(weights, w);
    Tensor dst = output(context, desc.dst_dims(), dt), hy = output(context, state, dt);
    Tensor cy = lstm ? output(context, state, dt) : Tensor();
    rnn_fwd(context, desc,
            RnnForward{&src, &w, &hx, lstm ? &cx : nullptr, lengths, &dst, &hy,
                       lstm ? &cy : nullptr, version});
    out["dst_" + name] = host_copy_of(dst);
    SavedState saved;
    Generator generator;
    Tensor train_dst = output(context, desc.dst_dims(), dt);
    rnn_fwd_training(context, desc, generator,
                     RnnForward{&src, &w, &hx, lstm ? &cx : nullptr, lengths, &train_dst, nullptr,
                                nullptr, version},
                     saved);
    Tensor diff_src = output(context, desc.src_dims(), dt);
    rnn_bwd_data(context, desc,
                 RnnBackwardData{&src, &w, &hx, lstm ? &cx : nullptr, lengths, &train_dst,
                                 &diff_dst, nullptr, nullptr, &diff_src, nullptr, nullptr, version},
                 saved);
    out["diff_src_" + name] = host_copy_of(diff_src);
  };
  call("first", first, 11);
  call("stale", second, 11);
  call("second", second, 12);
  call("unknown", first, 0);
  return out;
}

std::vector<float> rnn_scale_of(const std::vector<float>& expected) {
  double sum = 0;
  for (const float v : expected) sum += double{v} * v;
  const auto rms = static_cast<float>(expected.empty() ? 0.0 : std::sqrt(sum / expected.size()));
  std::vector<float> scale(expected.size());
  std::transform(expected.begin(), expected.end(), scale.begin(),
                 [rms](float v) { return std::max(std::abs(v), rms); });
  return scale;
}

}  // namespace dnnx::test
