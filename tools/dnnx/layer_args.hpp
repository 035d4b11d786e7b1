#pragma once
// Flag parsing that the op subcommands (tools/dnnx/op_<op>.cpp) share beyond args.hpp: numbers
// typed on the command line and the rank check of an op's input dims. Header-only: the helpers are
// small and this keeps tools/dnnx/CMakeLists.txt as it is.

#include "args.hpp"

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>

namespace dnnx::cli {

/// Whether parse_number accepts only finite values, or also inf and nan (which the desc's own
/// validation then judges, with its own message).
enum class Finite : bool { any, only };

/// The whole of `text` as a T (float or double, parsed directly in T so that it is rounded once).
/// Throws UsageError "<flag> '<text>': expected a number (e.g. 1, 0.5, -2e-1)", or "expected a
/// finite number ..." under Finite::only, for empty text, trailing characters or (Finite::only)
/// an infinity or NaN.
template <typename T>
T parse_number(std::string_view flag, std::string_view text, Finite finite) {
  T value = 0;
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || next != end ||
      (finite == Finite::only && !std::isfinite(value))) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "': expected a " +
                     (finite == Finite::only ? "finite " : "") + "number (e.g. 1, 0.5, -2e-1)");
  }
  return value;
}

/// parse_dims of `text`, whose rank must be in [min_rank, max_rank]; throws UsageError
/// "<flag> '<text>': expected <accepted>, got rank <r>". `accepted` reads like "rank 2 to 5 (N x
/// C and 0 to 3 spatial dims)".
inline Dims parse_dims_of_rank(std::string_view flag, const std::string& text, int min_rank,
                               int max_rank, std::string_view accepted) {
  Dims dims = parse_dims(flag, text);
  if (dims.rank() < min_rank || dims.rank() > max_rank) {
    throw UsageError(std::string(flag) + " '" + text + "': expected " + std::string(accepted) +
                     ", got rank " + std::to_string(dims.rank()));
  }
  return dims;
}

}  // namespace dnnx::cli
