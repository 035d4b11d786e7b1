#include "args.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>

namespace dnnx::cli {
namespace {

std::string quoted(std::string_view flag, std::string_view text) {
  return std::string(flag) + " '" + std::string(text) + "'";
}

// from_chars rejects a leading '+', spaces and trailing garbage, which is what a flag wants.
std::optional<std::int64_t> to_int(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || next != end) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

// A parsed stride/pad/dilation and the flag it came from; a single value fits every rank.
struct SpatialList {
  std::string_view flag;
  std::vector<std::int64_t> values;
};

void check_spatial_count(const SpatialList& list, std::string_view text, int spatial_dims) {
  const auto count = static_cast<int>(list.values.size());
  if (count != 1 && count != spatial_dims) {
    throw UsageError(quoted(list.flag, text) + ": expected 1 value or " +
                     std::to_string(spatial_dims) + " (one per spatial dim of --input), got " +
                     std::to_string(count));
  }
}

std::array<std::int64_t, 3> per_dim(const std::vector<std::int64_t>& values, int spatial_dims) {
  std::array<std::int64_t, 3> out{};
  for (int i = 0; i < spatial_dims; ++i)
    out[static_cast<std::size_t>(i)] =
        values.size() == 1 ? values[0] : values[static_cast<std::size_t>(i)];
  return out;
}

}  // namespace

std::int64_t parse_int(std::string_view flag, std::string_view text, std::int64_t min,
                       std::int64_t max) {
  const auto value = to_int(text);
  if (!value) throw UsageError(quoted(flag, text) + ": expected an integer");
  if (*value < min) throw UsageError(quoted(flag, text) + ": must be >= " + std::to_string(min));
  if (*value > max) throw UsageError(quoted(flag, text) + ": must be <= " + std::to_string(max));
  return *value;
}

std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text,
                                         std::int64_t min) {
  std::vector<std::int64_t> values;
  for (const std::string_view part : split(text, ',')) {
    const auto value = to_int(part);
    if (!value)
      throw UsageError(quoted(flag, text) +
                       ": expected an integer or a comma-separated list such as 2,2");
    if (*value < min)
      throw UsageError(quoted(flag, text) + ": every value must be >= " + std::to_string(min));
    values.push_back(*value);
  }
  return values;
}

Dims parse_dims(std::string_view flag, std::string_view text) {
  const Dims dims =
      parse_with(flag, text, [&](std::string_view value) { return Dims::parse(value, flag); });
  for (const std::int64_t size : dims) {
    if (size < 1)
      throw UsageError(quoted(flag, text) + ": every dimension must be >= 1, got " +
                       std::to_string(size));
  }
  return dims;
}

std::size_t parse_bytes(std::string_view flag, std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string suffix;
  for (const char c : text.substr(digits))
    suffix.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  int shift = -1;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "KIB")
    shift = 10;
  else if (suffix == "M" || suffix == "MIB")
    shift = 20;
  else if (suffix == "G" || suffix == "GIB")
    shift = 30;
  const auto value = to_int(text.substr(0, digits));
  if (!value || shift < 0) {
    throw UsageError(quoted(flag, text) +
                     ": expected bytes as an integer with an optional K, M or G suffix "
                     "(powers of 1024), e.g. 268435456 or 256M");
  }
  const auto bytes = static_cast<std::uint64_t>(*value);
  if (bytes > (std::numeric_limits<std::uint64_t>::max() >> shift))
    throw UsageError(quoted(flag, text) + ": too large");
  return static_cast<std::size_t>(bytes << shift);
}

std::vector<Direction> parse_directions(std::string_view flag, std::string_view text) {
  if (text == "all") return {Direction::fwd, Direction::bwd_data, Direction::bwd_weights};
  std::vector<Direction> directions;
  for (const std::string_view part : split(text, ',')) {
    const Direction direction =
        parse_with(flag, part, [&](std::string_view value) { return parse_direction(value); });
    if (std::find(directions.begin(), directions.end(), direction) == directions.end())
      directions.push_back(direction);
  }
  return directions;
}

std::vector<Direction> parse_layer_directions(std::string_view flag, std::string_view text) {
  if (text == "all") return {Direction::fwd, Direction::bwd_data};
  std::vector<Direction> directions;
  for (const std::string_view part : split(text, ',')) {
    Direction direction = Direction::fwd;
    if (part == "fwd" || part == "forward") {
      direction = Direction::fwd;
    } else if (part == "bwd" || part == "backward" || part == "bwd_data") {
      direction = Direction::bwd_data;
    } else {
      throw UsageError(quoted(flag, part) + ": unknown direction; accepted: fwd, bwd, all");
    }
    if (std::find(directions.begin(), directions.end(), direction) == directions.end())
      directions.push_back(direction);
  }
  return directions;
}

DType parse_dtype_arg(std::string_view flag, std::string_view text) {
  return parse_with(flag, text, [](std::string_view value) { return parse_dtype(value); });
}

Layout parse_layout_arg(std::string_view flag, std::string_view text) {
  return parse_with(flag, text, [](std::string_view value) { return parse_layout(value); });
}

AlgoPolicy parse_policy_arg(std::string_view flag, std::string_view text) {
  return parse_with(flag, text, [](std::string_view value) { return AlgoPolicy::parse(value); });
}

void add_backend_options(CLI::App& command, BackendArgs& args) {
  command
      .add_option("--backend", args.backend,
                  "reference | cpu | cudnn | auto (default: $DNNX_BACKEND, else auto)")
      ->type_name("NAME");
  command.add_option("--device", args.device, "device id for the cudnn backend")
      ->type_name("N")
      ->capture_default_str();
}

BackendChoice parse_backend_args(const BackendArgs& args) {
  BackendChoice choice;
  if (!args.backend.empty()) {
    choice.backend = parse_with("--backend", args.backend,
                                [](std::string_view value) { return parse_backend(value); });
  } else if (const char* env = std::getenv("DNNX_BACKEND"); env != nullptr && *env != '\0') {
    choice.backend = parse_with("DNNX_BACKEND", env,
                                [](std::string_view value) { return parse_backend(value); });
  }
  choice.device = static_cast<int>(parse_int("--device", args.device, 0));
  return choice;
}

Context make_context(const BackendChoice& choice, DType dtype) {
  const TypeConfig type_config = dtype == DType::f16    ? TypeConfig::half
                                 : dtype == DType::bf16 ? TypeConfig::bfloat16
                                                        : TypeConfig::float32;
  Context context(choice.backend, choice.device, type_config);
  apply_tune_env(context.tune());
  return context;
}

void add_conv_options(CLI::App& command, ConvArgs& args) {
  command
      .add_option("--input", args.input, "src dims N x C x spatial (rank 3, 4 or 5: 1-, 2-, 3-D)")
      ->type_name("NxCxHxW")
      ->required();
  command.add_option("--weights", args.weights, "weights dims O x C/groups x kernel")
      ->type_name("OxIxKHxKW")
      ->required();
  command.add_option("--stride", args.stride, "one value, or one per spatial dim ('2' or '2,2')")
      ->type_name("S[,S...]")
      ->capture_default_str();
  auto* pad = command.add_option("--pad", args.pad, "symmetric zero padding (default 0)")
                  ->type_name("P[,P...]");
  auto* before = command
                     .add_option("--pad-before", args.pad_before,
                                 "padding before each spatial dim (asymmetric; default 0)")
                     ->type_name("P[,P...]");
  auto* after = command
                    .add_option("--pad-after", args.pad_after,
                                "padding after each spatial dim (asymmetric; default 0)")
                    ->type_name("P[,P...]");
  pad->excludes(before);
  pad->excludes(after);
  command.add_option("--dilation", args.dilation, "one value, or one per spatial dim")
      ->type_name("D[,D...]")
      ->capture_default_str();
  command.add_option("--groups", args.groups, "channel groups (= C for depthwise)")
      ->type_name("G")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

ConvDesc parse_conv(const ConvArgs& args) {
  const Dims src = parse_dims("--input", args.input);
  const Dims weights = parse_dims("--weights", args.weights);
  if (src.rank() < 3 || src.rank() > 5) {
    throw UsageError(quoted("--input", args.input) +
                     ": expected rank 3, 4 or 5 (N x C x 1 to 3 spatial dims), got rank " +
                     std::to_string(src.rank()));
  }
  if (weights.rank() != src.rank()) {
    throw UsageError(
        quoted("--weights", args.weights) + ": expected rank " + std::to_string(src.rank()) +
        " like --input (O x C/groups x kernel), got rank " + std::to_string(weights.rank()));
  }
  const int spatial_dims = src.rank() - 2;
  const SpatialList stride{"--stride", parse_int_list("--stride", args.stride, 1)};
  const SpatialList dilation{"--dilation", parse_int_list("--dilation", args.dilation, 1)};
  const std::string pad_text = args.pad.empty() ? "0" : args.pad;
  const std::string before_text = args.pad_before.empty() ? "0" : args.pad_before;
  const std::string after_text = args.pad_after.empty() ? "0" : args.pad_after;
  const SpatialList pad{"--pad", parse_int_list("--pad", pad_text, 0)};
  const SpatialList pad_before{"--pad-before", parse_int_list("--pad-before", before_text, 0)};
  const SpatialList pad_after{"--pad-after", parse_int_list("--pad-after", after_text, 0)};
  check_spatial_count(stride, args.stride, spatial_dims);
  check_spatial_count(dilation, args.dilation, spatial_dims);
  check_spatial_count(pad, pad_text, spatial_dims);
  check_spatial_count(pad_before, before_text, spatial_dims);
  check_spatial_count(pad_after, after_text, spatial_dims);
  const std::int64_t groups =
      parse_int("--groups", args.groups, 1, std::numeric_limits<std::int64_t>::max());
  const DType dtype = parse_dtype_arg("--dtype", args.dtype);
  const Layout layout = parse_layout_arg("--layout", args.layout);

  ConvDesc desc = ConvDesc::from_shapes(src, weights, stride.values, pad.values, dilation.values,
                                        groups, dtype, layout);
  if (!args.pad_before.empty() || !args.pad_after.empty()) {
    desc.pad_before = per_dim(pad_before.values, spatial_dims);
    desc.pad_after = per_dim(pad_after.values, spatial_dims);
  }
  desc.validate();
  return desc;
}

void add_selection_options(CLI::App& command, SelectionArgs& args) {
  command
      .add_option("--workspace-limit", args.workspace_limit,
                  "largest workspace a candidate may use, bytes (K/M/G suffixes; default: "
                  "$DNNX_WORKSPACE_LIMIT, else none)")
      ->type_name("BYTES");
  command.add_flag("--deterministic", args.deterministic,
                   "only bitwise-reproducible candidates (also $DNNX_DETERMINISTIC)");
  command.add_flag("--fastest", args.fastest, "ignore the workspace limit (also $DNNX_FASTEST)");
  command.add_flag("--verbose", args.verbose,
                   "the library prints one line per decision on stderr (also $DNNX_VERBOSE)");
  command.add_flag("--time-naive", args.time_naive,
                   "also time naive reference implementations (slow: minutes on real layers)");
  command.add_option("--runs", args.runs, "timed runs per candidate (median kept; default 5)")
      ->type_name("N");
  command.add_flag("--no-final-round", args.no_final_round,
                   "exhaustive: do not re-time the close contenders interleaved before choosing");
  command.add_option("--warmup", args.warmup, "untimed runs per candidate first (default 1)")
      ->type_name("N");
}

Selection parse_selection(const SelectionArgs& args) {
  Selection selection;
  if (!args.workspace_limit.empty())
    selection.workspace_limit = parse_bytes("--workspace-limit", args.workspace_limit);
  selection.deterministic = args.deterministic;
  selection.fastest = args.fastest;
  selection.verbose = args.verbose;
  selection.time_naive = args.time_naive;
  selection.no_final_round = args.no_final_round;
  if (!args.runs.empty()) selection.runs = static_cast<int>(parse_int("--runs", args.runs, 1));
  if (!args.warmup.empty())
    selection.warmup = static_cast<int>(parse_int("--warmup", args.warmup, 0));
  return selection;
}

void Selection::apply(TuneOptions& options) const {
  if (workspace_limit) options.workspace_limit = workspace_limit;
  if (deterministic) options.deterministic = true;
  if (fastest) options.fastest = true;
  if (verbose) options.verbose = true;
  if (time_naive) options.time_naive = true;
  if (no_final_round) options.final_round = false;
  if (runs) options.timing_runs = *runs;
  if (warmup) options.warmup_runs = *warmup;
}

}  // namespace dnnx::cli
