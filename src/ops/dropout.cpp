// Dropout, backend-agnostic: the checks of a call against the desc, the generator's block range
// (taken here once, so every candidate a selection times draws the same mask, and the generator
// advances once per call), and the scratch tensors for timing; the call itself goes through Note
// [op dispatch], the mask through Note [saved state].

#include <dnnx/ops/dropout.hpp>

#include "core/dropout_args.hpp"
#include "ops/op_calls.hpp"

#include <cstring>

namespace dnnx {
namespace {

using detail::DropoutArgs;

void check_args(const Context& context, const DropoutDesc& desc, Direction direction,
                const DropoutArgs& args) {
  const bool forward = direction != Direction::bwd_data;
  const Tensor* in = forward ? args.src : args.diff_dst;
  Tensor* out = forward ? args.dst : args.diff_src;
  const char* in_role = forward ? "src" : "diff_dst";
  const char* out_role = forward ? "dst" : "diff_src";
  DNNX_ASSERT(in != nullptr && out != nullptr);
  detail::check_tensor(context, desc, in_role, *in, desc.dims);
  detail::check_tensor(context, desc, out_role, *out, desc.dims);
  detail::check_no_overlap("dropout", out_role, *out, in_role, *in);
  DNNX_ASSERT(direction == Direction::fwd || args.state != nullptr);
}

// A backward timed on its own reads a mask of dnnx's format keeping every other element, as if a
// training forward had filled it (candidates of another format refuse it at run time).
void fill_scratch_mask(const Context& context, const DropoutDesc& desc, SavedState& state) {
  const std::int64_t count = desc.dims.product();
  AlgoInfo writer;
  writer.id = "scratch";
  writer.saved_state_format = detail::mask_bits_format;
  writer.saved_state_bytes = detail::mask_bits_bytes(count);
  detail::SavedStateWriter::fill(state, context.allocator(), OpKind::dropout,
                                 Direction::fwd_training, desc.key(), writer);
  if (writer.saved_state_bytes == 0) return;
  const Dims words{static_cast<std::int64_t>(writer.saved_state_bytes / 4)};
  Tensor host = Tensor::empty(words, DType::i32);
  std::memset(host.data(), 0x55, writer.saved_state_bytes);
  Tensor buffer =
      Tensor::view(state.data(), words, DType::i32, Layout::channels_first, state.device());
  copy(host, buffer);
}

// Tensors for timing without the user's (Note [scratch data]); a training forward fills the
// scratch state, which a backward timed on its own reads (filled by the reference-format
// candidate through a forward first: see scratch()).
struct Scratch {
  Tensor src, dst;  // dst doubles as diff_dst, src as diff_src
  SavedState state;
  DropoutArgs args(Direction direction) {
    DropoutArgs a;
    if (direction == Direction::bwd_data) {
      a.diff_dst = &dst, a.diff_src = &src;
    } else {
      a.src = &src, a.dst = &dst;
    }
    if (direction != Direction::fwd) a.state = &state;
    a.seed = Generator::default_seed;
    return a;
  }
};

struct DropoutOp : detail::OpTraits<OpKind::dropout> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const DropoutDesc& desc, Direction direction) {
    Scratch s{detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1, 1, 1),
              detail::random_tensor(context, desc.dims, desc.dtype, desc.layout, -1, 1, 2),
              SavedState()};
    if (direction == Direction::bwd_data) fill_scratch_mask(context, desc, s.state);
    return s;
  }
  static SavedState* saved_state(const DropoutArgs& args) { return args.state; }
};
using Dispatch = detail::Dispatch<DropoutOp>;

}  // namespace

DNNX_DEFINE_SRC_DST_FWD(dropout, DropoutOp)

std::shared_ptr<const Choice> dropout_fwd_training(Context& context, const DropoutDesc& desc,
                                                   Generator& generator, const Tensor& src,
                                                   Tensor& dst, SavedState& state) {
  DropoutArgs args;
  args.src = &src, args.dst = &dst, args.state = &state;
  args.seed = generator.seed();
  args.offset = generator.offset();
  auto choice = Dispatch::run(context, desc, Direction::fwd_training, args);
  generator.consume(static_cast<std::uint64_t>(desc.dims.product()));
  return choice;
}

std::shared_ptr<const Choice> dropout_bwd(Context& context, const DropoutDesc& desc,
                                          const Tensor& diff_dst, Tensor& diff_src,
                                          const SavedState& state) {
  DropoutArgs args;
  args.diff_dst = &diff_dst, args.diff_src = &diff_src;
  // A backward only reads the state (Note [saved state]); Args holds one pointer for both uses.
  args.state = const_cast<SavedState*>(&state);
  return Dispatch::run(context, desc, Direction::bwd_data, args);
}

DNNX_DEFINE_OP_CALLS(dropout, DropoutOp)

}  // namespace dnnx
