#pragma once
// Tap-region convolution candidates (Note [tap-region candidates] in conv_taps.cpp): a
// convolution whose taps read mostly padding, run as smaller convolutions on the output boxes
// where one range of taps reads real input (Note [tap regions] in src/core/tap_regions.hpp).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"
#include "core/tap_regions.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cudnn {

/// The id of the entry listed while the candidates are off: "cudnn:taps".
inline constexpr std::string_view taps_off_id = "cudnn:taps";

/// "cudnn:taps:boxes", "cudnn:taps:rows".
std::string taps_id(detail::TapSplit split);

/// The split of a tap-region candidate's id, or nullopt when `id` is none.
std::optional<detail::TapSplit> taps_split_of(std::string_view id);

/// The splits desc lists candidates of under `setting` (Note [tap-region candidates]), or none
/// (with `why`: the desc has no tap regions worth listing, or the setting is off).
std::vector<detail::TapSplit> tap_splits(const ConvDesc& desc, TapCandidates setting,
                                         std::string& why);

/// Whether desc would list tap-region candidates if the setting were `sparse`: what decides
/// whether the entry of the off setting is listed.
bool has_sparse_taps(const ConvDesc& desc);

/// The entry listed while the candidates are off for a desc that has them (id taps_off_id).
AlgoInfo taps_off_info(std::string reason);

/// The plan of the tap-region candidate of `split` for (desc, direction); throws Unsupported
/// when the split has a single region or cuDNN runs no region (the candidate's listing entry
/// then says so).
std::shared_ptr<detail::ConvPlan> make_taps_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, Direction direction,
                                                 detail::TapSplit split);

}  // namespace dnnx::cudnn
