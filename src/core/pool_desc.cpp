// PoolDesc: shape inference (PyTorch's pooling_output_shape with per-side padding), validation,
// printing. Every message names the field and its value.

#include <dnnx/ops/pool.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/pool_args.hpp"
#include "core/spatial.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <limits>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::axis_name;
using detail::compact;
using detail::expand;

// Whether a dilation along the desc's spatial dims is not 1.
bool dilated(const PoolDesc& desc) {
  for (int i = 0; i < std::clamp(desc.spatial_dims, 0, 3); ++i) {
    if (desc.dilation[static_cast<std::size_t>(i)] != 1) return true;
  }
  return false;
}

bool valid_mode(PoolMode mode) {
  return mode == PoolMode::max || mode == PoolMode::avg_include_pad ||
         mode == PoolMode::avg_exclude_pad;
}

// Note [windows between input elements]
// Output o's window along a dim holds the positions o * stride - pad_before + j * dilation,
// j < kernel. A window that starts inside the input holds its first position; one that starts in
// the front padding holds its first position past the padding, start mod dilation (in
// [0, dilation); PyTorch's kernels step to it the same way, `while (start < 0) start +=
// dilation`), if that is inside the input, and PyTorch's padding rule keeps that position within
// the window's `kernel` ones (pad_before <= ((kernel - 1) * dilation + 1) / 2 <= (kernel - 1) *
// dilation). Windows start inside the input or the front padding: in floor mode the last one
// starts at most at input + pad_after - effective kernel < input, and in ceil mode PyTorch's rule
// drops a last window that would not. So a window holds no input element exactly when it starts
// in the front padding and start mod dilation >= input, which needs dilation > input. PyTorch
// returns -inf there, with an index past the plane; validate() rejects such a desc instead, so
// every backend may rely on every window holding an input element.

// The first output along spatial dim i whose window holds no input element, or -1
// (Note [windows between input elements]). Visits the windows that start in the front padding,
// only when the dilation exceeds the input; there are at most output_size(i) of them.
std::int64_t empty_window(const PoolDesc& desc, int i) {
  const auto s = static_cast<std::size_t>(i);
  const std::int64_t dilation = desc.dilation[s];
  if (dilation <= desc.input[s]) return -1;
  const std::int64_t outputs = desc.output_size(i);
  for (std::int64_t o = 0; o < outputs && o * desc.stride[s] < desc.pad_before[s]; ++o) {
    const std::int64_t start = o * desc.stride[s] - desc.pad_before[s];
    const std::int64_t first = (start % dilation + dilation) % dilation;
    if (first >= desc.input[s]) return o;
  }
  return -1;
}

}  // namespace

constexpr std::array<detail::EnumName<PoolMode>, 3> pool_mode_names{{
    {PoolMode::max, "max"},
    {PoolMode::avg_include_pad, "avg_include_pad", {"avg_include", "avg"}},
    {PoolMode::avg_exclude_pad, "avg_exclude_pad", {"avg_exclude"}},
}};

std::string_view to_string(PoolMode mode) { return detail::enum_name(pool_mode_names, mode); }

PoolMode parse_pool_mode(std::string_view text) {
  return detail::parse_enum(pool_mode_names, text, "pooling mode",
                            "max, avg_include_pad (avg), avg_exclude_pad");
}

PoolDesc PoolDesc::from_shapes(const Dims& src, const std::vector<std::int64_t>& kernel,
                               const std::vector<std::int64_t>& stride,
                               const std::vector<std::int64_t>& pad, PoolMode mode, bool ceil_mode,
                               DType dtype, Layout layout) {
  return from_shapes(src, kernel, stride, pad, {1}, mode, ceil_mode, dtype, layout);
}

PoolDesc PoolDesc::from_shapes(const Dims& src, const std::vector<std::int64_t>& kernel,
                               const std::vector<std::int64_t>& stride,
                               const std::vector<std::int64_t>& pad,
                               const std::vector<std::int64_t>& dilation, PoolMode mode,
                               bool ceil_mode, DType dtype, Layout layout) {
  DNNX_CHECK_ARG(src.rank() >= 3 && src.rank() <= 5, "src dims ", src, " have rank ", src.rank(),
                 "; pooling accepts rank 3, 4 or 5 (N, C and 1-3 spatial dims)");
  PoolDesc desc;
  desc.spatial_dims = src.rank() - 2;
  const int n = desc.spatial_dims;
  desc.batch = src[0];
  desc.channels = src[1];
  for (int i = 0; i < n; ++i) desc.input[static_cast<std::size_t>(i)] = src[2 + i];
  desc.kernel = expand(kernel, n, "kernel", 1);
  desc.stride = stride.empty() ? desc.kernel : expand(stride, n, "stride", 1);
  desc.ceil_mode = ceil_mode;
  desc.mode = mode;
  return detail::finish_from_shapes(desc, pad, dilation, dtype, layout);
}

void PoolDesc::validate() const {
  detail::check_spatial_dims_and_batch(spatial_dims, batch);
  DNNX_CHECK_ARG(channels >= 1, "channels (C) must be >= 1, got ", channels);
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype),
                 " (pooling computes on values; integer dtypes hold labels)");
  DNNX_CHECK_ARG(valid_mode(mode), "mode must be max, avg_include_pad or avg_exclude_pad, got ",
                 static_cast<int>(mode));
  DNNX_CHECK_ARG(layout == Layout::channels_first || layout == Layout::channels_last,
                 "layout must be nchw or nhwc, got ", static_cast<int>(layout));
  DNNX_CHECK_ARG(!indices || mode == PoolMode::max, "indices is set with mode ", to_string(mode),
                 "; argmax indices exist for mode max only (clear indices or use mode max)");
  // Note [size limits] (core/check.hpp): entries of at most 2^31 keep the effective kernel
  // ((kernel - 1) * dilation + 1 < 2^62), the padded input (< 2^33) and every window position in
  // 64 bits; element counts go through checked_count.
  DNNX_CHECK_ARG(batch <= detail::max_dim_size, "batch (N) must be <= 2^31, got ", batch);
  DNNX_CHECK_ARG(channels <= detail::max_dim_size, "channels (C) must be <= 2^31, got ", channels);
  for (int i = 0; i < spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const char* axis = axis_name(spatial_dims, i);
    detail::check_window(*this, i, /*dilation_last=*/true);
    const std::int64_t extent = effective_kernel(i);
    // Half the kernel as the messages give it: with a dilation, how the effective kernel comes
    // about.
    const std::string half =
        dilation[s] == 1
            ? detail::cat("kernel size (", kernel[s], " / 2 = ", extent / 2, ")")
            : detail::cat("effective kernel size ((kernel ", kernel[s], " - 1) * dilation ",
                          dilation[s], " + 1 = ", extent, "; ", extent, " / 2 = ", extent / 2, ")");
    // PyTorch's rule (pooling_output_shape, pool2d_shape_check: "pad should be at most half of
    // effective kernel size"), per side. With dense windows it guarantees that every window,
    // ceil-mode ones included, holds at least one input element, so a max is never taken over
    // padding alone and an exclude-pad average never divides by zero; dilated windows are checked
    // below (Note [windows between input elements]).
    DNNX_CHECK_ARG(pad_before[s] <= extent / 2, "pad_before along ", axis, " is ", pad_before[s],
                   " but must be at most half the ", half, ", as in PyTorch");
    DNNX_CHECK_ARG(pad_after[s] <= extent / 2, "pad_after along ", axis, " is ", pad_after[s],
                   " but must be at most half the ", half, ", as in PyTorch");
    const std::int64_t padded = input[s] + pad_before[s] + pad_after[s];
    DNNX_CHECK_ARG(extent <= padded,
                   dilation[s] == 1
                       ? detail::cat("kernel along ", axis, " (size ", kernel[s], ")")
                       : detail::cat("effective kernel along ", axis, " ((kernel ", kernel[s],
                                     " - 1) * dilation ", dilation[s], " + 1 = ", extent, ")"),
                   " is larger than the padded input (", input[s], " + ", pad_before[s], " + ",
                   pad_after[s], " = ", padded, ")");
    const std::int64_t empty = empty_window(*this, i);
    DNNX_CHECK_ARG(empty < 0, "the window of output ", empty, " along ", axis,
                   " holds no input element: its positions ", empty * stride[s] - pad_before[s],
                   " + j * dilation ", dilation[s], " (j < kernel ", kernel[s],
                   ") all lie outside the input [0, ", input[s],
                   ") (PyTorch returns -inf there); use a smaller dilation or padding");
  }
  detail::checked_count(src_dims(), "src dims");
  detail::checked_count(dst_dims(), "dst dims");
}

std::int64_t PoolDesc::effective_kernel(int i) const {
  const auto s = static_cast<std::size_t>(i);
  // validate() bounds every entry (Note [size limits]) before it calls this; an unchecked desc
  // (an invalid one being printed) saturates instead of overflowing.
  const auto less = detail::checked_sub(kernel[s], 1);
  const auto spaced = less ? detail::checked_mul(*less, dilation[s]) : std::nullopt;
  const auto extent = spaced ? detail::checked_add(*spaced, 1) : std::nullopt;
  return extent.value_or(std::numeric_limits<std::int64_t>::max());
}

std::int64_t PoolDesc::output_size(int i) const {
  const auto s = static_cast<std::size_t>(i);
  const auto front = detail::checked_add(input[s], pad_before[s]);
  const auto padded = front ? detail::checked_add(*front, pad_after[s]) : std::nullopt;
  const auto span = padded ? detail::checked_sub(*padded, effective_kernel(i)) : std::nullopt;
  if (stride[s] < 1 || !span || *span < 0) return 0;  // invalid desc; validate() names the field
  std::int64_t out = *span / stride[s] + 1;
  if (!ceil_mode) return out;
  if (*span % stride[s] != 0) ++out;
  // PyTorch: the last window must start inside the input or the front padding.
  const auto last_start = detail::checked_mul(out - 1, stride[s]);
  if (!last_start || *last_start >= *front) --out;
  return out;
}

std::int64_t PoolDesc::overhang(int i) const {
  const auto s = static_cast<std::size_t>(i);
  const std::int64_t out = output_size(i);
  if (out < 1) return 0;
  const std::int64_t end = (out - 1) * stride[s] + effective_kernel(i);
  return std::max<std::int64_t>(0, end - (input[s] + pad_before[s] + pad_after[s]));
}

std::int64_t PoolDesc::input_plane() const {
  std::int64_t plane = 1;
  for (int i = 0; i < std::clamp(spatial_dims, 1, 3); ++i)
    plane *= input[static_cast<std::size_t>(i)];
  return plane;
}

Dims PoolDesc::src_dims() const {
  std::array<std::int64_t, 5> v{batch, channels, 0, 0, 0};
  const int n = std::clamp(spatial_dims, 1, 3);
  for (int i = 0; i < n; ++i)
    v[2 + static_cast<std::size_t>(i)] = input[static_cast<std::size_t>(i)];
  return Dims(std::span<const std::int64_t>(v.data(), static_cast<std::size_t>(n + 2)));
}

Dims PoolDesc::dst_dims() const {
  std::array<std::int64_t, 5> v{batch, channels, 0, 0, 0};
  const int n = std::clamp(spatial_dims, 1, 3);
  for (int i = 0; i < n; ++i) v[2 + static_cast<std::size_t>(i)] = output_size(i);
  return Dims(std::span<const std::int64_t>(v.data(), static_cast<std::size_t>(n + 2)));
}

std::string PoolDesc::repro(Direction direction) const {
  std::ostringstream out;
  // An invalid desc must still print (it is the context of the error that rejects it).
  const int n = std::clamp(spatial_dims, 0, 3);
  out << "dnnx profile pool --input " << batch << 'x' << channels;
  for (int i = 0; i < n; ++i) out << 'x' << input[static_cast<std::size_t>(i)];
  if (n != spatial_dims) out << " (spatial_dims=" << spatial_dims << ")";
  out << " --kernel " << compact(kernel, n) << " --stride " << compact(stride, n);
  if (pad_before == pad_after || n == 0) {
    out << " --pad " << compact(pad_before, n);
  } else {
    out << " --pad-before " << compact(pad_before, n) << " --pad-after " << compact(pad_after, n);
  }
  if (dilated(*this)) out << " --dilation " << compact(dilation, n);
  if (ceil_mode) out << " --ceil";
  out << " --mode " << to_string(mode);
  if (indices) out << " --indices";
  out << " --dtype " << to_string(dtype) << " --layout " << to_string(layout) << " --direction "
      << (direction == Direction::fwd ? "fwd" : "bwd");
  return out.str();
}

std::string PoolDesc::key() const {
  std::ostringstream out;
  const auto n = static_cast<std::size_t>(std::clamp(spatial_dims, 0, 3));
  auto list = [&](const std::array<std::int64_t, 3>& a) {
    return detail::join(std::span<const std::int64_t>(a.data(), n), ",");
  };
  out << "pool" << spatial_dims << "d " << to_string(mode) << " n=" << batch << " c=" << channels
      << " in=" << list(input) << " k=" << list(kernel) << " s=" << list(stride)
      << " pb=" << list(pad_before) << " pa=" << list(pad_after);
  // Only when not 1, so that the keys of dense descs (and cache files holding them) stay.
  if (dilated(*this)) out << " d=" << list(dilation);
  out << " ceil=" << (ceil_mode ? 1 : 0) << ' ' << to_string(dtype) << ' ' << to_string(layout);
  // Only when set, for the same reason.
  if (indices) out << " indices";
  return out.str();
}

std::size_t PoolDesc::hash() const {
  std::size_t h = 0;
  auto mix = [&h](std::int64_t v) { detail::hash_mix(h, static_cast<std::uint64_t>(v)); };
  mix(spatial_dims);
  mix(batch);
  mix(channels);
  detail::hash_window(h, *this, std::clamp(spatial_dims, 0, 3));
  mix(ceil_mode ? 1 : 0);
  mix(static_cast<std::int64_t>(mode));
  mix(static_cast<std::int64_t>(dtype));
  mix(static_cast<std::int64_t>(layout));
  mix(indices ? 1 : 0);
  return h;
}

std::ostream& operator<<(std::ostream& out, const PoolDesc& desc) { return out << desc.key(); }

namespace detail {
namespace {

// The output coordinates (n, c, o...) of dst element `element` (logical row-major order), and
// along each spatial dim the window's input elements: begin, begin + dilation, ... below end
// (begin the first, end one past the last; Note [windows between input elements]).
struct IndexSite {
  std::array<std::int64_t, 5> coordinates{};
  std::array<std::int64_t, 3> begin{}, end{};
};

IndexSite site_of(const PoolDesc& desc, std::int64_t element) {
  const Dims dims = desc.dst_dims();
  IndexSite site;
  for (int k = dims.rank() - 1; k >= 0; --k) {
    site.coordinates[static_cast<std::size_t>(k)] = element % dims[k];
    element /= dims[k];
  }
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const PoolSpan span = pool_span(desc, i, site.coordinates[s + 2]);
    site.begin[s] = span.begin;
    site.end[s] = span.end;
  }
  return site;
}

// value's input coordinates, spatial dims in order (value inside the plane).
std::array<std::int64_t, 3> input_coordinates(const PoolDesc& desc, std::int64_t value) {
  std::array<std::int64_t, 3> at{};
  for (int i = desc.spatial_dims - 1; i >= 0; --i) {
    const auto s = static_cast<std::size_t>(i);
    at[s] = value % desc.input[s];
    value /= desc.input[s];
  }
  return at;
}

}  // namespace

bool pool_index_in_window(const PoolDesc& desc, std::int64_t element, std::int64_t value) {
  if (value < 0 || value >= desc.input_plane()) return false;
  const IndexSite site = site_of(desc, element);
  const std::array<std::int64_t, 3> at = input_coordinates(desc, value);
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (at[s] < site.begin[s] || at[s] >= site.end[s]) return false;
    if ((at[s] - site.begin[s]) % desc.dilation[s] != 0) return false;
  }
  return true;
}

std::string bad_pool_index_message(const PoolDesc& desc, std::int64_t element, std::int64_t value) {
  const IndexSite site = site_of(desc, element);
  const int rank = desc.spatial_dims + 2;
  const std::string position = detail::join(
      std::span<const std::int64_t>(site.coordinates.data(), static_cast<std::size_t>(rank)), ", ");
  const auto n = static_cast<std::size_t>(desc.spatial_dims);
  const std::string plane = detail::join(std::span<const std::int64_t>(desc.input.data(), n), "x");
  const std::int64_t size = desc.input_plane();
  if (value < 0 || value >= size) {
    return detail::cat("indices[", position, "] is ", value, ", outside the ", plane,
                       " input plane: an index is a flat position in [0, ", size,
                       ") naming an element of its output's window");
  }
  const std::array<std::int64_t, 3> at = input_coordinates(desc, value);
  std::string window;
  for (std::size_t s = 0; s < n; ++s) {
    window += detail::cat(s == 0 ? "" : " x ", '[', site.begin[s], ", ", site.end[s], ')');
    if (desc.dilation[s] != 1) window += detail::cat(" step ", desc.dilation[s]);
  }
  return detail::cat("indices[", position, "] is ", value, " (input element ",
                     detail::join(std::span<const std::int64_t>(at.data(), n), ", "),
                     "), outside that output's window ", window,
                     ": pool_bwd takes the indices pool_fwd wrote, each naming an element of its "
                     "own window");
}

}  // namespace detail

}  // namespace dnnx
