#pragma once
/// \file
/// Model builders: a small CNN for Fashion-MNIST and torchvision's ResNet-18 / ResNet-50 with
/// torchvision's module structure and state_dict keys (conv1, bn1, layer1.0.conv1, ...,
/// layer2.0.downsample.0 / .1, fc).

#include <dnnx/nn/containers.hpp>
#include <dnnx/nn/layers.hpp>
#include <dnnx/nn/module.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::nn {

/// torchvision's BasicBlock: conv1 3x3 (stride) - bn1 - relu - conv2 3x3 - bn2, plus the
/// shortcut (downsample: 1x1 conv + bn when the stride or the width changes), then relu (the same
/// `relu` child applied a second time, Activation::forward_at slot 1).
class BasicBlock : public SumModule {
 public:
  static constexpr std::int64_t expansion = 1;
  BasicBlock(const Context& context, std::int64_t in_planes, std::int64_t planes,
             std::int64_t stride = 1);
  std::string type_name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<Sequential> downsample_;
};

/// torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3 conv): conv1 1x1 - bn1 - relu -
/// conv2 3x3 (stride) - bn2 - relu - conv3 1x1 (4 x planes) - bn3, plus the shortcut, then relu
/// (one `relu` child applied three times).
class Bottleneck : public SumModule {
 public:
  static constexpr std::int64_t expansion = 4;
  Bottleneck(const Context& context, std::int64_t in_planes, std::int64_t planes,
             std::int64_t stride = 1);
  std::string type_name() const override { return "Bottleneck"; }
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<Sequential> downsample_;
};

/// torchvision's ResNet: conv1 7x7/2 - bn1 - relu - maxpool 3x3/2 - layer1..layer4 - avgpool
/// (global) - flatten - fc. Initialised as torchvision: convolutions kaiming_normal (fan_out,
/// relu), batch norms weight 1 bias 0, fc as Linear.
class ResNet : public Module {
 public:
  /// `bottleneck` picks the block; `layers` the blocks per stage (4 entries).
  ResNet(const Context& context, bool bottleneck, std::vector<int> layers,
         std::int64_t num_classes = 1000, std::int64_t in_channels = 3);
  std::string type_name() const override { return "ResNet"; }
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;

 private:
  std::vector<std::shared_ptr<Module>> stages_;  // conv1 .. fc in forward order, flatten inside
  Dims pooled_dims_;
};

namespace models {

/// The Fashion-MNIST CNN (1 x 28 x 28 inputs, 10 classes):
///   0 Conv2d(1, 32, 3, padding 1) 1 BatchNorm2d 2 ReLU 3 MaxPool2d(2)
///   4 Conv2d(32, 64, 3, padding 1) 5 BatchNorm2d 6 ReLU 7 MaxPool2d(2)
///   8 Flatten 9 Linear(3136, 128) 10 ReLU 11 Linear(128, num_classes)
/// Activations are in place. Weights from default_generator().
std::shared_ptr<Sequential> fashion_cnn(const Context& context, std::int64_t num_classes = 10,
                                        std::int64_t in_channels = 1);
/// torchvision.models.resnet18(num_classes) with `in_channels` inputs: 11,689,512 parameters
/// for 1000 classes and 3 channels.
std::shared_ptr<ResNet> resnet18(const Context& context, std::int64_t num_classes = 1000,
                                 std::int64_t in_channels = 3);
/// torchvision.models.resnet50: 25,557,032 parameters for 1000 classes and 3 channels.
std::shared_ptr<ResNet> resnet50(const Context& context, std::int64_t num_classes = 1000,
                                 std::int64_t in_channels = 3);

}  // namespace models

}  // namespace dnnx::nn
