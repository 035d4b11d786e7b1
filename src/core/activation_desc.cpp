// ActivationDesc: names, validation, printing. Every message names the field and its value.

#include <dnnx/ops/activation.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

constexpr std::array<std::string_view, 7> kind_names{"identity", "relu", "clipped_relu", "tanh",
                                                     "sigmoid",  "elu",  "swish"};
constexpr std::array<std::string_view, 3> saved_names{"src_and_dst", "dst", "src"};

using detail::shortest;

// The value named `text` in `names` (indexed by value) or by `alias`; else InvalidArgument naming
// `what` and listing `names`, then `alias_note`.
template <typename Enum, std::size_t size>
Enum parse_indexed(const std::array<std::string_view, size>& names, std::string_view text,
                   std::string_view alias, Enum alias_value, std::string_view what,
                   std::string_view alias_note) {
  const std::string name = detail::lower(text);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
  }
  if (name == alias) return alias_value;
  detail::raise_unknown_name(what, text, detail::cat(detail::join(names, ", "), alias_note));
}

bool valid_kind(ActivationKind kind) { return static_cast<std::size_t>(kind) < kind_names.size(); }

}  // namespace

std::string_view to_string(ActivationKind kind) {
  return valid_kind(kind) ? kind_names[static_cast<std::size_t>(kind)] : "invalid";
}

ActivationKind parse_activation_kind(std::string_view text) {
  return parse_indexed(kind_names, text, "silu", ActivationKind::swish, "activation kind",
                       " (silu = swish)");
}

std::string_view to_string(ActivationSaved saved) {
  const auto i = static_cast<std::size_t>(saved);
  return i < saved_names.size() ? saved_names[i] : "invalid";
}

ActivationSaved parse_activation_saved(std::string_view text) {
  return parse_indexed(saved_names, text, "both", ActivationSaved::src_and_dst, "saved-tensor set",
                       " (both = src_and_dst)");
}

// Note [backward from dst]
// Each kind's derivative as a function of y = f(x), where that is possible:
//   identity 1; relu [y > 0]; clipped relu [0 < y < ceiling]; tanh 1 - y^2; sigmoid y (1 - y);
//   elu 1 if y > 0, else y + alpha.
// Relu and clipped relu are exact: y > 0 iff x > 0 and y < ceiling iff x < ceiling. Elu needs
// alpha >= 0: then y > 0 iff x > 0, and for x <= 0, y + alpha = alpha exp(x). With alpha < 0 the
// negative branch is positive too and y no longer tells the branches apart. Swish is not monotonic
// (its minimum is near x = -1.278), so y does not determine x, nor the derivative.
bool activation_bwd_from_dst(ActivationKind kind, double alpha) {
  switch (kind) {
    case ActivationKind::identity:
    case ActivationKind::relu:
    case ActivationKind::clipped_relu:
    case ActivationKind::tanh:
    case ActivationKind::sigmoid: return true;
    case ActivationKind::elu: return alpha >= 0;
    case ActivationKind::swish: return false;
  }
  return false;
}

namespace {

// A validated desc of `kind`, with `parameter` (alpha or ceiling, for the kinds that have one) set
// to `value`.
ActivationDesc make_desc(ActivationKind kind, const Dims& dims, DType dtype, Layout layout,
                         double ActivationDesc::*parameter = nullptr, double value = 0) {
  ActivationDesc desc;
  desc.kind = kind;
  if (parameter != nullptr) desc.*parameter = value;
  desc.dims = dims;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

}  // namespace

ActivationDesc ActivationDesc::from_dims(ActivationKind kind, const Dims& dims, DType dtype,
                                         Layout layout) {
  return make_desc(kind, dims, dtype, layout);
}

ActivationDesc ActivationDesc::elu(const Dims& dims, double alpha, DType dtype, Layout layout) {
  return make_desc(ActivationKind::elu, dims, dtype, layout, &ActivationDesc::alpha, alpha);
}

ActivationDesc ActivationDesc::clipped_relu(const Dims& dims, double ceiling, DType dtype,
                                            Layout layout) {
  return make_desc(ActivationKind::clipped_relu, dims, dtype, layout, &ActivationDesc::ceiling,
                   ceiling);
}

void ActivationDesc::validate() const {
  DNNX_CHECK_ARG(valid_kind(kind), "kind has the invalid value ", static_cast<int>(kind),
                 "; accepted: ", detail::join(kind_names, ", "));
  DNNX_CHECK_ARG(dims.rank() >= 1 && dims.rank() <= 5, "dims '", dims, "' have rank ", dims.rank(),
                 "; activations accept rank 1 to 5 (N, C, spatial...)");
  for (int i = 0; i < dims.rank(); ++i) {
    DNNX_CHECK_ARG(dims[i] >= 1, "dims ", dims, ": entry ", i, " must be >= 1, got ", dims[i]);
  }
  // Note [size limits] (core/check.hpp): element and byte counts must fit in 64 bits.
  detail::checked_count(dims, "dims");
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout has the invalid value ", static_cast<int>(layout));
  DNNX_CHECK_ARG(static_cast<std::size_t>(saved) < saved_names.size(),
                 "saved has the invalid value ", static_cast<int>(saved),
                 "; accepted: ", detail::join(saved_names, ", "));
  if (kind == ActivationKind::elu) {
    DNNX_CHECK_ARG(std::isfinite(alpha), "alpha of elu must be finite, got ", shortest(alpha));
  }
  if (kind == ActivationKind::clipped_relu) {
    DNNX_CHECK_ARG(std::isfinite(ceiling) && ceiling > 0,
                   "ceiling of clipped_relu must be finite and > 0, got ", shortest(ceiling));
  }
}

bool ActivationDesc::bwd_computable() const {
  switch (saved) {
    case ActivationSaved::src_and_dst:
    case ActivationSaved::src: return activation_bwd_from_src(kind);
    case ActivationSaved::dst: return activation_bwd_from_dst(kind, alpha);
  }
  return false;
}

std::string ActivationDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile act --input " << dims << " --kind " << to_string(kind);
  if (kind == ActivationKind::elu) out << " --alpha " << shortest(alpha);
  if (kind == ActivationKind::clipped_relu) out << " --ceiling " << shortest(ceiling);
  out << " --dtype " << to_string(dtype) << " --layout " << to_string(layout) << " --direction "
      << (direction == Direction::fwd ? "fwd" : "bwd");
  if (direction != Direction::fwd) out << " --saved " << to_string(saved);
  return out.str();
}

std::string ActivationDesc::key() const {
  std::ostringstream out;
  out << "act " << to_string(kind);
  if (kind == ActivationKind::elu) out << " alpha=" << shortest(alpha);
  if (kind == ActivationKind::clipped_relu) out << " ceiling=" << shortest(ceiling);
  out << " dims=" << dims << ' ' << to_string(dtype) << ' ' << to_string(layout)
      << " saved=" << to_string(saved);
  return out.str();
}

std::size_t ActivationDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { detail::hash_mix(h, v); };
  mix(static_cast<std::uint64_t>(kind));
  // Parameters the kind ignores stay out, as in key(); equal descs still hash equal.
  if (kind == ActivationKind::elu) mix(detail::hash_bits(alpha));
  if (kind == ActivationKind::clipped_relu) mix(detail::hash_bits(ceiling));
  detail::hash_dims(h, dims);
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(layout));
  mix(static_cast<std::uint64_t>(saved));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ActivationDesc& desc) {
  return out << desc.key();
}

}  // namespace dnnx
