#pragma once
/// \file
/// Recurrent layers: torch.nn.RNN (tanh or relu), torch.nn.LSTM and torch.nn.GRU, with PyTorch's
/// constructor arguments, parameter names (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0,
/// ..._reverse), initialisation and repr. They run the rnn op (include/dnnx/ops/rnn.hpp):
/// fwd (eval), fwd_training, bwd_data and bwd_weights, each with its own policy.

#include <dnnx/nn/module.hpp>
#include <dnnx/ops/dropout.hpp>
#include <dnnx/ops/rnn.hpp>
#include <dnnx/saved_state.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::nn {

/// The arguments of torch.nn.RNN / LSTM / GRU besides input_size and hidden_size.
struct RnnOptions {
  std::int64_t num_layers = 1;  ///< stacked layers (>= 1)
  bool bias = true;             ///< b_ih and b_hh in every layer and direction
  bool batch_first = false;     ///< input and output {N, T, C} instead of {T, N, C}
  /// In training, dropout with this probability on every layer's output but the last's, in
  /// [0, 1) (Note [rnn module dropout]).
  double dropout = 0.0;
  bool bidirectional = false;  ///< a reverse direction per layer, outputs concatenated
};

/// What a recurrent layer's forward returns (PyTorch's `output, h_n` / `output, (h_n, c_n)`).
struct RnnOutput {
  Tensor output;  ///< {T, N, D*H} ({N, T, D*H} with batch_first); 0 past a sequence's end
  Tensor h_n;     ///< {num_layers * D, N, H}: the final hidden state of every layer and direction
  Tensor c_n;     ///< LSTM: the final cell state, like h_n; a null Tensor otherwise
};

/// What a recurrent layer's backward returns.
struct RnnGradients {
  Tensor diff_input;  ///< like the input; 0 past a sequence's end
  Tensor diff_h0;     ///< like h_n (the gradient w.r.t. the initial hidden state, zeros or given)
  Tensor diff_c0;     ///< LSTM: like c_n; a null Tensor otherwise
};

/// The base of RNN, LSTM and GRU (torch.nn.RNNBase).
///
/// The parameters are views of one flat tensor in the op's weight layout (PyTorch's
/// _flat_weights order), and their gradients views of one flat gradient, so every call hands
/// the op a single weights tensor without copies (flat_weights(), flat_grads()). Tensors taken
/// from the parameters (state_dict(), an optimizer's) are views: they live as long as the module
/// and its flat storage. load_state_dict copies into that storage; to() (convert) allocates a new
/// one, so optimizers built before must be built again, as for every module.
///
/// Inputs are dense channels_first tensors of the weights' dtype, rank 3 (batched; PyTorch's
/// unbatched rank-2 input is not taken). `lengths` ({N}, i32 or i64, host memory, each in
/// [1, T], any order) makes sequence n lengths[n] steps long, as PyTorch's
/// pack_padded_sequence(enforce_sorted=False): output past its end is 0, its final state is
/// taken at its end, the reverse direction starts there.
class RNNBase : public Module {
 public:
  /// Throws InvalidArgument for sizes < 1, num_layers < 1 or dropout outside [0, 1).
  RNNBase(const Context& context, RnnCell cell, std::int64_t input_size, std::int64_t hidden_size,
          RnnOptions options = {});

  std::string type_name() const override;
  std::string extra_repr() const override;

  /// The output for `input` from zero initial states, every sequence T steps long.
  Tensor forward(const Tensor& input) override;
  /// The output and final states for `input` from the initial states `h0` (and `c0` for LSTM;
  /// null Tensors are zeros), with per-sequence `lengths` when not null. In training mode keeps
  /// what backward needs.
  RnnOutput forward(const Tensor& input, const Tensor& h0, const Tensor& c0 = Tensor(),
                    const Tensor& lengths = Tensor());
  /// The gradient w.r.t. the last training forward's input from the gradient w.r.t. its output
  /// (the final states' gradients zero); adds the parameter gradients.
  Tensor backward(const Tensor& diff_output) override;
  /// The gradients w.r.t. the input and the initial states from those w.r.t. the output and the
  /// final states (null Tensors are zeros); adds the parameter gradients. Throws InvalidArgument
  /// when no training forward ran since the last backward, or for tensors of other dims or dtype.
  RnnGradients backward(const Tensor& diff_output, const Tensor& diff_h_n,
                        const Tensor& diff_c_n = Tensor());

  std::shared_ptr<const Choice> heuristic_choice(Direction direction) override;
  std::optional<ProfileResult> profile(Direction direction) override;

  RnnCell cell() const { return cell_; }
  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }
  const RnnOptions& options() const { return options_; }
  /// Every parameter's values, in the op's weight layout ({weights_count()}).
  const Tensor& flat_weights() const { return flat_weights_; }
  /// Every parameter's gradient, likewise.
  const Tensor& flat_grads() const { return flat_grads_; }
  /// The desc of the whole stack for `batch` sequences of `seq_length` steps in the weights'
  /// dtype (dropout 0: the module applies dropout itself, Note [rnn module dropout]).
  RnnDesc desc_for(std::int64_t seq_length, std::int64_t batch, bool variable_lengths) const;
  /// The desc the last call of `direction` ran (the last layer's when layers ran one at a time).
  const std::optional<RnnDesc>& desc(Direction direction) const {
    return descs_[static_cast<std::size_t>(direction)];
  }

 protected:
  void on_tensors_changed() override;

 private:
  struct LayerSaved {
    Tensor input;           // the layer's input (after the dropout below it)
    Tensor output;          // the layer's output (before dropout)
    SavedState state;       // the rnn op's
    SavedState mask;        // the dropout op's, on the output (not the last layer)
    DropoutDesc dropout{};  // the dropout desc of the output
  };
  void pack();
  std::shared_ptr<const Choice> run_forward(const RnnDesc& desc, const RnnForward& tensors,
                                            SavedState* state);
  RnnCell cell_;
  std::int64_t input_size_, hidden_size_;
  RnnOptions options_;
  Tensor flat_weights_, flat_grads_;
  std::array<std::optional<RnnDesc>, direction_count> descs_;
  // What the last training forward kept for backward.
  bool saved_ = false;
  bool split_ = false;
  RnnDesc saved_desc_{};
  Tensor h0_, c0_, lengths_;
  Dims output_dims_;
  std::vector<LayerSaved> layers_;
};

/// torch.nn.RNN: h' = tanh or relu of W_ih x + b_ih + W_hh h + b_hh.
class RNN : public RNNBase {
 public:
  /// `nonlinearity` "tanh" or "relu" (InvalidArgument otherwise).
  RNN(const Context& context, std::int64_t input_size, std::int64_t hidden_size,
      RnnOptions options = {}, std::string_view nonlinearity = "tanh");
};

/// torch.nn.LSTM (no proj_size).
class LSTM : public RNNBase {
 public:
  LSTM(const Context& context, std::int64_t input_size, std::int64_t hidden_size,
       RnnOptions options = {})
      : RNNBase(context, RnnCell::lstm, input_size, hidden_size, options) {}
};

/// torch.nn.GRU.
class GRU : public RNNBase {
 public:
  GRU(const Context& context, std::int64_t input_size, std::int64_t hidden_size,
      RnnOptions options = {})
      : RNNBase(context, RnnCell::gru, input_size, hidden_size, options) {}
};

}  // namespace dnnx::nn
