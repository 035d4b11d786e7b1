// DropoutDesc: validation, printing. Every message names the field and its value.
//
// Note [dropout mask]
// Element i (logical row-major index) of a training forward whose generator state is (seed,
// offset) is kept when unit(w) >= p, w being word i % 4 of Philox block offset + i / 4 and
// unit(w) = (w >> 8) 2^-24 (core/philox.hpp): exactly the uniform value fill(uniform(0, 1)) draws
// for the element from the same state, compared with p in f32. Every backend's own candidate
// draws it so, so the masks are bit-identical across backends and layouts. Kept elements are
// multiplied by scale() = 1 / (1 - p) computed in f32 (as PyTorch does), dropped ones by 0 (so NaN
// and inf stay NaN, as in PyTorch, which multiplies by a 0/scale mask): dst = src * m in f32,
// rounded once to the dtype. The backward multiplies diff_dst by the same m. dnnx's candidates keep
// the mask as bits (mask_bits_format in dropout_args.hpp: 1 bit per element, in 32-bit words, 1/32
// of an f32 tensor); cuDNN's dropout keeps its own reserve space instead (docs/ops/dropout.md).

#include <dnnx/ops/dropout.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {

using detail::shortest;

DropoutDesc DropoutDesc::of(const Tensor& tensor, float p) {
  const auto layout = tensor.layout();
  DNNX_CHECK_ARG(layout.has_value(),
                 "dropout needs a dense tensor (channels_first or "
                 "channels_last), got ",
                 describe(tensor));
  DropoutDesc desc;
  desc.dims = tensor.dims();
  desc.dtype = tensor.dtype();
  desc.layout = *layout;
  desc.p = p;
  return desc;
}

void DropoutDesc::validate() const {
  DNNX_CHECK_ARG(dims.rank() >= 1 && dims.rank() <= 5, "dims '", dims, "' have rank ", dims.rank(),
                 "; dropout accepts rank 1 to 5");
  for (int i = 0; i < dims.rank(); ++i) {
    DNNX_CHECK_ARG(dims[i] >= 0, "dims ", dims, ": entry ", i, " must be >= 0, got ", dims[i]);
  }
  // Note [size limits] (core/check.hpp).
  detail::checked_count(dims, "dims");
  DNNX_CHECK_ARG(p >= 0.0f && p <= 1.0f, "p must be a probability in [0, 1], got ", shortest(p));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout has the invalid value ", static_cast<int>(layout));
}

float DropoutDesc::scale() const {
  // In f32, as torch.nn.functional.dropout computes it (1 / (1 - p) on float tensors).
  return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
}

std::string DropoutDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile dropout --dims " << dims << " --p " << shortest(p) << " --dtype "
      << to_string(dtype) << " --layout " << to_string(layout);
  if (!reproducible) out << " --not-reproducible";
  out << " --direction " << op_info(OpKind::dropout).direction_name(direction);
  return out.str();
}

std::string DropoutDesc::key() const {
  std::ostringstream out;
  out << "dropout dims=" << dims << " p=" << shortest(p) << ' ' << to_string(dtype) << ' '
      << to_string(layout) << (reproducible ? " reproducible" : " any_rng");
  return out.str();
}

std::size_t DropoutDesc::hash() const {
  std::size_t h = 0;
  detail::hash_dims(h, dims);
  detail::hash_mix(h, detail::hash_bits(p));
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  detail::hash_mix(h, static_cast<std::uint64_t>(layout));
  detail::hash_mix(h, reproducible ? 1u : 0u);
  return h;
}

std::ostream& operator<<(std::ostream& out, const DropoutDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
