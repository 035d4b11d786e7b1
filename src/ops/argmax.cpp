// Argmax, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/argmax.hpp>

#include "core/argmax_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

struct ArgmaxOp : detail::OpTraits<OpKind::argmax> {
  static void check(const Context& context, const Desc& desc, Direction, const Args& args) {
    DNNX_ASSERT(args.src != nullptr && args.dst != nullptr);
    detail::check_operand(context, "src", *args.src, desc.src_dims, desc.dtype, desc.layout);
    detail::check_operand(context, "dst", *args.dst, desc.dst_dims(), desc.index_dtype,
                          desc.layout);
    detail::check_no_overlap("argmax", "dst", *args.dst, "src", *args.src);
  }
  // Note [scratch data] (dispatch.hpp).
  struct Scratch {
    Tensor src, dst;
    Args args(Direction) {
      Args a;
      a.src = &src, a.dst = &dst;
      return a;
    }
  };
  static Scratch scratch(const Context& context, const Desc& desc, Direction) {
    return {detail::random_tensor(context, desc.src_dims, desc.dtype, desc.layout, -1, 1, 1),
            Tensor::empty(desc.dst_dims(), desc.index_dtype, desc.layout, context.allocator())};
  }
};
using Dispatch = detail::Dispatch<ArgmaxOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(argmax, ArgmaxOp)
DNNX_DEFINE_OP_CALLS(argmax, ArgmaxOp)

}  // namespace dnnx
