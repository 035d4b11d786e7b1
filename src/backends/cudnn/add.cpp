// The cudnn backend's tensor add: cuDNN's legacy cudnnAddTensor, cudnnOpTensor and
// cudnnReduceTensor, and the backend's own kernels (kernels/add.cu), as candidates.
//
// Note [cudnn add candidates]
// Forward, dst = alpha * broadcast(src) + beta * dst:
//   cudnn:kernel:add          every broadcast pattern (Note [broadcast add kernels]);
//   cudnn:legacy:add_tensor   cudnnAddTensor(alpha, src, beta, dst). Its documentation promises
//                             any src dim equal to dst's or 1, but cuDNN returns NOT_SUPPORTED for
//                             other patterns than those of its former add modes (e.g. src
//                             2x1x1x5 on dst 2x3x4x5, seen by CUDA.jl), so dnnx offers it for
//                             those only: full tensor, 1xCx1x1 (bias), 1xCxHxW and 1x1xHxW (with
//                             D after C in 5-D), in logical N, C, spatial order;
//   cudnn:legacy:op_tensor    cudnnOpTensor(ADD, beta * dst, alpha * src) into dst: cuDNN
//                             broadcasts its second operand along any axis. Its first operand
//                             must be full-size, so it is dst itself, read even when beta is 0
//                             (0 * NaN is NaN): unsupported for beta = 0.
// Backward, diff_src = alpha * sum of diff_dst over the broadcast axes:
//   cudnn:kernel:add          deterministic two-stage reduction;
//   cudnn:legacy:add_tensor   with src dims == dst dims there is nothing to sum: diff_src =
//                             alpha * diff_dst is cudnnAddTensor(alpha, diff_dst, 0, diff_src),
//                             the forward's full-tensor call with beta = 0 (which the GPU parity
//                             run showed does not read its NaN-filled output). Unsupported when
//                             some axis is broadcast;
//   cudnn:legacy:reduce_tensor  cudnnReduceTensor(ADD) with alpha, f32 accumulation. Its
//                             workspace query accepts cases its run then rejects, so the listing
//                             also rules out, up front, what cuDNN 9.19 refused at run time:
//                             src dims == dst dims (no axis reduced: BAD_PARAM, "!dims_differ"),
//                             and bf16 (NOT_SUPPORTED; its documentation lists float, double,
//                             half and int8 tensors only).
// Tensors of rank 1 to 3 are described to cuDNN as 4-D ones with unit axes added (rank 1 W ->
// 1x1x1xW, rank 2 N,C -> NxCx1x1, rank 3 N,C,W -> NxCx1xW), which keeps their bytes in either
// layout; legacy descriptors hold int sizes and strides, so tensors beyond INT_MAX elements are
// left to the kernel. cuDNN's reproducibility notes list none of these routines as
// non-deterministic; cudnn_add_test checks every candidate bitwise.

#include "backends/cudnn/kernels/add.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/add_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace kadd = kernels::add;

using OpTensorDescriptor = Handle<cudnnOpTensorDescriptor_t, cudnnDestroyOpTensorDescriptor>;
using ReduceTensorDescriptor =
    Handle<cudnnReduceTensorDescriptor_t, cudnnDestroyReduceTensorDescriptor>;

constexpr const char* kernel_id = "cudnn:kernel:add";
constexpr const char* add_tensor_id = "cudnn:legacy:add_tensor";
constexpr const char* op_tensor_id = "cudnn:legacy:op_tensor";
constexpr const char* reduce_tensor_id = "cudnn:legacy:reduce_tensor";

// What a candidate runs: dnnx's kernel or one of cuDNN's legacy calls.
enum class Impl : std::uint8_t { kernel, add_tensor, op_tensor, reduce_tensor };

struct Candidate {
  AlgoInfo info;
  Impl impl = Impl::kernel;
};

ErrorContext context_of(const AddDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

kadd::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kadd::Element::f16;
    case DType::bf16: return kadd::Element::bf16;
    default: return kadd::Element::f32;
  }
}

// The logical axes in memory order (outermost first) for desc.layout.
std::vector<int> memory_order(int rank, Layout layout) {
  std::vector<int> order;
  if (layout == Layout::channels_last && rank >= 3) {
    order.push_back(0);
    for (int i = 2; i < rank; ++i) order.push_back(i);
    order.push_back(1);
  } else {
    for (int i = 0; i < rank; ++i) order.push_back(i);
  }
  return order;
}

kadd::Shape kernel_shape(const AddDesc& desc) {
  const int rank = desc.dst_dims.rank();
  std::array<std::int64_t, Dims::max_rank> dst{}, src{};
  const std::vector<int> order = memory_order(rank, desc.layout);
  for (int i = 0; i < rank; ++i) {
    dst[static_cast<std::size_t>(i)] = desc.dst_dims[order[static_cast<std::size_t>(i)]];
    src[static_cast<std::size_t>(i)] = desc.src_dims[order[static_cast<std::size_t>(i)]];
  }
  return kadd::make_shape(rank, dst.data(), src.data());
}

TensorDescriptor make_descriptor(const Dims& dims, const AddDesc& desc, const ErrorContext& context,
                                 const char* role) {
  return legacy_tensor_descriptor(dims, desc.dtype, desc.layout, context, role);
}

// Note [cudnn add candidates]: the broadcast patterns cudnnAddTensor is offered for.
std::string add_tensor_reason(const AddDesc& desc) {
  const Dims src = legacy_dims(desc.src_dims);
  const Dims dst = legacy_dims(desc.dst_dims);
  bool n_whole = true, c = false, spatial_all = true, spatial_any = false;
  for (int i = 0; i < dst.rank(); ++i) {
    const bool broadcast = src[i] == 1 && dst[i] != 1;
    const bool whole = broadcast || dst[i] == 1;  // src has one value along the axis
    if (i == 0) n_whole = whole;
    if (i == 1) c = broadcast;
    if (i >= 2) {
      spatial_any = spatial_any || broadcast;
      spatial_all = spatial_all && whole;
    }
  }
  const bool full = src == dst;
  const bool same_c = n_whole && !c && spatial_all;     // 1xCx1x1
  const bool same_chw = n_whole && !c && !spatial_any;  // 1xCxHxW
  const bool same_hw = n_whole && c && !spatial_any;    // 1x1xHxW
  if (full || same_c || same_chw || same_hw) return {};
  return detail::cat(
      "cudnnAddTensor broadcasts only the patterns of its former modes (full "
      "tensor, 1xCx1x1, 1xCxHxW, 1x1xHxW); src ",
      desc.src_dims, " on dst ", desc.dst_dims,
      " is another (cudnn:legacy:op_tensor and cudnn:kernel:add take any)");
}

// Backward through cudnnAddTensor: only the scaled copy of the no-broadcast case.
std::string add_tensor_bwd_reason(const AddDesc& desc) {
  if (desc.src_dims == desc.dst_dims) return {};
  return detail::cat("backward of src ", desc.src_dims, " on dst ", desc.dst_dims,
                     " sums diff_dst over the broadcast axes, which cudnnAddTensor does not do "
                     "(it serves only src dims == dst dims, a scaled copy)");
}

// What cudnnReduceTensor refuses at run time although its workspace query accepts it (Note
// [cudnn add candidates]); empty if none applies.
std::string reduce_tensor_reason(const AddDesc& desc) {
  if (desc.src_dims == desc.dst_dims) {
    return detail::cat(
        "src dims == dst dims (", desc.dst_dims,
        "): no axis to reduce, which cudnnReduceTensor rejects (CUDNN_STATUS_BAD_PARAM, "
        "\"!dims_differ\"); cudnn:legacy:add_tensor does this scaled copy");
  }
  if (desc.dtype == DType::bf16) {
    return "cudnnReduceTensor does not take bf16 tensors (its documented types are float, "
           "double, half and int8; cuDNN 9.19 returns CUDNN_STATUS_NOT_SUPPORTED when run, "
           "although its workspace query accepts them)";
  }
  return {};
}

std::string legacy_size_reason(const AddDesc& desc) {
  if (desc.dst_dims.product() > INT_MAX) {
    return detail::cat("legacy cuDNN descriptors hold int sizes and strides; dst has ",
                       desc.dst_dims.product(), " elements (more than INT_MAX)");
  }
  return {};
}

// The reduction descriptors of backward, and the workspace cuDNN asks for (or why not).
struct Reduction {
  TensorDescriptor diff_dst, diff_src;
  ReduceTensorDescriptor reduce;
  std::size_t workspace = 0;
  std::string reason;  // cuDNN's refusal, empty when supported
};

Reduction make_reduction(Runtime& runtime, const AddDesc& desc, const ErrorContext& context) {
  Reduction r;
  runtime.make_current();
  r.diff_dst = make_descriptor(desc.dst_dims, desc, context, "diff_dst");
  r.diff_src = make_descriptor(desc.src_dims, desc, context, "diff_src");
  cudnnReduceTensorDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateReduceTensorDescriptor(&raw), context,
                   "creating the reduction descriptor");
  r.reduce = ReduceTensorDescriptor(raw, "cudnnReduceTensorDescriptor_t");
  DNNX_CUDNN_CHECK(
      cudnnSetReduceTensorDescriptor(r.reduce.get(), CUDNN_REDUCE_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                     CUDNN_NOT_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                     CUDNN_32BIT_INDICES),
      context, "setting the reduction");
  const cudnnStatus_t status = cudnnGetReductionWorkspaceSize(
      runtime.handle(), r.reduce.get(), r.diff_dst.get(), r.diff_src.get(), &r.workspace);
  if (status != CUDNN_STATUS_SUCCESS) {
    r.reason = detail::cat("cuDNN rejects it: ", status_name(status));
    if (const std::string message = last_cudnn_message(); !message.empty())
      r.reason += " (" + message + ")";
  }
  return r;
}

std::vector<Candidate> list_candidates(Runtime& runtime, const AddDesc& desc, Direction direction) {
  const std::vector<std::string> kernel_notes{"kernel"};
  std::vector<Candidate> list;
  const std::string size_reason = legacy_size_reason(desc);
  if (direction == Direction::fwd) {
    list.push_back(
        {candidate_info(kernel_id, "dnnx broadcast kernel", {}, kernel_notes), Impl::kernel});
    std::string reason = size_reason.empty() ? add_tensor_reason(desc) : size_reason;
    list.push_back(
        {candidate_info(add_tensor_id, "cudnnAddTensor", reason, {"legacy"}), Impl::add_tensor});
    reason = size_reason;
    if (reason.empty() && desc.beta == 0) {
      reason =
          "cudnnOpTensor's first operand must be full-size, so it is dst, read even with "
          "beta = 0, where NaN or Inf in dst would become NaN (0 * NaN)";
    }
    list.push_back(
        {candidate_info(op_tensor_id, "cudnnOpTensor (add)", reason, {"legacy"}), Impl::op_tensor});
  } else {
    list.push_back(
        {candidate_info(kernel_id, "dnnx deterministic reduction kernel", {}, kernel_notes,
                        kadd::backward_workspace(kernel_shape(desc), runtime.facts().sm_count)),
         Impl::kernel});
    std::string reason = size_reason.empty() ? add_tensor_bwd_reason(desc) : size_reason;
    list.push_back(
        {candidate_info(add_tensor_id, "cudnnAddTensor (scaled copy)", reason, {"legacy"}),
         Impl::add_tensor});
    reason = size_reason.empty() ? reduce_tensor_reason(desc) : size_reason;
    std::size_t workspace = 0;
    if (reason.empty()) {
      const Reduction r = make_reduction(runtime, desc, context_of(desc, direction));
      reason = r.reason;
      workspace = r.workspace;
    }
    list.push_back(
        {candidate_info(reduce_tensor_id, "cudnnReduceTensor (add)", reason, {"legacy"}, workspace),
         Impl::reduce_tensor});
  }
  std::stable_partition(list.begin(), list.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

template <typename T>
T* need(T* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return tensor;
}

class KernelPlan final : public detail::OpPlan<detail::AddArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const AddDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        direction_(direction),
        element_(element_of(desc.dtype)),
        alpha_(desc.alpha),
        beta_(desc.beta),
        shape_(kernel_shape(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::AddArgs& args, detail::Workspace workspace) override {
    runtime_->make_current();
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(
          kadd::forward(element_, alpha_, beta_, shape_, need(args.src, "src", context_)->data(),
                        need(args.dst, "dst", context_)->data(), runtime_->stream()),
          context_, "launching the add kernel");
      return;
    }
    check_workspace(workspace, info_.workspace_bytes, context_);
    DNNX_CUDNN_CHECK(
        kadd::backward(element_, alpha_, shape_, need(args.diff_dst, "diff_dst", context_)->data(),
                       need(args.diff_src, "diff_src", context_)->data(), workspace.data,
                       runtime_->facts().sm_count, runtime_->stream()),
        context_, "launching the add backward kernels");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  kadd::Element element_;
  float alpha_, beta_;
  kadd::Shape shape_;
};

class LegacyPlan final : public detail::OpPlan<detail::AddArgs> {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const AddDesc& desc, Direction direction,
             AlgoInfo info, Impl impl)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        alpha_(desc.alpha),
        beta_(direction == Direction::fwd ? desc.beta : 0.0f),
        scaled_copy_(direction != Direction::fwd && impl == Impl::add_tensor) {
    runtime_->make_current();
    if (impl == Impl::reduce_tensor) {
      reduction_ = std::make_unique<Reduction>(make_reduction(*runtime_, desc, context_));
      if (!reduction_->reason.empty())
        detail::raise(ErrorKind::Unsupported, reduction_->reason, context_);
      info_.workspace_bytes = reduction_->workspace;
      return;
    }
    if (scaled_copy_) {
      // diff_src = alpha * diff_dst + 0 * diff_src: the same dims (Note [cudnn add candidates]).
      src_ = make_descriptor(desc.dst_dims, desc, context_, "diff_dst");
      dst_ = make_descriptor(desc.src_dims, desc, context_, "diff_src");
      return;
    }
    src_ = make_descriptor(desc.src_dims, desc, context_, "src");
    dst_ = make_descriptor(desc.dst_dims, desc, context_, "dst");
    if (impl == Impl::op_tensor) {
      cudnnOpTensorDescriptor_t raw = nullptr;
      DNNX_CUDNN_CHECK(cudnnCreateOpTensorDescriptor(&raw), context_,
                       "creating the op-tensor descriptor");
      op_ = OpTensorDescriptor(raw, "cudnnOpTensorDescriptor_t");
      DNNX_CUDNN_CHECK(cudnnSetOpTensorDescriptor(op_.get(), CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                                  CUDNN_PROPAGATE_NAN),
                       context_, "setting the op-tensor operation");
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::AddArgs& args, detail::Workspace workspace) override {
    runtime_->make_current();
    if (reduction_) {
      check_workspace(workspace, info_.workspace_bytes, context_);
      const void* dy = need(args.diff_dst, "diff_dst", context_)->data();
      void* dx = need(args.diff_src, "diff_src", context_)->data();
      replay_.run(
          runtime_->settings(), runtime_->stream(), {dy, dx, workspace.data},
          [&] { reduce(dy, dx, workspace); }, context_);
      return;
    }
    if (scaled_copy_) {
      const void* dy = need(args.diff_dst, "diff_dst", context_)->data();
      void* dx = need(args.diff_src, "diff_src", context_)->data();
      replay_.run(
          runtime_->settings(), runtime_->stream(), {dy, dx}, [&] { add(dy, dx); }, context_);
      return;
    }
    const void* src = need(args.src, "src", context_)->data();
    void* dst = need(args.dst, "dst", context_)->data();
    replay_.run(
        runtime_->settings(), runtime_->stream(), {src, dst}, [&] { add(src, dst); }, context_);
  }

 private:
  void add(const void* src, void* dst) {
    const cudnnHandle_t handle = runtime_->handle();
    if (!op_) {
      DNNX_CUDNN_CHECK(cudnnAddTensor(handle, &alpha_, src_.get(), src, &beta_, dst_.get(), dst),
                       context_, "running cudnnAddTensor");
      return;
    }
    // dst = (beta * dst) + (alpha * src) + 0 * dst, in place on the first operand.
    const float zero = 0.0f;
    DNNX_CUDNN_CHECK(cudnnOpTensor(handle, op_.get(), &beta_, dst_.get(), dst, &alpha_, src_.get(),
                                   src, &zero, dst_.get(), dst),
                     context_, "running cudnnOpTensor");
  }

  void reduce(const void* dy, void* dx, const detail::Workspace& workspace) {
    const float zero = 0.0f;
    DNNX_CUDNN_CHECK(
        cudnnReduceTensor(runtime_->handle(), reduction_->reduce.get(), nullptr, 0, workspace.data,
                          info_.workspace_bytes, &alpha_, reduction_->diff_dst.get(), dy, &zero,
                          reduction_->diff_src.get(), dx),
        context_, "running cudnnReduceTensor");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  float alpha_, beta_;
  bool scaled_copy_;  // backward through cudnnAddTensor: src_/dst_ describe diff_dst/diff_src
  TensorDescriptor src_, dst_;
  OpTensorDescriptor op_;
  std::unique_ptr<Reduction> reduction_;
  LaunchGraph replay_;  // Note [graph replay]
};

// Backward listings ask cuDNN for workspace sizes: ListedOpBackend keeps them per (desc,
// direction).
class CudnnAdd final : public LayerBackend<AddDesc, detail::AddArgs, Candidate> {
 public:
  explicit CudnnAdd(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const AddDesc& desc, Direction direction) override {
    return list_candidates(*runtime_, desc, direction);
  }
  std::shared_ptr<detail::OpPlan<detail::AddArgs>> build(const AddDesc& desc, Direction direction,
                                                         const Candidate& candidate) override {
    if (candidate.impl == Impl::kernel)
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
    return std::make_shared<LegacyPlan>(runtime_, desc, direction, candidate.info, candidate.impl);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::add>> make_add_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnAdd>(std::move(runtime));
}

}  // namespace dnnx::cudnn
