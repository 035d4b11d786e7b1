#pragma once
// The per-spatial-dim fields that ConvDesc and PoolDesc share (kernel, stride, padding, dilation:
// up to 3 entries, D, H, W): how their messages name an axis, how repro lines print a field, and
// how from_shapes spreads a list given once or per dim.

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::detail {

/// "W"; "H", "W"; or "D", "H", "W": the name of spatial dim `i` of `spatial_dims` (1 to 3).
inline const char* axis_name(int spatial_dims, int i) {
  constexpr const char* names[3][3] = {{"W", "", ""}, {"H", "W", ""}, {"D", "H", "W"}};
  return names[spatial_dims - 1][i];
}

/// The first `n` entries as repro text: "2" when all agree, else "2,1"; "?" when `n` is 0.
inline std::string compact(const std::array<std::int64_t, 3>& values, int n) {
  if (n == 0) return "?";
  bool same = true;
  for (int i = 1; i < n; ++i) same = same && values[static_cast<std::size_t>(i)] == values[0];
  if (same) return std::to_string(values[0]);
  return join(std::span<const std::int64_t>(values.data(), static_cast<std::size_t>(n)), ",");
}

/// `values` (1 entry, or one per spatial dim) spread over `n` spatial dims, the rest `fill`.
/// Throws InvalidArgument naming `what` for any other count.
inline std::array<std::int64_t, 3> expand(const std::vector<std::int64_t>& values, int n,
                                          std::string_view what, std::int64_t fill) {
  DNNX_CHECK_ARG(values.size() == 1 || values.size() == static_cast<std::size_t>(n), what, " has ",
                 values.size(), " entries (", join(values, ","), "); expected 1 or ", n,
                 " (one per spatial dim)");
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (int i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] =
        values.size() == 1 ? values[0] : values[static_cast<std::size_t>(i)];
  return out;
}

/// The checks ConvDesc::validate and PoolDesc::validate start with.
inline void check_spatial_dims_and_batch(int spatial_dims, std::int64_t batch) {
  DNNX_CHECK_ARG(spatial_dims >= 1 && spatial_dims <= 3, "spatial_dims must be 1, 2 or 3, got ",
                 spatial_dims);
  DNNX_CHECK_ARG(batch >= 1, "batch (N) must be >= 1, got ", batch);
}

/// The end of ConvDesc::from_shapes and PoolDesc::from_shapes, once the sizes, kernel and stride
/// are in `desc`: the same padding on both sides, the dilation, dtype and layout; validated.
template <typename Desc>
Desc finish_from_shapes(Desc desc, const std::vector<std::int64_t>& pad,
                        const std::vector<std::int64_t>& dilation, DType dtype, Layout layout) {
  const int n = desc.spatial_dims;
  desc.pad_before = expand(pad, n, "pad", 0);
  desc.pad_after = desc.pad_before;
  desc.dilation = expand(dilation, n, "dilation", 1);
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

/// Throws InvalidArgument naming the field, `axis` and the value unless the window entries of one
/// spatial dim are in range: input, kernel, stride and dilation >= 1, paddings >= 0.
inline void check_window_entries(const char* axis, std::int64_t input, std::int64_t kernel,
                                 std::int64_t stride, std::int64_t dilation,
                                 std::int64_t pad_before, std::int64_t pad_after) {
  DNNX_CHECK_ARG(input >= 1, "input size along ", axis, " must be >= 1, got ", input);
  DNNX_CHECK_ARG(kernel >= 1, "kernel size along ", axis, " must be >= 1, got ", kernel);
  DNNX_CHECK_ARG(stride >= 1, "stride along ", axis, " must be >= 1, got ", stride);
  DNNX_CHECK_ARG(dilation >= 1, "dilation along ", axis, " must be >= 1, got ", dilation);
  DNNX_CHECK_ARG(pad_before >= 0, "pad_before along ", axis, " must be >= 0, got ", pad_before);
  DNNX_CHECK_ARG(pad_after >= 0, "pad_after along ", axis, " must be >= 0, got ", pad_after);
}

/// Throws InvalidArgument naming the field, the axis and the value unless every window entry of
/// spatial dim `i` of `desc` (a ConvDesc or PoolDesc) is at most 2^31 (Note [size limits] in
/// core/check.hpp) and in range (check_window_entries). Of several entries over 2^31 the first is
/// named: input, kernel, stride, dilation, pad_before, pad_after; with `dilation_last` (PoolDesc's
/// order) dilation after the paddings.
template <typename Desc>
void check_window(const Desc& desc, int i, bool dilation_last = false) {
  const auto s = static_cast<std::size_t>(i);
  const char* axis = axis_name(desc.spatial_dims, i);
  std::array<std::pair<const char*, std::int64_t>, 6> entries{{{"input size", desc.input[s]},
                                                               {"kernel size", desc.kernel[s]},
                                                               {"stride", desc.stride[s]},
                                                               {"dilation", desc.dilation[s]},
                                                               {"pad_before", desc.pad_before[s]},
                                                               {"pad_after", desc.pad_after[s]}}};
  if (dilation_last) std::rotate(entries.begin() + 3, entries.begin() + 4, entries.end());
  for (const auto& [name, value] : entries) {
    DNNX_CHECK_ARG(value <= max_dim_size, name, " along ", axis, " must be <= 2^31, got ", value);
  }
  check_window_entries(axis, desc.input[s], desc.kernel[s], desc.stride[s], desc.dilation[s],
                       desc.pad_before[s], desc.pad_after[s]);
}

/// Folds the window entries of the first `n` spatial dims of `desc` (a ConvDesc or PoolDesc) into
/// `seed`, dim by dim: input, kernel, stride, pad_before, pad_after, dilation.
template <typename Desc>
void hash_window(std::size_t& seed, const Desc& desc, int n) {
  for (int i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(i);
    for (const std::int64_t value : {desc.input[s], desc.kernel[s], desc.stride[s],
                                     desc.pad_before[s], desc.pad_after[s], desc.dilation[s]}) {
      hash_mix(seed, static_cast<std::uint64_t>(value));
    }
  }
}

}  // namespace dnnx::detail
