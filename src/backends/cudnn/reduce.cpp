// The cudnn backend's reduction: cuDNN's legacy cudnnReduceTensor and the backend's own kernels
// (kernels/reduce.cu) as candidates.
//
// Note [cudnn reduce candidates]
// Forward:
//   cudnn:kernel:reduce          every kind, axis set, dtype and layout (Note [reduce kernels]);
//   cudnn:legacy:reduce_tensor   cudnnReduceTensor with ADD, AVG, MAX, MIN, NORM1 or NORM2, f32
//                                compute, NaN propagated, no indices; its workspace (and the
//                                indices size, 0 without indices, queried all the same) is the
//                                candidate's. The listing rules out up front what cuDNN 9.19
//                                refuses at run time although its workspace query accepts it:
//                                src dims == dst dims (no axis reduced: BAD_PARAM) and bf16
//                                (NOT_SUPPORTED; the documented types are float, double, half and
//                                int8), and tensors beyond INT_MAX elements (legacy descriptors
//                                hold int sizes and strides).
// Backward: cuDNN has no reduction backward; cudnn:kernel:reduce only.
// Tensors go to cuDNN as legacy_tensor_descriptor describes them (layer_common.hpp). cuDNN's
// reproducibility notes do not list cudnnReduceTensor as non-deterministic; cudnn_reduce_test
// checks every candidate bitwise.

#include "backends/cudnn/kernels/reduce.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/reduce_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace kred = kernels::reduce;

using ReduceTensorDescriptor =
    Handle<cudnnReduceTensorDescriptor_t, cudnnDestroyReduceTensorDescriptor>;

constexpr const char* kernel_id = "cudnn:kernel:reduce";
constexpr const char* reduce_tensor_id = "cudnn:legacy:reduce_tensor";

struct Candidate {
  AlgoInfo info;
  bool kernel = true;
};

ErrorContext context_of(const ReduceDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

kred::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kred::Element::f16;
    case DType::bf16: return kred::Element::bf16;
    default: return kred::Element::f32;
  }
}

kred::Geometry kernel_geometry(const ReduceDesc& desc) {
  const detail::ReduceGeometry g = detail::reduce_geometry(desc);
  kred::Geometry k;
  k.rank = g.rank;
  for (int i = 0; i < g.rank; ++i) {
    k.sizes[i] = g.sizes[static_cast<std::size_t>(i)];
    k.dst_strides[i] = g.dst_strides[static_cast<std::size_t>(i)];
  }
  k.kept_rank = g.kept_rank;
  for (int i = 0; i < g.kept_rank; ++i) {
    k.kept_sizes[i] = g.kept_sizes[static_cast<std::size_t>(i)];
    k.kept_strides[i] = g.kept_strides[static_cast<std::size_t>(i)];
  }
  k.reduced_rank = g.reduced_rank;
  for (int i = 0; i < g.reduced_rank; ++i) {
    k.reduced_sizes[i] = g.reduced_sizes[static_cast<std::size_t>(i)];
    k.reduced_strides[i] = g.reduced_strides[static_cast<std::size_t>(i)];
  }
  k.outputs = g.outputs;
  k.count = g.count;
  return k;
}

cudnnReduceTensorOp_t op_of(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::sum: return CUDNN_REDUCE_TENSOR_ADD;
    case ReduceKind::mean: return CUDNN_REDUCE_TENSOR_AVG;
    case ReduceKind::max: return CUDNN_REDUCE_TENSOR_MAX;
    case ReduceKind::min: return CUDNN_REDUCE_TENSOR_MIN;
    case ReduceKind::norm1: return CUDNN_REDUCE_TENSOR_NORM1;
    case ReduceKind::norm2: return CUDNN_REDUCE_TENSOR_NORM2;
  }
  return CUDNN_REDUCE_TENSOR_ADD;
}

// Note [cudnn reduce candidates]: what dnnx rules out before asking cuDNN; empty if nothing.
std::string reduce_tensor_reason(const ReduceDesc& desc) {
  if (desc.src_dims.product() > INT_MAX) {
    return detail::cat("legacy cuDNN descriptors hold int sizes and strides; src has ",
                       desc.src_dims.product(), " elements (more than INT_MAX)");
  }
  if (desc.src_dims == desc.dst_dims) {
    return detail::cat("src dims == dst dims (", desc.dst_dims,
                       "): no axis to reduce, which cudnnReduceTensor rejects "
                       "(CUDNN_STATUS_BAD_PARAM); cudnn:kernel:reduce runs it");
  }
  if (desc.dtype == DType::bf16) {
    return "cudnnReduceTensor does not take bf16 tensors (its documented types are float, "
           "double, half and int8; cuDNN 9.19 returns CUDNN_STATUS_NOT_SUPPORTED when run, "
           "although its workspace query accepts them)";
  }
  return {};
}

// The descriptors of one cudnnReduceTensor call and the workspace cuDNN asks for (or why not).
struct Reduction {
  TensorDescriptor src, dst;
  ReduceTensorDescriptor reduce;
  std::size_t workspace = 0;  // cuDNN's workspace
  std::size_t indices = 0;    // cuDNN's indices, after the workspace (aligned)
  std::string reason;         // cuDNN's refusal, empty when supported
  std::size_t total() const { return indices == 0 ? workspace : align(workspace) + indices; }
  static std::size_t align(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
};

std::string refusal(cudnnStatus_t status, const char* what) {
  std::string reason = detail::cat("cuDNN rejects it (", what, "): ", status_name(status));
  if (const std::string message = last_cudnn_message(); !message.empty())
    reason += " (" + message + ")";
  return reason;
}

Reduction make_reduction(Runtime& runtime, const ReduceDesc& desc, const ErrorContext& context) {
  Reduction r;
  runtime.make_current();
  r.src = legacy_tensor_descriptor(desc.src_dims, desc.dtype, desc.layout, context, "src");
  r.dst = legacy_tensor_descriptor(desc.dst_dims, desc.dtype, desc.layout, context, "dst");
  cudnnReduceTensorDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateReduceTensorDescriptor(&raw), context,
                   "creating the reduction descriptor");
  r.reduce = ReduceTensorDescriptor(raw, "cudnnReduceTensorDescriptor_t");
  DNNX_CUDNN_CHECK(cudnnSetReduceTensorDescriptor(
                       r.reduce.get(), op_of(desc.kind), CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN,
                       CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES),
                   context, "setting the reduction");
  cudnnStatus_t status = cudnnGetReductionWorkspaceSize(runtime.handle(), r.reduce.get(),
                                                        r.src.get(), r.dst.get(), &r.workspace);
  if (status != CUDNN_STATUS_SUCCESS) {
    r.reason = refusal(status, "workspace size");
    return r;
  }
  status = cudnnGetReductionIndicesSize(runtime.handle(), r.reduce.get(), r.src.get(), r.dst.get(),
                                        &r.indices);
  if (status != CUDNN_STATUS_SUCCESS) r.reason = refusal(status, "indices size");
  return r;
}

std::vector<Candidate> list_candidates(Runtime& runtime, const ReduceDesc& desc,
                                       Direction direction) {
  std::vector<Candidate> list;
  const kred::Geometry g = kernel_geometry(desc);
  if (direction != Direction::fwd) {
    list.push_back({candidate_info(kernel_id, "dnnx elementwise gradient kernel", {}, {"kernel"},
                                   kred::backward_workspace(static_cast<kred::Kind>(desc.kind), g)),
                    true});
  } else {
    list.push_back({candidate_info(kernel_id, "dnnx deterministic reduction kernel", {}, {"kernel"},
                                   kred::forward_workspace(g, runtime.facts().sm_count)),
                    true});
    std::string reason = reduce_tensor_reason(desc);
    std::size_t workspace = 0;
    if (reason.empty()) {
      const Reduction r = make_reduction(runtime, desc, context_of(desc, direction));
      reason = r.reason;
      workspace = r.total();
    }
    list.push_back({candidate_info(reduce_tensor_id,
                                   detail::cat("cudnnReduceTensor (", to_string(desc.kind), ")"),
                                   reason, {"legacy"}, workspace),
                    false});
  }
  std::stable_partition(list.begin(), list.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

class KernelPlan final : public detail::OpPlan<detail::ReduceArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const ReduceDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        direction_(direction),
        reads_values_(desc.backward_reads_values()),
        element_(element_of(desc.dtype)),
        kind_(static_cast<kred::Kind>(desc.kind)),
        geometry_(kernel_geometry(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ReduceArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(kred::forward(element_, kind_, geometry_, data_of(args.src, "src", context_),
                                     data_of(args.dst, "dst", context_), workspace.data,
                                     runtime_->facts().sm_count, runtime_->stream()),
                       context_, "launching the reduction kernels");
      return;
    }
    const void* src = reads_values_ ? data_of(args.src, "src", context_) : nullptr;
    const void* dst = reads_values_ ? data_of(args.saved_dst, "dst", context_) : nullptr;
    DNNX_CUDNN_CHECK(kred::backward(element_, kind_, geometry_, src, dst,
                                    data_of(args.diff_dst, "diff_dst", context_),
                                    data_of(args.diff_src, "diff_src", context_), workspace.data,
                                    runtime_->stream()),
                     context_, "launching the reduction gradient kernels");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  bool reads_values_;
  kred::Element element_;
  kred::Kind kind_;
  kred::Geometry geometry_;
};

class LegacyPlan final : public detail::OpPlan<detail::ReduceArgs> {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const ReduceDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        reduction_(make_reduction(*runtime_, desc, context_)) {
    if (!reduction_.reason.empty())
      detail::raise(ErrorKind::Unsupported, reduction_.reason, context_);
    info_.workspace_bytes = reduction_.total();
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ReduceArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const void* src = data_of(args.src, "src", context_);
    void* dst = data_of(args.dst, "dst", context_);
    replay_.run(
        runtime_->settings(), runtime_->stream(), {src, dst, workspace.data},
        [&] { reduce(src, dst, workspace); }, context_);
  }

 private:
  void reduce(const void* src, void* dst, const detail::Workspace& workspace) {
    const float one = 1.0f;
    const float zero = 0.0f;
    auto* base = static_cast<std::byte*>(workspace.data);
    void* indices =
        reduction_.indices > 0 ? base + Reduction::align(reduction_.workspace) : nullptr;
    DNNX_CUDNN_CHECK(cudnnReduceTensor(runtime_->handle(), reduction_.reduce.get(), indices,
                                       reduction_.indices, base, reduction_.workspace, &one,
                                       reduction_.src.get(), src, &zero, reduction_.dst.get(), dst),
                     context_, "running cudnnReduceTensor");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Reduction reduction_;
  LaunchGraph replay_;  // Note [graph replay]
};

// Forward listings ask cuDNN for workspace sizes: ListedOpBackend keeps them per (desc,
// direction).
class CudnnReduce final : public LayerBackend<ReduceDesc, detail::ReduceArgs, Candidate> {
 public:
  explicit CudnnReduce(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const ReduceDesc& desc, Direction direction) override {
    return list_candidates(*runtime_, desc, direction);
  }
  std::shared_ptr<detail::OpPlan<detail::ReduceArgs>> build(const ReduceDesc& desc,
                                                            Direction direction,
                                                            const Candidate& candidate) override {
    if (candidate.kernel)
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
    return std::make_shared<LegacyPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reduce>> make_reduce_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnReduce>(std::move(runtime));
}

}  // namespace dnnx::cudnn
