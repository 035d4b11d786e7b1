// Activations, backend-agnostic: the checks of a call against the desc (aliasing rules of in-place
// calls included) and the scratch tensors for timing; the call itself goes through Note [op
// dispatch].
//
// Note [activation aliasing]
// An activation is elementwise, so it may run in place: forward with dst over exactly src's
// memory (cudnn.torch's inplace=true), backward with diff_src over exactly diff_dst's. "Exactly"
// means the same first element and the same strides (ignoring size-1 dims, whose strides never
// matter): then element i of the output is element i of the input, read before it is written.
// Any other overlap would have an element read after another element's write landed on it, so it
// is an InvalidArgument, as is diff_src overlapping the saved src or dst. Given both, src and dst
// must not overlap: after an in-place forward pass src holds dst's values, and a candidate reading
// src would compute the wrong derivative.

#include <dnnx/ops/activation.hpp>

#include "core/activation_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::ActivationArgs;

void check_tensor(const Context& context, const ActivationDesc& desc, const char* role,
                  const Tensor& tensor) {
  detail::check_dtype(role, tensor, desc.dtype);
  detail::check_dims(role, tensor, desc.dims);
  detail::check_data(role, tensor);
  detail::check_device(context, role, tensor);
}

void check_layout(const ActivationDesc& desc, const char* role, const Tensor& tensor) {
  DNNX_CHECK_ARG(tensor.is_dense(desc.layout), "layout mismatch: ", role, " strides ",
                 tensor.strides(), " are not dense ", to_string(desc.layout), " (expected strides ",
                 dense_strides(desc.dims, desc.layout), ")");
}

bool same_strides(const Tensor& a, const Tensor& b) {
  for (int i = 0; i < a.rank(); ++i) {
    if (a.dims()[i] != 1 && a.strides()[i] != b.strides()[i]) return false;
  }
  return true;
}

// Note [activation aliasing]: `out` may be exactly `in` when `in_place` allows it, else disjoint.
void check_alias(const char* out_role, const Tensor& out, const char* in_role, const Tensor& in,
                 bool in_place) {
  if (!detail::overlaps(out, in)) return;
  if (in_place && out.data() == in.data()) {
    DNNX_CHECK_ARG(same_strides(out, in), out_role, " shares ", in_role,
                   "'s memory (in place) but has strides ", out.strides(), " where ", in_role,
                   " has ", in.strides(), "; in place needs identical strides");
    return;
  }
  DNNX_CHECK_ARG(
      false, out_role, " overlaps ", in_role, " in memory without being ", in_role, " itself (",
      out_role, " starts at byte offset ",
      static_cast<const char*>(out.data()) - static_cast<const char*>(in.data()), " from ", in_role,
      ")",
      in_place ? "; in place needs the very same memory and strides" : "; use separate buffers");
}

void check_fwd(const Context& context, const ActivationDesc& desc, const ActivationArgs& args) {
  DNNX_ASSERT(args.src != nullptr && args.dst != nullptr);
  check_tensor(context, desc, "src", *args.src);
  check_tensor(context, desc, "dst", *args.dst);
  check_alias("dst", *args.dst, "src", *args.src, true);
  check_layout(desc, "src", *args.src);
  check_layout(desc, "dst", *args.dst);
}

void check_saved(const Context& context, const ActivationDesc& desc, const char* role,
                 const Tensor* tensor, bool needed) {
  const char* other = std::string_view(role) == "src" ? "dst" : "src";
  if (needed) {
    DNNX_CHECK_ARG(tensor != nullptr, role, " is null but desc.saved is ", to_string(desc.saved),
                   "; pass the forward ", role,
                   std::string_view(role) == "src" ? " (input)" : " (output)",
                   " or set desc.saved = ", other);
    check_tensor(context, desc, role, *tensor);
  } else {
    DNNX_CHECK_ARG(tensor == nullptr, role, " is given but desc.saved is ", to_string(desc.saved),
                   ", so no candidate may read it; pass nullptr or set desc.saved = src_and_dst");
  }
}

void check_bwd(const Context& context, const ActivationDesc& desc, const ActivationArgs& args) {
  DNNX_ASSERT(args.diff_dst != nullptr && args.diff_src != nullptr);
  check_saved(context, desc, "src", args.src, desc.saved != ActivationSaved::dst);
  check_saved(context, desc, "dst", args.saved_dst, desc.saved != ActivationSaved::src);
  if (args.src != nullptr && args.saved_dst != nullptr) {
    DNNX_CHECK_ARG(!detail::overlaps(*args.src, *args.saved_dst),
                   "src and dst overlap in memory: after an in-place forward pass src holds dst's "
                   "values; set desc.saved = dst and pass src = nullptr");
  }
  check_tensor(context, desc, "diff_dst", *args.diff_dst);
  check_tensor(context, desc, "diff_src", *args.diff_src);
  check_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst, true);
  if (args.src != nullptr) check_alias("diff_src", *args.diff_src, "src", *args.src, false);
  if (args.saved_dst != nullptr)
    check_alias("diff_src", *args.diff_src, "dst", *args.saved_dst, false);
  if (args.src != nullptr) check_layout(desc, "src", *args.src);
  if (args.saved_dst != nullptr) check_layout(desc, "dst", *args.saved_dst);
  check_layout(desc, "diff_dst", *args.diff_dst);
  check_layout(desc, "diff_src", *args.diff_src);
}

// Tensors for timing without the user's (Note [scratch data]): separate buffers, every forward
// tensor present as desc.saved says.
struct Scratch {
  ActivationSaved saved = ActivationSaved::src_and_dst;
  Tensor src, dst, diff_dst, diff_src;
  ActivationArgs args(Direction direction) {
    ActivationArgs a;
    if (direction == Direction::fwd) {
      a.src = &src, a.dst = &dst;
      return a;
    }
    if (saved != ActivationSaved::dst) a.src = &src;
    if (saved != ActivationSaved::src) a.saved_dst = &dst;
    a.diff_dst = &diff_dst, a.diff_src = &diff_src;
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct ActivationOp : detail::OpTraits<OpKind::activation> {
  static void check(const Context& context, const Desc& desc, Direction direction,
                    const Args& args) {
    if (direction == Direction::fwd) return check_fwd(context, desc, args);
    check_bwd(context, desc, args);
  }
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const ActivationDesc& desc, Direction direction) {
    Scratch s;
    s.saved = desc.saved;
    // Inputs in [-3, 3): both branches of every kind, tanh and sigmoid away from saturation.
    s.src = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -3, 3, 1);
    s.dst = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1, 1, 2);
    if (direction != Direction::fwd) {
      s.diff_dst = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1, 1, 3);
      s.diff_src = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1, 1, 4);
    }
    return s;
  }
};
using Dispatch = detail::Dispatch<ActivationOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(activation, ActivationOp)

std::shared_ptr<const Choice> activation_bwd(Context& context, const ActivationDesc& desc,
                                             const Tensor* src, const Tensor* dst,
                                             const Tensor& diff_dst, Tensor& diff_src) {
  ActivationArgs args;
  args.src = src, args.saved_dst = dst, args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(activation, ActivationOp)

}  // namespace dnnx
