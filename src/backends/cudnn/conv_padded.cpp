// Note [channel padding]
// cuDNN's tensor-core kernels want channel counts that are multiples of 8 (or 4, which some
// first-layer kernels take), and for other counts fall back to slow paths: on an H100 the
// backward-data of ResNet-50's first layer (64x3x224x224, 7x7/2, f16 channels_last) takes 0.94 ms
// with 3 input channels and 0.49 ms with 4, for a third more arithmetic (PyTorch 2.11, cuDNN
// 9.19). So for f16/bf16 convolutions without groups whose input or output channel count is not a
// multiple of 8, every supported candidate of the same convolution with the counts rounded up
// (to 4 when at most 4, else to the next multiple of 8) is a candidate too, id
// "cudnn:padc:<inner id>". Around the inner plan it copies, on the context's stream:
//   fwd          src -> zero-padded src; weights -> zero-padded weights; padded dst -> dst
//   bwd_data     diff_dst -> padded; weights -> padded; padded diff_src -> diff_src
//   bwd_weights  src -> padded; diff_dst -> padded; padded diff_weights -> diff_weights
// (a tensor whose channels need no padding is passed through untouched). The padded channels are
// zeros on both sides of every product, so the results are those of the unpadded convolution up
// to the order of the f32 accumulation; determinism is the inner candidate's. The copies live in
// the candidate's workspace after the inner candidate's own, so the workspace limit, the listing
// and the profile table see the whole cost, and exhaustive selection times the copies with the
// kernel. The padded candidates come after every other supported one (the heuristic pick is
// unchanged) and exist only where cuDNN supports the padded convolution.

#include "backends/cudnn/conv_padded.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/kernels/channel_pad.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::string_view padded_prefix = "cudnn:padc:";
constexpr std::size_t buffer_alignment = 256;

std::int64_t padded_channels(std::int64_t channels) {
  if (channels <= 4) return 4;
  return (channels + 7) / 8 * 8;
}

std::size_t aligned(std::size_t bytes) {
  return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

std::int64_t spatial_product(const std::array<std::int64_t, 3>& sizes, int dims) {
  std::int64_t product = 1;
  for (int i = 0; i < dims; ++i) product *= sizes[static_cast<std::size_t>(i)];
  return product;
}

std::int64_t output_spatial(const ConvDesc& desc) {
  std::int64_t product = 1;
  for (int i = 0; i < desc.spatial_dims; ++i) product *= desc.output_size(i);
  return product;
}

// The three-axis boxes (kernels::channel_pad::Box) of an activation with `channels` channels
// over `spatial` positions, and of the weights.
kernels::channel_pad::Box activation_box(const ConvDesc& desc, std::int64_t channels,
                                         std::int64_t spatial) {
  if (desc.layout == Layout::channels_last) return {{1, desc.batch * spatial, channels}};
  return {{desc.batch, channels, spatial}};
}
kernels::channel_pad::Box weights_box(const ConvDesc& desc, std::int64_t out_channels,
                                      std::int64_t in_channels) {
  const std::int64_t taps = spatial_product(desc.kernel, desc.spatial_dims);
  if (desc.layout == Layout::channels_last) return {{out_channels, taps, in_channels}};
  return {{out_channels, in_channels, taps}};
}

std::size_t box_bytes(const kernels::channel_pad::Box& box, const ConvDesc& desc) {
  return static_cast<std::size_t>(box.count()) * size_of(desc.dtype);
}

// The padded copies of one direction: which tensors are padded (inputs) or sliced back (the
// output), and where each sits after the inner workspace.
struct Buffers {
  kernels::channel_pad::Box src, src_padded;      // fwd/bwd_weights: src; bwd_data: diff_src
  kernels::channel_pad::Box dst, dst_padded;      // fwd: dst; bwd_*: diff_dst
  kernels::channel_pad::Box weights, weights_padded;
  bool pad_src = false, pad_dst = false, pad_weights = false;
  std::size_t src_offset = 0, dst_offset = 0, weights_offset = 0;  // after the inner workspace
  std::size_t bytes = 0;
};

Buffers buffers(const ConvDesc& desc, const ConvDesc& padded) {
  Buffers b;
  const std::int64_t in_spatial = spatial_product(desc.input, desc.spatial_dims);
  const std::int64_t out_spatial = output_spatial(desc);
  b.src = activation_box(desc, desc.in_channels, in_spatial);
  b.src_padded = activation_box(desc, padded.in_channels, in_spatial);
  b.dst = activation_box(desc, desc.out_channels, out_spatial);
  b.dst_padded = activation_box(desc, padded.out_channels, out_spatial);
  b.weights = weights_box(desc, desc.out_channels, desc.in_channels);
  b.weights_padded = weights_box(desc, padded.out_channels, padded.in_channels);
  b.pad_src = padded.in_channels != desc.in_channels;
  b.pad_dst = padded.out_channels != desc.out_channels;
  b.pad_weights = b.pad_src || b.pad_dst;
  std::size_t offset = 0;
  auto place = [&](bool used, const kernels::channel_pad::Box& box, std::size_t& at) {
    if (!used) return;
    at = offset;
    offset += aligned(box_bytes(box, desc));
  };
  place(b.pad_src, b.src_padded, b.src_offset);
  place(b.pad_dst, b.dst_padded, b.dst_offset);
  place(b.pad_weights, b.weights_padded, b.weights_offset);
  b.bytes = offset;
  return b;
}

class PaddedPlan final : public detail::ConvPlan {
 public:
  PaddedPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, const ConvDesc& padded,
             Direction direction, std::shared_ptr<detail::ConvPlan> inner)
      : runtime_(std::move(runtime)),
        desc_(desc),
        padded_(padded),
        direction_(direction),
        inner_(std::move(inner)),
        buffers_(buffers(desc, padded)),
        inner_bytes_(aligned(inner_->algo().workspace_bytes)) {
    info_ = padded_info(desc, padded, inner_->algo());
    context_ = conv_context(desc, direction, info_.id);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    auto* base = static_cast<std::byte*>(workspace.data);
    if (reinterpret_cast<std::uintptr_t>(base) % buffer_alignment != 0) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("channel-padded plans carve their copies from a ",
                                buffer_alignment, "-byte aligned workspace; got address ",
                                workspace.data),
                    context_);
    }
    std::byte* copies = base + inner_bytes_;
    const Buffers& b = buffers_;
    const Device device = (args.src != nullptr ? args.src : args.diff_dst)->device();
    const Layout layout = desc_.layout;
    runtime_->make_current();
    auto copy = [&](const void* from, const kernels::channel_pad::Box& from_box, void* to,
                    const kernels::channel_pad::Box& to_box, const char* what) {
      DNNX_CUDNN_CHECK(kernels::channel_pad::copy(from, from_box, to, to_box,
                                                  static_cast<int>(size_of(desc_.dtype)),
                                                  runtime_->stream()),
                       context_, what);
    };
    // Views of the padded tensors (or the caller's, where nothing is padded).
    auto view = [&](void* data, const Dims& dims) {
      return Tensor::view(data, dims, desc_.dtype, layout, device);
    };
    Tensor src, dst, weights;
    detail::ConvArgs inner_args;
    const Dims src_dims = padded_.src_dims();
    const Dims dst_dims = padded_.dst_dims();
    const Dims weights_dims = padded_.weights_dims();
    std::byte* src_buffer = copies + b.src_offset;
    std::byte* dst_buffer = copies + b.dst_offset;
    std::byte* weights_buffer = copies + b.weights_offset;
    switch (direction_) {
      case Direction::fwd: {
        if (b.pad_src) copy(t.first, b.src, src_buffer, b.src_padded, "padding src's channels");
        copy(t.second, b.weights, weights_buffer, b.weights_padded, "padding the weights");
        src = view(b.pad_src ? src_buffer : const_cast<void*>(t.first), src_dims);
        weights = view(weights_buffer, weights_dims);
        dst = view(b.pad_dst ? dst_buffer : t.output, dst_dims);
        inner_args.src = &src;
        inner_args.weights = &weights;
        inner_args.dst = &dst;
        inner_->execute(inner_args, {base, inner_->algo().workspace_bytes});
        if (b.pad_dst) copy(dst_buffer, b.dst_padded, t.output, b.dst, "slicing dst's channels");
        break;
      }
      case Direction::bwd_data: {
        if (b.pad_dst)
          copy(t.first, b.dst, dst_buffer, b.dst_padded, "padding diff_dst's channels");
        copy(t.second, b.weights, weights_buffer, b.weights_padded, "padding the weights");
        dst = view(b.pad_dst ? dst_buffer : const_cast<void*>(t.first), dst_dims);
        weights = view(weights_buffer, weights_dims);
        src = view(b.pad_src ? src_buffer : t.output, src_dims);
        inner_args.diff_dst = &dst;
        inner_args.weights = &weights;
        inner_args.diff_src = &src;
        inner_->execute(inner_args, {base, inner_->algo().workspace_bytes});
        if (b.pad_src)
          copy(src_buffer, b.src_padded, t.output, b.src, "slicing diff_src's channels");
        break;
      }
      case Direction::bwd_weights: {
        if (b.pad_src) copy(t.first, b.src, src_buffer, b.src_padded, "padding src's channels");
        if (b.pad_dst)
          copy(t.second, b.dst, dst_buffer, b.dst_padded, "padding diff_dst's channels");
        src = view(b.pad_src ? src_buffer : const_cast<void*>(t.first), src_dims);
        dst = view(b.pad_dst ? dst_buffer : const_cast<void*>(t.second), dst_dims);
        weights = view(weights_buffer, weights_dims);
        inner_args.src = &src;
        inner_args.diff_dst = &dst;
        inner_args.diff_weights = &weights;
        inner_->execute(inner_args, {base, inner_->algo().workspace_bytes});
        copy(weights_buffer, b.weights_padded, t.output, b.weights,
             "slicing diff_weights' channels");
        break;
      }
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_, padded_;
  Direction direction_;
  std::shared_ptr<detail::ConvPlan> inner_;
  Buffers buffers_;
  std::size_t inner_bytes_;
  AlgoInfo info_;
  ErrorContext context_;
};

}  // namespace

std::optional<ConvDesc> channel_padded(const ConvDesc& desc) {
  if (desc.dtype != DType::f16 && desc.dtype != DType::bf16) return std::nullopt;
  if (desc.groups != 1) return std::nullopt;
  if (desc.in_channels % 8 == 0 && desc.out_channels % 8 == 0) return std::nullopt;
  ConvDesc padded = desc;
  if (desc.in_channels % 8 != 0) padded.in_channels = padded_channels(desc.in_channels);
  if (desc.out_channels % 8 != 0) padded.out_channels = padded_channels(desc.out_channels);
  if (padded == desc) return std::nullopt;  // already 4 where 4 is the rounding
  return padded;
}

bool is_padded_id(const std::string& id) { return id.rfind(padded_prefix, 0) == 0; }

std::string inner_id(const std::string& id) { return id.substr(padded_prefix.size()); }

AlgoInfo padded_info(const ConvDesc& desc, const ConvDesc& padded, const AlgoInfo& inner) {
  AlgoInfo info = inner;
  info.id = detail::cat(padded_prefix, inner.id);
  info.name = detail::cat(inner.name, ", channels padded ", desc.in_channels, "->",
                          padded.in_channels, " / ", desc.out_channels, "->", padded.out_channels);
  info.workspace_bytes = aligned(inner.workspace_bytes) + buffers(desc, padded).bytes;
  info.notes.push_back("channel_padding");
  return info;
}

std::shared_ptr<detail::ConvPlan> make_padded_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, const ConvDesc& padded,
                                                   Direction direction,
                                                   std::shared_ptr<detail::ConvPlan> inner) {
  return std::make_shared<PaddedPlan>(std::move(runtime), desc, padded, direction,
                                      std::move(inner));
}

}  // namespace dnnx::cudnn
