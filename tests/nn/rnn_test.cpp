// nn::RNN / LSTM / GRU: PyTorch's parameter names, shapes and repr, parameters as views of the
// flat weights, the forward against the rnn op itself, dropout between layers against the same
// stack built from one-layer modules and nn::Dropout, gradient accumulation, states and lengths,
// load_state_dict, safetensors, convert to f16, per-direction policies, and bad inputs.
// (Values against torch.nn: torch_nn_parity.py.)

#include "nn/nn_test_util.hpp"
#include "support/errors.hpp"

#include <filesystem>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

Context reference() { return Context(BackendKind::reference); }

std::vector<std::string> keys(nn::Module& module) {
  std::vector<std::string> out;
  for (auto& [key, tensor] : module.state_dict()) out.push_back(key);
  return out;
}

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  expect_close(a, b, 0, 0, what);
}

TEST(NnRnn, NamesShapesAndRepr) {
  nn::manual_seed(1);
  nn::RnnOptions options;
  options.num_layers = 2;
  options.bidirectional = true;
  nn::LSTM lstm(reference(), 3, 4, options);
  const std::vector<std::string> want{
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(keys(lstm), want);
  EXPECT_EQ(lstm.repr(), "LSTM(3, 4, num_layers=2, bidirectional=True)");
  EXPECT_EQ(lstm.op(), OpKind::rnn);
  const auto named = lstm.named_parameters();
  EXPECT_EQ(named[0].second->value.dims(), (Dims{16, 3}));  // 4 gates x hidden, input
  EXPECT_EQ(named[1].second->value.dims(), (Dims{16, 4}));
  EXPECT_EQ(named[2].second->value.dims(), (Dims{16}));
  EXPECT_EQ(named[8].second->value.dims(), (Dims{16, 8}));  // layer 1 reads both directions
  // Every parameter is a view of the flat weights at the op's offset; values in +-1/sqrt(H).
  const RnnDesc desc = lstm.desc_for(1, 1, false);
  EXPECT_EQ(lstm.flat_weights().numel(), desc.weights_count());
  const auto* base = static_cast<const std::byte*>(lstm.flat_weights().data());
  EXPECT_EQ(static_cast<const void*>(named[9].second->value.data()),
            static_cast<const void*>(base + desc.weight_offset(1, 0, RnnWeight::w_hh) * 4));
  EXPECT_EQ(static_cast<const std::byte*>(named[9].second->grad.data()) -
                static_cast<const std::byte*>(lstm.flat_grads().data()),
            desc.weight_offset(1, 0, RnnWeight::w_hh) * 4);
  for (float value : lstm.flat_weights().to_f32()) {
    EXPECT_LE(std::abs(value), 0.5f);
    EXPECT_NE(value, 0.0f);
  }

  nn::RnnOptions other;
  other.bias = false;
  other.batch_first = true;
  other.dropout = 0.5;
  nn::RNN relu(reference(), 2, 3, other, "relu");
  EXPECT_EQ(relu.repr(), "RNN(2, 3, bias=False, batch_first=True, dropout=0.5)");
  EXPECT_EQ(relu.cell(), RnnCell::rnn_relu);
  EXPECT_EQ(keys(relu), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  nn::GRU gru(reference(), 2, 3);
  EXPECT_EQ(gru.repr(), "GRU(2, 3)");
  EXPECT_EQ(gru.named_parameters()[0].second->value.dims(), (Dims{9, 2}));
}

TEST(NnRnn, ForwardIsTheOpOnTheFlatWeights) {
  nn::manual_seed(2);
  nn::RnnOptions options;
  options.num_layers = 2;
  options.bidirectional = true;
  options.batch_first = true;
  nn::GRU gru(reference(), 3, 5, options);
  const Tensor x = input(Dims{2, 4, 3}, 3);  // batch_first: N = 2, T = 4
  const Tensor h0 = input(Dims{4, 2, 5}, 4);
  Tensor lengths = Tensor::empty(Dims{2}, DType::i64);
  static_cast<std::int64_t*>(lengths.data())[0] = 2;
  static_cast<std::int64_t*>(lengths.data())[1] = 4;
  gru.eval();
  const nn::RnnOutput out = gru.forward(x, h0, Tensor(), lengths);
  EXPECT_TRUE(out.c_n.is_null());
  ASSERT_EQ(out.output.dims(), (Dims{2, 4, 10}));

  Context context = reference();
  RnnDesc desc = gru.desc_for(4, 2, true);
  Tensor lengths32 = Tensor::empty(Dims{2}, DType::i32);
  static_cast<std::int32_t*>(lengths32.data())[0] = 2;
  static_cast<std::int32_t*>(lengths32.data())[1] = 4;
  Tensor dst = Tensor::empty(desc.dst_dims(), DType::f32);
  Tensor hy = Tensor::empty(desc.state_dims(), DType::f32);
  rnn_fwd(context, desc,
          RnnForward{&x, &gru.flat_weights(), &h0, nullptr, &lengths32, &dst, &hy, nullptr});
  expect_equal(out.output, dst, "output");
  expect_equal(out.h_n, hy, "h_n");
  EXPECT_EQ(gru.choice(Direction::fwd)->algo.id, "reference:direct");
  ASSERT_TRUE(gru.desc(Direction::fwd).has_value());
  EXPECT_EQ(*gru.desc(Direction::fwd), desc);
  // The single-tensor forward is the same from zero states and full lengths.
  const Tensor plain = gru.forward(x);
  Tensor zero = Tensor::zeros(desc.state_dims(), DType::f32);
  expect_equal(plain, gru.forward(x, zero).output, "zero states");
}

// A two-layer LSTM with dropout, in training, is layer 0, nn::Dropout, layer 1 with the same
// weights and the same generator: the same output, states and gradients, bit for bit.
TEST(NnRnn, DropoutBetweenLayersIsTheDropoutOp) {
  Context context = reference();
  nn::manual_seed(3);
  nn::RnnOptions options;
  options.num_layers = 2;
  options.dropout = 0.4;
  options.bidirectional = true;
  nn::LSTM stack(context, 3, 4, options);
  nn::RnnOptions one;
  one.bidirectional = true;
  nn::LSTM first(context, 3, 4, one), second(context, 8, 4, one);
  nn::Dropout dropout(context, 0.4f);
  nn::StateDict first_state, second_state;
  for (auto& [key, tensor] : stack.state_dict()) {
    const auto at = key.find("_l1");
    if (at == std::string::npos) {
      first_state.emplace_back(key, tensor);
    } else {
      second_state.emplace_back(key.substr(0, at) + "_l0" + key.substr(at + 3), tensor);
    }
  }
  first.load_state_dict(first_state);
  second.load_state_dict(second_state);

  const Tensor x = input(Dims{5, 2, 3}, 5);
  const Tensor h0 = input(Dims{4, 2, 4}, 6), c0 = input(Dims{4, 2, 4}, 7);
  const Tensor dy = input(Dims{5, 2, 8}, 8), dh = input(Dims{4, 2, 4}, 9);
  nn::manual_seed(11);
  const nn::RnnOutput out = stack.forward(x, h0, c0);
  const nn::RnnGradients grads = stack.backward(dy, dh);

  const auto rows = [](const Tensor& state, std::int64_t begin) {
    Tensor part = Tensor::empty(Dims{2, 2, 4}, DType::f32);
    const auto values = state.to_f32();
    part.copy_from_f32(
        std::vector<float>(values.begin() + begin * 8, values.begin() + begin * 8 + 16));
    return part;
  };
  nn::manual_seed(11);
  const nn::RnnOutput a = first.forward(x, rows(h0, 0), rows(c0, 0));
  const Tensor dropped = dropout.forward(a.output);
  const nn::RnnOutput b = second.forward(dropped, rows(h0, 2), rows(c0, 2));
  expect_equal(out.output, b.output, "output");
  expect_equal(rows(out.h_n, 0), a.h_n, "h_n layer 0");
  expect_equal(rows(out.h_n, 2), b.h_n, "h_n layer 1");
  expect_equal(rows(out.c_n, 2), b.c_n, "c_n layer 1");
  const nn::RnnGradients gb = second.backward(dy, rows(dh, 2));
  const nn::RnnGradients ga = first.backward(dropout.backward(gb.diff_input), rows(dh, 0));
  expect_equal(grads.diff_input, ga.diff_input, "diff input");
  expect_equal(rows(grads.diff_h0, 0), ga.diff_h0, "diff h0 layer 0");
  expect_equal(rows(grads.diff_c0, 2), gb.diff_c0, "diff c0 layer 1");
  const auto stack_grads = stack.named_parameters();
  expect_equal(stack_grads[0].second->grad, first.named_parameters()[0].second->grad,
               "weight_ih_l0 grad");
  expect_equal(stack_grads[9].second->grad, second.named_parameters()[1].second->grad,
               "weight_hh_l1 grad");
  // Masks change with the generator: another seed, another output.
  nn::manual_seed(12);
  const nn::RnnOutput other = stack.forward(x, h0, c0);
  EXPECT_NE(other.output.to_f32(), out.output.to_f32());
  stack.backward(dy);
  // Eval mode: no dropout, the whole stack in one call (the reference keeps layer 0's output in
  // f64 there, so not bit for bit the chained one-layer calls).
  stack.eval();
  const Tensor eval_out = stack.forward(x, h0, c0).output;
  EXPECT_EQ(stack.desc(Direction::fwd)->layers, 2);
  first.eval();
  second.eval();
  expect_close(
      eval_out,
      second.forward(first.forward(x, rows(h0, 0), rows(c0, 0)).output, rows(h0, 2), rows(c0, 2))
          .output,
      1e-6, 1e-6, "eval");
}

TEST(NnRnn, GradientsAccumulateUntilZeroGrad) {
  nn::manual_seed(4);
  nn::RNN rnn(reference(), 2, 3);
  const Tensor x = input(Dims{3, 2, 2}, 1);
  const Tensor dy = input(Dims{3, 2, 3}, 2);
  rnn.forward(x);
  rnn.backward(dy);
  const std::vector<float> once = rnn.flat_grads().to_f32();
  rnn.forward(x);
  rnn.backward(dy);
  const std::vector<float> twice = rnn.flat_grads().to_f32();
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-6);
  EXPECT_NE(once, std::vector<float>(once.size(), 0.0f));
  rnn.zero_grad();
  EXPECT_EQ(rnn.flat_grads().to_f32(), std::vector<float>(once.size(), 0.0f));
  rnn.forward(x);
  rnn.backward(dy);
  EXPECT_EQ(rnn.flat_grads().to_f32(), once);
  EXPECT_EQ(rnn.choice(Direction::bwd_weights)->algo.id, "reference:direct");
}

TEST(NnRnn, StateDictSafetensorsAndConvert) {
  nn::manual_seed(5);
  nn::RnnOptions options;
  options.num_layers = 2;
  nn::LSTM a(reference(), 3, 4, options);
  nn::manual_seed(6);
  nn::LSTM b(reference(), 3, 4, options);
  a.eval();
  b.eval();
  const Tensor x = input(Dims{4, 2, 3}, 1);
  const Tensor before = b.forward(x);
  const void* storage = b.flat_weights().data();
  nn::SGD sgd(b.context(), b.parameters(), SgdHyper{0.5, 0.0, 0.0, 0.0});
  const auto path =
      (std::filesystem::temp_directory_path() / "dnnx_nn_rnn_test.safetensors").string();
  safetensors::save(path, a.state_dict());
  nn::StateDict loaded;
  const safetensors::File file = safetensors::load(path);
  for (const auto& [key, tensor] : a.state_dict()) loaded.emplace_back(key, file.tensor(key));
  std::filesystem::remove(path);
  b.load_state_dict(loaded);
  expect_equal(b.forward(x), a.forward(x), "loaded");
  // Loaded in place: the optimizer built before still updates the module's weights.
  EXPECT_EQ(b.flat_weights().data(), storage);
  b.train();
  b.forward(x);
  b.backward(input(Dims{4, 2, 4}, 2));
  const std::vector<float> loaded_values = b.flat_weights().to_f32();
  sgd.step();
  EXPECT_NE(b.flat_weights().to_f32(), loaded_values);
  b.load_state_dict(loaded);
  b.eval();
  EXPECT_NE(before.to_f32(), a.forward(x).to_f32());
  // The parameters are views of the (new) flat weights after the load.
  EXPECT_EQ(b.named_parameters()[0].second->value.data(), b.flat_weights().data());

  Context half(BackendKind::reference, 0, TypeConfig::half);
  nn::convert(b, half);
  EXPECT_EQ(b.flat_weights().dtype(), DType::f16);
  EXPECT_EQ(b.named_parameters()[0].second->value.data(), b.flat_weights().data());
  EXPECT_FALSE(b.named_parameters()[0].second->master.is_null());
  Tensor x16 = Tensor::empty(x.dims(), DType::f16);
  x16.copy_from_f32(x.to_f32());
  expect_close(b.forward(x16), a.forward(x), 2e-2, 2e-2, "f16");
  b.train();
  b.forward(x16);
  b.backward(Tensor::zeros(Dims{4, 2, 4}, DType::f16));
  EXPECT_EQ(b.flat_grads().dtype(), DType::f16);
}

TEST(NnRnn, PoliciesAndChoices) {
  nn::manual_seed(7);
  nn::GRU gru(reference(), 2, 3);
  gru.policy(Direction::fwd_training) = AlgoPolicy::fixed("reference:direct");
  EXPECT_EQ(gru.choice(Direction::fwd_training), nullptr);
  const Tensor x = input(Dims{3, 1, 2}, 1);
  gru.forward(x);
  gru.backward(input(Dims{3, 1, 3}, 2));
  ASSERT_NE(gru.choice(Direction::fwd_training), nullptr);
  EXPECT_EQ(gru.choice(Direction::fwd_training)->algo.id, "reference:direct");
  ASSERT_NE(gru.choice(Direction::bwd_data), nullptr);
  EXPECT_NE(gru.heuristic_choice(Direction::bwd_weights), nullptr);
  EXPECT_TRUE(gru.profile(Direction::fwd_training).has_value());
  EXPECT_FALSE(gru.profile(Direction::fwd).has_value());  // no inference call yet
}

TEST(NnRnn, BadInputs) {
  Context context = reference();
  const auto bad = [](const std::vector<std::string>& mentions, const auto& call) {
    expect_error(ErrorKind::InvalidArgument, mentions, call);
  };
  bad({"input_size 0"}, [&] { nn::LSTM(context, 0, 3); });
  nn::RnnOptions layers;
  layers.num_layers = 0;
  bad({"num_layers 0"}, [&] { nn::GRU(context, 2, 3, layers); });
  nn::RnnOptions dropout;
  dropout.dropout = 1.5;
  bad({"dropout 1.5"}, [&] { nn::GRU(context, 2, 3, dropout); });
  bad({"nonlinearity 'sigmoid'"}, [&] { nn::RNN(context, 2, 3, {}, "sigmoid"); });
  nn::GRU gru(context, 2, 3);
  bad({"without a training forward"}, [&] { gru.backward(input(Dims{3, 1, 3}, 1)); });
  bad({"must have 3 dims", "unbatched"}, [&] { gru.forward(input(Dims{3, 2}, 1)); });
  bad({"input_size 2"}, [&] { gru.forward(input(Dims{3, 1, 4}, 1)); });
  bad({"f16"}, [&] { gru.forward(Tensor::zeros(Dims{3, 1, 2}, DType::f16)); });
  const Tensor x = input(Dims{3, 2, 2}, 1);
  bad({"h0", "must be a dense"}, [&] { gru.forward(x, input(Dims{1, 1, 3}, 2)); });
  bad({"c0", "only LSTM"}, [&] { gru.forward(x, Tensor(), input(Dims{1, 2, 3}, 2)); });
  Tensor lengths = Tensor::empty(Dims{2}, DType::i64);
  static_cast<std::int64_t*>(lengths.data())[0] = 4;
  static_cast<std::int64_t*>(lengths.data())[1] = 1;
  bad({"lengths[0] is 4", "[1, seq_length = 3]"},
      [&] { gru.forward(x, Tensor(), Tensor(), lengths); });
  bad({"lengths", "2 entries"},
      [&] { gru.forward(x, Tensor(), Tensor(), Tensor::zeros(Dims{3}, DType::i64)); });
  gru.eval();
  gru.forward(x);
  bad({"without a training forward"}, [&] { gru.backward(input(Dims{3, 2, 3}, 1)); });
  gru.train();
  gru.forward(x);
  bad({"diff_dst"}, [&] { gru.backward(input(Dims{3, 2, 4}, 1)); });
  bad({"diff_c_n", "only LSTM"}, [&] {
    gru.backward(input(Dims{3, 2, 3}, 1), Tensor(), input(Dims{1, 2, 3}, 1));
  });
}

}  // namespace
}  // namespace dnnx::test::nn
