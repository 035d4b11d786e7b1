#include <dnnx/nn/containers.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

namespace dnnx::nn {

Sequential::Sequential(const Context& context) : Module(context) {}

Sequential::Sequential(const Context& context, std::vector<std::shared_ptr<Module>> modules)
    : Module(context) {
  for (auto& module : modules) push_back(std::move(module));
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  return push_back(std::to_string(modules_.size()), std::move(module));
}

Sequential& Sequential::push_back(std::string name, std::shared_ptr<Module> module) {
  add_child(std::move(name), module);
  modules_.push_back(std::move(module));
  return *this;
}

Module& Sequential::operator[](std::size_t index) {
  DNNX_CHECK_ARG(index < modules_.size(), "Sequential: index ", index, " is out of range; it has ",
                 modules_.size(), " modules");
  return *modules_[index];
}

Tensor Sequential::forward(const Tensor& src) {
  Tensor x = src;
  for (auto& module : modules_) x = module->forward(x);
  return x;
}

Tensor Sequential::backward(const Tensor& diff_dst) {
  Tensor diff = diff_dst;
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) diff = (*it)->backward(diff);
  return diff;
}

bool Sequential::modifies_input() const {
  return !modules_.empty() && modules_.front()->modifies_input();
}

SumModule::SumModule(const Context& context) : Module(context, OpKind::add) {}

// Note [sums in place]
// A residual sum's terms are usually temporaries nothing else holds: the last batch-norm's output
// of a branch, a convolution's gradient w.r.t. its input. Adding one term into the other then
// costs one pass over the data (read both, write one) instead of a copy and an add into a new
// tensor (a ResNet-50 step's 32 sums on an H200: about 1 ms against 3.6). A term is written only
// when the caller handed it over (moved in) and no other Tensor shares its storage
// (Tensor::sole_owner: a module that kept it for its backward, a caller's variable, a view of
// user memory all make it false); otherwise the sum goes into a new tensor as before.
Tensor SumModule::sum(Tensor a, Tensor b) {
  DNNX_CHECK_ARG(a.dims() == b.dims() && a.dtype() == b.dtype(), type_name(),
                 ": the terms of the sum differ: ", describe(a), " and ", describe(b));
  const Layout layout = detail::check_input(type_name(), a, 1, Dims::max_rank);
  DNNX_CHECK_ARG(b.is_dense(layout), type_name(),
                 ": the terms of the sum differ in layout: ", describe(a), " is ",
                 to_string(layout), ", ", describe(b), " is not");
  const AddDesc desc = AddDesc::from_dims(a.dims(), a.dims(), 1.0f, 1.0f, a.dtype(), layout);
  const std::string key = desc.key();
  Context& run_context = call_context(
      Direction::fwd, key, [&](Context& c) { return add_list(c, desc, Direction::fwd); });
  Tensor dst;
  if (a.sole_owner()) {
    dst = std::move(a);
  } else if (b.sole_owner()) {
    dst = std::move(b);
    b = std::move(a);
  } else {
    dst = detail::empty(context(), a.dims(), a.dtype(), layout);
    const AddDesc copy_desc = AddDesc::from_dims(a.dims(), a.dims(), 1.0f, 0.0f, a.dtype(), layout);
    Context& copy_context = call_context(Direction::fwd, copy_desc.key(), [&](Context& c) {
      return add_list(c, copy_desc, Direction::fwd);
    });
    add_fwd(copy_context, copy_desc, a, dst);
  }
  record(Direction::fwd, add_fwd(run_context, desc, b, dst), key);
  desc_ = desc;
  return dst;
}

std::shared_ptr<const Choice> SumModule::heuristic_choice(Direction direction) {
  if (direction != Direction::fwd) return nullptr;
  return detail::heuristic(context(), OpKind::add, direction, desc_, add_select);
}

std::optional<ProfileResult> SumModule::profile(Direction direction) {
  if (direction != Direction::fwd) return std::nullopt;
  return detail::profile(context(), OpKind::add, direction, desc_, add_profile);
}

Residual::Residual(const Context& context,
                   std::vector<std::pair<std::string, std::shared_ptr<Module>>> branches,
                   std::shared_ptr<Activation> post)
    : SumModule(context), post_(std::move(post)) {
  DNNX_CHECK_ARG(!branches.empty(), "Residual: needs at least one branch");
  int identities = 0;
  for (auto& [name, branch] : branches) {
    if (branch == nullptr) {
      ++identities;
    } else {
      DNNX_CHECK_ARG(branches.size() == 1 || !branch->modifies_input(), "Residual: branch ", name,
                     " (", branch->type_name(),
                     ") writes its result over its input, which the other branches read; make "
                     "its first layer out of place");
      add_child(name, branch);
    }
    branches_.push_back(branch);
  }
  DNNX_CHECK_ARG(identities <= 1, "Residual: ", identities,
                 " identity branches; at most one (scale a branch instead)");
  if (post_) add_child("post", post_);
}

Tensor Residual::forward(const Tensor& src) {
  Tensor total;
  for (auto& branch : branches_) {
    Tensor out = branch ? branch->forward(src) : src;
    total = total.is_null() && total.rank() == 0 ? std::move(out)
                                                 : sum(std::move(total), std::move(out));
  }
  // A single branch's output is the sum itself; post may act in place on it.
  return post_ ? post_->forward(total) : total;
}

Tensor Residual::backward(const Tensor& diff_dst) {
  const Tensor diff = post_ ? post_->backward(diff_dst) : diff_dst;
  Tensor total;
  for (auto it = branches_.rbegin(); it != branches_.rend(); ++it) {
    Tensor out = *it ? (*it)->backward(diff) : diff;
    total = total.is_null() && total.rank() == 0 ? std::move(out)
                                                 : sum(std::move(total), std::move(out));
  }
  return total;
}

}  // namespace dnnx::nn
