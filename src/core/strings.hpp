#pragma once
// Message building without <format> (GCC 12 lacks it).

#include <array>
#include <cstddef>
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

/// One value of a public enum and its spellings: `name` is what to_string gives; parsing accepts
/// it and `aliases`, in any case.
template <typename Enum>
struct EnumName {
  Enum value;
  std::string_view name;
  std::array<std::string_view, 3> aliases{};
};

/// `value`'s name in `table`; `otherwise` for a value outside the enum.
template <typename Enum, std::size_t size>
constexpr std::string_view enum_name(const std::array<EnumName<Enum>, size>& table, Enum value,
                                     std::string_view otherwise = "?") {
  for (const EnumName<Enum>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return otherwise;
}

/// Throws InvalidArgument "unknown <what> '<text>'; accepted: <accepted>".
[[noreturn]] void raise_unknown_name(std::string_view what, std::string_view text,
                                     std::string_view accepted);

/// The value `text` names in `table` (its name or an alias, in any case); else
/// raise_unknown_name(what, text, accepted).
template <typename Enum, std::size_t size>
Enum parse_enum(const std::array<EnumName<Enum>, size>& table, std::string_view text,
                std::string_view what, std::string_view accepted) {
  const std::string name = lower(text);
  for (const EnumName<Enum>& entry : table) {
    if (name == entry.name) return entry.value;
    for (std::string_view alias : entry.aliases) {
      if (!alias.empty() && name == alias) return entry.value;
    }
  }
  raise_unknown_name(what, text, accepted);
}

}  // namespace dnnx::detail
