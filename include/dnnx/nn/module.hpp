#pragma once
/// \file
/// The base of every network module: named parameters (with their gradients and f32 master
/// copies), buffers, children, train / eval mode, explicit forward and backward, PyTorch's
/// state_dict key names, a printed tree as PyTorch's repr, and the per-layer, per-direction
/// algorithm policies and choices of the op a layer runs.
///
/// Note [explicit backward]
/// There is no autograd: a module's forward(x) keeps what its backward needs (its input, its
/// batch statistics, its pooling indices ...) and backward(diff_y) uses it, adds the parameter
/// gradients into Parameter::grad and returns the gradient w.r.t. the input. Calls pair up: one
/// backward per forward, in reverse order across modules (containers do that). Gradients
/// accumulate over backward calls until zero_grad(), as in PyTorch.
///
/// Note [eval mode and gradients]
/// As in PyTorch, train() / eval() change what batch norm and dropout compute, not whether a
/// backward may follow: an eval-mode forward keeps what its backward needs too, so a model in eval
/// mode can be fine-tuned (frozen batch norm: its backward uses the running statistics; dropout
/// is the identity both ways). Inference that wants no backward says so with an nn::NoGradGuard
/// (torch.no_grad(), libtorch's torch::NoGradGuard): while one is alive on the thread, forwards
/// in either mode keep nothing (no inputs, no max-pooling indices) and a backward after them
/// throws InvalidArgument. The recurrent layers keep nothing in eval mode whatever the guard
/// (their eval forward is the rnn op's inference call).
///
/// Note [nn layouts]
/// The memory format follows the input, as in PyTorch: a module given a dense channels_last
/// (NHWC) tensor runs its op in channels_last and returns channels_last; given channels_first it
/// stays channels_first (a tensor dense in both, such as N x C x 1 x 1, counts as
/// channels_first, except for a convolution, which takes its weights' layout then). backward's
/// diff_dst must be dense in the layout of the forward's output (InvalidArgument otherwise) and
/// the gradient it returns has the input's layout. Linear, RNN and losses on rank-2 tensors are
/// row-major anyway; Linear and the RNNs refuse a channels_last input of rank 3 or more.
/// Convolution weights are the exception to "follows the input": dnnx's conv op takes src,
/// weights and dst in one layout (OHWI weights for NHWC data), so the weights are stored in the
/// layout the model runs in, chosen once with nn::to_layout(model, layout) (PyTorch's
/// model.to(memory_format=torch.channels_last)) before the optimizer is built; a convolution
/// given an input of the other layout throws InvalidArgument saying so. The parameters keep
/// their logical dims O x I x kH x kW in either layout, so state_dict(), load_state_dict() and
/// safetensors checkpoints are PyTorch's OIHW order whatever the storage order (Tensor's
/// logical order), and the optimizers update them as flat arrays (every tensor of a parameter
/// shares its layout).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/random.hpp>
#include <dnnx/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::nn {

/// One learnable tensor of a module.
struct Parameter {
  /// The values, in the dtype the module computes in (f32, f16 or bf16; batch-norm scale and
  /// shift are always f32), on the module's device.
  Tensor value;
  /// The gradient: value's dims, dtype and device. Backward adds into it (Note [explicit
  /// backward]).
  Tensor grad;
  /// The f32 master copy the optimizer updates when `value` is f16 or bf16 (nnabla's
  /// type_config half, PyTorch's master weights); a null Tensor when value is f32.
  Tensor master;
  /// False after zero_grad(): grad holds zeros, and the next backward may write it instead of
  /// adding into it.
  bool grad_live = false;
  /// True after zero_grad(/*set_to_none=*/true) until a backward writes grad: grad holds
  /// anything (PyTorch's grad of None). What reads gradients next — an optimizer's step, a
  /// GradScaler's check — zeroes such a grad first (Note [gradients set to none]).
  bool grad_none = false;
};

/// (name, tensor) pairs in PyTorch's state_dict order and key names.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// A network module (torch::nn::Module without autograd; Note [explicit backward]).
class Module {
 public:
  /// A module that runs on `context` (a copy: the module's own TuneOptions start as the
  /// context's). `op` is the op whose policies policy() and choice() address (none for
  /// containers and layers that run no op).
  explicit Module(Context context, std::optional<OpKind> op = std::nullopt);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// PyTorch's class name: "Conv2d", "BatchNorm2d", "Sequential", ...
  virtual std::string type_name() const = 0;
  /// The text between the parentheses of the printed module (PyTorch's extra_repr).
  virtual std::string extra_repr() const { return {}; }

  /// The output for `src`; keeps what backward needs unless an nn::NoGradGuard is alive (Note
  /// [eval mode and gradients]).
  virtual Tensor forward(const Tensor& src) = 0;
  /// The gradient w.r.t. the last forward's input given the gradient w.r.t. its output; adds the
  /// parameter gradients. Throws InvalidArgument when no forward that kept its tensors ran since
  /// the last backward, or when diff_dst does not have the output's dims and dtype.
  virtual Tensor backward(const Tensor& diff_dst) = 0;
  Tensor operator()(const Tensor& src) { return forward(src); }

  /// Sets training (true) or inference (false) mode on this module and every descendant.
  void train(bool on = true);
  /// train(false).
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Every gradient of this module and its descendants to zero. With `set_to_none` nothing is
  /// written: the gradients become undefined until the next backward writes them
  /// (Parameter::grad_none; Note [gradients set to none]), which saves one fill per parameter
  /// per step.
  void zero_grad(bool set_to_none = false);

  /// Parameters of this module and its descendants, depth first in registration order, with
  /// PyTorch's dotted names ("0.weight", "layer1.0.conv1.weight").
  std::vector<std::pair<std::string, Parameter*>> named_parameters();
  /// The same without names.
  std::vector<Parameter*> parameters();
  /// Buffers (batch norm's running_mean, running_var, num_batches_tracked), named likewise.
  std::vector<std::pair<std::string, Tensor*>> named_buffers();
  /// Parameter values and buffers in PyTorch's state_dict order (per module: its parameters,
  /// then its buffers, then its children). Tensors share the module's storage (no copy).
  StateDict state_dict();
  /// Copies `state` into the parameters and buffers (values of another dtype are converted;
  /// master copies are refreshed). Strict: every key must exist and every module key must be
  /// given, with the same dims; otherwise throws InvalidArgument listing the missing keys, the
  /// unexpected keys and the keys of another shape, and changes nothing.
  void load_state_dict(const StateDict& state);

  /// Direct children in registration order.
  std::vector<std::pair<std::string, Module*>> named_children();
  /// This module (name "") and every descendant with dotted names, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The printed tree, as PyTorch's repr(module).
  std::string repr() const;

  /// The context the module's ops run on (its own copy: change its TuneOptions freely).
  Context& context() { return context_; }
  const Context& context() const { return context_; }
  /// The module's selection options (workspace limit, determinism, every policy).
  TuneOptions& tune() { return context_.tune(); }
  /// The op whose policies policy() and choice() address; nullopt for modules that run none.
  std::optional<OpKind> op() const { return op_; }
  /// The policy of op() for `direction`, e.g.
  /// `conv.policy(Direction::bwd_weights) = AlgoPolicy::fixed("onednn:...")`. Throws
  /// InvalidArgument when the module runs no op or the op has no such direction.
  AlgoPolicy& policy(Direction direction);
  const AlgoPolicy& policy(Direction direction) const;
  /// What ran last for `direction` (id, time when timed, workspace, the policy that chose it);
  /// null before the first call of that direction.
  const std::shared_ptr<const Choice>& choice(Direction direction) const;
  /// The choice a heuristic policy makes for the desc `direction` last ran (null before). Used
  /// by report() to compare with what runs.
  virtual std::shared_ptr<const Choice> heuristic_choice(Direction direction);
  /// A profile of every candidate of the desc `direction` last ran (nullopt before).
  virtual std::optional<ProfileResult> profile(Direction direction);

  /// Whether forward writes its result over its input (an in-place activation): containers use
  /// it to refuse graphs where that would destroy a tensor another branch still reads.
  virtual bool modifies_input() const { return false; }

  /// Moves this module's own parameters and buffers (not its children's) to `context`'s device
  /// and, for modules that compute in the type config's dtype, to its dtype (f16 and bf16 keep
  /// an f32 master copy), and makes `context` the module's context. The module's TuneOptions
  /// are kept when the backend stays the same, else the new context's are taken. nn::convert
  /// applies it to a tree.
  virtual void to(const Context& context);
  /// Stores this module's own parameters of rank 3 or more (convolution weights: value, master
  /// copy, gradient) dense in `layout` (Note [nn layouts]); nn::to_layout applies it to a tree.
  virtual void to_layout(Layout layout);

 protected:
  /// Registers a parameter initialised to `initial` (f32, on the context's device): its value
  /// is `initial` converted to parameter_dtype(context()), keeping `initial` as the master copy
  /// when that is f16 or bf16; grad is allocated as zeros.
  Parameter& register_parameter(std::string name, Tensor initial);
  /// Registers a buffer.
  Tensor& register_buffer(std::string name, Tensor value);
  /// Registers a child; returns it.
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  void add_child(std::string name, std::shared_ptr<Module> module);
  /// The parameter registered as `name` (Internal error when none).
  Parameter& parameter(const std::string& name);
  /// The buffer registered as `name` (Internal error when none).
  Tensor& buffer(const std::string& name);

  /// The dtype this module's weights take under `context` (the type config's; batch norm: f32).
  virtual DType parameter_dtype(const Context& context) const { return context.dtype(); }
  /// Called after to() and load_state_dict() changed the module's tensors.
  virtual void on_tensors_changed() {}
  /// Called by load_state_dict with the buffer values given; the default copies them.
  virtual void load_buffer(const std::string& name, const Tensor& value, Tensor& target);
  /// Called by named_buffers() and state_dict() before they hand the buffers out (batch norm
  /// writes its host-side batch counter into num_batches_tracked).
  virtual void refresh_buffers() {}

  /// The context an op call of `direction` on the desc whose key is `desc_key` runs under:
  /// context() itself, or — when op()'s policy for `direction` is Reuse::once and a choice is
  /// held — a copy whose policy is fixed to the held choice, provided that choice is still
  /// listed, supported and admissible for the new desc (`list` gives the candidates; not called
  /// for the desc of the held choice). Pair it with record().
  Context& call_context(Direction direction, const std::string& desc_key,
                        const std::function<std::vector<AlgoInfo>(Context&)>& list);
  /// Stores the choice an op call of `direction` on `desc_key` returned.
  void record(Direction direction, std::shared_ptr<const Choice> choice, std::string desc_key);

  /// Throws InvalidArgument "<type_name>.backward called without a forward" unless `saved` (what
  /// the forward kept) holds a tensor.
  void require_forward(const Tensor& saved) const;
  /// Throws InvalidArgument unless diff_dst has `dims` and `dtype` and is dense in `layout` (the
  /// forward output's: Note [nn layouts]).
  void check_diff(const Tensor& diff_dst, const Dims& dims, DType dtype,
                  Layout layout = Layout::channels_first) const;

 private:
  struct Slot {
    std::shared_ptr<const Choice> choice;
    std::string desc_key;
  };
  Context context_;
  Context pinned_;
  std::optional<OpKind> op_;
  bool training_ = true;
  std::vector<std::pair<std::string, std::unique_ptr<Parameter>>> parameters_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::array<Slot, direction_count> slots_;

  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Parameter*>>& out);
  void collect_buffers(const std::string& prefix,
                       std::vector<std::pair<std::string, Tensor*>>& out);
  void collect_state(const std::string& prefix, StateDict& out);
  void collect_modules(const std::string& prefix,
                       std::vector<std::pair<std::string, Module*>>& out);
};

/// While alive, forwards on this thread keep nothing for backward (Note [eval mode and
/// gradients]); guards nest, the destructor restores the previous state. torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// False while an nn::NoGradGuard is alive on this thread: torch.is_grad_enabled().
bool is_grad_enabled();

/// The generator the layers' initialisers draw from (torch's default generator); not
/// thread-safe: build models from one thread.
Generator& default_generator();
/// Restarts default_generator() at `seed` (torch.manual_seed).
void manual_seed(std::uint64_t seed);

}  // namespace dnnx::nn
