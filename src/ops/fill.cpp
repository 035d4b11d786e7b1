// Fill, backend-agnostic: the checks of a call against the desc, the f32 parameters of the
// distribution and the generator's block range (derived here once, so that every backend draws
// the same bits), and the scratch tensor for timing; the call itself goes through Note [op
// dispatch].

#include <dnnx/ops/fill.hpp>

#include "core/fill_args.hpp"
#include "ops/op_calls.hpp"

namespace dnnx {
namespace {

using detail::FillArgs;

void check_args(const Context& context, const FillDesc& desc, Direction, const FillArgs& args) {
  DNNX_ASSERT(args.dst != nullptr);
  detail::check_tensor(context, desc, "dst", *args.dst, desc.dims);
}

// Timing writes a scratch tensor of the desc's dims with the distribution's default parameters.
struct Scratch {
  Tensor dst;
  detail::random::DrawParams params;
  FillArgs args(Direction) {
    FillArgs a;
    a.dst = &dst;
    a.params = params;
    a.seed = Generator::default_seed;
    return a;
  }
};

struct FillOp : detail::OpTraits<OpKind::fill> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const FillDesc& desc, Direction) {
    return {Tensor::empty(desc.dims, desc.dtype, desc.layout, context.allocator()),
            detail::draw_params(desc.distribution, FillParams{})};
  }
};
using Dispatch = detail::Dispatch<FillOp>;

}  // namespace

std::shared_ptr<const Choice> fill_fwd(Context& context, const FillDesc& desc,
                                       const FillParams& params, Generator& generator,
                                       Tensor& dst) {
  FillArgs args;
  Dispatch::with_context(context, desc, Direction::fwd, [&] {
    desc.validate();
    params.validate(desc.distribution);
    args.params = detail::draw_params(desc.distribution, params);
  });
  args.dst = &dst;
  args.seed = generator.seed();
  args.offset = generator.offset();
  auto choice = Dispatch::run(context, desc, Direction::fwd, args);
  if (desc.distribution != Distribution::constant)
    generator.consume(static_cast<std::uint64_t>(desc.dims.product()));
  return choice;
}

DNNX_DEFINE_OP_CALLS(fill, FillOp)

}  // namespace dnnx
