#pragma once
// dnnx's own depthwise convolution kernels as cudnn conv candidates (Note [depthwise candidates]
// in conv_depthwise.cpp; the kernels: kernels/depthwise.hpp).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// Every depthwise kernel candidate of (desc, direction), supported or not (with the reason), in
/// their order: cudnn:kernel:depthwise:channel_packs, :strips, :unrolled, :direct.
std::vector<AlgoInfo> depthwise_candidates(const ConvDesc& desc, Direction direction);

/// Whether `id` names a depthwise kernel candidate.
bool is_depthwise_id(const std::string& id);

/// The plan of the depthwise candidate `info` (an entry of depthwise_candidates(desc, direction),
/// supported). Throws Unsupported with its reason when the candidate cannot run desc.
std::shared_ptr<detail::ConvPlan> make_depthwise_plan(std::shared_ptr<Runtime> runtime,
                                                      const ConvDesc& desc, Direction direction,
                                                      const AlgoInfo& info);

}  // namespace dnnx::cudnn
