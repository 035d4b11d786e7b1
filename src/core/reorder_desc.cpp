// ReorderDesc: validation, printing. Every message names the field and its value.

#include <dnnx/ops/reorder.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::shortest;

// The dense layout `tensor` is in; throws InvalidArgument naming `role` when it is in none.
Layout layout_of(const Tensor& tensor, const char* role) {
  const auto layout = tensor.layout();
  DNNX_CHECK_ARG(layout.has_value(), "reorder needs a dense ", role,
                 " (channels_first or channels_last strides), got ", describe(tensor),
                 " with strides ", tensor.strides());
  return *layout;
}

}  // namespace

ReorderDesc ReorderDesc::of(const Tensor& src, const Tensor& dst, float alpha, float beta) {
  DNNX_CHECK_ARG(src.dims() == dst.dims(), "reorder needs src and dst of the same dims, got src ",
                 src.dims(), " and dst ", dst.dims());
  ReorderDesc desc;
  desc.dims = src.dims();
  desc.src_dtype = src.dtype();
  desc.dst_dtype = dst.dtype();
  desc.src_layout = layout_of(src, "src");
  desc.dst_layout = layout_of(dst, "dst");
  desc.alpha = alpha;
  desc.beta = beta;
  return desc;
}

void ReorderDesc::validate() const {
  DNNX_CHECK_ARG(dims.rank() >= 1 && dims.rank() <= 5, "dims '", dims, "' have rank ", dims.rank(),
                 "; reorder accepts rank 1 to 5");
  for (int i = 0; i < dims.rank(); ++i) {
    DNNX_CHECK_ARG(dims[i] >= 0, "dims ", dims, ": entry ", i, " must be >= 0, got ", dims[i]);
  }
  // Note [size limits] (core/check.hpp).
  detail::checked_count(dims, "dims");
  DNNX_CHECK_ARG(is_floating(src_dtype), "src_dtype must be f32, f16 or bf16, got ",
                 to_string(src_dtype),
                 " (reorder converts floating values; integer tensors move "
                 "with copy())");
  DNNX_CHECK_ARG(is_floating(dst_dtype), "dst_dtype must be f32, f16 or bf16, got ",
                 to_string(dst_dtype),
                 " (reorder converts floating values; integer tensors move "
                 "with copy())");
  DNNX_CHECK_ARG(src_layout == Layout::channels_first || src_layout == Layout::channels_last,
                 "src_layout has the invalid value ", static_cast<int>(src_layout));
  DNNX_CHECK_ARG(dst_layout == Layout::channels_first || dst_layout == Layout::channels_last,
                 "dst_layout has the invalid value ", static_cast<int>(dst_layout));
  DNNX_CHECK_ARG(std::isfinite(alpha), "alpha must be finite, got ", shortest(alpha));
  DNNX_CHECK_ARG(std::isfinite(beta), "beta must be finite, got ", shortest(beta));
}

bool ReorderDesc::same_order() const {
  if (src_layout == dst_layout) return true;
  const Dims src = dense_strides(dims, src_layout);
  const Dims dst = dense_strides(dims, dst_layout);
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] != 1 && src[i] != dst[i]) return false;
  }
  return true;
}

std::string ReorderDesc::repro(Direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile reorder --dims " << dims << " --src-dtype " << to_string(src_dtype)
      << " --dst-dtype " << to_string(dst_dtype) << " --src-layout " << to_string(src_layout)
      << " --dst-layout " << to_string(dst_layout) << " --alpha " << shortest(alpha) << " --beta "
      << shortest(beta);
  return out.str();
}

std::string ReorderDesc::key() const {
  std::ostringstream out;
  out << "reorder dims=" << dims << ' ' << to_string(src_dtype) << ' ' << to_string(src_layout)
      << " -> " << to_string(dst_dtype) << ' ' << to_string(dst_layout)
      << " alpha=" << shortest(alpha) << " beta=" << shortest(beta);
  return out.str();
}

std::size_t ReorderDesc::hash() const {
  std::size_t h = 0;
  detail::hash_dims(h, dims);
  detail::hash_mix(h, static_cast<std::uint64_t>(src_dtype));
  detail::hash_mix(h, static_cast<std::uint64_t>(dst_dtype));
  detail::hash_mix(h, static_cast<std::uint64_t>(src_layout));
  detail::hash_mix(h, static_cast<std::uint64_t>(dst_layout));
  detail::hash_mix(h, detail::hash_bits(alpha));
  detail::hash_mix(h, detail::hash_bits(beta));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ReorderDesc& desc) { return out << desc.key(); }

}  // namespace dnnx
