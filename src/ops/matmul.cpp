// Matrix multiply, backend-agnostic: the checks of a call against the desc and the scratch
// tensors for timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/matmul.hpp>

#include "core/matmul_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::MatmulArgs;

// Every matmul tensor is dense row-major (channels_first is the row-major layout at every rank).
void check_matrix(const Context& context, const MatmulDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected) {
  detail::check_operand(context, role, tensor, expected, desc.dtype, Layout::channels_first);
}

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  detail::check_no_overlap("matmul", out_role, out, in_role, in);
}

// A bias tensor is given exactly when the desc has one.
void check_bias_given(const MatmulDesc& desc, const char* role, const Tensor* bias) {
  const bool given = bias != nullptr && !bias->is_null();
  DNNX_CHECK_ARG(given == desc.bias, role,
                 desc.bias ? " is missing but the desc has bias set"
                           : " was given but the desc has no bias (set desc.bias)");
}

void check_args(const Context& context, const MatmulDesc& desc, Direction direction,
                const MatmulArgs& args) {
  switch (direction) {
    case Direction::fwd:
      check_matrix(context, desc, "a", *args.a, desc.a_dims());
      check_matrix(context, desc, "b", *args.b, desc.b_dims());
      check_matrix(context, desc, "dst", *args.dst, desc.dst_dims());
      check_bias_given(desc, "bias", args.bias);
      check_no_alias("dst", *args.dst, "a", *args.a);
      check_no_alias("dst", *args.dst, "b", *args.b);
      if (desc.bias) {
        detail::check_bias(context, "bias", *args.bias, desc.bias_dims(), desc.dtype);
        check_no_alias("dst", *args.dst, "bias", *args.bias);
      }
      break;
    case Direction::bwd_data:
      check_matrix(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_matrix(context, desc, "b", *args.b, desc.b_dims());
      check_matrix(context, desc, "diff_a", *args.diff_a, desc.a_dims());
      check_no_alias("diff_a", *args.diff_a, "diff_dst", *args.diff_dst);
      check_no_alias("diff_a", *args.diff_a, "b", *args.b);
      break;
    case Direction::bwd_weights:
      check_matrix(context, desc, "a", *args.a, desc.a_dims());
      check_matrix(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
      check_matrix(context, desc, "diff_b", *args.diff_b, desc.b_dims());
      check_bias_given(desc, "diff_bias", args.diff_bias);
      check_no_alias("diff_b", *args.diff_b, "a", *args.a);
      check_no_alias("diff_b", *args.diff_b, "diff_dst", *args.diff_dst);
      if (desc.bias) {
        detail::check_bias(context, "diff_bias", *args.diff_bias, desc.bias_dims(), desc.dtype);
        check_no_alias("diff_bias", *args.diff_bias, "a", *args.a);
        check_no_alias("diff_bias", *args.diff_bias, "diff_dst", *args.diff_dst);
        check_no_alias("diff_bias", *args.diff_bias, "diff_b", *args.diff_b);
      }
      break;
    case Direction::fwd_training: break;  // not a matmul direction (OpInfo::check rejects it)
  }
}

// Tensors for timing without the user's (Note [scratch data]).
struct Scratch {
  bool with_bias = false;
  Tensor a, b, bias, dst;  // dst doubles as diff_dst, a as diff_a, b as diff_b, bias as diff_bias
  MatmulArgs args(Direction direction) {
    return MatmulArgs::by_shape(direction, with_bias, a, b, bias, dst);
  }
};

// The op's traits for Note [op dispatch].
struct MatmulOp : detail::OpTraits<OpKind::matmul> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const MatmulDesc& desc, Direction) {
    const Layout rows = Layout::channels_first;
    Scratch s;
    s.with_bias = desc.bias;
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

std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a) {
  MatmulArgs args;
  args.diff_dst = &diff_dst, args.b = &b, args.diff_a = &diff_a;
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

DNNX_DEFINE_OP_CALLS(matmul, MatmulOp)

}  // namespace dnnx
