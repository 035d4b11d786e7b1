#pragma once
/// \file
/// Optimizers over a module's parameters, on the multi-tensor optimizer ops
/// (include/dnnx/ops/optim.hpp): one op call per dtype group of parameters and step. With f16 /
/// bf16 parameters the op updates their f32 master copies (Parameter::master) and writes the
/// rounded values back, so a model converted to half precision trains as nnabla's
/// type_config='half' does.

#include <dnnx/nn/module.hpp>
#include <dnnx/ops/optim.hpp>

#include <memory>
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

/// torch.optim.SGD over `parameters` (model.parameters()), with momentum buffers when
/// hyper.momentum > 0 and Nesterov when asked. The parameters' tensors must stay the same
/// objects (build the optimizer after nn::convert and load_state_dict is fine: it copies in
/// place).
class SGD {
 public:
  SGD(Context context, const std::vector<Parameter*>& parameters, SgdHyper hyper,
      bool nesterov = false);
  /// One step of every group (sgd op). A learning-rate schedule changes hyper() between steps.
  void step();
  SgdHyper& hyper() { return hyper_; }
  /// Zeroes every parameter's gradient.
  void zero_grad();
  /// The choice of the last step of each group.
  const std::vector<std::shared_ptr<const Choice>>& choices() const { return choices_; }

 private:
  Context context_;
  SgdHyper hyper_;
  std::vector<Parameter*> parameters_;
  std::vector<ParameterGroup> groups_;
  std::vector<SgdDesc> descs_;
  std::vector<std::vector<Tensor>> buffers_;
  std::vector<Tensor> steps_;
  std::vector<std::shared_ptr<const Choice>> choices_;
};

/// torch.optim.Adam (torch.optim.AdamW with decoupled) over `parameters`.
class Adam {
 public:
  Adam(Context context, const std::vector<Parameter*>& parameters, AdamHyper hyper = {},
       bool decoupled_weight_decay = false, bool amsgrad = false);
  void step();
  AdamHyper& hyper() { return hyper_; }
  void zero_grad();
  const std::vector<std::shared_ptr<const Choice>>& choices() const { return choices_; }

 private:
  Context context_;
  AdamHyper hyper_;
  std::vector<Parameter*> parameters_;
  std::vector<ParameterGroup> groups_;
  std::vector<AdamDesc> descs_;
  std::vector<std::vector<Tensor>> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
  std::vector<Tensor> steps_;
  std::vector<std::shared_ptr<const Choice>> choices_;
};

}  // namespace dnnx::nn
