// ReduceDesc: validation, printing, hashing. Every message names the field and its value.

#include <dnnx/ops/reduce.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <ostream>
#include <sstream>

namespace dnnx {

constexpr std::array<detail::EnumName<ReduceKind>, 6> reduce_kind_names{{
    {ReduceKind::sum, "sum"},
    {ReduceKind::mean, "mean"},
    {ReduceKind::max, "max"},
    {ReduceKind::min, "min"},
    {ReduceKind::norm1, "norm1"},
    {ReduceKind::norm2, "norm2"},
}};

std::string_view to_string(ReduceKind kind) { return detail::enum_name(reduce_kind_names, kind); }

ReduceKind parse_reduce_kind(std::string_view text) {
  return detail::parse_enum(reduce_kind_names, text, "reduce kind",
                            "sum, mean, max, min, norm1, norm2");
}

ReduceDesc ReduceDesc::over(ReduceKind kind, const Dims& src, const std::vector<int>& axes,
                            DType dtype, Layout layout) {
  Dims dst = src;
  std::array<bool, Dims::max_rank> seen{};
  for (const int axis : axes) {
    DNNX_CHECK_ARG(axis >= 0 && axis < src.rank(), "axis ", axis, " is out of range for src dims ",
                   src, " of rank ", src.rank(), "; axes must be in [0, ", src.rank(), ")");
    DNNX_CHECK_ARG(!seen[static_cast<std::size_t>(axis)], "axis ", axis,
                   " is listed twice; each reduced axis once");
    seen[static_cast<std::size_t>(axis)] = true;
    dst[axis] = 1;
  }
  ReduceDesc desc;
  desc.kind = kind;
  desc.src_dims = src;
  desc.dst_dims = dst;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

ReduceDesc ReduceDesc::all(ReduceKind kind, const Dims& src, DType dtype, Layout layout) {
  std::vector<int> axes;
  for (int i = 0; i < src.rank(); ++i) axes.push_back(i);
  return over(kind, src, axes, dtype, layout);
}

void ReduceDesc::validate() const {
  DNNX_CHECK_ARG(to_string(kind) != "?", "kind has the invalid value ", static_cast<int>(kind),
                 "; accepted: sum, mean, max, min, norm1, norm2");
  DNNX_CHECK_ARG(src_dims.rank() >= 1 && src_dims.rank() <= 5, "src_dims '", src_dims,
                 "' have rank ", src_dims.rank(), "; reduce accepts rank 1 to 5");
  DNNX_CHECK_ARG(dst_dims.rank() == src_dims.rank(), "dst_dims '", dst_dims, "' have rank ",
                 dst_dims.rank(), " but src_dims ", src_dims, " have rank ", src_dims.rank(),
                 "; the ranks must match (write 1 for each reduced axis)");
  for (int i = 0; i < src_dims.rank(); ++i) {
    DNNX_CHECK_ARG(src_dims[i] >= 1, "src_dims ", src_dims, ": entry ", i, " must be >= 1, got ",
                   src_dims[i], " (empty tensors are not accepted)");
  }
  for (int i = 0; i < src_dims.rank(); ++i) {
    DNNX_CHECK_ARG(dst_dims[i] == src_dims[i] || dst_dims[i] == 1, "dst_dims ", dst_dims,
                   " are not a reduction of src_dims ", src_dims, ": axis ", i, " has ",
                   src_dims[i], " in src and ", dst_dims[i],
                   " in dst (each dst dim must equal src's or be 1)");
  }
  // Note [size limits] (core/check.hpp); dst has no more elements than src.
  detail::checked_count(src_dims, "src_dims");
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout must be channels_first (nchw) or channels_last (nhwc), got value ",
                 static_cast<int>(layout));
}

std::string ReduceDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile reduce --kind " << to_string(kind) << " --src " << src_dims << " --dst "
      << dst_dims << " --dtype " << to_string(dtype) << " --layout " << to_string(layout)
      << " --direction " << (direction == Direction::fwd ? "fwd" : "bwd");
  return out.str();
}

std::string ReduceDesc::key() const {
  std::ostringstream out;
  out << "reduce " << to_string(kind) << " src=" << src_dims << " dst=" << dst_dims << ' '
      << to_string(dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t ReduceDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  mix(static_cast<std::int64_t>(kind));
  detail::hash_dims(h, src_dims);
  detail::hash_dims(h, dst_dims);
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ReduceDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
