#include "core/strings.hpp"

#include "core/check.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <iomanip>

namespace dnnx::detail {

void raise_unknown_name(std::string_view what, std::string_view text, std::string_view accepted) {
  raise(ErrorKind::InvalidArgument, cat("unknown ", what, " '", text, "'; accepted: ", accepted));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

namespace {

template <typename Float>
std::string shortest_text(Float value) {
  std::array<char, 64> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (error != std::errc()) return std::to_string(value);
  return std::string(buffer.data(), end);
}

}  // namespace

std::string shortest(double value) { return shortest_text(value); }

std::string shortest(float value) { return shortest_text(value); }

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string format_bytes(double bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  std::ostringstream out;
  if (unit == 0) {
    out << static_cast<long long>(bytes) << " B";
  } else {
    out << std::fixed << std::setprecision(1) << bytes << ' ' << units[unit];
  }
  return out.str();
}

}  // namespace dnnx::detail
