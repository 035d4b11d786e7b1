// Modules: printing, naming, state_dict loading and its errors, gradient accumulation, backward
// chaining through containers and in-place activations, bad inputs.

#include "nn/nn_test_util.hpp"

#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

TEST(NnModule, FashionCnnPrintsAsPyTorch) {
  Context context = fast_context();
  nn::manual_seed(1);
  auto model = nn::models::fashion_cnn(context);
  EXPECT_EQ(model->repr(),
            "Sequential(\n"
            "  (0): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): BatchNorm2d(32, eps=1e-05, momentum=0.1, affine=True, "
            "track_running_stats=True)\n"
            "  (2): ReLU(inplace=True)\n"
            "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (4): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (5): BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, "
            "track_running_stats=True)\n"
            "  (6): ReLU(inplace=True)\n"
            "  (7): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (8): Flatten(start_dim=1, end_dim=-1)\n"
            "  (9): Linear(in_features=3136, out_features=128, bias=True)\n"
            "  (10): ReLU(inplace=True)\n"
            "  (11): Linear(in_features=128, out_features=10, bias=True)\n"
            ")");
}

TEST(NnModule, NestedTreeIndentsChildren) {
  Context context = fast_context();
  auto block = nn::BasicBlock(context, 8, 16, 2);
  const std::string text = block.repr();
  EXPECT_NE(text.find("BasicBlock(\n  (conv1): Conv2d(8, 16, kernel_size=(3, 3), stride=(2, 2), "
                      "padding=(1, 1), bias=False)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  (downsample): Sequential(\n    (0): Conv2d(8, 16, kernel_size=(1, 1), "
                      "stride=(2, 2), bias=False)\n    (1): BatchNorm2d(16"),
            std::string::npos)
      << text;
  EXPECT_TRUE(text.ends_with("\n  )\n)")) << text;
}

TEST(NnModule, StateDictKeysFollowPyTorch) {
  Context context = fast_context();
  auto model = nn::models::fashion_cnn(context);
  std::vector<std::string> keys;
  for (auto& [key, tensor] : model->state_dict()) keys.push_back(key);
  const std::vector<std::string> expected{"0.weight",
                                          "0.bias",
                                          "1.weight",
                                          "1.bias",
                                          "1.running_mean",
                                          "1.running_var",
                                          "1.num_batches_tracked",
                                          "4.weight",
                                          "4.bias",
                                          "5.weight",
                                          "5.bias",
                                          "5.running_mean",
                                          "5.running_var",
                                          "5.num_batches_tracked",
                                          "9.weight",
                                          "9.bias",
                                          "11.weight",
                                          "11.bias"};
  EXPECT_EQ(keys, expected);
  std::int64_t count = 0;
  for (auto& [name, parameter] : model->named_parameters()) count += parameter->value.numel();
  // 320 + 64 + 18496 + 128 + 401536 + 1290
  EXPECT_EQ(count, 421834);
  for (auto& [key, tensor] : model->state_dict()) {
    if (key.ends_with("num_batches_tracked")) {
      EXPECT_EQ(tensor.dtype(), DType::i64) << key;
      EXPECT_EQ(tensor.rank(), 0) << key;
    }
  }
}

TEST(NnModule, ForwardShapesAndBatchCounter) {
  Context context = fast_context();
  auto model = nn::models::fashion_cnn(context);
  const Tensor logits = model->forward(input(Dims{3, 1, 28, 28}, 5));
  EXPECT_EQ(logits.dims(), (Dims{3, 10}));
  auto& bn = dynamic_cast<nn::BatchNorm&>((*model)[1]);
  EXPECT_EQ(bn.num_batches_tracked(), 1);
  model->eval();
  model->forward(input(Dims{2, 1, 28, 28}, 6));
  EXPECT_EQ(bn.num_batches_tracked(), 1);
  for (auto& [key, tensor] : model->state_dict()) {
    if (key == "1.num_batches_tracked") {
      EXPECT_EQ(*static_cast<const std::int64_t*>(tensor.data()), 1);
    }
  }
}

// The gradients of two identical backward passes are twice those of one; zero_grad clears them.
TEST(NnModule, GradientsAccumulateUntilZeroGrad) {
  Context context = fast_context();
  nn::manual_seed(3);
  // No batch norm: its batch statistics would make the two passes' gradients differ anyway.
  auto model = std::make_shared<nn::Sequential>(context);
  model->push_back(std::make_shared<nn::Conv2d>(context, 1, 4, std::vector<std::int64_t>{3}));
  model->push_back(std::make_shared<nn::ReLU>(context, true));
  model->push_back(std::make_shared<nn::MaxPool2d>(context, std::vector<std::int64_t>{2}));
  model->push_back(std::make_shared<nn::Flatten>(context));
  model->push_back(std::make_shared<nn::Linear>(context, 4 * 13 * 13, 10));
  nn::CrossEntropyLoss loss(context);
  const Tensor x = input(Dims{4, 1, 28, 28}, 7);
  const Tensor y = labels(4, 10, 8);
  const auto pass = [&] {
    loss.forward(model->forward(x), y);
    model->backward(loss.backward());
  };
  pass();
  std::vector<std::vector<float>> once;
  for (auto* parameter : model->parameters()) once.push_back(parameter->grad.to_f32());
  pass();
  std::size_t index = 0;
  for (auto* parameter : model->parameters()) {
    std::vector<float> doubled = once[index++];
    for (float& value : doubled) value *= 2;
    EXPECT_LE(worst_ratio(parameter->grad.to_f32(), doubled, 1e-5, 1e-6), 1.0);
  }
  model->zero_grad();
  for (auto* parameter : model->parameters()) {
    for (float value : parameter->grad.to_f32()) ASSERT_EQ(value, 0.0f);
    EXPECT_FALSE(parameter->grad_live);
  }
}

TEST(NnModule, LoadStateDictCopiesValues) {
  Context context = fast_context();
  nn::manual_seed(10);
  auto a = nn::models::fashion_cnn(context);
  nn::manual_seed(11);
  auto b = nn::models::fashion_cnn(context);
  a->forward(input(Dims{2, 1, 28, 28}, 1));  // running stats and counter move
  a->eval();
  b->eval();
  const Tensor x = input(Dims{2, 1, 28, 28}, 2);
  const Tensor before = b->forward(x);
  b->load_state_dict(a->state_dict());
  expect_close(b->forward(x), a->forward(x), 0, 0, "outputs after load_state_dict");
  EXPECT_EQ(dynamic_cast<nn::BatchNorm&>((*b)[1]).num_batches_tracked(), 1);
  EXPECT_GT(worst_ratio(before.to_f32(), a->forward(x).to_f32(), 1e-3, 1e-3), 1.0);
}

TEST(NnModule, LoadStateDictListsEveryProblem) {
  Context context = fast_context();
  auto model = nn::models::fashion_cnn(context);
  nn::StateDict state = model->state_dict();
  const Tensor kept = state[0].second;
  state.erase(state.begin());                            // 0.weight missing
  state.emplace_back("12.weight", kept);                 // unexpected
  state[2].second = Tensor::zeros(Dims{5}, DType::f32);  // 1.bias of another shape
  const float first = kept.to_f32()[0];
  try {
    model->load_state_dict(state);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    const std::string message = error.message();
    EXPECT_NE(message.find("missing keys: 0.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected keys: 12.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("1.bias (given 5, expected 32)"), std::string::npos) << message;
  }
  EXPECT_EQ(model->state_dict()[0].second.to_f32()[0], first);  // nothing changed
}

TEST(NnModule, ResidualSumsBranchesAndTheirGradients) {
  Context context = fast_context();
  nn::manual_seed(4);
  auto branch = std::make_shared<nn::Conv2d>(context, 4, 4, std::vector<std::int64_t>{3},
                                             nn::ConvOptions{{1}, {1}, {1}, 1, true});
  nn::Residual residual(context, {{"conv", branch}, {"identity", nullptr}});
  nn::Conv2d& conv = *branch;
  const Tensor x = input(Dims{2, 4, 5, 5}, 9);
  const Tensor dy = input(Dims{2, 4, 5, 5}, 10);
  // The expectations from the branch alone: y = conv(x) + x, dx = conv^T(dy) + dy.
  std::vector<float> expected = conv.forward(x).to_f32();
  std::vector<float> expected_dx = conv.backward(dy).to_f32();
  const std::vector<float> xs = x.to_f32();
  const std::vector<float> dys = dy.to_f32();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    expected[i] += xs[i];
    expected_dx[i] += dys[i];
  }
  EXPECT_LE(worst_ratio(residual.forward(x).to_f32(), expected, 1e-6, 1e-6), 1.0);
  EXPECT_LE(worst_ratio(residual.backward(dy).to_f32(), expected_dx, 1e-5, 1e-6), 1.0);
  EXPECT_EQ(residual.named_parameters()[0].first, "conv.weight");
}

// SumModule::sum with its protected entry point reachable.
class ExposedSum final : public nn::SumModule {
 public:
  explicit ExposedSum(const Context& context) : SumModule(context) {}
  using SumModule::sum;
  std::string type_name() const override { return "ExposedSum"; }
  Tensor forward(const Tensor& src) override { return src; }
  Tensor backward(const Tensor& diff_dst) override { return diff_dst; }
};

Tensor copy_of(const Tensor& src) {
  Tensor out = Tensor::empty(src.dims(), src.dtype());
  copy(src, out);
  return out;
}

// Note [sums in place]: a term is written only when handed over and shared with nothing else.
TEST(NnModule, SumWritesOnlyIntoTermsNothingElseHolds) {
  Context context = fast_context();
  ExposedSum module(context);
  const Tensor x = input(Dims{2, 3, 4, 5}, 21);
  const Tensor y = input(Dims{2, 3, 4, 5}, 22);
  const std::vector<float> xs = x.to_f32();
  const std::vector<float> ys = y.to_f32();
  std::vector<float> expected(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) expected[i] = xs[i] + ys[i];

  // Both terms held by the caller: a new tensor, the terms unchanged.
  const Tensor both = module.sum(x, y);
  EXPECT_NE(both.data(), x.data());
  EXPECT_NE(both.data(), y.data());
  EXPECT_LE(worst_ratio(both.to_f32(), expected, 1e-6, 1e-6), 1.0);
  EXPECT_EQ(x.to_f32(), xs);
  EXPECT_EQ(y.to_f32(), ys);

  // The first term handed over: the sum is written into it.
  Tensor a = copy_of(x);
  const void* a_data = a.data();
  const Tensor into_a = module.sum(std::move(a), y);
  EXPECT_EQ(into_a.data(), a_data);
  EXPECT_LE(worst_ratio(into_a.to_f32(), expected, 1e-6, 1e-6), 1.0);
  EXPECT_EQ(y.to_f32(), ys);

  // The second term handed over, the first held: written into the second.
  Tensor b = copy_of(y);
  const void* b_data = b.data();
  const Tensor into_b = module.sum(x, std::move(b));
  EXPECT_EQ(into_b.data(), b_data);
  EXPECT_LE(worst_ratio(into_b.to_f32(), expected, 1e-6, 1e-6), 1.0);
  EXPECT_EQ(x.to_f32(), xs);

  // Handed over but still shared by a view: not written.
  Tensor c = copy_of(x);
  const Tensor view = c.reshape(Dims{120});
  const Tensor shared = module.sum(std::move(c), y);
  EXPECT_NE(shared.data(), view.data());
  EXPECT_EQ(view.to_f32(), xs);
  EXPECT_LE(worst_ratio(shared.to_f32(), expected, 1e-6, 1e-6), 1.0);

  // A view of user memory is never written, even when handed over alone.
  std::vector<float> user = xs;
  const Tensor from_user = module.sum(Tensor::view(user.data(), x.dims(), DType::f32), y);
  EXPECT_NE(from_user.data(), static_cast<const void*>(user.data()));
  EXPECT_EQ(user, xs);
  EXPECT_LE(worst_ratio(from_user.to_f32(), expected, 1e-6, 1e-6), 1.0);
}

TEST(NnModule, ResidualRefusesAnInPlaceBranch) {
  Context context = fast_context();
  try {
    nn::Residual residual(
        context, {{"relu", std::make_shared<nn::ReLU>(context, true)}, {"identity", nullptr}});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("branch relu"), std::string::npos) << error.message();
  }
}

// An in-place activation after a max pooling leaves the pooling's backward intact (it keeps its
// argmax), and in-place and out-of-place activations give the same gradients.
TEST(NnModule, InPlaceActivationsKeepBackwardCorrect) {
  Context context = fast_context();
  const Tensor x = input(Dims{2, 3, 8, 8}, 11);
  const Tensor dy = input(Dims{2, 3, 4, 4}, 12);
  std::vector<std::vector<float>> results;
  for (bool inplace : {false, true}) {
    nn::Sequential model(context);
    model.push_back(std::make_shared<nn::MaxPool2d>(context, std::vector<std::int64_t>{2}));
    model.push_back(std::make_shared<nn::ReLU>(context, inplace));
    model.push_back(std::make_shared<nn::Tanh>(context, inplace));
    model.forward(x);
    results.push_back(model.backward(dy).to_f32());
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(NnModule, LayersRefuseBadUse) {
  Context context = fast_context();
  nn::Conv2d conv(context, 3, 4, {3});
  const auto expect = [](ErrorKind kind, const std::string& needle, const auto& call) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), kind) << error.what();
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect(ErrorKind::InvalidArgument, "without a forward", [&] {
    conv.backward(input(Dims{1, 4, 3, 3}, 1));
  });
  expect(ErrorKind::InvalidArgument, "has 2 channels; expected 3", [&] {
    conv.forward(input(Dims{1, 2, 5, 5}, 1));
  });
  expect(ErrorKind::InvalidArgument, "has rank 3; expected 4", [&] {
    conv.forward(input(Dims{1, 3, 5}, 1));
  });
  conv.forward(input(Dims{1, 3, 5, 5}, 1));
  expect(ErrorKind::InvalidArgument, "must have the forward output's dims 1x4x3x3", [&] {
    conv.backward(input(Dims{1, 4, 3, 4}, 1));
  });
  expect(ErrorKind::InvalidArgument, "divisible by groups 2", [&] {
    nn::Conv2d(context, 3, 4, {3}, nn::ConvOptions{{1}, {0}, {1}, 2, true});
  });
  expect(ErrorKind::InvalidArgument, "kernel_size has 3 entries", [&] {
    nn::Conv2d(context, 3, 4, {3, 3, 3});
  });
  expect(ErrorKind::Unsupported, "inplace=False", [&] { nn::SiLU(context, true); });
  expect(ErrorKind::InvalidArgument, "momentum", [&] {
    nn::BatchNorm2d(context, 4, nn::BatchNormOptions{1e-5, 1.5, true, true});
  });
  expect(ErrorKind::InvalidArgument, "call forward(logits, labels)", [&] {
    nn::CrossEntropyLoss(context).forward(input(Dims{2, 3}, 1));
  });
  expect(ErrorKind::Unsupported, "label_smoothing 0.1 is not offered", [&] {
    nn::CrossEntropyOptions options;
    options.label_smoothing = 0.1;
    nn::CrossEntropyLoss loss(context, options);
  });
  expect(ErrorKind::InvalidArgument, "no op of its own",
         [&] { nn::Sequential(context).policy(Direction::fwd); });
  nn::Linear linear(context, 6, 2);
  expect(ErrorKind::InvalidArgument, "must have 6 features", [&] {
    linear.forward(input(Dims{2, 5}, 1));
  });
}

TEST(NnModule, ReshapeSharesStorage) {
  Tensor x = input(Dims{2, 3, 4}, 1);
  const Tensor flat = x.reshape(Dims{2, 12});
  EXPECT_EQ(flat.data(), x.data());
  EXPECT_EQ(flat.to_f32(), x.to_f32());
  EXPECT_EQ(flat.strides(), (Dims{12, 1}));
  try {
    x.reshape(Dims{5, 5});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(error.message().find("reshape dims 5x5 hold 25 elements but the tensor 2x3x4 holds "
                                   "24"),
              std::string::npos)
        << error.message();
  }
  const Tensor strided = Tensor::view(x.data(), Dims{2, 3}, DType::f32, Dims{12, 1});
  EXPECT_THROW(strided.reshape(Dims{6}), Error);
}

TEST(NnModule, LinearTakesLeadingDims) {
  Context context = fast_context();
  nn::Linear linear(context, 6, 3);
  const Tensor x = input(Dims{2, 4, 6}, 3);
  const Tensor y = linear.forward(x);
  EXPECT_EQ(y.dims(), (Dims{2, 4, 3}));
  EXPECT_EQ(linear.backward(input(Dims{2, 4, 3}, 4)).dims(), x.dims());
}

TEST(NnModule, DropoutDropsInTrainingOnly) {
  Context context = fast_context();
  nn::Dropout dropout(context, 0.5f);
  const Tensor x = input(Dims{4, 64}, 3);
  const auto y = dropout.forward(x).to_f32();
  const auto xs = x.to_f32();
  int dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(y[i], 2 * xs[i]);
    }
  }
  EXPECT_GT(dropped, 64);
  EXPECT_LT(dropped, 192);
  const auto dx = dropout.backward(Tensor::zeros(Dims{4, 64}, DType::f32)).to_f32();
  EXPECT_EQ(dx, std::vector<float>(dx.size(), 0.0f));
  dropout.eval();
  EXPECT_EQ(dropout.forward(x).to_f32(), xs);
}

TEST(NnModule, SoftmaxRowsSumToOne) {
  Context context = fast_context();
  nn::Softmax softmax(context);
  const auto y = softmax.forward(input(Dims{3, 5, 2, 2}, 3)).to_f32();
  for (int n = 0; n < 3; ++n) {
    for (int p = 0; p < 4; ++p) {
      double total = 0;
      for (int c = 0; c < 5; ++c) total += y[static_cast<std::size_t>((n * 5 + c) * 4 + p)];
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  }
  EXPECT_EQ(softmax.repr(), "Softmax(dim=1)");
  EXPECT_EQ(nn::LogSoftmax(context).repr(), "LogSoftmax(dim=1)");
}

// Per channel of an N x C x H x W host tensor: the mean and the unbiased variance.
std::pair<std::vector<double>, std::vector<double>> channel_statistics(const Tensor& x) {
  const auto values = x.to_f32();
  const std::int64_t n = x.dims()[0], c = x.dims()[1], hw = x.dims()[2] * x.dims()[3];
  std::vector<double> mean(static_cast<std::size_t>(c)), var(static_cast<std::size_t>(c));
  for (std::int64_t k = 0; k < c; ++k) {
    double sum = 0, squares = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t p = 0; p < hw; ++p)
        sum += values[static_cast<std::size_t>((i * c + k) * hw + p)];
    }
    const double m = sum / static_cast<double>(n * hw);
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t p = 0; p < hw; ++p) {
        const double d = values[static_cast<std::size_t>((i * c + k) * hw + p)] - m;
        squares += d * d;
      }
    }
    mean[static_cast<std::size_t>(k)] = m;
    var[static_cast<std::size_t>(k)] = squares / static_cast<double>(n * hw - 1);
  }
  return {mean, var};
}

TEST(NnModule, BatchNormMomentumNoneKeepsTheCumulativeAverage) {
  for (BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context(backend);
    nn::BatchNormOptions options;
    options.momentum = std::nullopt;
    nn::BatchNorm2d norm(context, 3, options);
    EXPECT_EQ(norm.repr(),
              "BatchNorm2d(3, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");
    std::vector<double> mean(3, 0.0), var(3, 1.0);
    for (int step = 1; step <= 4; ++step) {
      // Batches of other means and spreads.
      Tensor x = input(Dims{4, 3, 3, 2}, 40 + static_cast<std::uint64_t>(step));
      auto* data = static_cast<float*>(x.data());
      for (std::int64_t i = 0; i < x.numel(); ++i) data[i] = data[i] * float(step) + float(step);
      const auto [batch_mean, batch_var] = channel_statistics(x);
      for (std::size_t k = 0; k < 3; ++k) {
        mean[k] += (batch_mean[k] - mean[k]) / step;
        var[k] += (batch_var[k] - var[k]) / step;
      }
      norm.forward(x);
      const auto state = norm.state_dict();
      const auto running_mean = state[2].second.to_f32();
      const auto running_var = state[3].second.to_f32();
      for (std::size_t k = 0; k < 3; ++k) {
        EXPECT_NEAR(running_mean[k], mean[k], 1e-5 * (1 + std::abs(mean[k])))
            << to_string(backend) << " step " << step << " channel " << k;
        EXPECT_NEAR(running_var[k], var[k], 1e-5 * (1 + var[k]))
            << to_string(backend) << " step " << step << " channel " << k;
      }
      EXPECT_EQ(norm.num_batches_tracked(), step);
    }
    // The first batch's statistics are kept to f32 precision, a tiny variance too (not rounded
    // against the initial running_var of 1).
    nn::BatchNorm2d fresh(context, 3, options);
    Tensor tiny = input(Dims{4, 3, 3, 2}, 50);
    auto* data = static_cast<float*>(tiny.data());
    for (std::int64_t i = 0; i < tiny.numel(); ++i) data[i] *= 1e-4f;
    fresh.forward(tiny);
    const auto tiny_var = channel_statistics(tiny).second;
    const auto running_var = fresh.state_dict()[3].second.to_f32();
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(running_var[k], tiny_var[k], 1e-5 * tiny_var[k]) << to_string(backend) << k;
    }
  }
  Context context = fast_context();
  nn::BatchNormOptions bad;
  bad.momentum = 1.5;
  EXPECT_THROW(nn::BatchNorm2d(context, 3, bad), Error);
}

TEST(NnModule, EvalModeForwardKeepsWhatBackwardNeeds) {
  Context context = fast_context();
  nn::BatchNorm2d norm(context, 3);
  // Running statistics of two training forwards, then frozen.
  norm.forward(input(Dims{4, 3, 3, 3}, 60));
  norm.forward(input(Dims{4, 3, 3, 3}, 61));
  static_cast<float*>(norm.weight().value.data())[1] = 1.5f;
  norm.eval();
  norm.zero_grad();
  const Tensor x = input(Dims{2, 3, 2, 2}, 62);
  const Tensor dy = input(Dims{2, 3, 2, 2}, 63);
  norm.forward(x);
  const Tensor dx = norm.backward(dy);
  const auto state = norm.state_dict();
  const auto rm = state[2].second.to_f32(), rv = state[3].second.to_f32();
  const auto gamma = norm.weight().value.to_f32();
  const auto xs = x.to_f32(), dys = dy.to_f32(), dxs = dx.to_f32();
  const auto dgamma = norm.weight().grad.to_f32(), dbeta = norm.bias().grad.to_f32();
  for (std::size_t k = 0; k < 3; ++k) {
    const double inv_std = 1.0 / std::sqrt(double(rv[k]) + 1e-5);
    double want_gamma = 0, want_beta = 0;
    for (std::size_t n = 0; n < 2; ++n) {
      for (std::size_t p = 0; p < 4; ++p) {
        const std::size_t i = (n * 3 + k) * 4 + p;
        EXPECT_NEAR(dxs[i], dys[i] * gamma[k] * inv_std, 1e-5) << i;
        want_gamma += dys[i] * (xs[i] - rm[k]) * inv_std;
        want_beta += dys[i];
      }
    }
    EXPECT_NEAR(dgamma[k], want_gamma, 1e-5) << k;
    EXPECT_NEAR(dbeta[k], want_beta, 1e-5) << k;
  }
  EXPECT_EQ(norm.num_batches_tracked(), 2);

  // Dropout in eval mode: the identity both ways.
  nn::Dropout dropout(context, 0.5f);
  dropout.eval();
  EXPECT_EQ(dropout.forward(x).data(), x.data());
  EXPECT_EQ(dropout.backward(dy).data(), dy.data());

  // A whole model in eval mode: forward, loss, backward, every parameter gradient written.
  nn::manual_seed(3);
  auto model = nn::models::fashion_cnn(context);
  model->eval();
  model->zero_grad();
  nn::CrossEntropyLoss criterion(context);
  criterion.forward(model->forward(input(Dims{2, 1, 28, 28}, 64)), labels(2, 10, 65));
  const Tensor diff_input = model->backward(criterion.backward());
  EXPECT_EQ(diff_input.dims(), (Dims{2, 1, 28, 28}));
  for (auto& [name, parameter] : model->named_parameters()) {
    EXPECT_TRUE(parameter->grad_live) << name;
  }

  // Under NoGradGuard nothing is kept (in either mode); guards nest.
  EXPECT_TRUE(nn::is_grad_enabled());
  {
    nn::NoGradGuard outer;
    {
      nn::NoGradGuard inner;
      EXPECT_FALSE(nn::is_grad_enabled());
    }
    EXPECT_FALSE(nn::is_grad_enabled());
    model->forward(input(Dims{2, 1, 28, 28}, 66));
    EXPECT_THROW(model->backward(input(Dims{2, 10}, 67)), Error);
    model->train();
    model->forward(input(Dims{2, 1, 28, 28}, 66));
    try {
      model->backward(input(Dims{2, 10}, 67));
      ADD_FAILURE() << "a backward after a forward under NoGradGuard ran";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(error.what()).find("without a forward"), std::string::npos)
          << error.what();
    }
  }
  EXPECT_TRUE(nn::is_grad_enabled());
}

TEST(NnModule, SgdStepsLowerTheLoss) {
  Context context = fast_context();
  nn::manual_seed(21);
  auto model = nn::models::fashion_cnn(context);
  nn::CrossEntropyLoss criterion(context);
  nn::SGD sgd(context, model->parameters(), SgdHyper{0.05, 0.9, 0.0, 0.0});
  const Tensor x = input(Dims{8, 1, 28, 28}, 30);
  const Tensor y = labels(8, 10, 31);
  std::vector<float> losses;
  for (int step = 0; step < 12; ++step) {
    sgd.zero_grad();
    losses.push_back(criterion.forward(model->forward(x), y).to_f32()[0]);
    model->backward(criterion.backward());
    sgd.step();
  }
  // Eight samples are memorised quickly.
  EXPECT_LT(losses.back(), 0.25f * losses.front()) << ::testing::PrintToString(losses);
}

}  // namespace
}  // namespace dnnx::test::nn
