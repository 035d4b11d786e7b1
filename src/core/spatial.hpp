#pragma once
// The per-spatial-dim fields that ConvDesc and PoolDesc share (kernel, stride, padding, dilation:
// up to 3 entries, D, H, W): how their messages name an axis, how repro lines print a field, and
// how from_shapes spreads a list given once or per dim.

#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
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

}  // namespace dnnx::detail
