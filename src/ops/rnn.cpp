// Recurrent layers, backend-agnostic: the checks of a call against the desc (every tensor, the
// lengths, overlaps), the generator's block range (taken here once, so every candidate a selection
// times draws the same dropout masks, and the generator advances once per call) and the scratch
// tensors for timing; the call itself goes through Note [op dispatch], the state the training
// forward keeps through Note [saved state].
//
// Note [rnn weights version]
// A backend whose kernels want the weights in a layout of their own (cuDNN's weight space where it
// differs from the flat layout, oneDNN's ldigo / ldgoi matrices) converts them; the question is
// when. A tensor's contents change under the same address (an optimizer step writes in place)
// and a Tensor carries nothing that says so, so with no more to go on a plan converts on every
// call. The caller may say more: RnnForward / RnnBackwardData::weights_version, a value it changes
// whenever it writes the weights. A plan then keeps the converted weights with the (address,
// value) they came from and converts again only when the call's pair differs (each plan its own
// copy: a training step's forward and backward run different plans, each converting once per
// weight update). 0 means unknown, converted every call, and is what timing on scratch tensors
// passes. The value is a promise the backend cannot check: a wrong one gives results of stale
// weights, which is why nothing sets it unasked (dnnx.torch derives it from its parameters'
// version counters, Note [recurrent weights cache] in python/dnnx/torch.py).

#include <dnnx/ops/rnn.hpp>

#include "core/rnn_args.hpp"
#include "ops/op_calls.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace dnnx {
namespace {

using detail::RnnArgs;

struct Operand {
  const char* role = "";
  const Tensor* tensor = nullptr;
  Dims dims;
  bool required = true;
};

// The call's lengths: a host i32 vector of N entries in [1, T], given exactly when the desc has
// variable lengths.
void check_lengths(const RnnDesc& desc, const RnnArgs& args) {
  if (!desc.variable_lengths) {
    DNNX_CHECK_ARG(args.lengths == nullptr,
                   "lengths was given but the desc has variable_lengths = false");
    return;
  }
  DNNX_CHECK_ARG(args.lengths != nullptr,
                 "lengths is missing but the desc has variable_lengths = true (expected an i32 "
                 "tensor of dims ",
                 Dims{desc.batch}, " in host memory)");
  const Tensor& lengths = *args.lengths;
  DNNX_CHECK_ARG(lengths.dtype() == DType::i32 && lengths.dims() == Dims{desc.batch} &&
                     lengths.device() == Device::cpu() && lengths.data() != nullptr,
                 "lengths is ", describe(lengths), "; expected an i32 tensor of dims ",
                 Dims{desc.batch}, " in host memory");
  const std::vector<std::int32_t> values = detail::sequence_lengths(desc, args);
  for (std::size_t n = 0; n < values.size(); ++n) {
    DNNX_CHECK_ARG(values[n] >= 1 && values[n] <= desc.seq_length, "lengths[", n, "] is ",
                   values[n], "; each length must be in [1, seq_length = ", desc.seq_length, "]");
  }
}

void check_args(const Context& context, const RnnDesc& desc, Direction direction,
                const RnnArgs& args) {
  const bool lstm = desc.cell == RnnCell::lstm;
  const Dims state = desc.state_dims();
  const Dims weights{desc.weights_count()};
  std::vector<Operand> inputs = {{"src", args.src, desc.src_dims()},
                                 {"weights", args.weights, weights},
                                 {"hx", args.hx, state, false},
                                 {"cx", args.cx, state, false}};
  std::vector<Operand> outputs;
  switch (direction) {
    case Direction::fwd:
    case Direction::fwd_training:
      outputs = {{"dst", args.dst, desc.dst_dims()},
                 {"hy", args.hy, state, false},
                 {"cy", args.cy, state, false}};
      break;
    case Direction::bwd_data:
      inputs.push_back({"dst", args.dst, desc.dst_dims()});
      inputs.push_back({"diff_dst", args.diff_dst, desc.dst_dims()});
      inputs.push_back({"diff_hy", args.diff_hy, state, false});
      inputs.push_back({"diff_cy", args.diff_cy, state, false});
      outputs = {{"diff_src", args.diff_src, desc.src_dims()},
                 {"diff_hx", args.diff_hx, state, false},
                 {"diff_cx", args.diff_cx, state, false}};
      break;
    case Direction::bwd_weights:
      inputs.push_back({"dst", args.dst, desc.dst_dims()});
      outputs = {{"diff_weights", args.diff_weights, weights}};
      break;
  }
  std::vector<const Operand*> present;
  auto check = [&](const Operand& operand) {
    if (operand.tensor == nullptr) {
      DNNX_CHECK_ARG(!operand.required, operand.role, " is missing (null); expected a ",
                     to_string(desc.dtype), " tensor of dims ", operand.dims);
      return;
    }
    const std::string_view role = operand.role;
    const bool cell_state = role == "cx" || role == "cy" || role == "diff_cx" || role == "diff_cy";
    DNNX_CHECK_ARG(lstm || !cell_state, operand.role, " was given but the cell is ",
                   to_string(desc.cell), "; only lstm has a cell state");
    detail::check_operand(context, operand.role, *operand.tensor, operand.dims, desc.dtype,
                          Layout::channels_first);
    present.push_back(&operand);
  };
  for (const Operand& operand : inputs) check(operand);
  const std::size_t input_count = present.size();
  for (const Operand& operand : outputs) check(operand);
  check_lengths(desc, args);
  for (std::size_t o = input_count; o < present.size(); ++o) {
    for (std::size_t i = 0; i < present.size(); ++i) {
      if (i == o) continue;
      if (i > o && i >= input_count) continue;  // each pair of outputs once
      detail::check_no_overlap("rnn", present[o]->role, *present[o]->tensor, present[i]->role,
                               *present[i]->tensor);
    }
  }
  DNNX_ASSERT(direction == Direction::fwd || args.state != nullptr);
}

// A backward timed on its own reads a state of the reference format (Note [rnn reference
// state]), as a reference backward w.r.t. the data would have left it; candidates of another format
// time on a buffer of their own instead (Note [timing an rnn backward] in rnn_args.hpp).
void fill_scratch_state(const Context& context, const RnnDesc& desc, SavedState& state) {
  const std::vector<unsigned char> contents = detail::rnn_reference_scratch(desc);
  AlgoInfo writer;
  writer.id = detail::rnn_scratch_producer;
  writer.saved_state_format = detail::rnn_reference_format;
  writer.saved_state_bytes = contents.size();
  detail::SavedStateWriter::fill(state, context.allocator(), OpKind::rnn, Direction::fwd_training,
                                 desc.key(), writer);
  const Dims bytes{static_cast<std::int64_t>(contents.size() / 8)};
  Tensor host = Tensor::empty(bytes, DType::i64);
  std::memcpy(host.data(), contents.data(), contents.size());
  Tensor buffer =
      Tensor::view(state.data(), bytes, DType::i64, Layout::channels_first, state.device());
  copy(host, buffer);
}

// Tensors for timing without the user's (Note [scratch data]). Lengths, with variable lengths,
// run from T down to about T / 2, unsorted.
struct Scratch {
  Tensor src, weights, hx, cx, dst, hy, cy, diff_dst, diff_hy, diff_cy, diff_src, diff_hx, diff_cx,
      diff_weights, lengths;
  SavedState state;
  bool lstm = false;
  bool variable = false;
  RnnArgs args(Direction direction) {
    RnnArgs a;
    a.src = &src, a.weights = &weights, a.hx = &hx;
    if (lstm) a.cx = &cx;
    if (variable) a.lengths = &lengths;
    a.dst = &dst;
    switch (direction) {
      case Direction::fwd:
      case Direction::fwd_training:
        a.hy = &hy;
        if (lstm) a.cy = &cy;
        break;
      case Direction::bwd_data:
        a.diff_dst = &diff_dst, a.diff_hy = &diff_hy, a.diff_src = &diff_src, a.diff_hx = &diff_hx;
        if (lstm) a.diff_cy = &diff_cy, a.diff_cx = &diff_cx;
        break;
      case Direction::bwd_weights: a.diff_weights = &diff_weights; break;
    }
    if (direction != Direction::fwd) a.state = &state;
    a.seed = Generator::default_seed;
    return a;
  }
};

struct RnnOp : detail::OpTraits<OpKind::rnn> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const RnnDesc& desc, Direction direction) {
    auto random = [&](const Dims& dims, float scale, unsigned seed) {
      return detail::random_tensor(context, dims, desc.dtype, Layout::channels_first, -scale, scale,
                                   seed);
    };
    const Dims state = desc.state_dims();
    // PyTorch's initialization range, 1 / sqrt(H), keeps the states away from saturation.
    const float w = 1.0f / std::sqrt(static_cast<float>(desc.hidden_size));
    const bool backward = direction == Direction::bwd_data || direction == Direction::bwd_weights;
    const bool lstm = desc.cell == RnnCell::lstm;
    Scratch s;
    s.lstm = lstm;
    s.variable = desc.variable_lengths;
    s.src = random(desc.src_dims(), 1.0f, 1);
    s.weights = random(Dims{desc.weights_count()}, w, 2);
    s.hx = random(state, 1.0f, 3);
    if (lstm) s.cx = random(state, 1.0f, 4);
    s.dst = random(desc.dst_dims(), 1.0f, 5);
    if (!backward) {
      s.hy = random(state, 1.0f, 6);
      if (lstm) s.cy = random(state, 1.0f, 7);
    } else if (direction == Direction::bwd_data) {
      s.diff_dst = random(desc.dst_dims(), 1.0f, 8);
      s.diff_hy = random(state, 1.0f, 9);
      s.diff_src = random(desc.src_dims(), 1.0f, 10);
      s.diff_hx = random(state, 1.0f, 11);
      if (lstm) s.diff_cy = random(state, 1.0f, 12), s.diff_cx = random(state, 1.0f, 13);
    } else {
      s.diff_weights = random(Dims{desc.weights_count()}, 1.0f, 14);
    }
    if (desc.variable_lengths) {
      s.lengths = Tensor::empty(Dims{desc.batch}, DType::i32);
      auto* values = static_cast<std::int32_t*>(s.lengths.data());
      for (std::int64_t n = 0; n < desc.batch; ++n) {
        const std::int64_t shortened = (n * 7919 % desc.batch) * desc.seq_length / (2 * desc.batch);
        values[n] =
            static_cast<std::int32_t>(std::max<std::int64_t>(1, desc.seq_length - shortened));
      }
    }
    if (backward) fill_scratch_state(context, desc, s.state);
    return s;
  }
  static SavedState* saved_state(const RnnArgs& args) { return args.state; }
  // Selection times these on scratch tensors (Note [timing stateful calls] in
  // src/ops/batch_norm.cpp): an accumulating backward w.r.t. the weights changes diff_weights at
  // every run, and a backward w.r.t. the data may write into its saved state (cuDNN's
  // cudnnRNNBackwardData_v8 leaves there what cudnnRNNBackwardWeights_v8 reads, overwriting what
  // the forward left), so a second run of it on the call's own state reads its own leftovers.
  static bool stateful(const RnnDesc&, Direction direction, const RnnArgs& args) {
    return direction == Direction::bwd_data ||
           (direction == Direction::bwd_weights && args.accumulate);
  }
};
using Dispatch = detail::Dispatch<RnnOp>;

RnnArgs forward_args(const RnnForward& t) {
  RnnArgs args;
  args.src = t.src, args.weights = t.weights, args.hx = t.hx, args.cx = t.cx;
  args.lengths = t.lengths, args.dst = t.dst, args.hy = t.hy, args.cy = t.cy;
  args.weights_version = t.weights_version;
  return args;
}

}  // namespace

std::shared_ptr<const Choice> rnn_fwd(Context& context, const RnnDesc& desc,
                                      const RnnForward& tensors) {
  return Dispatch::run(context, desc, Direction::fwd, forward_args(tensors));
}

std::shared_ptr<const Choice> rnn_fwd_training(Context& context, const RnnDesc& desc,
                                               Generator& generator, const RnnForward& tensors,
                                               SavedState& state) {
  RnnArgs args = forward_args(tensors);
  args.state = &state;
  args.seed = generator.seed();
  args.offset = generator.offset();
  auto choice = Dispatch::run(context, desc, Direction::fwd_training, args);
  generator.consume(static_cast<std::uint64_t>(desc.dropout_draws()));
  return choice;
}

std::shared_ptr<const Choice> rnn_bwd_data(Context& context, const RnnDesc& desc,
                                           const RnnBackwardData& t, SavedState& state) {
  RnnArgs args;
  args.src = t.src, args.weights = t.weights, args.hx = t.hx, args.cx = t.cx;
  args.lengths = t.lengths, args.dst = const_cast<Tensor*>(t.dst);
  args.diff_dst = t.diff_dst, args.diff_hy = t.diff_hy, args.diff_cy = t.diff_cy;
  args.diff_src = t.diff_src, args.diff_hx = t.diff_hx, args.diff_cx = t.diff_cx;
  args.weights_version = t.weights_version;
  args.state = &state;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

std::shared_ptr<const Choice> rnn_bwd_weights(Context& context, const RnnDesc& desc,
                                              const RnnBackwardWeights& t, SavedState& state) {
  RnnArgs args;
  args.src = t.src, args.weights = t.weights, args.hx = t.hx, args.cx = t.cx;
  args.lengths = t.lengths, args.dst = const_cast<Tensor*>(t.dst);
  args.diff_weights = t.diff_weights, args.accumulate = t.accumulate;
  args.state = &state;
  return Dispatch::run(context, desc, Direction::bwd_weights, args);
}

DNNX_DEFINE_OP_CALLS(rnn, RnnOp)

}  // namespace dnnx
