// AddDesc: validation, printing. Every message names the field and its value.

#include <dnnx/ops/add.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::shortest;

}  // namespace

AddDesc AddDesc::from_dims(const Dims& src, const Dims& dst, float alpha, float beta, DType dtype,
                           Layout layout) {
  AddDesc desc;
  desc.src_dims = src;
  desc.dst_dims = dst;
  desc.alpha = alpha;
  desc.beta = beta;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

AddDesc AddDesc::bias(const Dims& dst, DType dtype, Layout layout) {
  DNNX_CHECK_ARG(dst.rank() >= 2, "a bias add needs dst dims of rank >= 2 (N, C, ...), got '", dst,
                 "' of rank ", dst.rank());
  Dims src = dst;
  for (int i = 0; i < src.rank(); ++i) src[i] = i == 1 ? dst[1] : 1;
  return from_dims(src, dst, 1.0f, 1.0f, dtype, layout);
}

void AddDesc::validate() const {
  DNNX_CHECK_ARG(dst_dims.rank() >= 1 && dst_dims.rank() <= 5, "dst_dims '", dst_dims,
                 "' have rank ", dst_dims.rank(), "; add accepts rank 1 to 5 (N, C, spatial...)");
  DNNX_CHECK_ARG(src_dims.rank() == dst_dims.rank(), "src_dims '", src_dims, "' have rank ",
                 src_dims.rank(), " but dst_dims ", dst_dims, " have rank ", dst_dims.rank(),
                 "; the ranks must match (write 1 for each broadcast axis)");
  for (int i = 0; i < dst_dims.rank(); ++i) {
    DNNX_CHECK_ARG(dst_dims[i] >= 1, "dst_dims ", dst_dims, ": entry ", i, " must be >= 1, got ",
                   dst_dims[i]);
    DNNX_CHECK_ARG(src_dims[i] >= 1, "src_dims ", src_dims, ": entry ", i, " must be >= 1, got ",
                   src_dims[i]);
  }
  for (int i = 0; i < dst_dims.rank(); ++i) {
    DNNX_CHECK_ARG(src_dims[i] == dst_dims[i] || src_dims[i] == 1, "src_dims ", src_dims,
                   " do not broadcast to dst_dims ", dst_dims, ": axis ", i, " has ", src_dims[i],
                   " in src and ", dst_dims[i], " in dst (each src dim must equal dst's or be 1)");
  }
  // Note [size limits] (core/check.hpp); src has no more elements than dst, which it broadcasts to.
  detail::checked_count(dst_dims, "dst_dims");
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout has the invalid value ", static_cast<int>(layout));
  DNNX_CHECK_ARG(std::isfinite(alpha), "alpha must be finite, got ", shortest(alpha));
  DNNX_CHECK_ARG(std::isfinite(beta), "beta must be finite, got ", shortest(beta));
}

std::string AddDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile add --src " << src_dims << " --dst " << dst_dims << " --alpha "
      << shortest(alpha) << " --beta " << shortest(beta) << " --dtype " << to_string(dtype)
      << " --layout " << to_string(layout) << " --direction "
      << (direction == Direction::fwd ? "fwd" : "bwd");
  return out.str();
}

std::string AddDesc::key() const {
  std::ostringstream out;
  out << "add src=" << src_dims << " dst=" << dst_dims << " alpha=" << shortest(alpha)
      << " beta=" << shortest(beta) << ' ' << to_string(dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t AddDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { detail::hash_mix(h, v); };
  mix(static_cast<std::uint64_t>(dst_dims.rank()));
  for (int i = 0; i < dst_dims.rank(); ++i) {
    mix(static_cast<std::uint64_t>(dst_dims[i]));
    mix(static_cast<std::uint64_t>(i < src_dims.rank() ? src_dims[i] : -1));
  }
  mix(static_cast<std::uint64_t>(src_dims.rank()));
  mix(detail::hash_bits(alpha));
  mix(detail::hash_bits(beta));
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const AddDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
