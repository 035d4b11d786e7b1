#pragma once
// Bias of a convolution on oneDNN: dst += bias with an in-place binary add, diff_bias as a sum
// reduction of diff_dst. Both primitives are built once per desc and cached.

#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "backends/onednn/runtime.hpp"

#include <memory>

namespace dnnx::onednn {

class ConvBias {
 public:
  explicit ConvBias(std::shared_ptr<Runtime> runtime);
  ~ConvBias();
  ConvBias(const ConvBias&) = delete;
  ConvBias& operator=(const ConvBias&) = delete;

  /// dst += bias broadcast over N and spatial positions.
  void fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst);
  /// diff_bias = sum of diff_dst over N and spatial positions.
  void bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dnnx::onednn
