#pragma once
/// \file
/// Optimizers over a module's parameters, on the multi-tensor optimizer ops
/// (include/dnnx/ops/optim.hpp): one op call per dtype group of parameters and step. With f16 /
/// bf16 parameters the op updates their f32 master copies (Parameter::master) and writes the
/// rounded values back, so a model converted to half precision trains as nnabla's
/// type_config='half' does.

#include <dnnx/nn/module.hpp>
#include <dnnx/ops/optim.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace dnnx::nn {

/// The tensors of one dtype group of parameters, as the optimizer ops take them.
struct ParameterGroup {
  DType dtype = DType::f32;    ///< of the values and gradients
  std::vector<Dims> shapes;    ///< each parameter's dims
  std::vector<Tensor> params;  ///< the values (sharing the parameters' storage)
  std::vector<Tensor> grads;   ///< the gradients (sharing storage)
  std::vector<Tensor> master;  ///< the f32 master copies (all or none)
  /// The parameters' own tensors behind params, grads and master where those are flat views
  /// (kept alive with them).
  std::vector<Tensor> owners;
};

/// Groups `parameters` by dtype, in order of first appearance. A parameter stored channels_last
/// (nn::to_layout) is given as flat views {numel} of its value, gradient and master copy: the
/// updates are elementwise, and the three share one layout (Note [nn layouts]). Throws
/// InvalidArgument when the parameters of one dtype mix master copies and none, live on
/// different devices, or a parameter's tensors are not dense or differ in layout.
std::vector<ParameterGroup> group_parameters(const std::vector<Parameter*>& parameters);

/// The base of nn's optimizers: the parameters grouped by dtype, one multi-tensor op call per
/// group and step.
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One step of every group.
  void step() { step(nullptr, nullptr); }
  /// One step of every group in which `grad_scale` (f32 {1} on the device, when not null)
  /// divides every gradient and `found_inf` (f32 {1}, when not null) skips the whole step on the
  /// device when nonzero: the op's fused loss-scaling arguments, which nn::GradScaler::step
  /// passes. Each combination has its own desc, built once.
  void step(const Tensor* grad_scale, const Tensor* found_inf);
  /// Zeroes every parameter's gradient (the fill op on the optimizer's context); with
  /// `set_to_none`, writes nothing and flags them (Parameter::grad_none, Note [gradients set to
  /// none]).
  void zero_grad(bool set_to_none = false);
  /// Zeroes the gradients flagged grad_none (no backward wrote them since zero_grad(true)):
  /// step() and GradScaler's checks call it before they read the gradients.
  void zero_none_grads();
  /// The parameter groups the op calls take (their grads are what a GradScaler unscales).
  std::vector<ParameterGroup>& groups() { return groups_; }
  /// The context the op calls run on.
  Context& context() { return context_; }
  /// The choice of the last step of each group.
  const std::vector<std::shared_ptr<const Choice>>& choices() const { return choices_; }

 protected:
  Optimizer(Context context, const std::vector<Parameter*>& parameters);
  /// Runs the op on group `group` with the given loss-scaling scalars (either may be null).
  virtual std::shared_ptr<const Choice> step_group(std::size_t group, const Tensor* grad_scale,
                                                   const Tensor* found_inf) = 0;
  /// Index of a desc variant: bit 0 grad_scale, bit 1 found_inf.
  static std::size_t variant(const Tensor* grad_scale, const Tensor* found_inf) {
    return (grad_scale != nullptr ? 1U : 0U) | (found_inf != nullptr ? 2U : 0U);
  }

  Context context_;
  std::vector<Parameter*> parameters_;
  std::vector<ParameterGroup> groups_;
  std::vector<std::shared_ptr<const Choice>> choices_;

 private:
  friend class GradScaler;
  /// The unscale op's desc of each group (from_scale as given; reset_found_inf on group 0 when
  /// `reset`), built on first use.
  const std::vector<UnscaleDesc>& unscale_descs(bool from_scale, bool reset);
  std::array<std::array<std::vector<UnscaleDesc>, 2>, 2> unscale_descs_;
};

class GradScaler;

/// torch.optim.SGD over `parameters` (model.parameters()), with momentum buffers when
/// hyper.momentum > 0 and Nesterov when asked. The parameters' tensors must stay the same
/// objects (build the optimizer after nn::convert and load_state_dict is fine: it copies in
/// place).
class SGD : public Optimizer {
 public:
  SGD(Context context, const std::vector<Parameter*>& parameters, SgdHyper hyper,
      bool nesterov = false);
  /// A learning-rate schedule changes hyper() between steps.
  SgdHyper& hyper() { return hyper_; }

 protected:
  std::shared_ptr<const Choice> step_group(std::size_t group, const Tensor* grad_scale,
                                           const Tensor* found_inf) override;

 private:
  SgdHyper hyper_;
  std::array<std::vector<SgdDesc>, 4> descs_;  // per variant(), per group; built when first used
  std::vector<std::vector<Tensor>> buffers_;
  std::vector<Tensor> steps_;
};

/// torch.optim.Adam (torch.optim.AdamW with decoupled) over `parameters`.
class Adam : public Optimizer {
 public:
  Adam(Context context, const std::vector<Parameter*>& parameters, AdamHyper hyper = {},
       bool decoupled_weight_decay = false, bool amsgrad = false);
  AdamHyper& hyper() { return hyper_; }

 protected:
  std::shared_ptr<const Choice> step_group(std::size_t group, const Tensor* grad_scale,
                                           const Tensor* found_inf) override;

 private:
  AdamHyper hyper_;
  std::array<std::vector<AdamDesc>, 4> descs_;
  std::vector<std::vector<Tensor>> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
  std::vector<Tensor> steps_;
};

/// torch.cuda.amp.GradScaler's arguments.
struct GradScalerOptions {
  double init_scale = 65536.0;  ///< the first scale; finite, > 0
  /// Dynamic scaling (GradScaler's): update() multiplies the scale by growth_factor after
  /// growth_interval steps in a row without an inf / NaN gradient, and by backoff_factor after a
  /// step that had one. False: a static scale, init_scale for ever (update() changes nothing;
  /// steps with an inf / NaN gradient are still skipped).
  bool dynamic = true;
  double growth_factor = 2.0;           ///< > 1, finite
  double backoff_factor = 0.5;          ///< in (0, 1)
  std::int64_t growth_interval = 2000;  ///< >= 1
  /// False: no scaling at all (torch's enabled=False): loss_gradient() gives ones, step() is the
  /// optimizer's plain step, unscale_() and update() do nothing.
  bool enabled = true;
};

/// Loss scaling for nn's optimizers, as torch.cuda.amp.GradScaler, on the device scalars and ops
/// of include/dnnx/ops/optim.hpp (Note [nn grad scaler] in src/nn/optim.cpp). Per iteration:
///
///   Tensor loss = criterion.forward(model->forward(x), y);
///   model->backward(criterion.backward(scaler.loss_gradient(loss)));  //
///   scaler.scale(loss).backward() scaler.step(sgd);      // skipped on the device when a gradient
///   is inf / NaN scaler.update();       // back off or grow the scale
///
/// optionally with scaler.unscale_(sgd) before step (to clip or read true gradients). Nothing
/// reads a device value on the host except get_scale(). Calls follow torch's rules: unscale_ at
/// most once per optimizer and iteration, before its step; step at most once per optimizer and
/// iteration; update() ends the iteration (for a static scale too) and needs a step or unscale_
/// before it; InvalidArgument otherwise. With several optimizers the inf / NaN check is shared:
/// a non-finite gradient of one skips the steps of those stepped after it too.
class GradScaler {
 public:
  /// Makes the scale (f32 {1}), growth tracker (i32 {1}) and found_inf (f32 {1}) on the
  /// context's device. Throws InvalidArgument for bad options.
  explicit GradScaler(Context context, GradScalerOptions options = {});

  /// The gradient to start the backward from: a tensor of `loss`'s dims and dtype holding the
  /// current scale (d (scale * loss) / d loss), on the device; the caller hands it to the loss's
  /// backward. Dynamic scaling computes it on the device each call (the fill and unscale ops:
  /// the scale is a device value); a static scale (or a disabled scaler: ones) gives the same
  /// tensor every call for the same dims and dtype, filled once: do not write into it.
  Tensor loss_gradient(const Tensor& loss);
  /// Divides the gradients of `optimizer`'s parameters by the scale in place and records whether
  /// any is inf / NaN (torch's unscale_).
  void unscale_(Optimizer& optimizer);
  /// The optimizer step, skipped on the device when a gradient is inf / NaN. Without an
  /// unscale_ before it, one check-only pass over the gradients finds inf / NaN and the
  /// optimizer op divides by the scale itself (the fused path of torch's GradScaler).
  void step(Optimizer& optimizer);
  /// Ends the iteration: dynamic scaling backs off or grows the scale (the update_scale op).
  void update();
  /// The current scale, read on the host (a synchronisation: for logging).
  float get_scale() const;
  /// The device scalars.
  Tensor& scale() { return scale_; }
  Tensor& found_inf() { return found_inf_; }
  Tensor& growth_tracker() { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }

 private:
  enum class State : std::uint8_t { unscaled, stepped };
  struct Entry {
    Optimizer* optimizer;
    State state;
  };
  struct Constant {
    Dims dims;
    DType dtype;
    Tensor tensor;
  };
  Entry* entry(Optimizer& optimizer);
  void check_gradients(Optimizer& optimizer, bool from_scale);

  Context context_;
  GradScalerOptions options_;
  Tensor scale_, growth_tracker_, found_inf_, one_, seed_found_inf_;
  std::vector<Entry> entries_;       // the optimizers touched since the last update()
  std::vector<Constant> constants_;  // loss_gradient's tensors of a static or disabled scaler
};

}  // namespace dnnx::nn
