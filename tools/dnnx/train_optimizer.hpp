#pragma once
// The optimizer of `dnnx train`: torch.optim.SGD / Adam / AdamW over a model's parameters on the
// multi-tensor optimizer ops, with its state (momentum buffers, moments, step counts, f32 master
// copies) named, so that a checkpoint can save it and --resume restore it. nn::SGD and nn::Adam
// run the same ops but keep their state private (Note [train optimizer state]).

#include <dnnx/dnnx.hpp>
#include <dnnx/nn/module.hpp>
#include <dnnx/nn/optim.hpp>
#include <dnnx/safetensors.hpp>

#include <string>
#include <utility>
#include <vector>

namespace dnnx::cli {

enum class OptimizerKind { sgd, adam, adamw };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.01;
  double momentum = 0.0;      ///< SGD only
  double weight_decay = 0.0;  ///< L2 (SGD, Adam) or decoupled (AdamW)
  bool nesterov = false;      ///< SGD only
};

/// "sgd", "adam", "adamw".
const char* to_string(OptimizerKind kind);

class TrainOptimizer {
 public:
  TrainOptimizer(Context context, nn::Module& model, OptimizerConfig config);
  /// One step of every dtype group.
  void step();
  /// The state as named tensors: "<parameter>.momentum_buffer" (SGD with momentum),
  /// "<parameter>.exp_avg" and ".exp_avg_sq" (Adam, AdamW), "<parameter>.master" (f16 / bf16
  /// parameters' f32 master copies) and "step.<dtype>" per group.
  void save_state(safetensors::File& file) const;
  /// Copies a state saved by save_state into this optimizer; throws InvalidArgument naming the
  /// missing tensor or a shape that differs.
  void load_state(const safetensors::File& file);

 private:
  struct Group {
    nn::ParameterGroup tensors;
    std::vector<std::string> names;
    // Each parameter's dims and layout: a channels_last parameter's state is held flat
    // (nn::group_parameters) and saved as a view in the parameter's dims and layout, so that a
    // checkpoint holds PyTorch's order whatever the layout.
    std::vector<std::pair<Dims, Layout>> stored;
    SgdDesc sgd;
    AdamDesc adam;
    std::vector<Tensor> first;   // momentum buffers or exp_avg
    std::vector<Tensor> second;  // exp_avg_sq
    Tensor step;
  };
  Context context_;
  OptimizerConfig config_;
  std::vector<Group> groups_;
};

}  // namespace dnnx::cli
