#pragma once
/// \file
/// Optimizer steps and loss scaling as ops, each applied to many tensors in one call (multi-tensor,
/// as PyTorch's foreach and fused optimizers): `sgd` (torch.optim.SGD), `adam` (torch.optim.Adam,
/// and torch.optim.AdamW with decoupled_weight_decay), and GradScaler's two device operations,
/// `unscale` (torch._amp_foreach_non_finite_check_and_unscale_) and `update_scale`
/// (torch._amp_update_scale_). docs/ops/optim.md has the formulas.
///
/// Note [optimizer desc and hyperparameters]
/// A desc holds what shapes the computation: the tensors' sizes and dtype and the flags that
/// change which terms run or which tensors exist (momentum buffers, nesterov, amsgrad, maximize,
/// decoupled weight decay, master weights, grad_scale and found_inf given). The hyperparameters'
/// VALUES (learning rate, momentum, betas, eps, weight decay, the scaler's factors) are arguments
/// of each call (SgdHyper, AdamHyper, UpdateScaleHyper): a learning-rate schedule changes them on
/// every step without a new desc, so it never selects again nor misses the choice cache.
///
/// Note [optimizer step count]
/// torch.optim keeps a step count per parameter (for SGD, whether the momentum buffer exists yet).
/// Here one f32 device scalar `step` ({1}) serves a call's whole group of tensors: the op adds 1 to
/// it before updating, unless found_inf is given and nonzero, and the update reads the new value:
/// Adam's bias corrections use it, SGD's first step (step becomes 1) sets the momentum buffer to
/// the gradient as torch does. A step skipped for found_inf thus leaves the count, the parameters
/// and the state as they were without the host ever reading found_inf (PyTorch's fused Adam adds
/// found_inf back to its device step tensors for the same effect). f32 counts exactly up to 2^24.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dnnx {

/// What one SGD step over a group of parameters computes (torch.optim.SGD), per element:
///   g = grad / grad_scale (when given); g = -g when maximize; g += weight_decay * p
///   with momentum: buf = (step == 1) ? g : momentum * buf + (1 - dampening) * g
///                  g = nesterov ? g + momentum * buf : buf
///   p -= lr * g
/// p is the f32 master copy when master_weights (the parameter receives it rounded to dtype),
/// else the parameter itself, computed in f32 (f64 on the reference backend). The whole step
/// (parameters, buffers, step count) is skipped when found_inf is given and nonzero.
struct SgdDesc {
  std::vector<Dims> shapes;     ///< dims of each parameter (and of its grad, master, buffer)
  DType dtype = DType::f32;     ///< of params and grads (f32, f16, bf16); state and master are f32
  bool master_weights = false;  ///< an f32 master copy of each parameter is updated
  bool momentum = false;        ///< momentum buffers exist: the call's momentum must be > 0
  bool nesterov = false;        ///< Nesterov momentum (needs momentum; dampening must be 0)
  bool maximize = false;        ///< ascend the gradient
  bool grad_scale = false;      ///< a grad_scale scalar divides every gradient
  bool found_inf = false;       ///< a found_inf scalar skips the step when nonzero

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// Elements of all parameters together.
  std::int64_t numel() const;
  /// `dnnx profile sgd --sizes 64x3x7x7,64 --dtype f32 [--master-weights] [--momentum] ...`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const SgdDesc&) const = default;
};
std::ostream& operator<<(std::ostream& out, const SgdDesc& desc);

/// The values of one SGD call (Note [optimizer desc and hyperparameters]).
struct SgdHyper {
  double lr = 0.01;           ///< learning rate (finite, >= 0)
  double momentum = 0.0;      ///< > 0 exactly when the desc has momentum
  double dampening = 0.0;     ///< finite; 0 with nesterov
  double weight_decay = 0.0;  ///< L2 penalty (finite, >= 0)
};

/// The tensors of one SGD call; every list has one entry per desc.shapes entry, in order, each
/// dense row-major of those dims on the context's device. Spans of tensors held by the caller.
struct SgdTensors {
  std::span<Tensor> params;            ///< desc.dtype; updated
  std::span<const Tensor> grads;       ///< desc.dtype; read only
  std::span<Tensor> master;            ///< f32, when desc.master_weights (else empty)
  std::span<Tensor> momentum_buffers;  ///< f32, when desc.momentum (else empty)
  Tensor* step = nullptr;              ///< f32 {1} (Note [optimizer step count])
  const Tensor* grad_scale = nullptr;  ///< f32 {1}, when desc.grad_scale
  const Tensor* found_inf = nullptr;   ///< f32 {1}, when desc.found_inf
};

/// One SGD step on every tensor of `tensors`. Outputs (params, master, buffers, step) must not
/// overlap each other or the inputs. Returns the choice that ran.
std::shared_ptr<const Choice> sgd_step(Context& context, const SgdDesc& desc, const SgdHyper& hyper,
                                       const SgdTensors& tensors);
/// Every candidate of the context's backend, nothing run.
std::vector<AlgoInfo> sgd_list(Context& context, const SgdDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates on scratch tensors; cached).
std::shared_ptr<const Choice> sgd_select(Context& context, const SgdDesc& desc,
                                         Direction direction);
/// Times every candidate on scratch tensors.
ProfileResult sgd_profile(Context& context, const SgdDesc& desc, Direction direction);

/// What one Adam step computes (torch.optim.Adam; torch.optim.AdamW when
/// decoupled_weight_decay), per element, with t the step count after the increment:
///   g = grad / grad_scale (when given); g = -g when maximize
///   decoupled: p *= 1 - lr * weight_decay      else: g += weight_decay * p
///   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
///   amsgrad: v_max = max(v_max, v), used for v below
///   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// p is the f32 master copy when master_weights. m (exp_avg), v (exp_avg_sq) and v_max
/// (max_exp_avg_sq) are f32. Skipped entirely when found_inf is given and nonzero.
struct AdamDesc {
  std::vector<Dims> shapes;             ///< dims of each parameter
  DType dtype = DType::f32;             ///< of params and grads (f32, f16, bf16)
  bool master_weights = false;          ///< an f32 master copy of each parameter is updated
  bool amsgrad = false;                 ///< keep and use max_exp_avg_sq
  bool decoupled_weight_decay = false;  ///< AdamW: decay the parameter, not the gradient
  bool maximize = false;                ///< ascend the gradient
  bool grad_scale = false;              ///< a grad_scale scalar divides every gradient
  bool found_inf = false;               ///< a found_inf scalar skips the step when nonzero

  /// AdamW's desc (decoupled_weight_decay set).
  static AdamDesc adamw(std::vector<Dims> shapes, DType dtype = DType::f32);

  void validate() const;
  std::int64_t numel() const;
  /// `dnnx profile adam --sizes ... [--decoupled-weight-decay] [--amsgrad] ...`.
  std::string repro(Direction direction = Direction::fwd) const;
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const AdamDesc&) const = default;
};
std::ostream& operator<<(std::ostream& out, const AdamDesc& desc);

/// The values of one Adam call (Note [optimizer desc and hyperparameters]).
struct AdamHyper {
  double lr = 1e-3;           ///< learning rate (finite, >= 0)
  double beta1 = 0.9;         ///< in [0, 1)
  double beta2 = 0.999;       ///< in [0, 1)
  double eps = 1e-8;          ///< finite, >= 0
  double weight_decay = 0.0;  ///< finite, >= 0
};

/// The tensors of one Adam call (one entry per desc.shapes entry in every list).
struct AdamTensors {
  std::span<Tensor> params;          ///< desc.dtype; updated
  std::span<const Tensor> grads;     ///< desc.dtype; read only
  std::span<Tensor> master;          ///< f32, when desc.master_weights
  std::span<Tensor> exp_avg;         ///< f32
  std::span<Tensor> exp_avg_sq;      ///< f32
  std::span<Tensor> max_exp_avg_sq;  ///< f32, when desc.amsgrad
  Tensor* step = nullptr;            ///< f32 {1} (Note [optimizer step count])
  const Tensor* grad_scale = nullptr;
  const Tensor* found_inf = nullptr;
};

std::shared_ptr<const Choice> adam_step(Context& context, const AdamDesc& desc,
                                        const AdamHyper& hyper, const AdamTensors& tensors);
std::vector<AlgoInfo> adam_list(Context& context, const AdamDesc& desc, Direction direction);
std::shared_ptr<const Choice> adam_select(Context& context, const AdamDesc& desc,
                                          Direction direction);
ProfileResult adam_profile(Context& context, const AdamDesc& desc, Direction direction);

/// torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale): every element
/// of every grad becomes grad * inv_scale (in f32, rounded to dtype; unchanged when inv_scale is
/// 1), and found_inf is set to 1 when any element was inf or NaN; it is not cleared otherwise,
/// unless reset_found_inf.
struct UnscaleDesc {
  std::vector<Dims> shapes;      ///< dims of each gradient
  DType dtype = DType::f32;      ///< of the gradients
  bool reset_found_inf = false;  ///< found_inf is set to 0 first: it ends 1 exactly when this
                                 ///< call saw a non-finite value
  bool from_scale = false;       ///< the scalar given is the loss scale: inv_scale is
                                 ///< (float)(1 / (double)scale), as GradScaler.unscale_ takes it

  void validate() const;
  std::int64_t numel() const;
  std::string repro(Direction direction = Direction::fwd) const;
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const UnscaleDesc&) const = default;
};
std::ostream& operator<<(std::ostream& out, const UnscaleDesc& desc);

/// grads (updated in place), found_inf f32 {1} (set), inv_scale f32 {1} (the scale when
/// desc.from_scale). Returns the choice that ran.
std::shared_ptr<const Choice> unscale(Context& context, const UnscaleDesc& desc,
                                      std::span<Tensor> grads, Tensor& found_inf,
                                      const Tensor& inv_scale);
std::vector<AlgoInfo> unscale_list(Context& context, const UnscaleDesc& desc, Direction direction);
std::shared_ptr<const Choice> unscale_select(Context& context, const UnscaleDesc& desc,
                                             Direction direction);
ProfileResult unscale_profile(Context& context, const UnscaleDesc& desc, Direction direction);

/// torch._amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
/// growth_interval), on device scalars:
///   found_inf != 0: scale *= backoff_factor; growth_tracker = 0
///   else: growth_tracker += 1; when it reaches growth_interval: scale *= growth_factor (kept
///         only when finite) and growth_tracker = 0
/// Nothing shapes it: the desc has no fields (every call has the same key).
struct UpdateScaleDesc {
  void validate() const;
  std::string repro(Direction direction = Direction::fwd) const;
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const UpdateScaleDesc&) const = default;
};
std::ostream& operator<<(std::ostream& out, const UpdateScaleDesc& desc);

/// The values of one update_scale call (GradScaler's defaults).
struct UpdateScaleHyper {
  double growth_factor = 2.0;           ///< > 1, finite
  double backoff_factor = 0.5;          ///< in (0, 1)
  std::int64_t growth_interval = 2000;  ///< >= 1, fits in 32 bits
};

/// scale f32 {1}, growth_tracker i32 {1} (both updated), found_inf f32 {1}.
std::shared_ptr<const Choice> update_scale(Context& context, const UpdateScaleDesc& desc,
                                           const UpdateScaleHyper& hyper, Tensor& scale,
                                           Tensor& growth_tracker, const Tensor& found_inf);
std::vector<AlgoInfo> update_scale_list(Context& context, const UpdateScaleDesc& desc,
                                        Direction direction);
std::shared_ptr<const Choice> update_scale_select(Context& context, const UpdateScaleDesc& desc,
                                                  Direction direction);
ProfileResult update_scale_profile(Context& context, const UpdateScaleDesc& desc,
                                   Direction direction);

/// The parameters of torchvision's ResNet-50 in state_dict order (convolution weights, batch-norm
/// weights and biases, the classifier's weight and bias): 161 tensors, 25,557,032 elements. The
/// shape list of the optimizer benchmarks and of `--model resnet50` in the CLI.
std::vector<Dims> resnet50_parameter_shapes();

/// Dynamic loss scaling on the device, as torch.cuda.amp.GradScaler: per step, backward of
/// loss * scale, then unscale(grads) (found_inf reset, then set when a gradient is not finite;
/// grads divided by the scale), the optimizer step given found_inf() (skipped on the device when
/// set), then update() (scale backed off or grown). No call reads a device value on the host.
/// For a static scale, never call update(). Holds the scale (f32 {1}), the growth tracker
/// (i32 {1}) and found_inf (f32 {1}) on the context's device.
class GradScaler {
 public:
  /// Makes the scalars on the context's device (one copy each); the scale starts at
  /// `init_scale`.
  explicit GradScaler(Context& context, float init_scale = 65536.0f, UpdateScaleHyper hyper = {});

  /// unscale with reset_found_inf and from_scale on `grads` (of `dtype`).
  void unscale(Context& context, std::span<Tensor> grads, DType dtype);
  /// update_scale(scale, growth_tracker, found_inf) with the scaler's hyperparameters.
  void update(Context& context);

  Tensor& scale() { return scale_; }
  Tensor& found_inf() { return found_inf_; }
  Tensor& growth_tracker() { return growth_tracker_; }
  /// The current scale, copied to the host (a synchronisation: for logging, not per step).
  float scale_value() const;

 private:
  UpdateScaleHyper hyper_;
  Tensor scale_, growth_tracker_, found_inf_;
};

}  // namespace dnnx
