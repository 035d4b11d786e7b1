#include "backends/cudnn/conv_gemm.hpp"

#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/kernels/matmul.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <utility>

namespace dnnx::cudnn {

// Note [gemm candidates]
// A convolution whose kernel is 1 in every spatial dim, of stride 1, no padding and one group
// (dilation does not matter then) is a matrix product over the channels, where every spatial
// position of every sample is a row (P = the product of the spatial sizes):
//   channels_last (NHWC)   one product of N*P rows, the linear layer dst {N*P, K} = src {N*P, C}
//                          weights^T; each direction is the same direction of that matmul desc
//                          (src is a, weights b, dst the output);
//   channels_first (NCHW)  a batch of N products dst[n] {K, P} = weights {K, C} src[n] {C, P}
//                          with the weights shared (MatmulDesc::broadcast_a): weights is a, src b;
//                          the conv's bwd_data is the matmul's bwd_weights (b's gradient) and its
//                          bwd_weights the matmul's bwd_data (a's, summed over the batch).
// Both are views of the convolution's own tensors, so a candidate is one of the cudnn matmul
// backend's candidates for that desc and direction (cuBLASLt's configurations, cuBLAS's
// gemm_ex: Note [cudnn matmul candidates] in matmul.cpp), listed as "cudnn:gemm:<matmul id>",
// at most gemm_candidates_max of its supported ones in its order (and the split-K variants the
// matmul lists of those, up to gemm_variants_max: Note [split-K variants]), after every other
// supported candidate, so the heuristic policy keeps cuDNN's pick. cuDNN's fp32 engines ran such
// layers of the shape suite at 16-42 TFLOP/s on an H200, where cuBLASLt's fp32 GEMMs run large
// products at 50-54; with these candidates the searches chose them for most fp32 1x1 rows in fwd
// and bwd_data and the suite's fp32 totals dropped by about 5% (docs/benchmarks.md, "1x1
// convolutions as matrix products"). DNNX_CUDNN_CONV_GEMM=0 turns them off (a switch of the
// backend's fingerprint, and so of every cache key); then one unsupported "cudnn:gemm" entry says
// so.

// Note [packed gemm]
// In NCHW the weights' gradient is a sum over the batch, diff_weights {K, C} = sum over n of
// diff_dst[n] {K, P} src[n]^T {P, C}, which the broadcast form runs as one GEMM of depth P per
// sample, each adding into the gradient (Note [row-major matmul] in matmul.cpp). That keeps the
// GPU busy only when P and K x C are large: on an H200 it won most of DeepLabV3's 65x65 layers
// (batch 16) but lost every ResNet-50 and ResNeXt-50 layer (batch 64, 7x7 to 56x56) to cuDNN,
// where PyTorch's batched GEMM and a sum took 0.59 of cuDNN's time over ResNeXt-50's layers
// (docs/benchmarks.md, "1x1 convolutions as matrix products"). Set side by side, diff_dst as {K,
// N*P} and src as {C, N*P}, the sum is one GEMM of depth N*P: the matmul fwd of a = packed diff_dst
// and b = packed src stored transposed (transpose_b), whose dst is diff_weights itself. The packing
// is a copy of diff_dst and src into the workspace (kernels::matmul::side_by_side, a pass over
// both), so the packed form is listed next to the broadcast one, each with its own candidates, and
// only while the two copies take at most packed_bytes_max: beyond that the samples are large enough
// for the broadcast form's GEMMs, and the workspace would be a large share of a smaller GPU's
// memory.

namespace {

constexpr std::string_view prefix = "cudnn:gemm:";
constexpr std::string_view packed_word = "packed:";
constexpr std::size_t packed_bytes_max = std::size_t{256} << 20;
constexpr std::size_t workspace_alignment = 256;

}  // namespace

std::size_t workspace_aligned(std::size_t bytes) {
  return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

std::byte* carved_workspace(const detail::Workspace& workspace, std::size_t needed,
                            std::string_view plans, const ErrorContext& context) {
  check_workspace(workspace, needed, context);
  auto* base = static_cast<std::byte*>(workspace.data);
  if (reinterpret_cast<std::uintptr_t>(base) % workspace_alignment != 0) {
    detail::raise(ErrorKind::BackendFailure,
                  detail::cat(plans, " carve their buffers from a ", workspace_alignment,
                              "-byte aligned workspace; got address ", workspace.data),
                  context);
  }
  return base;
}

std::optional<GemmForm> gemm_form(const ConvDesc& d, Direction direction, std::string& why,
                                  bool packed, bool src_packed) {
  if (d.groups != 1) {
    why = "not a matrix product: a grouped convolution";
    return std::nullopt;
  }
  std::int64_t positions = 1;
  for (int i = 0; i < d.spatial_dims; ++i) {
    const auto at = static_cast<std::size_t>(i);
    if (d.kernel[at] != 1 || d.stride[at] != 1 || d.pad_before[at] != 0 || d.pad_after[at] != 0) {
      why = "not a matrix product: only a 1x1 convolution of stride 1 without padding is one";
      return std::nullopt;
    }
    positions *= d.input[at];
  }
  GemmForm form;
  MatmulDesc& m = form.desc;
  m.dtype = d.dtype;
  if (packed) {  // Note [packed gemm]
    if (d.layout != Layout::channels_first || direction != Direction::bwd_weights || d.batch < 2) {
      why = "no packed form: only the bwd_weights of an NCHW batch of several samples has one";
      return std::nullopt;
    }
    form.packed = true;
    form.src_packed = src_packed;
    form.samples = d.batch, form.positions = positions;
    m.m = d.out_channels, m.k = d.batch * positions, m.n = d.in_channels;
    m.transpose_b = true;
    form.direction = Direction::fwd;
    if (const std::size_t bytes = gemm_packing_bytes(form); bytes > packed_bytes_max) {
      why = detail::cat("no packed form: its packed matrices would take ",
                        detail::format_bytes(static_cast<double>(bytes)), " of workspace, over ",
                        detail::format_bytes(static_cast<double>(packed_bytes_max)),
                        " (Note [packed gemm])");
      return std::nullopt;
    }
  } else if (d.layout == Layout::channels_last) {
    m.m = d.batch * positions, m.k = d.in_channels, m.n = d.out_channels;
    m.transpose_b = true;
    form.direction = direction;
  } else {
    m.batch = d.batch, m.m = d.out_channels, m.k = d.in_channels, m.n = positions;
    m.broadcast_a = d.batch > 1;
    form.direction = direction == Direction::bwd_data      ? Direction::bwd_weights
                     : direction == Direction::bwd_weights ? Direction::bwd_data
                                                           : direction;
  }
  try {
    m.validate();
  } catch (const Error& error) {
    why = detail::cat("its matrix product is out of the matmul's range: ", error.what());
    return std::nullopt;
  }
  return form;
}

std::size_t gemm_packed_src_offset(const GemmForm& form) {
  if (!form.packed) return 0;
  return workspace_aligned(static_cast<std::size_t>(form.desc.m * form.desc.k) *
                           size_of(form.desc.dtype));
}

std::size_t gemm_packing_bytes(const GemmForm& form) {
  if (!form.packed) return 0;
  if (form.src_packed) return gemm_packed_src_offset(form);
  return gemm_packed_src_offset(form) +
         workspace_aligned(static_cast<std::size_t>(form.desc.n * form.desc.k) *
                           size_of(form.desc.dtype));
}

std::string product_id(std::string_view head, std::string_view matmul_id, bool packed) {
  return detail::cat(head, packed ? packed_word : std::string_view(), matmul_id);
}

std::optional<GemmInnerId> product_inner_id(std::string_view head, std::string_view id) {
  if (!id.starts_with(head)) return std::nullopt;
  id.remove_prefix(head.size());
  const bool packed = id.starts_with(packed_word);
  if (packed) id.remove_prefix(packed_word.size());
  if (id.empty()) return std::nullopt;
  return GemmInnerId{std::string(id), packed};
}

std::string gemm_id(std::string_view matmul_id, bool packed) {
  return product_id(prefix, matmul_id, packed);
}

std::optional<GemmInnerId> gemm_inner_id(std::string_view id) {
  return product_inner_id(prefix, id);
}

AlgoInfo gemm_info(const AlgoInfo& inner, const GemmForm& form) {
  AlgoInfo info = inner;
  info.id = gemm_id(inner.id, form.packed);
  if (!inner.variant_of.empty()) info.variant_of = gemm_id(inner.variant_of, form.packed);
  info.name = form.packed ? detail::cat(
                                "1x1 convolution's weight gradient as one matrix product over "
                                "the batch set side by side: ",
                                inner.name)
                          : detail::cat("1x1 convolution as a matrix product: ", inner.name);
  info.workspace_bytes = gemm_packing_bytes(form) + inner.workspace_bytes;
  info.notes.push_back("conv_gemm");
  return info;
}

AlgoInfo gemm_off_info() {
  return off_entry(gemm_off_id, "1x1 convolution as a cuBLASLt / cuBLAS matrix product",
                   "turned off by DNNX_CUDNN_CONV_GEMM=0; unset or 1 lists the matmul backend's "
                   "candidates for this product (Note [gemm candidates])",
                   "conv_gemm");
}

detail::MatmulArgs gemm_args(const ConvDesc& desc, Direction direction, const GemmForm& form,
                             const detail::ConvArgs& args, Device device, GemmViews& views,
                             const ErrorContext& context, void* packed) {
  const BoundTensors t = bind_tensors(args, direction, context);
  // The convolution's tensors by role: x = src / diff_src, w = weights / diff_weights,
  // y = dst / diff_dst (bind_tensors gives them read, read, written in direction order).
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  switch (direction) {
    case Direction::fwd:
      x = const_cast<void*>(t.first), w = const_cast<void*>(t.second), y = t.output;
      break;
    case Direction::bwd_data:
      y = const_cast<void*>(t.first), w = const_cast<void*>(t.second), x = t.output;
      break;
    default: x = const_cast<void*>(t.first), y = const_cast<void*>(t.second), w = t.output; break;
  }
  // Note [gemm candidates]: NHWC multiplies src by the weights, NCHW the weights by src.
  const bool nhwc = desc.layout == Layout::channels_last;
  const MatmulDesc& m = form.desc;
  const auto over = [&](Tensor& view, void* data, const auto& dims_of) {
    if (view.data() != data)
      view = Tensor::view(data, (m.*dims_of)(), m.dtype, Layout::channels_first, device);
  };
  if (form.packed) {  // Note [packed gemm]: dst = diff_weights, a and b in the workspace
    if (packed == nullptr)
      detail::raise(ErrorKind::Internal, "a packed gemm form run without its packed matrices",
                    context);
    over(views.a, packed, &MatmulDesc::a_dims);
    over(views.b, form.src_packed ? x : static_cast<char*>(packed) + gemm_packed_src_offset(form),
         &MatmulDesc::b_dims);
    over(views.dst, w, &MatmulDesc::dst_dims);
    detail::MatmulArgs margs;
    margs.a = &views.a, margs.b = &views.b, margs.dst = &views.dst;
    return margs;
  }
  over(views.a, nhwc ? x : w, &MatmulDesc::a_dims);
  over(views.b, nhwc ? w : x, &MatmulDesc::b_dims);
  over(views.dst, y, &MatmulDesc::dst_dims);
  detail::MatmulArgs margs;
  switch (form.direction) {
    case Direction::fwd: margs.a = &views.a, margs.b = &views.b, margs.dst = &views.dst; break;
    case Direction::bwd_data:
      margs.diff_dst = &views.dst, margs.b = &views.b, margs.diff_a = &views.a;
      break;
    default: margs.a = &views.a, margs.diff_dst = &views.dst, margs.diff_b = &views.b; break;
  }
  return margs;
}

namespace {

class GemmPlan final : public detail::ConvPlan {
 public:
  GemmPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
           GemmForm form, std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        form_(std::move(form)),
        device_(Device::cuda(runtime_->device())),
        inner_(std::move(inner)),
        info_(gemm_info(inner_->algo(), form_)),
        context_(conv_context(desc, direction, info_.id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    if (!form_.packed) {
      inner_->execute(gemm_args(desc_, direction_, form_, args, device_, views_, context_),
                      workspace);
      return;
    }
    // Note [packed gemm]: diff_dst and src side by side in the workspace (src unless it comes
    // packed), then the product.
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();  // the kernels launch on this device's stream
    const BoundTensors t = bind_tensors(args, direction_, context_);
    const auto element = desc_.dtype == DType::f32   ? kernels::matmul::Element::f32
                         : desc_.dtype == DType::f16 ? kernels::matmul::Element::f16
                                                     : kernels::matmul::Element::bf16;
    char* packed = static_cast<char*>(workspace.data);
    const cudaStream_t stream = runtime_->stream();
    auto launch = [&] {
      DNNX_CUDNN_CHECK(kernels::matmul::side_by_side(element, form_.samples, desc_.out_channels,
                                                     form_.positions, t.second, packed, stream),
                       context_, "launching the kernel that packs diff_dst");
      if (!form_.src_packed) {
        DNNX_CUDNN_CHECK(kernels::matmul::side_by_side(
                             element, form_.samples, desc_.in_channels, form_.positions, t.first,
                             packed + gemm_packed_src_offset(form_), stream),
                         context_, "launching the kernel that packs src");
      }
      const std::size_t packing = gemm_packing_bytes(form_);
      // Inside this capture the product's own replay runs its launches directly.
      inner_->execute(gemm_args(desc_, direction_, form_, args, device_, views_, context_, packed),
                      {packed + packing, workspace.bytes - packing});
    };
    replay_.run(runtime_->settings(), stream, {t.first, t.second, t.output, workspace.data}, launch,
                context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_;
  Direction direction_;
  GemmForm form_;
  Device device_;
  GemmViews views_;  // over the last call's tensors (gemm_args)
  std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner_;
  AlgoInfo info_;
  ErrorContext context_;
  LaunchGraph replay_;  // Note [graph replay]: the packing kernels and the product
};

}  // namespace

std::shared_ptr<detail::ConvPlan> make_gemm_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, GemmForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner) {
  return std::make_shared<GemmPlan>(std::move(runtime), desc, direction, std::move(form),
                                    std::move(inner));
}

}  // namespace dnnx::cudnn
