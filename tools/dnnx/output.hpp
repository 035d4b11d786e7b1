#pragma once
// Text formatting shared by the subcommands' human-readable output.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cli {

/// `items` separated by `separator`.
std::string join(const std::vector<std::string>& items, std::string_view separator);
/// "0 B", "7.4 KiB", "19.6 MiB".
std::string format_bytes(std::size_t bytes);
/// Milliseconds with 3 decimals, "-" for NaN.
std::string format_ms(double ms);
/// "1.23x", "-" for NaN.
std::string format_ratio(double ratio);
/// "12.3 s" or "2 min 05 s".
std::string format_seconds(double seconds);

/// A fixed-width text table: every column as wide as its widest cell, columns whose index is in
/// `right_aligned` aligned right (numbers), a dashed rule under the header.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::vector<std::size_t>& right_aligned = {});

}  // namespace dnnx::cli
