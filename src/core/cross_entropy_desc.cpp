// CrossEntropyDesc: validation, shapes, printing, hashing, and the bad-label message every
// backend raises. Every message names the field and its value.

#include <dnnx/ops/cross_entropy.hpp>

#include "core/check.hpp"
#include "core/cross_entropy_args.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <ostream>
#include <sstream>

namespace dnnx {

constexpr std::array<detail::EnumName<Reduction>, 3> reduction_names{{
    {Reduction::none, "none"},
    {Reduction::mean, "mean"},
    {Reduction::sum, "sum"},
}};

std::string_view to_string(Reduction reduction) {
  return detail::enum_name(reduction_names, reduction);
}

Reduction parse_reduction(std::string_view text) {
  return detail::parse_enum(reduction_names, text, "reduction", "none, mean, sum");
}

void CrossEntropyDesc::validate() const {
  detail::validate_nc_dims(dims, "logits dims");
  DNNX_CHECK_ARG(
      reduction == Reduction::none || reduction == Reduction::mean || reduction == Reduction::sum,
      "reduction must be none, mean or sum, got value ", static_cast<int>(reduction));
  DNNX_CHECK_ARG(label_dtype == DType::i32 || label_dtype == DType::i64,
                 "label_dtype must be i32 or i64 (class indices), got ", to_string(label_dtype));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype (of logits and loss) must be f32, f16 or bf16, got ",
                 to_string(dtype));
  DNNX_CHECK_ARG(detail::valid_layout(layout),
                 "layout must be channels_first (nchw) or channels_last (nhwc), got value ",
                 static_cast<int>(layout));
}

// Note [shapes of an unvalidated desc] (core/check.hpp): every shape accessor checks the logits
// dims first.
std::int64_t CrossEntropyDesc::classes() const {
  detail::validate_nc_dims(dims, "logits dims");
  return dims[1];
}

std::int64_t CrossEntropyDesc::positions() const {
  detail::validate_nc_dims(dims, "logits dims");
  return dims[0] * detail::spatial_size(dims);
}

Dims CrossEntropyDesc::labels_dims() const { return detail::nc_position_dims(dims, "logits dims"); }

Dims CrossEntropyDesc::loss_dims() const {
  return reduction == Reduction::none ? labels_dims() : Dims{1};
}

Dims CrossEntropyDesc::weights_dims() const { return Dims{classes()}; }

std::string CrossEntropyDesc::repro(Direction direction) const {
  // An invalid desc must still print (it is the context of the error that rejects it).
  std::ostringstream out;
  out << "dnnx profile xent --input " << (dims.rank() > 0 ? dims.to_string() : "?")
      << " --reduction " << to_string(reduction);
  if (ignore_index != -100) out << " --ignore-index=" << ignore_index;
  if (weighted) out << " --weighted";
  out << " --label-dtype " << to_string(label_dtype) << " --dtype " << to_string(dtype)
      << " --layout " << to_string(layout) << " --direction "
      << (direction == Direction::bwd_data ? "bwd" : to_string(direction));
  return out.str();
}

std::string CrossEntropyDesc::key() const {
  std::ostringstream out;
  out << "xent in=" << dims.to_string() << " reduction=" << to_string(reduction)
      << " ignore=" << ignore_index << (weighted ? " weighted" : " unweighted")
      << " labels=" << to_string(label_dtype) << ' ' << to_string(dtype) << ' '
      << to_string(layout);
  return out.str();
}

std::size_t CrossEntropyDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  detail::hash_dims(h, dims);
  mix(static_cast<std::int64_t>(reduction));
  mix(ignore_index);
  mix(weighted ? 1 : 0);
  mix(static_cast<std::int64_t>(label_dtype));
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  return h;
}

std::ostream& operator<<(std::ostream& out, const CrossEntropyDesc& desc) {
  return out << desc.key();
}

namespace detail {

std::string label_position(const Dims& labels_dims, std::int64_t position) {
  static constexpr const char* names[4][4] = {
      {"n", "", "", ""}, {"n", "w", "", ""}, {"n", "h", "w", ""}, {"n", "d", "h", "w"}};
  const int rank = labels_dims.rank();
  std::array<std::int64_t, 4> index{};
  std::int64_t rest = position;
  for (int i = rank - 1; i >= 0; --i) {
    index[static_cast<std::size_t>(i)] = rest % labels_dims[i];
    rest /= labels_dims[i];
  }
  std::string text = "labels[";
  for (int i = 0; i < rank; ++i) {
    if (i > 0) text += ", ";
    text += cat(names[rank - 1][i], '=', index[static_cast<std::size_t>(i)]);
  }
  return text + "]";
}

std::string bad_label_message(const CrossEntropyDesc& desc, std::int64_t position,
                              std::int64_t label) {
  return cat(label_position(desc.labels_dims(), position), " (position ", position, ") is ", label,
             "; accepted: a class in [0, ", desc.classes(), ") or ignore_index (",
             desc.ignore_index, ")");
}

}  // namespace detail
}  // namespace dnnx
