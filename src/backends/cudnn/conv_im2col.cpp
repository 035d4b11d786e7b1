#include "backends/cudnn/conv_im2col.hpp"

#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <utility>

namespace dnnx::cudnn {

// Note [im2col candidates]
// Any ungrouped convolution is a matrix product once every input element that a kernel tap
// reads is copied out: the column matrix holds, per sample and output position, the C x taps
// values the taps read (zeros in the padding), in the order of the weights' C x kernel entries
// (NCHW: row c * taps + tap of {N, C * taps, P}; NHWC: column tap * C + c of {N, P, taps * C}).
// The convolution is then the 1x1 convolution of stride 1 of that matrix with the same weights,
// whose products the gemm candidates run (Note [gemm candidates] in conv_gemm.cpp):
//   fwd          im2col(src), then the 1x1 fwd of the column matrix;
//   bwd_weights  im2col(src), then the 1x1 bwd_weights; in NCHW with several samples also in
//                the packed form, im2col writing the matrix packed ({C * taps, N * P}: Note
//                [packed gemm]) so that only diff_dst is copied again;
//   bwd_data     the 1x1 bwd_data into a column matrix, then col2im sums each input element's
//                entries (f32, in tap order).
// This is the explicit GEMM of Caffe and of cuDNN's own CUDNN_CONVOLUTION_FWD_ALGO_GEMM, but with
// cuBLASLt's configurations for the product. It costs a pass over the column matrix (taps times
// the input) each way, so it pays where the product's depth and width are large and the
// library's own engines are slow: fp32 without tensor cores, where cuDNN's engines ran the
// suite's dense 3x3 layers at 23-40 TFLOP/s on an H200 and cuBLASLt's fp32 GEMMs reach 50
// (docs/benchmarks.md). The column matrix of a whole batch can take gigabytes (taps times the
// input), so it is built for a part of the batch at a time: the largest divisor of the batch
// whose matrix fits im2col_bytes_max, each pass a 1x1 convolution of that many samples over
// its part of src and dst (im2col_pass), bwd_weights adding the passes after the first (the
// product with beta 1); a convolution whose single sample's matrix is over the cap lists none.
// The candidates are listed after every other supported one, the first 8 of each form's matmul
// candidates. DNNX_CUDNN_CONV_IM2COL picks where they are listed: "off" (the
// default until measured on a GPU), "f32" (fp32 convolutions), "on" (every dtype); it is part of
// the backend's fingerprint. Off, one unsupported "cudnn:im2col" entry says so.

namespace {

constexpr std::string_view prefix = "cudnn:im2col:";

kernels::im2col::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kernels::im2col::Element::f16;
    case DType::bf16: return kernels::im2col::Element::bf16;
    default: return kernels::im2col::Element::f32;
  }
}

}  // namespace

std::optional<Im2colForm> im2col_form(const ConvDesc& d, Direction direction, std::string& why,
                                      bool packed, std::size_t cap) {
  if (d.groups != 1) {
    why = "no column product: a grouped convolution";
    return std::nullopt;
  }
  std::string not_gemm;
  if (gemm_form(d, direction, not_gemm)) {
    why =
        "no column product: a 1x1 convolution of stride 1 without padding is a product itself "
        "(cudnn:gemm)";
    return std::nullopt;
  }
  Im2colForm form;
  kernels::im2col::Geometry& g = form.geometry;
  g.dims = d.spatial_dims;
  g.channels_last = d.layout == Layout::channels_last;
  g.batch = d.batch, g.channels = d.in_channels;
  ConvDesc& c = form.col_desc;
  c.spatial_dims = d.spatial_dims;
  c.batch = d.batch;
  c.out_channels = d.out_channels;
  c.dtype = d.dtype;
  c.layout = d.layout;
  for (int i = 0; i < d.spatial_dims; ++i) {
    const auto at = static_cast<std::size_t>(i);
    g.input[i] = d.input[at], g.output[i] = d.output_size(i), g.kernel[i] = d.kernel[at];
    g.stride[i] = d.stride[at], g.pad[i] = d.pad_before[at], g.dilation[i] = d.dilation[at];
    g.taps *= g.kernel[i], g.positions *= g.output[i], g.in_positions *= g.input[i];
    c.input[at] = g.output[i];
    c.kernel[at] = 1;
  }
  c.in_channels = d.in_channels * g.taps;
  // The samples of one pass: the largest divisor of the batch whose column matrix fits the cap.
  g.batch = 1;
  const std::size_t sample_bytes =
      static_cast<std::size_t>(kernels::im2col::col_elements(g)) * size_of(d.dtype);
  if (sample_bytes > cap) {
    why =
        detail::cat("no column product: one sample's column matrix would take ",
                    detail::format_bytes(static_cast<double>(sample_bytes)), " of workspace, over ",
                    detail::format_bytes(static_cast<double>(cap)), " (Note [im2col candidates])");
    return std::nullopt;
  }
  std::int64_t chunk = 1;
  for (std::int64_t samples = d.batch; samples >= 1; --samples) {
    if (d.batch % samples == 0 && static_cast<std::size_t>(samples) * sample_bytes <= cap) {
      chunk = samples;
      break;
    }
  }
  form.passes = d.batch / chunk;
  g.batch = c.batch = chunk;
  form.col_bytes = workspace_aligned(static_cast<std::size_t>(chunk) * sample_bytes);
  std::optional<GemmForm> gemm = gemm_form(c, direction, why, packed, packed);
  if (!gemm) return std::nullopt;
  form.gemm = *gemm;
  g.packed = gemm->packed;
  form.accumulating = form.gemm;
  form.accumulating.desc.beta = 1.0f;
  return form;
}

std::string im2col_id(std::string_view matmul_id, bool packed) {
  return product_id(prefix, matmul_id, packed);
}

std::optional<GemmInnerId> im2col_inner_id(std::string_view id) {
  return product_inner_id(prefix, id);
}

AlgoInfo im2col_info(const AlgoInfo& inner, const Im2colForm& form) {
  AlgoInfo info = inner;
  const bool packed = form.gemm.packed;
  info.id = im2col_id(inner.id, packed);
  if (!inner.variant_of.empty()) info.variant_of = im2col_id(inner.variant_of, packed);
  info.name = detail::cat(packed ? "column matrix (packed) and one matrix product: "
                                 : "column matrix and a matrix product: ",
                          inner.name);
  info.workspace_bytes = form.col_bytes + gemm_packing_bytes(form.gemm) + inner.workspace_bytes;
  info.notes.push_back("conv_im2col");
  return info;
}

AlgoInfo im2col_off_info() {
  return off_entry(im2col_off_id, "column matrix (im2col) and a cuBLASLt / cuBLAS matrix product",
                   "not listed (Note [im2col candidates])", "conv_im2col");
}

Im2colPass im2col_pass(const ConvDesc& desc, Direction direction, const Im2colForm& form,
                       const detail::ConvArgs& args, std::int64_t pass, Tensor& col, Tensor& part,
                       Device device, const ErrorContext& context) {
  const BoundTensors t = bind_tensors(args, direction, context);
  const auto samples = static_cast<std::size_t>(form.col_desc.batch * pass);
  const std::size_t element = size_of(desc.dtype);
  // Bytes of one sample of src and of dst: every layout keeps the samples apart.
  const auto src_sample =
      static_cast<std::size_t>(desc.in_channels * form.geometry.in_positions) * element;
  const auto dst_sample =
      static_cast<std::size_t>(desc.out_channels * form.geometry.positions) * element;
  const auto over = [&](const void* data) -> Tensor* {
    if (part.data() != data) {
      part = Tensor::view(const_cast<void*>(data), form.col_desc.dst_dims(), desc.dtype,
                          desc.layout, device);
    }
    return &part;
  };
  Im2colPass out;
  switch (direction) {
    case Direction::fwd:
      out.src = static_cast<const char*>(t.first) + samples * src_sample;
      out.product.src = &col, out.product.weights = args.weights;
      out.product.dst = over(static_cast<char*>(t.output) + samples * dst_sample);
      break;
    case Direction::bwd_data:
      out.diff_src = static_cast<char*>(t.output) + samples * src_sample;
      out.product.diff_dst = over(static_cast<const char*>(t.first) + samples * dst_sample);
      out.product.weights = args.weights, out.product.diff_src = &col;
      break;
    default:
      out.src = static_cast<const char*>(t.first) + samples * src_sample;
      out.product.src = &col, out.product.diff_weights = args.diff_weights;
      out.product.diff_dst = over(static_cast<const char*>(t.second) + samples * dst_sample);
      break;
  }
  return out;
}

namespace {

class Im2colPlan final : public detail::ConvPlan {
 public:
  // `accumulating`: the product adding to its output, for bwd_weights' passes after the first.
  Im2colPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
             Im2colForm form, std::shared_ptr<detail::ConvPlan> inner,
             std::shared_ptr<detail::ConvPlan> accumulating, AlgoInfo info)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        form_(std::move(form)),
        device_(Device::cuda(runtime_->device())),
        inner_(std::move(inner)),
        accumulating_(std::move(accumulating)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();  // the kernels launch on this device's stream
    char* col = static_cast<char*>(workspace.data);
    if (col_.data() != col)
      col_ = Tensor::view(col, form_.col_desc.src_dims(), desc_.dtype, desc_.layout, device_);
    const detail::Workspace rest{col + form_.col_bytes, workspace.bytes - form_.col_bytes};
    const cudaStream_t stream = runtime_->stream();
    const kernels::im2col::Element element = element_of(desc_.dtype);
    for (std::int64_t pass = 0; pass < form_.passes; ++pass) {
      const Im2colPass p =
          im2col_pass(desc_, direction_, form_, args, pass, col_, part_, device_, context_);
      if (direction_ == Direction::bwd_data) {
        inner_->execute(p.product, rest);
        DNNX_CUDNN_CHECK(kernels::im2col::col2im(element, form_.geometry, col, p.diff_src, stream),
                         context_, "launching the col2im kernel");
        continue;
      }
      DNNX_CUDNN_CHECK(kernels::im2col::im2col(element, form_.geometry, p.src, col, stream),
                       context_, "launching the im2col kernel");
      // bwd_weights sums the passes into diff_weights.
      (pass > 0 && accumulating_ ? accumulating_ : inner_)->execute(p.product, rest);
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_;
  Direction direction_;
  Im2colForm form_;
  Device device_;
  std::shared_ptr<detail::ConvPlan> inner_;
  std::shared_ptr<detail::ConvPlan> accumulating_;  // bwd_weights with several passes
  AlgoInfo info_;
  ErrorContext context_;
  Tensor col_;   // over the last call's workspace
  Tensor part_;  // the last pass's part of dst or diff_dst
};

}  // namespace

std::shared_ptr<detail::ConvPlan> make_im2col_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, Im2colForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating) {
  AlgoInfo info = im2col_info(product->algo(), form);
  std::shared_ptr<detail::ConvPlan> inner =
      make_gemm_plan(runtime, form.col_desc, direction, form.gemm, std::move(product));
  std::shared_ptr<detail::ConvPlan> adding;
  if (accumulating) {
    adding = make_gemm_plan(runtime, form.col_desc, direction, form.accumulating,
                            std::move(accumulating));
    info.workspace_bytes =
        std::max(info.workspace_bytes, form.col_bytes + gemm_packing_bytes(form.accumulating) +
                                           adding->algo().workspace_bytes);
  }
  return std::make_shared<Im2colPlan>(std::move(runtime), desc, direction, std::move(form),
                                      std::move(inner), std::move(adding), std::move(info));
}

}  // namespace dnnx::cudnn
