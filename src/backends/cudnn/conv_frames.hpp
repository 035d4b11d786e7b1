#pragma once
// Frame convolution candidates (Note [frame candidates] in conv_frames.cpp): a 3-D convolution
// whose kernel has a depth of 1, run as one 2-D legacy cuDNN convolution per output frame.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cudnn {

/// The id of the entry listed where no frame candidate is: "cudnn:frames".
inline constexpr std::string_view frames_off_id = "cudnn:frames";

/// "cudnn:frames:<algorithm>", e.g. "cudnn:frames:winograd_nonfused" (`algorithm` an index into
/// legacy_algorithm_names(direction)).
std::string frames_id(int algorithm, Direction direction);

/// Whether `id` is frames_off_id or begins "cudnn:frames:".
bool is_frames_id(std::string_view id);

/// The 2-D convolution each output frame of desc is: desc without its depth (its kernel depth 1,
/// no depth padding), or nullopt where desc is no such 3-D convolution.
std::optional<ConvDesc> frame_desc(const ConvDesc& desc);

/// Whether some input frame of a convolution with frames (frame_desc()) is read by no output
/// frame: a depth stride over 1, or frames after the last one read. Its bwd_data zeroes them.
bool skips_input_frames(const ConvDesc& desc);

/// One frame entry of a listing: a candidate (its algorithm, and the plan of the listed desc that
/// described it) or the unsupported frames_off_id entry saying why there is none (no algorithm,
/// no plan).
struct FramesEntry {
  AlgoInfo info;
  std::optional<int> algorithm;
  std::shared_ptr<detail::ConvPlan> plan;
};

/// The frame entries of (desc, direction) under the runtime's setting (Note [frame candidates]):
/// none where desc has no frames; the unsupported frames_off_id entry where the setting keeps
/// them out or cuDNN runs no legacy algorithm on a frame; else one candidate per legacy algorithm
/// cuDNN runs on a frame.
std::vector<FramesEntry> frames_entries(const std::shared_ptr<Runtime>& runtime,
                                        const ConvDesc& desc, Direction direction);

/// The plan of the frame candidate running legacy algorithm `algorithm` for (desc, direction);
/// throws Unsupported where desc has no frames or cuDNN does not run that algorithm on them.
std::shared_ptr<detail::ConvPlan> make_frames_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   int algorithm);

}  // namespace dnnx::cudnn
