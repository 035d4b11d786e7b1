#pragma once
/// \file
/// Recurrent layers as torch.nn.RNN (relu or tanh), torch.nn.LSTM and torch.nn.GRU compute them:
/// stacked layers, one or two directions, dropout between layers, initial and final states,
/// sequences of different lengths in one padded batch (PyTorch's PackedSequence), the forward for
/// inference, the forward for training (which keeps its state for the backward in a SavedState),
/// the backward w.r.t. the input and the initial states, and the backward w.r.t. the weights.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/random.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// The recurrent cell. Gate order and formulas are PyTorch's (docs/ops/rnn.md):
///   rnn_relu / rnn_tanh: h' = act(W_ih x + b_ih + W_hh h + b_hh)
///   lstm (gates i, f, g, o): i = s(.), f = s(.), g = tanh(.), o = s(.) of W_ih x + b_ih + W_hh h +
///        b_hh (each a block of H rows); c' = f c + i g; h' = o tanh(c')
///   gru (gates r, z, n): r = s(W_ir x + b_ir + W_hr h + b_hr), z likewise,
///        n = tanh(W_in x + b_in + r (W_hn h + b_hn)); h' = (1 - z) n + z h
/// (s the logistic sigmoid; the GRU is the "linear before reset" form, as PyTorch and cuDNN).
enum class RnnCell : std::uint8_t { rnn_relu, rnn_tanh, lstm, gru };

/// "rnn_relu", "rnn_tanh", "lstm", "gru".
std::string_view to_string(RnnCell cell);
/// Parses those names (and "relu", "tanh"); throws InvalidArgument listing them.
RnnCell parse_rnn_cell(std::string_view text);

/// One matrix or vector of a layer and direction in the flat weights (PyTorch's names).
enum class RnnWeight : std::uint8_t {
  w_ih,  ///< {gates * hidden, layer input}: input-to-hidden
  w_hh,  ///< {gates * hidden, hidden}: hidden-to-hidden
  b_ih,  ///< {gates * hidden}
  b_hh,  ///< {gates * hidden}
};

/// What a recurrent layer computes. Plain data: comparable, hashable, printable; the cache key.
///
/// Tensors (T = seq_length, N = batch, D = 2 if bidirectional else 1, H = hidden_size):
///   src     {T, N, input_size} ({N, T, input_size} when batch_first)
///   dst     {T, N, D * H} ({N, T, D * H} when batch_first): the last layer's outputs, the
///           forward direction's in [0, H), the reverse's in [H, 2H)
///   hx, hy  {layers * D, N, H}: initial and final hidden state (entry layer * D + direction);
///           optional (a missing hx is zeros, a missing hy is not written)
///   cx, cy  {layers * D, N, H}: initial and final cell state, lstm only; optional likewise
///   weights {weights_count()}: the flat weights (weight_offset(); Note [rnn weight layout] in
///           src/core/rnn_desc.cpp): per layer, per direction, w_ih, w_hh, then b_ih, b_hh when
///           bias — the order of PyTorch's _flat_weights
///   lengths {N} i32 in host memory, with variable_lengths only: sequence n is lengths[n] steps
///           long, 1 <= lengths[n] <= T, in any order. dst past a sequence's end is 0, its final
///           state is taken at its own end, and the reverse direction starts at its own end
///           (PyTorch's pack_padded_sequence with enforce_sorted=False).
///
/// Every tensor is dense and row-major, of `dtype`; accumulation is f32 (f64 on the reference).
/// Between layers (not after the last), training forwards drop elements of a layer's output with
/// probability `dropout` (dnnx's Philox stream: Note [rnn dropout] in src/core/rnn_desc.cpp).
struct RnnDesc {
  RnnCell cell = RnnCell::lstm;   ///< the cell
  std::int64_t seq_length = 1;    ///< T (>= 1): the padded length
  std::int64_t batch = 1;         ///< N (>= 1)
  std::int64_t input_size = 1;    ///< features of src (>= 1)
  std::int64_t hidden_size = 1;   ///< H (>= 1)
  std::int64_t layers = 1;        ///< stacked layers (>= 1)
  bool bidirectional = false;     ///< a reverse direction per layer, outputs concatenated
  bool bias = true;               ///< b_ih and b_hh in every layer and direction
  bool batch_first = false;       ///< src and dst are {N, T, C} instead of {T, N, C}
  bool variable_lengths = false;  ///< calls pass per-sequence lengths
  float dropout = 0.0f;           ///< between layers in training forwards, in [0, 1)
  DType dtype = DType::f32;       ///< of every floating tensor (f32, f16, bf16)

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;

  /// 1 or 2.
  std::int64_t directions() const { return bidirectional ? 2 : 1; }
  /// Gates per cell: 1 (rnn_relu, rnn_tanh), 4 (lstm), 3 (gru).
  std::int64_t gates() const;
  /// Features of layer `layer`'s input: input_size for layer 0, D * H above.
  std::int64_t layer_input_size(std::int64_t layer) const;
  /// Dims of src, dst, and of each state (hx, hy, cx, cy).
  Dims src_dims() const;
  Dims dst_dims() const;
  Dims state_dims() const;
  /// Elements of the flat weights.
  std::int64_t weights_count() const;
  /// Where matrix `which` of (layer, direction) starts in the flat weights (elements), and its
  /// dims (rank 2 for w_ih / w_hh, 1 for biases). Throws InvalidArgument for a layer or direction
  /// out of range, or a bias when `bias` is false.
  std::int64_t weight_offset(std::int64_t layer, std::int64_t direction, RnnWeight which) const;
  Dims weight_dims(std::int64_t layer, std::int64_t direction, RnnWeight which) const;
  /// Elements a training forward's dropout draws (over every layer boundary): the Philox stream
  /// advances by ceil(dropout_draws() / 4) blocks; 0 without dropout.
  std::int64_t dropout_draws() const;

  /// The `dnnx` CLI line reproducing this case, e.g. `dnnx profile rnn --cell lstm --seq 25
  /// --batch 8 --input 128 --hidden 256 --layers 2 --bidirectional --dtype f16 --direction fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const RnnDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const RnnDesc& desc);

/// A view of matrix `which` of (layer, direction) in the flat `weights` (RnnDesc::weight_offset),
/// on the same memory and device. Throws InvalidArgument unless `weights` is dense and holds
/// desc.weights_count() elements of desc.dtype.
Tensor rnn_weight_view(const RnnDesc& desc, const Tensor& weights, std::int64_t layer,
                       std::int64_t direction, RnnWeight which);

/// The tensors of a forward. src, weights and dst are required; the states are optional (null);
/// lengths is required exactly when desc.variable_lengths.
struct RnnForward {
  const Tensor* src = nullptr;      ///< {T, N, input_size} (batch_first: {N, T, input_size})
  const Tensor* weights = nullptr;  ///< {weights_count()}
  const Tensor* hx = nullptr;       ///< {layers * D, N, H} or null (zeros)
  const Tensor* cx = nullptr;       ///< lstm: like hx
  const Tensor* lengths = nullptr;  ///< {N} i32 on the cpu, with variable_lengths
  Tensor* dst = nullptr;            ///< {T, N, D * H} (batch_first: {N, T, D * H})
  Tensor* hy = nullptr;             ///< like hx, or null (not written)
  Tensor* cy = nullptr;             ///< lstm: like hx, or null
  /// When the weights last changed (Note [rnn weights version] in src/ops/rnn.cpp). 0: unknown;
  /// a backend that keeps the weights in a layout of its own converts them on every call. Any
  /// other value is the caller's promise that the weights' contents are those they had at the
  /// last call with the same weights address and value: such a backend converts once per
  /// (address, value) and reuses its copy. A caller changes the value whenever it writes the
  /// weights, and never gives two different contents at one address the same value (a process-
  /// wide counter does; PyTorch's tensor._version alone does not, as a new tensor restarts it).
  std::uint64_t weights_version = 0;
};

/// The tensors of a backward w.r.t. the data: the forward's inputs and outputs, the gradients of
/// its outputs, the gradients to compute. diff_hy / diff_cy null count as zeros; diff_hx /
/// diff_cx null are not written.
struct RnnBackwardData {
  const Tensor* src = nullptr;       ///< the forward's src
  const Tensor* weights = nullptr;   ///< the forward's weights
  const Tensor* hx = nullptr;        ///< the forward's hx (or null)
  const Tensor* cx = nullptr;        ///< the forward's cx (or null)
  const Tensor* lengths = nullptr;   ///< the forward's lengths
  const Tensor* dst = nullptr;       ///< the forward's dst
  const Tensor* diff_dst = nullptr;  ///< like dst; entries past a sequence's end are ignored
  const Tensor* diff_hy = nullptr;   ///< like hy, or null (zeros)
  const Tensor* diff_cy = nullptr;   ///< lstm: like cy, or null (zeros)
  Tensor* diff_src = nullptr;        ///< like src; 0 past a sequence's end
  Tensor* diff_hx = nullptr;         ///< like hx, or null (not written)
  Tensor* diff_cx = nullptr;         ///< lstm: like cx, or null
  /// As RnnForward::weights_version, for this call's weights.
  std::uint64_t weights_version = 0;
};

/// The tensors of a backward w.r.t. the weights.
struct RnnBackwardWeights {
  const Tensor* src = nullptr;      ///< the forward's src
  const Tensor* weights = nullptr;  ///< the forward's weights
  const Tensor* hx = nullptr;       ///< the forward's hx (or null)
  const Tensor* cx = nullptr;       ///< the forward's cx (or null)
  const Tensor* lengths = nullptr;  ///< the forward's lengths
  const Tensor* dst = nullptr;      ///< the forward's dst
  Tensor* diff_weights = nullptr;   ///< {weights_count()}
  /// true: diff_weights += the gradient; false: diff_weights = the gradient.
  bool accumulate = false;
};

/// Inference forward. dst, hy and cy must not overlap the inputs. Returns the choice that ran.
std::shared_ptr<const Choice> rnn_fwd(Context& context, const RnnDesc& desc,
                                      const RnnForward& tensors);
/// Training forward: like rnn_fwd, and keeps in `state` what the backward passes read (cuDNN's
/// reserve space; the dropout masks). Dropout draws from `generator`, which advances by
/// ceil(desc.dropout_draws() / 4) Philox blocks once the call ran.
std::shared_ptr<const Choice> rnn_fwd_training(Context& context, const RnnDesc& desc,
                                               Generator& generator, const RnnForward& tensors,
                                               SavedState& state);
/// Backward w.r.t. src and the initial states, reading the `state` rnn_fwd_training of the same
/// desc filled. Call it before rnn_bwd_weights on that state: a candidate may leave in the state
/// what its backward w.r.t. the weights reads (cuDNN does).
std::shared_ptr<const Choice> rnn_bwd_data(Context& context, const RnnDesc& desc,
                                           const RnnBackwardData& tensors, SavedState& state);
/// Backward w.r.t. the weights, after rnn_bwd_data on the same `state`.
std::shared_ptr<const Choice> rnn_bwd_weights(Context& context, const RnnDesc& desc,
                                              const RnnBackwardWeights& tensors, SavedState& state);

/// Every candidate of the context's backend for (desc, direction), nothing run.
std::vector<AlgoInfo> rnn_list(Context& context, const RnnDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates; cached).
std::shared_ptr<const Choice> rnn_select(Context& context, const RnnDesc& desc,
                                         Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult rnn_profile(Context& context, const RnnDesc& desc, Direction direction);

}  // namespace dnnx
