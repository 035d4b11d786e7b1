#pragma once
/// \file
/// Layers: convolution, linear, batch normalization, activations, pooling, flatten, dropout,
/// softmax, identity. Names, arguments, defaults, initialisation and state_dict keys are
/// PyTorch's (torch.nn.Conv2d, ...). Each runs one op (Module::op()) whose per-direction policies
/// it owns. Data tensors are dense channels_first (NCHW) or channels_last (NHWC): Note [nn
/// layouts] in module.hpp. Layers with weights take inputs of their weights' dtype, the others
/// compute in their input's dtype.

#include <dnnx/nn/module.hpp>
#include <dnnx/ops/activation.hpp>
#include <dnnx/ops/batch_norm.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/dropout.hpp>
#include <dnnx/ops/matmul.hpp>
#include <dnnx/ops/optim.hpp>
#include <dnnx/ops/pool.hpp>
#include <dnnx/ops/softmax.hpp>
#include <dnnx/saved_state.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::nn {

/// Convolution arguments besides the channels and kernel (torch.nn.ConvNd's). Each spatial list
/// has one entry per spatial dim or a single entry for all.
struct ConvOptions {
  std::vector<std::int64_t> stride{1};    ///< elements
  std::vector<std::int64_t> padding{0};   ///< zero padding on both sides, elements
  std::vector<std::int64_t> dilation{1};  ///< 1 = dense kernel
  std::int64_t groups = 1;                ///< divides both channel counts
  bool bias = true;                       ///< learnable bias of out_channels
};

/// 1-, 2- or 3-D convolution (torch.nn.Conv1d/2d/3d): weight O x I/groups x kernel..., bias O;
/// initialised as PyTorch does (kaiming_uniform with a = sqrt(5), bias U(+-1/sqrt(fan_in))).
/// Runs the conv op: fwd, bwd_data, bwd_weights.
class Conv : public Module {
 public:
  /// Throws InvalidArgument for spatial_dims outside 1..3, non-positive sizes, list lengths
  /// other than 1 or spatial_dims, or channels not divisible by groups.
  Conv(const Context& context, int spatial_dims, std::int64_t in_channels,
       std::int64_t out_channels, std::vector<std::int64_t> kernel_size, ConvOptions options = {});

  std::string type_name() const override;
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

  Parameter& weight() { return parameter("weight"); }
  /// Throws Internal when built without bias.
  Parameter& bias() { return parameter("bias"); }
  bool has_bias() const { return options_.bias; }
  /// The desc of the last forward (nullopt before).
  const std::optional<ConvDesc>& desc() const { return desc_; }
  /// The layout the weights are stored in: channels_first until to_layout (Note [nn layouts]).
  Layout weights_layout() const { return weights_layout_; }
  void to_layout(Layout layout) override;

 private:
  int spatial_dims_;
  std::int64_t in_channels_, out_channels_;
  std::vector<std::int64_t> kernel_;
  ConvOptions options_;
  Layout weights_layout_ = Layout::channels_first;
  std::optional<ConvDesc> desc_;
  Tensor src_;
};

/// torch.nn.Conv1d.
class Conv1d : public Conv {
 public:
  Conv1d(const Context& context, std::int64_t in_channels, std::int64_t out_channels,
         std::vector<std::int64_t> kernel_size, ConvOptions options = {})
      : Conv(context, 1, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};
/// torch.nn.Conv2d.
class Conv2d : public Conv {
 public:
  Conv2d(const Context& context, std::int64_t in_channels, std::int64_t out_channels,
         std::vector<std::int64_t> kernel_size, ConvOptions options = {})
      : Conv(context, 2, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};
/// torch.nn.Conv3d.
class Conv3d : public Conv {
 public:
  Conv3d(const Context& context, std::int64_t in_channels, std::int64_t out_channels,
         std::vector<std::int64_t> kernel_size, ConvOptions options = {})
      : Conv(context, 3, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};

/// torch.nn.Linear: dst {N, out} = src {N, in} weight^T + bias; weight out x in. Runs the matmul
/// op: fwd, bwd_data, bwd_weights (the weight gradient accumulates through the op's beta).
class Linear : public Module {
 public:
  Linear(const Context& context, std::int64_t in_features, std::int64_t out_features,
         bool bias = true);

  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

  Parameter& weight() { return parameter("weight"); }
  Parameter& bias() { return parameter("bias"); }
  bool has_bias() const { return bias_; }

 private:
  MatmulDesc desc_for(std::int64_t rows, Direction direction, bool accumulate);
  std::int64_t in_features_, out_features_;
  bool bias_;
  std::array<std::optional<MatmulDesc>, direction_count> descs_;
  Tensor src_;
};

/// Batch normalization arguments (torch.nn.BatchNormNd's).
struct BatchNormOptions {
  double eps = 1e-5;      ///< added to the variance; > 0
  /// running = (1 - momentum) running + momentum batch, in [0, 1]; std::nullopt is PyTorch's
  /// momentum=None, the cumulative average: running += (batch - running) / num_batches_tracked
  /// (Note [batch norm cumulative average] in src/nn/batch_norm.cpp).
  std::optional<double> momentum = 0.1;
  bool affine = true;     ///< learnable weight (scale) and bias (shift)
  /// Keep running_mean / running_var / num_batches_tracked and use them in eval mode; false:
  /// batch statistics in both modes, no buffers.
  bool track_running_stats = true;
};

/// torch.nn.BatchNorm1d (N x C or N x C x L), BatchNorm2d (N x C x H x W), BatchNorm3d
/// (N x C x D x H x W): statistics per channel. weight (ones) and bias (zeros), running_mean
/// (zeros), running_var (ones) are f32 whatever the data dtype (as cuDNN and PyTorch's autocast);
/// num_batches_tracked is i64 {} (rank 0, as PyTorch's), counted on the host and kept on the
/// host. Runs the bnorm op: fwd and its backward (bwd_data); with momentum=None also the sgd op
/// (the running average). Backward after an eval-mode forward uses the running statistics
/// (frozen batch norm; Note [eval mode and gradients]).
class BatchNorm : public Module {
 public:
  /// `spatial_dims` 0 means BatchNorm1d (rank 2 or 3 inputs), else 1..3 as the number of the
  /// class (BatchNorm2d is 2). Throws InvalidArgument for bad arguments.
  BatchNorm(const Context& context, int spatial_dims, std::int64_t num_features,
            BatchNormOptions options = {});

  std::string type_name() const override;
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

  Parameter& weight() { return parameter("weight"); }
  Parameter& bias() { return parameter("bias"); }
  /// Training forwards since construction or the last load_state_dict.
  std::int64_t num_batches_tracked() const { return batches_; }

 protected:
  DType parameter_dtype(const Context&) const override { return DType::f32; }
  void load_buffer(const std::string& name, const Tensor& value, Tensor& buffer) override;
  void refresh_buffers() override;
  void on_tensors_changed() override;

 private:
  BatchNormDesc desc_for(const Tensor& src, bool training) const;
  void update_cumulative_average();
  int class_dims_;
  std::int64_t features_;
  BatchNormOptions options_;
  std::int64_t batches_ = 0;
  std::optional<BatchNormDesc> desc_;
  Tensor src_, saved_mean_, saved_inv_std_;
  // momentum=None: the batch statistics of the last training forward, and the sgd op's desc
  // and step count that fold them into the running ones.
  std::array<Tensor, 2> batch_stats_;
  std::optional<SgdDesc> average_desc_;
  Tensor average_step_;
};

/// torch.nn.BatchNorm1d.
class BatchNorm1d : public BatchNorm {
 public:
  BatchNorm1d(const Context& context, std::int64_t num_features, BatchNormOptions options = {})
      : BatchNorm(context, 0, num_features, options) {}
};
/// torch.nn.BatchNorm2d.
class BatchNorm2d : public BatchNorm {
 public:
  BatchNorm2d(const Context& context, std::int64_t num_features, BatchNormOptions options = {})
      : BatchNorm(context, 2, num_features, options) {}
};
/// torch.nn.BatchNorm3d.
class BatchNorm3d : public BatchNorm {
 public:
  BatchNorm3d(const Context& context, std::int64_t num_features, BatchNormOptions options = {})
      : BatchNorm(context, 3, num_features, options) {}
};

/// An elementwise activation (torch.nn.ReLU, ReLU6 / Hardtanh(0, ceiling), Tanh, Sigmoid, ELU,
/// SiLU), optionally in place. Runs the act op: fwd and bwd_data.
///
/// Note [activation saved tensors]
/// Out of place, the forward keeps its input (every kind's backward can work from it), so a later
/// in-place layer writing over this layer's output changes nothing here. In place, the output
/// has replaced the input and the backward works from the output, which relu, clipped relu, tanh,
/// sigmoid and elu (alpha >= 0) allow; SiLU and elu with a negative alpha refuse inplace
/// (Unsupported at construction). The backward always writes a new gradient tensor, never over
/// diff_dst, which a residual block hands to several branches.
///
/// One activation module may serve several places of a block (torchvision's BasicBlock applies
/// its `relu` twice): forward_at(slot, x) / backward_at(slot, dy) keep each place's tensors
/// apart; forward / backward are slot 0.
class Activation : public Module {
 public:
  Activation(const Context& context, ActivationKind kind, bool inplace = false, double alpha = 1.0,
             double ceiling = 6.0);

  std::string type_name() const override;
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override { return forward_at(0, src); }
  Tensor backward(const Tensor& diff_dst) override { return backward_at(0, diff_dst); }
  Tensor forward_at(std::size_t slot, const Tensor& src);
  Tensor backward_at(std::size_t slot, const Tensor& diff_dst);
  bool modifies_input() const override { return inplace_; }
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

  ActivationKind kind() const { return kind_; }
  bool inplace() const { return inplace_; }

 private:
  ActivationDesc desc_for(const Tensor& src) const;
  ActivationKind kind_;
  bool inplace_;
  double alpha_, ceiling_;
  std::array<std::optional<ActivationDesc>, direction_count> descs_;
  std::vector<Tensor> saved_;  // per slot: src (out of place) or dst (in place)
};

/// torch.nn.ReLU.
class ReLU : public Activation {
 public:
  explicit ReLU(const Context& context, bool inplace = false)
      : Activation(context, ActivationKind::relu, inplace) {}
};
/// min(max(x, 0), ceiling): torch.nn.ReLU6 for 6, Hardtanh(0, ceiling) otherwise.
class ClippedReLU : public Activation {
 public:
  explicit ClippedReLU(const Context& context, double ceiling = 6.0, bool inplace = false)
      : Activation(context, ActivationKind::clipped_relu, inplace, 1.0, ceiling) {}
};
/// torch.nn.Tanh.
class Tanh : public Activation {
 public:
  explicit Tanh(const Context& context, bool inplace = false)
      : Activation(context, ActivationKind::tanh, inplace) {}
};
/// torch.nn.Sigmoid.
class Sigmoid : public Activation {
 public:
  explicit Sigmoid(const Context& context, bool inplace = false)
      : Activation(context, ActivationKind::sigmoid, inplace) {}
};
/// torch.nn.ELU.
class ELU : public Activation {
 public:
  explicit ELU(const Context& context, double alpha = 1.0, bool inplace = false)
      : Activation(context, ActivationKind::elu, inplace, alpha) {}
};
/// torch.nn.SiLU (swish); inplace is Unsupported (Note [activation saved tensors]).
class SiLU : public Activation {
 public:
  explicit SiLU(const Context& context, bool inplace = false)
      : Activation(context, ActivationKind::swish, inplace) {}
};

/// Pooling arguments (torch.nn.MaxPoolNd / AvgPoolNd). Spatial lists have one entry per spatial
/// dim or a single one for all; an empty stride is the kernel size (PyTorch's default).
struct PoolOptions {
  std::vector<std::int64_t> stride{};     ///< elements; empty = kernel_size
  std::vector<std::int64_t> padding{0};   ///< implicit padding on both sides, elements
  std::vector<std::int64_t> dilation{1};  ///< max pooling only
  bool ceil_mode = false;                 ///< round output sizes up
  bool count_include_pad = true;          ///< average pooling: padding counts as zeros
};

/// Max or average pooling, 1-3 D (torch.nn.MaxPool1d/2d/3d, AvgPool1d/2d/3d). Max pooling keeps
/// its argmax indices for the backward (so an in-place layer after it cannot disturb it); average
/// pooling keeps its input and output. Runs the pool op: fwd and bwd_data.
class Pool : public Module {
 public:
  /// Throws InvalidArgument for bad arguments (a dilation other than 1 for averages).
  Pool(const Context& context, int spatial_dims, PoolMode mode, std::vector<std::int64_t> kernel,
       PoolOptions options = {});

  std::string type_name() const override;
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

 protected:
  /// A global average pooling (GlobalAvgPool): the window is the input's spatial size.
  Pool(const Context& context, int spatial_dims, bool global);
  int spatial_dims() const { return spatial_dims_; }

 private:
  PoolDesc desc_for(const Tensor& src) const;
  bool global_ = false;
  int spatial_dims_;
  PoolMode mode_;
  std::vector<std::int64_t> kernel_;
  PoolOptions options_;
  std::optional<PoolDesc> desc_;
  Tensor src_, dst_, indices_;
};

/// torch.nn.MaxPool2d and friends.
class MaxPool1d : public Pool {
 public:
  MaxPool1d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 1, PoolMode::max, std::move(kernel), std::move(options)) {}
};
class MaxPool2d : public Pool {
 public:
  MaxPool2d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 2, PoolMode::max, std::move(kernel), std::move(options)) {}
};
class MaxPool3d : public Pool {
 public:
  MaxPool3d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 3, PoolMode::max, std::move(kernel), std::move(options)) {}
};
/// torch.nn.AvgPool2d and friends (options.count_include_pad picks the mode).
class AvgPool1d : public Pool {
 public:
  AvgPool1d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 1, PoolMode::avg_include_pad, std::move(kernel), std::move(options)) {}
};
class AvgPool2d : public Pool {
 public:
  AvgPool2d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 2, PoolMode::avg_include_pad, std::move(kernel), std::move(options)) {}
};
class AvgPool3d : public Pool {
 public:
  AvgPool3d(const Context& context, std::vector<std::int64_t> kernel, PoolOptions options = {})
      : Pool(context, 3, PoolMode::avg_include_pad, std::move(kernel), std::move(options)) {}
};

/// Global average pooling: the mean over every spatial position of each channel, N x C x 1...
/// (torch.nn.AdaptiveAvgPool{1,2,3}d with output size 1, the only size offered): a Pool whose
/// window is the input's size.
class GlobalAvgPool : public Pool {
 public:
  GlobalAvgPool(const Context& context, int spatial_dims);

  std::string type_name() const override;
  std::string extra_repr() const override;
};

/// torch.nn.Flatten: dims start_dim..end_dim merged into one, in logical (PyTorch's) order: a view
/// (no copy, no op) of a channels_first input; a channels_last input with a spatial extent is
/// copied into channels_first first, and backward copies the gradient back (Note [layout changes
/// in nn]: through the host on a GPU).
class Flatten : public Module {
 public:
  /// Negative dims count from the end, as PyTorch's.
  explicit Flatten(const Context& context, int start_dim = 1, int end_dim = -1);

  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;

 private:
  int start_, end_;
  Dims src_dims_, dst_dims_;
  Layout src_layout_ = Layout::channels_first;
  bool saved_ = false;
};

/// torch.nn.Dropout: in training, drops each element with probability p (scaling the rest by
/// 1 / (1 - p)) with a mask drawn from default_generator(); the identity in eval mode, forward
/// and backward (the backward returns diff_dst itself). Runs the dropout op: fwd_training and
/// bwd_data.
class Dropout : public Module {
 public:
  explicit Dropout(const Context& context, float p = 0.5f);

  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

 private:
  float p_;
  std::optional<DropoutDesc> desc_;
  SavedState state_;
  bool saved_ = false;
  bool identity_ = false;  // the last forward ran in eval mode
};

/// Softmax or log-softmax over the channels of every position (torch.nn.Softmax(dim=1),
/// cudnn.torch's SoftMax / SpatialSoftMax / VolumetricSoftMax) or over everything of each sample
/// (SoftmaxMode::instance). Keeps its output for the backward. Runs the softmax op.
class Softmax : public Module {
 public:
  explicit Softmax(const Context& context, SoftmaxMode mode = SoftmaxMode::channel,
                   bool log = false);

  std::string type_name() const override { return log_ ? "LogSoftmax" : "Softmax"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& src) override;
  Tensor backward(const Tensor& diff_dst) override;
  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

 private:
  SoftmaxMode mode_;
  bool log_;
  std::optional<SoftmaxDesc> desc_;
  Tensor dst_;
};

/// torch.nn.LogSoftmax(dim=1).
class LogSoftmax : public Softmax {
 public:
  explicit LogSoftmax(const Context& context, SoftmaxMode mode = SoftmaxMode::channel)
      : Softmax(context, mode, true) {}
};

/// torch.nn.Identity.
class Identity : public Module {
 public:
  explicit Identity(const Context& context) : Module(context) {}
  std::string type_name() const override { return "Identity"; }
  Tensor forward(const Tensor& src) override { return src; }
  Tensor backward(const Tensor& diff_dst) override { return diff_dst; }
};

}  // namespace dnnx::nn
