#pragma once
// Phase folds of strided convolutions (Note [phase folds] in conv_phases.cpp): a convolution of
// few input channels and a stride is the stride-1 convolution of its input's phases stacked as
// channels (space to depth) with its taps regrouped alike, between copies.

#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/kernels/phases.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dnnx::cudnn {

/// The phase fold of a convolution: the inner convolution (stride 1, unpadded, the phases' and
/// channels' products as input channels) and the copies' geometry.
struct PhaseForm {
  ConvDesc inner;
  kernels::phases::Geometry geometry;
};

/// The most input channels x phases a phase fold takes (before the rounding up to 8 channels of
/// an f16 / bf16 inner convolution).
inline constexpr std::int64_t phase_channels_max = 32;

/// The phase fold of desc, or nullopt with `why`: an ungrouped convolution with some strided
/// dim, every strided dim undilated and its kernel at least its stride, and C x phases at most
/// phase_channels_max.
std::optional<PhaseForm> phase_form(const ConvDesc& desc, std::string& why);

/// The workspace a phase plan takes besides its inner plan's: the folded input (or its
/// gradient) and the folded weights (or their gradient), each aligned as workspace_aligned()
/// aligns.
std::size_t phase_buffers_bytes(const PhaseForm& form);

/// The plan running `inner` (a plan of form.inner) for desc between the copies.
std::shared_ptr<detail::ConvPlan> make_phase_plan(std::shared_ptr<Runtime> runtime,
                                                  const ConvDesc& desc, const PhaseForm& form,
                                                  Direction direction, const AlgoInfo& info,
                                                  std::shared_ptr<detail::ConvPlan> inner);

}  // namespace dnnx::cudnn
