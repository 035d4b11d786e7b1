// Note [phase folds]
// A convolution of stride s along a dim reads, for output o, the inputs o x s + t (t a tap): the
// taps t = q x s + p of one offset p < s read the input's phase p (the positions congruent to p
// minus the padding, modulo s) at the positions o + q of that phase. So the convolution is the
// stride-1 convolution of an input X' whose channels are x's channels of every phase (C x s per
// strided dim: space to depth) with a kernel of ceil(k / s) taps W' holding the taps of each
// phase on its channels (zeros where q x s + p passes the kernel):
//   X'[n][phase x C + c][f] = x[n][c][f x s + p - pad]   (zero in the padding and past x)
//   W'[o][phase x C + c][q] = w[o][c][q x s + p]         (zero past the kernel)
// (kernels/phases.hpp; every dim folds so, a dim of stride 1 as one phase, its padding written
// into X' too, the inner convolution unpadded). The point is the channels: a first layer's 3
// channels are padded to 8 or 32 by cuDNN's tensor-core engines (Note [channel padding]), its 49
// taps of stride 2 (ResNet-50's 7x7 stem) become 16 taps of 12 channels, which f16 rounds up to
// 16 (zeros in X' and W'): 256 products a position where the padded channels of the stem's own
// form take 392, and a stride of 1, which cuDNN's engines run far better than 2 on such inputs.
// phase_form() takes an ungrouped convolution with some stride over 1, each strided dim
// undilated with a kernel of at least its stride (a 1x1 stride-2 kernel would make three of four
// phases zeros), and C x phases of at most phase_channels_max (32); the inner convolution's
// channels are C x phases, rounded up to a multiple of 8 for f16 / bf16. X' holds F = out + (k' -
// 1) x d positions per dim (d the dilation of an unstrided dim); input elements that no output
// reads (a stride that does not divide the padded size) may lie past it or within it, and their
// gradient is written as zero, not read from X''s (where an FFT leaves its rounding).
// The plan runs the inner convolution (a candidate of it: Note [fold candidates] in
// conv_folds.cpp) with X' and W' in its workspace:
//   fwd          x -> X', w -> W'; the inner forward into dst as it lies (the same tensor);
//   bwd_data     w -> W'; the inner backward data into X''s buffer; x's gradient gathered from
//                it (each element of x is one element of X', or none);
//   bwd_weights  x -> X'; the inner backward weights into W''s buffer; w's gradient gathered
//                from it.
// Results are the convolution's sums less its products with padding and zeros, in another order;
// no element is summed twice, so the gradients are as exact as the inner candidate's.
// Determinism is the inner candidate's. DNNX_CUDNN_CONV_PHASES lists them ("on", the default:
// every dtype; "f32"; "off").

#include "backends/cudnn/conv_phases.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <utility>

namespace dnnx::cudnn {
namespace {

namespace ph = kernels::phases;

std::int64_t product(const std::int64_t dims[3]) { return dims[0] * dims[1] * dims[2]; }

std::size_t folded_input_bytes(const PhaseForm& form) {
  const ph::Geometry& g = form.geometry;
  return static_cast<std::size_t>(g.batch * g.folded_channels * product(g.folded)) *
         size_of(form.inner.dtype);
}

std::size_t folded_weights_bytes(const PhaseForm& form) {
  const ph::Geometry& g = form.geometry;
  return static_cast<std::size_t>(g.out_channels * g.folded_channels * product(g.folded_kernel)) *
         size_of(form.inner.dtype);
}

class PhasePlan final : public detail::ConvPlan {
 public:
  PhasePlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, const PhaseForm& form,
            Direction direction, const AlgoInfo& info, std::shared_ptr<detail::ConvPlan> inner)
      : runtime_(std::move(runtime)),
        desc_(desc),
        form_(form),
        direction_(direction),
        inner_(std::move(inner)),
        info_(info),
        context_(conv_context(desc, direction, info.id)) {
    input_at_ = workspace_aligned(inner_->algo().workspace_bytes);
    weights_at_ = input_at_ + workspace_aligned(folded_input_bytes(form_));
    const std::size_t needed = weights_at_ + folded_weights_bytes(form_);
    if (info_.workspace_bytes < needed) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("the listed workspace (", info_.workspace_bytes,
                                " bytes) is less than the plan's (", needed, ")"),
                    context_);
    }
    if (const char* why = ph::geometry_unsupported(form_.geometry))
      detail::raise(ErrorKind::Unsupported, detail::cat("the phase copies: ", why), context_);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    std::byte* const base =
        carved_workspace(workspace, info_.workspace_bytes, "phase plans", context_);
    runtime_->make_current();
    const kernels::Queue queue = runtime_->kernel_queue();
    const auto element = static_cast<int>(size_of(desc_.dtype));
    const ph::Geometry& g = form_.geometry;
    std::byte* folded_x = base + input_at_;
    std::byte* folded_w = base + weights_at_;
    const TensorRoles roles = tensor_roles(t, direction_);
    auto check = [&](cudaError_t status, const char* what) {
      DNNX_CUDNN_CHECK(status, context_, what);
    };
    if (direction_ != Direction::bwd_data)
      check(ph::fold_input(g, roles.x, folded_x, element, queue), "folding the input's phases");
    if (direction_ != Direction::bwd_weights)
      check(ph::fold_weights(g, roles.w, folded_w, element, queue), "folding the weights' taps");
    const Device device = (args.src != nullptr ? args.src : args.diff_dst)->device();
    execute_at(*inner_, form_.inner, direction_, {folded_x, roles.y, folded_w}, device, base);
    if (direction_ == Direction::bwd_data) {
      check(ph::unfold_input(g, folded_x, roles.x, element, queue),
            "gathering the input gradient from its phases");
    } else if (direction_ == Direction::bwd_weights) {
      check(ph::unfold_weights(g, folded_w, roles.w, element, queue),
            "gathering the weight gradient from its phases");
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_;
  PhaseForm form_;
  Direction direction_;
  std::shared_ptr<detail::ConvPlan> inner_;
  AlgoInfo info_;
  ErrorContext context_;
  std::size_t input_at_ = 0, weights_at_ = 0;
};

}  // namespace

std::optional<PhaseForm> phase_form(const ConvDesc& desc, std::string& why) {
  if (desc.groups != 1) {
    why = "a grouped convolution";
    return std::nullopt;
  }
  PhaseForm form;
  ph::Geometry& g = form.geometry;
  g.channels_last = desc.layout == Layout::channels_last;
  g.batch = desc.batch;
  g.channels = desc.in_channels;
  g.out_channels = desc.out_channels;
  ConvDesc& inner = form.inner;
  inner = desc;
  std::int64_t phases = 1;
  bool strided = false;
  // Spatial dim i of desc is the geometry's dim 3 - spatial_dims + i (leading dims of 1).
  const int lead = 3 - desc.spatial_dims;
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const auto k = static_cast<std::size_t>(lead + i);
    const std::int64_t stride = desc.stride[s], kernel = desc.kernel[s];
    if (stride > 1) {
      strided = true;
      if (desc.dilation[s] != 1) {
        why = "a strided dim with a dilation";
        return std::nullopt;
      }
      if (kernel < stride) {
        why = "a strided dim whose kernel is shorter than its stride";
        return std::nullopt;
      }
    }
    phases *= stride;
    if (phases > phase_channels_max) break;  // reported below
    const std::int64_t folded_kernel = (kernel + stride - 1) / stride;
    const std::int64_t dilation = stride > 1 ? 1 : desc.dilation[s];
    g.input[k] = desc.input[s];
    g.kernel[k] = kernel;
    g.stride[k] = stride;
    g.pad[k] = desc.pad_before[s];
    g.folded_kernel[k] = folded_kernel;
    g.folded[k] = desc.output_size(i) + (folded_kernel - 1) * dilation;
    g.reach[k] = (desc.output_size(i) - 1) * stride + (kernel - 1) * desc.dilation[s] + 1;
    inner.input[s] = g.folded[k];
    inner.kernel[s] = folded_kernel;
    inner.stride[s] = 1;
    inner.pad_before[s] = inner.pad_after[s] = 0;
    inner.dilation[s] = dilation;
  }
  if (!strided) {
    why = "no strided dim";
    return std::nullopt;
  }
  if (desc.in_channels * phases > phase_channels_max) {
    why = detail::cat("input channels x phases ", desc.in_channels, " x ", phases, " over ",
                      phase_channels_max);
    return std::nullopt;
  }
  std::int64_t channels = desc.in_channels * phases;
  if (desc.dtype == DType::f16 || desc.dtype == DType::bf16) channels = (channels + 7) / 8 * 8;
  g.folded_channels = channels;
  inner.in_channels = channels;
  inner.validate();
  if (const char* reason = ph::geometry_unsupported(g)) {
    why = reason;
    return std::nullopt;
  }
  return form;
}

std::size_t phase_buffers_bytes(const PhaseForm& form) {
  return workspace_aligned(folded_input_bytes(form)) +
         workspace_aligned(folded_weights_bytes(form));
}

std::shared_ptr<detail::ConvPlan> make_phase_plan(std::shared_ptr<Runtime> runtime,
                                                  const ConvDesc& desc, const PhaseForm& form,
                                                  Direction direction, const AlgoInfo& info,
                                                  std::shared_ptr<detail::ConvPlan> inner) {
  return std::make_shared<PhasePlan>(std::move(runtime), desc, form, direction, info,
                                     std::move(inner));
}

}  // namespace dnnx::cudnn
