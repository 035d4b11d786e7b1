// Pooling, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/pool.hpp>

#include "core/check.hpp"
#include "core/pool_args.hpp"
#include "core/strings.hpp"
#include "ops/dispatch.hpp"

#include <utility>

namespace dnnx {
namespace {

using detail::PoolArgs;

void check_tensor(const Context& context, const PoolDesc& desc, const char* role,
                  const Tensor& tensor, const Dims& expected) {
  detail::check_operand(context, role, tensor, expected, desc.dtype, desc.layout);
}

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  detail::check_no_overlap("pooling", out_role, out, in_role, in);
}

void check_args(const Context& context, const PoolDesc& desc, Direction direction,
                const PoolArgs& args) {
  if (direction == Direction::fwd) {
    check_tensor(context, desc, "src", *args.src, desc.src_dims());
    check_tensor(context, desc, "dst", *args.dst, desc.dst_dims());
    check_no_alias("dst", *args.dst, "src", *args.src);
    return;
  }
  check_tensor(context, desc, "src", *args.src, desc.src_dims());
  check_tensor(context, desc, "dst", *args.dst_in, desc.dst_dims());
  check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
  check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims());
  check_no_alias("diff_src", *args.diff_src, "src", *args.src);
  check_no_alias("diff_src", *args.diff_src, "dst", *args.dst_in);
  check_no_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
}

// Tensors for timing without the user's (Note [scratch data]). The backward pass's dst is random
// rather than the forward of src (scratch tensors are made while selection holds the backend):
// candidates that read it (cuDNN's max modes) then match fewer elements, which costs them the
// same window scans.
struct Scratch {
  Tensor src, dst, diff_dst, diff_src;
  PoolArgs args(Direction direction) {
    PoolArgs a;
    a.src = &src;
    if (direction == Direction::fwd) {
      a.dst = &dst;
    } else {
      a.dst_in = &dst;
      a.diff_dst = &diff_dst;
      a.diff_src = &diff_src;
    }
    return a;
  }
};

// The op's traits for Note [op dispatch].
struct PoolOp {
  using Desc = PoolDesc;
  using Args = PoolArgs;
  static constexpr OpKind kind = OpKind::pool;
  static detail::PoolBackend& backend(detail::Backend& backend) { return backend.pool(); }
  static void check(const Context& context, const PoolDesc& desc, Direction direction,
                    const PoolArgs& args) {
    check_args(context, desc, direction, args);
  }
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const PoolDesc& desc, Direction direction) {
    Scratch scratch;
    scratch.src =
        detail::random_tensor(context, desc.src_dims(), desc.dtype, desc.layout, -1, 1, 1);
    scratch.dst =
        detail::random_tensor(context, desc.dst_dims(), desc.dtype, desc.layout, -1, 1, 2);
    if (direction != Direction::fwd) {
      scratch.diff_dst =
          detail::random_tensor(context, desc.dst_dims(), desc.dtype, desc.layout, -1, 1, 3);
      scratch.diff_src =
          detail::random_tensor(context, desc.src_dims(), desc.dtype, desc.layout, -1, 1, 4);
    }
    return scratch;
  }
};
using Dispatch = detail::Dispatch<PoolOp>;

}  // namespace

std::shared_ptr<const Choice> pool_fwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       Tensor& dst) {
  PoolArgs args;
  args.src = &src;
  args.dst = &dst;
  return Dispatch::run(context, desc, Direction::fwd, args);
}

std::shared_ptr<const Choice> pool_bwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       const Tensor& dst, const Tensor& diff_dst,
                                       Tensor& diff_src) {
  PoolArgs args;
  args.src = &src;
  args.dst_in = &dst;
  args.diff_dst = &diff_dst;
  args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

std::vector<AlgoInfo> pool_list(Context& context, const PoolDesc& desc, Direction direction) {
  return Dispatch::list(context, desc, direction);
}

std::shared_ptr<const Choice> pool_select(Context& context, const PoolDesc& desc,
                                          Direction direction) {
  return Dispatch::select(context, desc, direction);
}

ProfileResult pool_profile(Context& context, const PoolDesc& desc, Direction direction) {
  return Dispatch::profile(context, desc, direction);
}

}  // namespace dnnx
