#include "output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace dnnx::cli {
namespace {

std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return printf_string("%.1f ", value) + units[unit];
}

std::string format_ms(double ms) { return std::isnan(ms) ? "-" : printf_string("%.3f", ms); }

std::string format_ratio(double ratio) {
  return std::isnan(ratio) ? "-" : printf_string("%.2fx", ratio);
}

std::string format_seconds(double seconds) {
  if (seconds < 60) return printf_string("%.1f s", seconds);
  const auto whole = static_cast<long>(seconds);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%ld min %02ld s", whole / 60, whole % 60);
  return buffer;
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::vector<std::size_t>& right_aligned) {
  std::vector<std::size_t> widths(header.size(), 0);
  const auto widen = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], cells[i].size());
  };
  widen(header);
  for (const auto& row : rows) widen(row);

  std::ostringstream out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::string fill(widths[i] - cell.size(), ' ');
      const bool right =
          std::find(right_aligned.begin(), right_aligned.end(), i) != right_aligned.end();
      if (i > 0) text += "  ";
      text += right ? fill + cell : cell + fill;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  };
  line(header);
  std::size_t total = 0;
  for (const std::size_t width : widths) total += width;
  out << std::string(total + 2 * (widths.empty() ? 0 : widths.size() - 1), '-') << '\n';
  for (const auto& row : rows) line(row);
  return out.str();
}

}  // namespace dnnx::cli
