// Fused forward convolution, backend-agnostic: the checks of a call against the desc and the
// scratch tensors for timing; the call itself goes through Note [op dispatch], selected under
// convolution's forward policy (the op table's `policies` column).

#include <dnnx/ops/conv_fused.hpp>

#include "core/conv_fused_args.hpp"
#include "ops/op_calls.hpp"

#include <optional>
#include <utility>

namespace dnnx {
namespace {

using detail::ConvFusedArgs;

// ---- argument validation ------------------------------------------------------------------------

void check_tensor(const Context& context, const ConvFusedDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected) {
  detail::check_operand(context, role, tensor, expected, desc.conv.dtype, desc.conv.layout);
}

// An optional tensor must be passed exactly when the desc asks for it.
void check_presence(const char* role, const Tensor* tensor, bool wanted, const char* field) {
  DNNX_CHECK_ARG(!wanted || tensor != nullptr, role, " is missing (null) but desc.", field,
                 " is true; pass the ", role, " tensor or set ", field, " = false");
  DNNX_CHECK_ARG(wanted || tensor == nullptr, "a ", role, " tensor was given but desc.", field,
                 " is false; set ", field, " = true or pass null");
}

// Only the residual may share dst's memory (in place, checked separately).
void check_no_alias(const Tensor& dst, const char* in_role, const Tensor& in) {
  detail::check_no_overlap("a fused convolution", "dst", dst, in_role, in);
}

void check_args(const Context& context, const ConvFusedDesc& desc, Direction direction,
                const ConvFusedArgs& args) {
  desc.validate();
  check_presence("bias", args.bias, desc.bias, "bias");
  check_presence("residual", args.residual, desc.residual, "residual");
  check_tensor(context, desc, "src", *args.src, desc.src_dims());
  check_tensor(context, desc, "weights", *args.weights, desc.weights_dims());
  check_tensor(context, desc, "dst", *args.dst, desc.dst_dims());
  if (args.bias != nullptr)
    detail::check_bias(context, "bias", *args.bias, desc.bias_dims(), desc.conv.dtype);
  if (args.residual != nullptr)
    check_tensor(context, desc, "residual", *args.residual, desc.residual_dims());
  check_no_alias(*args.dst, "src", *args.src);
  check_no_alias(*args.dst, "weights", *args.weights);
  if (args.bias != nullptr) check_no_alias(*args.dst, "bias", *args.bias);
  if (args.residual != nullptr && detail::overlaps(*args.dst, *args.residual)) {
    // Both are dense in the desc's layout with dst's dims, so the same first element means the
    // same memory and strides.
    DNNX_CHECK_ARG(args.residual->data() == args.dst->data(),
                   "residual partially overlaps dst in memory (residual starts at ",
                   args.residual->data(), ", dst at ", args.dst->data(),
                   "); the residual may be dst itself (in place) or separate memory");
  }
}

// ---- scratch tensors for selection without user tensors ----------------------------------------

// Tensors for timing without the user's (Note [scratch data]): the residual is separate from dst,
// which is the case every candidate handles without a copy.
struct Scratch {
  Tensor src, weights, bias, residual, dst;
  ConvFusedArgs args(Direction) {
    ConvFusedArgs a;
    a.src = &src, a.weights = &weights, a.dst = &dst;
    if (!bias.is_null()) a.bias = &bias;
    if (!residual.is_null()) a.residual = &residual;
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct ConvFusedOp : detail::OpTraits<OpKind::conv_fused> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const ConvFusedDesc& desc, Direction direction) {
    const ConvDesc& conv = desc.conv;
    Scratch s;
    s.src = detail::random_tensor(context, conv.src_dims(), conv.dtype, conv.layout, -1, 1, 1);
    s.weights =
        detail::random_tensor(context, conv.weights_dims(), conv.dtype, conv.layout, -1, 1, 2);
    if (desc.bias) {
      s.bias = detail::random_tensor(context, conv.bias_dims(), conv.dtype, Layout::channels_first,
                                     -1, 1, 4);
    }
    if (desc.residual) {
      s.residual =
          detail::random_tensor(context, conv.dst_dims(), conv.dtype, conv.layout, -1, 1, 5);
    }
    s.dst = detail::random_tensor(context, conv.dst_dims(), conv.dtype, conv.layout, -1, 1, 3);
    return s;
  }
};
using Dispatch = detail::Dispatch<ConvFusedOp>;

}  // namespace

std::shared_ptr<const Choice> conv_fused_fwd(Context& context, const ConvFusedDesc& desc,
                                             const Tensor& src, const Tensor& weights,
                                             const Tensor* bias, const Tensor* residual,
                                             Tensor& dst) {
  ConvFusedArgs args;
  args.src = &src, args.weights = &weights, args.bias = bias, args.residual = residual;
  args.dst = &dst;
  return Dispatch::run(context, desc, Direction::fwd, args);
}

DNNX_DEFINE_OP_CALLS(conv_fused, ConvFusedOp)

}  // namespace dnnx
