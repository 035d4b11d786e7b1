#pragma once
// Folded convolution candidates (Note [fold candidates] in conv_folds.cpp): a convolution that is
// another one over other views of its tensors (a 3-D one a 2-D one; a dilated one whose taps
// mostly read padding a denser one of stacked weight sets: Note [stacked folds]) runs any
// candidate of that convolution, wrapped in the copies it needs (none where it is the same
// memory).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/conv_phases.hpp"
#include "backends/cudnn/conv_stacked.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cudnn {

/// How a 3-D convolution folds into a 2-D one (Note [fold candidates]):
///   planes  a kernel of 1x1 over the rows and columns, stride 1 and no padding there: the rows
///           and columns are one axis, a 2-D convolution over (depth, rows x columns);
///   frames  a kernel depth of 1 and no depth padding: a 2-D convolution over a batch of N x T
///           output frames;
///   stacked a dilated convolution whose outer taps mostly read padding: its stacked form
///           (Note [stacked folds] in conv_stacked.cpp), of any spatial dims;
///   phases  a strided convolution of few input channels: the stride-1 convolution of its input's
///           phases as channels (Note [phase folds] in conv_phases.cpp), of any spatial dims.
enum class FoldKind { planes, frames, stacked, phases };

/// "planes", "frames", "stacked" or "phases".
const char* to_string(FoldKind kind);

/// One fold of a convolution: the convolution it is, and whether its src / diff_src and dst /
/// diff_dst are copied (packed frames: NCDHW, or a depth stride over 1) or viewed in place; a
/// stacked fold's form (folded is its inner convolution; its sets are always copied); a phase
/// fold's form (folded is its inner convolution; its input and weights are always copied).
struct ConvFold {
  FoldKind kind = FoldKind::planes;
  ConvDesc folded;
  bool copies = false;
  std::optional<StackedForm> stacked;
  std::optional<PhaseForm> phases;
};

/// The fold of `kind` of desc, or nullopt where desc is no such 3-D convolution.
std::optional<ConvFold> conv_fold(const ConvDesc& desc, FoldKind kind);

/// Every fold of desc (planes, frames, stacked, then phases; none for most convolutions).
std::vector<ConvFold> conv_folds(const ConvDesc& desc);

/// How many candidates of a stacked or phase fold's inner convolution a listing wraps (its first
/// supported ones, Note [fold candidates]).
inline constexpr std::size_t stacked_inner_max = 16;

/// The ids of the entries listed where the settings keep the folds of a convolution out: the
/// planes and frames (DNNX_CUDNN_CONV_FOLDS), the stacked ones (DNNX_CUDNN_CONV_STACKED), the
/// phase ones (DNNX_CUDNN_CONV_PHASES).
inline constexpr std::string_view folds_off_id = "cudnn:fold";
inline constexpr std::string_view stacked_off_id = "cudnn:fold:stacked";
inline constexpr std::string_view phases_off_id = "cudnn:fold:phases";

/// The listing entry of the fold candidate wrapping `inner` (a supported candidate of
/// fold.folded), id "cudnn:fold:<kind>:<inner id>": its workspace is the inner one plus the
/// copies (the stacked weights and dst of a stacked fold).
AlgoInfo fold_info(const ConvDesc& desc, const ConvFold& fold, const AlgoInfo& inner);

/// The unsupported entry of `kind` (folds_off_id for planes and frames, stacked_off_id,
/// phases_off_id), saying
/// `reason`.
AlgoInfo folds_off_info(FoldKind kind, std::string reason);

/// The fold and inner id of a fold candidate's id (the inverse of fold_info()'s naming), or
/// nullopt when `id` is not "cudnn:fold:<kind>:<inner id>".
struct FoldInnerId {
  FoldKind kind = FoldKind::planes;
  std::string inner;
};
std::optional<FoldInnerId> fold_inner_id(std::string_view id);

/// The plan running `inner` (a plan of fold.folded) for desc.
std::shared_ptr<detail::ConvPlan> make_fold_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, const ConvFold& fold,
                                                 Direction direction,
                                                 std::shared_ptr<detail::ConvPlan> inner);

}  // namespace dnnx::cudnn
