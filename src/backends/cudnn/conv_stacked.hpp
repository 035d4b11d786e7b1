#pragma once
// Stacked forms of dilated convolutions (Note [stacked folds] in conv_stacked.cpp): where a
// dilated kernel's outer taps mostly read padding, the convolution is one denser convolution of
// fewer taps whose output channels stack the weight sets of the output bands, between copies.

#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// How the stacked form treats one spatial dim of a convolution:
///   whole    as it is (every tap, its stride, padding and dilation);
///   stacked  a 3-tap kernel of dilation d, stride 1 and padding d on both sides, over a size H
///            with d < H <= 2d: two sets (taps 1-2 for outputs [0, d), taps 0-1 for [d, H)) of a
///            2-tap kernel of dilation d padded by 2d - H after, d outputs;
///   center   an odd kernel of dilation d and padding d (k - 1) / 2 on both sides, stride 1,
///            over a size H <= d: only the center tap reaches the input, a 1-tap kernel.
enum class StackedDim { whole, stacked, center };

/// One weight set of a stacked form: per spatial dim of the convolution, the first kernel tap it
/// holds (the inner convolution's kernel size of them), the outputs of the convolution it gives
/// (the inner convolution's positions [0, outputs)) and the first of them. Set s owns the inner
/// convolution's output channels [s K, (s + 1) K), K the convolution's.
struct StackedSet {
  std::array<std::int64_t, 3> tap_first{}, outputs{}, out_begin{};
};

/// The stacked form of a convolution: the inner convolution (out_channels = sets x K; its src the
/// convolution's, each stacked dim of size H read as 2d: H, then zeros), each dim's treatment, the
/// sets (the product of the dims' sets, the first dim's slowest), and the inner convolution's
/// products as a share of the convolution's.
struct StackedForm {
  ConvDesc inner;
  std::array<std::int64_t, 3> outer_input{};  ///< the convolution's spatial sizes
  std::array<StackedDim, 3> dims{};
  std::vector<StackedSet> sets;
  double work = 1;
};

/// Forms whose inner convolution takes more than this share of the products are not listed.
inline constexpr double stacked_work_max = 0.8;

/// The stacked form of desc, or nullopt with `why`: an ungrouped convolution with some dim
/// stacked or center and the inner products at most stacked_work_max of its own.
std::optional<StackedForm> stacked_form(const ConvDesc& desc, std::string& why);

/// Whether the inner convolution reads a padded copy of the input (some stacked dim with H < 2d)
/// rather than the caller's tensor.
bool stacked_input_copied(const StackedForm& form);

/// The workspace a stacked plan takes besides its inner plan's: the stacked weights (or their
/// gradient), the inner convolution's dst (or diff_dst) and, where it is copied, its padded src
/// (or diff_src), each aligned as workspace_aligned() aligns.
std::size_t stacked_buffers_bytes(const StackedForm& form);

/// The plan running `inner` (a plan of form.inner) for desc between the copies of the sets.
std::shared_ptr<detail::ConvPlan> make_stacked_plan(std::shared_ptr<Runtime> runtime,
                                                    const ConvDesc& desc, const StackedForm& form,
                                                    Direction direction, const AlgoInfo& info,
                                                    std::shared_ptr<detail::ConvPlan> inner);

}  // namespace dnnx::cudnn
