// The cudnn backend's softmax: dnnx's own kernel and cuDNN's legacy cudnnSoftmaxForward /
// cudnnSoftmaxBackward, one candidate per cuDNN algorithm that computes the desc.
//
// Note [cudnn softmax candidates]
// In priority order:
//   cudnn:kernel:softmax          kernels/softmax.cu, max-subtracted (Note [softmax kernel
//                                 shapes]); every desc, in place too, no workspace;
//   cudnn:legacy:softmax:accurate CUDNN_SOFTMAX_ACCURATE (softmax) / ...:log CUDNN_SOFTMAX_LOG
//                                 (log-softmax; backward only, Note [cuDNN log-softmax]);
//   cudnn:legacy:softmax:fast     CUDNN_SOFTMAX_FAST (softmax only): no max subtraction, so exp
//                                 overflows to inf (and the output to NaN) once an input exceeds
//                                 ~88 (log of the f32 maximum). Last, never the heuristic choice;
//                                 chosen only by exhaustive timing or a fixed id, on inputs the
//                                 caller knows to be small.
// The legacy calls see the tensor as the 4-D packed NCHW tensor (outer, axis, inner, 1) of Note
// [axis geometry] in mode CHANNEL, and instance mode as (N, C*D*H*W, 1, 1) in mode INSTANCE: the
// same groups as the desc, in either layout, with no copy. cuDNN has no query for what its
// softmax supports, so the first listing for a (dtype, algorithm, direction) runs it once on a
// 1x2x1x1 scratch tensor (Note [softmax probe]). cuDNN does not list softmax among its
// non-reproducible routines and dnnx's kernel reduces in a fixed order: every candidate is
// deterministic (the gpu test checks it bitwise).
//
// Note [cuDNN log-softmax]
// cudnnSoftmaxForward(CUDNN_SOFTMAX_LOG) subtracts max + log(sum) from each x as one rounded
// value on most shapes: the hazard of Note [log-softmax shift] in
// backends/onednn/softmax.cpp, an absolute error of up to half an ulp of the group's maximum
// (4.9e-4 at 1e4, 3.9e-3 at 1e5) in every output, however small. cuDNN 9 did so for groups of
// 1000 values, for channel mode with spatial positions and for instance mode, and computed groups
// of up to 100 contiguous values accurately; which of its kernels runs is cuDNN's choice and cannot
// be queried, so the forward LOG candidate is listed unsupported, with that reason, for every
// desc (cudnn:kernel:softmax computes (x - max) - log(sum)). The backward (dy - exp(y) * sum(dy),
// from dst) subtracts no shift and stays a candidate. docs/ops/softmax.md has the measurements and
// the script that repeats them for a new cuDNN release.
//
// Note [softmax probe]
// A legacy candidate is supported when cuDNN accepted the probe call: a failed status is the
// candidate's reason (e.g. CUDNN_STATUS_NOT_SUPPORTED for bf16 before compute capability 8.0).
// The probe runs on the backend's stream, on scratch memory, and is remembered per backend
// instance; it costs one tiny launch per (dtype, algorithm, direction) per process.

#include "backends/cudnn/kernels/softmax.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/softmax_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

constexpr const char* kernel_id = "cudnn:kernel:softmax";
constexpr const char* legacy_prefix = "cudnn:legacy:softmax:";

ErrorContext context_of(const SoftmaxDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(implementation));
}

cudnnDataType_t data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

kernels::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kernels::Element::f16;
    case DType::bf16: return kernels::Element::bf16;
    default: return kernels::Element::f32;
  }
}

struct LegacyAlgo {
  cudnnSoftmaxAlgorithm_t algo;
  const char* name;
};

// The cuDNN algorithms that compute the desc, in priority order (Note [cudnn softmax
// candidates]).
std::vector<LegacyAlgo> legacy_algos(const SoftmaxDesc& desc) {
  if (desc.log) return {{CUDNN_SOFTMAX_LOG, "log"}};
  return {{CUDNN_SOFTMAX_ACCURATE, "accurate"}, {CUDNN_SOFTMAX_FAST, "fast"}};
}

// The legacy 4-D view of the desc (Note [cudnn softmax candidates]); empty `reason` when it fits.
struct LegacyShape {
  int n = 1, c = 1, h = 1, w = 1;
  cudnnSoftmaxMode_t mode = CUDNN_SOFTMAX_MODE_CHANNEL;
  std::string reason;
};

LegacyShape legacy_shape(const SoftmaxDesc& desc) {
  const detail::AxisGeometry g = detail::axis_geometry(desc);
  LegacyShape shape;
  if (g.elements() > INT_MAX) {
    shape.reason = detail::cat("the tensor has ", g.elements(),
                               " elements; legacy cuDNN descriptors take at most INT_MAX");
    return shape;
  }
  shape.n = static_cast<int>(g.outer);
  shape.c = static_cast<int>(g.axis);
  shape.h = static_cast<int>(g.inner);
  shape.mode =
      desc.mode == SoftmaxMode::instance ? CUDNN_SOFTMAX_MODE_INSTANCE : CUDNN_SOFTMAX_MODE_CHANNEL;
  return shape;
}

TensorDescriptor make_descriptor(DType dtype, const LegacyShape& shape,
                                 const ErrorContext& context) {
  TensorDescriptor descriptor = make_tensor_descriptor(context);
  DNNX_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(descriptor.get(), CUDNN_TENSOR_NCHW, data_type_of(dtype), shape.n,
                                 shape.c, shape.h, shape.w),
      context, "describing the softmax tensor");
  return descriptor;
}

// Device scratch memory for the probe, returned on destruction.
class Scratch {
 public:
  Scratch(CachingAllocator& allocator, std::size_t bytes)
      : allocator_(allocator), bytes_(bytes), data_(allocator.allocate(bytes)) {}
  ~Scratch() { allocator_.deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* data() const { return data_; }

 private:
  CachingAllocator& allocator_;
  std::size_t bytes_;
  void* data_;
};

// Note [cuDNN log-softmax]: why the forward LOG candidate is not offered.
std::string log_forward_reason(std::size_t cudnn_version) {
  return detail::cat("cuDNN ", cudnn_version_text(cudnn_version),
                     "'s CUDNN_SOFTMAX_LOG forward subtracts max + log(sum) as one rounded value, "
                     "an error of up to half an ulp of the group's maximum (4.9e-4 for logits "
                     "near 1e4); cudnn:kernel:softmax computes (x - max) - log(sum)");
}

// Note [softmax probe]: "" when cuDNN runs `algo` for `dtype` in `direction`, else why not.
std::string probe(Runtime& runtime, DType dtype, cudnnSoftmaxAlgorithm_t algo, Direction direction,
                  const ErrorContext& context) {
  runtime.make_current();
  LegacyShape shape;
  shape.c = 2;
  const TensorDescriptor descriptor = make_descriptor(dtype, shape, context);
  // Three 1x2x1x1 tensors (x, y, and dy or dx) of at most 4-byte elements, 8 bytes apart.
  constexpr std::size_t probe_bytes = 24;
  Scratch memory(runtime.allocator(), probe_bytes);
  auto* base = static_cast<char*>(memory.data());
  DNNX_CUDNN_CHECK(cudaMemsetAsync(base, 0, probe_bytes, runtime.stream()), context,
                   "clearing the probe tensors");
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const cudnnStatus_t status =
      direction == Direction::fwd
          ? cudnnSoftmaxForward(runtime.handle(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                                descriptor.get(), base, &beta, descriptor.get(), base + 8)
          : cudnnSoftmaxBackward(runtime.handle(), algo, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                                 descriptor.get(), base, descriptor.get(), base + 8, &beta,
                                 descriptor.get(), base + 16);
  if (status != CUDNN_STATUS_SUCCESS) {
    std::string reason =
        detail::cat("cuDNN rejects it for ", to_string(dtype), ": ", status_name(status));
    if (const std::string message = last_cudnn_message(); !message.empty())
      reason += " (" + message + ")";
    return reason;
  }
  // A launch failure surfaces at the synchronization.
  const cudaError_t ran = cudaStreamSynchronize(runtime.stream());
  if (ran != cudaSuccess) {
    raise_status(ran, "running the softmax probe", context);
  }
  return {};
}

void check_tensor(const Tensor* tensor, const char* role, const SoftmaxDesc& desc, int device,
                  const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr) {
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  }
  if (!(tensor->dims() == desc.dims) || tensor->dtype() != desc.dtype ||
      !tensor->is_dense(desc.layout) || tensor->device() != Device::cuda(device)) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                    "; this plan takes a dense ", to_string(desc.dtype), '[', desc.dims.to_string(),
                    ' ', to_string(desc.layout), "] on cuda:", device),
        context);
  }
}

// The tensors of a call, checked: fwd {src, dst}, bwd {dst, diff_dst, diff_src}.
struct Bound {
  const void* first = nullptr;
  const void* second = nullptr;
  void* output = nullptr;
};

Bound bind(const detail::SoftmaxArgs& args, const SoftmaxDesc& desc, Direction direction,
           int device, const ErrorContext& context) {
  if (direction == Direction::fwd) {
    check_tensor(args.src, "src", desc, device, context);
    check_tensor(args.dst, "dst", desc, device, context);
    return {args.src->data(), nullptr, args.dst->data()};
  }
  check_tensor(args.saved_dst, "dst", desc, device, context);
  check_tensor(args.diff_dst, "diff_dst", desc, device, context);
  check_tensor(args.diff_src, "diff_src", desc, device, context);
  return {args.saved_dst->data(), args.diff_dst->data(), args.diff_src->data()};
}

AlgoInfo kernel_info() {
  AlgoInfo info;
  info.id = kernel_id;
  info.name = "dnnx kernel (max-subtracted; warp, block or column per group)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"kernel", "accurate"};
  info.families = {"small"};
  return info;
}

class KernelPlan final : public detail::OpPlan<detail::SoftmaxArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const SoftmaxDesc& desc, Direction direction)
      : runtime_(std::move(runtime)),
        info_(kernel_info()),
        context_(context_of(desc, direction, kernel_id)),
        desc_(desc),
        direction_(direction) {
    const detail::AxisGeometry g = detail::axis_geometry(desc);
    shape_ = {g.outer, g.axis, g.inner};
    runtime_->make_current();
    // The kernels load now rather than on the plan's first call.
    DNNX_CUDNN_CHECK(kernels::softmax_prime(element_of(desc.dtype), desc.log, shape_), context_,
                     "loading the softmax kernels");
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::SoftmaxArgs& args, detail::Workspace) override {
    const Bound t = bind(args, desc_, direction_, runtime_->device(), context_);
    runtime_->make_current();
    const kernels::Element element = element_of(desc_.dtype);
    const cudaError_t status =
        direction_ == Direction::fwd
            ? kernels::softmax_forward(element, desc_.log, t.first, t.output, shape_,
                                       runtime_->stream())
            : kernels::softmax_backward(element, desc_.log, t.first, t.second, t.output, shape_,
                                        runtime_->stream());
    DNNX_CUDNN_CHECK(status, context_, "launching the softmax kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  SoftmaxDesc desc_;
  Direction direction_;
  kernels::SoftmaxShape shape_;
};

class LegacyPlan final : public detail::OpPlan<detail::SoftmaxArgs> {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const SoftmaxDesc& desc, Direction direction,
             AlgoInfo info, cudnnSoftmaxAlgorithm_t algo)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        desc_(desc),
        direction_(direction),
        algo_(algo) {
    const LegacyShape shape = legacy_shape(desc);
    mode_ = shape.mode;
    runtime_->make_current();
    descriptor_ = make_descriptor(desc.dtype, shape, context_);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::SoftmaxArgs& args, detail::Workspace workspace) override {
    const Bound t = bind(args, desc_, direction_, runtime_->device(), context_);
    runtime_->make_current();
    replay_.run(
        runtime_->settings(), runtime_->stream(), {t.first, t.second, t.output, workspace.data},
        [&] { launch(t); }, context_);
  }

 private:
  void launch(const Bound& t) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const cudnnTensorDescriptor_t d = descriptor_.get();
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(cudnnSoftmaxForward(runtime_->handle(), algo_, mode_, &alpha, d, t.first,
                                           &beta, d, t.output),
                       context_, "running cudnnSoftmaxForward");
    } else {
      DNNX_CUDNN_CHECK(cudnnSoftmaxBackward(runtime_->handle(), algo_, mode_, &alpha, d, t.first, d,
                                            t.second, &beta, d, t.output),
                       context_, "running cudnnSoftmaxBackward");
    }
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  SoftmaxDesc desc_;
  Direction direction_;
  cudnnSoftmaxAlgorithm_t algo_;
  cudnnSoftmaxMode_t mode_ = CUDNN_SOFTMAX_MODE_CHANNEL;
  TensorDescriptor descriptor_;
  LaunchGraph replay_;  // Note [graph replay]
};

// A candidate: dnnx's kernel, or cuDNN's legacy softmax with one of its algorithms.
struct Candidate {
  AlgoInfo info;
  std::optional<cudnnSoftmaxAlgorithm_t> legacy;  // empty for the kernel
};

class CudnnSoftmax final : public LayerBackend<SoftmaxDesc, detail::SoftmaxArgs, Candidate> {
 public:
  explicit CudnnSoftmax(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const SoftmaxDesc& desc, Direction direction) override {
    std::vector<Candidate> candidates{{kernel_info(), std::nullopt}};
    const LegacyShape shape = legacy_shape(desc);
    for (const LegacyAlgo& legacy : legacy_algos(desc)) {
      AlgoInfo info;
      info.id = detail::cat(legacy_prefix, legacy.name);
      info.deterministic = true;
      info.notes = {"legacy", legacy.name};
      info.families = {"none"};
      if (legacy.algo == CUDNN_SOFTMAX_FAST) {
        info.name = "cudnnSoftmax* FAST (no max subtraction: overflows for inputs above ~88)";
        detail::mark_overflow_risk(info);
      } else {
        info.name =
            detail::cat("cudnnSoftmax* ", legacy.algo == CUDNN_SOFTMAX_LOG ? "LOG" : "ACCURATE",
                        " (max-subtracted)");
      }
      info.reason = shape.reason;
      if (info.reason.empty() && legacy.algo == CUDNN_SOFTMAX_LOG && direction == Direction::fwd)
        info.reason = log_forward_reason(runtime_->facts().cudnn_version);
      if (info.reason.empty())
        info.reason =
            probed(desc.dtype, legacy.algo, direction, context_of(desc, direction, info.id));
      info.supported = info.reason.empty();
      candidates.push_back({std::move(info), legacy.algo});
    }
    // Supported candidates before unsupported ones, each group in priority order.
    std::stable_partition(candidates.begin(), candidates.end(),
                          [](const Candidate& candidate) { return candidate.info.supported; });
    for (std::size_t i = 0; i < candidates.size(); ++i)
      candidates[i].info.priority = static_cast<int>(i);
    return candidates;
  }

  std::shared_ptr<detail::OpPlan<detail::SoftmaxArgs>> build(const SoftmaxDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    if (!candidate.legacy) return std::make_shared<KernelPlan>(runtime_, desc, direction);
    return std::make_shared<LegacyPlan>(runtime_, desc, direction, candidate.info,
                                        *candidate.legacy);
  }

  std::string probed(DType dtype, cudnnSoftmaxAlgorithm_t algo, Direction direction,
                     const ErrorContext& context) {
    const auto key = std::make_tuple(dtype, algo, direction);
    {
      std::lock_guard lock(mutex_);
      if (auto found = probes_.find(key); found != probes_.end()) return found->second;
    }
    std::string reason = probe(*runtime_, dtype, algo, direction, context);
    std::lock_guard lock(mutex_);
    return probes_.emplace(key, std::move(reason)).first->second;
  }

  std::mutex mutex_;  // guards probes_
  std::map<std::tuple<DType, cudnnSoftmaxAlgorithm_t, Direction>, std::string> probes_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::softmax>> make_softmax_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnSoftmax>(std::move(runtime));
}

}  // namespace dnnx::cudnn
