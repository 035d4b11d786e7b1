#pragma once
/// \file
/// Containers: Sequential (children run in order, backward in reverse) and Residual (the sum of
/// branches applied to the same input, optionally followed by an activation), enough to express
/// ResNets.

#include <dnnx/nn/layers.hpp>
#include <dnnx/nn/module.hpp>
#include <dnnx/ops/add.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dnnx::nn {

/// torch.nn.Sequential: children named "0", "1", ... (or as given), forward in order, backward in
/// reverse order.
class Sequential : public Module {
 public:
  explicit Sequential(const Context& context);
  Sequential(const Context& context, std::vector<std::shared_ptr<Module>> modules);

  /// Appends `module` named by its position ("3").
  Sequential& push_back(std::shared_ptr<Module> module);
  /// Appends `module` named `name` (an OrderedDict entry of torch.nn.Sequential).
  Sequential& push_back(std::string name, std::shared_ptr<Module> module);
  std::size_t size() const { return modules_.size(); }
  /// The i-th child; InvalidArgument when out of range.
  Module& operator[](std::size_t index);

  std::string type_name() const override { return "Sequential"; }
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  bool modifies_input() const override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// The base of modules whose output is a sum of tensors (Residual, the ResNet blocks): runs the
/// add op (fwd) under the module's policies. The gradient of a sum w.r.t. each term is the sum's
/// gradient itself, so the backward runs no add.
class SumModule : public Module {
 public:
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

 protected:
  explicit SumModule(const Context& context);
  /// a + b (same dims and dtype). Written into a or b when that term's storage is held by
  /// nothing else (hand temporaries over with std::move), else into a new tensor (add with beta 0
  /// then with beta 1): Note [sums in place].
  Tensor sum(Tensor a, Tensor b);

 private:
  std::optional<AddDesc> desc_;
};

/// Sum of branches: dst = post(branch_0(x) + branch_1(x) + ...), where a null branch is the
/// identity (a ResNet shortcut). Branches are children named as given; `post` (an activation,
/// optional) runs on the sum and is a child named "post". Backward hands the gradient to every
/// branch and sums their input gradients. A branch whose first layer writes over its input (an
/// in-place activation) would destroy the input of the others: refused with InvalidArgument.
class Residual : public SumModule {
 public:
  /// `branches`: (name, module or null for the identity); at least one, at most one identity.
  Residual(const Context& context,
           std::vector<std::pair<std::string, std::shared_ptr<Module>>> branches,
           std::shared_ptr<Activation> post = nullptr);

  std::string type_name() const override { return "Residual"; }
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;

 private:
  std::vector<std::shared_ptr<Module>> branches_;
  std::shared_ptr<Activation> post_;
};

}  // namespace dnnx::nn
