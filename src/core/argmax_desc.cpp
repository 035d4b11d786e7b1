// ArgmaxDesc and AccuracyDesc: validation, shapes, printing, hashing, and the bad-label message
// every backend raises. Every message names the field and its value.

#include <dnnx/ops/accuracy.hpp>
#include <dnnx/ops/argmax.hpp>

#include "core/argmax_args.hpp"
#include "core/check.hpp"
#include "core/cross_entropy_args.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <ostream>
#include <sstream>

namespace dnnx {

void ArgmaxDesc::validate() const {
  DNNX_CHECK_ARG(src_dims.rank() >= 1 && src_dims.rank() <= 5, "src_dims '", src_dims,
                 "' have rank ", src_dims.rank(), "; argmax accepts rank 1 to 5");
  for (int i = 0; i < src_dims.rank(); ++i) {
    DNNX_CHECK_ARG(src_dims[i] >= 1, "src_dims ", src_dims, ": entry ", i, " must be >= 1, got ",
                   src_dims[i], " (empty tensors are not accepted)");
  }
  detail::checked_count(src_dims, "src_dims");
  DNNX_CHECK_ARG(axis >= 0 && axis < src_dims.rank(), "axis ", axis,
                 " is out of range for src_dims ", src_dims, "; accepted: 0 to ",
                 src_dims.rank() - 1);
  DNNX_CHECK_ARG(is_floating(dtype), "dtype (of src) must be f32, f16 or bf16, got ",
                 to_string(dtype));
  DNNX_CHECK_ARG(index_dtype == DType::i32 || index_dtype == DType::i64,
                 "index_dtype must be i32 or i64, got ", to_string(index_dtype));
  DNNX_CHECK_ARG(index_dtype == DType::i64 || src_dims[axis] <= 2147483647LL, "index_dtype i32 ",
                 "cannot hold the indices of an axis of ", src_dims[axis], " elements; use i64");
  DNNX_CHECK_ARG(detail::valid_layout(layout),
                 "layout must be channels_first (nchw) or channels_last (nhwc), got value ",
                 static_cast<int>(layout));
}

Dims ArgmaxDesc::dst_dims() const {
  validate();
  Dims dims = src_dims;
  dims[axis] = 1;
  return dims;
}

std::string ArgmaxDesc::repro(Direction direction) const {
  // An invalid desc must still print (it is the context of the error that rejects it).
  std::ostringstream out;
  out << "dnnx profile argmax --src " << (src_dims.rank() > 0 ? src_dims.to_string() : "?")
      << " --axis " << axis << " --dtype " << to_string(dtype) << " --index-dtype "
      << to_string(index_dtype) << " --layout " << to_string(layout) << " --direction "
      << to_string(direction);
  return out.str();
}

std::string ArgmaxDesc::key() const {
  std::ostringstream out;
  out << "argmax src=" << src_dims << " axis=" << axis << ' ' << to_string(dtype)
      << " index=" << to_string(index_dtype) << ' ' << to_string(layout);
  return out.str();
}

std::size_t ArgmaxDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  detail::hash_dims(h, src_dims);
  mix(axis);
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(index_dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const ArgmaxDesc& desc) { return out << desc.key(); }

void AccuracyDesc::validate() const {
  detail::validate_nc_dims(dims, "logits dims");
  DNNX_CHECK_ARG(top_k >= 1 && top_k <= dims[1], "top_k must be in [1, C] = [1, ", dims[1],
                 "], got ", top_k);
  DNNX_CHECK_ARG(label_dtype == DType::i32 || label_dtype == DType::i64,
                 "label_dtype must be i32 or i64 (class indices), got ", to_string(label_dtype));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype (of logits) must be f32, f16 or bf16, got ",
                 to_string(dtype));
  DNNX_CHECK_ARG(count_dtype == DType::i64 || count_dtype == DType::f32,
                 "count_dtype must be i64 or f32, got ", to_string(count_dtype));
  DNNX_CHECK_ARG(detail::valid_layout(layout),
                 "layout must be channels_first (nchw) or channels_last (nhwc), got value ",
                 static_cast<int>(layout));
}

// Note [shapes of an unvalidated desc] (core/check.hpp): every shape accessor checks the logits
// dims first.
std::int64_t AccuracyDesc::classes() const {
  detail::validate_nc_dims(dims, "logits dims");
  return dims[1];
}

std::int64_t AccuracyDesc::positions() const {
  detail::validate_nc_dims(dims, "logits dims");
  return dims[0] * detail::spatial_size(dims);
}

Dims AccuracyDesc::labels_dims() const { return detail::nc_position_dims(dims, "logits dims"); }

std::string AccuracyDesc::repro(Direction direction) const {
  std::ostringstream out;
  out << "dnnx profile accuracy --input " << (dims.rank() > 0 ? dims.to_string() : "?")
      << " --top-k " << top_k;
  if (ignore_index != -100) out << " --ignore-index=" << ignore_index;
  if (accumulate) out << " --accumulate";
  out << " --label-dtype " << to_string(label_dtype) << " --count-dtype " << to_string(count_dtype)
      << " --dtype " << to_string(dtype) << " --layout " << to_string(layout) << " --direction "
      << to_string(direction);
  return out.str();
}

std::string AccuracyDesc::key() const {
  std::ostringstream out;
  out << "accuracy in=" << dims.to_string() << " top_k=" << top_k << " ignore=" << ignore_index
      << " labels=" << to_string(label_dtype) << " count=" << to_string(count_dtype)
      << (accumulate ? " accumulate " : " overwrite ") << to_string(dtype) << ' '
      << to_string(layout);
  return out.str();
}

std::size_t AccuracyDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  detail::hash_dims(h, dims);
  mix(top_k);
  mix(ignore_index);
  mix(static_cast<std::int64_t>(label_dtype));
  mix(static_cast<std::int64_t>(count_dtype));
  mix(accumulate ? 1 : 0);
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const AccuracyDesc& desc) { return out << desc.key(); }

namespace detail {

std::string bad_accuracy_label_message(const AccuracyDesc& desc, std::int64_t position,
                                       std::int64_t label) {
  return cat(label_position(desc.labels_dims(), position), " (position ", position, ") is ", label,
             "; accepted: a class in [0, ", desc.classes(), ") or ignore_index (",
             desc.ignore_index, ")");
}

}  // namespace detail
}  // namespace dnnx
