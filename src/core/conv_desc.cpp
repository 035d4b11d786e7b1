// ConvDesc: shape inference, validation, printing. Every message names the field and its value.

#include <dnnx/ops/conv.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/spatial.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <optional>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::axis_name;
using detail::compact;
using detail::expand;

// A size validate() accepts: in [min, 2^31] (Note [size limits] in core/check.hpp).
bool in_range(std::int64_t value, std::int64_t min = 1) {
  return value >= min && value <= detail::max_dim_size;
}

// Output size along spatial dim `s`, or nullopt when a field it depends on is out of range (Note
// [shapes of an unvalidated desc] in core/check.hpp).
std::optional<std::int64_t> output_size_of(const ConvDesc& desc, std::size_t s) {
  if (!in_range(desc.input[s]) || !in_range(desc.kernel[s]) || !in_range(desc.stride[s]) ||
      !in_range(desc.dilation[s]) || !in_range(desc.pad_before[s], 0) ||
      !in_range(desc.pad_after[s], 0))
    return std::nullopt;
  const auto span = detail::checked_mul(desc.dilation[s], desc.kernel[s] - 1);
  const auto extent = span ? detail::checked_add(*span, 1) : std::nullopt;
  const auto padded_before = detail::checked_add(desc.input[s], desc.pad_before[s]);
  const auto padded =
      padded_before ? detail::checked_add(*padded_before, desc.pad_after[s]) : std::nullopt;
  if (!extent || !padded || *extent > *padded) return std::nullopt;
  return (*padded - *extent) / desc.stride[s] + 1;
}

// N-or-O, C-or-C/groups, spatial... as Dims; `spatial_dims` must be in [1, 3].
Dims shape_of(int spatial_dims, std::int64_t first, std::int64_t second,
              const std::array<std::int64_t, 3>& spatial) {
  std::array<std::int64_t, 5> v{first, second, 0, 0, 0};
  for (int i = 0; i < spatial_dims; ++i)
    v[static_cast<std::size_t>(2 + i)] = spatial[static_cast<std::size_t>(i)];
  return Dims(std::span<const std::int64_t>(v.data(), static_cast<std::size_t>(spatial_dims + 2)));
}

bool valid_rank(const ConvDesc& desc) { return desc.spatial_dims >= 1 && desc.spatial_dims <= 3; }

// Every spatial entry of `values` is in range.
bool all_in_range(const ConvDesc& desc, const std::array<std::int64_t, 3>& values) {
  for (int i = 0; i < desc.spatial_dims; ++i) {
    if (!in_range(values[static_cast<std::size_t>(i)])) return false;
  }
  return true;
}

}  // namespace

ConvDesc ConvDesc::from_shapes(const Dims& src, const Dims& weights,
                               const std::vector<std::int64_t>& stride,
                               const std::vector<std::int64_t>& pad,
                               const std::vector<std::int64_t>& dilation, std::int64_t groups,
                               DType dtype, Layout layout) {
  DNNX_CHECK_ARG(src.rank() >= 3 && src.rank() <= 5, "src dims ", src, " have rank ", src.rank(),
                 "; convolution accepts rank 3, 4 or 5 (N, C and 1-3 spatial dims)");
  DNNX_CHECK_ARG(weights.rank() == src.rank(), "weights dims ", weights, " have rank ",
                 weights.rank(), " but src dims ", src, " have rank ", src.rank(),
                 "; they must match (O, C/groups, kernel...)");
  DNNX_CHECK_ARG(groups >= 1, "groups must be >= 1, got ", groups);
  ConvDesc desc;
  desc.spatial_dims = src.rank() - 2;
  const int n = desc.spatial_dims;
  desc.batch = src[0];
  desc.in_channels = src[1];
  desc.out_channels = weights[0];
  desc.groups = groups;
  const auto expected_channels = detail::checked_mul(weights[1], groups);
  DNNX_CHECK_ARG(expected_channels.has_value(), "channel mismatch: src has ", src[1],
                 " channels (dims ", src, ") but weights dims ", weights, " with groups=", groups,
                 " expect weights C/groups x groups = ", weights[1], " x ", groups,
                 " channels, which does not fit in 64 bits");
  DNNX_CHECK_ARG(*expected_channels == src[1], "channel mismatch: src has ", src[1],
                 " channels (dims ", src, ") but weights dims ", weights, " with groups=", groups,
                 " expect ", *expected_channels, " (weights C/groups x groups)");
  for (int i = 0; i < n; ++i) {
    desc.input[static_cast<std::size_t>(i)] = src[2 + i];
    desc.kernel[static_cast<std::size_t>(i)] = weights[2 + i];
  }
  desc.stride = expand(stride, n, "stride", 1);
  return detail::finish_from_shapes(desc, pad, dilation, dtype, layout);
}

void ConvDesc::validate() const {
  detail::check_spatial_dims_and_batch(spatial_dims, batch);
  DNNX_CHECK_ARG(in_channels >= 1, "in_channels (C) must be >= 1, got ", in_channels);
  DNNX_CHECK_ARG(out_channels >= 1, "out_channels (O) must be >= 1, got ", out_channels);
  DNNX_CHECK_ARG(groups >= 1, "groups must be >= 1, got ", groups);
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(in_channels % groups == 0, "groups=", groups,
                 " does not divide in_channels=", in_channels);
  DNNX_CHECK_ARG(out_channels % groups == 0, "groups=", groups,
                 " does not divide out_channels=", out_channels);
  // Note [size limits] (core/check.hpp).
  constexpr std::int64_t max_size = detail::max_dim_size;
  DNNX_CHECK_ARG(batch <= max_size, "batch (N) must be <= 2^31, got ", batch);
  DNNX_CHECK_ARG(in_channels <= max_size, "in_channels (C) must be <= 2^31, got ", in_channels);
  DNNX_CHECK_ARG(out_channels <= max_size, "out_channels (O) must be <= 2^31, got ", out_channels);
  for (int i = 0; i < spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const char* axis = axis_name(spatial_dims, i);
    detail::check_window(*this, i);
    const std::int64_t extent = dilation[s] * (kernel[s] - 1) + 1;
    const std::int64_t padded = input[s] + pad_before[s] + pad_after[s];
    DNNX_CHECK_ARG(extent <= padded, "kernel along ", axis, " (size ", kernel[s], ", dilation ",
                   dilation[s], ", extent ", extent, ") is larger than the padded input (",
                   input[s], " + ", pad_before[s], " + ", pad_after[s], " = ", padded, ")");
  }
  // Every tensor's element count must fit too (2^31 per factor can still overflow a product). The
  // checks above make every entry of these shapes >= 1.
  detail::checked_count(shape_of(spatial_dims, batch, in_channels, input), "src dims");
  detail::checked_count(shape_of(spatial_dims, out_channels, in_channels / groups, kernel),
                        "weights dims");
  std::array<std::int64_t, 3> output{};
  for (int i = 0; i < spatial_dims; ++i) {
    const auto size = output_size_of(*this, static_cast<std::size_t>(i));
    DNNX_ASSERT(size.has_value(), "output size along ", axis_name(spatial_dims, i), " of ", *this);
    output[static_cast<std::size_t>(i)] = *size;
  }
  detail::checked_count(shape_of(spatial_dims, batch, out_channels, output), "dst dims");
}

std::int64_t ConvDesc::output_size(int i) const {
  DNNX_CHECK_ARG(valid_rank(*this) && i >= 0 && i < spatial_dims, "output_size(", i,
                 "): the spatial dim must be in [0, spatial_dims = ", spatial_dims, ")");
  const auto size = output_size_of(*this, static_cast<std::size_t>(i));
  detail::validate_unless(size.has_value(), *this, "ConvDesc::output_size");
  return *size;
}

Dims ConvDesc::src_dims() const {
  detail::validate_unless(
      valid_rank(*this) && in_range(batch) && in_range(in_channels) && all_in_range(*this, input),
      *this, "ConvDesc::src_dims");
  return shape_of(spatial_dims, batch, in_channels, input);
}

Dims ConvDesc::weights_dims() const {
  detail::validate_unless(valid_rank(*this) && in_range(out_channels) && in_range(in_channels) &&
                              groups >= 1 && in_channels % groups == 0 &&
                              all_in_range(*this, kernel),
                          *this, "ConvDesc::weights_dims");
  return shape_of(spatial_dims, out_channels, in_channels / groups, kernel);
}

Dims ConvDesc::dst_dims() const {
  detail::validate_unless(valid_rank(*this) && in_range(batch) && in_range(out_channels), *this,
                          "ConvDesc::dst_dims");
  std::array<std::int64_t, 3> output{};
  for (int i = 0; i < spatial_dims; ++i) output[static_cast<std::size_t>(i)] = output_size(i);
  return shape_of(spatial_dims, batch, out_channels, output);
}

Dims ConvDesc::bias_dims() const {
  detail::validate_unless(in_range(out_channels), *this, "ConvDesc::bias_dims");
  return Dims{out_channels};
}

double ConvDesc::macs() const {
  double macs = static_cast<double>(batch) * static_cast<double>(out_channels) *
                static_cast<double>(in_channels / groups);
  for (int i = 0; i < spatial_dims; ++i) {
    macs *= static_cast<double>(output_size(i)) *
            static_cast<double>(kernel[static_cast<std::size_t>(i)]);
  }
  return macs;
}

std::string ConvDesc::repro(Direction direction) const {
  std::ostringstream out;
  // An invalid desc must still print (it is the context of the error that rejects it), so only
  // the meaningful entries are printed and no Dims are formed.
  const int n = std::clamp(spatial_dims, 0, 3);
  const auto spatial = [n](const std::array<std::int64_t, 3>& values) {
    std::string text;
    for (int i = 0; i < n; ++i) text += "x" + std::to_string(values[static_cast<std::size_t>(i)]);
    return text;
  };
  out << "dnnx profile conv --input " << batch << 'x' << in_channels << spatial(input)
      << " --weights " << out_channels << 'x' << (groups != 0 ? in_channels / groups : 0)
      << spatial(kernel);
  if (n == 0) out << " (spatial_dims=" << spatial_dims << ")";
  out << " --stride " << compact(stride, n);
  if (pad_before == pad_after) {
    out << " --pad " << compact(pad_before, n);
  } else {
    out << " --pad-before " << compact(pad_before, n) << " --pad-after " << compact(pad_after, n);
  }
  out << " --dilation " << compact(dilation, n);
  if (groups != 1) out << " --groups " << groups;
  out << " --dtype " << to_string(dtype) << " --layout " << to_string(layout) << " --direction "
      << to_string(direction);
  return out.str();
}

std::string ConvDesc::key() const {
  std::ostringstream out;
  const auto n = static_cast<std::size_t>(std::clamp(spatial_dims, 0, 3));
  auto list = [&](const std::array<std::int64_t, 3>& a) {
    return detail::join(std::span<const std::int64_t>(a.data(), n), ",");
  };
  out << "conv" << spatial_dims << "d n=" << batch << " c=" << in_channels << " o=" << out_channels
      << " g=" << groups << " in=" << list(input) << " k=" << list(kernel) << " s=" << list(stride)
      << " pb=" << list(pad_before) << " pa=" << list(pad_after) << " d=" << list(dilation) << ' '
      << to_string(dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t ConvDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  mix(spatial_dims);
  mix(batch);
  mix(in_channels);
  mix(out_channels);
  mix(groups);
  detail::hash_window(h, *this, spatial_dims);
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ConvDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
