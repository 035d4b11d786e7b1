// The cudnn backend's dropout: dnnx's own kernels and cuDNN's dropout.
//
// Note [cudnn dropout candidates]
//   cudnn:kernel:dropout  the inference forward is a device-to-device copy; the training forward
//                         draws the mask from dnnx's Philox stream (kernels/random.cu, Note
//                         [seeded kernels]), bit-identical to the reference's and the cpu's, and
//                         keeps it as bits (format "dnnx:mask_bits"); the backward reads them.
//   cudnn:dropout         cudnnDropoutForward / cudnnDropoutBackward, the mask in cuDNN's reserve
//                         space (format "cudnn:dropout_reserve", as cudnnDropoutGetReserveSpaceSize
//                         sizes it). cuDNN draws from its own RNG state, which
//                         cudnnSetDropoutDescriptor seeds by running an initialisation kernel over
//                         a states buffer of megabytes: far too slow to do per call, and its stream
//                         is not dnnx's. So the plan seeds it with the generator's seed on its
//                         first call and again only when the seed changes; later calls continue
//                         cuDNN's stream, whatever the generator's offset. Its masks therefore
//                         differ from every other backend's, and from run to run of the same call
//                         (not deterministic). It is supported only for a desc that opts out of
//                         cross-backend reproducibility (DropoutDesc::reproducible = false); there
//                         it still comes after the kernel, so the heuristic keeps the kernel and an
//                         exhaustive search picks it only when faster. Semantics also differ in
//                         the dropped elements: cuDNN writes 0 where PyTorch and dnnx's kernels
//                         write src * 0 (NaN for NaN input). Unsupported as well: bf16 (cuDNN's
//                         legacy dropout documents float, half and double), p = 1 (its scale
//                         1 / (1 - p) is infinite), no elements, and more than INT_MAX elements
//                         (legacy descriptors hold int sizes). The tensor is described as
//                         1 x 1 x 1 x n in memory order: dropout is elementwise.

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/kernels/random.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/dropout_args.hpp"
#include "core/strings.hpp"

#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace krandom = kernels::random;

using DropoutDescriptor = Handle<cudnnDropoutDescriptor_t, cudnnDestroyDropoutDescriptor>;

constexpr const char* kernel_id = "cudnn:kernel:dropout";
constexpr const char* cudnn_id = "cudnn:dropout";
constexpr const char* reserve_format = "cudnn:dropout_reserve";

enum class Impl : std::uint8_t { kernel, cudnn };

struct Candidate {
  AlgoInfo info;
  Impl impl = Impl::kernel;
};

ErrorContext context_of(const DropoutDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

krandom::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return krandom::Element::f16;
    case DType::bf16: return krandom::Element::bf16;
    default: return krandom::Element::f32;
  }
}

// The tensor as cuDNN's dropout sees it: 1 x 1 x 1 x n, dense.
TensorDescriptor describe_flat(const DropoutDesc& desc, const ErrorContext& context) {
  TensorDescriptor tensor = make_tensor_descriptor(context);
  DNNX_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(tensor.get(), CUDNN_TENSOR_NCHW, data_type(desc.dtype), 1, 1, 1,
                                 static_cast<int>(desc.dims.product())),
      context, "describing the tensor");
  return tensor;
}

std::string cudnn_reason(const DropoutDesc& desc, Direction direction) {
  if (direction == Direction::fwd) {
    return "inference dropout is the identity, which cuDNN's dropout (which always draws a mask) "
           "does not compute; cudnn:kernel:dropout copies";
  }
  if (desc.reproducible) {
    return "cuDNN's dropout draws from its own RNG state (cudnnSetDropoutDescriptor), not dnnx's "
           "seeded Philox stream, so its masks differ from the reference's and the cpu's for the "
           "same generator state; a desc with reproducible = false (--not-reproducible) admits it";
  }
  if (desc.dtype == DType::bf16)
    return "cuDNN's legacy dropout takes float, half and double tensors, not bf16";
  if (desc.p >= 1.0f)
    return "cuDNN's dropout scales kept elements by 1 / (1 - p), infinite at p = 1";
  const std::int64_t count = desc.dims.product();
  if (count == 0) return "cuDNN tensor descriptors need at least one element";
  if (count > INT_MAX) {
    return detail::cat("legacy cuDNN descriptors hold int sizes; the tensor has ", count,
                       " elements (more than INT_MAX)");
  }
  return {};
}

std::vector<Candidate> list_candidates(const DropoutDesc& desc, Direction direction) {
  std::vector<Candidate> list;
  Candidate kernel;
  kernel.info.id = kernel_id;
  kernel.info.name = direction == Direction::fwd
                         ? "device copy (inference)"
                         : "dnnx Philox mask kernel (one thread per 32 elements, bit mask)";
  kernel.info.supported = true;
  kernel.info.deterministic = true;
  kernel.info.notes = {"kernel", "philox"};
  if (direction == Direction::fwd_training) {
    kernel.info.saved_state_bytes = detail::mask_bits_bytes(desc.dims.product());
    kernel.info.saved_state_format = detail::mask_bits_format;
  } else if (direction == Direction::bwd_data) {
    kernel.info.saved_state_format = detail::mask_bits_format;
  }
  list.push_back(std::move(kernel));

  Candidate cudnn;
  cudnn.impl = Impl::cudnn;
  cudnn.info.id = cudnn_id;
  cudnn.info.name = "cudnnDropoutForward / cudnnDropoutBackward (cuDNN's RNG)";
  cudnn.info.reason = cudnn_reason(desc, direction);
  cudnn.info.supported = cudnn.info.reason.empty();
  // A training forward's mask changes from call to call (cuDNN's stream advances).
  cudnn.info.deterministic = direction != Direction::fwd_training;
  cudnn.info.notes = {"legacy", "cudnn_rng"};
  if (direction != Direction::fwd) cudnn.info.saved_state_format = reserve_format;
  if (cudnn.info.supported && direction == Direction::fwd_training) {
    const ErrorContext context = context_of(desc, direction, cudnn_id);
    const TensorDescriptor tensor = describe_flat(desc, context);
    std::size_t reserve = 0;
    DNNX_CUDNN_CHECK(cudnnDropoutGetReserveSpaceSize(tensor.get(), &reserve), context,
                     "asking for the reserve space size");
    cudnn.info.saved_state_bytes = reserve;
  }
  list.push_back(std::move(cudnn));
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

class KernelPlan final : public detail::LayerPlanBase<detail::DropoutArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const DropoutDesc& desc, Direction direction,
             AlgoInfo info)
      : LayerPlanBase(std::move(info), context_of(desc, direction, kernel_id)),
        runtime_(std::move(runtime)),
        direction_(direction),
        element_(element_of(desc.dtype)),
        dtype_(desc.dtype),
        count_(desc.dims.product()),
        p_(desc.p),
        scale_(desc.scale()),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::DropoutArgs& args, detail::Workspace) override {
    const bool forward = direction_ != Direction::bwd_data;
    const char* in_role = forward ? "src" : "diff_dst";
    const char* out_role = forward ? "dst" : "diff_src";
    if (count_ == 0) return;
    const void* in = data_of(forward ? args.src : args.diff_dst, in_role, context_);
    void* out = data_of(forward ? args.dst : args.diff_src, out_role, context_);
    runtime_->make_current();
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(cudaMemcpyAsync(out, in, static_cast<std::size_t>(count_) * size_of(dtype_),
                                       cudaMemcpyDeviceToDevice, runtime_->stream()),
                       context_, "copying src to dst");
      return;
    }
    if (const std::string problem = detail::mask_state_problem(args.state, detail::mask_bits_format,
                                                               detail::mask_bits_bytes(count_),
                                                               Device::cuda(runtime_->device()));
        !problem.empty()) {
      detail::raise(ErrorKind::InvalidArgument, problem, context_);
    }
    auto* mask = static_cast<std::uint32_t*>(args.state->data());
    if (direction_ == Direction::fwd_training) {
      DNNX_CUDNN_CHECK(krandom::dropout_forward(element_, in, out, mask, geometry_, count_, p_,
                                                scale_, args.seed, args.offset, runtime_->stream()),
                       context_, "launching the dropout forward kernel");
      return;
    }
    DNNX_CUDNN_CHECK(krandom::dropout_backward(element_, in, out, mask, geometry_, count_, scale_,
                                               runtime_->stream()),
                     context_, "launching the dropout backward kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  Direction direction_;
  krandom::Element element_;
  DType dtype_;
  std::int64_t count_;
  float p_;
  float scale_;
  detail::random::Geometry geometry_;
};

class CudnnPlan final : public detail::LayerPlanBase<detail::DropoutArgs> {
 public:
  CudnnPlan(std::shared_ptr<Runtime> runtime, const DropoutDesc& desc, Direction direction,
            AlgoInfo info)
      : LayerPlanBase(std::move(info), context_of(desc, direction, cudnn_id)),
        runtime_(std::move(runtime)),
        direction_(direction),
        p_(desc.p) {
    runtime_->make_current();
    tensor_ = describe_flat(desc, context_);
    DNNX_CUDNN_CHECK(cudnnDropoutGetReserveSpaceSize(tensor_.get(), &reserve_), context_,
                     "asking for the reserve space size");
    cudnnDropoutDescriptor_t raw = nullptr;
    DNNX_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&raw), context_,
                     "creating the dropout descriptor");
    dropout_ = DropoutDescriptor(raw, "cudnnDropoutDescriptor_t");
    std::size_t bytes = 0;
    DNNX_CUDNN_CHECK(cudnnDropoutGetStatesSize(runtime_->handle(), &bytes), context_,
                     "asking for the RNG states size");
    states_ = std::make_unique<Storage>(runtime_->allocator(), bytes);
    if (direction_ == Direction::bwd_data) {
      // The backward reads p and the forward's mask alone, but cuDNN rejects a descriptor
      // without states at run time. Restoring (unlike setting) attaches a states buffer without
      // running the initialisation kernel over it; nothing draws from it.
      DNNX_CUDNN_CHECK(cudnnRestoreDropoutDescriptor(dropout_.get(), runtime_->handle(), p_,
                                                     states_->data(), states_->bytes(), 0),
                       context_, "setting the dropout descriptor");
    }
  }

  void execute(const detail::DropoutArgs& args, detail::Workspace) override {
    runtime_->make_current();
    const bool forward = direction_ != Direction::bwd_data;
    const void* in =
        data_of(forward ? args.src : args.diff_dst, forward ? "src" : "diff_dst", context_);
    void* out = data_of(forward ? args.dst : args.diff_src, forward ? "dst" : "diff_src", context_);
    if (const std::string problem = detail::mask_state_problem(args.state, reserve_format, reserve_,
                                                               Device::cuda(runtime_->device()));
        !problem.empty()) {
      detail::raise(ErrorKind::InvalidArgument, problem, context_);
    }
    const cudnnHandle_t handle = runtime_->handle();
    if (!forward) {
      DNNX_CUDNN_CHECK(cudnnDropoutBackward(handle, dropout_.get(), tensor_.get(), in,
                                            tensor_.get(), out, args.state->data(), reserve_),
                       context_, "running cudnnDropoutBackward");
      return;
    }
    // Note [cudnn dropout candidates]: seeded on the first call and when the seed changes.
    if (!seeded_ || seed_ != args.seed) {
      DNNX_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_.get(), handle, p_, states_->data(),
                                                 states_->bytes(), args.seed),
                       context_, "seeding cuDNN's dropout RNG states");
      seeded_ = true;
      seed_ = args.seed;
    }
    DNNX_CUDNN_CHECK(cudnnDropoutForward(handle, dropout_.get(), tensor_.get(), in, tensor_.get(),
                                         out, args.state->data(), reserve_),
                     context_, "running cudnnDropoutForward");
  }

 private:
  std::shared_ptr<Runtime> runtime_;  // first: outlives the states it allocated
  Direction direction_;
  float p_;
  TensorDescriptor tensor_;
  DropoutDescriptor dropout_;
  std::size_t reserve_ = 0;
  std::unique_ptr<Storage> states_;
  bool seeded_ = false;
  std::uint64_t seed_ = 0;
};

class CudnnDropout final : public LayerBackend<DropoutDesc, detail::DropoutArgs, Candidate> {
 public:
  explicit CudnnDropout(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const DropoutDesc& desc, Direction direction) override {
    runtime_->make_current();
    return list_candidates(desc, direction);
  }
  std::shared_ptr<detail::OpPlan<detail::DropoutArgs>> build(const DropoutDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    if (candidate.impl == Impl::kernel)
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
    return std::make_shared<CudnnPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::dropout>> make_dropout_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnDropout>(std::move(runtime));
}

}  // namespace dnnx::cudnn
