// Reduction, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/reduce.hpp>

#include "core/reduce_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::ReduceArgs;

// src and dst have dims of their own, so a dims mismatch names the desc's field (src_dims or
// dst_dims); the rest is check_operand's.
void check_tensor(const Context& context, const ReduceDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected, const char* field) {
  if (tensor.dtype() == desc.dtype) {
    DNNX_CHECK_ARG(tensor.dims() == expected, role, " dims ", tensor.dims(),
                   " do not match the desc's ", field, " ", expected);
  }
  detail::check_operand(context, role, tensor, expected, desc.dtype, desc.layout);
}

void check_args(const Context& context, const ReduceDesc& desc, Direction direction,
                const ReduceArgs& args) {
  if (direction == Direction::fwd) {
    DNNX_ASSERT(args.src != nullptr && args.dst != nullptr);
    check_tensor(context, desc, "src", *args.src, desc.src_dims, "src_dims");
    check_tensor(context, desc, "dst", *args.dst, desc.dst_dims, "dst_dims");
    detail::check_no_overlap("reduce", "dst", *args.dst, "src", *args.src);
    return;
  }
  DNNX_ASSERT(args.diff_dst != nullptr && args.diff_src != nullptr);
  check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims, "dst_dims");
  check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims, "src_dims");
  detail::check_no_overlap("reduce", "diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
  if (!desc.backward_reads_values()) return;
  DNNX_CHECK_ARG(args.src != nullptr && args.saved_dst != nullptr, "the backward pass of ",
                 to_string(desc.kind),
                 " reads the forward's src and dst; pass them (only sum and mean take diff_dst "
                 "alone)");
  check_tensor(context, desc, "src", *args.src, desc.src_dims, "src_dims");
  check_tensor(context, desc, "dst", *args.saved_dst, desc.dst_dims, "dst_dims");
  detail::check_no_overlap("reduce", "diff_src", *args.diff_src, "src", *args.src);
  detail::check_no_overlap("reduce", "diff_src", *args.diff_src, "dst", *args.saved_dst);
}

// Tensors for timing without the user's (Note [scratch data]). The backward of max and min reads
// a dst that should be the forward's result; scratch dst holds random values in [0.5, 1), which
// src elements equal only by chance: the timing runs the common path (ties are rare) with the
// same memory traffic.
struct Scratch {
  Tensor src, dst, diff_dst, diff_src;
  ReduceArgs args(Direction direction) {
    ReduceArgs a;
    if (direction == Direction::fwd) {
      a.src = &src, a.dst = &dst;
    } else {
      a.src = &src, a.saved_dst = &dst, a.diff_dst = &diff_dst, a.diff_src = &diff_src;
    }
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct ReduceOp : detail::OpTraits<OpKind::reduce> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const ReduceDesc& desc, Direction direction) {
    Scratch s{detail::random_tensor(context, desc.src_dims, desc.dtype, desc.layout, -1, 1, 1),
              detail::random_tensor(context, desc.dst_dims, desc.dtype, desc.layout, 0.5f, 1, 2),
              Tensor(), Tensor()};
    if (direction != Direction::fwd) {
      s.diff_dst = detail::random_tensor(context, desc.dst_dims, desc.dtype, desc.layout, -1, 1, 3);
      s.diff_src = detail::random_tensor(context, desc.src_dims, desc.dtype, desc.layout, -1, 1, 4);
    }
    return s;
  }
};
using Dispatch = detail::Dispatch<ReduceOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(reduce, ReduceOp)

std::shared_ptr<const Choice> reduce_bwd(Context& context, const ReduceDesc& desc,
                                         const Tensor& src, const Tensor& dst,
                                         const Tensor& diff_dst, Tensor& diff_src) {
  ReduceArgs args;
  args.src = &src, args.saved_dst = &dst, args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

std::shared_ptr<const Choice> reduce_bwd(Context& context, const ReduceDesc& desc,
                                         const Tensor& diff_dst, Tensor& diff_src) {
  ReduceArgs args;
  args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(reduce, ReduceOp)

}  // namespace dnnx
