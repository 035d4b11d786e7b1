// Note [channel padding]
// cuDNN's tensor-core kernels want channel counts that are multiples of 8 (or 4, which some
// first-layer kernels take), and for other counts fall back to slow paths: on an H100 the
// backward-data of ResNet-50's first layer (64x3x224x224, 7x7/2, f16 channels_last) takes 0.94 ms
// with 3 input channels and 0.49 ms with 4, for a third more arithmetic (PyTorch 2.11, cuDNN
// 9.19). So for f16/bf16 convolutions without groups whose input or output channel count is not a
// multiple of 8, every supported tensor-core candidate of the same convolution with the counts
// rounded up (to 4 when at most 4, else to the next multiple of 8) is a candidate too, id
// "cudnn:padc:<inner id>". (A kernel without tensor cores has no use for the alignment and would
// only do the padded channels' extra arithmetic: wrapping those too doubled the candidates that
// the search of that first layer times.) Around the inner plan it copies, on the context's stream:
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
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/kernels/channel_pad.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

constexpr std::string_view padded_prefix = "cudnn:padc:";

std::int64_t padded_channels(std::int64_t channels) {
  if (channels <= 4) return 4;
  return (channels + 7) / 8 * 8;
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

// The boxes (kernels::channel_pad::Box, three axes) of an activation with `channels` channels
// over `spatial` positions, and of the weights.
kernels::channel_pad::Box activation_box(const ConvDesc& desc, std::int64_t channels,
                                         std::int64_t spatial) {
  if (desc.layout == Layout::channels_last) return {{1, 1, 1, desc.batch * spatial, channels}};
  return {{1, 1, desc.batch, channels, spatial}};
}
kernels::channel_pad::Box weights_box(const ConvDesc& desc, std::int64_t out_channels,
                                      std::int64_t in_channels) {
  const std::int64_t taps = spatial_product(desc.kernel, desc.spatial_dims);
  if (desc.layout == Layout::channels_last) return {{1, 1, out_channels, taps, in_channels}};
  return {{1, 1, out_channels, in_channels, taps}};
}

std::size_t box_bytes(const kernels::channel_pad::Box& box, const ConvDesc& desc) {
  return static_cast<std::size_t>(box.count()) * size_of(desc.dtype);
}

// The padded copies of one direction: which tensors are padded (inputs) or sliced back (the
// output), and where each sits after the inner workspace.
struct Buffers {
  kernels::channel_pad::Box src, src_padded;  // fwd/bwd_weights: src; bwd_data: diff_src
  kernels::channel_pad::Box dst, dst_padded;  // fwd: dst; bwd_*: diff_dst
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
    offset += workspace_aligned(box_bytes(box, desc));
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
        inner_bytes_(workspace_aligned(inner_->algo().workspace_bytes)) {
    info_ = padded_info(desc, padded, inner_->algo());
    context_ = conv_context(desc, direction, info_.id);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    std::byte* const base =
        carved_workspace(workspace, info_.workspace_bytes, "channel-padded plans", context_);
    std::byte* copies = base + inner_bytes_;
    const Buffers& b = buffers_;
    // The three tensors by role: x = src / diff_src, w = weights / diff_weights,
    // y = dst / diff_dst. bind_tensors gives (read, read, written) in direction order.
    Operand x{&b.src, &b.src_padded, b.pad_src, copies + b.src_offset};
    Operand w{&b.weights, &b.weights_padded, b.pad_weights, copies + b.weights_offset};
    Operand y{&b.dst, &b.dst_padded, b.pad_dst, copies + b.dst_offset};
    const std::array<Operand*, 3> order = direction_ == Direction::fwd ? std::array{&x, &w, &y}
                                          : direction_ == Direction::bwd_data
                                              ? std::array{&y, &w, &x}
                                              : std::array{&x, &y, &w};
    order[0]->user = const_cast<void*>(t.first);
    order[1]->user = const_cast<void*>(t.second);
    order[2]->user = t.output;
    runtime_->make_current();
    const Device device = (args.src != nullptr ? args.src : args.diff_dst)->device();
    for (std::size_t i = 0; i < 2; ++i) {  // the inputs, zero-padded
      if (order[i]->padded)
        copy(order[i]->user, *order[i]->box, order[i]->buffer, *order[i]->padded_box,
             "padding an input's channels");
    }
    auto inner_at = [](const Operand& o) { return o.padded ? o.buffer : o.user; };
    execute_at(*inner_, padded_, direction_, {inner_at(x), inner_at(y), inner_at(w)}, device, base);
    if (order[2]->padded)
      copy(order[2]->buffer, *order[2]->padded_box, order[2]->user, *order[2]->box,
           "slicing the output's channels");
  }

 private:
  // One of the plan's three tensors: the caller's memory, and the padded twin in the workspace
  // that the inner plan sees instead when `padded`.
  struct Operand {
    const kernels::channel_pad::Box* box;
    const kernels::channel_pad::Box* padded_box;
    bool padded;
    std::byte* buffer;
    void* user = nullptr;
  };

  void copy(const void* from, const kernels::channel_pad::Box& from_box, void* to,
            const kernels::channel_pad::Box& to_box, const char* what) const {
    DNNX_CUDNN_CHECK(
        kernels::channel_pad::copy(from, from_box, to, to_box,
                                   static_cast<int>(size_of(desc_.dtype)), runtime_->stream()),
        context_, what);
  }

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

AlgoInfo padded_info(const ConvDesc& desc, const ConvDesc& padded, const AlgoInfo& inner) {
  AlgoInfo info = inner;
  info.id = detail::cat(padded_prefix, inner.id);
  // The wrapped seed, which is listed too when the variant is (the same engine).
  if (!inner.variant_of.empty()) info.variant_of = detail::cat(padded_prefix, inner.variant_of);
  info.name = detail::cat(inner.name, ", channels padded ", desc.in_channels, "->",
                          padded.in_channels, " / ", desc.out_channels, "->", padded.out_channels);
  info.workspace_bytes = workspace_aligned(inner.workspace_bytes) + buffers(desc, padded).bytes;
  info.notes.push_back("channel_padding");
  return info;
}

std::optional<std::string> padded_inner_id(std::string_view id) {
  if (id.substr(0, padded_prefix.size()) != padded_prefix) return std::nullopt;
  return std::string(id.substr(padded_prefix.size()));
}

std::shared_ptr<detail::ConvPlan> make_padded_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, const ConvDesc& padded,
                                                   Direction direction,
                                                   std::shared_ptr<detail::ConvPlan> inner) {
  return std::make_shared<PaddedPlan>(std::move(runtime), desc, padded, direction,
                                      std::move(inner));
}

}  // namespace dnnx::cudnn
