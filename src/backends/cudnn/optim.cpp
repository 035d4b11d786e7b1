// The cudnn backend's optimizer and loss-scaling ops: dnnx's own CUDA kernels (kernels/optim.cu),
// cuDNN having none. Candidates, in priority order:
//   cudnn:kernel:<op>:multi_tensor  one launch for every tensor (Note [multi-tensor launch]);
//                                   unsupported beyond kernels::optim::max_tensors non-empty
//                                   tensors (the table must fit the kernel's parameters)
//   cudnn:kernel:<op>:per_tensor    one launch per tensor: any count
// and cudnn:kernel:update_scale for the scaler's update (one thread). Both listings need no
// workspace; a tensor whose pointers are not aligned for vector accesses is walked element by
// element inside the same kernels, so alignment never makes a candidate unsupported.

#include "backends/cudnn/kernels/optim.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/optim_args.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace kopt = kernels::optim;

kopt::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kopt::Element::f16;
    case DType::bf16: return kopt::Element::bf16;
    default: return kopt::Element::f32;
  }
}

int non_empty(const std::vector<Dims>& shapes) {
  int count = 0;
  for (const Dims& dims : shapes) count += dims.product() > 0 ? 1 : 0;
  return count;
}

struct Candidate {
  AlgoInfo info;
  kopt::Launch launch = kopt::Launch::multi_tensor;
};

// The two candidates of a multi-tensor op on `shapes`.
std::vector<Candidate> list_launches(const char* op, const std::vector<Dims>& shapes) {
  Candidate multi;
  multi.info.id = detail::cat("cudnn:kernel:", op, ":multi_tensor");
  multi.info.name = "multi-tensor kernel (one launch, table in the kernel parameters)";
  multi.info.notes = {"kernel", "multi_tensor"};
  const int count = non_empty(shapes);
  multi.info.supported = count <= kopt::max_tensors;
  if (!multi.info.supported) {
    multi.info.reason = detail::cat("a multi-tensor launch takes at most ", kopt::max_tensors,
                                    " tensors with elements (its table lives in the kernel's "
                                    "parameters), got ",
                                    count, "; split the call");
  }
  Candidate per;
  per.info.id = detail::cat("cudnn:kernel:", op, ":per_tensor");
  per.info.name = "per-tensor kernel (one launch per tensor)";
  per.info.notes = {"kernel", "per_tensor"};
  per.info.supported = true;
  per.launch = kopt::Launch::per_tensor;
  std::vector<Candidate> list{multi, per};
  if (!multi.info.supported) std::swap(list[0], list[1]);
  for (std::size_t i = 0; i < list.size(); ++i) {
    list[i].info.deterministic = true;
    list[i].info.priority = static_cast<int>(i);
  }
  return list;
}

template <typename T>
T* pointer(const Tensor& tensor) {
  return static_cast<T*>(tensor.data());
}

const float* optional_scalar(const Tensor* tensor) {
  return tensor == nullptr ? nullptr : pointer<const float>(*tensor);
}

template <typename Desc, typename Args>
class KernelPlanBase : public detail::LayerPlanBase<Args> {
 public:
  KernelPlanBase(std::shared_ptr<Runtime> runtime, const Desc& desc, const Candidate& candidate)
      : detail::LayerPlanBase<Args>(
            candidate.info,
            detail::op_context(BackendKind::cudnn, desc, Direction::fwd, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        launch_(candidate.launch) {
    if constexpr (requires { desc.shapes; }) {
      refs_.resize(desc.shapes.size());
      for (std::size_t i = 0; i < refs_.size(); ++i) refs_[i].numel = desc.shapes[i].product();
    }
  }

 protected:
  std::shared_ptr<Runtime> runtime_;
  Desc desc_;
  kopt::Launch launch_;
  // One entry per tensor, sizes set once; each call writes the tensors' addresses (the same
  // fields every call, as the desc decides which exist), so a step allocates nothing on the host.
  std::vector<kopt::TensorRef> refs_;
};

class SgdPlan final : public KernelPlanBase<SgdDesc, detail::SgdArgs> {
 public:
  using KernelPlanBase::KernelPlanBase;

  void execute(const detail::SgdArgs& args, detail::Workspace) override {
    const SgdDesc& d = desc_;
    const SgdTensors& t = args.tensors;
    for (std::size_t i = 0; i < refs_.size(); ++i) {
      kopt::TensorRef& r = refs_[i];
      r.param = t.params[i].data();
      r.grad = t.grads[i].data();
      if (d.master_weights) r.master = pointer<float>(t.master[i]);
      if (d.momentum) r.state[0] = pointer<float>(t.momentum_buffers[i]);
    }
    kopt::SgdCall call;
    call.element = element_of(d.dtype);
    call.momentum = d.momentum;
    call.nesterov = d.nesterov;
    call.maximize = d.maximize;
    call.lr = args.hyper.lr;
    call.momentum_value = args.hyper.momentum;
    call.dampening = args.hyper.dampening;
    call.weight_decay = args.hyper.weight_decay;
    call.scalars = {pointer<float>(*t.step), optional_scalar(t.grad_scale),
                    optional_scalar(t.found_inf)};
    runtime_->make_current();
    DNNX_CUDNN_CHECK(
        kopt::sgd(call, refs_.data(), static_cast<int>(refs_.size()), launch_, runtime_->stream()),
        context_, "launching the sgd kernels");
  }
};

class AdamPlan final : public KernelPlanBase<AdamDesc, detail::AdamArgs> {
 public:
  using KernelPlanBase::KernelPlanBase;

  void execute(const detail::AdamArgs& args, detail::Workspace) override {
    const AdamDesc& d = desc_;
    const AdamTensors& t = args.tensors;
    for (std::size_t i = 0; i < refs_.size(); ++i) {
      kopt::TensorRef& r = refs_[i];
      r.param = t.params[i].data();
      r.grad = t.grads[i].data();
      if (d.master_weights) r.master = pointer<float>(t.master[i]);
      r.state[0] = pointer<float>(t.exp_avg[i]);
      r.state[1] = pointer<float>(t.exp_avg_sq[i]);
      if (d.amsgrad) r.state[2] = pointer<float>(t.max_exp_avg_sq[i]);
    }
    const AdamHyper& h = args.hyper;
    kopt::AdamCall call;
    call.element = element_of(d.dtype);
    call.amsgrad = d.amsgrad;
    call.decoupled = d.decoupled_weight_decay;
    call.maximize = d.maximize;
    call.lr = h.lr;
    call.beta1 = h.beta1;
    call.beta2 = h.beta2;
    call.eps = h.eps;
    call.weight_decay = h.weight_decay;
    call.scalars = {pointer<float>(*t.step), optional_scalar(t.grad_scale),
                    optional_scalar(t.found_inf)};
    runtime_->make_current();
    DNNX_CUDNN_CHECK(
        kopt::adam(call, refs_.data(), static_cast<int>(refs_.size()), launch_, runtime_->stream()),
        context_, "launching the adam kernels");
  }
};

class UnscalePlan final : public KernelPlanBase<UnscaleDesc, detail::UnscaleArgs> {
 public:
  using KernelPlanBase::KernelPlanBase;

  void execute(const detail::UnscaleArgs& args, detail::Workspace) override {
    for (std::size_t i = 0; i < refs_.size(); ++i) refs_[i].param = args.grads[i].data();
    kopt::UnscaleCall call;
    call.element = element_of(desc_.dtype);
    call.reset_found_inf = desc_.reset_found_inf;
    call.from_scale = desc_.from_scale;
    call.found_inf = pointer<float>(*args.found_inf);
    call.inv_scale = pointer<const float>(*args.inv_scale);
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kopt::unscale(call, refs_.data(), static_cast<int>(refs_.size()), launch_,
                                   runtime_->stream()),
                     context_, "launching the unscale kernels");
  }
};

class UpdateScalePlan final : public KernelPlanBase<UpdateScaleDesc, detail::UpdateScaleArgs> {
 public:
  using KernelPlanBase::KernelPlanBase;

  void execute(const detail::UpdateScaleArgs& args, detail::Workspace) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kopt::update_scale(
                         pointer<float>(*args.scale), pointer<std::int32_t>(*args.growth_tracker),
                         pointer<const float>(*args.found_inf), args.hyper.growth_factor,
                         args.hyper.backoff_factor,
                         static_cast<std::int32_t>(args.hyper.growth_interval), runtime_->stream()),
                     context_, "launching the update_scale kernel");
  }
};

// The candidates of `Desc` (list_launches on its shapes, or the one update_scale kernel) and
// their plans.
template <typename Desc, typename Args, typename Plan>
class KernelBackend final : public LayerBackend<Desc, Args, Candidate> {
 public:
  KernelBackend(std::shared_ptr<Runtime> runtime, const char* op)
      : detail::RuntimeLayerBackend<Desc, Args, Candidate, Runtime>(BackendKind::cudnn,
                                                                    std::move(runtime)),
        op_(op) {}

 private:
  std::vector<Candidate> enumerate(const Desc& desc, Direction) override {
    if constexpr (requires { desc.shapes; }) {
      return list_launches(op_, desc.shapes);
    } else {
      Candidate one;
      one.info.id = detail::cat("cudnn:kernel:", op_);
      one.info.name = "one-thread kernel";
      one.info.notes = {"kernel"};
      one.info.supported = true;
      one.info.deterministic = true;
      return {one};
    }
  }
  std::shared_ptr<detail::OpPlan<Args>> build(const Desc& desc, Direction,
                                              const Candidate& candidate) override {
    return std::make_shared<Plan>(this->runtime_, desc, candidate);
  }
  const char* op_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::sgd>> make_sgd_backend(std::shared_ptr<Runtime> runtime,
                                                                   const detail::OpBackends&) {
  return std::make_unique<KernelBackend<SgdDesc, detail::SgdArgs, SgdPlan>>(std::move(runtime),
                                                                            "sgd");
}

std::unique_ptr<detail::OpBackendOf<OpKind::adam>> make_adam_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<KernelBackend<AdamDesc, detail::AdamArgs, AdamPlan>>(std::move(runtime),
                                                                               "adam");
}

std::unique_ptr<detail::OpBackendOf<OpKind::unscale>> make_unscale_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<KernelBackend<UnscaleDesc, detail::UnscaleArgs, UnscalePlan>>(
      std::move(runtime), "unscale");
}

std::unique_ptr<detail::OpBackendOf<OpKind::update_scale>> make_update_scale_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<KernelBackend<UpdateScaleDesc, detail::UpdateScaleArgs, UpdateScalePlan>>(
      std::move(runtime), "update_scale");
}

}  // namespace dnnx::cudnn
