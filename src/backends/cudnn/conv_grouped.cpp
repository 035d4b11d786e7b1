// Note [grouped candidates]
// A grouped convolution of few channels per group (ResNeXt's 3x3 layers) is a batch of narrow
// products that cuDNN's engines run well below memory speed (Note [grouped products] in
// kernels/grouped.cu). dnnx's kernel is listed for every convolution as one id, unsupported with
// its reason outside its domain:
//   cudnn:kernel:grouped:mma  fwd and bwd_data, 2 or more groups of 4, 8, 16 or 32 channels (in
//                             and out alike; depthwise ones are the depthwise kernels'), a
//                             channel count that is a multiple of 32, channels_last, f16/bf16
//                             (f32 accumulation), 3x3 kernels of 2-D convolutions (3-D ones of
//                             kernel depth 1, depth stride 1, no depth padding), a stride of 1
//                             or 2 along H and W, no dilation
// It needs workspace for the weights laid out as the products' fragments, is deterministic (each
// output summed by one lane in a fixed order) and overwrites its output. Like the depthwise
// kernels (Note [depthwise candidates]), a supported one comes right after the last config
// cuDNN's heuristics rank first that is not runtime-compiled.

#include "backends/cudnn/conv_grouped.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::int64_t max_spatial = std::int64_t{1} << 29;

// Why the kernel cannot run (desc, direction) ("" when it can), checked before the kernel's own
// bounds (kernels::grouped_unsupported) so that sizes reach its int fields intact.
std::string exclusion(const ConvDesc& desc, Direction direction) {
  if (direction == Direction::bwd_weights) return "the grouped kernel runs fwd and bwd_data only";
  if (desc.groups < 2)
    return detail::cat("the grouped kernel runs grouped convolutions, got groups=", desc.groups);
  if (desc.groups == desc.in_channels)
    return "a depthwise convolution: the depthwise kernels run it (cudnn:kernel:depthwise:*)";
  if (desc.layout != Layout::channels_last)
    return "the grouped kernel needs the channels_last layout";
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    for (const std::int64_t value : {desc.input[s], desc.output_size(i), desc.kernel[s],
                                     desc.stride[s], desc.pad_before[s], desc.dilation[s]}) {
      if (value > max_spatial)
        return detail::cat("spatial sizes, strides, paddings or dilations beyond 2^29 (", value,
                           ")");
    }
  }
  return {};
}

AlgoInfo info_of(const ConvDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = grouped_id;
  info.name = "dnnx grouped kernel (small groups, tensor-core products of 8 channels)";
  info.deterministic = true;
  info.notes = {"kernel", "grouped"};
  info.reason = exclusion(desc, direction);
  if (info.reason.empty()) {
    const kernels::GroupedShape shape = grouped_shape(desc);
    if (const char* reason = kernels::grouped_unsupported(shape, direction == Direction::fwd))
      info.reason = reason;
    else
      info.workspace_bytes = kernels::grouped_workspace_bytes(shape);
  }
  info.supported = info.reason.empty();
  return info;
}

class GroupedPlan final : public detail::ConvPlan {
 public:
  GroupedPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
              AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)),
        direction_(direction),
        shape_(grouped_shape(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const cudaError_t status =
        direction_ == Direction::fwd
            ? kernels::grouped_fwd(shape_, t.first, t.second, t.output, workspace.data,
                                   runtime_->kernel_queue())
            : kernels::grouped_bwd_data(shape_, t.first, t.second, t.output, workspace.data,
                                        runtime_->kernel_queue());
    DNNX_CUDNN_CHECK(status, context_, "launching the grouped convolution kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  kernels::GroupedShape shape_;
};

}  // namespace

kernels::GroupedShape grouped_shape(const ConvDesc& desc) {
  kernels::GroupedShape shape;
  shape.batch = desc.batch;
  shape.groups = desc.groups;
  shape.in_per_group = desc.in_channels / desc.groups;
  shape.out_per_group = desc.out_channels / desc.groups;
  static_cast<kernels::SpatialDims&>(shape) = kernel_dims(desc, max_spatial + 1);
  shape.type = desc.dtype == DType::f16    ? kernels::GroupedType::f16
               : desc.dtype == DType::bf16 ? kernels::GroupedType::bf16
                                           : kernels::GroupedType::f32;
  return shape;
}

std::vector<AlgoInfo> grouped_candidates(const ConvDesc& desc, Direction direction) {
  return {info_of(desc, direction)};
}

bool is_grouped_id(const std::string& id) { return id == grouped_id; }

std::shared_ptr<detail::ConvPlan> make_grouped_plan(std::shared_ptr<Runtime> runtime,
                                                    const ConvDesc& desc, Direction direction,
                                                    const AlgoInfo& info) {
  const ErrorContext context = conv_context(desc, direction, info.id);
  if (!is_grouped_id(info.id)) {
    detail::raise(ErrorKind::Internal, detail::cat(info.id, " is not the grouped kernel"), context);
  }
  // The entry for this desc: a probe's info may come from a listing of another desc.
  AlgoInfo own = info_of(desc, direction);
  if (!own.supported) detail::raise(ErrorKind::Unsupported, own.reason, context);
  own.priority = info.priority;
  return std::make_shared<GroupedPlan>(std::move(runtime), desc, direction, std::move(own));
}

}  // namespace dnnx::cudnn
