// FillDesc and FillParams: validation, printing, and the f32 parameters every backend draws with.
// Every message names the field and its value.

#include <dnnx/ops/fill.hpp>

#include "core/check.hpp"
#include "core/fill_args.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::shortest;

constexpr std::array<detail::EnumName<Distribution>, 4> distribution_names{{
    {Distribution::constant, "constant", {"fill", "const"}},
    {Distribution::uniform, "uniform", {}},
    {Distribution::normal, "normal", {"gaussian"}},
    {Distribution::trunc_normal, "trunc_normal", {"truncated_normal"}},
}};

}  // namespace

std::string_view to_string(Distribution distribution) {
  return detail::enum_name(distribution_names, distribution);
}

Distribution parse_distribution(std::string_view text) {
  return detail::parse_enum(distribution_names, text, "distribution",
                            "constant, uniform, normal, trunc_normal");
}

FillDesc FillDesc::of(const Tensor& tensor, Distribution distribution) {
  const auto layout = tensor.layout();
  DNNX_CHECK_ARG(layout.has_value(),
                 "fill needs a dense tensor (channels_first or "
                 "channels_last), got ",
                 describe(tensor));
  FillDesc desc;
  desc.dims = tensor.dims();
  desc.dtype = tensor.dtype();
  desc.layout = *layout;
  desc.distribution = distribution;
  return desc;
}

void FillDesc::validate() const {
  DNNX_CHECK_ARG(dims.rank() >= 1 && dims.rank() <= 5, "dims '", dims, "' have rank ", dims.rank(),
                 "; fill accepts rank 1 to 5");
  for (int i = 0; i < dims.rank(); ++i) {
    DNNX_CHECK_ARG(dims[i] >= 0, "dims ", dims, ": entry ", i, " must be >= 0, got ", dims[i]);
  }
  // Note [size limits] (core/check.hpp).
  detail::checked_count(dims, "dims");
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout has the invalid value ", static_cast<int>(layout));
  const auto d = static_cast<int>(distribution);
  DNNX_CHECK_ARG(d >= 0 && d < static_cast<int>(distribution_names.size()),
                 "distribution has the invalid value ", d,
                 "; accepted: constant, uniform, normal, trunc_normal");
}

std::string FillDesc::repro(Direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile fill --dims " << dims << " --distribution "
      << detail::enum_name(distribution_names, distribution) << " --dtype " << to_string(dtype)
      << " --layout " << to_string(layout);
  return out.str();
}

std::string FillDesc::key() const {
  std::ostringstream out;
  out << "fill dims=" << dims << ' ' << detail::enum_name(distribution_names, distribution) << ' '
      << to_string(dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t FillDesc::hash() const {
  std::size_t h = 0;
  detail::hash_dims(h, dims);
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  detail::hash_mix(h, static_cast<std::uint64_t>(layout));
  detail::hash_mix(h, static_cast<std::uint64_t>(distribution));
  return h;
}

std::ostream& operator<<(std::ostream& out, const FillDesc& desc) { return out << desc.key(); }

FillParams FillParams::constant(float value) {
  FillParams params;
  params.value = value;
  return params;
}

FillParams FillParams::uniform(float low, float high) {
  FillParams params;
  params.low = low;
  params.high = high;
  return params;
}

FillParams FillParams::normal(float mean, float std) {
  FillParams params;
  params.mean = mean;
  params.std = std;
  return params;
}

FillParams FillParams::trunc_normal(float mean, float std, float a, float b) {
  FillParams params;
  params.mean = mean;
  params.std = std;
  params.a = a;
  params.b = b;
  return params;
}

void FillParams::validate(Distribution distribution) const {
  switch (distribution) {
    case Distribution::constant: return;
    case Distribution::uniform:
      DNNX_CHECK_ARG(std::isfinite(low) && std::isfinite(high),
                     "uniform bounds must be finite, "
                     "got low ",
                     shortest(low), " and high ", shortest(high));
      DNNX_CHECK_ARG(low <= high, "uniform needs low <= high, got low ", shortest(low),
                     " and high ", shortest(high));
      DNNX_CHECK_ARG(std::isfinite(high - low), "uniform's range high - low overflows f32: low ",
                     shortest(low), ", high ", shortest(high));
      return;
    case Distribution::normal:
      DNNX_CHECK_ARG(std::isfinite(mean), "normal's mean must be finite, got ", shortest(mean));
      DNNX_CHECK_ARG(std::isfinite(std) && std >= 0, "normal's std must be finite and >= 0, got ",
                     shortest(std));
      return;
    case Distribution::trunc_normal:
      DNNX_CHECK_ARG(std::isfinite(mean), "trunc_normal's mean must be finite, got ",
                     shortest(mean));
      DNNX_CHECK_ARG(std::isfinite(std) && std > 0,
                     "trunc_normal's std must be finite and > 0, "
                     "got ",
                     shortest(std));
      DNNX_CHECK_ARG(std::isfinite(a) && std::isfinite(b) && a < b,
                     "trunc_normal needs finite "
                     "bounds a < b, got a ",
                     shortest(a), " and b ", shortest(b));
      return;
  }
  DNNX_CHECK_ARG(false, "distribution has the invalid value ", static_cast<int>(distribution));
}

namespace detail {

random::DrawParams draw_params(Distribution distribution, const FillParams& params) {
  random::DrawParams draw;
  switch (distribution) {
    case Distribution::constant:
      draw.kind = random::DrawKind::constant;
      draw.value = params.value;
      break;
    case Distribution::uniform:
      draw.kind = random::DrawKind::uniform;
      draw.low = params.low;
      draw.range = params.high - params.low;
      break;
    case Distribution::normal:
      draw.kind = random::DrawKind::normal;
      draw.mean = params.mean;
      draw.scale = params.std;
      break;
    case Distribution::trunc_normal: {
      // PyTorch's torch.nn.init.trunc_normal_: l = Phi((a - mean) / std), u = Phi((b - mean) /
      // std), uniform on [2l - 1, 2u - 1), erfinv, times std sqrt(2), plus mean, clamp to [a, b].
      const double mean = params.mean, std = params.std;
      auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
      const auto low = static_cast<float>(2 * cdf((params.a - mean) / std) - 1);
      const auto high = static_cast<float>(2 * cdf((params.b - mean) / std) - 1);
      draw.kind = random::DrawKind::trunc_normal;
      draw.low = low;
      draw.range = high - low;
      draw.mean = params.mean;
      draw.scale = static_cast<float>(std * std::sqrt(2.0));
      draw.min = params.a;
      draw.max = params.b;
      break;
    }
  }
  return draw;
}

random::Geometry geometry_of(const Dims& dims, Layout layout) {
  random::Geometry geometry;
  geometry.rank = dims.rank();
  const Dims strides = dense_strides(dims, layout);
  const Dims row_major = dense_strides(dims, Layout::channels_first);
  geometry.identity = true;
  for (int i = 0; i < dims.rank(); ++i) {
    geometry.dims[i] = dims[i];
    geometry.strides[i] = strides[i];
    if (dims[i] != 1 && strides[i] != row_major[i]) geometry.identity = false;
  }
  return geometry;
}

}  // namespace detail
}  // namespace dnnx
