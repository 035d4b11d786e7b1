#pragma once
// Convolution operands on a device and a run into a device output, for the tests of the cudnn
// backend's convolution candidates (tests/backends/cudnn_conv*_test.cpp).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

/// Runs `direction` of `desc` with candidate `id` fixed, twice, into a device output that starts
/// as NaN, and checks (gtest) that `id` ran, that the first result is finite and within the
/// dtype's tolerance of `expected` (error scale `scale`), and that the second run gives the same
/// bits (an overwrite, not an accumulation, and deterministic). Returns false, the failure
/// recorded, when the run threw. The context's policy for `direction` is heuristic afterwards.
inline bool check_fixed_candidate(Context& context, const ConvDesc& desc, Direction direction,
                                  const std::string& id, const DeviceConvOperands& operands,
                                  const std::vector<float>& expected,
                                  const std::vector<float>& scale, const std::string& where) {
  const Dims out_dims = conv_output_dims(desc, direction);
  context.tune().policy(direction) = AlgoPolicy::fixed(id);
  Tensor output = device_copy(nan_tensor(out_dims, desc.dtype, desc.layout), context);
  Tensor first, second;
  try {
    const auto choice = run_conv_into(context, desc, direction, operands, output);
    EXPECT_EQ(choice->algo.id, id) << where;
    first = host_copy_of(output);
    run_conv_into(context, desc, direction, operands, output);
    second = host_copy_of(output);
  } catch (const Error& error) {
    context.tune().policy(direction) = AlgoPolicy::heuristic();
    ADD_FAILURE() << "listed as supported but failed: " << error.what() << "\n" << where;
    return false;
  }
  context.tune().policy(direction) = AlgoPolicy::heuristic();
  const std::vector<float> actual = first.to_f32();
  EXPECT_TRUE(all_finite(actual, out_dims, "output", where));
  EXPECT_TRUE(close_within_scale(actual, expected, scale, out_dims, conv_tolerance(desc.dtype),
                                 "output", where));
  EXPECT_TRUE(bitwise_equal(first, second, "second run", where));
  return true;
}

}  // namespace dnnx::test
