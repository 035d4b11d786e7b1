#pragma once
// Message building without <format> (GCC 12 lacks it).

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::detail {

/// Streams every argument into one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

/// Joins `items` with `separator`.
template <typename Range>
std::string join(const Range& items, std::string_view separator) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

/// Splits `text` at every `separator`.
std::vector<std::string> split(std::string_view text, char separator);
/// Lower-cased copy of `text`.
std::string lower(std::string_view text);
/// `text` as a JSON string literal (quotes and escapes included).
std::string json_quote(std::string_view text);
/// The shortest text that reads back as exactly `value` (std::to_chars): repro lines must
/// reproduce the case and keys must tell 0.1f from 0.10000001f.
std::string shortest(double value);
/// The shortest text that reads back as exactly `value` (std::to_chars).
std::string shortest(float value);
/// Human bytes: "0 B", "7.4 KiB", "19.6 MiB".
std::string format_bytes(double bytes);

}  // namespace dnnx::detail
