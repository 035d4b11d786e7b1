// The cudnn backend's activations: cuDNN's legacy cudnnActivationForward / Backward, and the
// backend's own vectorised kernels (kernels/activation.cu), as candidates.
//
// Note [cudnn activation candidates]
// Forward:
//   cudnn:kernel:act             every kind, in place or not (Note [vectorised elementwise
//                                kernels]); the heuristic's choice;
//   cudnn:legacy:act:<mode>      cudnnActivationForward in the kind's mode (sigmoid, relu, tanh,
//                                clipped_relu, elu, swish with beta 1); in place with the one
//                                descriptor cuDNN requires. cuDNN has no identity activation
//                                outside cudnnConvolutionBiasActivationForward: unsupported there.
// Backward:
//   cudnn:kernel:act:dst         the derivative from dst (Note [backward from dst]): what in-place
//                                layers keep, and cheaper for tanh, sigmoid and elu;
//   cudnn:kernel:act:src         the derivative from src (every kind);
//   cudnn:legacy:act:<mode>      cudnnActivationBackward, which takes both x and y and does not
//                                document which one each mode reads: supported only when both are
//                                saved, and not where its gradient differs from PyTorch's
//                                (Note [cudnn activation backward semantics]).
// The legacy activation descriptor is also built when listing (host-only calls), so that a
// coefficient cuDNN rejects makes the candidate unsupported with cuDNN's status rather than fail
// at run time. Each candidate is unsupported when desc.saved lacks what it reads. The legacy calls
// describe the tensors as one flat row of numel elements (they are elementwise, and every tensor of
// the call has the same layout), which their int sizes limit to INT_MAX elements. Everything is
// elementwise without atomics, so every candidate is deterministic (cuDNN's reproducibility notes
// list no activation routine); cudnn_activation_test checks it bitwise.
//
// Note [cudnn activation backward semantics]
// cuDNN documents no formula for cudnnActivationBackward; cudnn_activation_test's parity run
// against the reference (PyTorch's gradients) on cuDNN 9.19 (H100) showed two modes differ:
// - CLIPPED_RELU passes dy for 0 < x <= ceiling: at x == ceiling (and x = ceiling (1 - 2^-6)) it
//   gave dy, at x = ceiling (1 + 2^-6) and x = +-0 it gave 0. Both x values at and above the
//   ceiling have y == ceiling, so cuDNN decides from x, and includes the ceiling; PyTorch's
//   hardtanh gradient is 0 there (oneDNN's `clip` has the same difference). An input exactly at
//   the ceiling is common (e.g. the output of an earlier clip), and no descriptor setting is known
//   to move that boundary (lowering coef by an ulp would rely on how cuDNN compares, which
//   nothing documents), so the backward is unsupported for clipped relu; the forward is exact.
// - ELU gives dy wherever y >= 0 and dy (y + alpha) only where y < 0: with alpha = 0.5 it gave dy
//   (PyTorch: alpha dy) at x = +-0, and with alpha = -0.5 it gave dy at every x <= 0 (y >= 0
//   there; PyTorch: dy alpha e^x). PyTorch's gradient is dy alpha e^x for every x <= 0, so the
//   two agree only for alpha = 1 (then y < 0 for x < 0 and y + 1 = e^x, and both give dy at 0);
//   the backward is unsupported for any other alpha.
// Relu, tanh, sigmoid and swish matched PyTorch on every case of the table, including x = +-0.

#include "backends/cudnn/kernels/activation.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/activation_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace act = kernels::activation;

using ActivationDescriptor = Handle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

constexpr const char* kernel_fwd_id = "cudnn:kernel:act";
constexpr const char* kernel_dst_id = "cudnn:kernel:act:dst";
constexpr const char* kernel_src_id = "cudnn:kernel:act:src";

ErrorContext context_of(const ActivationDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

act::Params kernel_params(const ActivationDesc& desc) {
  act::Params params;
  params.function = static_cast<act::Function>(static_cast<int>(desc.kind));
  switch (desc.dtype) {
    case DType::f16: params.element = act::Element::f16; break;
    case DType::bf16: params.element = act::Element::bf16; break;
    default: params.element = act::Element::f32; break;
  }
  params.alpha = static_cast<float>(desc.alpha);
  params.ceiling = static_cast<float>(desc.ceiling);
  return params;
}

// cuDNN's mode of `kind`; false for the identity, which has no legacy activation call.
bool legacy_mode(ActivationKind kind, cudnnActivationMode_t& mode) {
  switch (kind) {
    case ActivationKind::identity: return false;
    case ActivationKind::relu: mode = CUDNN_ACTIVATION_RELU; return true;
    case ActivationKind::clipped_relu: mode = CUDNN_ACTIVATION_CLIPPED_RELU; return true;
    case ActivationKind::tanh: mode = CUDNN_ACTIVATION_TANH; return true;
    case ActivationKind::sigmoid: mode = CUDNN_ACTIVATION_SIGMOID; return true;
    case ActivationKind::elu: mode = CUDNN_ACTIVATION_ELU; return true;
    case ActivationKind::swish: mode = CUDNN_ACTIVATION_SWISH; return true;
  }
  return false;
}

// Sets `descriptor` to the desc's mode: coef is the clip of clipped relu and the alpha of elu;
// cuDNN's documentation calls it an upper bound for relu too, so relu gets the largest double
// (what PyTorch passes); swish's beta is 1.
cudnnStatus_t set_activation(cudnnActivationDescriptor_t descriptor, const ActivationDesc& desc) {
  cudnnActivationMode_t mode{};
  if (!legacy_mode(desc.kind, mode)) return CUDNN_STATUS_BAD_PARAM;
  const double coef = desc.kind == ActivationKind::clipped_relu ? desc.ceiling
                      : desc.kind == ActivationKind::elu        ? desc.alpha
                      : desc.kind == ActivationKind::relu       ? std::numeric_limits<double>::max()
                                                                : 0.0;
  const cudnnStatus_t status =
      cudnnSetActivationDescriptor(descriptor, mode, CUDNN_PROPAGATE_NAN, coef);
  if (status != CUDNN_STATUS_SUCCESS || desc.kind != ActivationKind::swish) return status;
  return cudnnSetActivationDescriptorSwishBeta(descriptor, 1.0);
}

// Why cuDNN refuses the desc's activation descriptor (e.g. a coefficient it rejects), asked at
// listing; empty when it accepts it. Host-only calls.
std::string descriptor_reason(const ActivationDesc& desc) {
  cudnnActivationDescriptor_t raw = nullptr;
  cudnnStatus_t status = cudnnCreateActivationDescriptor(&raw);
  if (status == CUDNN_STATUS_SUCCESS) {
    const ActivationDescriptor owned(raw, "cudnnActivationDescriptor_t");
    status = set_activation(raw, desc);
  }
  if (status == CUDNN_STATUS_SUCCESS) return {};
  std::string reason =
      detail::cat("cuDNN rejects the activation descriptor: ", status_name(status));
  if (const std::string message = last_cudnn_message(); !message.empty())
    reason += " (" + message + ")";
  return reason;
}

// Why cudnnActivationBackward's gradient is not PyTorch's for the desc (Note [cudnn activation
// backward semantics]); empty where they agree.
std::string legacy_backward_reason(const ActivationDesc& desc) {
  if (desc.kind == ActivationKind::clipped_relu) {
    return "cudnnActivationBackward (CLIPPED_RELU) passes dy for 0 < x <= ceiling, so also at "
           "x == ceiling, where PyTorch's hardtanh gradient is 0 (Note [cudnn activation backward "
           "semantics])";
  }
  if (desc.kind == ActivationKind::elu && desc.alpha != 1.0) {
    return detail::cat(
        "cudnnActivationBackward (ELU) gives dy wherever y >= 0 and dy (y + alpha) only where "
        "y < 0, while PyTorch's gradient is dy alpha e^x for every x <= 0: they differ at x = 0",
        desc.alpha < 0 ? " and at every x < 0 (y > 0 there when alpha < 0)" : "",
        "; they agree only for alpha = 1, got alpha = ", desc.alpha,
        " (Note [cudnn activation backward semantics])");
  }
  return {};
}

std::string legacy_id(ActivationKind kind) {
  return detail::cat("cudnn:legacy:act:", to_string(kind));
}

// What a backward candidate reads.
enum class Reads : std::uint8_t { src, dst, both };

// Why a backward candidate reading `reads` cannot run with desc.saved; empty if it can.
std::string saved_reason(const ActivationDesc& desc, Reads reads, std::string_view who) {
  const bool has_src = desc.saved != ActivationSaved::dst;
  const bool has_dst = desc.saved != ActivationSaved::src;
  if (desc.kind == ActivationKind::identity && reads != Reads::both) return {};  // reads neither
  switch (reads) {
    case Reads::src:
      if (!has_src) return detail::cat(who, " reads src, and desc.saved = ", to_string(desc.saved));
      break;
    case Reads::dst:
      if (!activation_bwd_from_dst(desc.kind, desc.alpha)) {
        return detail::cat(to_string(desc.kind),
                           desc.kind == ActivationKind::elu ? " with alpha < 0" : "",
                           " has no derivative as a function of dst (Note [backward from dst])");
      }
      if (!has_dst) return detail::cat(who, " reads dst, and desc.saved = ", to_string(desc.saved));
      break;
    case Reads::both:
      if (!has_src || !has_dst) {
        return detail::cat(who,
                           " reads both x and y (cuDNN does not document which one each mode "
                           "uses), and desc.saved = ",
                           to_string(desc.saved));
      }
      break;
  }
  return {};
}

AlgoInfo kernel_info(const ActivationDesc& desc, Direction direction, const char* id, Reads reads) {
  AlgoInfo info;
  info.id = id;
  info.deterministic = true;
  info.notes = {"kernel", "vectorized"};
  if (direction == Direction::fwd) {
    info.name = "dnnx vectorised kernel";
  } else {
    info.name = reads == Reads::dst ? "dnnx vectorised kernel (from dst)"
                                    : "dnnx vectorised kernel (from src)";
    info.reason = saved_reason(desc, reads, "this kernel");
    if (reads == Reads::dst) info.notes.emplace_back("use_dst");
  }
  info.supported = info.reason.empty();
  return info;
}

AlgoInfo legacy_info(const ActivationDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = legacy_id(desc.kind);
  info.name = detail::cat(
      direction == Direction::fwd ? "cudnnActivationForward" : "cudnnActivationBackward", " (",
      to_string(desc.kind), ")");
  info.deterministic = true;
  info.notes = {"legacy"};
  cudnnActivationMode_t mode{};
  if (!legacy_mode(desc.kind, mode)) {
    info.reason =
        "cuDNN has no identity activation outside cudnnConvolutionBiasActivationForward "
        "(CUDNN_ACTIVATION_IDENTITY is rejected by cudnnActivationForward/Backward)";
  } else if (desc.numel() > INT_MAX) {
    info.reason = detail::cat("legacy cuDNN descriptors hold int sizes; the tensor has ",
                              desc.numel(), " elements (more than INT_MAX)");
  } else if (direction != Direction::fwd) {
    info.reason = legacy_backward_reason(desc);
    if (info.reason.empty())
      info.reason = saved_reason(desc, Reads::both, "cudnnActivationBackward");
  }
  if (info.reason.empty()) info.reason = descriptor_reason(desc);
  info.supported = info.reason.empty();
  return info;
}

// A candidate: dnnx's kernel (reading the forward's src or dst) or cuDNN's legacy call.
struct Candidate {
  AlgoInfo info;
  bool kernel = false;
  Reads reads = Reads::src;  // what a kernel's backward reads
};

std::vector<Candidate> candidates(const ActivationDesc& desc, Direction direction) {
  std::vector<Candidate> list;
  if (direction == Direction::fwd) {
    list.push_back({kernel_info(desc, direction, kernel_fwd_id, Reads::src), true, Reads::src});
  } else {
    list.push_back({kernel_info(desc, direction, kernel_dst_id, Reads::dst), true, Reads::dst});
    list.push_back({kernel_info(desc, direction, kernel_src_id, Reads::src), true, Reads::src});
  }
  list.push_back({legacy_info(desc, direction), false, Reads::both});
  std::stable_partition(list.begin(), list.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

const Tensor& need(const Tensor* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return *tensor;
}

class KernelPlan final : public detail::OpPlan<detail::ActivationArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const ActivationDesc& desc, Direction direction,
             AlgoInfo info, Reads reads)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        direction_(direction),
        params_(kernel_params(desc)),
        from_dst_(reads == Reads::dst),
        count_(desc.numel()) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ActivationArgs& args, detail::Workspace) override {
    runtime_->make_current();
    cudaError_t status = cudaSuccess;
    if (direction_ == Direction::fwd) {
      status = act::forward(params_, need(args.src, "src", context_).data(),
                            need(args.dst, "dst", context_).data(), count_, runtime_->stream());
    } else {
      const void* saved = nullptr;
      if (params_.function != act::Function::identity) {  // the identity reads neither
        saved = from_dst_ ? need(args.saved_dst, "dst", context_).data()
                          : need(args.src, "src", context_).data();
      }
      status = act::backward(params_, from_dst_ ? act::Saved::dst : act::Saved::src, saved,
                             need(args.diff_dst, "diff_dst", context_).data(),
                             need(args.diff_src, "diff_src", context_).data(), count_,
                             runtime_->stream());
    }
    DNNX_CUDNN_CHECK(status, context_, "launching the activation kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  act::Params params_;
  bool from_dst_;
  std::int64_t count_;
};

class LegacyPlan final : public detail::OpPlan<detail::ActivationArgs> {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const ActivationDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        direction_(direction) {
    runtime_->make_current();
    tensor_ = make_tensor_descriptor(context_);
    // One flat row (Note [cudnn activation candidates]).
    DNNX_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(tensor_.get(), CUDNN_TENSOR_NCHW, data_type(desc.dtype), 1, 1, 1,
                                   static_cast<int>(desc.numel())),
        context_, "describing the tensors");
    cudnnActivationDescriptor_t raw = nullptr;
    DNNX_CUDNN_CHECK(cudnnCreateActivationDescriptor(&raw), context_,
                     "creating the activation descriptor");
    activation_ = ActivationDescriptor(raw, "cudnnActivationDescriptor_t");
    DNNX_CUDNN_CHECK(set_activation(activation_.get(), desc), context_,
                     "setting the activation mode");
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ActivationArgs& args, detail::Workspace) override {
    runtime_->make_current();
    if (direction_ == Direction::fwd) {
      const void* x = need(args.src, "src", context_).data();
      void* y = need(args.dst, "dst", context_).data();
      replay_.run(
          runtime_->settings(), runtime_->stream(), {x, y}, [&] { forward(x, y); }, context_);
      return;
    }
    const void* x = need(args.src, "src", context_).data();
    const void* y = need(args.saved_dst, "dst", context_).data();
    const void* dy = need(args.diff_dst, "diff_dst", context_).data();
    void* dx = need(args.diff_src, "diff_src", context_).data();
    replay_.run(
        runtime_->settings(), runtime_->stream(), {x, y, dy, dx}, [&] { backward(x, y, dy, dx); },
        context_);
  }

 private:
  void forward(const void* x, void* y) {
    const float alpha = 1.0f, beta = 0.0f;
    const cudnnTensorDescriptor_t t = tensor_.get();
    DNNX_CUDNN_CHECK(
        cudnnActivationForward(runtime_->handle(), activation_.get(), &alpha, t, x, &beta, t, y),
        context_, "running cudnnActivationForward");
  }

  void backward(const void* x, const void* y, const void* dy, void* dx) {
    const float alpha = 1.0f, beta = 0.0f;
    const cudnnTensorDescriptor_t t = tensor_.get();
    DNNX_CUDNN_CHECK(cudnnActivationBackward(runtime_->handle(), activation_.get(), &alpha, t, y, t,
                                             dy, t, x, &beta, t, dx),
                     context_, "running cudnnActivationBackward");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  TensorDescriptor tensor_;  // src, dst and their gradients alike (in place needs one descriptor)
  ActivationDescriptor activation_;
  LaunchGraph replay_;  // Note [graph replay]
};

class CudnnActivation final : public LayerBackend<ActivationDesc, detail::ActivationArgs, Candidate> {
 public:
  explicit CudnnActivation(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const ActivationDesc& desc, Direction direction) override {
    return candidates(desc, direction);
  }
  std::shared_ptr<detail::OpPlan<detail::ActivationArgs>> build(
      const ActivationDesc& desc, Direction direction, const Candidate& candidate) override {
    if (candidate.kernel) {
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info,
                                          candidate.reads);
    }
    return std::make_shared<LegacyPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::activation>> make_activation_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnActivation>(std::move(runtime));
}

}  // namespace dnnx::cudnn
