// RNN, LSTM and GRU: torch.nn's recurrent layers over the rnn op.
//
// Note [rnn module dropout]
// PyTorch applies dropout to every layer's output but the last, in training. The rnn op has a
// dropout field, but masks drawn inside the op follow the op's own indexing (Note [rnn dropout]),
// not nn::Dropout's draws from default_generator(). So that a module draws
// the same masks on every backend, a training forward with dropout > 0 and more than one layer
// runs the layers one at a time (a desc of one layer each, views of the flat weights and of the
// states' rows) with the dropout op between them, drawing from default_generator() as
// nn::Dropout does; the backward runs them in reverse with the dropout op's backward between.
// Without dropout (and in eval mode, where dropout is the identity) the whole stack is one op
// call.

#include <dnnx/init.hpp>
#include <dnnx/nn/rnn.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <cmath>
#include <cstddef>
#include <tuple>

namespace dnnx::nn {
namespace {

// A dense row-major view of `dims` at element `offset` of the dense tensor `base` (same memory,
// same device; `base` must outlive it).
Tensor slice(const Tensor& base, std::int64_t offset, const Dims& dims) {
  auto* data = static_cast<std::byte*>(base.data()) +
               static_cast<std::size_t>(offset) * size_of(base.dtype());
  return Tensor::view(data, dims, base.dtype(), Layout::channels_first, base.device());
}

// Rows [layer * D, (layer + 1) * D) of a {layers * D, N, H} state; a null Tensor stays null.
Tensor state_rows(const Tensor& state, const RnnDesc& whole, std::int64_t layer) {
  if (state.is_null()) return Tensor();
  const std::int64_t rows = whole.directions();
  const std::int64_t per_row = whole.batch * whole.hidden_size;
  return slice(state, layer * rows * per_row, Dims{rows, whole.batch, whole.hidden_size});
}

const Tensor* pointer(const Tensor& tensor) { return tensor.is_null() ? nullptr : &tensor; }
Tensor* pointer(Tensor& tensor) { return tensor.is_null() ? nullptr : &tensor; }

// Every parameter of a stack in the op's weight order: (name, layer, direction, which).
std::vector<std::tuple<std::string, std::int64_t, std::int64_t, RnnWeight>> parameter_names(
    std::int64_t layers, bool bidirectional, bool bias) {
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t, RnnWeight>> names;
  for (std::int64_t layer = 0; layer < layers; ++layer) {
    for (std::int64_t direction = 0; direction < (bidirectional ? 2 : 1); ++direction) {
      const std::string suffix = "_l" + std::to_string(layer) + (direction ? "_reverse" : "");
      names.emplace_back("weight_ih" + suffix, layer, direction, RnnWeight::w_ih);
      names.emplace_back("weight_hh" + suffix, layer, direction, RnnWeight::w_hh);
      if (bias) {
        names.emplace_back("bias_ih" + suffix, layer, direction, RnnWeight::b_ih);
        names.emplace_back("bias_hh" + suffix, layer, direction, RnnWeight::b_hh);
      }
    }
  }
  return names;
}

// torch.nn.RNN's nonlinearity argument as the op's cell.
RnnCell simple_cell(std::string_view nonlinearity) {
  if (nonlinearity == "tanh") return RnnCell::rnn_tanh;
  if (nonlinearity == "relu") return RnnCell::rnn_relu;
  dnnx::detail::raise(ErrorKind::InvalidArgument, detail::cat("RNN: nonlinearity '", nonlinearity,
                                                              "' must be 'tanh' or 'relu'"));
}

}  // namespace

RNNBase::RNNBase(const Context& context, RnnCell cell, std::int64_t input_size,
                 std::int64_t hidden_size, RnnOptions options)
    : Module(context, OpKind::rnn),
      cell_(cell),
      input_size_(input_size),
      hidden_size_(hidden_size),
      options_(options) {
  DNNX_CHECK_ARG(input_size >= 1 && hidden_size >= 1, type_name(), ": input_size ", input_size,
                 " and hidden_size ", hidden_size, " must be >= 1");
  DNNX_CHECK_ARG(options.num_layers >= 1, type_name(), ": num_layers ", options.num_layers,
                 " must be >= 1");
  DNNX_CHECK_ARG(options.dropout >= 0.0 && options.dropout <= 1.0, type_name(), ": dropout ",
                 options.dropout, " must be in [0, 1]");
  const RnnDesc desc = desc_for(1, 1, false);
  desc.validate();
  // torch.nn.RNNBase.reset_parameters: every parameter U(-1/sqrt(hidden), 1/sqrt(hidden)).
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden_size)));
  for (const auto& [name, layer, direction, which] :
       parameter_names(options.num_layers, options.bidirectional, options.bias)) {
    Tensor values =
        detail::empty(this->context(), desc.weight_dims(layer, direction, which), DType::f32);
    init::uniform(this->context(), default_generator(), values, -bound, bound);
    register_parameter(name, values);
  }
  pack();
}

std::string RNNBase::type_name() const {
  switch (cell_) {
    case RnnCell::lstm: return "LSTM";
    case RnnCell::gru: return "GRU";
    default: return "RNN";
  }
}

std::string RNNBase::extra_repr() const {
  // torch.nn.RNNBase.extra_repr: the arguments that differ from their defaults.
  std::string text = detail::cat(input_size_, ", ", hidden_size_);
  if (options_.num_layers != 1) text += detail::cat(", num_layers=", options_.num_layers);
  if (!options_.bias) text += ", bias=False";
  if (options_.batch_first) text += ", batch_first=True";
  if (options_.dropout != 0.0) text += ", dropout=" + detail::py_float(options_.dropout);
  if (options_.bidirectional) text += ", bidirectional=True";
  return text;
}

RnnDesc RNNBase::desc_for(std::int64_t seq_length, std::int64_t batch,
                          bool variable_lengths) const {
  RnnDesc desc;
  desc.cell = cell_;
  desc.seq_length = seq_length;
  desc.batch = batch;
  desc.input_size = input_size_;
  desc.hidden_size = hidden_size_;
  desc.layers = options_.num_layers;
  desc.bidirectional = options_.bidirectional;
  desc.bias = options_.bias;
  desc.batch_first = options_.batch_first;
  desc.variable_lengths = variable_lengths;
  desc.dropout = 0.0f;
  desc.dtype = flat_weights_.is_null() ? parameter_dtype(context()) : flat_weights_.dtype();
  return desc;
}

void RNNBase::pack() {
  // The parameters' dtype under the (possibly new) context, not the old flat weights'.
  RnnDesc desc = desc_for(1, 1, false);
  desc.dtype = parameter_dtype(context());
  const auto names = parameter_names(options_.num_layers, options_.bidirectional, options_.bias);
  // Already packed (load_state_dict copied into the views): keep the storage, which an optimizer
  // built on the parameters holds.
  const auto at = [&](const Tensor& flat, std::int64_t offset) {
    return static_cast<const void*>(static_cast<const std::byte*>(flat.data()) +
                                    static_cast<std::size_t>(offset) * size_of(desc.dtype));
  };
  bool packed = !flat_weights_.is_null() && flat_weights_.dtype() == desc.dtype &&
                flat_weights_.device() == context().device();
  for (const auto& [name, layer, direction, which] : names) {
    if (!packed) break;
    Parameter& entry = parameter(name);
    const std::int64_t offset = desc.weight_offset(layer, direction, which);
    packed = entry.value.data() == at(flat_weights_, offset) &&
             entry.grad.data() == at(flat_grads_, offset);
  }
  if (packed) return;
  const Dims flat{desc.weights_count()};
  Tensor weights = detail::empty(context(), flat, desc.dtype);
  Tensor grads = detail::empty(context(), flat, desc.dtype);
  for (const auto& [name, layer, direction, which] : names) {
    Parameter& entry = parameter(name);
    const std::int64_t offset = desc.weight_offset(layer, direction, which);
    const Dims dims = desc.weight_dims(layer, direction, which);
    Tensor value = slice(weights, offset, dims);
    Tensor grad = slice(grads, offset, dims);
    detail::assign(entry.value, value);
    detail::assign(entry.grad, grad);
    entry.value = value;
    entry.grad = grad;
  }
  flat_weights_ = weights;
  flat_grads_ = grads;
}

void RNNBase::on_tensors_changed() {
  pack();
  saved_ = false;
  layers_.clear();
}

std::shared_ptr<const Choice> RNNBase::run_forward(const RnnDesc& desc, const RnnForward& tensors,
                                                   SavedState* state) {
  const Direction direction = state != nullptr ? Direction::fwd_training : Direction::fwd;
  const std::string key = desc.key();
  Context& run_context =
      call_context(direction, key, [&](Context& c) { return rnn_list(c, desc, direction); });
  std::shared_ptr<const Choice> choice =
      state != nullptr ? rnn_fwd_training(run_context, desc, default_generator(), tensors, *state)
                       : rnn_fwd(run_context, desc, tensors);
  record(direction, choice, key);
  descs_[static_cast<std::size_t>(direction)] = desc;
  return choice;
}

Tensor RNNBase::forward(const Tensor& input) { return forward(input, Tensor()).output; }

RnnOutput RNNBase::forward(const Tensor& input, const Tensor& h0, const Tensor& c0,
                           const Tensor& lengths) {
  const std::string who = type_name();
  const DType dtype = flat_weights_.dtype();
  DNNX_CHECK_ARG(input.rank() == 3, who, ": input ", describe(input), " must have 3 dims (",
                 options_.batch_first ? "batch, seq, features" : "seq, batch, features",
                 "); unbatched input is not taken");
  detail::check_input(who, input, 3, 3, detail::Accepts::channels_first);
  DNNX_CHECK_ARG(input.dtype() == dtype && input.dims()[2] == input_size_, who, ": input ",
                 describe(input), " must be ", to_string(dtype), " with input_size ", input_size_,
                 " features in its last dim");
  const std::int64_t seq = input.dims()[options_.batch_first ? 1 : 0];
  const std::int64_t batch = input.dims()[options_.batch_first ? 0 : 1];

  // The op takes i32 lengths; PyTorch's are i64.
  Tensor lengths32;
  if (!lengths.is_null()) {
    DNNX_CHECK_ARG(lengths.rank() == 1 && lengths.dims()[0] == batch &&
                       (lengths.dtype() == DType::i32 || lengths.dtype() == DType::i64) &&
                       lengths.device() == Device::cpu(),
                   who, ": lengths ", describe(lengths), " must be an i32 or i64 host tensor of ",
                   batch, " entries (one per sequence)");
    lengths32 = Tensor::empty(Dims{batch}, DType::i32);
    for (std::int64_t n = 0; n < batch; ++n) {
      const std::int64_t stride = lengths.strides()[0];
      const std::int64_t value =
          lengths.dtype() == DType::i32
              ? std::int64_t{static_cast<const std::int32_t*>(lengths.data())[n * stride]}
              : static_cast<const std::int64_t*>(lengths.data())[n * stride];
      DNNX_CHECK_ARG(value >= 1 && value <= seq, who, ": lengths[", n, "] is ", value,
                     "; each length must be in [1, seq_length = ", seq, "]");
      static_cast<std::int32_t*>(lengths32.data())[n] = static_cast<std::int32_t>(value);
    }
  }
  const RnnDesc desc = desc_for(seq, batch, !lengths.is_null());
  desc.validate();
  const Dims state_dims = desc.state_dims();
  const bool lstm = cell_ == RnnCell::lstm;
  for (const auto& [name, state] : {std::pair{"h0", &h0}, std::pair{"c0", &c0}}) {
    if (state->is_null()) continue;
    DNNX_CHECK_ARG(lstm || std::string_view(name) == "h0", who, ": c0 ", describe(*state),
                   " is given, but only LSTM has a cell state");
    DNNX_CHECK_ARG(state->dims() == state_dims && state->dtype() == dtype &&
                       state->is_dense(Layout::channels_first),
                   who, ": ", name, " ", describe(*state), " must be a dense ", to_string(dtype),
                   " tensor of dims ", state_dims, " (num_layers * directions, batch, hidden)");
  }

  RnnOutput out;
  out.output = detail::empty(context(), desc.dst_dims(), dtype);
  out.h_n = detail::empty(context(), state_dims, dtype);
  if (lstm) out.c_n = detail::empty(context(), state_dims, dtype);
  const bool training = is_training();
  const bool split = training && options_.dropout > 0.0 && options_.num_layers > 1;
  saved_ = false;
  layers_.clear();
  if (!split) {
    const RnnForward tensors{&input,      &flat_weights_,     pointer(h0),
                             pointer(c0), pointer(lengths32), &out.output,
                             &out.h_n,    pointer(out.c_n)};
    if (training) {
      LayerSaved& saved = layers_.emplace_back();
      run_forward(desc, tensors, &saved.state);
      saved.input = input;
      saved.output = out.output;
    } else {
      run_forward(desc, tensors, nullptr);
    }
  } else {
    // Note [rnn module dropout].
    layers_.reserve(static_cast<std::size_t>(desc.layers));
    Tensor layer_input = input;
    for (std::int64_t layer = 0; layer < desc.layers; ++layer) {
      RnnDesc one = desc;
      one.layers = 1;
      one.input_size = desc.layer_input_size(layer);
      one.validate();
      const Tensor weights = slice(flat_weights_, desc.weight_offset(layer, 0, RnnWeight::w_ih),
                                   Dims{one.weights_count()});
      const Tensor hx = state_rows(h0, desc, layer), cx = state_rows(c0, desc, layer);
      Tensor hy = state_rows(out.h_n, desc, layer), cy = state_rows(out.c_n, desc, layer);
      const bool last = layer + 1 == desc.layers;
      Tensor layer_output = last ? out.output : detail::empty(context(), one.dst_dims(), dtype);
      LayerSaved& saved = layers_.emplace_back();
      run_forward(one,
                  RnnForward{&layer_input, &weights, pointer(hx), pointer(cx), pointer(lengths32),
                             &layer_output, &hy, pointer(cy)},
                  &saved.state);
      saved.input = layer_input;
      saved.output = layer_output;
      if (!last) {
        saved.dropout = DropoutDesc::of(layer_output, static_cast<float>(options_.dropout));
        saved.dropout.validate();
        Tensor dropped = detail::empty(context(), layer_output.dims(), dtype);
        dropout_fwd_training(context(), saved.dropout, default_generator(), layer_output, dropped,
                             saved.mask);
        layer_input = dropped;
      }
    }
  }
  if (training) {
    saved_ = true;
    split_ = split;
    saved_desc_ = desc;
    h0_ = h0;
    c0_ = c0;
    lengths_ = lengths32;
    output_dims_ = desc.dst_dims();
  }
  return out;
}

Tensor RNNBase::backward(const Tensor& diff_output) {
  return backward(diff_output, Tensor()).diff_input;
}

RnnGradients RNNBase::backward(const Tensor& diff_output, const Tensor& diff_h_n,
                               const Tensor& diff_c_n) {
  const std::string who = type_name();
  DNNX_CHECK_ARG(saved_, who,
                 ".backward called without a training forward before it (one backward per "
                 "training forward; eval mode keeps nothing)");
  const RnnDesc& desc = saved_desc_;
  const DType dtype = desc.dtype;
  check_diff(diff_output, output_dims_, dtype);
  const Dims state_dims = desc.state_dims();
  const bool lstm = cell_ == RnnCell::lstm;
  for (const auto& [name, state] :
       {std::pair{"diff_h_n", &diff_h_n}, std::pair{"diff_c_n", &diff_c_n}}) {
    if (state->is_null()) continue;
    DNNX_CHECK_ARG(lstm || std::string_view(name) == "diff_h_n", who, ".backward: diff_c_n ",
                   describe(*state), " is given, but only LSTM has a cell state");
    DNNX_CHECK_ARG(state->dims() == state_dims && state->dtype() == dtype &&
                       state->is_dense(Layout::channels_first),
                   who, ".backward: ", name, " ", describe(*state), " must be a dense ",
                   to_string(dtype), " tensor of dims ", state_dims);
  }

  RnnGradients out;
  out.diff_input = detail::empty(context(), desc.src_dims(), dtype);
  out.diff_h0 = detail::empty(context(), state_dims, dtype);
  if (lstm) out.diff_c0 = detail::empty(context(), state_dims, dtype);
  bool accumulate = false;
  for (Parameter* entry : parameters()) accumulate |= entry->grad_live;
  // One op call writes or accumulates every weight: a grad set to none among live ones is
  // zeroed first (Note [gradients set to none]).
  for (Parameter* entry : parameters()) {
    if (accumulate && entry->grad_none) detail::fill_zeros(context(), entry->grad);
  }

  // One op backward (data, then weights) of one saved forward.
  auto run_backward = [&](const RnnDesc& one, LayerSaved& saved, const Tensor& weights,
                          const Tensor& hx, const Tensor& cx, const Tensor& diff_dst,
                          const Tensor& diff_hy, const Tensor& diff_cy, Tensor& diff_src,
                          Tensor& diff_hx, Tensor& diff_cx, Tensor& diff_weights) {
    const std::string key = one.key();
    const RnnBackwardData data{&saved.input,      &weights,      pointer(hx), pointer(cx),
                               pointer(lengths_), &saved.output, &diff_dst,   pointer(diff_hy),
                               pointer(diff_cy),  &diff_src,     &diff_hx,    pointer(diff_cx)};
    Context& data_context = call_context(Direction::bwd_data, key, [&](Context& c) {
      return rnn_list(c, one, Direction::bwd_data);
    });
    record(Direction::bwd_data, rnn_bwd_data(data_context, one, data, saved.state), key);
    descs_[static_cast<std::size_t>(Direction::bwd_data)] = one;
    const RnnBackwardWeights grads{&saved.input,      &weights,      pointer(hx),   pointer(cx),
                                   pointer(lengths_), &saved.output, &diff_weights, accumulate};
    Context& weights_context = call_context(Direction::bwd_weights, key, [&](Context& c) {
      return rnn_list(c, one, Direction::bwd_weights);
    });
    record(Direction::bwd_weights, rnn_bwd_weights(weights_context, one, grads, saved.state), key);
    descs_[static_cast<std::size_t>(Direction::bwd_weights)] = one;
  };

  if (!split_) {
    run_backward(desc, layers_[0], flat_weights_, h0_, c0_, diff_output, diff_h_n, diff_c_n,
                 out.diff_input, out.diff_h0, out.diff_c0, flat_grads_);
  } else {
    // Note [rnn module dropout]: the layers in reverse, the dropout op's backward between them.
    Tensor diff_dst = diff_output;
    for (std::int64_t layer = desc.layers - 1; layer >= 0; --layer) {
      RnnDesc one = desc;
      one.layers = 1;
      one.input_size = desc.layer_input_size(layer);
      const std::int64_t offset = desc.weight_offset(layer, 0, RnnWeight::w_ih);
      const Tensor weights = slice(flat_weights_, offset, Dims{one.weights_count()});
      Tensor diff_weights = slice(flat_grads_, offset, Dims{one.weights_count()});
      Tensor diff_hx = state_rows(out.diff_h0, desc, layer);
      Tensor diff_cx = state_rows(out.diff_c0, desc, layer);
      Tensor diff_src =
          layer == 0 ? out.diff_input : detail::empty(context(), one.src_dims(), dtype);
      run_backward(one, layers_[static_cast<std::size_t>(layer)], weights,
                   state_rows(h0_, desc, layer), state_rows(c0_, desc, layer), diff_dst,
                   state_rows(diff_h_n, desc, layer), state_rows(diff_c_n, desc, layer), diff_src,
                   diff_hx, diff_cx, diff_weights);
      if (layer > 0) {
        LayerSaved& below = layers_[static_cast<std::size_t>(layer - 1)];
        Tensor diff_below = detail::empty(context(), below.dropout.dims, dtype);
        dropout_bwd(context(), below.dropout, diff_src, diff_below, below.mask);
        diff_dst = diff_below;
      }
    }
  }
  for (Parameter* entry : parameters()) detail::mark_written(*entry);
  saved_ = false;
  layers_.clear();
  h0_ = c0_ = lengths_ = Tensor();
  return out;
}

std::shared_ptr<const Choice> RNNBase::heuristic_choice(Direction direction) {
  return detail::heuristic(context(), OpKind::rnn, direction,
                           descs_[static_cast<std::size_t>(direction)], rnn_select);
}

std::optional<ProfileResult> RNNBase::profile(Direction direction) {
  return detail::profile(context(), OpKind::rnn, direction,
                         descs_[static_cast<std::size_t>(direction)], rnn_profile);
}

RNN::RNN(const Context& context, std::int64_t input_size, std::int64_t hidden_size,
         RnnOptions options, std::string_view nonlinearity)
    : RNNBase(context, simple_cell(nonlinearity), input_size, hidden_size, options) {}

}  // namespace dnnx::nn
