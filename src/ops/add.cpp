// Tensor add, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/add.hpp>

#include "core/add_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::AddArgs;

// src and dst have dims of their own, so a dims mismatch names the desc's field (src_dims or
// dst_dims); the rest is check_operand's.
void check_tensor(const Context& context, const AddDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected, const char* field) {
  if (tensor.dtype() == desc.dtype) {
    DNNX_CHECK_ARG(tensor.dims() == expected, role, " dims ", tensor.dims(),
                   " do not match the desc's ", field, " ", expected);
  }
  detail::check_operand(context, role, tensor, expected, desc.dtype, desc.layout);
}

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  // Broadcasting reads each src element for many dst elements: no in-place form exists.
  detail::check_no_overlap("add", out_role, out, in_role, in);
}

void check_args(const Context& context, const AddDesc& desc, Direction direction,
                const AddArgs& args) {
  if (direction == Direction::fwd) {
    DNNX_ASSERT(args.src != nullptr && args.dst != nullptr);
    check_tensor(context, desc, "src", *args.src, desc.src_dims, "src_dims");
    check_tensor(context, desc, "dst", *args.dst, desc.dst_dims, "dst_dims");
    check_no_alias("dst", *args.dst, "src", *args.src);
    return;
  }
  DNNX_ASSERT(args.diff_dst != nullptr && args.diff_src != nullptr);
  check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims, "dst_dims");
  check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims, "src_dims");
  check_no_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
}

// Tensors for timing without the user's (Note [scratch data]).
struct Scratch {
  Tensor src, dst;  // dst doubles as diff_dst, src as diff_src
  AddArgs args(Direction direction) {
    AddArgs a;
    if (direction == Direction::fwd) {
      a.src = &src, a.dst = &dst;
    } else {
      a.diff_dst = &dst, a.diff_src = &src;
    }
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct AddOp : detail::OpTraits<OpKind::add> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const AddDesc& desc, Direction) {
    return {detail::random_tensor(context, desc.src_dims, desc.dtype, desc.layout, -1, 1, 1),
            detail::random_tensor(context, desc.dst_dims, desc.dtype, desc.layout, -1, 1, 2)};
  }
};
using Dispatch = detail::Dispatch<AddOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(add, AddOp)

std::shared_ptr<const Choice> add_bwd(Context& context, const AddDesc& desc, const Tensor& diff_dst,
                                      Tensor& diff_src) {
  AddArgs args;
  args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(add, AddOp)

}  // namespace dnnx
