// dnnx._torch_ext: the converted layers' calls of dnnx.torch in C++, against the installed
// libtorch (docs/python.md, "Layers in C++"). Built only where PyTorch's headers are found
// (python/CMakeLists.txt); without it, and for every case it declines, dnnx.torch runs the same
// computation through Python autograd functions.
//
// Note [layers in C++]
// A converted layer called from Python costs, through torch.autograd.Function, about 7 us to apply
// and about 20 us in the backward engine on a fast host (3x that on a slow one), on top of the
// op: a converted ResNet-50 step runs ~700 such calls and is bound by them. Here a layer is a C++
// object (Layer, kept on the module) whose call does what the Python path does, in the same
// order, without Python in between:
// - PyTorch's tensors are read as at::Tensor; autocast casts as it does for PyTorch's own layers
//   (convolution and linear to its dtype, softmax and cross-entropy to f32), parameters outside
//   autograd (Note [parameter casts]);
// - in-place activations write over their input (Note [in-place activations]);
// - the inputs are made dense in the layout their strides suggest (channels_last stays so);
// - the desc is kept per layer, keyed by the tensors' sizes, strides and dtypes and the layer's
//   settings, and built by the Python layer's desc_for on a miss (one source of truth);
// - the context is the one the Python path resolves (dnnx.torch._layer_context), kept per device
//   and stream while the options it was made from stay the same (Note [kept layer contexts]);
// - outputs come from PyTorch's allocator; the op runs with the GIL released;
// - when autograd records the call, a C++ autograd node (torch::autograd::Node) holds the saved
//   tensors and runs the backward directions, without the GIL.
// A case it does not take (a dtype or device dnnx does not handle, a CUDA tensor where this module
// was built without CUDA, a functorch or __torch_dispatch__ tensor, a torch.jit.trace) returns
// None, and the caller runs the Python path, which handles it or raises the error that names the
// problem.

#include <ATen/autocast_mode.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/version.h>
#if DNNX_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "bindings.hpp"

#include <atomic>
#include <mutex>
#include <variant>

namespace dnnx::python {
namespace {

namespace autograd = torch::autograd;

// --- what the Python layer hands over once (set_hooks) -----------------------------------------

struct Hooks {
  nb::object layer_context;  // dnnx.torch._layer_context(tensor, tune) -> Context
  nb::object current;        // dnnx._context._current (the ContextVar of `with ctx:` blocks)
  nb::object globals;        // dnnx._context.__dict__ (its _default)
  nb::object default_name;   // "_default"
  nb::object descs;          // op name -> desc maker(dense tensors..., settings[, extra])
};

Hooks* hooks = nullptr;  // leaked: the interpreter may be finalising when statics are destroyed

// --- tensors ------------------------------------------------------------------------------------

bool unpack(nb::handle object, at::Tensor& tensor) {
  if (!THPVariable_Check(object.ptr())) return false;
  tensor = THPVariable_Unpack(object.ptr());
  return true;
}

std::optional<DType> dtype_of(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    default: return std::nullopt;
  }
}

/// Whether dnnx takes `tensor` here: a plain strided tensor (no functorch wrapper, no
/// __torch_dispatch__ subclass, no functionalization, no forward-mode tangent, none of which the
/// op's raw pointers would honour) of a dtype it handles, on the host or, where this module was
/// built with CUDA, on a GPU.
bool takes(const at::Tensor& tensor) {
  if (!tensor.defined()) return true;
  if (tensor.layout() != at::kStrided || !dtype_of(tensor) || tensor.dim() > Dims::max_rank ||
      tensor.is_conj() || tensor.is_neg())
    return false;
  const c10::DispatchKeySet keys = tensor.key_set();
  for (c10::DispatchKey key : {c10::DispatchKey::Python, c10::DispatchKey::FuncTorchBatched,
                               c10::DispatchKey::FuncTorchGradWrapper,
                               c10::DispatchKey::Functionalize})
    if (keys.has(key)) return false;
  if (tensor._fw_grad(0).defined()) return false;
  if (tensor.device().is_cpu()) return true;
#if DNNX_TORCH_CUDA
  return tensor.device().is_cuda();
#else
  return false;
#endif
}

Dims dims_of(at::IntArrayRef values) {
  return Dims(std::span<const std::int64_t>(values.data(), values.size()));
}

/// A dnnx view of `tensor` (named `name` in errors), its memory as it is.
Tensor view(const at::Tensor& tensor, std::string_view name) {
  const Dims dims = dims_of(tensor.sizes());
  const Device device =
      tensor.device().is_cuda() ? Device::cuda(tensor.get_device()) : Device::cpu();
  try {
    return Tensor::view(tensor.data_ptr(), dims, *dtype_of(tensor),
                        normalised_strides(dims, dims_of(tensor.strides())), device);
  } catch (const Error& error) {
    throw Error(error.kind(), std::string(name) + ": " + error.message());
  }
}

std::optional<Tensor> view_if(const at::Tensor& tensor, std::string_view name) {
  if (!tensor.defined()) return std::nullopt;
  return view(tensor, name);
}

Tensor* pointer(std::optional<Tensor>& tensor) { return tensor ? &*tensor : nullptr; }

/// The memory format dnnx.torch._dense picks: channels_last when the tensor is dense that way and
/// not in the contiguous format, else contiguous.
at::MemoryFormat format_of(const at::Tensor& tensor) {
  if (tensor.dim() == 4 && !tensor.is_contiguous() &&
      tensor.is_contiguous(at::MemoryFormat::ChannelsLast))
    return at::MemoryFormat::ChannelsLast;
  if (tensor.dim() == 5 && !tensor.is_contiguous() &&
      tensor.is_contiguous(at::MemoryFormat::ChannelsLast3d))
    return at::MemoryFormat::ChannelsLast3d;
  return at::MemoryFormat::Contiguous;
}

/// The memory format of a tensor of `rank` dims dense in `layout`.
at::MemoryFormat format_for(Layout layout, int rank) {
  if (layout == Layout::channels_last && rank == 4) return at::MemoryFormat::ChannelsLast;
  if (layout == Layout::channels_last && rank == 5) return at::MemoryFormat::ChannelsLast3d;
  return at::MemoryFormat::Contiguous;
}

/// A new tensor of `dims` dense in `layout` (channels_last for 4-D and 5-D nhwc), as
/// dnnx.torch._empty makes it.
at::Tensor empty(const Dims& dims, Layout layout, const at::TensorOptions& options) {
  return at::empty(std::vector<std::int64_t>(dims.begin(), dims.end()),
                   options.memory_format(format_for(layout, dims.rank())));
}

nb::object wrap(const at::Tensor& tensor) { return nb::steal(THPVariable_Wrap(tensor)); }

/// The CUDA stream PyTorch queues work on for `tensor`'s device; null for host tensors.
void* stream_of(const at::Tensor& tensor) {
#if DNNX_TORCH_CUDA
  if (tensor.device().is_cuda())
    return c10::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
#endif
  (void)tensor;
  return nullptr;
}

// --- autocast -----------------------------------------------------------------------------------

bool autocast_on(c10::DeviceType type, at::ScalarType& dtype) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (!at::autocast::is_autocast_enabled(type)) return false;
  dtype = at::autocast::get_autocast_dtype(type);
  return true;
#else
  if (type == c10::DeviceType::CUDA) {
    if (!at::autocast::is_enabled()) return false;
    dtype = at::autocast::get_autocast_gpu_dtype();
    return true;
  }
  if (!at::autocast::is_cpu_enabled()) return false;
  dtype = at::autocast::get_autocast_cpu_dtype();
  return true;
#endif
}

/// The tensors as autocast hands them to PyTorch's own layers: floating-point ones in the
/// autocast dtype (`lower`: convolution, linear) or in f32 (softmax, cross-entropy), through
/// autocast's cache, which autograd records.
void autocast(std::initializer_list<at::Tensor*> tensors, bool lower) {
  const c10::DeviceType type = (*tensors.begin())->device().type();
  if (type != c10::DeviceType::CUDA && type != c10::DeviceType::CPU) return;
  at::ScalarType dtype;
  if (!autocast_on(type, dtype)) return;
  if (!lower) dtype = at::kFloat;
  for (at::Tensor* tensor : tensors)
    if (tensor->defined() && tensor->is_floating_point() && tensor->scalar_type() != dtype)
      *tensor = at::autocast::cached_cast(dtype, *tensor, type);
}

// Note [parameter casts]
// Under autocast PyTorch's convolution and linear layers take their weight and bias through
// autocast's cast, which autograd records: one more node per parameter in every step's graph,
// which the engine runs in the backward to take the gradient back to the parameter's dtype. A
// converted ResNet-50 step is bound by such host work (docs/benchmarks.md, "Converted ResNet-50
// training step from Python"). So the C++ layers cast their parameters outside autograd (the
// same cast kernel, once per call where autocast's cache casts once per autocast region: the
// same for a layer called once a step) and their own node casts the gradients back
// (DnnxNode::to_dtype_of): the same kernels, without the cast nodes.

/// `tensors` (a layer's parameters) in autocast's lower dtype for `device`, cast outside
/// autograd (Note [parameter casts]); unchanged when autocast is off.
void autocast_params(c10::DeviceType device, std::initializer_list<at::Tensor*> tensors) {
  if (device != c10::DeviceType::CUDA && device != c10::DeviceType::CPU) return;
  at::ScalarType dtype;
  if (!autocast_on(device, dtype)) return;
  at::NoGradGuard no_grad;
  // The tensors autocast's own cast takes: floating point but not f64.
  for (at::Tensor* tensor : tensors)
    if (tensor->defined() && tensor->is_floating_point() && tensor->scalar_type() != at::kDouble &&
        tensor->scalar_type() != dtype)
      *tensor = tensor->to(dtype);
}

bool records(std::initializer_list<const at::Tensor*> tensors) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* tensor : tensors)
    if (tensor->defined() && tensor->requires_grad()) return true;
  return false;
}

// --- errors -------------------------------------------------------------------------------------

/// A dnnx::Error raised in a backward (an autograd thread, no GIL): as the Python exception the
/// Python path raises, which the engine hands to the caller of backward() as it is.
[[noreturn]] void throw_in_backward(const Error& error) {
  nb::gil_scoped_acquire gil;
  set_python_error(error);
  python_error failure;
  failure.persist();
  throw failure;
}

// --- what a layer ran, for dnnx.torch.report --------------------------------------------------

using AnyDesc =
    std::variant<std::shared_ptr<const ConvDesc>, std::shared_ptr<const BatchNormDesc>,
                 std::shared_ptr<const PoolDesc>, std::shared_ptr<const ActivationDesc>,
                 std::shared_ptr<const MatmulDesc>, std::shared_ptr<const SoftmaxDesc>,
                 std::shared_ptr<const CrossEntropyDesc>, std::shared_ptr<const DropoutDesc>>;

/// Shared by a layer and the autograd nodes of its calls (which may outlive it); C++ only, as a
/// node is destroyed on whatever thread drops it.
struct Record {
  enum Direction { fwd, bwd_data, bwd_weights, fwd_training, directions };
  static constexpr const char* names[directions] = {"fwd", "bwd_data", "bwd_weights",
                                                    "fwd_training"};

  /// Keeps what `direction` ran; a call that ran what the previous one did takes no lock.
  template <typename Desc>
  void add(Direction direction, const std::shared_ptr<const Desc>& desc,
           const std::shared_ptr<Context>& context) {
    Slot& slot = slots[direction];
    const void* ran = desc.get();
    if (slot.desc.load(std::memory_order_acquire) == ran &&
        slot.context.load(std::memory_order_acquire) == context.get())
      return;
    std::lock_guard<std::mutex> lock(mutex);
    slot.kept_desc = desc;
    slot.kept_context = context;
    slot.desc.store(ran, std::memory_order_release);
    slot.context.store(context.get(), std::memory_order_release);
  }

  struct Slot {
    std::atomic<const void*> desc{nullptr}, context{nullptr};  // what kept_* hold
    AnyDesc kept_desc;
    std::shared_ptr<Context> kept_context;
  };
  std::mutex mutex;
  Slot slots[directions];
};

// --- contexts -----------------------------------------------------------------------------------

// Note [kept layer contexts]
// The Python path resolves a call's context with dnnx.torch._layer_context: the enclosing
// `with ctx:` block's, else the default context's for the tensor's device, moved onto PyTorch's
// current stream, with the layer's own TuneOptions when it has them. Its result depends on that
// base context (which object, its options, its choice cache), the device, the stream and the
// layer's options. A layer keeps the context it got per device and stream, with a copy of those
// options, and takes it again while the same base context and layer options compare equal to the
// copies; anything else asks _layer_context again. The autograd node keeps the forward's
// context: the backward runs on it (on the backward's stream when that differs), with the options
// the forward ran under, as the Python path's backward runs under the forward's block (Note [the
// forward's block in the backward] in dnnx/torch.py).
struct KeptContext {
  int device = -1;  // -1: host
  void* stream = nullptr;
  nb::object base;  // the block's or the default context (identity)
  nb::object tune;  // the layer's TuneOptions object or None (identity)
  TuneOptions base_tune, layer_tune;
  std::shared_ptr<ChoiceCache> cache;
  std::shared_ptr<Context> context;
};

// TuneOptions' members in order, so that a member added there changes its size and fails the
// assertion below until same_for compares it.
struct TuneOptionsMembers {
  AlgoPolicy fwd, bwd_data, bwd_weights;
  decltype(TuneOptions::op_policies) op_policies;
  std::optional<std::size_t> workspace_limit;
  bool deterministic, fastest, verbose;
  int benchmark_limit, warmup_runs, timing_runs;
  double abandon_factor, variant_factor;
  bool time_naive, final_round;
  double final_loop_ms;
  int final_contenders;
  double host_tie, search_budget_ms, late_plan_share, energy_window_ms;
  int energy_repeats;
  bool profile_energy;
};
static_assert(sizeof(TuneOptionsMembers) == sizeof(TuneOptions),
              "TuneOptions changed: compare its new member in same_for");

/// Whether `a` and `b` select the same for `op`: every member but the other ops' policies, which
/// a call of `op` never reads (comparing them all took a tenth of a small call's host time).
bool same_for(OpKind op, const TuneOptions& a, const TuneOptions& b) {
  if (a.workspace_limit != b.workspace_limit || a.deterministic != b.deterministic ||
      a.fastest != b.fastest || a.verbose != b.verbose || a.benchmark_limit != b.benchmark_limit ||
      a.warmup_runs != b.warmup_runs || a.timing_runs != b.timing_runs ||
      a.abandon_factor != b.abandon_factor || a.variant_factor != b.variant_factor ||
      a.time_naive != b.time_naive || a.final_round != b.final_round ||
      a.final_loop_ms != b.final_loop_ms || a.final_contenders != b.final_contenders ||
      a.host_tie != b.host_tie || a.search_budget_ms != b.search_budget_ms ||
      a.late_plan_share != b.late_plan_share || a.energy_window_ms != b.energy_window_ms ||
      a.energy_repeats != b.energy_repeats || a.profile_energy != b.profile_energy)
    return false;
  if (op == OpKind::conv)
    return a.fwd == b.fwd && a.bwd_data == b.bwd_data && a.bwd_weights == b.bwd_weights;
  const auto row = static_cast<std::size_t>(op);
  return a.op_policies[row] == b.op_policies[row];
}

// --- descs --------------------------------------------------------------------------------------

template <typename Desc>
struct KeptDesc {
  std::vector<std::int64_t> key;  // a Key's values
  nb::object settings;
  std::shared_ptr<const Desc> desc;
};

/// A call's desc key: its tensors' dtypes, ranks, sizes and strides (a local of each call, so
/// that a layer shared by threads, as nn.DataParallel's replicas share it, keys every call by its
/// own tensors while another thread runs Python in between).
using Key = c10::SmallVector<std::int64_t, 40>;

void add_key(Key& key, const at::Tensor& tensor) {
  if (!tensor.defined()) {
    key.push_back(-1);
    return;
  }
  key.push_back(static_cast<std::int64_t>(tensor.scalar_type()));
  key.push_back(tensor.dim());
  for (std::int64_t size : tensor.sizes()) key.push_back(size);
  for (std::int64_t stride : tensor.strides()) key.push_back(stride);
}

// --- autograd nodes -----------------------------------------------------------------------------

/// What every node shares: the forward's desc, context and stream, the layer's record, and an
/// apply() that returns no gradients for an undefined one and raises dnnx errors as the Python
/// path does; backward() computes the `Outputs` input gradients from the output's.
template <typename Desc, int Outputs>
struct DnnxNode : autograd::Node {
  std::shared_ptr<const Desc> desc;
  std::shared_ptr<Context> context;
  void* stream = nullptr;
  std::shared_ptr<Record> record;

  void keep(std::shared_ptr<const Desc> kept_desc, std::shared_ptr<Context> kept_context,
            void* kept_stream, std::shared_ptr<Record> kept_record) {
    desc = std::move(kept_desc);
    context = std::move(kept_context);
    stream = kept_stream;
    record = std::move(kept_record);
  }

  autograd::variable_list apply(autograd::variable_list&& grads) override {
    autograd::variable_list out(Outputs);
    if (!grads[0].defined()) return out;
    try {
      // The engine records the backward only under create_graph=True; the gradients computed
      // here would be constants to it, and a higher-order gradient silently wrong.
      if (at::GradMode::is_enabled())
        throw Error(ErrorKind::Unsupported,
                    name() +
                        ": a dnnx layer's backward is not differentiable (create_graph=True); "
                        "exclude the layer from dnnx.torch.convert for higher-order gradients");
      backward(grads[0], out);
    } catch (const Error& error) {
      throw_in_backward(error);
    }
    return out;
  }

  virtual void backward(const at::Tensor& grad, autograd::variable_list& out) = 0;

  /// The context for a backward on `tensor`: the forward's, on the backward's stream.
  std::shared_ptr<Context> context_for(const at::Tensor& tensor) const {
    void* stream_now = stream_of(tensor);
    if (stream_now == stream) return context;
    // Note [the caller's default stream] (dnnx/_context.py): PyTorch's default stream is the
    // legacy default stream, handle 1 for the CUDA runtime.
    return std::make_shared<Context>(
        context->with_stream(stream_now ? stream_now : reinterpret_cast<void*>(1)));
  }

  /// `grad` dense in the forward's layout.
  static at::Tensor dense(const at::Tensor& grad, Layout layout) {
    return grad.contiguous(format_for(layout, static_cast<int>(grad.dim())));
  }

  /// A parameter's gradient in the parameter's own dtype (Note [parameter casts]).
  static void to_dtype_of(at::Tensor& gradient, at::ScalarType dtype) {
    if (gradient.defined() && gradient.scalar_type() != dtype) gradient = gradient.to(dtype);
  }
};

struct ConvBackward : DnnxNode<ConvDesc, 3> {
  autograd::SavedVariable src, weight;
  bool has_bias = false;
  at::ScalarType weight_dtype = at::kFloat, bias_dtype = at::kFloat;  // the parameters'

  std::string name() const override { return "DnnxConvBackward"; }
  void release_variables() override {
    src.reset_data();
    weight.reset_data();
  }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const at::Tensor s = src.unpack(shared_from_this()), w = weight.unpack(shared_from_this());
    const at::Tensor diff_dst = dense(grad, desc->layout);
    const auto ctx = context_for(diff_dst);
    const Tensor dd = view(diff_dst, "diff_dst");
    if (should_compute_output(0)) {
      out[0] = empty(desc->src_dims(), desc->layout, diff_dst.options());
      Tensor ds = view(out[0], "diff_src");
      conv_bwd_data(*ctx, *desc, dd, view(w, "weights"), ds);
      record->add(Record::bwd_data, desc, ctx);
    }
    if (should_compute_output(1) || should_compute_output(2)) {
      out[1] = empty(desc->weights_dims(), desc->layout, s.options());
      Tensor dw = view(out[1], "diff_weights");
      std::optional<Tensor> db;
      if (has_bias) {
        out[2] = empty(desc->bias_dims(), Layout::channels_first, s.options());
        db = view(out[2], "diff_bias");
      }
      conv_bwd_weights(*ctx, *desc, view(s, "src"), dd, dw, pointer(db));
      record->add(Record::bwd_weights, desc, ctx);
      to_dtype_of(out[1], weight_dtype);
      to_dtype_of(out[2], bias_dtype);
    }
  }
};

struct BatchNormBackward : DnnxNode<BatchNormDesc, 3> {
  autograd::SavedVariable src, weight, mean, inv_std;
  at::Tensor running_mean, running_var;  // inference: the running statistics as they were

  std::string name() const override { return "DnnxBatchNormBackward"; }
  void release_variables() override {
    src.reset_data();
    weight.reset_data();
    mean.reset_data();
    inv_std.reset_data();
    running_mean.reset();
    running_var.reset();
  }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const auto self = shared_from_this();
    const at::Tensor s = src.unpack(self), w = weight.unpack(self), m = mean.unpack(self),
                     v = inv_std.unpack(self);
    const at::Tensor diff_dst = dense(grad, desc->layout);
    const auto ctx = context_for(diff_dst);
    out[0] = empty(desc->dims, desc->layout, diff_dst.options());
    const at::TensorOptions params = s.options().dtype(at::kFloat);
    if (desc->affine) {
      out[1] = empty(desc->param_dims(), desc->layout, params);
      out[2] = empty(desc->param_dims(), desc->layout, params);
    }
    std::optional<Tensor> scale = view_if(w, "scale"), rm = view_if(running_mean, "running_mean"),
                          rv = view_if(running_var, "running_var"),
                          saved_mean = view_if(m, "saved_mean"),
                          saved_inv_std = view_if(v, "saved_inv_std"),
                          diff_scale = view_if(out[1], "diff_scale"),
                          diff_shift = view_if(out[2], "diff_shift");
    const BatchNormTensors tensors{pointer(scale),      nullptr,
                                   pointer(rm),         pointer(rv),
                                   pointer(saved_mean), pointer(saved_inv_std)};
    Tensor ds = view(out[0], "diff_src");
    batch_norm_bwd(*ctx, *desc, view(s, "src"), view(diff_dst, "diff_dst"), tensors, ds,
                   pointer(diff_scale), pointer(diff_shift));
    record->add(Record::bwd_data, desc, ctx);
  }
};

/// Pooling and activations: the backward reads the forward's input and output.
template <typename Desc>
struct SrcDstBackward : DnnxNode<Desc, 1> {
  autograd::SavedVariable src, dst;

  std::string name() const override {
    return std::is_same_v<Desc, PoolDesc> ? "DnnxPoolBackward" : "DnnxActivationBackward";
  }
  void release_variables() override {
    src.reset_data();
    dst.reset_data();
  }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const Desc& d = *this->desc;
    const auto self = this->shared_from_this();
    const at::Tensor forward_src = src.unpack(self), forward_dst = dst.unpack(self);
    const at::Tensor diff_dst = this->dense(grad, d.layout);
    const auto ctx = this->context_for(diff_dst);
    const Tensor dd = view(diff_dst, "diff_dst");
    if constexpr (std::is_same_v<Desc, PoolDesc>) {
      const Tensor s = view(forward_src, "src"), y = view(forward_dst, "dst");
      out[0] = empty(d.src_dims(), d.layout, diff_dst.options());
      Tensor ds = view(out[0], "diff_src");
      pool_bwd(*ctx, d, s, y, dd, ds);
    } else {
      // An in-place forward kept dst alone (ActivationSaved::dst).
      std::optional<Tensor> s = view_if(forward_src, "src"), y = view_if(forward_dst, "dst");
      out[0] = empty(d.dims, d.layout, diff_dst.options());
      Tensor ds = view(out[0], "diff_src");
      activation_bwd(*ctx, d, pointer(s), pointer(y), dd, ds);
    }
    this->record->add(Record::bwd_data, this->desc, ctx);
  }
};

/// F.linear: src (..., in) as rows (rows, in), weight (out, in), bias (out).
struct LinearBackward : DnnxNode<MatmulDesc, 3> {
  autograd::SavedVariable rows, weight;
  std::vector<std::int64_t> src_sizes;
  at::ScalarType weight_dtype = at::kFloat, bias_dtype = at::kFloat;  // the parameters'

  std::string name() const override { return "DnnxLinearBackward"; }
  void release_variables() override {
    rows.reset_data();
    weight.reset_data();
  }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const auto self = shared_from_this();
    const at::Tensor r = rows.unpack(self), w = weight.unpack(self);
    const Dims dst_dims = desc->dst_dims();
    const at::Tensor diff_dst = grad.reshape({dst_dims[0], dst_dims[1]}).contiguous();
    const auto ctx = context_for(diff_dst);
    const Tensor dd = view(diff_dst, "diff_dst");
    if (should_compute_output(0)) {
      out[0] = at::empty(src_sizes, diff_dst.options());
      const Dims a_dims = desc->a_dims();
      Tensor ds = view(out[0].view({a_dims[0], a_dims[1]}), "diff_src");
      matmul_bwd_data(*ctx, *desc, dd, view(w, "weight"), ds);
      record->add(Record::bwd_data, desc, ctx);
    }
    if (should_compute_output(1) || should_compute_output(2)) {
      out[1] = empty(desc->b_dims(), Layout::channels_first, r.options());
      Tensor dw = view(out[1], "diff_weight");
      Tensor db;
      if (desc->bias) {
        out[2] = empty(desc->bias_dims(), Layout::channels_first, r.options());
        db = view(out[2], "diff_bias");
      }
      matmul_bwd_weights(*ctx, *desc, view(r, "src"), dd, dw, db);
      record->add(Record::bwd_weights, desc, ctx);
      to_dtype_of(out[1], weight_dtype);
      to_dtype_of(out[2], bias_dtype);
    }
  }
};

/// Softmax and log-softmax: the backward reads the forward's output.
struct SoftmaxBackward : DnnxNode<SoftmaxDesc, 1> {
  autograd::SavedVariable dst;

  std::string name() const override { return "DnnxSoftmaxBackward"; }
  void release_variables() override { dst.reset_data(); }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const at::Tensor d = dst.unpack(shared_from_this());
    const at::Tensor diff_dst = dense(grad, desc->layout);
    const auto ctx = context_for(diff_dst);
    out[0] = empty(desc->dims, desc->layout, diff_dst.options());
    Tensor ds = view(out[0], "diff_src");
    softmax_bwd(*ctx, *desc, view(d, "dst"), view(diff_dst, "diff_dst"), ds);
    record->add(Record::bwd_data, desc, ctx);
  }
};

/// Cross-entropy with class-index labels: the gradient flows to the logits.
struct CrossEntropyBackward : DnnxNode<CrossEntropyDesc, 1> {
  autograd::SavedVariable logits, labels, weight;

  std::string name() const override { return "DnnxCrossEntropyBackward"; }
  void release_variables() override {
    logits.reset_data();
    labels.reset_data();
    weight.reset_data();
  }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    const auto self = shared_from_this();
    const at::Tensor l = logits.unpack(self), y = labels.unpack(self), w = weight.unpack(self);
    const Dims loss_dims = desc->loss_dims();
    const at::Tensor diff_loss =
        grad.reshape(std::vector<std::int64_t>(loss_dims.begin(), loss_dims.end())).contiguous();
    const auto ctx = context_for(diff_loss);
    out[0] = empty(desc->dims, desc->layout, l.options());
    Tensor dl = view(out[0], "diff_logits");
    std::optional<Tensor> weights = view_if(w, "weight");
    cross_entropy_bwd(*ctx, *desc, view(l, "logits"), view(y, "labels"), pointer(weights),
                      view(diff_loss, "diff_loss"), dl);
    record->add(Record::bwd_data, desc, ctx);
  }
};

/// Dropout: the backward reads the forward's mask from its SavedState.
struct DropoutBackward : DnnxNode<DropoutDesc, 1> {
  std::shared_ptr<SavedState> state;

  std::string name() const override { return "DnnxDropoutBackward"; }
  void release_variables() override { state.reset(); }

  void backward(const at::Tensor& grad, autograd::variable_list& out) override {
    if (!state)
      throw Error(ErrorKind::InvalidArgument,
                  "dropout backward: its mask was released (backward called twice without "
                  "retain_graph=True)");
    const at::Tensor diff_dst = dense(grad, desc->layout);
    const auto ctx = context_for(diff_dst);
    out[0] = empty(desc->dims, desc->layout, diff_dst.options());
    Tensor ds = view(out[0], "diff_src");
    dropout_bwd(*ctx, *desc, view(diff_dst, "diff_dst"), ds, *state);
    record->add(Record::bwd_data, desc, ctx);
  }
};

template <typename Node>
std::shared_ptr<Node> make_node() {
  return std::shared_ptr<Node>(new Node(), autograd::deleteNode);
}

// --- the layer ----------------------------------------------------------------------------------

class Layer {
 public:
  /// `keep`: descs kept per op (and contexts), the oldest dropped first: a module's layer sees
  /// few shapes, the functional calls' shared one many.
  explicit Layer(std::string op, std::size_t keep)
      : op_(std::move(op)),
        keep_(std::max<std::size_t>(keep, 1)),
        record_(std::make_shared<Record>()) {
    if (hooks == nullptr)
      throw Error(ErrorKind::Internal,
                  "dnnx._torch_ext: set_hooks was not called (import dnnx.torch)");
    static constexpr std::pair<std::string_view, OpKind> ops[] = {
        {"conv", OpKind::conv},
        {"batch_norm", OpKind::batch_norm},
        {"pool", OpKind::pool},
        {"activation", OpKind::activation},
        {"linear", OpKind::matmul},
        {"softmax", OpKind::softmax},
        {"cross_entropy", OpKind::cross_entropy},
        {"dropout", OpKind::dropout}};
    std::string accepted;
    for (const auto& [name, kind] : ops) {
      if (name == op_) {
        kind_ = kind;
        return;
      }
      accepted += (accepted.empty() ? "" : ", ") + std::string(name);
    }
    throw Error(ErrorKind::InvalidArgument, "dnnx._torch_ext.Layer: op '" + op_ +
                                                "' is not one it runs; accepted: " + accepted);
  }

  /// F.conv*d(src, weight, bias, *settings) with settings (stride, padding, dilation, groups).
  nb::object conv(nb::handle src_object, nb::handle weight_object, nb::handle bias_object,
                  nb::handle tune, nb::handle settings) {
    at::Tensor src, weight, bias;
    if (!unpack(src_object, src) || !unpack(weight_object, weight) ||
        (!bias_object.is_none() && !unpack(bias_object, bias)))
      return nb::none();
    const at::Tensor weight_param = weight, bias_param = bias;
    autocast({&src}, true);
    autocast_params(src.device().type(), {&weight, &bias});
    if (!takes(src) || !takes(weight) || !takes(bias)) return nb::none();
    const bool record = records({&src, &weight_param, &bias_param});
    at::Tensor dense_src, dense_weight, dense_bias, dst;
    std::shared_ptr<const ConvDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, src);
      add_key(key, weight);
      const at::MemoryFormat format = format_of(src);
      dense_src = src.contiguous(format);
      dense_weight = weight.contiguous(format);
      desc = kept_desc(conv_descs_, key, settings, [&] {
        return call_desc_maker("conv", {dense_src, dense_weight}, settings);
      });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      if (bias.defined()) dense_bias = bias.contiguous();
      dst = empty(desc->dst_dims(), desc->layout, dense_src.options());
      run([&] {
        std::optional<Tensor> b = view_if(dense_bias, "bias");
        Tensor d = view(dst, "dst");
        conv_fwd(*context, *desc, view(dense_src, "src"), view(dense_weight, "weights"), d,
                 pointer(b));
      });
      record_->add(Record::fwd, desc, context);
    }
    if (record) {
      auto node = make_node<ConvBackward>();
      node->set_next_edges(autograd::collect_next_edges(src, weight_param, bias_param));
      node->keep(desc, context, stream, record_);
      node->src = autograd::SavedVariable(dense_src, false);
      node->weight = autograd::SavedVariable(dense_weight, false);
      node->has_bias = bias.defined();
      node->weight_dtype = weight_param.scalar_type();
      if (bias_param.defined()) node->bias_dtype = bias_param.scalar_type();
      autograd::set_history(dst, node);
    }
    return wrap(dst);
  }

  /// F.batch_norm with settings (training, momentum, eps); weight and bias both given or None.
  nb::object batch_norm(nb::handle src_object, nb::handle weight_object, nb::handle bias_object,
                        nb::handle mean_object, nb::handle var_object, nb::handle tune,
                        nb::handle settings) {
    at::Tensor src, weight, bias, running_mean, running_var;
    if (!unpack(src_object, src) || (!weight_object.is_none() && !unpack(weight_object, weight)) ||
        (!bias_object.is_none() && !unpack(bias_object, bias)) ||
        (!mean_object.is_none() && !unpack(mean_object, running_mean)) ||
        (!var_object.is_none() && !unpack(var_object, running_var)))
      return nb::none();
    for (const at::Tensor* tensor : {&src, &weight, &bias, &running_mean, &running_var})
      if (!takes(*tensor)) return nb::none();
    const bool record = records({&src, &weight, &bias});
    at::Tensor dense_src, dst, mean, inv_std;
    std::shared_ptr<const BatchNormDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, src);
      key.push_back(weight.defined());
      dense_src = src.contiguous(format_of(src));
      desc = kept_desc(batch_norm_descs_, key, settings, [&] {
        return call_desc_maker("batch_norm", {dense_src}, settings, nb::bool_(weight.defined()));
      });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      dst = empty(desc->dims, desc->layout, dense_src.options());
      if (desc->training) {
        const at::TensorOptions params = dense_src.options().dtype(at::kFloat);
        mean = empty(desc->param_dims(), desc->layout, params);
        inv_std = empty(desc->param_dims(), desc->layout, params);
      }
      run([&] {
        std::optional<Tensor> scale = view_if(weight, "scale"), shift = view_if(bias, "shift"),
                              rm = view_if(running_mean, "running_mean"),
                              rv = view_if(running_var, "running_var"),
                              saved_mean = view_if(mean, "saved_mean"),
                              saved_inv_std = view_if(inv_std, "saved_inv_std");
        const BatchNormTensors tensors{pointer(scale), pointer(shift),      pointer(rm),
                                       pointer(rv),    pointer(saved_mean), pointer(saved_inv_std)};
        Tensor d = view(dst, "dst");
        batch_norm_fwd(*context, *desc, view(dense_src, "src"), d, tensors);
      });
      record_->add(Record::fwd, desc, context);
    }
    if (record) {
      auto node = make_node<BatchNormBackward>();
      node->set_next_edges(autograd::collect_next_edges(src, weight, bias));
      node->keep(desc, context, stream, record_);
      node->src = autograd::SavedVariable(dense_src, false);
      node->weight = autograd::SavedVariable(weight, false);
      node->mean = autograd::SavedVariable(mean, false);
      node->inv_std = autograd::SavedVariable(inv_std, false);
      if (!desc->training) {  // the backward reads the running statistics as they are now
        at::NoGradGuard no_grad;
        if (running_mean.defined()) node->running_mean = running_mean.clone();
        if (running_var.defined()) node->running_var = running_var.clone();
      }
      autograd::set_history(dst, node);
    }
    return wrap(dst);
  }

  /// F.linear(src, weight, bias): src (..., in), weight (out, in).
  nb::object linear(nb::handle src_object, nb::handle weight_object, nb::handle bias_object,
                    nb::handle tune) {
    at::Tensor src, weight, bias;
    if (!unpack(src_object, src) || !unpack(weight_object, weight) ||
        (!bias_object.is_none() && !unpack(bias_object, bias)))
      return nb::none();
    const at::Tensor weight_param = weight, bias_param = bias;
    autocast({&src}, true);
    autocast_params(src.device().type(), {&weight, &bias});
    if (!takes(src) || !takes(weight) || !takes(bias) || src.dim() < 1 || weight.dim() != 2)
      return nb::none();
    const bool record = records({&src, &weight_param, &bias_param});
    at::Tensor rows, dense_weight, dense_bias, dst;
    std::shared_ptr<const MatmulDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      rows = src.reshape({-1, src.size(-1)}).contiguous();
      dense_weight = weight.contiguous();
      Key key;
      add_key(key, rows);
      add_key(key, dense_weight);
      key.push_back(bias.defined());
      desc = kept_desc(linear_descs_, key, nb::none(), [&] {
        return call_desc_maker("linear", {rows, dense_weight}, nb::none(),
                               nb::bool_(bias.defined()));
      });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      if (bias.defined()) dense_bias = bias.contiguous();
      std::vector<std::int64_t> sizes(src.sizes().begin(), src.sizes().end() - 1);
      sizes.push_back(desc->n);
      dst = at::empty(sizes, rows.options());
      run([&] {
        Tensor d = view(dst.view({desc->m, desc->n}), "dst");
        const Tensor b = dense_bias.defined() ? view(dense_bias, "bias") : Tensor();
        matmul_fwd(*context, *desc, view(rows, "src"), view(dense_weight, "weight"), b, d);
      });
      record_->add(Record::fwd, desc, context);
    }
    if (record) {
      auto node = make_node<LinearBackward>();
      node->set_next_edges(autograd::collect_next_edges(src, weight_param, bias_param));
      node->keep(desc, context, stream, record_);
      node->weight_dtype = weight_param.scalar_type();
      if (bias_param.defined()) node->bias_dtype = bias_param.scalar_type();
      node->rows = autograd::SavedVariable(rows, false);
      node->weight = autograd::SavedVariable(dense_weight, false);
      node->src_sizes.assign(src.sizes().begin(), src.sizes().end());
      autograd::set_history(dst, node);
    }
    return wrap(dst);
  }

  /// Softmax over dim 1 (log-softmax when `settings` is true).
  nb::object softmax(nb::handle src_object, nb::handle tune, nb::handle settings) {
    return src_dst<SoftmaxDesc>(src_object, tune, settings, softmax_descs_, "softmax");
  }

  /// F.cross_entropy(logits, labels, weight) with class-index labels and settings (ignore_index,
  /// reduction).
  nb::object cross_entropy(nb::handle logits_object, nb::handle labels_object,
                           nb::handle weight_object, nb::handle tune, nb::handle settings) {
    at::Tensor logits, labels, weight;
    if (!unpack(logits_object, logits) || !unpack(labels_object, labels) ||
        (!weight_object.is_none() && !unpack(weight_object, weight)))
      return nb::none();
    autocast({&logits, &weight}, false);
    if (!takes(logits) || !takes(labels) || !takes(weight) || labels.is_floating_point())
      return nb::none();
    const bool record = records({&logits, &weight});
    at::Tensor dense_logits, dense_labels, dense_weight, loss;
    std::shared_ptr<const CrossEntropyDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, logits);
      add_key(key, labels);
      add_key(key, weight);
      dense_logits = logits.contiguous(format_of(logits));
      dense_labels = labels.contiguous();
      if (weight.defined()) dense_weight = weight.contiguous();
      desc = kept_desc(cross_entropy_descs_, key, settings, [&] {
        nb::list args;
        args.append(wrap(dense_logits));
        args.append(wrap(dense_labels));
        args.append(dense_weight.defined() ? wrap(dense_weight) : nb::none());
        args.append(settings);
        return hooks->descs["cross_entropy"](*nb::tuple(args));
      });
      if (!desc || !(context = context_of(logits_object, logits, tune, stream))) return nb::none();
      const Dims loss_dims = desc->loss_dims();
      const std::vector<std::int64_t> sizes(loss_dims.begin(), loss_dims.end());
      const at::TensorOptions options = dense_logits.options();
      // mean and sum: a 0-dim loss, as PyTorch's; dnnx writes it as its one element.
      loss =
          desc->reduction == Reduction::none ? at::empty(sizes, options) : at::empty({}, options);
      run([&] {
        Tensor l = view(loss.reshape(sizes), "loss");
        std::optional<Tensor> weights = view_if(dense_weight, "weight");
        cross_entropy_fwd(*context, *desc, view(dense_logits, "logits"),
                          view(dense_labels, "labels"), pointer(weights), l);
      });
      record_->add(Record::fwd, desc, context);
    }
    if (record) {
      auto node = make_node<CrossEntropyBackward>();
      node->set_next_edges(autograd::collect_next_edges(logits));
      node->keep(desc, context, stream, record_);
      node->logits = autograd::SavedVariable(dense_logits, false);
      node->labels = autograd::SavedVariable(dense_labels, false);
      node->weight = autograd::SavedVariable(dense_weight, false);
      autograd::set_history(loss, node);
    }
    return wrap(loss);
  }

  /// F.dropout(src, p, training=True) with its mask from `generator` (a dnnx.Generator).
  nb::object dropout(nb::handle src_object, nb::handle p, nb::handle generator, nb::handle tune) {
    at::Tensor src;
    if (!unpack(src_object, src) || !takes(src)) return nb::none();
    if (!nb::isinstance<Generator>(generator))
      throw nb::type_error("generator: expected a dnnx.Generator");
    const bool record = records({&src});
    at::Tensor dense_src, dst;
    std::shared_ptr<const DropoutDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    auto state = std::make_shared<SavedState>();
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, src);
      dense_src = src.contiguous(format_of(src));
      desc = kept_desc(dropout_descs_, key, p,
                       [&] { return call_desc_maker("dropout", {dense_src}, p); });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      dst = empty(desc->dims, desc->layout, dense_src.options());
      Generator& draws = nb::cast<Generator&>(generator);
      run([&] {
        Tensor d = view(dst, "dst");
        dropout_fwd_training(*context, *desc, draws, view(dense_src, "src"), d, *state);
      });
      record_->add(Record::fwd_training, desc, context);
    }
    if (record) {
      auto node = make_node<DropoutBackward>();
      node->set_next_edges(autograd::collect_next_edges(src));
      node->keep(desc, context, stream, record_);
      node->state = std::move(state);
      autograd::set_history(dst, node);
    }
    return wrap(dst);
  }

  /// Pooling with settings (kernel, stride, padding, dilation, ceil_mode, mode).
  nb::object pool(nb::handle src_object, nb::handle tune, nb::handle settings) {
    return src_dst<PoolDesc>(src_object, tune, settings, pool_descs_, "pool");
  }

  /// An activation with settings (kind, alpha, ceiling); in place with `inplace_settings`
  /// (kind, alpha, ceiling, True) where the tensor allows it (activation_in_place), else out of
  /// place with `settings`.
  nb::object activation(nb::handle src_object, nb::handle tune, nb::handle settings,
                        nb::handle inplace_settings) {
    if (!inplace_settings.is_none()) {
      at::Tensor src;
      if (!unpack(src_object, src)) return nb::none();
      if (in_place_allowed(src))
        return activation_in_place(src_object, src, tune, inplace_settings);
    }
    return src_dst<ActivationDesc>(src_object, tune, settings, activation_descs_, "activation");
  }

  /// direction -> (desc, context) of the latest call of each direction, as dnnx.torch.report
  /// reads them.
  nb::dict calls() const {
    nb::dict result;
    std::lock_guard<std::mutex> lock(record_->mutex);
    for (int direction = 0; direction < Record::directions; ++direction) {
      const Record::Slot& slot = record_->slots[direction];
      if (!slot.kept_context) continue;
      nb::object desc = std::visit([](const auto& kept) { return nb::cast(*kept); }, slot.kept_desc);
      // Dropout names its backward "bwd", as its policy (Python path's record alike).
      const char* name = kind_ == OpKind::dropout && direction == Record::bwd_data
                             ? "bwd"
                             : Record::names[direction];
      result[name] = nb::make_tuple(desc, nb::cast(*slot.kept_context));
    }
    return result;
  }

  const std::string& op() const { return op_; }

 private:
  // Note [in-place activations]
  // nn.ReLU(inplace=True) (torchvision's ResNets use it after every batch-norm) writes its
  // output over its input, and its backward reads that output alone: the batch-norm's output is
  // not kept beside the relu's. The converted layer does the same where PyTorch's relu_ would
  // and the tensor is one dnnx can write in place (dense in its layout, not a view): the op runs
  // with dst = src and a desc whose backward reads dst alone (ActivationSaved::dst), the tensor's
  // version is bumped and its history rebased onto the layer's node, as PyTorch's generated code
  // does for an in-place op, so autograd's checks of saved tensors see the write. A leaf that
  // requires grad (PyTorch's relu_ refuses it), a view, a tensor dnnx would have to copy, or an
  // inference tensor outside inference mode is computed out of place instead. The Python path
  // (dnnx.torch.ActivationInPlaceFunction) follows the same rule where autograd records the call,
  // and computes out of place where it does not: only mark_dirty moves a version from Python.
  static bool in_place_allowed(const at::Tensor& src) {
    if (!src.defined() || !takes(src) || src.is_view() || src.numel() == 0) return false;
    if (at::GradMode::is_enabled() && src.requires_grad() && src.is_leaf()) return false;
    // An inference tensor takes no in-place write outside inference mode (PyTorch refuses it).
    if (src.is_inference() && !c10::InferenceMode::is_enabled()) return false;
    return src.is_contiguous(format_of(src));
  }

  nb::object activation_in_place(nb::handle src_object, const at::Tensor& src, nb::handle tune,
                                 nb::handle settings) {
    const bool record = records({&src});
    std::shared_ptr<const ActivationDesc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, src);
      desc = kept_desc(activation_descs_, key, settings,
                       [&] { return call_desc_maker("activation", {src}, settings); });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      if (desc->saved != ActivationSaved::dst)
        throw Error(ErrorKind::Internal,
                    "dnnx._torch_ext: an in-place activation's desc must "
                    "keep dst alone, got saved=" +
                        std::string(to_string(desc->saved)));
      run([&] {
        const Tensor s = view(src, "src");
        Tensor d = view(src, "dst");
        activation_fwd(*context, *desc, s, d);
      });
      record_->add(Record::fwd, desc, context);
    }
    autograd::impl::bump_version(src);
    if (record) {
      auto node = make_node<SrcDstBackward<ActivationDesc>>();
      node->set_next_edges(autograd::collect_next_edges(src));
      node->keep(desc, context, stream, record_);
      node->add_input_metadata(src);
      autograd::impl::rebase_history(src, {node, 0});
      node->dst = autograd::SavedVariable(src, true);
    }
    return nb::borrow(src_object);
  }

  template <typename Desc>
  nb::object src_dst(nb::handle src_object, nb::handle tune, nb::handle settings,
                     std::vector<KeptDesc<Desc>>& descs, const char* op) {
    at::Tensor src;
    if (!unpack(src_object, src)) return nb::none();
    if constexpr (std::is_same_v<Desc, SoftmaxDesc>) autocast({&src}, false);
    if (!takes(src)) return nb::none();
    const bool record = records({&src});
    at::Tensor dense_src, dst;
    std::shared_ptr<const Desc> desc;
    std::shared_ptr<Context> context;
    void* stream = nullptr;
    {
      at::NoGradGuard no_grad;
      Key key;
      add_key(key, src);
      dense_src = src.contiguous(format_of(src));
      desc = kept_desc(descs, key, settings,
                       [&] { return call_desc_maker(op, {dense_src}, settings); });
      if (!desc || !(context = context_of(src_object, src, tune, stream))) return nb::none();
      if constexpr (std::is_same_v<Desc, PoolDesc>)
        dst = empty(desc->dst_dims(), desc->layout, dense_src.options());
      else
        dst = empty(desc->dims, desc->layout, dense_src.options());
      run([&] {
        Tensor d = view(dst, "dst");
        const Tensor s = view(dense_src, "src");
        if constexpr (std::is_same_v<Desc, PoolDesc>)
          pool_fwd(*context, *desc, s, d);
        else if constexpr (std::is_same_v<Desc, ActivationDesc>)
          activation_fwd(*context, *desc, s, d);
        else
          softmax_fwd(*context, *desc, s, d);
      });
      record_->add(Record::fwd, desc, context);
    }
    if (record) {
      if constexpr (std::is_same_v<Desc, SoftmaxDesc>) {  // its backward reads dst alone
        auto node = make_node<SoftmaxBackward>();
        node->set_next_edges(autograd::collect_next_edges(src));
        node->keep(desc, context, stream, record_);
        autograd::set_history(dst, node);
        node->dst = autograd::SavedVariable(dst, true);
      } else {
        auto node = make_node<SrcDstBackward<Desc>>();
        node->set_next_edges(autograd::collect_next_edges(src));
        node->keep(desc, context, stream, record_);
        node->src = autograd::SavedVariable(dense_src, false);
        autograd::set_history(dst, node);
        node->dst = autograd::SavedVariable(dst, true);
      }
    }
    return wrap(dst);
  }

  /// Runs `call` (a dnnx op) with the GIL released.
  template <typename Call>
  static void run(Call&& call) {
    nb::gil_scoped_release released;
    call();
  }

  /// The desc kept for `key` and `settings` (equal by value), else the one `make` returns, kept;
  /// null when `make` gives something else than a desc of this type.
  template <typename Desc, typename Make>
  std::shared_ptr<const Desc> kept_desc(std::vector<KeptDesc<Desc>>& descs, const Key& key,
                                        nb::handle settings, Make&& make) {
    for (const KeptDesc<Desc>& entry : descs)
      if (std::equal(entry.key.begin(), entry.key.end(), key.begin(), key.end()) &&
          (entry.settings.ptr() == settings.ptr() || entry.settings.equal(settings)))
        return entry.desc;
    nb::object made = make();  // Python: another thread may use this layer meanwhile
    if (!nb::isinstance<Desc>(made)) return nullptr;
    if (descs.size() >= keep_) descs.erase(descs.begin());  // bounded, the oldest first
    descs.push_back({std::vector<std::int64_t>(key.begin(), key.end()), nb::borrow(settings),
                     std::make_shared<const Desc>(nb::cast<Desc>(made))});
    return descs.back().desc;
  }

  nb::object call_desc_maker(const char* op, std::initializer_list<at::Tensor> tensors,
                             nb::handle settings, nb::handle extra = nb::handle()) {
    nb::list args;
    for (const at::Tensor& tensor : tensors) args.append(wrap(tensor));
    args.append(settings);
    if (extra.is_valid()) args.append(extra);
    return hooks->descs[op](*nb::tuple(args));
  }

  /// The context of a call on `tensor` (Note [kept layer contexts]). `stream` receives PyTorch's
  /// current stream for the tensor.
  std::shared_ptr<Context> context_of(nb::handle tensor_object, const at::Tensor& tensor,
                                      nb::handle tune, void*& stream) {
    if (!tune.is_none() && !nb::isinstance<TuneOptions>(tune))
      throw nb::type_error(("tune: expected a dnnx.TuneOptions or None, got " +
                            std::string(nb::type_name(tune.type()).c_str()))
                               .c_str());
    const TuneOptions* layer_tune = tune.is_none() ? nullptr : &nb::cast<const TuneOptions&>(tune);
    stream = stream_of(tensor);
    const int device = tensor.device().is_cuda() ? tensor.device().index() : -1;
    nb::object base = base_context();
    if (!base.is_none()) {
      const Context& base_context = nb::cast<const Context&>(base);
      for (const KeptContext& kept : contexts_)
        if (kept.device == device && kept.stream == stream && kept.base.ptr() == base.ptr() &&
            kept.tune.ptr() == tune.ptr() && kept.cache == base_context.choice_cache() &&
            same_for(kind_, kept.base_tune, base_context.tune()) &&
            (layer_tune == nullptr || same_for(kind_, kept.layer_tune, *layer_tune)))
          return kept.context;
    }
    nb::object resolved = hooks->layer_context(tensor_object, tune);
    base = base_context();  // the default context exists now
    if (base.is_none() || !nb::isinstance<Context>(base) || !nb::isinstance<Context>(resolved))
      throw Error(ErrorKind::Internal, "dnnx._torch_ext: no context resolved for the call");
    const Context& base_context = nb::cast<const Context&>(base);
    KeptContext kept;
    kept.device = device;
    kept.stream = stream;
    kept.base = base;
    kept.tune = nb::borrow(tune);
    kept.base_tune = base_context.tune();
    if (layer_tune != nullptr) kept.layer_tune = *layer_tune;
    kept.cache = base_context.choice_cache();
    kept.context = std::make_shared<Context>(nb::cast<const Context&>(resolved));
    if (contexts_.size() >= keep_) contexts_.erase(contexts_.begin());
    contexts_.push_back(std::move(kept));
    return contexts_.back().context;
  }

  /// The context of the enclosing `with ctx:` block, else the default one (None before its first
  /// use).
  static nb::object base_context() {
    PyObject* block = nullptr;
    if (PyContextVar_Get(hooks->current.ptr(), nullptr, &block) < 0) throw nb::python_error();
    nb::object current = nb::steal(block);
    if (current.is_valid() && !current.is_none()) return current;
    PyObject* fallback = PyDict_GetItemWithError(hooks->globals.ptr(), hooks->default_name.ptr());
    if (fallback == nullptr && PyErr_Occurred()) throw nb::python_error();
    return fallback == nullptr ? nb::none() : nb::borrow(fallback);
  }

  std::string op_;
  std::size_t keep_;
  OpKind kind_ = OpKind::conv;
  std::shared_ptr<Record> record_;
  std::vector<KeptContext> contexts_;
  std::vector<KeptDesc<ConvDesc>> conv_descs_;
  std::vector<KeptDesc<BatchNormDesc>> batch_norm_descs_;
  std::vector<KeptDesc<PoolDesc>> pool_descs_;
  std::vector<KeptDesc<ActivationDesc>> activation_descs_;
  std::vector<KeptDesc<MatmulDesc>> linear_descs_;
  std::vector<KeptDesc<SoftmaxDesc>> softmax_descs_;
  std::vector<KeptDesc<CrossEntropyDesc>> cross_entropy_descs_;
  std::vector<KeptDesc<DropoutDesc>> dropout_descs_;
};

/// Runs `call` with dnnx::Error raised as its dnnx._errors class (as the dnnx._dnnx module's
/// translator raises it).
template <typename Call>
nb::object translated(Call&& call) {
  // torch.jit.trace records the ops a call dispatches, and this module's work is not among them:
  // traced calls take the Python path.
  if (torch::jit::tracer::isTracing()) return nb::none();
  try {
    return call();
  } catch (const Error& error) {
    set_python_error(error);
    throw nb::python_error();
  }
}

}  // namespace
}  // namespace dnnx::python

NB_MODULE(_torch_ext, module) {
  using namespace dnnx::python;
  module.doc() = "dnnx.torch's converted layers in C++ (Note [layers in C++])";
  nanobind::set_leak_warnings(false);
  nb::module_::import_("dnnx._dnnx");  // the desc and Context classes this module reads
  load_error_classes();
  module.attr("torch_version") = TORCH_VERSION;
#if DNNX_TORCH_CUDA
  module.attr("cuda") = true;
#else
  module.attr("cuda") = false;
#endif
  module.def(
      "set_hooks",
      [](nb::object layer_context, nb::object current, nb::object context_module, nb::dict descs) {
        if (hooks == nullptr) hooks = new Hooks;
        hooks->layer_context = std::move(layer_context);
        hooks->current = std::move(current);
        hooks->globals = context_module.attr("__dict__");
        hooks->default_name = nb::str("_default");
        hooks->descs = std::move(descs);
      },
      nb::arg("layer_context"), nb::arg("current"), nb::arg("context_module"), nb::arg("descs"),
      "What the layers call back: dnnx.torch._layer_context, dnnx._context._current, the "
      "dnnx._context module, and a desc maker per op.");
  nb::class_<Layer>(module, "Layer",
                    "One converted layer's calls: its kept descs and contexts, and what ran.")
      .def(nb::init<std::string, std::size_t>(), nb::arg("op"), nb::arg("keep") = 16)
      .def_prop_ro("op", &Layer::op)
      .def(
          "conv",
          [](Layer& layer, nb::handle src, nb::handle weight, nb::handle bias, nb::handle tune,
             nb::handle settings) {
            return translated([&] { return layer.conv(src, weight, bias, tune, settings); });
          },
          nb::arg("src"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("tune").none(),
          nb::arg("settings"))
      .def(
          "batch_norm",
          [](Layer& layer, nb::handle src, nb::handle weight, nb::handle bias, nb::handle mean,
             nb::handle var, nb::handle tune, nb::handle settings) {
            return translated(
                [&] { return layer.batch_norm(src, weight, bias, mean, var, tune, settings); });
          },
          nb::arg("src"), nb::arg("weight").none(), nb::arg("bias").none(),
          nb::arg("running_mean").none(), nb::arg("running_var").none(), nb::arg("tune").none(),
          nb::arg("settings"))
      .def(
          "linear",
          [](Layer& layer, nb::handle src, nb::handle weight, nb::handle bias, nb::handle tune) {
            return translated([&] { return layer.linear(src, weight, bias, tune); });
          },
          nb::arg("src"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("tune").none())
      .def(
          "softmax",
          [](Layer& layer, nb::handle src, nb::handle tune, nb::handle settings) {
            return translated([&] { return layer.softmax(src, tune, settings); });
          },
          nb::arg("src"), nb::arg("tune").none(), nb::arg("settings"))
      .def(
          "cross_entropy",
          [](Layer& layer, nb::handle logits, nb::handle labels, nb::handle weight, nb::handle tune,
             nb::handle settings) {
            return translated(
                [&] { return layer.cross_entropy(logits, labels, weight, tune, settings); });
          },
          nb::arg("logits"), nb::arg("labels"), nb::arg("weight").none(), nb::arg("tune").none(),
          nb::arg("settings"))
      .def(
          "dropout",
          [](Layer& layer, nb::handle src, nb::handle p, nb::handle generator, nb::handle tune) {
            return translated([&] { return layer.dropout(src, p, generator, tune); });
          },
          nb::arg("src"), nb::arg("p"), nb::arg("generator"), nb::arg("tune").none())
      .def(
          "pool",
          [](Layer& layer, nb::handle src, nb::handle tune, nb::handle settings) {
            return translated([&] { return layer.pool(src, tune, settings); });
          },
          nb::arg("src"), nb::arg("tune").none(), nb::arg("settings"))
      .def(
          "activation",
          [](Layer& layer, nb::handle src, nb::handle tune, nb::handle settings,
             nb::handle inplace_settings) {
            return translated(
                [&] { return layer.activation(src, tune, settings, inplace_settings); });
          },
          nb::arg("src"), nb::arg("tune").none(), nb::arg("settings"),
          nb::arg("inplace_settings").none() = nb::none())
      .def("calls", &Layer::calls);
}
