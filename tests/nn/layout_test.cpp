// channels_last through dnnx::nn (Note [nn layouts]): every layer kind and ResNet-18 run on a
// channels_last input give what the same model gives on channels_first — the output, the input
// gradient and every parameter gradient and buffer, f32 tightly and f16 within a tolerance — on
// the reference and cpu backends; outputs and gradients keep the input's layout; optimizers,
// state_dict and load_state_dict work on channels_last weights; bad layouts are clear errors.

#include "nn/nn_test_util.hpp"
#include "support/errors.hpp"

#include <functional>
#include <memory>
#include <utility>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

using Build = std::function<std::shared_ptr<nn::Module>(const Context&)>;

struct LayerCase {
  std::string name;
  Dims input;
  Build build;
};

std::vector<BackendKind> backends() {
  std::vector<BackendKind> out{BackendKind::reference};
  if (backend_available(BackendKind::cpu)) out.push_back(BackendKind::cpu);
  return out;
}

Context context_for(BackendKind backend, DType dtype) {
  return Context(backend, 0, dtype == DType::f16 ? TypeConfig::half : TypeConfig::float32);
}

// A host copy of `values` (a host f32 tensor) in `dtype`, dense in `layout`.
Tensor in_layout(const Tensor& values, DType dtype, Layout layout) {
  Tensor out = Tensor::empty(values.dims(), dtype, layout);
  out.copy_from_f32(values.to_f32());
  return out;
}

// Whether a tensor of `dims` is channels_last in memory only in one way (a channel count and a
// spatial extent above 1): then a channels_last result must not be dense channels_first.
bool layouts_differ(const Dims& dims) {
  if (dims.rank() < 3 || dims[1] == 1) return false;
  std::int64_t spatial = 1;
  for (int i = 2; i < dims.rank(); ++i) spatial *= dims[i];
  return spatial > 1;
}

struct Tolerance {
  double rtol, atol;
};

// atol is relative to the largest element of the expected tensor: gradients of early layers are
// small, and an element near zero is rounding noise in either layout.
Tolerance tolerance(DType dtype, bool deep) {
  if (dtype == DType::f32) return deep ? Tolerance{1e-3, 5e-4} : Tolerance{1e-4, 1e-5};
  return deep ? Tolerance{3e-2, 1e-2} : Tolerance{2e-2, 5e-3};
}

std::vector<float> host_values(const Tensor& t) {
  if (t.device().kind == Device::Kind::cpu) return t.to_f32();
  Tensor host = Tensor::empty(t.dims(), t.dtype());
  copy(t, host);
  return host.to_f32();
}

void expect_near(const Tensor& got, const Tensor& want, Tolerance tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const std::vector<float> expected = host_values(want);
  float scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(v));
  EXPECT_LE(worst_ratio(host_values(got), expected, tol.rtol, tol.atol * scale), 1.0) << what;
}

// The largest |got - want| over want's largest element.
double scaled_error(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = host_values(got), b = host_values(want);
  double scale = 0, worst = 0;
  for (float v : b) scale = std::max(scale, double(std::abs(v)));
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

// Note [f16 gradients of a deep model]
// A ResNet's f16 backward on small batches is far from its f32 one in either layout (batch norms
// over a few values amplify rounding: 20% of a tensor's scale and more on every backend, the
// reference included), so two f16 runs that round differently cannot be held to a fixed
// tolerance. What the channels_last run must show is that the layout adds no error of its own
// beyond that noise: its distance from the f32 channels_first gradients is at most three times
// the f16 channels_first run's, plus 5% of the scale. A wrong memory order (a gradient routed to
// the wrong channel or position) is off by the whole scale. The f32 runs and the single layers
// in f16 are compared directly.
void expect_within_f16_noise(const Tensor& last, const Tensor& first, const Tensor& f32,
                             const std::string& what) {
  const double last_error = scaled_error(last, f32);
  const double first_error = scaled_error(first, f32);
  EXPECT_LE(last_error, 3 * first_error + 5e-2)
      << what << ": channels_last f16 is " << last_error << " of the scale from f32, "
      << "channels_first f16 " << first_error;
}

// Runs `build`'s model twice from one seed, channels_first and channels_last, forward (training
// mode) and backward, and compares everything the two leave. With `deep` and f16 the gradients
// are compared through an f32 channels_first run (Note [f16 gradients of a deep model]).
void expect_same_in_both_layouts(const std::string& name, const Dims& input_dims,
                                 const Build& build, BackendKind backend, DType dtype,
                                 float diff_scale = 1.0f, bool deep = false) {
  SCOPED_TRACE(name + " on " + std::string(to_string(backend)) + " " +
               std::string(to_string(dtype)));
  const Context context = context_for(backend, dtype);
  nn::manual_seed(5);
  std::shared_ptr<nn::Module> first = build(context);
  nn::manual_seed(5);
  std::shared_ptr<nn::Module> last = build(context);
  nn::to_layout(*last, Layout::channels_last);
  const Tolerance tol = tolerance(dtype, deep);

  const Tensor x = input(input_dims, 11);
  nn::manual_seed(9);
  const Tensor y_first = first->forward(in_layout(x, dtype, Layout::channels_first));
  nn::manual_seed(9);
  const Tensor y_last = last->forward(in_layout(x, dtype, Layout::channels_last));
  expect_near(y_last, y_first, tol, name + " output");
  EXPECT_TRUE(y_first.is_dense(Layout::channels_first)) << describe(y_first);
  if (y_last.rank() <= 2 || !layouts_differ(y_last.dims())) {
    EXPECT_TRUE(y_last.layout().has_value()) << describe(y_last);
  } else {
    EXPECT_TRUE(y_last.is_dense(Layout::channels_last)) << describe(y_last);
  }

  Tensor dy = input(y_first.dims(), 12);
  std::vector<float> dy_values = dy.to_f32();
  for (float& v : dy_values) v *= diff_scale;
  dy.copy_from_f32(dy_values);
  const Layout out_layout = y_last.layout().value_or(Layout::channels_first);
  const Tensor dx_first = first->backward(in_layout(dy, dtype, Layout::channels_first));
  const Tensor dx_last = last->backward(in_layout(dy, dtype, out_layout));

  const bool through_f32 = deep && dtype != DType::f32;
  std::shared_ptr<nn::Module> f32_model;
  Tensor dx_f32;
  if (through_f32) {
    nn::manual_seed(5);
    f32_model = build(context_for(backend, DType::f32));
    nn::manual_seed(9);
    f32_model->forward(x);
    dx_f32 = f32_model->backward(dy);
    expect_within_f16_noise(dx_last, dx_first, dx_f32, name + " input gradient");
  } else {
    expect_near(dx_last, dx_first, tol, name + " input gradient");
  }
  if (layouts_differ(input_dims)) {
    EXPECT_TRUE(dx_last.is_dense(Layout::channels_last)) << describe(dx_last);
  }

  const auto first_parameters = first->named_parameters();
  const auto last_parameters = last->named_parameters();
  ASSERT_EQ(first_parameters.size(), last_parameters.size());
  for (std::size_t i = 0; i < first_parameters.size(); ++i) {
    const auto& [key, parameter] = last_parameters[i];
    EXPECT_EQ(key, first_parameters[i].first);
    if (parameter->value.rank() >= 3 && layouts_differ(parameter->value.dims())) {
      EXPECT_TRUE(parameter->value.is_dense(Layout::channels_last)) << key;
      EXPECT_TRUE(parameter->grad.is_dense(Layout::channels_last)) << key;
    }
    expect_close(parameter->value, first_parameters[i].second->value, 0, 0, key + " value");
    if (through_f32) {
      expect_within_f16_noise(parameter->grad, first_parameters[i].second->grad,
                              f32_model->named_parameters()[i].second->grad, key + " gradient");
    } else {
      expect_near(parameter->grad, first_parameters[i].second->grad, tol, key + " gradient");
    }
  }
  const auto first_buffers = first->named_buffers();
  const auto last_buffers = last->named_buffers();
  ASSERT_EQ(first_buffers.size(), last_buffers.size());
  for (std::size_t i = 0; i < first_buffers.size(); ++i) {
    expect_near(*last_buffers[i].second, *first_buffers[i].second, tol, last_buffers[i].first);
  }
}

std::shared_ptr<nn::Sequential> sequential(const Context& context,
                                           std::vector<std::shared_ptr<nn::Module>> modules) {
  auto model = std::make_shared<nn::Sequential>(context);
  for (auto& module : modules) model->push_back(std::move(module));
  return model;
}

std::vector<LayerCase> layer_cases() {
  using V = std::vector<std::int64_t>;
  std::vector<LayerCase> cases;
  cases.push_back({"conv1d", Dims{2, 3, 9}, [](const Context& c) -> std::shared_ptr<nn::Module> {
                     nn::ConvOptions options;
                     options.stride = {2};
                     options.padding = {1};
                     return std::make_shared<nn::Conv1d>(c, 3, 4, V{3}, options);
                   }});
  cases.push_back(
      {"conv2d_groups", Dims{2, 4, 6, 5}, [](const Context& c) -> std::shared_ptr<nn::Module> {
         nn::ConvOptions options;
         options.padding = {1};
         options.groups = 2;
         return std::make_shared<nn::Conv2d>(c, 4, 6, V{3}, options);
       }});
  // One input channel and a 1x1 kernel: the input and the first weights are dense in both
  // layouts, and the weights' layout (to_layout's) carries channels_last on.
  cases.push_back({"conv1x1_one_channel", Dims{2, 1, 5, 5}, [](const Context& c) {
                     return sequential(c, {std::make_shared<nn::Conv2d>(c, 1, 4, V{1}),
                                           std::make_shared<nn::Conv2d>(c, 4, 3, V{3})});
                   }});
  cases.push_back({"conv3d", Dims{2, 2, 4, 4, 3}, [](const Context& c) {
                     nn::ConvOptions options;
                     options.bias = false;
                     return std::make_shared<nn::Conv3d>(c, 2, 3, V{2}, options);
                   }});
  cases.push_back({"batchnorm1d_ncw", Dims{3, 3, 5},
                   [](const Context& c) { return std::make_shared<nn::BatchNorm1d>(c, 3); }});
  cases.push_back({"conv_batchnorm2d_relu", Dims{3, 3, 5, 5}, [](const Context& c) {
                     nn::ConvOptions options;
                     options.padding = {1};
                     options.bias = false;
                     return sequential(c, {std::make_shared<nn::Conv2d>(c, 3, 4, V{3}, options),
                                           std::make_shared<nn::BatchNorm2d>(c, 4),
                                           std::make_shared<nn::ReLU>(c, true)});
                   }});
  cases.push_back({"batchnorm3d", Dims{2, 3, 3, 4, 2},
                   [](const Context& c) { return std::make_shared<nn::BatchNorm3d>(c, 3); }});
  cases.push_back({"activations", Dims{2, 3, 4, 5}, [](const Context& c) {
                     return sequential(
                         c, {std::make_shared<nn::SiLU>(c), std::make_shared<nn::Tanh>(c),
                             std::make_shared<nn::ELU>(c), std::make_shared<nn::Sigmoid>(c)});
                   }});
  cases.push_back({"pools2d", Dims{2, 3, 9, 8}, [](const Context& c) {
                     nn::PoolOptions max_options;
                     max_options.stride = {2};
                     max_options.padding = {1};
                     nn::PoolOptions avg_options;
                     avg_options.padding = {1};
                     avg_options.count_include_pad = false;
                     return sequential(c, {std::make_shared<nn::MaxPool2d>(c, V{3}, max_options),
                                           std::make_shared<nn::AvgPool2d>(c, V{2}, avg_options),
                                           std::make_shared<nn::GlobalAvgPool>(c, 2)});
                   }});
  cases.push_back({"pools3d", Dims{2, 3, 4, 4, 6}, [](const Context& c) {
                     return sequential(c, {std::make_shared<nn::AvgPool3d>(c, V{2}),
                                           std::make_shared<nn::MaxPool3d>(c, V{1, 2, 2})});
                   }});
  cases.push_back({"maxpool1d", Dims{2, 3, 8},
                   [](const Context& c) { return std::make_shared<nn::MaxPool1d>(c, V{2}); }});
  cases.push_back({"residual", Dims{2, 4, 5, 5}, [](const Context& c) {
                     nn::ConvOptions options;
                     options.padding = {1};
                     options.bias = false;  // before a batch norm its gradient is 0 (noise)
                     auto branch =
                         sequential(c, {std::make_shared<nn::Conv2d>(c, 4, 4, V{3}, options),
                                        std::make_shared<nn::BatchNorm2d>(c, 4)});
                     return std::make_shared<nn::Residual>(
                         c,
                         std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
                             {"branch", branch}, {"identity", nullptr}},
                         std::make_shared<nn::ReLU>(c, true));
                   }});
  // The general flatten: a spatial extent, so PyTorch's (C, H, W) order differs from memory's.
  cases.push_back({"conv_flatten_linear", Dims{2, 3, 5, 5}, [](const Context& c) {
                     return sequential(c, {std::make_shared<nn::Conv2d>(c, 3, 4, V{3}),
                                           std::make_shared<nn::Flatten>(c),
                                           std::make_shared<nn::Linear>(c, 4 * 3 * 3, 5)});
                   }});
  cases.push_back({"dropout", Dims{2, 3, 4, 4},
                   [](const Context& c) { return std::make_shared<nn::Dropout>(c, 0.3f); }});
  cases.push_back({"softmax", Dims{2, 5, 3, 3}, [](const Context& c) {
                     return sequential(c, {std::make_shared<nn::Softmax>(c),
                                           std::make_shared<nn::LogSoftmax>(c)});
                   }});
  return cases;
}

TEST(NnLayout, EveryLayerKindMatchesChannelsFirst) {
  for (const LayerCase& layer : layer_cases()) {
    for (BackendKind backend : backends()) {
      for (DType dtype : {DType::f32, DType::f16}) {
        expect_same_in_both_layouts(layer.name, layer.input, layer.build, backend, dtype);
      }
    }
  }
}

// Flatten of a channels_last input with a spatial extent: PyTorch flattens in logical (C, H, W)
// order whatever the memory format, so output element (n, c*H*W + h*W + w) is input (n, c, h, w);
// the backward returns the gradient in the input's channels_last layout. The layout change is the
// reorder op on the module's context (Note [layout changes in nn]), f32 and f16.
TEST(NnLayout, FlattenOfChannelsLastFollowsPyTorchsOrder) {
  const Dims dims{2, 3, 4, 5};
  const auto value = [](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    return static_cast<float>(n * 1000 + c * 100 + h * 10 + w);
  };
  for (BackendKind backend : backends()) {
    for (DType dtype : {DType::f32, DType::f16}) {
      SCOPED_TRACE(std::string(to_string(backend)) + " " + std::string(to_string(dtype)));
      std::vector<float> logical;
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t c = 0; c < 3; ++c)
          for (std::int64_t h = 0; h < 4; ++h)
            for (std::int64_t w = 0; w < 5; ++w) logical.push_back(value(n, c, h, w));
      Tensor x = Tensor::empty(dims, dtype, Layout::channels_last);
      x.copy_from_f32(logical);
      Context context = context_for(backend, dtype);
      nn::Flatten flatten(context);
      const Tensor y = flatten.forward(x);
      ASSERT_EQ(y.dims(), (Dims{2, 60}));
      ASSERT_TRUE(y.is_dense(Layout::channels_first));
      const std::vector<float> out = y.to_f32();
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t c = 0; c < 3; ++c)
          for (std::int64_t h = 0; h < 4; ++h)
            for (std::int64_t w = 0; w < 5; ++w)
              ASSERT_EQ(out[static_cast<std::size_t>(n * 60 + c * 20 + h * 5 + w)],
                        value(n, c, h, w))
                  << "n " << n << " c " << c << " h " << h << " w " << w;

      std::vector<float> gradient(120);
      for (std::size_t i = 0; i < gradient.size(); ++i) gradient[i] = static_cast<float>(i) - 60;
      Tensor dy = Tensor::empty(Dims{2, 60}, dtype);
      dy.copy_from_f32(gradient);
      const Tensor dx = flatten.backward(dy);
      ASSERT_EQ(dx.dims(), dims);
      EXPECT_EQ(dx.strides(), dense_strides(dims, Layout::channels_last));
      const std::vector<float> back = dx.to_f32();  // logical order
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t k = 0; k < 60; ++k)
          ASSERT_EQ(back[static_cast<std::size_t>(n * 60 + k)],
                    gradient[static_cast<std::size_t>(n * 60 + k)])
              << "n " << n << " k " << k;
    }
  }
}

TEST(NnLayout, ResNet18MatchesChannelsFirstAndTrainsAlike) {
  const auto build = [](const Context& c) -> std::shared_ptr<nn::Module> {
    return nn::models::resnet18(c, 10);
  };
  // Batch 4 at 32x32: layer4's batch norms normalise 4 values each (with fewer the f16 backward
  // overflows in either layout). The logits' gradient is a loss's size (1/batch), not 1. The
  // reference backend runs ResNet-18 in both layouts in the SGD test below (f16, two steps).
  for (BackendKind backend : backends()) {
    if (backend == BackendKind::reference && backends().size() > 1) continue;
    for (DType dtype : {DType::f32, DType::f16}) {
      expect_same_in_both_layouts("resnet18", Dims{4, 3, 32, 32}, build, backend, dtype, 0.25f,
                                  true);
    }
  }
}

// Whole training steps (loss, backward, SGD with momentum on f32 master weights) leave the same
// weights in both layouts; the channels_last model's state_dict is PyTorch's order and loads back
// into either layout. On the reference backend, whose results do not depend on the layout: a
// ResNet on so small a batch trains chaotically (layer4's batch norms see four values each), so on the cpu
// backend the two layouts' rounding differences grow into different weights within two steps.
TEST(NnLayout, SgdStepAndStateDictOnChannelsLastWeights) {
  const Context context = context_for(BackendKind::reference, DType::f16);
  nn::manual_seed(3);
  auto first = nn::models::resnet18(context, 10);
  nn::manual_seed(3);
  auto last = nn::models::resnet18(context, 10);
  nn::to_layout(*last, Layout::channels_last);
  nn::SGD first_sgd(context, first->parameters(), SgdHyper{0.01, 0.9});
  nn::SGD last_sgd(context, last->parameters(), SgdHyper{0.01, 0.9});
  nn::CrossEntropyLoss first_loss(context), last_loss(context);
  // Batch 4 at 16x16 (layer3's and layer4's batch norms normalise 4 values each, as in the test
  // above), half the pixels of batch 2 at 32x32: the reference backend's loops are slow in the
  // sanitizer build.
  const Tensor x = input(Dims{4, 3, 16, 16}, 21);
  const Tensor y = labels(4, 10, 22);
  for (int step = 0; step < 2; ++step) {
    first->zero_grad();
    last->zero_grad();
    first_loss.forward(first->forward(in_layout(x, DType::f16, Layout::channels_first)), y);
    last_loss.forward(last->forward(in_layout(x, DType::f16, Layout::channels_last)), y);
    first->backward(first_loss.backward());
    last->backward(last_loss.backward());
    first_sgd.step();
    last_sgd.step();
  }
  const nn::StateDict first_state = first->state_dict();
  const nn::StateDict last_state = last->state_dict();
  ASSERT_EQ(first_state.size(), last_state.size());
  for (std::size_t i = 0; i < first_state.size(); ++i) {
    EXPECT_EQ(last_state[i].first, first_state[i].first);
    expect_near(last_state[i].second, first_state[i].second, Tolerance{1e-5, 1e-6},
                last_state[i].first);
  }
  const auto master = [](nn::Module& model) {
    std::vector<Tensor> out;
    for (auto* parameter : model.parameters()) {
      out.push_back(parameter->master.is_null() ? parameter->value : parameter->master);
    }
    return out;
  };
  const auto first_master = master(*first);
  const auto last_master = master(*last);
  for (std::size_t i = 0; i < first_master.size(); ++i) {
    expect_near(last_master[i], first_master[i], Tolerance{1e-5, 1e-6},
                "master copy " + std::to_string(i));
  }

  // The channels_first state into the channels_last model: the weights keep their layout and
  // take the values.
  last->load_state_dict(first_state);
  for (const auto& [name, parameter] : last->named_parameters()) {
    if (parameter->value.rank() == 4 && layouts_differ(parameter->value.dims())) {
      EXPECT_TRUE(parameter->value.is_dense(Layout::channels_last)) << name;
    }
  }
  const nn::StateDict reloaded = last->state_dict();
  for (std::size_t i = 0; i < first_state.size(); ++i) {
    expect_close(reloaded[i].second, first_state[i].second, 0, 0, reloaded[i].first);
  }
  // Converting to another dtype keeps the layout.
  nn::convert(*last, context_for(backends().back(), DType::f32));
  EXPECT_NE(last->named_parameters()[0].second->value.dtype(), DType::f16);
  for (const auto& [name, parameter] : last->named_parameters()) {
    if (parameter->value.rank() == 4 && layouts_differ(parameter->value.dims())) {
      EXPECT_TRUE(parameter->value.is_dense(Layout::channels_last)) << name;
      EXPECT_TRUE(parameter->grad.is_dense(Layout::channels_last)) << name;
    }
  }
}

TEST(NnLayout, SpatialCrossEntropyOnChannelsLastLogits) {
  for (BackendKind backend : backends()) {
    const Context context(backend);
    nn::CrossEntropyLoss first(context), last(context);
    const Tensor logits = input(Dims{2, 5, 3, 4}, 31);
    Tensor targets = Tensor::empty(Dims{2, 3, 4}, DType::i64);
    const Tensor flat = labels(24, 5, 32);
    std::copy_n(static_cast<const std::int64_t*>(flat.data()), 24,
                static_cast<std::int64_t*>(targets.data()));
    const Tensor loss_first =
        first.forward(in_layout(logits, DType::f32, Layout::channels_first), targets);
    const Tensor loss_last =
        last.forward(in_layout(logits, DType::f32, Layout::channels_last), targets);
    expect_close(loss_last, loss_first, 1e-5, 1e-6, "loss");
    const Tensor diff_last = last.backward();
    EXPECT_TRUE(diff_last.is_dense(Layout::channels_last)) << describe(diff_last);
    expect_close(diff_last, first.backward(), 1e-5, 1e-6, "diff_logits");
  }
}

TEST(NnLayout, BadLayoutsAreClearErrors) {
  const Context context = fast_context();
  using V = std::vector<std::int64_t>;
  const Tensor x = input(Dims{2, 3, 6, 6}, 41);
  const Tensor x_last = in_layout(x, DType::f32, Layout::channels_last);

  // Weights in the other layout than the input's.
  nn::Conv2d conv(context, 3, 4, V{3});
  expect_error(ErrorKind::InvalidArgument, {"Conv2d", "nhwc", "nn::to_layout"},
               [&] { conv.forward(x_last); });
  nn::to_layout(conv, Layout::channels_last);
  expect_error(ErrorKind::InvalidArgument, {"Conv2d", "nchw", "nn::to_layout"},
               [&] { conv.forward(x); });

  // diff_dst in the other layout than the forward's output.
  const Tensor y = conv.forward(x_last);
  const Tensor dy_first = in_layout(input(y.dims(), 42), DType::f32, Layout::channels_first);
  expect_error(ErrorKind::InvalidArgument, {"Conv2d.backward", "must be dense nhwc"},
               [&] { conv.backward(dy_first); });
  nn::ReLU relu(context);
  relu.forward(x);
  expect_error(ErrorKind::InvalidArgument, {"ReLU.backward", "must be dense nchw"},
               [&] { relu.backward(x_last); });

  // A strided input dense in no layout.
  const Tensor strided = Tensor::view(x.data(), Dims{2, 3, 6, 3}, DType::f32, Dims{108, 36, 6, 2});
  nn::BatchNorm2d norm(context, 3);
  expect_error(ErrorKind::InvalidArgument, {"BatchNorm2d", "channels_last (NHWC)"},
               [&] { norm.forward(strided); });

  // Linear works on the last dim of a row-major tensor: a channels_last one is refused.
  nn::Linear linear(context, 6, 2);
  expect_error(ErrorKind::InvalidArgument, {"Linear", "dense channels_first"},
               [&] { linear.forward(x_last); });

  // An optimizer over a parameter whose gradient is in another layout than its value.
  nn::Conv2d other(context, 3, 4, V{3});
  nn::to_layout(other, Layout::channels_last);
  other.weight().grad = Tensor::zeros(other.weight().value.dims(), DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"parameter 0", "gradient", "channels_last"}, [&] {
    nn::SGD sgd(context, other.parameters(), SgdHyper{0.1, 0.9});
  });
}

}  // namespace
}  // namespace dnnx::test::nn
