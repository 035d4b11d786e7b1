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

/// The id of the entry listed where the setting keeps the candidates out: "cudnn:taps".
inline constexpr std::string_view taps_off_id = "cudnn:taps";

/// What a tap-region candidate runs: its split, and the legacy algorithm its regions run where
/// cuDNN takes it (an index into legacy_algorithm_names(direction); none: cuDNN's ranked
/// choice for each region).
struct TapsConfig {
  detail::TapSplit split = detail::TapSplit::boxes;
  std::optional<int> algorithm;
};

/// "cudnn:taps:<split>[:<algorithm>]", e.g. "cudnn:taps:boxes", "cudnn:taps:rows:algo_0".
std::string taps_id(const TapsConfig& config, Direction direction);

/// Whether `id` is taps_off_id or begins "cudnn:taps:".
bool is_taps_id(std::string_view id);

/// Whether desc would list tap-region candidates if the setting were `sparse`: what decides
/// whether the entry saying the setting keeps them out is listed.
bool has_sparse_taps(const ConvDesc& desc);

/// One tap-region entry of a listing: a candidate (with its config, and the plan of the listed
/// desc that described it) or the unsupported entry listed where the setting keeps them out (no
/// config, no plan).
struct TapsEntry {
  AlgoInfo info;
  std::optional<TapsConfig> config;
  std::shared_ptr<detail::ConvPlan> plan;
};

/// The tap-region entries of (desc, direction) under the runtime's setting (Note [tap-region
/// candidates]): none where desc has no such regions; the unsupported taps_off_id entry where
/// the setting alone keeps them out; else per split the candidate of cuDNN's ranked choices
/// (unsupported, with the reason, where a region has no legacy algorithm) and one per
/// nondeterministic legacy algorithm that makes some region run something else.
std::vector<TapsEntry> taps_entries(const std::shared_ptr<Runtime>& runtime, const ConvDesc& desc,
                                    Direction direction);

/// The entry listed where the setting keeps the candidates out of a desc that has them (id
/// taps_off_id).
AlgoInfo taps_off_info(std::string reason);

/// The plan of the tap-region candidate of `config` for (desc, direction); throws Unsupported
/// when the split makes fewer than two regions or more than it lists, or cuDNN runs some region
/// with no legacy algorithm.
std::shared_ptr<detail::ConvPlan> make_taps_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, Direction direction,
                                                 const TapsConfig& config);

}  // namespace dnnx::cudnn
