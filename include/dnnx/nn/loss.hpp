#pragma once
/// \file
/// torch.nn.CrossEntropyLoss on N x C logits and, per position, on N x C x spatial logits
/// (cudnn.torch's SpatialCrossEntropyCriterion / VolumetricCrossEntropyCriterion), with class
/// weights, ignore_index and every reduction the xent op offers. label_smoothing and
/// probability targets are not offered by the op (the constructor has no such option).

#include <dnnx/nn/module.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dnnx::nn {

/// torch.nn.CrossEntropyLoss's arguments that the xent op supports.
struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean, sum
  std::int64_t ignore_index = -100;       ///< label marking a position as ignored
  /// Per-class weights (f32 {C} on the loss's device), or a null Tensor for none.
  Tensor weight;
};

/// The loss between logits and integer labels. forward(logits, labels) keeps both for
/// backward(); the gradient w.r.t. the logits comes from backward(diff_loss) or backward() (a
/// diff_loss of ones, d loss / d logits). The weight is a buffer ("weight", as PyTorch's). Runs
/// the xent op: fwd and bwd_data.
class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(const Context& context, CrossEntropyOptions options = {});

  std::string type_name() const override { return "CrossEntropyLoss"; }
  std::string extra_repr() const override;
  /// The loss needs labels: throws InvalidArgument pointing to forward(logits, labels).
  Tensor forward(const Tensor& src) override;
  /// loss (dims {1}, or labels' dims for Reduction::none; the logits' dtype) of `logits`
  /// (N x C x spatial..., dense NCHW) against `labels` (N x spatial..., i32 or i64).
  Tensor forward(const Tensor& logits, const Tensor& labels);
  /// diff_logits given diff_loss (the loss's dims and dtype).
  Tensor backward(const Tensor& diff_loss) override;
  /// diff_logits for a diff_loss of ones.
  Tensor backward();
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

 private:
  CrossEntropyOptions options_;
  std::optional<CrossEntropyDesc> desc_;
  Tensor logits_, labels_;
};

}  // namespace dnnx::nn
