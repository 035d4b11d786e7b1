#pragma once
// Flags and parsing that the op subcommands (tools/dnnx/op_<op>.cpp) share beyond args.hpp and
// layer_command.hpp: numbers typed on the command line, the rank check of an op's input dims, the
// data dtype and layout flags, and the parse step of a LayerCommand. Header-only: the helpers are
// small and this keeps tools/dnnx/CMakeLists.txt as it is.

#include "args.hpp"
#include "layer_command.hpp"

#include <charconv>
#include <cmath>
#include <functional>
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

/// Adds the --dtype and --layout flags of an op's data tensors (defaults shown in --help).
inline void add_data_options(CLI::App& command, std::string& dtype, std::string& layout,
                             const char* dtype_help = "f32 | f16 | bf16") {
  command.add_option("--dtype", dtype, dtype_help)->type_name("DTYPE")->capture_default_str();
  command.add_option("--layout", layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

/// LayerCommand::parse for an op whose flags `parse` turns into a desc (with a `dtype` field)
/// that `list`, `profile` and `select` (e.g. pool_list, pool_profile, pool_select) take.
template <typename OpArgs, typename Parse, typename List, typename Profile, typename Select>
std::function<ParsedLayer(const OpArgs&)> layer_parser(Parse parse, List list, Profile profile,
                                                       Select select) {
  return [parse, list, profile, select](const OpArgs& args) {
    const auto desc = parse(args);
    return parsed_layer(desc, desc.dtype, list, profile, select);
  };
}

}  // namespace dnnx::cli
