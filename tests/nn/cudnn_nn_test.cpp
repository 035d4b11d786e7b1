// dnnx::nn on the cudnn backend (label gpu; skipped without a GPU): the Fashion CNN and a
// ResNet-18 moved there with nn::convert give the reference backend's logits, input gradients and
// parameter gradients; f16 with f32 master weights trains; per-layer fixed ids run there.

#include "nn/nn_test_util.hpp"
#include "support/gpu.hpp"

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

TEST(NnCudnn, HalfTrainingWithMasterWeights) {
  DNNX_REQUIRE_GPU();
  Context gpu = gpu_test_context();
  Context half(BackendKind::cudnn, 0, TypeConfig::half);
  half.set_choice_cache(gpu.choice_cache());
  nn::manual_seed(3);
  auto model = nn::models::fashion_cnn(gpu);
  nn::convert(*model, half, [](const std::string&, const nn::Module& module) {
    return module.type_name().starts_with("BatchNorm");
  });
  nn::CrossEntropyLoss criterion(half);
  nn::SGD sgd(half, model->parameters(), SgdHyper{0.05, 0.9, 0.0, 0.0});
  const Tensor x =
      to_device(random_tensor(Dims{16, 1, 28, 28}, DType::f16, Layout::channels_first, 5), half);
  const Tensor y = to_device(labels(16, 10, 6), half);
  std::vector<float> losses;
  for (int i = 0; i < 10; ++i) {
    sgd.zero_grad();
    losses.push_back(host_copy_of(criterion.forward(model->forward(x), y)).to_f32()[0]);
    model->backward(criterion.backward());
    sgd.step();
  }
  EXPECT_LT(losses.back(), 0.5f * losses.front());
}

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

}  // namespace
}  // namespace dnnx::test::nn
