#pragma once
// Channel-padded convolution candidates (Note [channel padding] in conv_padded.cpp): a candidate
// of the same convolution with its channel counts rounded up, wrapped in copies that pad the
// inputs with zeros and slice the output back.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dnnx::cudnn {

/// The desc with in/out channels rounded up as Note [channel padding] says, or nothing when the
/// desc is not a case for padding (f32, groups, channels already aligned).
std::optional<ConvDesc> channel_padded(const ConvDesc& desc);

/// The listing entry of the padded candidate wrapping `inner` (a supported candidate of
/// `padded`), id "cudnn:padc:<inner id>": its workspace is the inner one plus the padded copies.
AlgoInfo padded_info(const ConvDesc& desc, const ConvDesc& padded, const AlgoInfo& inner);

/// The inner id of a padded candidate's id (the inverse of padded_info()'s naming), or nullopt
/// when `id` is not "cudnn:padc:<inner id>".
std::optional<std::string> padded_inner_id(std::string_view id);

/// The plan running `inner` (a plan of `padded`) for `desc`.
std::shared_ptr<detail::ConvPlan> make_padded_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, const ConvDesc& padded,
                                                   Direction direction,
                                                   std::shared_ptr<detail::ConvPlan> inner);

}  // namespace dnnx::cudnn
