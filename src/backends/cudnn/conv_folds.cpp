// Note [fold candidates]
// R(2+1)D factors each 3x3x3 convolution into a 1x3x3 one over the frames and a 3x1x1 one over
// time; cuDNN gets both as 3-D convolutions, and its 3-D engines are what dnnx and PyTorch both
// ran on them in fp32 (0.95 of PyTorch in all). Each is a 2-D convolution over another view of
// the same tensors, and cuDNN's 2-D engines and legacy algorithms run those far faster: in
// bench/fold_study.py on an H200 (docs/benchmarks.md) l1.spatial's bwd_weights took 13.7 ms as a
// 3-D convolution and 3.9 ms as a 2-D one over packed copies of its frames, l1.temporal's 7.5 and
// 5.6 ms as a 2-D one over its planes. So a 3-D convolution lists, besides its own candidates, the
// supported candidates of each 2-D convolution it folds into (conv_fold()):
//   planes  kernel 1x1 over the rows and columns, stride 1 and no padding there (a 3x1x1
//           convolution): rows and columns are one axis of H x W, and the tensors, weights
//           included, are those of a 2-D convolution over (depth, H x W) as they lie, in NCDHW
//           and NDHWC alike; no copy.
//   frames  kernel depth 1 and no depth padding (a 1x3x3 convolution): output frame t is the 2-D
//           convolution of input frame t x depth stride (frame_desc() in conv_frames.cpp), so the
//           whole is one 2-D convolution over a batch of N x T output frames. In NDHWC with a
//           depth stride of 1 that batch is the tensors as they lie; otherwise src / diff_src
//           and dst / diff_dst are copied to and from packed frames in the workspace (one
//           cudnnTransformTensor each, over 5-D views; bwd_data zeroes diff_src first where the
//           depth stride skips frames). The weights of depth 1 are 2-D weights as they lie.
// The candidate "cudnn:fold:<planes|frames>:<inner id>" wraps a supported engine config or
// legacy algorithm of the 2-D convolution (not its own wrappers, nor runtime-compiled engines:
// Note [runtime-compiled engines]; in NDHWC frames without copies not the legacy algorithms,
// which the frame candidates run already where DNNX_CUDNN_CONV_FRAMES lists them; on planes not
// the FFTs, which transform a plane of H x W columns for a kernel one column wide: on R(2+1)D's
// l3.temporal fwd they took 94-270 ms on an eighth of the batch, the best 0.53 ms in all), after
// every other supported candidate, so the heuristic pick stays the 3-D convolution's own; the 2-D
// heuristics' top picks are not the 3-D convolution's (their note is dropped). The first of each
// fold's candidates (the fold of the 2-D convolution's own first pick) is noted "scout", which a
// search times right after the heuristic pick (Note [scout candidates] in src/tune/select.cpp). The
// results are those of the 3-D convolution up to the order of the f32 sums; determinism is the
// inner candidate's. DNNX_CUDNN_CONV_FOLDS lists them: "f32" (the default), "on" (every dtype),
// "off". A third fold, "stacked", is of any spatial dims: a dilated convolution whose outer taps
// mostly read padding as the denser convolution of its stacked weight sets (Note [stacked folds] in
// conv_stacked.cpp), wrapping the first stacked_inner_max supported engine configs and legacy
// algorithms of that convolution in its listing's order; DNNX_CUDNN_CONV_STACKED lists them
// ("on", the default: every dtype; "f32"; "off"). A fourth, "phases", is of any spatial dims too: a
// strided convolution of few input channels as the stride-1 convolution of its input's phases
// stacked as channels (Note [phase folds] in conv_phases.cpp), wrapping the first
// stacked_inner_max supported engine configs and legacy algorithms of that convolution as the
// stacked fold does; DNNX_CUDNN_CONV_PHASES lists them ("on", the default; "f32"; "off").

#include "backends/cudnn/conv_folds.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_frames.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::string_view fold_prefix = "cudnn:fold:";

// Where the packed frames of a fold with copies lie, and how they map onto the caller's tensors:
// 5-D views (N, T, C, H, W) of x (src / diff_src) and y (dst / diff_dst), the caller's strided
// and the packed ones, for cudnnTransformTensor.
struct FrameCopies {
  std::array<std::int64_t, 5> x_dims{}, x_whole{}, x_packed{};
  std::array<std::int64_t, 5> y_dims{}, y_whole{}, y_packed{};
  std::size_t x_bytes = 0, y_bytes = 0;
  std::size_t zero_x_bytes = 0;  // bwd_data: all of diff_src, where a frame of it is read by none
};

FrameCopies frame_copies(const ConvDesc& desc, const ConvFold& fold) {
  const Geometry whole = conv_geometry(desc);
  const Geometry packed = conv_geometry(fold.folded);
  const std::int64_t frames = desc.output_size(0);
  const std::int64_t step = desc.stride[0];
  FrameCopies c;
  const auto& ws = whole.src_strides;
  const auto& ps = packed.src_strides;
  c.x_dims = {desc.batch, frames, whole.src[1], whole.src[3], whole.src[4]};
  c.x_whole = {ws[0], step * ws[2], ws[1], ws[3], ws[4]};
  c.x_packed = {frames * ps[0], ps[0], ps[1], ps[2], ps[3]};
  const auto& wd = whole.dst_strides;
  const auto& pd = packed.dst_strides;
  c.y_dims = {desc.batch, frames, whole.dst[1], whole.dst[3], whole.dst[4]};
  c.y_whole = {wd[0], wd[2], wd[1], wd[3], wd[4]};
  c.y_packed = {frames * pd[0], pd[0], pd[1], pd[2], pd[3]};
  const auto element = static_cast<std::int64_t>(size_of(desc.dtype));
  c.x_bytes = static_cast<std::size_t>(elements_of(packed, packed.src) * element);
  c.y_bytes = static_cast<std::size_t>(elements_of(packed, packed.dst) * element);
  if (skips_input_frames(desc))
    c.zero_x_bytes = static_cast<std::size_t>(elements_of(whole, whole.src) * element);
  return c;
}

std::size_t copies_bytes(const ConvDesc& desc, const ConvFold& fold) {
  const FrameCopies c = frame_copies(desc, fold);
  return workspace_aligned(c.x_bytes) + workspace_aligned(c.y_bytes);
}

class FoldPlan final : public detail::ConvPlan {
 public:
  FoldPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, ConvFold fold,
           Direction direction, std::shared_ptr<detail::ConvPlan> inner)
      : runtime_(std::move(runtime)),
        fold_(std::move(fold)),
        direction_(direction),
        inner_(std::move(inner)),
        inner_bytes_(workspace_aligned(inner_->algo().workspace_bytes)) {
    info_ = fold_info(desc, fold_, inner_->algo());
    context_ = conv_context(desc, direction, info_.id);
    if (fold_.copies) {
      const Geometry g = conv_geometry(desc);  // 5-D, the dtype's cuDNN type
      // The copies' descriptors hold ints, as the legacy API's do.
      check_legacy_range(g, context_);
      copies_ = frame_copies(desc, fold_);
      x_view_ = make_tensor_descriptor(context_);
      x_pack_ = make_tensor_descriptor(context_);
      y_view_ = make_tensor_descriptor(context_);
      y_pack_ = make_tensor_descriptor(context_);
      set_tensor_descriptor(x_view_, g, copies_.x_dims, copies_.x_whole, context_,
                            "describing the frames of x");
      set_tensor_descriptor(x_pack_, g, copies_.x_dims, copies_.x_packed, context_,
                            "describing the packed frames of x");
      set_tensor_descriptor(y_view_, g, copies_.y_dims, copies_.y_whole, context_,
                            "describing the frames of y");
      set_tensor_descriptor(y_pack_, g, copies_.y_dims, copies_.y_packed, context_,
                            "describing the packed frames of y");
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    std::byte* base = nullptr;
    if (fold_.copies) {
      base = carved_workspace(workspace, info_.workspace_bytes, "fold plans with copies", context_);
    } else {
      check_workspace(workspace, info_.workspace_bytes, context_);
      base = static_cast<std::byte*>(workspace.data);
    }
    runtime_->make_current();
    const cudnnHandle_t handle = runtime_->handle();
    auto transform = [&](const TensorDescriptor& from_desc, const void* from,
                         const TensorDescriptor& to_desc, void* to, const char* what) {
      transform_tensor(handle, from_desc, from, to_desc, to, 0.0f, context_, what);
    };
    const TensorRoles roles = tensor_roles(t, direction_);
    const bool fwd = direction_ == Direction::fwd, data = direction_ == Direction::bwd_data;
    void* x = roles.x;
    void* y = roles.y;
    std::byte* x_buffer = nullptr;
    std::byte* y_buffer = nullptr;
    if (fold_.copies) {  // the inputs packed now, the output packed and written back after
      x_buffer = base + inner_bytes_;
      y_buffer = x_buffer + workspace_aligned(copies_.x_bytes);
      if (!data) transform(x_view_, x, x_pack_, x_buffer, "packing the frames of x");
      if (!fwd) transform(y_view_, y, y_pack_, y_buffer, "packing the frames of y");
    }
    const Device device = (args.src != nullptr ? args.src : args.diff_dst)->device();
    execute_at(*inner_, fold_.folded, direction_,
               {fold_.copies ? x_buffer : x, fold_.copies ? y_buffer : y, roles.w}, device, base);
    if (!fold_.copies) return;
    if (fwd) transform(y_pack_, y_buffer, y_view_, y, "writing the frames of y");
    if (data) {
      if (copies_.zero_x_bytes != 0) {  // input frames no output frame reads
        DNNX_CUDNN_CHECK(cudaMemsetAsync(x, 0, copies_.zero_x_bytes, runtime_->stream()), context_,
                         "zeroing the input gradient");
      }
      transform(x_pack_, x_buffer, x_view_, x, "writing the frames' gradients");
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvFold fold_;
  Direction direction_;
  std::shared_ptr<detail::ConvPlan> inner_;
  std::size_t inner_bytes_;
  FrameCopies copies_;
  TensorDescriptor x_view_, x_pack_, y_view_, y_pack_;
  AlgoInfo info_;
  ErrorContext context_;
};

}  // namespace

const char* to_string(FoldKind kind) {
  switch (kind) {
    case FoldKind::planes: return "planes";
    case FoldKind::frames: return "frames";
    case FoldKind::stacked: return "stacked";
    case FoldKind::phases: return "phases";
  }
  return "?";
}

std::optional<ConvFold> conv_fold(const ConvDesc& desc, FoldKind kind) {
  ConvFold fold;
  fold.kind = kind;
  if (kind == FoldKind::phases) {
    std::string why;
    fold.phases = phase_form(desc, why);
    if (!fold.phases) return std::nullopt;
    fold.folded = fold.phases->inner;
    fold.copies = true;
    return fold;
  }
  if (kind == FoldKind::stacked) {
    std::string why;
    fold.stacked = stacked_form(desc, why);
    if (!fold.stacked) return std::nullopt;
    fold.folded = fold.stacked->inner;
    fold.copies = true;
    return fold;
  }
  if (desc.spatial_dims != 3) return std::nullopt;
  if (kind == FoldKind::frames) {
    std::optional<ConvDesc> frame = frame_desc(desc);
    if (!frame) return std::nullopt;
    fold.folded = std::move(*frame);
    fold.folded.batch = desc.batch * desc.output_size(0);
    fold.copies = desc.layout != Layout::channels_last || desc.stride[0] != 1;
    return fold;
  }
  for (int i : {1, 2}) {
    const auto d = static_cast<std::size_t>(i);
    if (desc.kernel[d] != 1 || desc.stride[d] != 1 || desc.pad_before[d] != 0 ||
        desc.pad_after[d] != 0)
      return std::nullopt;
  }
  ConvDesc& planes = fold.folded;
  planes = desc;
  planes.spatial_dims = 2;
  planes.input = {desc.input[0], desc.input[1] * desc.input[2], 0};
  planes.kernel = {desc.kernel[0], 1, 0};
  planes.stride = {desc.stride[0], 1, 1};
  planes.pad_before = {desc.pad_before[0], 0, 0};
  planes.pad_after = {desc.pad_after[0], 0, 0};
  planes.dilation = {desc.dilation[0], 1, 1};
  return fold;
}

std::vector<ConvFold> conv_folds(const ConvDesc& desc) {
  std::vector<ConvFold> folds;
  for (FoldKind kind : {FoldKind::planes, FoldKind::frames, FoldKind::stacked, FoldKind::phases}) {
    if (std::optional<ConvFold> fold = conv_fold(desc, kind)) folds.push_back(std::move(*fold));
  }
  return folds;
}

AlgoInfo fold_info(const ConvDesc& desc, const ConvFold& fold, const AlgoInfo& inner) {
  AlgoInfo info = inner;
  const std::string prefix = detail::cat(fold_prefix, to_string(fold.kind), ":");
  info.id = prefix + inner.id;
  // The wrapped seed, which is listed too when the variant is (the same engine).
  if (!inner.variant_of.empty()) info.variant_of = prefix + inner.variant_of;
  const char* on = "";
  switch (fold.kind) {
    case FoldKind::planes: on = "planes (depth x rows*columns) as they lie"; break;
    case FoldKind::frames:
      on = fold.copies ? "frames, packed in copies" : "frames as they lie";
      break;
    case FoldKind::stacked:
      on = "weight sets of the output bands stacked as output channels";
      break;
    case FoldKind::phases: on = "input's phases stacked as channels, copied"; break;
  }
  info.name = detail::cat(inner.name, ", on the ", on, ": ", fold.folded);
  // The copies after the inner workspace; without copies, the inner workspace alone.
  if (fold.stacked) {
    info.workspace_bytes =
        workspace_aligned(inner.workspace_bytes) + stacked_buffers_bytes(*fold.stacked);
  } else if (fold.phases) {
    info.workspace_bytes =
        workspace_aligned(inner.workspace_bytes) + phase_buffers_bytes(*fold.phases);
  } else if (fold.copies) {
    info.workspace_bytes = workspace_aligned(inner.workspace_bytes) + copies_bytes(desc, fold);
  }
  // The 2-D convolution's heuristics ranked it, not the 3-D one's (Note [fold candidates]).
  std::erase(info.notes, std::string("heuristics_top"));
  info.notes.push_back("fold");
  info.notes.push_back(detail::cat("fold_", to_string(fold.kind)));
  return info;
}

AlgoInfo folds_off_info(FoldKind kind, std::string reason) {
  if (kind == FoldKind::phases) {
    return off_entry(phases_off_id,
                     "fold: the stride-1 convolution of a strided one's input phases as channels",
                     std::move(reason), "fold");
  }
  if (kind == FoldKind::stacked) {
    return off_entry(stacked_off_id,
                     "fold: the denser convolution of stacked weight sets a dilated one is",
                     std::move(reason), "fold");
  }
  return off_entry(folds_off_id,
                   "fold: the 2-D convolutions a 3-D one is, over other views of its tensors",
                   std::move(reason), "fold");
}

std::optional<FoldInnerId> fold_inner_id(std::string_view id) {
  if (id.substr(0, fold_prefix.size()) != fold_prefix) return std::nullopt;
  id.remove_prefix(fold_prefix.size());
  for (FoldKind kind : {FoldKind::planes, FoldKind::frames, FoldKind::stacked, FoldKind::phases}) {
    const std::string head = detail::cat(to_string(kind), ":");
    if (id.substr(0, head.size()) == head && id.size() > head.size())
      return FoldInnerId{kind, std::string(id.substr(head.size()))};
  }
  return std::nullopt;
}

std::shared_ptr<detail::ConvPlan> make_fold_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, const ConvFold& fold,
                                                 Direction direction,
                                                 std::shared_ptr<detail::ConvPlan> inner) {
  if (fold.phases) {
    AlgoInfo info = fold_info(desc, fold, inner->algo());  // before `inner` moves
    return make_phase_plan(std::move(runtime), desc, *fold.phases, direction, info,
                           std::move(inner));
  }
  if (fold.stacked) {
    AlgoInfo info = fold_info(desc, fold, inner->algo());  // before `inner` moves
    return make_stacked_plan(std::move(runtime), desc, *fold.stacked, direction, info,
                             std::move(inner));
  }
  return std::make_shared<FoldPlan>(std::move(runtime), desc, fold, direction, std::move(inner));
}

}  // namespace dnnx::cudnn
