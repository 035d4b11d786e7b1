#include <dnnx/nn/module.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <map>
#include <sstream>
#include <utility>

namespace dnnx::nn {

using dnnx::detail::cat;
using dnnx::detail::join;

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

thread_local bool grad_enabled = true;

}  // namespace

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }

NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }

bool is_grad_enabled() { return grad_enabled; }

Module::Module(Context context, std::optional<OpKind> op)
    : context_(std::move(context)), pinned_(context_), op_(op) {}

Module::~Module() = default;

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

// Note [gradients set to none]
// zero_grad(set_to_none) is PyTorch's zero_grad(set_to_none=True) without its None: the grad
// tensor stays, flagged grad_none, and nothing is written, so a step saves one fill per parameter
// (161 kernels of ResNet-50). A backward writes a grad that is not live instead of adding into
// it, which clears the flag; what reads the gradients before a backward reached them zeroes them
// first (Optimizer::step, GradScaler's checks: Optimizer::zero_none_grads). So a parameter no
// backward reached is stepped with a zero gradient — momentum and weight decay still apply —
// where PyTorch skips a parameter whose grad is None.
void Module::zero_grad(bool set_to_none) {
  // Each module's own parameters on its own context (they live on its device): Note [zero_grad
  // without waiting].
  for (auto& [name, parameter] : parameters_) detail::zero_grad(context_, *parameter, set_to_none);
  for (auto& [name, child] : children_) child->zero_grad(set_to_none);
}

void Module::collect_parameters(const std::string& prefix,
                                std::vector<std::pair<std::string, Parameter*>>& out) {
  for (auto& [name, parameter] : parameters_) out.emplace_back(prefix + name, parameter.get());
  for (auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix,
                             std::vector<std::pair<std::string, Tensor*>>& out) {
  refresh_buffers();
  for (auto& [name, buffer] : buffers_) out.emplace_back(prefix + name, buffer.get());
  for (auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

void Module::collect_state(const std::string& prefix, StateDict& out) {
  refresh_buffers();
  for (auto& [name, parameter] : parameters_) out.emplace_back(prefix + name, parameter->value);
  for (auto& [name, buffer] : buffers_) out.emplace_back(prefix + name, *buffer);
  for (auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (auto& [name, child] : children_) {
    child->collect_modules(prefix.empty() ? name : prefix + "." + name, out);
  }
}

std::vector<std::pair<std::string, Parameter*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Parameter*>> out;
  collect_parameters("", out);
  return out;
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& [name, parameter] : named_parameters()) out.push_back(parameter);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect_buffers("", out);
  return out;
}

StateDict Module::state_dict() {
  StateDict out;
  collect_state("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() {
  std::vector<std::pair<std::string, Module*>> out;
  for (auto& [name, child] : children_) out.emplace_back(name, child.get());
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  // Every key of the module: its owner, its local name, and the parameter or buffer.
  struct Entry {
    Module* owner;
    std::string local;
    Parameter* parameter = nullptr;
    Tensor* buffer = nullptr;
    const Tensor* given = nullptr;
  };
  std::map<std::string, Entry> entries;
  std::vector<std::string> order;
  for (auto& [prefix, module] : named_modules()) {
    const std::string dotted = prefix.empty() ? "" : prefix + ".";
    for (auto& [name, parameter] : module->parameters_) {
      entries[dotted + name] = Entry{module, name, parameter.get(), nullptr, nullptr};
      order.push_back(dotted + name);
    }
    for (auto& [name, buffer] : module->buffers_) {
      entries[dotted + name] = Entry{module, name, nullptr, buffer.get(), nullptr};
      order.push_back(dotted + name);
    }
  }
  std::vector<std::string> unexpected, mismatched, bad_dtype, missing;
  for (const auto& [key, tensor] : state) {
    auto found = entries.find(key);
    if (found == entries.end()) {
      unexpected.push_back(key);
      continue;
    }
    const Tensor& target =
        found->second.parameter ? found->second.parameter->value : *found->second.buffer;
    if (!(tensor.dims() == target.dims())) {
      mismatched.push_back(cat(key, " (given ", tensor.dims(), ", expected ", target.dims(), ")"));
    } else if (tensor.dtype() != target.dtype() &&
               !(is_floating(tensor.dtype()) && is_floating(target.dtype()))) {
      bad_dtype.push_back(cat(key, " (given ", to_string(tensor.dtype()), ", expected ",
                              to_string(target.dtype()), ")"));
    }
    found->second.given = &tensor;
  }
  for (const std::string& key : order) {
    if (entries[key].given == nullptr) missing.push_back(key);
  }
  if (!unexpected.empty() || !mismatched.empty() || !missing.empty() || !bad_dtype.empty()) {
    std::ostringstream message;
    message << "load_state_dict of " << type_name() << ": the state does not match the module";
    if (!missing.empty()) message << "; missing keys: " << join(missing, ", ");
    if (!unexpected.empty()) message << "; unexpected keys: " << join(unexpected, ", ");
    if (!mismatched.empty()) message << "; keys of another shape: " << join(mismatched, ", ");
    if (!bad_dtype.empty()) message << "; keys of another dtype: " << join(bad_dtype, ", ");
    dnnx::detail::raise(ErrorKind::InvalidArgument, message.str());
  }
  for (const std::string& key : order) {
    Entry& entry = entries[key];
    if (entry.parameter != nullptr) {
      Parameter& parameter = *entry.parameter;
      if (!parameter.master.is_null()) {
        detail::assign(context_, *entry.given, parameter.master);
        detail::assign(context_, parameter.master, parameter.value);
      } else {
        detail::assign(context_, *entry.given, parameter.value);
      }
    } else {
      entry.owner->load_buffer(entry.local, *entry.given, *entry.buffer);
    }
  }
  for (auto& [prefix, module] : named_modules()) module->on_tensors_changed();
}

void Module::load_buffer(const std::string&, const Tensor& value, Tensor& target) {
  detail::assign(context_, value, target);
}

namespace {

// PyTorch's _addindent: every line but the first indented by `spaces`.
std::string indent(const std::string& text, int spaces) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<std::size_t>(spaces), ' ');
  }
  return out;
}

}  // namespace

std::string Module::repr() const {
  std::vector<std::string> lines;
  const std::string extra = extra_repr();
  std::size_t extra_lines = 0;
  if (!extra.empty()) {
    std::istringstream in(extra);
    for (std::string line; std::getline(in, line);) {
      lines.push_back(line);
      ++extra_lines;
    }
  }
  for (const auto& [name, child] : children_) {
    lines.push_back("(" + name + "): " + indent(child->repr(), 2));
  }
  std::string out = type_name() + "(";
  if (!lines.empty()) {
    if (extra_lines == 1 && children_.empty()) {
      out += lines[0];
    } else {
      out += "\n  " + join(lines, "\n  ") + "\n";
    }
  }
  return out + ")";
}

AlgoPolicy& Module::policy(Direction direction) {
  return const_cast<AlgoPolicy&>(std::as_const(*this).policy(direction));
}

const AlgoPolicy& Module::policy(Direction direction) const {
  DNNX_CHECK_ARG(op_.has_value(), type_name(),
                 " runs no op of its own, so it has no policy; set its children's");
  return context_.tune().policy(*op_, direction);
}

const std::shared_ptr<const Choice>& Module::choice(Direction direction) const {
  return slots_[static_cast<std::size_t>(direction)].choice;
}

std::shared_ptr<const Choice> Module::heuristic_choice(Direction) { return nullptr; }

std::optional<ProfileResult> Module::profile(Direction) { return std::nullopt; }

Context& Module::call_context(Direction direction, const std::string& desc_key,
                              const std::function<std::vector<AlgoInfo>(Context&)>& list) {
  if (!op_) return context_;
  const AlgoPolicy& policy = context_.tune().policy(*op_, direction);
  const Slot& slot = slots_[static_cast<std::size_t>(direction)];
  if (policy.reuse != Reuse::once || !slot.choice) return context_;
  const std::string& held = slot.choice->algo.id;
  bool keep = slot.desc_key == desc_key;
  if (!keep) {
    // Reuse::once on a new shape: keep the algorithm if it can still run under the constraints.
    const TuneOptions& tune = context_.tune();
    const auto limit = tune.effective_workspace_limit();
    for (const AlgoInfo& algo : list(context_)) {
      if (algo.id != held) continue;
      keep = algo.supported && (!tune.deterministic || algo.deterministic) &&
             (!limit || algo.workspace_bytes <= *limit);
      break;
    }
  }
  if (!keep) return context_;
  pinned_ = context_;
  pinned_.tune().policy(*op_, direction) = AlgoPolicy::fixed(held);
  return pinned_;
}

void Module::record(Direction direction, std::shared_ptr<const Choice> choice,
                    std::string desc_key) {
  slots_[static_cast<std::size_t>(direction)] = Slot{std::move(choice), std::move(desc_key)};
}

void Module::require_forward(const Tensor& saved) const {
  DNNX_CHECK_ARG(!saved.is_null() || saved.rank() > 0, type_name(),
                 ".backward called without a forward before it (one backward per forward; "
                 "forwards under an nn::NoGradGuard keep nothing)");
}

void Module::check_diff(const Tensor& diff_dst, const Dims& dims, DType dtype,
                        Layout layout) const {
  DNNX_CHECK_ARG(diff_dst.dims() == dims && diff_dst.dtype() == dtype, type_name(),
                 ".backward: diff_dst ", describe(diff_dst),
                 " must have the forward output's dims ", dims, " and dtype ", to_string(dtype));
  DNNX_CHECK_ARG(diff_dst.is_dense(layout), type_name(), ".backward: diff_dst ", describe(diff_dst),
                 " must be dense ", to_string(layout), ", the layout of the forward output");
}

Parameter& Module::register_parameter(std::string name, Tensor initial) {
  auto parameter = std::make_unique<Parameter>();
  const DType dtype = parameter_dtype(context_);
  if (dtype == initial.dtype()) {
    parameter->value = std::move(initial);
  } else {
    parameter->value = detail::converted(context_, initial, dtype);
    parameter->master = std::move(initial);
  }
  parameter->grad = detail::zeros(context_, parameter->value.dims(), dtype);
  Parameter& out = *parameter;
  parameters_.emplace_back(std::move(name), std::move(parameter));
  return out;
}

Tensor& Module::register_buffer(std::string name, Tensor value) {
  buffers_.emplace_back(std::move(name), std::make_unique<Tensor>(std::move(value)));
  return *buffers_.back().second;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  DNNX_CHECK_ARG(module != nullptr, type_name(), ": child ", name, " is null");
  for (const auto& [existing, child] : children_) {
    DNNX_CHECK_ARG(existing != name, type_name(), ": a child named ", name, " exists already");
  }
  children_.emplace_back(std::move(name), std::move(module));
}

Parameter& Module::parameter(const std::string& name) {
  for (auto& [existing, parameter] : parameters_) {
    if (existing == name) return *parameter;
  }
  dnnx::detail::raise(ErrorKind::Internal, cat(type_name(), " has no parameter ", name));
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [existing, tensor] : buffers_) {
    if (existing == name) return *tensor;
  }
  dnnx::detail::raise(ErrorKind::Internal, cat(type_name(), " has no buffer ", name));
}

void Module::to_layout(Layout layout) {
  for (auto& [name, parameter] : parameters_) {
    if (parameter->value.rank() < 3) continue;
    // Exact strides, so that weights dense in both layouts (1x1 kernels) are made in the one
    // asked for (stored_layout keeps it through convert).
    const auto rewrite = [&](Tensor& tensor) {
      if (tensor.strides() == dense_strides(tensor.dims(), layout)) return;
      Tensor out = detail::empty(context_, tensor.dims(), tensor.dtype(), layout);
      detail::assign(context_, tensor, out);
      tensor = out;
    };
    rewrite(parameter->value);
    if (!parameter->master.is_null()) rewrite(parameter->master);
    rewrite(parameter->grad);
  }
}

void Module::to(const Context& context) {
  const DType dtype = parameter_dtype(context);
  // The conversions run on the new context (copies share its backend and stream).
  Context target = context;
  for (auto& [name, parameter] : parameters_) {
    // The f32 master copy is the most precise value there is.
    const Tensor& source = parameter->master.is_null() ? parameter->value : parameter->master;
    Tensor value = detail::converted(target, source, dtype);
    Tensor master = dtype == DType::f32 ? Tensor() : detail::converted(target, source, DType::f32);
    parameter->value = std::move(value);
    parameter->master = std::move(master);
    parameter->grad = detail::zeros(context, parameter->value.dims(), dtype,
                                    detail::stored_layout(parameter->value));
    parameter->grad_live = false;
    parameter->grad_none = false;
  }
  for (auto& [name, buffer] : buffers_) {
    *buffer = detail::converted(target, *buffer, buffer->dtype());
  }
  const bool same_backend = context.backend() == context_.backend();
  const TuneOptions kept = context_.tune();
  context_ = context;
  if (same_backend) context_.tune() = kept;
  pinned_ = context_;
  slots_ = {};
  on_tensors_changed();
}

}  // namespace dnnx::nn
