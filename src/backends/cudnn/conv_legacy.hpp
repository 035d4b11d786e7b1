#pragma once
// The legacy half of the cudnn convolution: cuDNN's numbered algorithms (cudnnConvolutionForward /
// BackwardData / BackwardFilter), each under each math mode, as candidates and plans.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// Every legacy candidate of (desc, direction): algorithm x math mode, supported or not, in
/// priority order (Note [legacy candidates]).
std::vector<AlgoInfo> legacy_candidates(Runtime& runtime, const ConvDesc& desc,
                                        Direction direction);

/// Whether `id` names a legacy candidate ("cudnn:legacy:...").
bool is_legacy_id(const std::string& id);

/// The plan of the supported legacy candidate `info`.
std::shared_ptr<detail::ConvPlan> make_legacy_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info);

}  // namespace dnnx::cudnn
