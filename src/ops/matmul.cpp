// Matrix multiply, backend-agnostic: the checks of a call against the desc and the scratch
// tensors for timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/matmul.hpp>

#include "core/matmul_args.hpp"
#include "ops/op_calls.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <string>

namespace dnnx {
namespace {

using detail::MatmulArgs;

// One tensor of a call: its role, the tensor (null when the call has none there), the dims the desc
// gives it, and whether it is a bias (a contiguous vector, given exactly when desc.bias).
struct Operand {
  const char* role = "";
  const Tensor* tensor = nullptr;
  Dims dims;
  bool bias = false;
};

// The inputs and the outputs of a direction, in fixed storage: the checks run on every call.
struct Operands {
  std::array<Operand, 3> inputs;
  std::size_t input_count = 0;
  std::array<Operand, 2> outputs;
  std::size_t output_count = 0;
};

Operands operands_of(const MatmulDesc& d, Direction direction, const MatmulArgs& args) {
  switch (direction) {
    case Direction::fwd:
    case Direction::fwd_training:
      return {{{{"a", args.a, d.a_dims()},
                {"b", args.b, d.b_dims()},
                {"bias", args.bias, d.bias_dims(), true}}},
              3,
              {{{"dst", args.dst, d.dst_dims()}}},
              1};
    case Direction::bwd_data:
      return {{{{"diff_dst", args.diff_dst, d.dst_dims()}, {"b", args.b, d.b_dims()}}},
              2,
              {{{"diff_a", args.diff_a, d.a_dims()}}},
              1};
    case Direction::bwd_weights:
      return {{{{"a", args.a, d.a_dims()}, {"diff_dst", args.diff_dst, d.dst_dims()}}},
              2,
              {{{"diff_b", args.diff_b, d.b_dims()},
                {"diff_bias", args.diff_bias, d.bias_dims(), true}}},
              2};
  }
  return {};
}

// Checks `operand` against the desc; false when it is a bias the call rightly does not have.
bool check_operand(const Context& context, const MatmulDesc& desc, const Operand& operand) {
  if (operand.bias) {
    const bool given = operand.tensor != nullptr && !operand.tensor->is_null();
    DNNX_CHECK_ARG(given == desc.bias, operand.role,
                   desc.bias ? " is missing but the desc has bias set"
                             : " was given but the desc has no bias (set desc.bias)");
    if (given) detail::check_bias(context, operand.role, *operand.tensor, operand.dims, desc.dtype);
    return given;
  }
  DNNX_ASSERT(operand.tensor != nullptr, operand.role);
  detail::check_operand(context, operand.role, *operand.tensor, operand.dims, desc.dtype,
                        Layout::channels_first);
  return true;
}

// The SavedState against the desc's activation: fwd_training needs an activation (it keeps
// nothing otherwise); a backward has a state exactly when the desc has one.
void check_state(const MatmulDesc& desc, Direction direction, const MatmulArgs& args) {
  const bool activation = desc.activation != MatmulActivation::none;
  if (direction == Direction::fwd) return;
  if (direction == Direction::fwd_training) {
    DNNX_CHECK_ARG(activation,
                   "fwd_training keeps the activation's state for the backward, but "
                   "the desc has activation none (run fwd; the backward needs no state)");
    DNNX_ASSERT(args.state != nullptr);
    return;
  }
  if (activation) {
    DNNX_CHECK_ARG(args.state != nullptr, "state is missing: a desc with activation ",
                   to_string(desc.activation),
                   " needs the SavedState its matmul_fwd_training "
                   "filled");
  } else {
    DNNX_CHECK_ARG(args.state == nullptr,
                   "state was given but the desc has activation none "
                   "(its backward reads no state)");
  }
}

// Every tensor against the desc (dense row-major: channels_first is the row-major layout at every
// rank; a bias given exactly when desc.bias), then no output overlapping any other tensor.
void check_args(const Context& context, const MatmulDesc& desc, Direction direction,
                const MatmulArgs& args) {
  check_state(desc, direction, args);
  const Operands operands = operands_of(desc, direction, args);
  std::array<const Operand*, 5> present{};  // the inputs, then the outputs, as given
  std::size_t count = 0;
  for (std::size_t i = 0; i < operands.input_count; ++i) {
    if (check_operand(context, desc, operands.inputs[i])) present[count++] = &operands.inputs[i];
  }
  const std::size_t first_output = count;
  for (std::size_t i = 0; i < operands.output_count; ++i) {
    if (check_operand(context, desc, operands.outputs[i])) present[count++] = &operands.outputs[i];
  }
  // Each output against every tensor before it: the inputs and the earlier outputs.
  for (std::size_t i = first_output; i < count; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      detail::check_no_overlap("matmul", present[i]->role, *present[i]->tensor, present[j]->role,
                               *present[j]->tensor);
    }
  }
}

// The text a SavedState records of the desc (Note [saved state]): every field but beta, which
// scales each direction's own output (MatmulDesc).
std::string state_record_key(const MatmulDesc& desc) {
  MatmulDesc recorded = desc;
  recorded.beta = 0;
  return recorded.key();
}

// A backward timed on its own reads a state of Note [matmul aux]'s format as if a training
// forward had filled it: every other element kept (relu), or pre in [-3, 3) (gelu).
void fill_scratch_state(const Context& context, const MatmulDesc& desc, SavedState& state) {
  AlgoInfo writer;
  writer.id = "scratch";
  writer.saved_state_format = detail::matmul_aux_format(desc);
  writer.saved_state_bytes = detail::matmul_aux_bytes(desc);
  detail::SavedStateWriter::fill(state, context.allocator(), OpKind::matmul,
                                 Direction::fwd_training, state_record_key(desc), writer);
  const Layout rows = Layout::channels_first;
  if (desc.activation == MatmulActivation::gelu_tanh) {
    const Tensor values =
        detail::random_tensor(context, desc.dst_dims(), desc.dtype, rows, -3, 3, 5);
    Tensor buffer = Tensor::view(state.data(), desc.dst_dims(), desc.dtype, rows, state.device());
    copy(values, buffer);
    return;
  }
  const Dims words{static_cast<std::int64_t>(writer.saved_state_bytes / 4)};
  Tensor host = Tensor::empty(words, DType::i32);
  std::memset(host.data(), 0x55, writer.saved_state_bytes);
  Tensor buffer = Tensor::view(state.data(), words, DType::i32, rows, state.device());
  copy(host, buffer);
}

// Tensors for timing without the user's (Note [scratch data]).
struct Scratch {
  bool with_bias = false;
  bool with_state = false;
  Tensor a, b, bias, dst;  // dst doubles as diff_dst, a as diff_a, b as diff_b, bias as diff_bias
  SavedState state;        // filled for a backward; a training forward fills it itself
  MatmulArgs args(Direction direction) {
    MatmulArgs args = MatmulArgs::by_shape(direction, with_bias, a, b, bias, dst);
    if (with_state && direction != Direction::fwd) args.state = &state;
    return args;
  }
};

// The op's traits for Note [op dispatch].
struct MatmulOp : detail::OpTraits<OpKind::matmul> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const MatmulDesc& desc, Direction direction) {
    const Layout rows = Layout::channels_first;
    Scratch s;
    s.with_bias = desc.bias;
    s.with_state = desc.activation != MatmulActivation::none;
    if (s.with_state && (direction == Direction::bwd_data || direction == Direction::bwd_weights))
      fill_scratch_state(context, desc, s.state);
    s.a = detail::random_tensor(context, desc.a_dims(), desc.dtype, rows, -1, 1, 1);
    s.b = detail::random_tensor(context, desc.b_dims(), desc.dtype, rows, -1, 1, 2);
    s.dst = detail::random_tensor(context, desc.dst_dims(), desc.dtype, rows, -1, 1, 3);
    if (desc.bias) s.bias = detail::random_tensor(context, desc.bias_dims(), desc.dtype, rows, -1, 1, 4);
    return s;
  }
  // With beta != 0 a call reads its output: timing it on the caller's tensors would accumulate
  // into them once per timed run, so selection times on Scratch instead.
  static bool stateful(const MatmulDesc& desc, Direction, const MatmulArgs&) {
    return desc.beta != 0.0f;
  }
  static SavedState* saved_state(const MatmulArgs& args) { return args.state; }
  static std::string saved_state_key(const MatmulDesc& desc) { return state_record_key(desc); }
};
using Dispatch = detail::Dispatch<MatmulOp>;

}  // namespace

std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, const Tensor& bias, Tensor& dst) {
  MatmulArgs args;
  args.a = &a, args.b = &b, args.dst = &dst;
  args.bias = bias.is_null() ? nullptr : &bias;
  return Dispatch::run(context, desc, Direction::fwd, args);
}

std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, Tensor& dst) {
  return matmul_fwd(context, desc, a, b, Tensor(), dst);
}

std::shared_ptr<const Choice> matmul_fwd_training(Context& context, const MatmulDesc& desc,
                                                  const Tensor& a, const Tensor& b,
                                                  const Tensor& bias, Tensor& dst,
                                                  SavedState& state) {
  MatmulArgs args;
  args.a = &a, args.b = &b, args.dst = &dst, args.state = &state;
  args.bias = bias.is_null() ? nullptr : &bias;
  return Dispatch::run(context, desc, Direction::fwd_training, args);
}

std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a) {
  MatmulArgs args;
  args.diff_dst = &diff_dst, args.b = &b, args.diff_a = &diff_a;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a, const SavedState& state) {
  MatmulArgs args;
  args.diff_dst = &diff_dst, args.b = &b, args.diff_a = &diff_a;
  // A backward only reads the state (Note [saved state]); Args holds one pointer for both uses.
  args.state = const_cast<SavedState*>(&state);
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b, Tensor& diff_bias) {
  MatmulArgs args;
  args.a = &a, args.diff_dst = &diff_dst, args.diff_b = &diff_b;
  args.diff_bias = diff_bias.is_null() ? nullptr : &diff_bias;
  return Dispatch::run(context, desc, Direction::bwd_weights, args);
}

std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b) {
  Tensor no_bias;
  return matmul_bwd_weights(context, desc, a, diff_dst, diff_b, no_bias);
}

std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b, Tensor& diff_bias,
                                                 const SavedState& state) {
  MatmulArgs args;
  args.a = &a, args.diff_dst = &diff_dst, args.diff_b = &diff_b;
  args.diff_bias = diff_bias.is_null() ? nullptr : &diff_bias;
  args.state = const_cast<SavedState*>(&state);
  return Dispatch::run(context, desc, Direction::bwd_weights, args);
}

DNNX_DEFINE_OP_CALLS(matmul, MatmulOp)

}  // namespace dnnx
