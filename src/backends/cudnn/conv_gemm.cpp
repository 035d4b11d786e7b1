#include "backends/cudnn/conv_gemm.hpp"

#include <dnnx/error.hpp>

#include "backends/cudnn/conv_common.hpp"
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
// at most gemm_candidates_max of its supported ones in its order, after every other supported
// candidate, so the heuristic policy keeps cuDNN's pick. cuDNN's fp32 engines ran such layers of
// the shape suite at 16-42 TFLOP/s on an H200, where cuBLASLt's fp32 GEMMs run large products at
// 50-54 (docs/benchmarks.md). They are listed only with DNNX_CUDNN_CONV_GEMM=1, a switch of the
// backend's fingerprint (and so of every cache key) while it is off by default; otherwise one
// unsupported "cudnn:gemm" entry says how to list them.

namespace {

constexpr std::string_view prefix = "cudnn:gemm:";

}  // namespace

std::optional<GemmForm> gemm_form(const ConvDesc& d, Direction direction, std::string& why) {
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
  if (d.layout == Layout::channels_last) {
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

std::string gemm_id(std::string_view matmul_id) { return detail::cat(prefix, matmul_id); }

std::optional<std::string> gemm_inner_id(std::string_view id) {
  if (!id.starts_with(prefix) || id.size() == prefix.size()) return std::nullopt;
  return std::string(id.substr(prefix.size()));
}

AlgoInfo gemm_info(const AlgoInfo& inner) {
  AlgoInfo info = inner;
  info.id = gemm_id(inner.id);
  if (!inner.variant_of.empty()) info.variant_of = gemm_id(inner.variant_of);
  info.name = detail::cat("1x1 convolution as a matrix product: ", inner.name);
  info.notes.push_back("conv_gemm");
  return info;
}

AlgoInfo gemm_off_info() {
  AlgoInfo info;
  info.id = std::string(gemm_off_id);
  info.name = "1x1 convolution as a cuBLASLt / cuBLAS matrix product";
  info.reason =
      "off by default: DNNX_CUDNN_CONV_GEMM=1 lists the matmul backend's candidates for this "
      "product (Note [gemm candidates])";
  info.notes = {"conv_gemm"};
  return info;
}

detail::MatmulArgs gemm_args(const ConvDesc& desc, Direction direction, const GemmForm& form,
                             const detail::ConvArgs& args, Device device, GemmViews& views,
                             const ErrorContext& context) {
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
        info_(gemm_info(inner_->algo())),
        context_(conv_context(desc, direction, info_.id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    inner_->execute(gemm_args(desc_, direction_, form_, args, device_, views_, context_),
                    workspace);
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
};

}  // namespace

std::shared_ptr<detail::ConvPlan> make_gemm_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, GemmForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner) {
  return std::make_shared<GemmPlan>(std::move(runtime), desc, direction, std::move(form),
                                    std::move(inner));
}

}  // namespace dnnx::cudnn
