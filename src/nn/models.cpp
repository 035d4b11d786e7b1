#include <dnnx/init.hpp>
#include <dnnx/nn/models.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

namespace dnnx::nn {

namespace {

ConvOptions conv_options(std::int64_t stride, std::int64_t padding) {
  ConvOptions options;
  options.stride = {stride};
  options.padding = {padding};
  options.bias = false;
  return options;
}

// torchvision's downsample: conv1x1(stride) + BatchNorm2d, or null when the shape is kept.
std::shared_ptr<Sequential> downsample(const Context& context, std::int64_t in_planes,
                                       std::int64_t out_planes, std::int64_t stride) {
  if (stride == 1 && in_planes == out_planes) return nullptr;
  auto sequence = std::make_shared<Sequential>(context);
  sequence->push_back(std::make_shared<Conv2d>(
      context, in_planes, out_planes, std::vector<std::int64_t>{1}, conv_options(stride, 0)));
  sequence->push_back(std::make_shared<BatchNorm2d>(context, out_planes));
  return sequence;
}

}  // namespace

BasicBlock::BasicBlock(const Context& context, std::int64_t in_planes, std::int64_t planes,
                       std::int64_t stride)
    : SumModule(context) {
  conv1_ = register_module(
      "conv1", std::make_shared<Conv2d>(context, in_planes, planes, std::vector<std::int64_t>{3},
                                        conv_options(stride, 1)));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(context, planes));
  relu_ = register_module("relu", std::make_shared<ReLU>(context, true));
  conv2_ = register_module(
      "conv2", std::make_shared<Conv2d>(context, planes, planes, std::vector<std::int64_t>{3},
                                        conv_options(1, 1)));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(context, planes));
  downsample_ = downsample(context, in_planes, planes * expansion, stride);
  if (downsample_) register_module("downsample", downsample_);
}

Tensor BasicBlock::forward(const Tensor& src) {
  Tensor out = relu_->forward_at(0, bn1_->forward(conv1_->forward(src)));
  out = bn2_->forward(conv2_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(src) : src;
  return relu_->forward_at(1, sum(std::move(out), identity));
}

Tensor BasicBlock::backward(const Tensor& diff_dst) {
  const Tensor diff = relu_->backward_at(1, diff_dst);
  Tensor main = bn2_->backward(diff);
  main = conv1_->backward(bn1_->backward(relu_->backward_at(0, conv2_->backward(main))));
  const Tensor shortcut = downsample_ ? downsample_->backward(diff) : diff;
  return sum(std::move(main), shortcut);
}

Bottleneck::Bottleneck(const Context& context, std::int64_t in_planes, std::int64_t planes,
                       std::int64_t stride)
    : SumModule(context) {
  const std::vector<std::int64_t> one{1}, three{3};
  conv1_ = register_module(
      "conv1", std::make_shared<Conv2d>(context, in_planes, planes, one, conv_options(1, 0)));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(context, planes));
  conv2_ = register_module(
      "conv2", std::make_shared<Conv2d>(context, planes, planes, three, conv_options(stride, 1)));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(context, planes));
  conv3_ = register_module("conv3", std::make_shared<Conv2d>(context, planes, planes * expansion,
                                                             one, conv_options(1, 0)));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(context, planes * expansion));
  relu_ = register_module("relu", std::make_shared<ReLU>(context, true));
  downsample_ = downsample(context, in_planes, planes * expansion, stride);
  if (downsample_) register_module("downsample", downsample_);
}

Tensor Bottleneck::forward(const Tensor& src) {
  Tensor out = relu_->forward_at(0, bn1_->forward(conv1_->forward(src)));
  out = relu_->forward_at(1, bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  const Tensor identity = downsample_ ? downsample_->forward(src) : src;
  return relu_->forward_at(2, sum(std::move(out), identity));
}

Tensor Bottleneck::backward(const Tensor& diff_dst) {
  const Tensor diff = relu_->backward_at(2, diff_dst);
  Tensor main = conv3_->backward(bn3_->backward(diff));
  main = conv2_->backward(bn2_->backward(relu_->backward_at(1, main)));
  main = conv1_->backward(bn1_->backward(relu_->backward_at(0, main)));
  const Tensor shortcut = downsample_ ? downsample_->backward(diff) : diff;
  return sum(std::move(main), shortcut);
}

ResNet::ResNet(const Context& context, bool bottleneck, std::vector<int> layers,
               std::int64_t num_classes, std::int64_t in_channels)
    : Module(context) {
  DNNX_CHECK_ARG(layers.size() == 4, "ResNet: layers has ", layers.size(),
                 " entries; expected 4 (blocks per stage)");
  DNNX_CHECK_ARG(num_classes >= 1 && in_channels >= 1, "ResNet: num_classes ", num_classes,
                 " and in_channels ", in_channels, " must be >= 1");
  const std::int64_t expansion = bottleneck ? Bottleneck::expansion : BasicBlock::expansion;
  stages_.push_back(register_module(
      "conv1", std::make_shared<Conv2d>(context, in_channels, 64, std::vector<std::int64_t>{7},
                                        conv_options(2, 3))));
  stages_.push_back(register_module("bn1", std::make_shared<BatchNorm2d>(context, 64)));
  stages_.push_back(register_module("relu", std::make_shared<ReLU>(context, true)));
  PoolOptions pool;
  pool.stride = {2};
  pool.padding = {1};
  stages_.push_back(register_module(
      "maxpool", std::make_shared<MaxPool2d>(context, std::vector<std::int64_t>{3}, pool)));
  std::int64_t in_planes = 64;
  const std::int64_t widths[] = {64, 128, 256, 512};
  for (std::size_t stage = 0; stage < 4; ++stage) {
    DNNX_CHECK_ARG(layers[stage] >= 1, "ResNet: layers[", stage, "] ", layers[stage],
                   " must be >= 1");
    auto sequence = std::make_shared<Sequential>(context);
    for (int block = 0; block < layers[stage]; ++block) {
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      if (bottleneck) {
        sequence->push_back(
            std::make_shared<Bottleneck>(context, in_planes, widths[stage], stride));
      } else {
        sequence->push_back(
            std::make_shared<BasicBlock>(context, in_planes, widths[stage], stride));
      }
      in_planes = widths[stage] * expansion;
    }
    stages_.push_back(register_module(detail::cat("layer", stage + 1), sequence));
  }
  stages_.push_back(register_module("avgpool", std::make_shared<GlobalAvgPool>(context, 2)));
  stages_.push_back(
      register_module("fc", std::make_shared<Linear>(context, 512 * expansion, num_classes)));

  // torchvision's ResNet.__init__: kaiming_normal_(fan_out, relu) convolutions, batch norms at
  // weight 1 and bias 0 (their defaults already).
  for (auto& [name, module] : named_modules()) {
    if (auto* conv = dynamic_cast<Conv*>(module)) {
      Tensor weight = detail::empty(this->context(), conv->weight().value.dims(), DType::f32);
      init::kaiming_normal(this->context(), default_generator(), weight, 0.0,
                           init::FanMode::fan_out, "relu");
      detail::assign(this->context(), weight, conv->weight().value);
      if (!conv->weight().master.is_null())
        detail::assign(this->context(), weight, conv->weight().master);
    }
  }
}

Tensor ResNet::forward(const Tensor& src) {
  Tensor x = src;
  for (std::size_t i = 0; i + 1 < stages_.size(); ++i) x = stages_[i]->forward(x);
  pooled_dims_ = x.dims();
  // torch.flatten(x, 1) before fc.
  x = x.reshape(Dims{x.dims()[0], x.numel() / x.dims()[0]});
  return stages_.back()->forward(x);
}

Tensor ResNet::backward(const Tensor& diff_dst) {
  DNNX_CHECK_ARG(pooled_dims_.rank() > 0, "ResNet.backward called without a forward before it");
  Tensor diff = stages_.back()->backward(diff_dst).reshape(pooled_dims_);
  for (std::size_t i = stages_.size() - 1; i-- > 0;) diff = stages_[i]->backward(diff);
  return diff;
}

namespace models {

std::shared_ptr<Sequential> fashion_cnn(const Context& context, std::int64_t num_classes,
                                        std::int64_t in_channels) {
  auto model = std::make_shared<Sequential>(context);
  ConvOptions same;
  same.padding = {1};
  const std::vector<std::int64_t> three{3}, two{2};
  model->push_back(std::make_shared<Conv2d>(context, in_channels, 32, three, same));
  model->push_back(std::make_shared<BatchNorm2d>(context, 32));
  model->push_back(std::make_shared<ReLU>(context, true));
  model->push_back(std::make_shared<MaxPool2d>(context, two));
  model->push_back(std::make_shared<Conv2d>(context, 32, 64, three, same));
  model->push_back(std::make_shared<BatchNorm2d>(context, 64));
  model->push_back(std::make_shared<ReLU>(context, true));
  model->push_back(std::make_shared<MaxPool2d>(context, two));
  model->push_back(std::make_shared<Flatten>(context));
  model->push_back(std::make_shared<Linear>(context, 64 * 7 * 7, 128));
  model->push_back(std::make_shared<ReLU>(context, true));
  model->push_back(std::make_shared<Linear>(context, 128, num_classes));
  return model;
}

std::shared_ptr<ResNet> resnet18(const Context& context, std::int64_t num_classes,
                                 std::int64_t in_channels) {
  return std::make_shared<ResNet>(context, false, std::vector<int>{2, 2, 2, 2}, num_classes,
                                  in_channels);
}

std::shared_ptr<ResNet> resnet50(const Context& context, std::int64_t num_classes,
                                 std::int64_t in_channels) {
  return std::make_shared<ResNet>(context, true, std::vector<int>{3, 4, 6, 3}, num_classes,
                                  in_channels);
}

}  // namespace models

}  // namespace dnnx::nn
