// The reference optimizer and loss-scaling ops: one candidate each, "reference:direct". Plain
// loops over each tensor's values, the formulas of core/optim_math.hpp in f64; what is stored is
// rounded once to its dtype (a parameter with a master copy takes the stored master value rounded,
// as copying the master into it would).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/dtype.hpp"
#include "core/optim_args.hpp"
#include "core/optim_math.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace dnnx::reference {
namespace {

namespace optim = detail::optim;

template <typename Desc>
AlgoInfo info_of(const Desc&, Direction) {
  return direct_info("direct loops (f64)", {"direct", "reference"});
}

float read_scalar(const Tensor* tensor) { return tensor->to_f32()[0]; }

std::vector<double> widen(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_f32();
  return {values.begin(), values.end()};
}

// The parameter's new value `values` into the master copy (f32) and the parameter, or into the
// parameter alone.
void store_parameter(const std::vector<double>& values, Tensor& param, Tensor* master) {
  if (master == nullptr) {
    store(values, param);
    return;
  }
  store(values, *master);
  param.copy_from_f32(master->to_f32());
}

// The step count after this call's increment, or nullopt when found_inf skips the step (Note
// [optimizer step count]).
std::optional<double> advance_step(Tensor* step, const Tensor* found_inf) {
  if (found_inf != nullptr && read_scalar(found_inf) != 0.0f) return std::nullopt;
  const float next = read_scalar(step) + 1.0f;
  step->fill(next);
  return next;
}

// The gradient of tensor i in f64, divided by the grad scale when there is one.
std::vector<double> gradient(const Tensor& grad, const Tensor* grad_scale) {
  std::vector<double> g = widen(grad);
  if (grad_scale != nullptr) {
    const double scale = read_scalar(grad_scale);
    for (double& v : g) v /= scale;
  }
  return g;
}

class SgdPlan final : public DirectPlanBase<SgdDesc, detail::SgdArgs> {
 public:
  SgdPlan(const SgdDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::SgdArgs& args, detail::Workspace) override {
    const SgdDesc& d = desc_;
    const SgdTensors& t = args.tensors;
    const std::optional<double> step = advance_step(t.step, t.found_inf);
    if (!step) return;
    const auto s = optim::SgdScalars<double>::make(args.hyper.lr, args.hyper.momentum,
                                                   args.hyper.dampening, args.hyper.weight_decay);
    const optim::SgdFlags flags{d.momentum, d.nesterov, d.maximize};
    for (std::size_t i = 0; i < d.shapes.size(); ++i) {
      Tensor* master = d.master_weights ? &t.master[i] : nullptr;
      std::vector<double> p = widen(master != nullptr ? *master : t.params[i]);
      const std::vector<double> g = gradient(t.grads[i], t.grad_scale);
      std::vector<double> buf = d.momentum ? widen(t.momentum_buffers[i]) : std::vector<double>();
      for (std::size_t e = 0; e < p.size(); ++e) {
        p[e] =
            optim::sgd_element(p[e], g[e], d.momentum ? &buf[e] : nullptr, *step == 1.0, flags, s);
      }
      store_parameter(p, t.params[i], master);
      if (d.momentum) store(buf, t.momentum_buffers[i]);
    }
  }
};

class AdamPlan final : public DirectPlanBase<AdamDesc, detail::AdamArgs> {
 public:
  AdamPlan(const AdamDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::AdamArgs& args, detail::Workspace) override {
    const AdamDesc& d = desc_;
    const AdamTensors& t = args.tensors;
    const std::optional<double> step = advance_step(t.step, t.found_inf);
    if (!step) return;
    const AdamHyper& h = args.hyper;
    const auto s =
        optim::AdamScalars<double>::make(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, *step);
    const optim::AdamFlags flags{d.amsgrad, d.decoupled_weight_decay, d.maximize};
    for (std::size_t i = 0; i < d.shapes.size(); ++i) {
      Tensor* master = d.master_weights ? &t.master[i] : nullptr;
      std::vector<double> p = widen(master != nullptr ? *master : t.params[i]);
      const std::vector<double> g = gradient(t.grads[i], t.grad_scale);
      std::vector<double> m = widen(t.exp_avg[i]);
      std::vector<double> v = widen(t.exp_avg_sq[i]);
      std::vector<double> v_max = d.amsgrad ? widen(t.max_exp_avg_sq[i]) : std::vector<double>();
      for (std::size_t e = 0; e < p.size(); ++e) {
        double unused = 0;  // adam_element's v_max without amsgrad
        p[e] = optim::adam_element(p[e], g[e], &m[e], &v[e], d.amsgrad ? &v_max[e] : &unused, flags,
                                   s);
      }
      store_parameter(p, t.params[i], master);
      store(m, t.exp_avg[i]);
      store(v, t.exp_avg_sq[i]);
      if (d.amsgrad) store(v_max, t.max_exp_avg_sq[i]);
    }
  }
};

class UnscalePlan final : public DirectPlanBase<UnscaleDesc, detail::UnscaleArgs> {
 public:
  UnscalePlan(const UnscaleDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  // In f32, as torch computes it: a product of two floats rounded to dtype is what the f64
  // product rounded once to dtype is, except in f32 itself, where the float product is the answer.
  void execute(const detail::UnscaleArgs& args, detail::Workspace) override {
    float inv_scale = read_scalar(args.inv_scale);
    if (desc_.from_scale) inv_scale = optim::inverse_scale(inv_scale);
    bool found = !desc_.reset_found_inf && read_scalar(args.found_inf) != 0.0f;
    for (Tensor& grad : args.grads) {
      std::vector<float> values = grad.to_f32();
      for (float& v : values) {
        if (!std::isfinite(v)) found = true;
        v = optim::unscale_element(v, inv_scale);
      }
      grad.copy_from_f32(values);
    }
    args.found_inf->fill(found ? 1.0f : 0.0f);
  }
};

class UpdateScalePlan final : public DirectPlanBase<UpdateScaleDesc, detail::UpdateScaleArgs> {
 public:
  UpdateScalePlan(const UpdateScaleDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const detail::UpdateScaleArgs& args, detail::Workspace) override {
    float scale = read_scalar(args.scale);
    auto tracker =
        static_cast<std::int32_t>(detail::load_index(args.growth_tracker->data(), DType::i32));
    optim::update_scale(&scale, &tracker, read_scalar(args.found_inf), args.hyper.growth_factor,
                        args.hyper.backoff_factor,
                        static_cast<std::int32_t>(args.hyper.growth_interval));
    args.scale->fill(scale);
    std::memcpy(args.growth_tracker->data(), &tracker, sizeof tracker);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::sgd>> make_sgd_backend(const detail::OpBackends&) {
  return DirectBackend<SgdDesc, detail::SgdArgs>::of<SgdPlan>(info_of<SgdDesc>);
}

std::unique_ptr<detail::OpBackendOf<OpKind::adam>> make_adam_backend(const detail::OpBackends&) {
  return DirectBackend<AdamDesc, detail::AdamArgs>::of<AdamPlan>(info_of<AdamDesc>);
}

std::unique_ptr<detail::OpBackendOf<OpKind::unscale>> make_unscale_backend(
    const detail::OpBackends&) {
  return DirectBackend<UnscaleDesc, detail::UnscaleArgs>::of<UnscalePlan>(info_of<UnscaleDesc>);
}

std::unique_ptr<detail::OpBackendOf<OpKind::update_scale>> make_update_scale_backend(
    const detail::OpBackends&) {
  return DirectBackend<UpdateScaleDesc, detail::UpdateScaleArgs>::of<UpdateScalePlan>(
      info_of<UpdateScaleDesc>);
}

}  // namespace dnnx::reference
