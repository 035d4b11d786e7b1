// ConvFusedDesc: validation, printing, the cache-key text and the CLI line. Every message names
// the field and its value.

#include <dnnx/ops/conv_fused.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <functional>
#include <ostream>
#include <string>

namespace dnnx {
namespace {

using detail::shortest;

constexpr std::string_view conv_prefix = "dnnx profile conv ";
constexpr std::string_view fused_prefix = "dnnx profile conv_fused ";

}  // namespace

constexpr std::array<detail::EnumName<FusedActivation>, 2> fused_activation_names{{
    {FusedActivation::identity, "identity", {"none"}},
    {FusedActivation::relu, "relu"},
}};

std::string_view to_string(FusedActivation activation) {
  return detail::enum_name(fused_activation_names, activation, "unknown");
}

FusedActivation parse_fused_activation(std::string_view text) {
  return detail::parse_enum(fused_activation_names, text, "fused activation",
                            "identity (also none), relu");
}

void ConvFusedDesc::validate() const {
  conv.validate();
  DNNX_CHECK_ARG(activation == FusedActivation::identity || activation == FusedActivation::relu,
                 "activation must be identity or relu, got value ", static_cast<int>(activation));
  DNNX_CHECK_ARG(std::isfinite(residual_scale), "residual_scale must be finite, got ",
                 residual_scale);
  DNNX_CHECK_ARG(residual || residual_scale == 1.0f, "residual_scale is ", shortest(residual_scale),
                 " but residual is false; set residual = true to add a scaled residual, or "
                 "leave residual_scale at 1");
}

std::string ConvFusedDesc::repro(Direction direction) const {
  // conv.repro() prints every convolution flag and ends with " --direction <d>"; the epilogue's
  // flags go in front of that last one, under the conv_fused subcommand.
  std::string line = conv.repro(direction);
  if (line.rfind(conv_prefix, 0) == 0) line.replace(0, conv_prefix.size(), fused_prefix);
  std::string epilogue;
  if (bias) epilogue += " --bias";
  if (residual) epilogue += " --residual";
  if (residual_scale != 1.0f) epilogue += " --residual-scale " + shortest(residual_scale);
  epilogue += detail::cat(" --activation ", to_string(activation));
  const std::size_t at = line.rfind(" --direction ");
  line.insert(at == std::string::npos ? line.size() : at, epilogue);
  return line;
}

std::string ConvFusedDesc::key() const {
  std::string text = conv.key();
  if (bias) text += " +bias";
  if (residual) text += " +residual*" + shortest(residual_scale);
  text += detail::cat(' ', to_string(activation));
  return text;
}

std::size_t ConvFusedDesc::hash() const {
  std::size_t h = conv.hash();
  auto mix = [&h](std::size_t v) { detail::hash_mix(h, v); };
  mix(static_cast<std::size_t>(bias));
  mix(static_cast<std::size_t>(residual));
  mix(std::hash<float>{}(residual_scale));
  mix(static_cast<std::size_t>(activation));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ConvFusedDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
