// The cudnn backend's reorder: the backend's own kernels (kernels/reorder.cu) and cuDNN's legacy
// cudnnTransformTensor, as candidates.
//
// Note [cudnn reorder candidates]
//   cudnn:kernel:reorder           every dtype pair and layout pair (Note [reorder kernels]): an
//                                  elementwise kernel when src and dst share their memory order,
//                                  a tiled shared-memory transpose for NCHW <-> NHWC;
//   cudnn:legacy:transform_tensor  cudnnTransformTensor(alpha, src, beta, dst) with each tensor's
//                                  own strides. cuDNN documents BAD_PARAM when the two
//                                  descriptors' data types differ, so it is offered for
//                                  same-dtype reorders only (pure layout changes and scaled
//                                  copies). Legacy descriptors hold int sizes and strides and no
//                                  zero sizes: tensors beyond INT_MAX elements and empty ones are
//                                  left to the kernel.
// Tensors of rank 1 to 3 are described to cuDNN as 4-D ones (legacy_dims), which keeps their
// bytes in either layout. Neither candidate accumulates across elements: both are deterministic
// (cudnn_reorder_test checks it bitwise). Both only queue work on the backend's stream.

#include "backends/cudnn/kernels/reorder.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/reorder_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace kreorder = kernels::reorder;

constexpr const char* kernel_id = "cudnn:kernel:reorder";
constexpr const char* transform_id = "cudnn:legacy:transform_tensor";

enum class Impl : std::uint8_t { kernel, transform };

struct Candidate {
  AlgoInfo info;
  Impl impl = Impl::kernel;
};

kreorder::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kreorder::Element::f16;
    case DType::bf16: return kreorder::Element::bf16;
    default: return kreorder::Element::f32;
  }
}

// Note [reorder kernels]: elementwise when the memory orders agree, else the batched transpose of
// each image's C x S (channels_first source) or S x C (channels_last source) matrix.
kreorder::Shape kernel_shape(const ReorderDesc& desc) {
  kreorder::Shape shape;
  shape.count = desc.dims.product();
  if (desc.same_order()) return shape;
  // Different orders need rank >= 3 (rank <= 2 is row-major in either layout).
  std::int64_t spatial = 1;
  for (int i = 2; i < desc.dims.rank(); ++i) spatial *= desc.dims[i];
  const std::int64_t channels = desc.dims[1];
  shape.transpose = true;
  shape.batch = desc.dims[0];
  const bool from_first = desc.src_layout == Layout::channels_first;
  shape.rows = from_first ? channels : spatial;
  shape.cols = from_first ? spatial : channels;
  return shape;
}

std::string transform_reason(const ReorderDesc& desc) {
  if (desc.src_dtype != desc.dst_dtype) {
    return detail::cat(
        "cudnnTransformTensor needs src and dst of one data type (cuDNN returns "
        "CUDNN_STATUS_BAD_PARAM otherwise), got ",
        to_string(desc.src_dtype), " -> ", to_string(desc.dst_dtype),
        "; cudnn:kernel:reorder converts");
  }
  const std::int64_t count = desc.dims.product();
  if (count == 0) {
    return detail::cat("dims ", desc.dims,
                       " hold no element and cuDNN tensor descriptors take no zero size (the "
                       "kernel returns at once)");
  }
  if (count > INT_MAX) {
    return detail::cat("legacy cuDNN descriptors hold int sizes and strides; the tensors have ",
                       count, " elements (more than INT_MAX)");
  }
  return {};
}

std::vector<Candidate> list_candidates(const ReorderDesc& desc) {
  std::vector<Candidate> list;
  list.push_back({candidate_info(kernel_id,
                                 desc.same_order() ? "dnnx elementwise reorder kernel"
                                                   : "dnnx tiled transpose kernel (shared memory)",
                                 {}, {"kernel"}),
                  Impl::kernel});
  list.push_back(
      {candidate_info(transform_id, "cudnnTransformTensor", transform_reason(desc), {"legacy"}),
       Impl::transform});
  std::stable_partition(list.begin(), list.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

class KernelPlan final : public detail::LayerPlanBase<detail::ReorderArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const ReorderDesc& desc, Direction direction,
             AlgoInfo info)
      : LayerPlanBase(std::move(info),
                      detail::op_context(BackendKind::cudnn, desc, direction, kernel_id)),
        runtime_(std::move(runtime)),
        src_element_(element_of(desc.src_dtype)),
        dst_element_(element_of(desc.dst_dtype)),
        alpha_(desc.alpha),
        beta_(desc.beta),
        shape_(kernel_shape(desc)) {}

  void execute(const detail::ReorderArgs& args, detail::Workspace) override {
    const void* src = data_of(args.src, "src", context_);
    void* dst = data_of(args.dst, "dst", context_);
    if (shape_.count == 0) return;
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kreorder::run(src_element_, dst_element_, shape_, alpha_, beta_, src, dst,
                                   runtime_->stream()),
                     context_, "launching the reorder kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  kreorder::Element src_element_, dst_element_;
  float alpha_, beta_;
  kreorder::Shape shape_;
};

class TransformPlan final : public detail::LayerPlanBase<detail::ReorderArgs> {
 public:
  TransformPlan(std::shared_ptr<Runtime> runtime, const ReorderDesc& desc, Direction direction,
                AlgoInfo info)
      : LayerPlanBase(std::move(info),
                      detail::op_context(BackendKind::cudnn, desc, direction, transform_id)),
        runtime_(std::move(runtime)),
        alpha_(desc.alpha),
        beta_(desc.beta) {
    if (const std::string reason = transform_reason(desc); !reason.empty())
      detail::raise(ErrorKind::Unsupported, reason, context_);
    runtime_->make_current();
    src_ = legacy_tensor_descriptor(desc.dims, desc.src_dtype, desc.src_layout, context_, "src");
    dst_ = legacy_tensor_descriptor(desc.dims, desc.dst_dtype, desc.dst_layout, context_, "dst");
  }

  void execute(const detail::ReorderArgs& args, detail::Workspace) override {
    const void* src = data_of(args.src, "src", context_);
    void* dst = data_of(args.dst, "dst", context_);
    runtime_->make_current();
    replay_.run(
        runtime_->settings(), runtime_->stream(), {src, dst},
        [&] {
          DNNX_CUDNN_CHECK(cudnnTransformTensor(runtime_->handle(), &alpha_, src_.get(), src,
                                                &beta_, dst_.get(), dst),
                           context_, "running cudnnTransformTensor");
        },
        context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  float alpha_, beta_;
  TensorDescriptor src_, dst_;
  LaunchGraph replay_;  // Note [graph replay]
};

class CudnnReorder final : public LayerBackend<ReorderDesc, detail::ReorderArgs, Candidate> {
 public:
  explicit CudnnReorder(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const ReorderDesc& desc, Direction) override {
    return list_candidates(desc);
  }
  std::shared_ptr<detail::OpPlan<detail::ReorderArgs>> build(const ReorderDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    if (candidate.impl == Impl::kernel)
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
    return std::make_shared<TransformPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reorder>> make_reorder_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnReorder>(std::move(runtime));
}

}  // namespace dnnx::cudnn
