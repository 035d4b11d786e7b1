#pragma once
// dnnx's grouped convolution kernel on the tensor cores as a cudnn conv candidate (Note [grouped
// candidates] in conv_grouped.cpp; the kernel: kernels/grouped.hpp).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/kernels/grouped.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// The id of the candidate.
inline constexpr const char* grouped_id = "cudnn:kernel:grouped:mma";

/// The grouped-kernel candidate of (desc, direction), supported or not (with the reason).
std::vector<AlgoInfo> grouped_candidates(const ConvDesc& desc, Direction direction);

/// `desc` as the kernel sees it (grouped_candidates(desc, direction) supported).
kernels::GroupedShape grouped_shape(const ConvDesc& desc);

/// Whether `id` names the grouped-kernel candidate.
bool is_grouped_id(const std::string& id);

/// The plan of the grouped-kernel candidate for (desc, direction). Throws Unsupported with its
/// reason when the kernel cannot run desc.
std::shared_ptr<detail::ConvPlan> make_grouped_plan(std::shared_ptr<Runtime> runtime,
                                                    const ConvDesc& desc, Direction direction,
                                                    const AlgoInfo& info);

}  // namespace dnnx::cudnn
