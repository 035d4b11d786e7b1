// The model builders: torchvision's parameter counts and state_dict keys for ResNet-18 / -50, and
// a forward and backward through a ResNet-18 on a small input.

#include "nn/nn_test_util.hpp"

#include <map>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

std::int64_t parameter_count(nn::Module& model) {
  std::int64_t count = 0;
  for (auto* parameter : model.parameters()) count += parameter->value.numel();
  return count;
}

std::map<std::string, Dims> state_shapes(nn::Module& model) {
  std::map<std::string, Dims> out;
  for (auto& [key, tensor] : model.state_dict()) out[key] = tensor.dims();
  return out;
}

TEST(NnModels, ResNet18MatchesTorchvision) {
  Context context = fast_context();
  auto model = nn::models::resnet18(context);
  EXPECT_EQ(parameter_count(*model), 11689512);
  const auto shapes = state_shapes(*model);
  // torchvision.models.resnet18().state_dict(): 62 parameters and 60 batch-norm buffers.
  EXPECT_EQ(shapes.size(), 122u);
  EXPECT_EQ(shapes.at("conv1.weight"), (Dims{64, 3, 7, 7}));
  EXPECT_EQ(shapes.at("layer1.0.conv1.weight"), (Dims{64, 64, 3, 3}));
  EXPECT_EQ(shapes.at("layer2.0.downsample.0.weight"), (Dims{128, 64, 1, 1}));
  EXPECT_EQ(shapes.at("layer2.0.downsample.1.running_var"), (Dims{128}));
  EXPECT_EQ(shapes.at("layer4.1.bn2.num_batches_tracked"), Dims{});
  EXPECT_EQ(shapes.at("fc.weight"), (Dims{1000, 512}));
  EXPECT_EQ(shapes.count("layer1.0.downsample.0.weight"), 0u);
}

TEST(NnModels, ResNet50MatchesTorchvision) {
  Context context = fast_context();
  auto model = nn::models::resnet50(context);
  EXPECT_EQ(parameter_count(*model), 25557032);
  const auto shapes = state_shapes(*model);
  // 161 parameters and 159 batch-norm buffers.
  EXPECT_EQ(shapes.size(), 320u);
  EXPECT_EQ(shapes.at("layer1.0.downsample.0.weight"), (Dims{256, 64, 1, 1}));
  EXPECT_EQ(shapes.at("layer3.5.conv3.weight"), (Dims{1024, 256, 1, 1}));
  EXPECT_EQ(shapes.at("layer4.0.conv2.weight"), (Dims{512, 512, 3, 3}));
  EXPECT_EQ(shapes.at("fc.bias"), (Dims{1000}));
  // The optimizer benchmarks' list of ResNet-50 parameter shapes, in state_dict order.
  std::vector<Dims> dims;
  for (auto* parameter : model->parameters()) dims.push_back(parameter->value.dims());
  EXPECT_EQ(dims, resnet50_parameter_shapes());
}

TEST(NnModels, ResNet18TrainsOnSmallImages) {
  Context context = fast_context();
  nn::manual_seed(5);
  auto model = nn::models::resnet18(context, 10, 1);
  EXPECT_EQ(model->named_parameters()[0].second->value.dims(), (Dims{64, 1, 7, 7}));
  const Tensor x = input(Dims{2, 1, 32, 32}, 1);
  const Tensor logits = model->forward(x);
  ASSERT_EQ(logits.dims(), (Dims{2, 10}));
  nn::CrossEntropyLoss loss(context);
  loss.forward(logits, labels(2, 10, 2));
  const Tensor dx = model->backward(loss.backward());
  EXPECT_EQ(dx.dims(), x.dims());
  for (auto& [name, parameter] : model->named_parameters()) {
    EXPECT_TRUE(parameter->grad_live) << name;
  }
  const std::string text = model->repr();
  EXPECT_NE(text.find("(avgpool): AdaptiveAvgPool2d(output_size=(1, 1))"), std::string::npos);
  EXPECT_NE(text.find("(fc): Linear(in_features=512, out_features=10, bias=True)"),
            std::string::npos);
}

}  // namespace
}  // namespace dnnx::test::nn
