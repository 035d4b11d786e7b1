// Note [narrow-channel candidates]
// The passes of a convolution with few input channels (a network's first layer, on RGB or grey
// images and clips) are products with a side of C (fwd's reduction over kernel volume x C;
// bwd_data's diff_src columns; bwd_weights' kernel volume x C columns), and cuDNN's engines tile
// that side by 32 or more channels: most of their work is padding (kernels/narrow.cu, Note
// [narrow forward], Note [narrow backward data], Note [narrow weight gradients]). dnnx's kernels
// there tile it by 8 or pack the taps' channels. They are listed for every convolution as one
// id per direction, unsupported with its reason outside their domain:
//   cudnn:kernel:narrow:mma  fwd, bwd_data and bwd_weights, groups 1, at most 8 input channels,
//                            channels_last, f16 or bf16 (f32 accumulation); any spatial rank,
//                            kernel size, stride, per-side padding and dilation (fwd and
//                            bwd_weights: within their input tiles; fwd: kernel volume x C of at
//                            most 192, kernels/narrow.hpp)
// bwd_data and bwd_weights need workspace (bwd_data: the weights in the tensor cores' operand
// layout, Note [narrow weight fragments]; bwd_weights: f32 partial sums per split of the
// positions), fwd none; all are deterministic (fwd and bwd_data: each output element summed by
// one thread in a fixed order; bwd_weights: a fixed-order sum of the splits) and overwrite their
// output. Like the depthwise kernels (Note [depthwise candidates]), a supported one comes right
// after the last config cuDNN's heuristics rank first that is not runtime-compiled. On the shape
// suite's first layers the backward kernels are the fastest candidates but on the 7x7 stride-2
// stems (bwd_data; bwd_weights on DeepLabV3's odd-width one), the fwd kernel on C3D's and
// R(2+1)D's (Note [narrow backward data], Note [narrow forward]).

#include "backends/cudnn/conv_narrow.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/kernels/narrow.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::int64_t max_int = (std::int64_t{1} << 31) - 1;

// Why the kernel cannot run (desc, direction) ("" when it can), checked before the kernel's own
// bounds (kernels::narrow_unsupported) so that sizes reach its int fields intact.
std::string exclusion(const ConvDesc& desc, Direction direction) {
  if (direction == Direction::fwd_training)
    return "the narrow-channel kernels run fwd, bwd_data and bwd_weights";
  if (desc.groups != 1)
    return detail::cat("the narrow-channel kernel needs groups 1, got groups=", desc.groups);
  if (desc.in_channels > kernels::narrow_max_channels) {
    return detail::cat("the narrow-channel kernel takes at most ", kernels::narrow_max_channels,
                       " input channels, got in_channels=", desc.in_channels);
  }
  if (desc.dtype != DType::f16 && desc.dtype != DType::bf16)
    return "the narrow-channel kernel runs f16 and bf16 only (f16/bf16 tensor-core products)";
  if (desc.layout != Layout::channels_last)
    return "the narrow-channel kernel needs the channels_last layout";
  if (desc.out_channels > max_int) return "out_channels beyond 2^31";
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    for (const std::int64_t value : {desc.input[s], desc.output_size(i), desc.kernel[s],
                                     desc.stride[s], desc.pad_before[s], desc.dilation[s]}) {
      if (value > max_int) return "spatial sizes, strides, paddings or dilations beyond 2^31";
    }
  }
  return {};
}

// The desc as the kernels see it (exclusion(desc, direction) empty).
kernels::NarrowShape kernel_shape(const ConvDesc& desc) {
  kernels::NarrowShape shape;
  shape.batch = desc.batch;
  shape.channels = static_cast<int>(desc.in_channels);
  shape.out_channels = static_cast<int>(desc.out_channels);
  static_cast<kernels::SpatialDims&>(shape) = kernel_dims(desc, max_int);
  shape.type = desc.dtype == DType::bf16 ? kernels::NarrowType::bf16 : kernels::NarrowType::f16;
  return shape;
}

AlgoInfo info_of(const ConvDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = narrow_id;
  info.name = "dnnx narrow-channel kernel (tensor cores, 8 columns)";
  info.deterministic = true;
  info.notes = {"kernel", "narrow", "tensor_cores"};
  if (direction == Direction::bwd_weights) info.notes.emplace_back("fixed_order_reduction");
  info.reason = exclusion(desc, direction);
  if (info.reason.empty()) {
    const kernels::NarrowShape shape = kernel_shape(desc);
    const char* reason = direction == Direction::fwd ? kernels::narrow_fwd_unsupported(shape)
                         : direction == Direction::bwd_weights
                             ? kernels::narrow_bwd_weights_unsupported(shape)
                             : kernels::narrow_unsupported(shape);
    if (reason != nullptr)
      info.reason = reason;
    else if (direction == Direction::bwd_weights)
      info.workspace_bytes = kernels::narrow_bwd_weights_workspace_bytes(shape);
    else if (direction == Direction::bwd_data)
      info.workspace_bytes = kernels::narrow_bwd_data_workspace_bytes(shape);
  }
  info.supported = info.reason.empty();
  return info;
}

class NarrowPlan final : public detail::ConvPlan {
 public:
  NarrowPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        direction_(direction),
        context_(conv_context(desc, direction, info_.id)),
        shape_(kernel_shape(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(
          kernels::narrow_fwd(shape_, t.first, t.second, t.output, runtime_->kernel_queue()),
          context_, "launching the narrow-channel forward kernel");
    } else if (direction_ == Direction::bwd_weights) {
      DNNX_CUDNN_CHECK(kernels::narrow_bwd_weights(shape_, t.first, t.second, t.output,
                                                   workspace.data, runtime_->kernel_queue()),
                       context_, "launching the narrow-channel backward weights kernel");
    } else {
      DNNX_CUDNN_CHECK(kernels::narrow_bwd_data(shape_, t.first, t.second, t.output, workspace.data,
                                                runtime_->kernel_queue()),
                       context_, "launching the narrow-channel backward data kernel");
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  Direction direction_;
  ErrorContext context_;
  kernels::NarrowShape shape_;
};

}  // namespace

std::vector<AlgoInfo> narrow_candidates(const ConvDesc& desc, Direction direction) {
  return {info_of(desc, direction)};
}

bool is_narrow_id(const std::string& id) { return id == narrow_id; }

std::shared_ptr<detail::ConvPlan> make_narrow_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info) {
  const ErrorContext context = conv_context(desc, direction, info.id);
  if (!is_narrow_id(info.id)) {
    detail::raise(ErrorKind::Internal, detail::cat(info.id, " is not the narrow-channel kernel"),
                  context);
  }
  // The entry for this desc: a probe's info may come from a listing of another desc.
  AlgoInfo own = info_of(desc, direction);
  if (!own.supported) detail::raise(ErrorKind::Unsupported, own.reason, context);
  own.priority = info.priority;
  return std::make_shared<NarrowPlan>(std::move(runtime), desc, direction, std::move(own));
}

}  // namespace dnnx::cudnn
