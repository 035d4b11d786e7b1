// Reorder, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/reorder.hpp>

#include "core/reorder_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::ReorderArgs;

// src and dst each have their own dtype and layout, so a dtype mismatch names the desc's field.
void check_tensor(const Context& context, const char* role, const Tensor& tensor, const Dims& dims,
                  DType dtype, const char* dtype_field, Layout layout) {
  detail::check_dtype(role, tensor, dtype, dtype_field);
  detail::check_operand(context, role, tensor, dims, dtype, layout);
}

void check_args(const Context& context, const ReorderDesc& desc, Direction,
                const ReorderArgs& args) {
  DNNX_ASSERT(args.src != nullptr && args.dst != nullptr);
  check_tensor(context, "src", *args.src, desc.dims, desc.src_dtype, "the desc's src_dtype",
               desc.src_layout);
  check_tensor(context, "dst", *args.dst, desc.dims, desc.dst_dtype, "the desc's dst_dtype",
               desc.dst_layout);
  // A layout change moves elements across each other: no in-place form exists.
  detail::check_no_overlap("reorder", "dst", *args.dst, "src", *args.src);
}

// Tensors for timing without the user's (Note [scratch data]).
struct Scratch {
  Tensor src, dst;
  ReorderArgs args(Direction) {
    ReorderArgs a;
    a.src = &src, a.dst = &dst;
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct ReorderOp : detail::OpTraits<OpKind::reorder> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const ReorderDesc& desc, Direction) {
    return {detail::random_tensor(context, desc.dims, desc.src_dtype, desc.src_layout, -1, 1, 1),
            detail::random_tensor(context, desc.dims, desc.dst_dtype, desc.dst_layout, -1, 1, 2)};
  }
  // With beta != 0 a call reads its output: timing it on the caller's tensors would accumulate
  // into them once per timed run, so selection times on Scratch instead.
  static bool stateful(const ReorderDesc& desc, Direction, const ReorderArgs&) {
    return desc.beta != 0.0f;
  }
};

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(reorder, ReorderOp)
DNNX_DEFINE_OP_CALLS(reorder, ReorderOp)

}  // namespace dnnx
