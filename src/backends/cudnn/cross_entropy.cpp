// The cudnn backend's cross-entropy. Candidates, in priority order:
//   cudnn:kernel:fused          kernels/cross_entropy.cu: log-sum-exp and NLL in one read of the
//                               logits (fwd); log-sum-exp, then w * g * (softmax - onehot) in one
//                               more pass (bwd). Mean backward first sums the weights of the
//                               labels (a second, small launch).
//   cudnn:legacy:log+nll        fwd: listed, never supported: it would read the loss from
//                               cudnnSoftmaxForward(CUDNN_SOFTMAX_LOG), which subtracts max +
//                               log(sum) as one rounded value (Note [cuDNN log-softmax] in
//                               softmax.cpp), an error of up to half an ulp of the largest logit
//                               in every loss;
//   cudnn:legacy:accurate+nll   bwd: cudnnSoftmaxForward(CUDNN_SOFTMAX_ACCURATE) into
//                               diff_logits, then w * g * (p - onehot) in place.
// Both that run subtract the maximum, so logits of any magnitude are fine; none uses
// CUDNN_SOFTMAX_FAST.
// Sums run in a fixed order (Note [xent last block] in kernels/cross_entropy.cu): every candidate
// is deterministic. The legacy candidates' cuDNN support is probed like softmax's (Note [softmax
// probe] in softmax.cpp).
//
// Note [deferred label check]
// A label outside [0, C) that is not ignore_index cannot be reported by the call that meets it
// without waiting for the GPU: the kernels run after the call has returned. Two designs:
//   synchronous: copy the kernels' record back and synchronize the stream in every call. Costs a
//     device round trip (~10-20 us on an H100 host) and the CPU/GPU overlap, per call: a 64 x
//     1000 loss, a few microseconds of GPU work, would take several times longer.
//   deferred (dnnx's choice): the kernels record the lowest bad position; the last block of the
//     launch writes it, with the label's value, into mapped pinned host memory owned by the plan
//     (XentReport), and marks the position's loss and gradient NaN. Every execute() first looks at
//     that memory (a plain host load, no CUDA call): a report left by an earlier call raises
//     InvalidArgument naming the position and the value, and is cleared. Per call this costs one
//     host load, and on the device one atomic per block plus the last block's bookkeeping.
// So the error surfaces at the first call of the same plan (desc, direction, candidate) issued
// after the bad call finished on the GPU; any synchronization in between (copying the loss to
// the host, Context::synchronize()) guarantees that. Until then the NaN loss shows that
// something is wrong, as PyTorch's asynchronous device-side assert does.

#include "backends/cudnn/kernels/cross_entropy.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/cross_entropy_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

constexpr const char* fused_id = "cudnn:kernel:fused";
constexpr const char* log_nll_id = "cudnn:legacy:log+nll";
constexpr const char* accurate_nll_id = "cudnn:legacy:accurate+nll";

ErrorContext context_of(const CrossEntropyDesc& desc, Direction direction,
                        std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(implementation));
}

cudnnDataType_t data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

kernels::XentParams params_of(const CrossEntropyDesc& desc) {
  kernels::XentParams params;
  params.element = desc.dtype == DType::f16    ? kernels::Element::f16
                   : desc.dtype == DType::bf16 ? kernels::Element::bf16
                                               : kernels::Element::f32;
  params.label = desc.label_dtype == DType::i32 ? kernels::LabelType::i32 : kernels::LabelType::i64;
  params.reduce = desc.reduction == Reduction::none  ? kernels::Reduce::none
                  : desc.reduction == Reduction::sum ? kernels::Reduce::sum
                                                     : kernels::Reduce::mean;
  params.ignore_index = desc.ignore_index;
  const detail::AxisGeometry g = detail::axis_geometry(desc);
  params.outer = g.outer;
  params.classes = g.axis;
  params.inner = g.inner;
  return params;
}

// The logits as cuDNN's legacy softmax sees them: packed NCHW (outer, C, inner, 1), mode
// CHANNEL (Note [cudnn softmax candidates] in softmax.cpp).
TensorDescriptor make_descriptor(DType dtype, int outer, int classes, int inner,
                                 const ErrorContext& context) {
  TensorDescriptor descriptor = make_tensor_descriptor(context);
  DNNX_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor.get(), CUDNN_TENSOR_NCHW,
                                              data_type_of(dtype), outer, classes, inner, 1),
                   context, "describing the logits");
  return descriptor;
}

// Note [softmax probe] (softmax.cpp): "" when cuDNN runs `algo` forward for `dtype`.
std::string probe(Runtime& runtime, DType dtype, cudnnSoftmaxAlgorithm_t algo,
                  const ErrorContext& context) {
  runtime.make_current();
  const TensorDescriptor descriptor = make_descriptor(dtype, 1, 2, 1, context);
  CachingAllocator& allocator = runtime.allocator();
  void* memory = allocator.allocate(16);
  auto* base = static_cast<char*>(memory);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  cudaError_t ran = cudaMemsetAsync(base, 0, 16, runtime.stream());
  const cudnnStatus_t status =
      ran == cudaSuccess
          ? cudnnSoftmaxForward(runtime.handle(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                                descriptor.get(), base, &beta, descriptor.get(), base + 8)
          : CUDNN_STATUS_SUCCESS;
  if (ran == cudaSuccess) ran = cudaStreamSynchronize(runtime.stream());
  allocator.deallocate(memory, 16);
  if (ran != cudaSuccess) raise_status(ran, "running the softmax probe", context);
  if (status == CUDNN_STATUS_SUCCESS) return {};
  std::string reason =
      detail::cat("cuDNN's softmax rejects ", to_string(dtype), ": ", status_name(status));
  if (const std::string message = last_cudnn_message(); !message.empty())
    reason += " (" + message + ")";
  return reason;
}

// The workspace of the candidates that run: the fused forward, and either backward.
std::size_t workspace_of(const CrossEntropyDesc& desc, Direction direction) {
  const kernels::XentParams params = params_of(desc);
  if (direction == Direction::bwd_data) return kernels::xent_backward_workspace(params);
  return kernels::xent_fused_forward_workspace(params);
}

// Note [cuDNN log-softmax] (softmax.cpp): why cudnn:legacy:log+nll is not offered.
std::string log_nll_reason(std::size_t cudnn_version) {
  return detail::cat("cuDNN ", cudnn_version_text(cudnn_version),
                     "'s CUDNN_SOFTMAX_LOG forward subtracts max + log(sum) as one rounded value, "
                     "an error of up to half an ulp of the largest logit in every loss (4.9e-4 for "
                     "logits near 1e4); cudnn:kernel:fused computes (x_y - max) - log(sum)");
}

void check_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                  Layout layout, int device, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr) {
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  }
  if (!(tensor->dims() == dims) || tensor->dtype() != dtype || !tensor->is_dense(layout) ||
      tensor->device() != Device::cuda(device)) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                              "; this plan takes a dense ", to_string(dtype), '[', dims.to_string(),
                              ' ', to_string(layout), "] on cuda:", device),
                  context);
  }
}

// Memory from the backend's caching allocator, returned on destruction.
class DeviceBlock {
 public:
  DeviceBlock(std::shared_ptr<Runtime> runtime, std::size_t bytes)
      : runtime_(std::move(runtime)), bytes_(bytes), data_(runtime_->allocator().allocate(bytes)) {}
  ~DeviceBlock() { runtime_->allocator().deallocate(data_, bytes_); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  void* data() const { return data_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::size_t bytes_;
  void* data_;
};

class Plan final : public detail::OpPlan<detail::CrossEntropyArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const CrossEntropyDesc& desc, Direction direction,
       AlgoInfo info, bool fused)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        desc_(desc),
        direction_(direction),
        fused_(fused),
        params_(params_of(desc)),
        record_(runtime_, sizeof(kernels::XentRecord)) {
    runtime_->make_current();
    // Note [deferred label check]: the report lives in mapped pinned host memory.
    report_ = make_mapped_host(sizeof(kernels::XentReport), "label report", context_);
    report()->position = -1;
    report_device_ = static_cast<kernels::XentReport*>(report_.device);
    DNNX_CUDNN_CHECK(kernels::xent_record_init(record(), runtime_->stream()), context_,
                     "initializing the label record");
    // The kernels load now rather than on the plan's first call.
    DNNX_CUDNN_CHECK(kernels::xent_prime(params_), context_, "loading the cross-entropy kernels");
    if (!fused_) {
      const detail::AxisGeometry g = detail::axis_geometry(desc);
      descriptor_ = make_descriptor(desc.dtype, static_cast<int>(g.outer), static_cast<int>(g.axis),
                                    static_cast<int>(g.inner), context_);
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::CrossEntropyArgs& args, detail::Workspace workspace) override {
    const int device = runtime_->device();
    check_tensor(args.logits, "logits", desc_.dims, desc_.dtype, desc_.layout, device, context_);
    check_tensor(args.labels, "labels", desc_.labels_dims(), desc_.label_dtype,
                 Layout::channels_first, device, context_);
    if (desc_.weighted) {
      check_tensor(args.weights, "weights", desc_.weights_dims(), DType::f32,
                   Layout::channels_first, device, context_);
    }
    if (direction_ == Direction::fwd) {
      check_tensor(args.loss, "loss", desc_.loss_dims(), desc_.dtype, Layout::channels_first,
                   device, context_);
    } else {
      check_tensor(args.diff_loss, "diff_loss", desc_.loss_dims(), desc_.dtype,
                   Layout::channels_first, device, context_);
      check_tensor(args.diff_logits, "diff_logits", desc_.dims, desc_.dtype, desc_.layout, device,
                   context_);
    }
    if (workspace.bytes < info_.workspace_bytes ||
        (info_.workspace_bytes > 0 && workspace.data == nullptr)) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("workspace has ", workspace.bytes, " bytes; this candidate needs ",
                                info_.workspace_bytes),
                    context_);
    }
    raise_reported_label();
    runtime_->make_current();
    const float* weights =
        desc_.weighted ? static_cast<const float*>(args.weights->data()) : nullptr;
    const cudaStream_t stream = runtime_->stream();
    if (fused_) {
      const cudaError_t status =
          direction_ == Direction::fwd
              ? kernels::xent_fused_forward(params_, args.logits->data(), args.labels->data(),
                                            weights, args.loss->data(), workspace.data, record(),
                                            report_device_, stream)
              : kernels::xent_fused_backward(params_, args.logits->data(), args.labels->data(),
                                             weights, args.diff_loss->data(),
                                             args.diff_logits->data(), workspace.data, record(),
                                             report_device_, stream);
      DNNX_CUDNN_CHECK(status, context_, "launching the cross-entropy kernel");
      return;
    }
    launch_legacy(args, workspace, weights);
  }

 private:
  // cudnn:legacy:accurate+nll, the legacy candidate that runs (backward only).
  void launch_legacy(const detail::CrossEntropyArgs& args, const detail::Workspace& workspace,
                     const float* weights) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    DNNX_CUDNN_CHECK(
        cudnnSoftmaxForward(runtime_->handle(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
                            &alpha, descriptor_.get(), args.logits->data(), &beta,
                            descriptor_.get(), args.diff_logits->data()),
        context_, "running cudnnSoftmaxForward (ACCURATE)");
    DNNX_CUDNN_CHECK(
        kernels::xent_backward_from_probabilities(
            params_, args.labels->data(), weights, args.diff_loss->data(), args.diff_logits->data(),
            workspace.data, record(), report_device_, runtime_->stream()),
        context_, "launching the cross-entropy kernel");
  }

  kernels::XentRecord* record() const { return static_cast<kernels::XentRecord*>(record_.data()); }
  volatile kernels::XentReport* report() const {
    return static_cast<volatile kernels::XentReport*>(report_.host.get());
  }

  // Note [deferred label check].
  void raise_reported_label() {
    const long long position = report()->position;
    if (position < 0) return;
    const long long value = report()->value;
    report()->position = -1;
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(detail::bad_label_message(desc_, position, value),
                    "; found on the GPU by an earlier call of this plan, whose loss or "
                    "gradient holds NaN there (labels are checked without synchronizing)"),
        context_);
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  CrossEntropyDesc desc_;
  Direction direction_;
  bool fused_;
  kernels::XentParams params_;
  DeviceBlock record_;
  MappedHost report_;
  kernels::XentReport* report_device_ = nullptr;
  TensorDescriptor descriptor_;
};

// A candidate: dnnx's fused kernel, or cuDNN's legacy softmax followed by a dnnx kernel.
struct Candidate {
  AlgoInfo info;
  bool fused = false;
};

class CudnnCrossEntropy final
    : public LayerBackend<CrossEntropyDesc, detail::CrossEntropyArgs, Candidate> {
 public:
  explicit CudnnCrossEntropy(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const CrossEntropyDesc& desc, Direction direction) override {
    AlgoInfo fused;
    fused.id = fused_id;
    fused.name = direction == Direction::fwd
                     ? "dnnx kernel: log-sum-exp + NLL in one read of the logits"
                     : "dnnx kernel: softmax - onehot, log-sum-exp then one writing pass";
    fused.supported = true;
    fused.deterministic = true;
    fused.workspace_bytes = workspace_of(desc, direction);
    fused.notes = {"kernel", "fused", "accurate"};
    fused.families = {"small"};

    const bool fwd = direction == Direction::fwd;
    AlgoInfo legacy;
    legacy.id = fwd ? log_nll_id : accurate_nll_id;
    legacy.name = fwd ? "cudnnSoftmaxForward LOG into the workspace + NLL kernel"
                      : "cudnnSoftmaxForward ACCURATE into diff_logits + (p - onehot) kernel";
    legacy.deterministic = true;
    legacy.workspace_bytes = fwd ? 0 : workspace_of(desc, direction);
    legacy.notes = {"legacy", "accurate"};
    legacy.families = {"large"};
    const detail::AxisGeometry g = detail::axis_geometry(desc);
    if (fwd) {
      legacy.reason = log_nll_reason(runtime_->facts().cudnn_version);
    } else if (g.elements() > INT_MAX) {
      legacy.reason = detail::cat("the logits have ", g.elements(),
                                  " elements; legacy cuDNN descriptors take at most INT_MAX");
    } else {
      legacy.reason =
          probed(desc.dtype, CUDNN_SOFTMAX_ACCURATE, context_of(desc, direction, legacy.id));
    }
    legacy.supported = legacy.reason.empty();
    legacy.priority = 1;
    return {{fused, true}, {legacy, false}};
  }

  std::shared_ptr<detail::OpPlan<detail::CrossEntropyArgs>> build(
      const CrossEntropyDesc& desc, Direction direction, const Candidate& candidate) override {
    return std::make_shared<Plan>(runtime_, desc, direction, candidate.info, candidate.fused);
  }

  std::string probed(DType dtype, cudnnSoftmaxAlgorithm_t algo, const ErrorContext& context) {
    const auto key = std::make_tuple(dtype, algo);
    {
      std::lock_guard lock(mutex_);
      if (auto found = probes_.find(key); found != probes_.end()) return found->second;
    }
    std::string reason = probe(*runtime_, dtype, algo, context);
    std::lock_guard lock(mutex_);
    return probes_.emplace(key, std::move(reason)).first->second;
  }

  std::mutex mutex_;  // guards probes_
  std::map<std::tuple<DType, cudnnSoftmaxAlgorithm_t>, std::string> probes_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::cross_entropy>> make_cross_entropy_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnCrossEntropy>(std::move(runtime));
}

}  // namespace dnnx::cudnn
