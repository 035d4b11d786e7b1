// dnnx::nn on the cudnn backend (label gpu; skipped without a GPU): the Fashion CNN and a
// ResNet-18 moved there with nn::convert give the reference backend's logits, input gradients and
// parameter gradients; f16 with f32 master weights trains; per-layer fixed ids run there; LSTM
// and GRU modules (dropout between layers, lengths) match the reference; batch norm's
// momentum=None and a backward through an eval-mode model match the reference; nn::GradScaler
// skips steps with an inf gradient and backs off on the device.

#include "nn/nn_test_util.hpp"
#include "support/gpu.hpp"

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

Tensor to_device(const Tensor& host, Context& context) { return device_copy(host, context); }

// Runs one training step (forward, loss, backward) of `model` on (x, y) and returns the logits,
// the input gradient and every parameter gradient as host f32 vectors.
std::vector<std::vector<float>> step(nn::Module& model, Context& context, const Tensor& x,
                                     const Tensor& y) {
  nn::CrossEntropyLoss loss(context);
  model.zero_grad();
  const bool device = context.backend() == BackendKind::cudnn;
  const Tensor input = device ? to_device(x, context) : x;
  const Tensor labels = device ? to_device(y, context) : y;
  const Tensor logits = model.forward(input);
  loss.forward(logits, labels);
  const Tensor dx = model.backward(loss.backward());
  std::vector<std::vector<float>> out;
  const auto host = [&](const Tensor& t) { return device ? host_copy_of(t).to_f32() : t.to_f32(); };
  out.push_back(host(logits));
  out.push_back(host(dx));
  for (auto* parameter : model.parameters()) out.push_back(host(parameter->grad));
  return out;
}

void expect_same_step(const std::shared_ptr<nn::Module>& model, const Dims& dims,
                      std::int64_t classes, double rtol, double atol) {
  Context reference(BackendKind::reference);
  Context gpu = gpu_test_context();
  const Tensor x = input(dims, 3);
  const Tensor y = labels(dims[0], classes, 4);
  const auto want = step(*model, reference, x, y);
  nn::convert(*model, gpu);
  const auto got = step(*model, gpu, x, y);
  ASSERT_EQ(got.size(), want.size());
  // Each tensor against its own scale (gradients of early layers are small), but at least 1% of
  // the largest parameter gradient's: a convolution's bias in front of a batch-norm has a zero
  // gradient, whose computed value is rounding noise on either backend.
  float largest = 0;
  for (std::size_t i = 2; i < want.size(); ++i)
    for (float v : want[i]) largest = std::max(largest, std::abs(v));
  for (std::size_t i = 0; i < got.size(); ++i) {
    float scale = i >= 2 ? 0.01f * largest : 0.0f;
    for (float v : want[i]) scale = std::max(scale, std::abs(v));
    EXPECT_LE(worst_ratio(got[i], want[i], rtol, atol * scale), 1.0) << "tensor " << i;
  }
}

TEST(NnCudnn, FashionCnnMatchesReference) {
  DNNX_REQUIRE_GPU();
  nn::manual_seed(1);
  // TF32 may serve f32 convolutions and matmuls on the GPU: 1e-3 of each tensor's scale.
  expect_same_step(nn::models::fashion_cnn(Context(BackendKind::reference)), Dims{8, 1, 28, 28}, 10,
                   1e-2, 2e-3);
}

TEST(NnCudnn, ResNet18MatchesReference) {
  DNNX_REQUIRE_GPU();
  nn::manual_seed(2);
  // 48x48 leaves layer4 2x2 positions: with batch 4, each of its batch-norms normalises 16
  // values (at 32x32 and batch 2, two, where rounding differences decide the outputs).
  expect_same_step(nn::models::resnet18(Context(BackendKind::reference), 10, 3), Dims{4, 3, 48, 48},
                   10, 1e-2, 5e-3);
}

// f16 compute with f32 master weights (batch-norm kept in f32, as nn::convert's exclusion allows)
// follows the same model's f32 training on the GPU step by step and learns. The learning rate
// keeps the loss curve smooth: at 0.05 with momentum 0.9 this model's loss spikes (to 3.5x its
// start within five steps, in f32 on every backend), and where a spike falls depends on rounding.
TEST(NnCudnn, HalfTrainingWithMasterWeights) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context half(BackendKind::cudnn, 0, TypeConfig::half);
  half.set_choice_cache(gpu.choice_cache());
  nn::manual_seed(3);
  auto model = nn::models::fashion_cnn(gpu);
  nn::manual_seed(3);
  auto full = nn::models::fashion_cnn(gpu);
  nn::convert(*model, half, [](const std::string&, const nn::Module& module) {
    return module.type_name().starts_with("BatchNorm");
  });
  nn::CrossEntropyLoss criterion(half), full_criterion(gpu);
  const SgdHyper hyper{0.01, 0.9, 0.0, 0.0};
  nn::SGD sgd(half, model->parameters(), hyper);
  nn::SGD full_sgd(gpu, full->parameters(), hyper);
  const Tensor x32 = random_tensor(Dims{16, 1, 28, 28}, DType::f32, Layout::channels_first, 5);
  Tensor x16 = Tensor::empty(x32.dims(), DType::f16);
  x16.copy_from_f32(x32.to_f32());
  const Tensor x = to_device(x16, half), x_full = to_device(x32, gpu);
  const Tensor y = to_device(labels(16, 10, 6), half);
  std::vector<float> losses, full_losses;
  for (int i = 0; i < 10; ++i) {
    sgd.zero_grad();
    losses.push_back(host_copy_of(criterion.forward(model->forward(x), y)).to_f32()[0]);
    model->backward(criterion.backward());
    sgd.step();
    full_sgd.zero_grad();
    full_losses.push_back(
        host_copy_of(full_criterion.forward(full->forward(x_full), y)).to_f32()[0]);
    full->backward(full_criterion.backward());
    full_sgd.step();
    // f16 activations and gradients: about 1e-3 relative per step, growing with the steps.
    EXPECT_NEAR(losses.back(), full_losses.back(), 0.02 * full_losses.back() + 1e-2)
        << "step " << i;
  }
  EXPECT_LT(losses.back(), 0.5f * losses.front());
}

// Small models whose training on the cudnn backend is followed step by step against the
// reference backend: each adds one kind of layer to the one before, so the first that departs
// names the layer whose repeated use goes wrong.
std::shared_ptr<nn::Sequential> small_model(const std::string& name, const Context& context) {
  auto model = std::make_shared<nn::Sequential>(context);
  if (name == "fashion") return nn::models::fashion_cnn(context);
  nn::ConvOptions same;
  same.padding = {1};
  const std::vector<std::int64_t> three{3}, two{2};
  if (name == "mlp") {
    model->push_back(std::make_shared<nn::Flatten>(context));
    model->push_back(std::make_shared<nn::Linear>(context, 144, 32));
    model->push_back(std::make_shared<nn::ReLU>(context, true));
    model->push_back(std::make_shared<nn::Linear>(context, 32, 10));
    return model;
  }
  model->push_back(std::make_shared<nn::Conv2d>(context, 1, 8, three, same));
  if (name != "conv") model->push_back(std::make_shared<nn::BatchNorm2d>(context, 8));
  if (name == "conv_bn_relu" || name == "conv_bn_relu_pool")
    model->push_back(std::make_shared<nn::ReLU>(context, true));
  const bool pool = name == "conv_bn_relu_pool";
  if (pool) model->push_back(std::make_shared<nn::MaxPool2d>(context, two));
  model->push_back(std::make_shared<nn::Flatten>(context));
  model->push_back(std::make_shared<nn::Linear>(context, pool ? 8 * 6 * 6 : 8 * 12 * 12, 10));
  return model;
}

class NnCudnnSteps : public ::testing::TestWithParam<std::string> {};

TEST_P(NnCudnnSteps, TrainingFollowsTheReferenceStepByStep) {
  DNNX_REQUIRE_GPU();
  const std::string name = GetParam();
  const Dims dims = name == "fashion" ? Dims{8, 1, 28, 28} : Dims{8, 1, 12, 12};
  Context reference(BackendKind::reference);
  Context gpu = gpu_test_context();
  nn::manual_seed(11);
  auto ours = small_model(name, reference);
  nn::manual_seed(11);
  auto theirs = small_model(name, reference);
  nn::convert(*ours, gpu);
  const Tensor x = input(dims, 3);
  const Tensor y = labels(dims[0], 10, 4);
  const SgdHyper hyper{0.01, 0.9, 0.0, 0.0};
  nn::SGD sgd_ours(gpu, ours->parameters(), hyper);
  nn::SGD sgd_theirs(reference, theirs->parameters(), hyper);
  // Each tensor against its scale at the first step (at least 1% of the largest parameter
  // gradient's, as in expect_same_step): the gradients shrink as the loss falls, and an error
  // that is small against the first step's gradients is the rounding the steps carry along.
  std::vector<float> scales;
  for (int s = 0; s < 5; ++s) {
    const auto got = step(*ours, gpu, x, y);
    const auto want = step(*theirs, reference, x, y);
    ASSERT_EQ(got.size(), want.size());
    if (scales.empty()) {
      float largest = 0;
      for (std::size_t i = 2; i < want.size(); ++i)
        for (float v : want[i]) largest = std::max(largest, std::abs(v));
      for (std::size_t i = 0; i < want.size(); ++i) {
        float scale = i >= 2 ? 0.01f * largest : 0.0f;
        for (float v : want[i]) scale = std::max(scale, std::abs(v));
        scales.push_back(scale);
      }
    }
    std::cout << "  " << name << " step " << s << ":";
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double ratio = worst_ratio(got[i], want[i], 1e-2, 2e-3 * scales[i]);
      std::cout << " " << ratio;
      EXPECT_LE(ratio, 1.0) << name << ": step " << s << ", tensor " << i
                            << " (0 logits, 1 input gradient, then the parameters' gradients)";
    }
    std::cout << "\n";
    sgd_ours.step();
    sgd_theirs.step();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, NnCudnnSteps,
                         ::testing::Values("mlp", "conv", "conv_bn", "conv_bn_relu",
                                           "conv_bn_relu_pool", "fashion"));

TEST(NnCudnn, FixedIdPerLayer) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  nn::Conv2d conv(gpu, 8, 16, {3}, nn::ConvOptions{{1}, {1}, {1}, 1, true});
  const Tensor x = to_device(input(Dims{4, 8, 16, 16}, 1), gpu);
  const ConvDesc desc = ConvDesc::from_shapes(x.dims(), conv.weight().value.dims(), {1}, {1});
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    for (const AlgoInfo& algo : conv_list(gpu, desc, direction)) {
      if (!algo.supported || algo.naive) continue;
      conv.policy(direction) = AlgoPolicy::fixed(algo.id);
      const Tensor y = conv.forward(x);
      conv.backward(to_device(input(y.dims(), 2), gpu));
      EXPECT_EQ(conv.choice(direction)->algo.id, algo.id);
    }
    conv.policy(direction) = AlgoPolicy::heuristic();
  }
  std::cout << nn::report(conv).table();
}

// Recurrent layers moved to the GPU with nn::convert compute the reference's outputs, final
// states and gradients. The LSTM has dropout between its layers, which runs the layers one at a
// time with the dropout op (Note [rnn module dropout]): with the same seed both backends draw the
// same masks. cuDNN rounds each layer's output to f32 and accumulates in its own order: 2e-4 of
// each tensor's scale.
TEST(NnCudnn, RecurrentLayersMatchReference) {
  DNNX_REQUIRE_GPU();
  Context reference(BackendKind::reference);
  Context gpu = gpu_test_context();
  nn::RnnOptions options;
  options.num_layers = 2;
  options.bidirectional = true;
  options.dropout = 0.3;
  nn::manual_seed(4);
  nn::LSTM lstm(reference, 5, 16, options);
  nn::RnnOptions gru_options;
  gru_options.batch_first = true;
  nn::GRU gru(reference, 5, 12, gru_options);
  const Tensor x = input(Dims{7, 3, 5}, 1);
  const Tensor h0 = input(Dims{4, 3, 16}, 2), c0 = input(Dims{4, 3, 16}, 3);
  const Tensor dy = input(Dims{7, 3, 32}, 4), dh = input(Dims{4, 3, 16}, 5);
  Tensor lengths = Tensor::empty(Dims{3}, DType::i64);
  for (std::int64_t n = 0; n < 3; ++n) static_cast<std::int64_t*>(lengths.data())[n] = 7 - 2 * n;
  const auto run = [&](Context& context) {
    const bool device = context.backend() == BackendKind::cudnn;
    const auto on = [&](const Tensor& t) { return device ? device_copy(t, context) : t; };
    const auto host = [&](const Tensor& t) {
      return device ? host_copy_of(t).to_f32() : t.to_f32();
    };
    std::vector<std::vector<float>> out;
    lstm.zero_grad();
    gru.zero_grad();
    nn::manual_seed(9);
    const nn::RnnOutput a = lstm.forward(on(x), on(h0), on(c0), lengths);
    const nn::RnnGradients ga = lstm.backward(on(dy), on(dh));
    const nn::RnnOutput b = gru.forward(on(input(Dims{3, 7, 5}, 6)), Tensor(), Tensor(), lengths);
    const Tensor db = gru.backward(on(input(Dims{3, 7, 12}, 7)));
    for (const Tensor& t : {a.output, a.h_n, a.c_n, ga.diff_input, ga.diff_h0, ga.diff_c0,
                            lstm.flat_grads(), b.output, b.h_n, db, gru.flat_grads()}) {
      out.push_back(host(t));
    }
    return out;
  };
  const auto want = run(reference);
  nn::convert(lstm, gpu);
  nn::convert(gru, gpu);
  const auto got = run(gpu);
  EXPECT_EQ(lstm.choice(Direction::fwd_training)->backend, "cudnn");
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    float scale = 0;
    for (float v : want[i]) scale = std::max(scale, std::abs(v));
    EXPECT_LE(worst_ratio(got[i], want[i], 0, 2e-4 * scale), 1.0) << "tensor " << i;
  }
}

// channels_last on the GPU (Note [nn layouts]): ResNet-18 and a conv -> flatten -> linear net
// (whose flatten of an NHWC tensor with a spatial extent goes through the host) run in f16 and
// f32 with NHWC inputs and OHWI weights (nn::to_layout) follow the reference backend's NCHW f32
// step: logits, input gradient, every parameter gradient; the cudnn results keep channels_last.
TEST(NnCudnn, ChannelsLastMatchesReference) {
  DNNX_REQUIRE_GPU();
  const auto flatten_net = [](const Context& context) -> std::shared_ptr<nn::Module> {
    auto model = std::make_shared<nn::Sequential>(context);
    nn::ConvOptions same;
    same.padding = {1};
    model->push_back(
        std::make_shared<nn::Conv2d>(context, 3, 8, std::vector<std::int64_t>{3}, same));
    model->push_back(std::make_shared<nn::BatchNorm2d>(context, 8));
    model->push_back(std::make_shared<nn::ReLU>(context, true));
    model->push_back(std::make_shared<nn::MaxPool2d>(context, std::vector<std::int64_t>{2}));
    model->push_back(std::make_shared<nn::Flatten>(context));
    model->push_back(std::make_shared<nn::Linear>(context, 8 * 6 * 6, 10));
    return model;
  };
  const auto resnet = [](const Context& context) -> std::shared_ptr<nn::Module> {
    return nn::models::resnet18(context, 10, 3);
  };
  struct Case {
    const char* name;
    std::function<std::shared_ptr<nn::Module>(const Context&)> build;
    Dims dims;
  };
  for (const Case& c : {Case{"flatten_net", flatten_net, Dims{4, 3, 12, 12}},
                        Case{"resnet18", resnet, Dims{4, 3, 48, 48}}}) {
    for (TypeConfig type : {TypeConfig::float32, TypeConfig::half}) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(to_string(type)));
      Context reference(BackendKind::reference);
      Context gpu(BackendKind::cudnn, 0, type);
      gpu.set_choice_cache(std::make_shared<ChoiceCache>());
      const DType dtype = dtype_of(type);
      nn::manual_seed(4);
      auto want_model = c.build(reference);
      const Tensor x = input(c.dims, 3);
      const Tensor y = labels(c.dims[0], 10, 4);
      const auto want = step(*want_model, reference, x, y);
      // One training step on the GPU with the input and the weights in `layout`.
      const auto run = [&](Layout layout) {
        nn::manual_seed(4);
        auto model = c.build(gpu);
        nn::to_layout(*model, layout);
        nn::CrossEntropyLoss loss(gpu);
        model->zero_grad();
        Tensor typed = Tensor::empty(x.dims(), dtype, layout);
        typed.copy_from_f32(x.to_f32());
        const Tensor logits = model->forward(device_copy(typed, gpu));
        loss.forward(logits, device_copy(y, gpu));
        const Tensor dx = model->backward(loss.backward());
        EXPECT_TRUE(dx.is_dense(layout)) << describe(dx);
        std::vector<std::vector<float>> got{host_copy_of(logits).to_f32(),
                                            host_copy_of(dx).to_f32()};
        for (auto* parameter : model->parameters()) {
          got.push_back(host_copy_of(parameter->grad).to_f32());
        }
        return got;
      };
      const auto got = run(Layout::channels_last);
      ASSERT_EQ(got.size(), want.size());
      float largest = 0;
      for (std::size_t i = 2; i < want.size(); ++i)
        for (float v : want[i]) largest = std::max(largest, std::abs(v));
      const auto scale_of = [&](std::size_t i) {
        float scale = i >= 2 ? 0.01f * largest : 0.0f;
        for (float v : want[i]) scale = std::max(scale, std::abs(v));
        return scale;
      };
      // f16 gradients through a batch norm are far from f32 ones in either layout (Note [f16
      // gradients of a deep model] in layout_test.cpp; 10% of the scale already for the shallow
      // net's first convolution): the channels_last run's distance from the reference must be
      // at most three times the channels_first f16 run's, plus 5% of the scale. The logits, and
      // f32, are compared directly.
      const bool through_nchw = type == TypeConfig::half;
      const auto nchw = through_nchw ? run(Layout::channels_first) : got;
      // f16 activations and gradients: a few 1e-3 of each tensor's scale (f32: TF32 may serve).
      const double atol = type == TypeConfig::half ? 2e-2 : 5e-3;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const float scale = scale_of(i);
        if (!through_nchw || i == 0) {
          EXPECT_LE(worst_ratio(got[i], want[i], 2e-2, atol * scale), 1.0) << "tensor " << i;
          continue;
        }
        const auto error = [&](const std::vector<float>& values) {
          double worst = 0;
          for (std::size_t k = 0; k < values.size(); ++k) {
            if (!std::isfinite(values[k])) return double(INFINITY);
            worst = std::max(worst, double(std::abs(values[k] - want[i][k])));
          }
          return worst / scale;
        };
        EXPECT_LE(error(got[i]), 3 * error(nchw[i]) + 5e-2) << "tensor " << i;
      }
    }
  }
}

// Batch norm with momentum=None over three training steps (running statistics by the bnorm and
// sgd ops on the device), then a step in eval mode (backward through the running statistics):
// the same logits, input and parameter gradients and running statistics as the reference.
TEST(NnCudnn, CumulativeBatchNormAndEvalBackwardMatchReference) {
  DNNX_REQUIRE_GPU();
  Context reference(BackendKind::reference);
  Context gpu = gpu_test_context();
  const auto build = [](const Context& context) {
    nn::manual_seed(9);
    nn::BatchNormOptions cumulative;
    cumulative.momentum = std::nullopt;
    auto model = std::make_shared<nn::Sequential>(context);
    nn::ConvOptions same;
    same.padding = {1};
    model->push_back(
        std::make_shared<nn::Conv2d>(context, 3, 8, std::vector<std::int64_t>{3}, same));
    model->push_back(std::make_shared<nn::BatchNorm2d>(context, 8, cumulative));
    model->push_back(std::make_shared<nn::ReLU>(context, true));
    model->push_back(std::make_shared<nn::MaxPool2d>(context, std::vector<std::int64_t>{2}));
    model->push_back(std::make_shared<nn::Dropout>(context, 0.3f));
    model->push_back(std::make_shared<nn::Flatten>(context));
    model->push_back(std::make_shared<nn::Linear>(context, 8 * 4 * 4, 5));
    return model;
  };
  auto want_model = build(reference);
  auto got_model = build(reference);
  nn::convert(*got_model, gpu);
  for (int i = 0; i < 4; ++i) {
    if (i == 3) {
      want_model->eval();
      got_model->eval();
    }
    const Tensor x = input(Dims{4, 3, 8, 8}, 70 + static_cast<std::uint64_t>(i));
    const Tensor y = labels(4, 5, 80 + static_cast<std::uint64_t>(i));
    nn::manual_seed(100 + static_cast<std::uint64_t>(i));  // the same dropout masks
    const auto want = step(*want_model, reference, x, y);
    nn::manual_seed(100 + static_cast<std::uint64_t>(i));
    const auto got = step(*got_model, gpu, x, y);
    // As expect_same_step: in training mode the convolution's bias in front of the batch-norm
    // has a zero gradient, rounding noise on either backend, so each parameter gradient's scale is
    // at least 1% of the largest one's.
    float largest = 0;
    for (std::size_t t = 2; t < want.size(); ++t)
      for (float v : want[t]) largest = std::max(largest, std::abs(v));
    for (std::size_t t = 0; t < got.size(); ++t) {
      float scale = t >= 2 ? 0.01f * largest : 0.0f;
      for (float v : want[t]) scale = std::max(scale, std::abs(v));
      EXPECT_LE(worst_ratio(got[t], want[t], 1e-2, 2e-3 * scale), 1.0)
          << "step " << i << " tensor " << t;
    }
    const auto want_state = want_model->state_dict();
    const auto got_state = got_model->state_dict();
    for (std::size_t t = 0; t < want_state.size(); ++t) {
      if (want_state[t].second.dtype() != DType::f32) continue;
      EXPECT_LE(worst_ratio(host_copy_of(got_state[t].second).to_f32(),
                            want_state[t].second.to_f32(), 1e-3, 1e-4),
                1.0)
          << want_state[t].first << " after step " << i;
    }
  }
}

// nn::GradScaler on the GPU in f16 with f32 master weights: with a dynamic scale the loss goes
// down, the scale grows every growth_interval finite steps, and an inf in a gradient skips the
// step (master copies and f32 parameters unchanged) and halves the scale, all decided on the
// device.
TEST(NnCudnn, GradScalerSkipsAndBacksOffOnTheDevice) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context half(BackendKind::cudnn, 0, TypeConfig::half);
  half.set_choice_cache(gpu.choice_cache());
  nn::manual_seed(4);
  auto model = nn::models::fashion_cnn(gpu);
  nn::convert(*model, half, [](const std::string&, const nn::Module& module) {
    return module.type_name().starts_with("BatchNorm");
  });
  nn::CrossEntropyLoss criterion(half);
  nn::SGD sgd(half, model->parameters(), SgdHyper{0.01, 0.9});
  nn::GradScalerOptions options;
  options.init_scale = 128;
  options.growth_interval = 2;
  nn::GradScaler scaler(half, options);
  const Tensor x32 = random_tensor(Dims{8, 1, 28, 28}, DType::f32, Layout::channels_first, 7);
  Tensor x16 = Tensor::empty(x32.dims(), DType::f16);
  x16.copy_from_f32(x32.to_f32());
  const Tensor x = to_device(x16, half);
  const Tensor y = to_device(labels(8, 10, 8), half);
  const auto masters = [&] {
    std::vector<std::vector<float>> out;
    for (nn::Parameter* parameter : model->parameters()) {
      out.push_back(host_copy_of(parameter->master.is_null() ? parameter->value : parameter->master)
                        .to_f32());
    }
    return out;
  };
  std::vector<float> losses;
  const std::vector<float> scales{128, 256, 128, 128, 256, 256};
  for (int i = 0; i < 6; ++i) {
    sgd.zero_grad();
    const Tensor loss = criterion.forward(model->forward(x), y);
    losses.push_back(host_copy_of(loss).to_f32()[0]);
    model->backward(criterion.backward(scaler.loss_gradient(loss)));
    const bool poisoned = i == 2;
    if (poisoned) {
      // An inf in the last layer's bias gradient.
      Tensor& grad = model->parameters().back()->grad;
      Tensor host = host_copy_of(grad);
      Tensor inf = Tensor::empty(host.dims(), host.dtype());
      std::vector<float> values = host.to_f32();
      values[0] = INFINITY;
      inf.copy_from_f32(values);
      copy(inf, grad);
    }
    const auto before = masters();
    scaler.step(sgd);
    EXPECT_EQ(masters() == before, poisoned) << "step " << i;
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), scales[static_cast<std::size_t>(i)]) << "step " << i;
  }
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace dnnx::test::nn
