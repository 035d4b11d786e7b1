#pragma once
// Bias of a convolution on oneDNN: dst += bias with an in-place binary add, diff_bias as a sum
// reduction of diff_dst, both built once per desc and cached; dnnx loops where oneDNN has no such
// primitive for the dtype (Note [bias without oneDNN] in conv_bias.cpp). The loops also serve the
// fused convolution's unfused candidates (run_epilogue).

#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/conv_fused.hpp>
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

/// dst = act(conv_out + bias + desc.residual_scale * residual), elementwise in f32 and rounded
/// once to desc.conv.dtype, over dense tensors of desc.dst_dims() in desc.conv.layout. `bias`
/// (desc.conv.out_channels values of `bias_dtype`) is null without desc.bias, `residual` without
/// desc.residual; conv_out, residual and dst may be the same memory. Large tensors are split over
/// threads; the result does not depend on how.
void run_epilogue(const ConvFusedDesc& desc, const void* conv_out, const void* bias,
                  DType bias_dtype, const void* residual, void* dst);

}  // namespace dnnx::onednn
