// Note [depthwise candidates]
// A depthwise convolution (groups == in_channels, out_channels = groups * M for a channel
// multiplier M >= 1) does a few multiply-adds per element it reads, and cuDNN's engines, built for
// dense channel reductions, run it well below memory speed in some directions (MobileNetV2's first
// depthwise layer's bwd_data, batch 128, 96 channels, 112x112, 3x3/2: 2.6 ms on an H100 against
// 0.54 ms for PyTorch's own kernels). dnnx's kernels (kernels/depthwise.cu: Note [depthwise
// kernels]) are listed next to cuDNN's candidates for every convolution, as four ids, each
// unsupported with its reason outside its domain (any desc that is not depthwise, and Note
// [depthwise variants]):
//   cudnn:kernel:depthwise:channel_packs  channels_last, M = 1; fwd and bwd_data with even
//                                         channels, bwd_weights with kernels of 1 x K x K
//                                         positions, K = 3, 5, 7 (any channel count)
//   cudnn:kernel:depthwise:strips         channels_first, kernels of 1 x K x K positions, K = 3,
//                                         5, 7, no dilation; fwd at a stride of 1 or 2 along
//                                         H, bwd_data at stride 1
//   cudnn:kernel:depthwise:unrolled       kernels of 1 x K x K positions, K = 3, 5, 7 (2-D, and
//                                         3-D ones of depth 1); every direction
//   cudnn:kernel:depthwise:direct         every depthwise desc and direction
// All four accumulate in f32, honour per-side padding, stride and dilation, and overwrite their
// output (as every cudnn conv candidate does: beta 0). They are deterministic: bwd_data gathers
// and bwd_weights reduces in a fixed order without atomics (note "fixed_order_reduction").
// bwd_weights needs workspace for the f32 partial sums of its split reduction, channel_packs fwd
// and bwd_data for the weights transposed (Note [depthwise weight taps]). The supported ones
// come right after the last config cuDNN's heuristics rank first that is not runtime-compiled
// (note "heuristics_top"; Note [cudnn candidate order]): the heuristic pick stays cuDNN's, and an
// exhaustive search times them early, before the hundred-odd other engine configs of a depthwise
// desc. On the layers where they are the fastest, the slower candidates after them are then
// abandoned or dropped at their first probe sooner (Note [probing slow candidates] in
// src/tune/select.cpp), and a search budget (Note [search budget]) that runs out among those still
// has them timed.

#include "backends/cudnn/conv_depthwise.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/kernels/depthwise.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

namespace dnnx::cudnn {
namespace {

struct VariantSpec {
  kernels::DepthwiseVariant variant;
  std::string_view id;
  std::string_view name;
  std::string_view note;
};

constexpr std::array<VariantSpec, 4> variants{{
    {kernels::DepthwiseVariant::channel_packs, "cudnn:kernel:depthwise:channel_packs",
     "dnnx depthwise kernel (channel packs)", "channel_packs"},
    {kernels::DepthwiseVariant::strips, "cudnn:kernel:depthwise:strips",
     "dnnx depthwise kernel (column strips)", "strips"},
    {kernels::DepthwiseVariant::unrolled, "cudnn:kernel:depthwise:unrolled",
     "dnnx depthwise kernel (3x3/5x5/7x7 unrolled)", "unrolled"},
    {kernels::DepthwiseVariant::direct, "cudnn:kernel:depthwise:direct",
     "dnnx depthwise kernel (direct)", "direct"},
}};

constexpr std::int64_t max_spatial = std::int64_t{1} << 29;

const VariantSpec* spec_of(std::string_view id) {
  for (const VariantSpec& spec : variants) {
    if (spec.id == id) return &spec;
  }
  return nullptr;
}

// Why no depthwise kernel can run desc ("" when one may): not depthwise, or sizes the kernels'
// 32-bit spatial arithmetic cannot hold.
std::string desc_exclusion(const ConvDesc& desc) {
  if (desc.groups != desc.in_channels) {
    return detail::cat(
        "not a depthwise convolution: the kernels need groups == in_channels, got "
        "groups=",
        desc.groups, " and in_channels=", desc.in_channels);
  }
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    for (const std::int64_t value : {desc.input[s], desc.kernel[s], desc.stride[s],
                                     desc.pad_before[s], desc.pad_after[s], desc.dilation[s]}) {
      if (value > max_spatial)
        return detail::cat("spatial sizes, strides, paddings or dilations beyond 2^29 (", value,
                           ")");
    }
  }
  return {};
}

// The desc as the kernels see it (desc_exclusion(desc) empty).
kernels::DepthwiseShape kernel_shape(const ConvDesc& desc) {
  kernels::DepthwiseShape shape;
  shape.batch = desc.batch;
  shape.channels = desc.in_channels;
  shape.multiplier = desc.out_channels / desc.in_channels;
  static_cast<kernels::SpatialDims&>(shape) = kernel_dims(desc, max_spatial + 1);
  shape.channels_last = desc.layout == Layout::channels_last;
  shape.type = desc.dtype == DType::f16    ? kernels::DepthwiseType::f16
               : desc.dtype == DType::bf16 ? kernels::DepthwiseType::bf16
                                           : kernels::DepthwiseType::f32;
  return shape;
}

AlgoInfo info_of(const ConvDesc& desc, Direction direction, const VariantSpec& spec) {
  AlgoInfo info;
  info.id = std::string(spec.id);
  info.name = std::string(spec.name);
  info.deterministic = true;
  info.notes = {"kernel", "depthwise", std::string(spec.note)};
  if (direction == Direction::bwd_weights) info.notes.emplace_back("fixed_order_reduction");
  info.reason = desc_exclusion(desc);
  if (info.reason.empty()) {
    const kernels::DepthwiseShape shape = kernel_shape(desc);
    const kernels::DepthwiseDirection kernel_direction =
        direction == Direction::bwd_weights ? kernels::DepthwiseDirection::bwd_weights
        : direction == Direction::bwd_data  ? kernels::DepthwiseDirection::bwd_data
                                            : kernels::DepthwiseDirection::fwd;
    if (const char* reason = kernels::depthwise_unsupported(shape, spec.variant, kernel_direction))
      info.reason = reason;
    else if (direction == Direction::bwd_weights)
      info.workspace_bytes = kernels::depthwise_bwd_weights_workspace_bytes(shape, spec.variant);
    else
      info.workspace_bytes = kernels::depthwise_weight_taps_bytes(shape, spec.variant);
  }
  info.supported = info.reason.empty();
  return info;
}

class DepthwisePlan final : public detail::ConvPlan {
 public:
  DepthwisePlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
                AlgoInfo info, kernels::DepthwiseVariant variant)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)),
        direction_(direction),
        variant_(variant),
        shape_(kernel_shape(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const kernels::Queue queue = runtime_->kernel_queue();
    cudaError_t status = cudaSuccess;
    switch (direction_) {
      case Direction::fwd:
        status = kernels::depthwise_fwd(shape_, variant_, t.first, t.second, t.output,
                                        workspace.data, queue);
        break;
      case Direction::bwd_data:
        status = kernels::depthwise_bwd_data(shape_, variant_, t.first, t.second, t.output,
                                             workspace.data, queue);
        break;
      case Direction::bwd_weights:
        status = kernels::depthwise_bwd_weights(shape_, variant_, t.first, t.second, t.output,
                                                workspace.data, queue);
        break;
      case Direction::fwd_training:
        detail::raise(ErrorKind::Internal, "fwd_training is not a convolution direction", context_);
    }
    DNNX_CUDNN_CHECK(status, context_, "launching the depthwise convolution kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  kernels::DepthwiseVariant variant_;
  kernels::DepthwiseShape shape_;
};

}  // namespace

std::vector<AlgoInfo> depthwise_candidates(const ConvDesc& desc, Direction direction) {
  std::vector<AlgoInfo> infos;
  for (const VariantSpec& spec : variants) infos.push_back(info_of(desc, direction, spec));
  return infos;
}

bool is_depthwise_id(const std::string& id) { return spec_of(id) != nullptr; }

std::shared_ptr<detail::ConvPlan> make_depthwise_plan(std::shared_ptr<Runtime> runtime,
                                                      const ConvDesc& desc, Direction direction,
                                                      const AlgoInfo& info) {
  const VariantSpec* spec = spec_of(info.id);
  const ErrorContext context = conv_context(desc, direction, info.id);
  if (spec == nullptr)
    detail::raise(ErrorKind::Internal, detail::cat(info.id, " is not a depthwise kernel"), context);
  // The entry for this desc: a probe's info may come from a listing of another desc.
  AlgoInfo own = info_of(desc, direction, *spec);
  if (!own.supported) detail::raise(ErrorKind::Unsupported, own.reason, context);
  own.priority = info.priority;
  return std::make_shared<DepthwisePlan>(std::move(runtime), desc, direction, std::move(own),
                                         spec->variant);
}

}  // namespace dnnx::cudnn
