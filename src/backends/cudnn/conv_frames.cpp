// Note [frame candidates]
// R(2+1)D factors each 3x3x3 convolution into a 1x3x3 one over the frames and a 3x1x1 one over
// time, and cuDNN gets both as 3-D convolutions: in the shape suite dnnx and PyTorch ran the same
// 3-D engines on R(2+1)D in fp32 (0.95 of PyTorch in all; l1.spatial's bwd_weights alone took 13.7
// of its 91.8 ms, at 15 TFLOP/s on an H200), while on ResNet-50's fp32 3x3 layers the 2-D legacy
// algorithms `fft_tiling` and `winograd_nonfused`, which cuDNN has for 2-D convolutions only, won
// at 0.34-0.68 of PyTorch on an H100 (docs/benchmarks.md). A 3-D convolution whose kernel has a
// depth of 1 and no depth padding is a 2-D convolution per output frame: output frame t is the 2-D
// convolution (frame_desc()) of input frame t x depth stride, with the same weights. So such a
// convolution lists one candidate per legacy algorithm cuDNN runs on a frame,
// "cudnn:frames:<algorithm>", which runs it as one legacy call per output frame (one
// LegacyStridedConv, the frames differing only in their offsets):
//   fwd          each output frame written by its call;
//   bwd_data     diff_src zeroed first where the depth stride skips input frames, each read
//                frame written by the call of the one output frame that reads it;
//   bwd_weights  the calls' weight gradients added up (beta = 1 after the first frame).
// A frame is a view of the caller's tensors where cuDNN takes one (NCDHW frames are strided: the
// depth lies between the channels and the rows), else a packed copy in the workspace
// (cudnnTransformTensor), as the tap regions' crops are (Note [tap-region candidates] in
// conv_taps.cpp). In NDHWC with a depth stride of 1 the frames of each sample lie one after
// another, so the tensors are one packed 2-D batch of N x T images: one call. The weights of depth
// 1 are the 2-D weights as they lie, in both layouts. The sums are the 3-D convolution's,
// bwd_weights' over the frames in another order. In R(2+1)D's fp32 suite on an H200 they won the
// forward of the 1x3x3 layers (winograd_nonfused on the strided frames, no copy: 0.44-0.56 of
// PyTorch), where the fold candidates (Note [fold candidates] in conv_folds.cpp: any 2-D candidate
// over packed frames) won the backward directions. DNNX_CUDNN_CONV_FRAMES lists them: "f32" (the
// default), "on" (every dtype), "off"; where the setting keeps them out of a convolution that has
// frames, or cuDNN runs no legacy algorithm on its frames, one unsupported "cudnn:frames" entry
// says so.

#include "backends/cudnn/conv_frames.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstddef>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::string_view frames_prefix = "cudnn:frames:";

// The strides of a 5-D geometry's tensor without its depth (index 2): a frame's.
std::array<std::int64_t, 5> without_depth(const std::array<std::int64_t, 5>& strides) {
  return {strides[0], strides[1], strides[3], strides[4], 0};
}

class FramesPlan final : public detail::ConvPlan {
 public:
  FramesPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
             int algorithm)
      : runtime_(std::move(runtime)),
        direction_(direction),
        context_(conv_context(desc, direction, frames_id(algorithm, direction))) {
    const std::optional<ConvDesc> frame = frame_desc(desc);
    if (!frame) {
      detail::raise(ErrorKind::Unsupported,
                    "not a 3-D convolution whose kernel has a depth of 1 and no depth padding",
                    context_);
    }
    whole_ = conv_geometry(desc);
    check_legacy_range(whole_, context_);
    skips_frames_ = skips_input_frames(desc);
    frames_out_ = desc.output_size(0);
    step_ = desc.stride[0];
    // NDHWC, depth stride 1: one call over the N x T frames (see the Note).
    const bool batched = desc.layout == Layout::channels_last && step_ == 1;
    ConvDesc call = *frame;
    if (batched) call.batch *= frames_out_;
    calls_ = batched ? 1 : frames_out_;
    const Geometry packed = conv_geometry(call);
    // A frame's views: the whole tensors' strides without the depth (a batch: its own).
    const auto view_x = batched ? packed.src_strides : without_depth(whole_.src_strides);
    const auto view_y = batched ? packed.dst_strides : without_depth(whole_.dst_strides);
    ViewedLegacyConv viewed = legacy_conv_on_views(*runtime_, call, packed, view_x, view_y,
                                                   direction_, context_, algorithm);
    if (!viewed.conv) {
      detail::raise(
          ErrorKind::Unsupported,
          detail::cat("cuDNN runs ",
                      legacy_algorithm_names(direction)[static_cast<std::size_t>(algorithm)],
                      " on no frame (", *frame, "): ", viewed.refusal),
          context_);
    }
    conv_ = std::move(viewed.conv);
    pack_x_ = viewed.pack_x;
    pack_y_ = viewed.pack_y;
    const std::size_t element = size_of(desc.dtype);
    element_ = static_cast<std::int64_t>(element);
    if (pack_x_)
      x_copy_ = view_copy(packed, packed.src, view_x, packed.src_strides, element, context_);
    if (pack_y_)
      y_copy_ = view_copy(packed, packed.dst, view_y, packed.dst_strides, element, context_);
    inner_bytes_ = workspace_aligned(conv_->workspace_bytes());
    x_at_ = inner_bytes_;
    y_at_ = x_at_ + workspace_aligned(x_copy_.bytes);
    info_.id = frames_id(algorithm, direction);
    info_.name = detail::cat(
        "frames: ",
        batched ? detail::cat("one 2-D legacy convolution over ", call.batch, " frames")
                : detail::cat(calls_, " 2-D legacy convolutions"),
        " (", conv_->algorithm_name(), pack_x_ || pack_y_ ? ", on copies" : "", ") of ", call);
    info_.supported = true;
    info_.workspace_bytes = y_at_ + workspace_aligned(y_copy_.bytes);
    info_.deterministic = conv_->deterministic();
    // The algorithm's note and Theano family, as its legacy candidates carry them: `winograd` on
    // a 3-D convolution can pick a frame candidate.
    const auto [note, family] = legacy_algorithm_kind(direction, algorithm);
    info_.notes = {"frames", "legacy", note, "host_heavy"};
    if (!family.empty()) info_.families = {family};
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const cudnnHandle_t handle = runtime_->handle();
    const std::int64_t element = element_;
    auto* base = static_cast<std::byte*>(workspace.data);
    std::byte* x_buffer = base == nullptr ? nullptr : base + x_at_;
    std::byte* y_buffer = base == nullptr ? nullptr : base + y_at_;
    auto at = [&](const void* tensor, std::int64_t offset) {
      return const_cast<std::byte*>(static_cast<const std::byte*>(tensor)) + offset * element;
    };
    // Output frame f reads input frame f x step.
    auto x_offset = [&](std::int64_t f) { return f * step_ * whole_.src_strides[2]; };
    auto y_offset = [&](std::int64_t f) { return f * whole_.dst_strides[2]; };
    auto transform = [&](const TensorDescriptor& from_desc, const void* from,
                         const TensorDescriptor& to_desc, void* to, const char* what) {
      transform_tensor(handle, from_desc, from, to_desc, to, 0.0f, context_, what);
    };
    auto x_input = [&](const void* whole, std::int64_t f) -> const void* {
      if (!pack_x_) return at(whole, x_offset(f));
      transform(x_copy_.view, at(whole, x_offset(f)), x_copy_.packed, x_buffer, "copying a frame");
      return x_buffer;
    };
    auto y_input = [&](const void* whole, std::int64_t f) -> const void* {
      if (!pack_y_) return at(whole, y_offset(f));
      transform(y_copy_.view, at(whole, y_offset(f)), y_copy_.packed, y_buffer, "copying a frame");
      return y_buffer;
    };
    switch (direction_) {
      case Direction::fwd:
        for (std::int64_t f = 0; f < calls_; ++f) {
          void* out = pack_y_ ? y_buffer : at(t.output, y_offset(f));
          conv_->run(handle, x_input(t.first, f), t.second, out, 0.0f, base, inner_bytes_);
          if (pack_y_)
            transform(y_copy_.packed, y_buffer, y_copy_.view, at(t.output, y_offset(f)),
                      "writing an output frame");
        }
        break;
      case Direction::bwd_data:
        // Input frames no output frame reads get no gradient.
        if (skips_frames_) {
          DNNX_CUDNN_CHECK(
              cudaMemsetAsync(t.output, 0,
                              static_cast<std::size_t>(elements_of(whole_, whole_.src) * element),
                              runtime_->stream()),
              context_, "zeroing the input gradient");
        }
        for (std::int64_t f = 0; f < calls_; ++f) {
          const void* diff_dst = y_input(t.first, f);
          if (!pack_x_) {
            conv_->run(handle, diff_dst, t.second, at(t.output, x_offset(f)), 0.0f, base,
                       inner_bytes_);
            continue;
          }
          conv_->run(handle, diff_dst, t.second, x_buffer, 0.0f, base, inner_bytes_);
          transform(x_copy_.packed, x_buffer, x_copy_.view, at(t.output, x_offset(f)),
                    "writing an input frame's gradient");
        }
        break;
      case Direction::bwd_weights:
        for (std::int64_t f = 0; f < calls_; ++f) {
          conv_->run(handle, x_input(t.first, f), y_input(t.second, f), t.output,
                     f == 0 ? 0.0f : 1.0f, base, inner_bytes_);
        }
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  Direction direction_;
  ErrorContext context_;
  Geometry whole_;
  std::int64_t frames_out_ = 0, step_ = 1, element_ = 0;
  bool skips_frames_ = false;  // skips_input_frames()
  std::int64_t calls_ = 1;  // frames_out_, or 1 where they are one packed batch (NDHWC)
  std::unique_ptr<LegacyStridedConv> conv_;
  bool pack_x_ = false, pack_y_ = false;
  ViewCopy x_copy_, y_copy_;  // where a frame of x or y is copied
  std::size_t inner_bytes_ = 0, x_at_ = 0, y_at_ = 0;
  AlgoInfo info_;
};

AlgoInfo frames_off_info(std::string reason) {
  return off_entry(frames_off_id, "frames: one 2-D legacy convolution per output frame",
                   std::move(reason), "frames");
}

}  // namespace

std::string frames_id(int algorithm, Direction direction) {
  return detail::cat(frames_prefix,
                     legacy_algorithm_names(direction)[static_cast<std::size_t>(algorithm)]);
}

bool is_frames_id(std::string_view id) {
  return id == frames_off_id || id.substr(0, frames_prefix.size()) == frames_prefix;
}

std::optional<ConvDesc> frame_desc(const ConvDesc& desc) {
  if (desc.spatial_dims != 3 || desc.kernel[0] != 1 || desc.pad_before[0] != 0 ||
      desc.pad_after[0] != 0)
    return std::nullopt;
  ConvDesc frame = desc;
  frame.spatial_dims = 2;
  frame.input = {desc.input[1], desc.input[2], 0};
  frame.kernel = {desc.kernel[1], desc.kernel[2], 0};
  frame.stride = {desc.stride[1], desc.stride[2], 1};
  frame.pad_before = {desc.pad_before[1], desc.pad_before[2], 0};
  frame.pad_after = {desc.pad_after[1], desc.pad_after[2], 0};
  frame.dilation = {desc.dilation[1], desc.dilation[2], 1};
  return frame;
}

bool skips_input_frames(const ConvDesc& desc) {
  const std::int64_t step = desc.stride[0];
  return step > 1 || (desc.output_size(0) - 1) * step + 1 < desc.input[0];
}

std::vector<FramesEntry> frames_entries(const std::shared_ptr<Runtime>& runtime,
                                        const ConvDesc& desc, Direction direction) {
  if (!frame_desc(desc)) return {};
  if (std::string off = not_listed_reason(runtime->settings().conv_frames, Settings{}.conv_frames,
                                          frames_variable, "frame candidates", desc.dtype);
      !off.empty())
    return {{frames_off_info(std::move(off)), std::nullopt, nullptr}};
  std::vector<FramesEntry> entries;
  std::string refusal;
  const std::size_t count = legacy_algorithm_names(direction).size();
  for (std::size_t a = 0; a < count; ++a) {
    try {
      auto plan = std::make_shared<FramesPlan>(runtime, desc, direction, static_cast<int>(a));
      FramesEntry& entry = entries.emplace_back();
      entry.info = plan->algo();
      entry.algorithm = static_cast<int>(a);
      entry.plan = std::move(plan);
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::Unsupported) throw;
      refusal = error.message();
    }
  }
  if (entries.empty()) {
    entries.push_back(
        {frames_off_info(detail::cat("cuDNN runs no legacy algorithm on the frames: ", refusal)),
         std::nullopt, nullptr});
  }
  return entries;
}

std::shared_ptr<detail::ConvPlan> make_frames_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   int algorithm) {
  return std::make_shared<FramesPlan>(std::move(runtime), desc, direction, algorithm);
}

}  // namespace dnnx::cudnn
