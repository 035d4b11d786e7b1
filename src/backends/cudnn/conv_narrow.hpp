#pragma once
// dnnx's tensor-core backward data and backward weights kernels for convolutions with few input
// channels as a cudnn conv candidate (Note [narrow-channel candidates] in conv_narrow.cpp; the
// kernels: kernels/narrow.hpp).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// The id of the candidate.
inline constexpr const char* narrow_id = "cudnn:kernel:narrow:mma";

/// The narrow-channel candidate of (desc, direction), supported or not (with the reason).
std::vector<AlgoInfo> narrow_candidates(const ConvDesc& desc, Direction direction);

/// Whether `id` names the narrow-channel candidate.
bool is_narrow_id(const std::string& id);

/// The plan of the narrow-channel candidate for (desc, direction). Throws Unsupported with its
/// reason when the kernel cannot run desc.
std::shared_ptr<detail::ConvPlan> make_narrow_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info);

}  // namespace dnnx::cudnn
