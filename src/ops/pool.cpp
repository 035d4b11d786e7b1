// Pooling, backend-agnostic: the checks of a call against the desc and the scratch tensors for
// timing; the call itself goes through Note [op dispatch].

#include <dnnx/ops/pool.hpp>

#include "core/pool_args.hpp"
#include "ops/op_calls.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace dnnx {
namespace {

using detail::PoolArgs;

using detail::check_tensor;

void check_no_alias(const char* out_role, const Tensor& out, const char* in_role,
                    const Tensor& in) {
  detail::check_no_overlap("pooling", out_role, out, in_role, in);
}

// The overload a call used must match desc.indices.
void check_overload(const PoolDesc& desc, Direction direction, bool has_indices) {
  const char* name = direction == Direction::fwd ? "pool_fwd" : "pool_bwd";
  const char* with = direction == Direction::fwd ? "pool_fwd(context, desc, src, dst, indices)"
                                                 : "pool_bwd(context, desc, diff_dst, indices, "
                                                   "diff_src)";
  const char* without = direction == Direction::fwd
                            ? "pool_fwd(context, desc, src, dst)"
                            : "pool_bwd(context, desc, src, dst, diff_dst, diff_src)";
  DNNX_CHECK_ARG(!desc.indices || has_indices, "the desc's indices is set, so ", name,
                 " takes the argmax indices: call ", with);
  DNNX_CHECK_ARG(desc.indices || !has_indices, name,
                 " was given an indices tensor but the desc's indices is not set; set "
                 "desc.indices (mode max) or call ",
                 without);
}

// Indices: i64 (PyTorch's) or i32, with dst's dims and layout.
void check_indices(const Context& context, const PoolDesc& desc, const Tensor& indices) {
  DNNX_CHECK_ARG(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
                 "indices dtype is ", to_string(indices.dtype()),
                 "; accepted: i64 (PyTorch's index type) or i32");
  detail::check_operand(context, "indices", indices, desc.dst_dims(), indices.dtype(), desc.layout);
}

void check_args(const Context& context, const PoolDesc& desc, Direction direction,
                const PoolArgs& args) {
  const bool has_indices =
      direction == Direction::fwd ? args.indices != nullptr : args.indices_in != nullptr;
  check_overload(desc, direction, has_indices);
  if (direction == Direction::fwd) {
    check_tensor(context, desc, "src", *args.src, desc.src_dims());
    check_tensor(context, desc, "dst", *args.dst, desc.dst_dims());
    check_no_alias("dst", *args.dst, "src", *args.src);
    if (desc.indices) {
      check_indices(context, desc, *args.indices);
      check_no_alias("indices", *args.indices, "src", *args.src);
      check_no_alias("indices", *args.indices, "dst", *args.dst);
    }
    return;
  }
  if (desc.indices) {
    check_tensor(context, desc, "diff_dst", *args.diff_dst, desc.dst_dims());
    check_indices(context, desc, *args.indices_in);
    check_tensor(context, desc, "diff_src", *args.diff_src, desc.src_dims());
    check_no_alias("diff_src", *args.diff_src, "diff_dst", *args.diff_dst);
    check_no_alias("diff_src", *args.diff_src, "indices", *args.indices_in);
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
// same window scans. For the same reason the backward's indices are not the forward's argmax but
// a random element of each window (valid, so no candidate rejects them, and as scattered).
struct Scratch {
  bool with_indices = false;
  Tensor src, dst, diff_dst, diff_src, indices;
  PoolArgs args(Direction direction) {
    PoolArgs a;
    if (direction == Direction::fwd) {
      a.src = &src;
      a.dst = &dst;
      if (with_indices) a.indices = &indices;
    } else if (with_indices) {
      a.diff_dst = &diff_dst;
      a.indices_in = &indices;
      a.diff_src = &diff_src;
    } else {
      a.src = &src;
      a.dst_in = &dst;
      a.diff_dst = &diff_dst;
      a.diff_src = &diff_src;
    }
    return a;
  }
};

// Indices (i64) naming a random element of every window; the same pattern in every (n, c) plane.
// Written as integers: through f32 they would lose positions above 2^24.
Tensor random_indices(const Context& context, const PoolDesc& desc) {
  const int n = desc.spatial_dims;
  std::array<std::int64_t, 3> out{1, 1, 1}, in{1, 1, 1};
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(3 - n) + static_cast<std::size_t>(i);
    out[k] = desc.output_size(i);
    in[k] = desc.input[static_cast<std::size_t>(i)];
  }
  // The input elements of output o's window along (3-D) dim k.
  const auto span = [&](int k, std::int64_t o) {
    const int i = k - (3 - n);
    return i < 0 ? detail::pool_span(0, 1, 1, 1, 0) : detail::pool_span(desc, i, o);
  };
  std::mt19937_64 rng(7);
  const std::int64_t out_plane = out[0] * out[1] * out[2];
  std::vector<std::int64_t> pattern(static_cast<std::size_t>(out_plane));
  for (std::int64_t o = 0; o < out_plane; ++o) {
    const std::array<std::int64_t, 3> position{o / (out[1] * out[2]), o / out[2] % out[1],
                                               o % out[2]};
    std::int64_t flat = 0;
    for (int k = 0; k < 3; ++k) {
      const detail::PoolSpan window = span(k, position[static_cast<std::size_t>(k)]);
      flat = flat * in[static_cast<std::size_t>(k)] + window.begin +
             window.step *
                 static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(window.count()));
    }
    pattern[static_cast<std::size_t>(o)] = flat;
  }
  const Dims dims = desc.dst_dims();
  Tensor host = Tensor::empty(dims, DType::i64, desc.layout);
  auto* data = static_cast<std::int64_t*>(host.data());
  const std::int64_t planes = desc.batch * desc.channels;
  for (std::int64_t p = 0; p < planes; ++p) {
    const std::int64_t batch = p / desc.channels, channel = p % desc.channels;
    for (std::int64_t o = 0; o < out_plane; ++o) {
      const std::int64_t at = desc.layout == Layout::channels_last
                                  ? (batch * out_plane + o) * desc.channels + channel
                                  : p * out_plane + o;
      data[at] = pattern[static_cast<std::size_t>(o)];
    }
  }
  return detail::on_context_device(context, std::move(host), desc.layout);
}

// The op's traits for Note [op dispatch].
struct PoolOp : detail::OpTraits<OpKind::pool> {
  static constexpr auto& check = check_args;
  using Scratch = dnnx::Scratch;
  static Scratch scratch(const Context& context, const PoolDesc& desc, Direction direction) {
    Scratch scratch;
    scratch.with_indices = desc.indices;
    if (desc.indices && direction != Direction::fwd) {
      scratch.diff_dst =
          detail::random_tensor(context, desc.dst_dims(), desc.dtype, desc.layout, -1, 1, 3);
      scratch.indices = random_indices(context, desc);
      scratch.diff_src =
          detail::random_tensor(context, desc.src_dims(), desc.dtype, desc.layout, -1, 1, 4);
      return scratch;
    }
    scratch.src =
        detail::random_tensor(context, desc.src_dims(), desc.dtype, desc.layout, -1, 1, 1);
    scratch.dst =
        detail::random_tensor(context, desc.dst_dims(), desc.dtype, desc.layout, -1, 1, 2);
    if (desc.indices) {
      scratch.indices =
          Tensor::empty(desc.dst_dims(), DType::i64, desc.layout, context.allocator());
    }
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

DNNX_DEFINE_SRC_DST_FWD(pool, PoolOp)

std::shared_ptr<const Choice> pool_bwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       const Tensor& dst, const Tensor& diff_dst,
                                       Tensor& diff_src) {
  return Dispatch::run(
      context, desc, Direction::bwd_data,
      PoolArgs{.src = &src, .dst_in = &dst, .diff_dst = &diff_dst, .diff_src = &diff_src});
}

std::shared_ptr<const Choice> pool_fwd(Context& context, const PoolDesc& desc, const Tensor& src,
                                       Tensor& dst, Tensor& indices) {
  return Dispatch::run(context, desc, Direction::fwd,
                       PoolArgs{.src = &src, .dst = &dst, .indices = &indices});
}

std::shared_ptr<const Choice> pool_bwd(Context& context, const PoolDesc& desc,
                                       const Tensor& diff_dst, const Tensor& indices,
                                       Tensor& diff_src) {
  return Dispatch::run(
      context, desc, Direction::bwd_data,
      PoolArgs{.diff_dst = &diff_dst, .indices_in = &indices, .diff_src = &diff_src});
}

DNNX_DEFINE_OP_CALLS(pool, PoolOp)

}  // namespace dnnx
