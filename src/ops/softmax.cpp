// Softmax, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/softmax.hpp>

#include "core/softmax_args.hpp"
#include "ops/op_calls.hpp"

#include <cmath>
#include <random>
#include <vector>

namespace dnnx {
namespace {

using detail::SoftmaxArgs;

// Dims first: a rank mismatch reads "dst dims 2x3x4 do not match ...", like any other dims
// mismatch of a softmax call.
void check_tensor(const Context& context, const SoftmaxDesc& desc, const char* role,
                  const Tensor* tensor) {
  DNNX_CHECK_ARG(tensor != nullptr, role, " is missing (null pointer)");
  detail::check_dims(role, *tensor, desc.dims);
  detail::check_operand(context, role, *tensor, desc.dims, desc.dtype, desc.layout);
}

struct SoftmaxOp : detail::OpTraits<OpKind::softmax> {
  static void check(const Context& context, const Desc& desc, Direction direction,
                    const Args& args) {
    if (direction == Direction::fwd) {
      check_tensor(context, desc, "src", args.src);
      check_tensor(context, desc, "dst", args.dst);
      // In place is the same window; a partial overlap would read values already written.
      const bool same = args.dst->data() == args.src->data();
      DNNX_CHECK_ARG(same || !detail::overlaps(*args.dst, *args.src),
                     "dst overlaps src in memory without being src itself; softmax runs in "
                     "place only when dst is exactly src (same data pointer, dims and strides)");
      return;
    }
    check_tensor(context, desc, "dst", args.saved_dst);
    check_tensor(context, desc, "diff_dst", args.diff_dst);
    check_tensor(context, desc, "diff_src", args.diff_src);
    detail::check_no_overlap("the softmax backward pass", "diff_src", *args.diff_src, "dst",
                             *args.saved_dst);
    detail::check_no_overlap("the softmax backward pass", "diff_src", *args.diff_src, "diff_dst",
                             *args.diff_dst);
  }

  // Note [scratch data] (dispatch.hpp): valid values for timing. The backward's dst is a real
  // softmax output (positive, each group summing to one; its log for log-softmax) so that no
  // candidate meets inputs it never sees in practice.
  struct Scratch {
    Tensor src, dst, diff_dst, diff_src;
    Args args(Direction direction) {
      Args a;
      if (direction == Direction::fwd) {
        a.src = &src, a.dst = &dst;
      } else {
        a.saved_dst = &dst, a.diff_dst = &diff_dst, a.diff_src = &diff_src;
      }
      return a;
    }
  };
  static Scratch scratch(const Context& context, const Desc& desc, Direction direction) {
    Scratch s;
    if (direction == Direction::fwd) {
      s.src = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -4.0f, 4.0f, 1);
      s.dst = Tensor::empty(desc.dims, desc.dtype, desc.layout, context.allocator());
      return s;
    }
    s.dst = softmax_output(context, desc);
    s.diff_dst = detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1.0f, 1.0f, 2);
    s.diff_src = Tensor::empty(desc.dims, desc.dtype, desc.layout, context.allocator());
    return s;
  }

  // Selection may build scratch tensors with the context's lock held, so no op runs here: the
  // softmax of random values is formed on the host.
  static Tensor softmax_output(const Context& context, const Desc& desc) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(0.1f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(desc.dims.product()));
    for (float& v : values) v = uniform(rng);
    const detail::AxisGeometry g = detail::axis_geometry(desc, /*logical=*/true);
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t i = 0; i < g.inner; ++i) {
        double sum = 0;
        for (std::int64_t a = 0; a < g.axis; ++a)
          sum += values[static_cast<std::size_t>((o * g.axis + a) * g.inner + i)];
        for (std::int64_t a = 0; a < g.axis; ++a) {
          float& v = values[static_cast<std::size_t>((o * g.axis + a) * g.inner + i)];
          v = static_cast<float>(v / sum);
          if (desc.log) v = std::log(v);
        }
      }
    }
    Tensor host = Tensor::empty(desc.dims, desc.dtype, desc.layout);
    host.copy_from_f32(values);
    return detail::on_context_device(context, std::move(host), desc.layout);
  }
};

using Dispatch = detail::Dispatch<SoftmaxOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(softmax, SoftmaxOp)

std::shared_ptr<const Choice> softmax_bwd(Context& context, const SoftmaxDesc& desc,
                                          const Tensor& dst, const Tensor& diff_dst,
                                          Tensor& diff_src) {
  SoftmaxArgs args;
  args.saved_dst = &dst, args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(softmax, SoftmaxOp)

}  // namespace dnnx
