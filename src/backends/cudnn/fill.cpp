// The cudnn backend's fill: dnnx's own kernel, candidate "cudnn:kernel:fill" (kernels/random.cu,
// Note [seeded kernels]). cuRAND is no candidate: its generators (cuRAND's Philox included) order
// and convert their numbers their own way and use CUDA's log / sin / cos, so they cannot give the
// bits the reference and cpu backends give for the same generator state.

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/kernels/random.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/fill_args.hpp"

#include <memory>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace krandom = kernels::random;

constexpr const char* kernel_id = "cudnn:kernel:fill";

struct Candidate {
  AlgoInfo info;
};

krandom::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return krandom::Element::f16;
    case DType::bf16: return krandom::Element::bf16;
    default: return krandom::Element::f32;
  }
}

class KernelPlan final : public detail::LayerPlanBase<detail::FillArgs> {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const FillDesc& desc, Direction direction,
             AlgoInfo info)
      : LayerPlanBase(std::move(info),
                      detail::op_context(BackendKind::cudnn, desc, direction, kernel_id)),
        runtime_(std::move(runtime)),
        element_(element_of(desc.dtype)),
        count_(desc.dims.product()),
        geometry_(detail::geometry_of(desc.dims, desc.layout)) {}

  void execute(const detail::FillArgs& args, detail::Workspace) override {
    if (count_ == 0) return;
    void* dst = data_of(args.dst, "dst", context_);
    runtime_->make_current();
    DNNX_CUDNN_CHECK(krandom::fill(element_, dst, geometry_, count_, args.params, args.seed,
                                   args.offset, runtime_->stream()),
                     context_, "launching the fill kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  krandom::Element element_;
  std::int64_t count_;
  detail::random::Geometry geometry_;
};

class CudnnFill final : public LayerBackend<FillDesc, detail::FillArgs, Candidate> {
 public:
  explicit CudnnFill(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const FillDesc&, Direction) override {
    Candidate candidate;
    candidate.info.id = kernel_id;
    candidate.info.name = "dnnx Philox fill kernel (one thread per block of 4)";
    candidate.info.supported = true;
    candidate.info.deterministic = true;
    candidate.info.notes = {"kernel", "philox"};
    return {std::move(candidate)};
  }
  std::shared_ptr<detail::OpPlan<detail::FillArgs>> build(const FillDesc& desc, Direction direction,
                                                          const Candidate& candidate) override {
    return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::fill>> make_fill_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnFill>(std::move(runtime));
}

}  // namespace dnnx::cudnn
