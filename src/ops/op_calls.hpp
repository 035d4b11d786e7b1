// What every op's file in src/ops shares beside Note [op dispatch]: the common part of an op's
// traits, the per-tensor checks whose messages every op spells the same way, and the public
// list / select / profile calls, which only forward to the op's Dispatch.

#pragma once

#include "core/check.hpp"
#include "core/strings.hpp"
#include "ops/dispatch.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

namespace dnnx::detail {

/// The types and kind of an op's traits for Note [op dispatch]; the traits add `check`,
/// `Scratch` and `scratch` (and the optional members dispatch.hpp names).
template <OpKind op_kind>
struct OpTraits {
  using Desc = typename OpTypes<op_kind>::Desc;  // from the op table
  using Args = typename OpTypes<op_kind>::Args;
  static constexpr OpKind kind = op_kind;
};

/// "dtype mix: <role> is <got> but <origin> is <dtype>".
inline void check_dtype(const char* role, const Tensor& tensor, DType dtype,
                        std::string_view origin = "the desc's dtype") {
  DNNX_CHECK_ARG(tensor.dtype() == dtype, "dtype mix: ", role, " is ", to_string(tensor.dtype()),
                 " but ", origin, " is ", to_string(dtype));
}

/// "<role> dims <got> do not match the desc, which expects <expected><what>".
inline void check_dims(const char* role, const Tensor& tensor, const Dims& expected,
                       std::string_view what = "") {
  DNNX_CHECK_ARG(tensor.dims() == expected, role, " dims ", tensor.dims(),
                 " do not match the desc, which expects ", expected, what);
}

/// "<role> has null data".
inline void check_data(const char* role, const Tensor& tensor) {
  DNNX_CHECK_ARG(tensor.data() != nullptr, role, " has null data");
}

/// "<role> is on <device> but the context runs on <device>".
inline void check_device(const Context& context, const char* role, const Tensor& tensor) {
  DNNX_CHECK_ARG(tensor.device() == context.device(), role, " is on ", to_string(tensor.device()),
                 " but the context runs on ", to_string(context.device()));
}

/// check_operand against the desc's dtype and layout.
template <typename Desc>
void check_tensor(const Context& context, const Desc& desc, const char* role, const Tensor& tensor,
                  const Dims& expected) {
  check_operand(context, role, tensor, expected, desc.dtype, desc.layout);
}

/// A bias (or its gradient): the desc's dtype, one value per output channel, contiguous.
inline void check_bias(const Context& context, const char* role, const Tensor& bias,
                       const Dims& expected, DType dtype) {
  check_dtype(role, bias, dtype);
  check_dims(role, bias, expected, " (one value per output channel)");
  check_data(role, bias);
  DNNX_CHECK_ARG(bias.strides()[0] == 1 || bias.dims()[0] == 1, role,
                 " must be contiguous, got stride ", bias.strides()[0]);
  check_device(context, role, bias);
}

/// `host` where the context runs: itself on the cpu, else a copy in the context's memory, dense
/// in `layout`. Scratch data that must be exact (indices, labels) is written on the host.
inline Tensor on_context_device(const Context& context, Tensor host, Layout layout) {
  if (context.device() == Device::cpu()) return host;
  Tensor device = Tensor::empty(host.dims(), host.dtype(), layout, context.allocator());
  copy(host, device);
  return device;
}

/// Class labels of `dims` in `dtype` (i32 or i64) on the context's device, uniform in [0, classes)
/// with one in eight (at random) `ignore_index`, from `seed` (Note [scratch data]). Written as
/// integers: through f32 they would lose classes above 2^24.
inline Tensor random_labels(const Context& context, const Dims& dims, DType dtype,
                            std::int64_t classes, std::int64_t ignore_index, unsigned seed) {
  Tensor host = Tensor::empty(dims, dtype);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
  auto* bytes = static_cast<unsigned char*>(host.data());
  const std::size_t size = size_of(dtype);
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const std::int64_t label = (rng() % 8 == 0) ? ignore_index : pick(rng);
    if (dtype == DType::i32) {
      const auto narrow = static_cast<std::int32_t>(label);
      std::memcpy(bytes + static_cast<std::size_t>(i) * size, &narrow, size);
    } else {
      std::memcpy(bytes + static_cast<std::size_t>(i) * size, &label, size);
    }
  }
  return on_context_device(context, std::move(host), Layout::channels_first);
}

}  // namespace dnnx::detail

/// Defines `<op>_list`, `<op>_select` and `<op>_profile` (include/dnnx/ops/<op>.hpp) for the
/// traits `Op`, inside namespace dnnx.
#define DNNX_DEFINE_OP_CALLS(op, Op)                                                             \
  std::vector<AlgoInfo> op##_list(Context& context, const Op::Desc& desc, Direction direction) { \
    return ::dnnx::detail::Dispatch<Op>::list(context, desc, direction);                         \
  }                                                                                              \
  std::shared_ptr<const Choice> op##_select(Context& context, const Op::Desc& desc,              \
                                            Direction direction) {                               \
    return ::dnnx::detail::Dispatch<Op>::select(context, desc, direction);                       \
  }                                                                                              \
  ProfileResult op##_profile(Context& context, const Op::Desc& desc, Direction direction) {      \
    return ::dnnx::detail::Dispatch<Op>::profile(context, desc, direction);                      \
  }

/// Defines `<op>_fwd(context, desc, src, dst)` (include/dnnx/ops/<op>.hpp), the forward call of
/// an op whose forward takes `src` and `dst` alone, for the traits `Op`, inside namespace dnnx.
#define DNNX_DEFINE_SRC_DST_FWD(op, Op)                                            \
  std::shared_ptr<const Choice> op##_fwd(Context& context, const Op::Desc& desc,   \
                                         const Tensor& src, Tensor& dst) {         \
    Op::Args args;                                                                 \
    args.src = &src, args.dst = &dst;                                              \
    return ::dnnx::detail::Dispatch<Op>::run(context, desc, Direction::fwd, args); \
  }
