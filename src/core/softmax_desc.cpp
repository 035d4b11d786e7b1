// SoftmaxDesc: validation, printing, hashing. Every message names the field and its value.

#include <dnnx/ops/softmax.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/softmax_args.hpp"
#include "core/strings.hpp"

#include <array>
#include <ostream>
#include <sstream>

namespace dnnx {

constexpr std::array<detail::EnumName<SoftmaxMode>, 2> softmax_mode_names{{
    {SoftmaxMode::instance, "instance"},
    {SoftmaxMode::channel, "channel"},
}};

std::string_view to_string(SoftmaxMode mode) { return detail::enum_name(softmax_mode_names, mode); }

SoftmaxMode parse_softmax_mode(std::string_view text) {
  return detail::parse_enum(softmax_mode_names, text, "softmax mode", "instance, channel");
}

namespace detail {

void validate_nc_dims(const Dims& dims, const char* field) {
  DNNX_CHECK_ARG(dims.rank() >= 2 && dims.rank() <= 5, field, " ", dims, " have rank ", dims.rank(),
                 "; accepted: rank 2 to 5 (N, C and 0 to 3 spatial dims)");
  // Note [size limits] (core/check.hpp): every derived count must fit in 64 bits.
  for (int i = 0; i < dims.rank(); ++i) {
    DNNX_CHECK_ARG(dims[i] >= 1 && dims[i] <= max_dim_size, field, " ", dims, ": entry ", i, " is ",
                   dims[i], "; every entry must be in [1, 2^31]");
  }
  checked_count(dims, field);
}

Dims nc_position_dims(const Dims& dims, const char* field) {
  validate_nc_dims(dims, field);
  std::array<std::int64_t, 4> values{};
  values[0] = dims[0];
  for (int i = 2; i < dims.rank(); ++i) values[static_cast<std::size_t>(i - 1)] = dims[i];
  return Dims(
      std::span<const std::int64_t>(values.data(), static_cast<std::size_t>(dims.rank() - 1)));
}

}  // namespace detail

void SoftmaxDesc::validate() const {
  detail::validate_nc_dims(dims, "dims");
  DNNX_CHECK_ARG(mode == SoftmaxMode::instance || mode == SoftmaxMode::channel,
                 "mode must be instance or channel, got value ", static_cast<int>(mode));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(detail::valid_layout(layout),
                 "layout must be channels_first (nchw) or channels_last (nhwc), got value ",
                 static_cast<int>(layout));
}

// Note [shapes of an unvalidated desc] (core/check.hpp): the dims are checked before any division.
std::int64_t SoftmaxDesc::axis_size() const {
  detail::validate_nc_dims(dims, "dims");
  return mode == SoftmaxMode::instance ? dims.product() / dims[0] : dims[1];
}

std::int64_t SoftmaxDesc::groups() const { return dims.product() / axis_size(); }

std::string SoftmaxDesc::repro(Direction direction) const {
  // An invalid desc must still print (it is the context of the error that rejects it).
  std::ostringstream out;
  out << "dnnx profile softmax --input " << (dims.rank() > 0 ? dims.to_string() : "?") << " --mode "
      << to_string(mode);
  if (log) out << " --log";
  out << " --dtype " << to_string(dtype) << " --layout " << to_string(layout) << " --direction "
      << (direction == Direction::bwd_data ? "bwd" : to_string(direction));
  return out.str();
}

std::string SoftmaxDesc::key() const {
  std::ostringstream out;
  out << "softmax in=" << dims.to_string() << " mode=" << to_string(mode) << (log ? " log" : " exp")
      << ' ' << to_string(dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t SoftmaxDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  detail::hash_dims(h, dims);
  mix(static_cast<std::int64_t>(mode));
  mix(log ? 1 : 0);
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const SoftmaxDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
