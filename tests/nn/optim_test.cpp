// nn's optimizers with loss scaling (nn::GradScaler): scaled training equal to unscaled training,
// a non-finite gradient skipping the step and backing the scale off, growth after
// growth_interval steps, the scale sequence of torch.cuda.amp.GradScaler's algorithm
// (torch._amp_update_scale_, which Debian's CPU torch lacks: replayed here from its definition),
// static and disabled scalers, unscale_ before step, and the call-order errors.

#include "nn/nn_test_util.hpp"

#include <cmath>
#include <memory>
#include <vector>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

std::shared_ptr<nn::Sequential> small_model(const Context& context) {
  nn::manual_seed(5);
  auto model = std::make_shared<nn::Sequential>(context);
  model->push_back(std::make_shared<nn::Linear>(context, 6, 5));
  model->push_back(std::make_shared<nn::ReLU>(context));
  model->push_back(std::make_shared<nn::Linear>(context, 5, 3));
  return model;
}

std::vector<std::vector<float>> values_of(nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (nn::Parameter* parameter : model.parameters()) out.push_back(parameter->value.to_f32());
  return out;
}

// One training pass of `model` on batch `step`: the gradients, from a diff_loss of `seed` (ones
// when null).
void backward_pass(nn::Module& model, nn::CrossEntropyLoss& criterion, int step,
                   nn::GradScaler* scaler) {
  const Tensor x = input(Dims{4, 6}, 100 + static_cast<std::uint64_t>(step));
  const Tensor y = labels(4, 3, 200 + static_cast<std::uint64_t>(step));
  const Tensor loss = criterion.forward(model.forward(x), y);
  model.backward(scaler ? criterion.backward(scaler->loss_gradient(loss)) : criterion.backward());
}

// Writes inf into the first element of the first parameter's gradient (a host tensor here).
void poison(nn::Module& model) {
  static_cast<float*>(model.parameters().front()->grad.data())[0] = INFINITY;
}

// torch._amp_update_scale_ on host values.
void torch_update(float& scale, int& tracker, bool found_inf, double growth, double backoff,
                  int interval) {
  if (found_inf) {
    scale = static_cast<float>(scale * backoff);
    tracker = 0;
    return;
  }
  if (++tracker == interval) {
    const float grown = static_cast<float>(scale * growth);
    if (std::isfinite(grown)) scale = grown;
    tracker = 0;
  }
}

// Note [gradients set to none]: zero_grad(true) writes nothing and flags the grads; the backward
// then writes them as after a zero fill, and a step over a parameter no backward reached zeroes
// its grad first (here, with no momentum or weight decay, the parameter does not move).
TEST(NnOptim, GradientsSetToNoneTrainLikeZeroedOnes) {
  Context context = fast_context();
  nn::CrossEntropyLoss criterion(context);
  std::vector<std::vector<float>> trained[2];
  for (const bool set_to_none : {false, true}) {
    auto model = small_model(context);
    nn::SGD sgd(context, model->parameters(), SgdHyper{0.1, 0.9});
    for (int step = 0; step < 3; ++step) {
      // Stale values where the grads should not be read.
      for (nn::Parameter* parameter : model->parameters()) parameter->grad.fill(7.0f);
      sgd.zero_grad(set_to_none);
      for (nn::Parameter* parameter : model->parameters()) {
        EXPECT_FALSE(parameter->grad_live);
        EXPECT_EQ(parameter->grad_none, set_to_none);
      }
      backward_pass(*model, criterion, step, nullptr);
      for (nn::Parameter* parameter : model->parameters()) EXPECT_FALSE(parameter->grad_none);
      sgd.step();
    }
    trained[set_to_none ? 1 : 0] = values_of(*model);
  }
  EXPECT_EQ(trained[0], trained[1]);

  // A parameter the backward never reaches: its stale grad is zeroed before the step.
  auto used = std::make_shared<nn::Linear>(context, 6, 3);
  auto unused = std::make_shared<nn::Linear>(context, 6, 3);
  std::vector<nn::Parameter*> parameters = used->parameters();
  for (nn::Parameter* parameter : unused->parameters()) parameters.push_back(parameter);
  nn::SGD sgd(context, parameters, SgdHyper{0.5});
  const std::vector<std::vector<float>> before = values_of(*unused);
  for (nn::Parameter* parameter : parameters) parameter->grad.fill(7.0f);
  used->zero_grad(true);
  unused->zero_grad(true);
  const Tensor loss = criterion.forward(used->forward(input(Dims{4, 6}, 300)), labels(4, 3, 301));
  ASSERT_EQ(loss.numel(), 1);
  used->backward(criterion.backward());
  sgd.step();
  EXPECT_EQ(values_of(*unused), before);
  for (nn::Parameter* parameter : unused->parameters()) {
    EXPECT_FALSE(parameter->grad_none);
    for (float g : parameter->grad.to_f32()) EXPECT_EQ(g, 0.0f);
  }
}

TEST(NnGradScaler, ScaledTrainingEqualsUnscaled) {
  // Powers of two scale exactly: the scaled run's updates are the unscaled run's, bit for bit
  // up to the order of f32 operations.
  Context context = fast_context();
  auto plain = small_model(context);
  auto scaled = small_model(context);
  nn::CrossEntropyLoss criterion(context);
  nn::SGD plain_sgd(context, plain->parameters(), SgdHyper{0.1, 0.9});
  nn::SGD scaled_sgd(context, scaled->parameters(), SgdHyper{0.1, 0.9});
  nn::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  nn::GradScaler scaler(context, options);
  float scale = 1024;
  int tracker = 0;
  for (int step = 0; step < 5; ++step) {
    plain_sgd.zero_grad();
    backward_pass(*plain, criterion, step, nullptr);
    plain_sgd.step();
    scaled_sgd.zero_grad();
    backward_pass(*scaled, criterion, step, &scaler);
    scaler.step(scaled_sgd);
    scaler.update();
    torch_update(scale, tracker, false, 2.0, 0.5, 2);
    EXPECT_EQ(scaler.get_scale(), scale) << "step " << step;
  }
  EXPECT_EQ(scale, 4096.0f);
  const auto want = values_of(*plain);
  const auto got = values_of(*scaled);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(worst_ratio(got[i], want[i], 1e-6, 1e-7), 1.0) << "parameter " << i;
  }
}

TEST(NnGradScaler, InfGradientSkipsTheStepAndBacksOff) {
  Context context = fast_context();
  auto model = small_model(context);
  nn::CrossEntropyLoss criterion(context);
  nn::SGD sgd(context, model->parameters(), SgdHyper{0.1, 0.9});
  nn::GradScalerOptions options;
  options.init_scale = 256;
  options.growth_interval = 3;
  nn::GradScaler scaler(context, options);
  // torch's algorithm on a pattern of finite and non-finite steps.
  const std::vector<bool> pattern{false, true, false, false, false, false, true, true, false};
  float scale = 256;
  int tracker = 0;
  for (std::size_t step = 0; step < pattern.size(); ++step) {
    sgd.zero_grad();
    backward_pass(*model, criterion, static_cast<int>(step), &scaler);
    if (pattern[step]) poison(*model);
    const auto before = values_of(*model);
    scaler.step(sgd);
    const auto after = values_of(*model);
    if (pattern[step]) {
      EXPECT_EQ(after, before) << "step " << step << " was not skipped";
      EXPECT_EQ(scaler.found_inf().to_f32()[0], 1.0f);
    } else {
      EXPECT_NE(after, before) << "step " << step << " was skipped";
      EXPECT_EQ(scaler.found_inf().to_f32()[0], 0.0f);
    }
    scaler.update();
    torch_update(scale, tracker, pattern[step], 2.0, 0.5, 3);
    EXPECT_EQ(scaler.get_scale(), scale) << "step " << step;
    EXPECT_EQ(static_cast<const std::int32_t*>(scaler.growth_tracker().data())[0], tracker)
        << "step " << step;
  }
  // 256 -> 128 (inf) -> 256 (three finite) -> 128 -> 64 (two infs).
  EXPECT_EQ(scale, 64.0f);
  // The seed of the next backward is the new scale, in the loss's dtype.
  const Tensor loss = criterion.forward(model->forward(input(Dims{4, 6}, 1)), labels(4, 3, 2));
  const Tensor seed = scaler.loss_gradient(loss);
  EXPECT_EQ(seed.dims(), loss.dims());
  EXPECT_EQ(seed.dtype(), loss.dtype());
  EXPECT_EQ(seed.to_f32(), std::vector<float>(static_cast<std::size_t>(loss.numel()), 64.0f));
}

TEST(NnGradScaler, UnscaleBeforeStepGivesTheTrueGradients) {
  Context context = fast_context();
  auto plain = small_model(context);
  auto scaled = small_model(context);
  nn::CrossEntropyLoss criterion(context);
  nn::Adam plain_adam(context, plain->parameters(), AdamHyper{.lr = 0.01});
  nn::Adam scaled_adam(context, scaled->parameters(), AdamHyper{.lr = 0.01});
  nn::GradScaler scaler(context);  // 65536, a power of two
  for (int step = 0; step < 3; ++step) {
    plain_adam.zero_grad();
    backward_pass(*plain, criterion, step, nullptr);
    scaled_adam.zero_grad();
    backward_pass(*scaled, criterion, step, &scaler);
    scaler.unscale_(scaled_adam);
    const auto plain_parameters = plain->parameters();
    const auto scaled_parameters = scaled->parameters();
    for (std::size_t i = 0; i < plain_parameters.size(); ++i) {
      EXPECT_LE(worst_ratio(scaled_parameters[i]->grad.to_f32(), plain_parameters[i]->grad.to_f32(),
                            1e-6, 1e-8),
                1.0)
          << "gradient " << i << " at step " << step;
    }
    plain_adam.step();
    scaler.step(scaled_adam);
    scaler.update();
  }
  const auto want = values_of(*plain);
  const auto got = values_of(*scaled);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(worst_ratio(got[i], want[i], 1e-6, 1e-7), 1.0) << "parameter " << i;
  }
}

TEST(NnGradScaler, StaticAndDisabledScalers) {
  Context context = fast_context();
  auto model = small_model(context);
  nn::CrossEntropyLoss criterion(context);
  nn::SGD sgd(context, model->parameters(), SgdHyper{0.1});
  nn::GradScalerOptions options;
  options.init_scale = 100;  // not a power of two: fine for a static scale
  options.dynamic = false;
  nn::GradScaler fixed(context, options);
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    backward_pass(*model, criterion, step, &fixed);
    if (step == 1) poison(*model);
    const auto before = values_of(*model);
    fixed.step(sgd);
    EXPECT_EQ(values_of(*model) == before, step == 1) << "step " << step;
    fixed.update();
    EXPECT_EQ(fixed.get_scale(), 100.0f);
  }

  // Disabled: ones as the loss gradient and the plain step, as without a scaler.
  auto plain = small_model(context);
  auto other = small_model(context);
  nn::SGD plain_sgd(context, plain->parameters(), SgdHyper{0.1, 0.5});
  nn::SGD other_sgd(context, other->parameters(), SgdHyper{0.1, 0.5});
  options.enabled = false;
  nn::GradScaler off(context, options);
  for (int step = 0; step < 2; ++step) {
    plain_sgd.zero_grad();
    backward_pass(*plain, criterion, step, nullptr);
    plain_sgd.step();
    other_sgd.zero_grad();
    backward_pass(*other, criterion, step, &off);
    off.unscale_(other_sgd);
    off.step(other_sgd);
    off.update();
  }
  EXPECT_EQ(values_of(*other), values_of(*plain));
  EXPECT_EQ(off.get_scale(), 1.0f);
}

TEST(NnGradScaler, RefusesCallsOutOfOrderAndBadOptions) {
  Context context = fast_context();
  auto model = small_model(context);
  nn::CrossEntropyLoss criterion(context);
  nn::SGD sgd(context, model->parameters(), SgdHyper{0.1});
  nn::GradScaler scaler(context);
  const auto expect = [](const std::string& needle, const auto& call) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect("no step() or unscale_() since the last update()", [&] { scaler.update(); });
  backward_pass(*model, criterion, 0, &scaler);
  scaler.unscale_(sgd);
  expect("unscale_ has already been called", [&] { scaler.unscale_(sgd); });
  scaler.step(sgd);
  expect("step has already been called", [&] { scaler.step(sgd); });
  expect("unscale_ has already been called", [&] { scaler.unscale_(sgd); });
  scaler.update();
  scaler.step(sgd);  // a new iteration
  scaler.update();

  const auto bad = [&](nn::GradScalerOptions options, const std::string& needle) {
    expect(needle, [&] { nn::GradScaler(context, options); });
  };
  nn::GradScalerOptions options;
  options.init_scale = 0;
  bad(options, "init_scale 0 must be finite");
  options = {};
  options.init_scale = 1e39;
  bad(options, "must be finite (in f32)");
  options = {};
  options.growth_factor = 1;
  bad(options, "growth_factor 1 must be finite and > 1");
  options = {};
  options.backoff_factor = 1;
  bad(options, "backoff_factor 1 must be in (0, 1)");
  options = {};
  options.growth_interval = 0;
  bad(options, "growth_interval 0 must be in [1, 2^31 - 1]");
}

}  // namespace
}  // namespace dnnx::test::nn
