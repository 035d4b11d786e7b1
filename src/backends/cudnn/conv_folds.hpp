#pragma once
// Folded convolution candidates (Note [fold candidates] in conv_folds.cpp): a 3-D convolution
// that is a 2-D one over another view of its tensors runs any 2-D candidate of that 2-D
// convolution, wrapped in the copies that view needs (none where it is the same memory).

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

/// How a 3-D convolution folds into a 2-D one (Note [fold candidates]):
///   planes  a kernel of 1x1 over the rows and columns, stride 1 and no padding there: the rows
///           and columns are one axis, a 2-D convolution over (depth, rows x columns);
///   frames  a kernel depth of 1 and no depth padding: a 2-D convolution over a batch of N x T
///           output frames.
enum class FoldKind { planes, frames };

/// "planes" or "frames".
const char* to_string(FoldKind kind);

/// One fold of a 3-D convolution: the 2-D convolution it is, and whether its src / diff_src and
/// dst / diff_dst are copied (packed frames: NCDHW, or a depth stride over 1) or viewed in place.
struct ConvFold {
  FoldKind kind = FoldKind::planes;
  ConvDesc folded;
  bool copies = false;
};

/// The fold of `kind` of desc, or nullopt where desc is no such 3-D convolution.
std::optional<ConvFold> conv_fold(const ConvDesc& desc, FoldKind kind);

/// Every fold of desc (planes, then frames; none for most convolutions).
std::vector<ConvFold> conv_folds(const ConvDesc& desc);

/// The id of the entry listed where the setting keeps the folds of a convolution out.
inline constexpr std::string_view folds_off_id = "cudnn:fold";

/// The listing entry of the fold candidate wrapping `inner` (a supported candidate of
/// fold.folded), id "cudnn:fold:<kind>:<inner id>": its workspace is the inner one plus the
/// copies.
AlgoInfo fold_info(const ConvDesc& desc, const ConvFold& fold, const AlgoInfo& inner);

/// The unsupported folds_off_id entry, saying `reason`.
AlgoInfo folds_off_info(std::string reason);

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
