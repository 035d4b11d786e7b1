// BatchNormDesc: validation, parameter shapes, printing. Every message names the field and its
// value.

#include <dnnx/ops/batch_norm.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::shortest;

bool valid_mode(BatchNormMode mode) {
  return mode == BatchNormMode::per_activation || mode == BatchNormMode::spatial;
}

bool valid_layout(Layout layout) {
  return layout == Layout::channels_first || layout == Layout::channels_last;
}

std::string_view mode_text(BatchNormMode mode) {
  return valid_mode(mode) ? to_string(mode) : std::string_view("?");
}

std::string_view layout_text(Layout layout) {
  return valid_layout(layout) ? to_string(layout) : std::string_view("?");
}

// Throws InvalidArgument unless `dims` has rank 2 to 5, every entry in [1, 2^31] and at most 2^60
// elements (Note [size limits] in core/check.hpp).
void check_dims(const Dims& dims) {
  DNNX_CHECK_ARG(dims.rank() >= 2 && dims.rank() <= 5, "dims ", dims, " have rank ", dims.rank(),
                 "; batch-norm accepts rank 2 to 5 (N, C and up to 3 spatial dims)");
  for (int i = 0; i < dims.rank(); ++i) {
    const char* name = i == 0 ? "batch (N)" : i == 1 ? "channels (C)" : "spatial size";
    DNNX_CHECK_ARG(dims[i] >= 1, name, " must be >= 1, got ", dims[i], " (dims ", dims, ")");
    DNNX_CHECK_ARG(dims[i] <= detail::max_dim_size, name, " must be <= 2^31, got ", dims[i],
                   " (dims ", dims, ")");
  }
  detail::checked_count(dims, "dims");
}

// Product of dims[first..rank), 1 when empty; check_dims(dims) has bounded every product.
std::int64_t product_from(const Dims& dims, int first) {
  std::int64_t p = 1;
  for (int i = first; i < dims.rank(); ++i) p *= dims[i];
  return p;
}

}  // namespace

std::string_view to_string(BatchNormMode mode) {
  switch (mode) {
    case BatchNormMode::per_activation: return "per_activation";
    case BatchNormMode::spatial: return "spatial";
  }
  return "?";
}

BatchNormMode parse_batch_norm_mode(std::string_view text) {
  const std::string lowered = detail::lower(text);
  if (lowered == "per_activation" || lowered == "per-activation" || lowered == "activation")
    return BatchNormMode::per_activation;
  if (lowered == "spatial") return BatchNormMode::spatial;
  detail::raise(ErrorKind::InvalidArgument, detail::cat("unknown batch-norm mode '", text,
                                                        "'; accepted: per_activation, spatial"));
}

BatchNormDesc BatchNormDesc::spatial_of(const Dims& dims, bool training, DType dtype,
                                        Layout layout) {
  BatchNormDesc desc;
  desc.dims = dims;
  desc.mode = BatchNormMode::spatial;
  desc.training = training;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

void BatchNormDesc::validate() const {
  check_dims(dims);
  DNNX_CHECK_ARG(valid_mode(mode), "mode must be per_activation or spatial, got ",
                 static_cast<int>(mode));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(valid_layout(layout),
                 "layout must be nchw (channels_first) or nhwc "
                 "(channels_last), got ",
                 static_cast<int>(layout));
  DNNX_CHECK_ARG(std::isfinite(eps) && eps > 0, "eps must be > 0 and finite, got ", shortest(eps));
  DNNX_CHECK_ARG(momentum >= 0 && momentum <= 1, "momentum must be in [0, 1], got ",
                 shortest(momentum));
  if (training) {
    const std::int64_t values = reduction_size();
    DNNX_CHECK_ARG(values > 1, "training needs more than one value per statistic, got ", values,
                   " (", to_string(mode), " mode on dims ", dims,
                   "; PyTorch rejects this too: 'Expected more than 1 value per channel when "
                   "training'); use inference (training = false) or a larger batch");
  }
}

// Note [shapes of an unvalidated desc] (core/check.hpp): every shape accessor checks the dims
// first.
Dims BatchNormDesc::param_dims() const {
  check_dims(dims);
  if (mode == BatchNormMode::spatial) return Dims{dims[1]};
  Dims params = dims;
  params[0] = 1;
  return params;
}

std::int64_t BatchNormDesc::statistics() const {
  check_dims(dims);
  return mode == BatchNormMode::spatial ? dims[1] : product_from(dims, 1);
}

std::int64_t BatchNormDesc::reduction_size() const {
  check_dims(dims);
  return mode == BatchNormMode::spatial ? dims[0] * product_from(dims, 2) : dims[0];
}

std::string BatchNormDesc::repro(Direction direction) const {
  // An invalid desc must still print (it is the context of the error that rejects it).
  std::ostringstream out;
  out << "dnnx profile bnorm --input " << dims.to_string() << " --mode " << mode_text(mode)
      << (training ? " --training" : " --inference");
  if (!affine) out << " --no-affine";
  out << " --eps " << shortest(eps) << " --momentum " << shortest(momentum) << " --dtype "
      << to_string(dtype) << " --layout " << layout_text(layout) << " --direction "
      << (direction == Direction::fwd ? "fwd" : "bwd");
  return out.str();
}

std::string BatchNormDesc::key() const {
  std::ostringstream out;
  out << "bnorm dims=" << dims.to_string() << ' ' << mode_text(mode) << ' '
      << (training ? "training" : "inference") << (affine ? " affine" : " no_affine")
      << " eps=" << shortest(eps) << " momentum=" << shortest(momentum) << ' ' << to_string(dtype)
      << ' ' << layout_text(layout);
  return out.str();
}

std::size_t BatchNormDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { detail::hash_mix(h, v); };
  detail::hash_dims(h, dims);
  mix(static_cast<std::uint64_t>(mode));
  mix(static_cast<std::uint64_t>(training) * 2 + static_cast<std::uint64_t>(affine));
  mix(detail::hash_bits(eps));
  mix(detail::hash_bits(momentum));
  mix(static_cast<std::uint64_t>(dtype));
  mix(static_cast<std::uint64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const BatchNormDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
