#pragma once
// Convolution operands on a device and a run into a device output, for the tests of the cudnn
// backend's convolution candidates (tests/backends/cudnn_conv*_test.cpp).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "support/conv.hpp"
#include "support/gpu.hpp"

#include <memory>

namespace dnnx::test {

/// The device copies of a ConvOperands' tensors (null where the host one is).
struct DeviceConvOperands {
  Tensor src, weights, diff_dst;
};

inline DeviceConvOperands upload_conv_operands(const ConvOperands& host, Context& context) {
  DeviceConvOperands device;
  if (!host.src.is_null()) device.src = device_copy(host.src, context);
  if (!host.weights.is_null()) device.weights = device_copy(host.weights, context);
  if (!host.diff_dst.is_null()) device.diff_dst = device_copy(host.diff_dst, context);
  return device;
}

/// Runs `direction` of `desc` into `output` (a device tensor) with the context's policy; returns
/// the choice.
inline std::shared_ptr<const Choice> run_conv_into(Context& context, const ConvDesc& desc,
                                                   Direction direction,
                                                   const DeviceConvOperands& operands,
                                                   Tensor& output) {
  switch (direction) {
    case Direction::fwd: return conv_fwd(context, desc, operands.src, operands.weights, output);
    case Direction::bwd_data:
      return conv_bwd_data(context, desc, operands.diff_dst, operands.weights, output);
    case Direction::bwd_weights:
      return conv_bwd_weights(context, desc, operands.src, operands.diff_dst, output);
    case Direction::fwd_training: break;
  }
  return nullptr;
}

}  // namespace dnnx::test
