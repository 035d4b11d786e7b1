#include "args.hpp"

#include "layer_args.hpp"

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

// Note [one integer grammar]
// Every integer the command line or a model file holds (a flag's value, an entry of a list such
// as --stride 2,2, an entry of dims such as --input 8x3x224x224) is read by to_int and nothing
// else: an optional '-' and decimal digits, nothing before or after (no '+', no spaces, no
// suffix), within 64 bits. from_chars implements exactly that grammar. The range each value must
// lie in is checked after, with a message that names the flag, the text and the accepted range.

// The integer `text` holds: its value, or nullopt with `out_of_range` telling digits beyond 64 bits
// from malformed text.
struct IntText {
  std::optional<std::int64_t> value;
  bool out_of_range = false;
};

IntText to_int(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || next != end) return {};
  if (error == std::errc::result_out_of_range) return {std::nullopt, true};
  if (error != std::errc()) return {};
  return {value, false};
}

std::string range_text(std::int64_t min, std::int64_t max) {
  if (max == std::numeric_limits<std::int64_t>::max()) return ">= " + std::to_string(min);
  if (min == std::numeric_limits<std::int64_t>::min()) return "<= " + std::to_string(max);
  return std::to_string(min) + " to " + std::to_string(max);
}

// Entry `part` of `text` (a list or dims) as an integer in [min, max]; `shape` says what the whole
// text should look like.
std::int64_t entry_in_range(std::string_view flag, std::string_view text, std::string_view part,
                            std::int64_t min, std::int64_t max, std::string_view shape) {
  const IntText parsed = to_int(part);
  if (!parsed.value && !parsed.out_of_range) {
    throw UsageError(quoted(flag, text) + ": entry '" + std::string(part) +
                     "' is not an integer; expected " + std::string(shape) +
                     " (decimal digits, no '+' or spaces)");
  }
  if (!parsed.value || *parsed.value < min || *parsed.value > max) {
    throw UsageError(quoted(flag, text) + ": entry '" + std::string(part) +
                     "' is out of range; every entry must be " + range_text(min, max));
  }
  return *parsed.value;
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

// A number from 0 to `max` (NaN and the infinities out of range); otherwise a UsageError
// "FLAG 'TEXT': expected ACCEPTED".
double parse_from_zero(std::string_view flag, const std::string& text, double max,
                       std::string_view accepted) {
  const double value = parse_number<double>(flag, text, Finite::any);
  if (!(value >= 0 && value <= max))
    throw UsageError(quoted(flag, text) + ": expected " + std::string(accepted));
  return value;
}

}  // namespace

std::int64_t parse_int(std::string_view flag, std::string_view text, std::int64_t min,
                       std::int64_t max) {
  // Note [one integer grammar].
  const IntText parsed = to_int(text);
  if (!parsed.value && !parsed.out_of_range) {
    throw UsageError(quoted(flag, text) + ": expected an integer, " + range_text(min, max) +
                     " (decimal digits, no '+' or spaces)");
  }
  if (!parsed.value || *parsed.value < min || *parsed.value > max)
    throw UsageError(quoted(flag, text) + ": out of range; accepted: " + range_text(min, max));
  return *parsed.value;
}

std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text,
                                         std::int64_t min, std::int64_t max) {
  std::vector<std::int64_t> values;
  for (const std::string_view part : split(text, ',')) {
    values.push_back(entry_in_range(flag, text, part, min, max,
                                    "an integer or a comma-separated list such as 2,2"));
  }
  return values;
}

std::vector<std::int64_t> parse_spatial_list(std::string_view flag, std::string_view text,
                                             std::int64_t min, int spatial_dims) {
  std::vector<std::int64_t> values = parse_int_list(flag, text, min);
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(spatial_dims)) {
    throw UsageError(quoted(flag, text) + ": expected 1 value or " + std::to_string(spatial_dims) +
                     " (one per spatial dim of --input), got " + std::to_string(values.size()));
  }
  return values;
}

std::array<std::int64_t, 3> per_spatial_dim(const std::vector<std::int64_t>& values,
                                            int spatial_dims) {
  std::array<std::int64_t, 3> out{};
  for (int i = 0; i < spatial_dims; ++i)
    out[static_cast<std::size_t>(i)] =
        values.size() == 1 ? values[0] : values[static_cast<std::size_t>(i)];
  return out;
}

Dims parse_dims(std::string_view flag, std::string_view text) {
  // The separators Dims::parse accepts: 'x', or ',' when the text holds one.
  const char separator = text.find(',') != std::string_view::npos ? ',' : 'x';
  const std::vector<std::string_view> parts = split(text, separator);
  if (parts.size() > static_cast<std::size_t>(Dims::max_rank)) {
    throw UsageError(quoted(flag, text) + ": has " + std::to_string(parts.size()) +
                     " entries; at most " + std::to_string(Dims::max_rank) + " are accepted");
  }
  std::vector<std::int64_t> values;
  for (const std::string_view part : parts) {
    values.push_back(entry_in_range(flag, text, part, 1, std::numeric_limits<std::int64_t>::max(),
                                    "dims such as 32x64x56x56, every entry >= 1"));
  }
  return Dims(std::span<const std::int64_t>(values));
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
  // Note [one integer grammar]: the digits before the suffix.
  const IntText value = to_int(text.substr(0, digits));
  if ((!value.value && !value.out_of_range) || shift < 0) {
    throw UsageError(quoted(flag, text) +
                     ": expected bytes as an integer with an optional K, M or G suffix "
                     "(powers of 1024), e.g. 268435456 or 256M");
  }
  constexpr std::int64_t max_bytes = std::numeric_limits<std::int64_t>::max();
  if (!value.value || *value.value > (max_bytes >> shift)) {
    throw UsageError(quoted(flag, text) + ": out of range; accepted: 0 to " +
                     std::to_string(max_bytes) + " bytes");
  }
  return static_cast<std::size_t>(*value.value << shift);
}

std::vector<Direction> parse_directions(OpKind op, std::string_view flag, std::string_view text) {
  const OpInfo& info = op_info(op);
  std::vector<Direction> directions;
  if (text == "all") {
    for (const OpDirection& direction : info.directions) directions.push_back(direction.direction);
    return directions;
  }
  for (const std::string_view part : split(text, ',')) {
    const Direction direction = parse_with(
        flag, part, [&](std::string_view value) { return info.parse_direction(value); });
    if (std::find(directions.begin(), directions.end(), direction) == directions.end())
      directions.push_back(direction);
  }
  return directions;
}

std::string direction_help(OpKind op) {
  const OpInfo& info = op_info(op);
  if (info.directions.size() == 1) {
    return std::string(info.directions[0].name) + " (the only direction of " +
           std::string(info.name) + "; all = " + std::string(info.directions[0].name) + ")";
  }
  std::string help;
  for (const OpDirection& direction : info.directions) help += std::string(direction.name) + " | ";
  return help + "all, or a comma-separated list";
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
  command
      .add_option("--device", args.device,
                  "device id for the cudnn backend, 0 to " + std::to_string(max_device))
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
  choice.device = static_cast<int>(parse_int("--device", args.device, 0, max_device));
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
  const auto stride = parse_spatial_list("--stride", args.stride, 1, spatial_dims);
  const auto dilation = parse_spatial_list("--dilation", args.dilation, 1, spatial_dims);
  const auto pad = parse_spatial_list("--pad", args.pad.empty() ? "0" : args.pad, 0, spatial_dims);
  const auto pad_before = parse_spatial_list(
      "--pad-before", args.pad_before.empty() ? "0" : args.pad_before, 0, spatial_dims);
  const auto pad_after = parse_spatial_list(
      "--pad-after", args.pad_after.empty() ? "0" : args.pad_after, 0, spatial_dims);
  const std::int64_t groups =
      parse_int("--groups", args.groups, 1, std::numeric_limits<std::int64_t>::max());
  const DType dtype = parse_dtype_arg("--dtype", args.dtype);
  const Layout layout = parse_layout_arg("--layout", args.layout);

  ConvDesc desc = ConvDesc::from_shapes(src, weights, stride, pad, dilation, groups, dtype, layout);
  if (!args.pad_before.empty() || !args.pad_after.empty()) {
    desc.pad_before = per_spatial_dim(pad_before, spatial_dims);
    desc.pad_after = per_spatial_dim(pad_after, spatial_dims);
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
  command
      .add_option("--runs", args.runs,
                  "timed runs per candidate, " + std::to_string(min_runs) + " to " +
                      std::to_string(max_runs) + " (median kept; default 5)")
      ->type_name("N");
  command.add_flag("--no-final-round", args.no_final_round,
                   "exhaustive: do not re-time the close contenders interleaved before choosing");
  command
      .add_option(
          "--warmup", args.warmup,
          "untimed runs per candidate first, 0 to " + std::to_string(max_warmup) + " (default 1)")
      ->type_name("N");
  command
      .add_option("--variant-factor", args.variant_factor,
                  "skip a knob variant whose seed ran over this many times slower than the best "
                  "(0 = time every variant; default: $DNNX_VARIANT_FACTOR, else 2)")
      ->type_name("X");
  command
      .add_option("--final-loop-ms", args.final_loop_ms,
                  "exhaustive: each final-round sample of a contender is a loop of back-to-back "
                  "runs lasting about this long, where the backend times loops (0 = single runs; "
                  "default: $DNNX_FINAL_LOOP_MS, else 0.5)")
      ->type_name("MS");
  command
      .add_option("--final-contenders", args.final_contenders,
                  "exhaustive: the final round times again at most this many of the fastest "
                  "candidates within 2x of the best, 0 to 1000 (0 = 4, or 10 where its samples "
                  "are loops; default: $DNNX_FINAL_CONTENDERS, else 0)")
      ->type_name("N");
  command
      .add_option("--host-tie", args.host_tie,
                  "exhaustive: choose a candidate noted host_heavy (cuDNN's legacy calls) only "
                  "when it beats the fastest other one by more than this fraction (0 = off; "
                  "default: $DNNX_HOST_TIE, else 0.02)")
      ->type_name("X");
  command
      .add_option("--search-budget-ms", args.search_budget_ms,
                  "exhaustive selection: once a search has taken this long, time no further "
                  "candidates but the backend heuristics' first picks (profiles time every "
                  "candidate; 0 = no budget; default: $DNNX_SEARCH_BUDGET_MS, else 0)")
      ->type_name("MS");
  command
      .add_option("--late-plan-share", args.late_plan_share,
                  "exhaustive: time the late plans of the choices read from the cache file "
                  "within this share of the searches they record, pooled over them, leaving the "
                  "rest for a later process (0 = all at once; default: $DNNX_LATE_PLAN_SHARE, "
                  "else 0.04)")
      ->type_name("X");
  command
      .add_option("--energy-window-ms", args.energy_window_ms,
                  "min_energy, energy_delay and profile --energy: each loop of runs whose energy "
                  "is read lasts at least this long (50 to 60000; default: "
                  "$DNNX_ENERGY_WINDOW_MS, else 1000)")
      ->type_name("MS");
  command
      .add_option("--energy-repeats", args.energy_repeats,
                  "those loops per candidate, their median kept with their spread (1 to 100; "
                  "default: $DNNX_ENERGY_REPEATS, else 3)")
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
  if (!args.runs.empty())
    selection.runs = static_cast<int>(parse_int("--runs", args.runs, min_runs, max_runs));
  if (!args.warmup.empty())
    selection.warmup = static_cast<int>(parse_int("--warmup", args.warmup, 0, max_warmup));
  if (!args.variant_factor.empty()) {
    const double factor =
        parse_number<double>("--variant-factor", args.variant_factor, Finite::any);
    if (!(factor == 0 || factor >= 1)) {
      throw UsageError("--variant-factor '" + args.variant_factor +
                       "': expected 0 (off) or a number >= 1 (inf allowed)");
    }
    selection.variant_factor = factor;
  }
  if (!args.final_loop_ms.empty()) {
    selection.final_loop_ms =
        parse_from_zero("--final-loop-ms", args.final_loop_ms, TuneOptions::max_final_loop_ms,
                        "milliseconds from 0 to " +
                            std::to_string(static_cast<int>(TuneOptions::max_final_loop_ms)));
  }
  if (!args.final_contenders.empty()) {
    selection.final_contenders = static_cast<int>(parse_int(
        "--final-contenders", args.final_contenders, 0, TuneOptions::max_final_contenders));
  }
  if (!args.host_tie.empty()) {
    selection.host_tie = parse_from_zero("--host-tie", args.host_tie, TuneOptions::max_host_tie,
                                         "a fraction from 0 (off) to 1 (0.02: 2%)");
  }
  if (!args.search_budget_ms.empty()) {
    selection.search_budget_ms = parse_from_zero(
        "--search-budget-ms", args.search_budget_ms, TuneOptions::max_search_budget_ms,
        "milliseconds from 0 (no budget) to " +
            std::to_string(static_cast<int>(TuneOptions::max_search_budget_ms)));
  }
  if (!args.late_plan_share.empty()) {
    selection.late_plan_share =
        parse_from_zero("--late-plan-share", args.late_plan_share, TuneOptions::max_late_plan_share,
                        "a fraction from 0 (every late plan at once) to 1 (0.04: 4%)");
  }
  if (!args.energy_window_ms.empty()) {
    const double window =
        parse_from_zero("--energy-window-ms", args.energy_window_ms,
                        TuneOptions::max_energy_window_ms, "milliseconds from 50 to 60000");
    if (window < TuneOptions::min_energy_window_ms) {
      throw UsageError("--energy-window-ms '" + args.energy_window_ms +
                       "': expected milliseconds from 50 to 60000");
    }
    selection.energy_window_ms = window;
  }
  if (!args.energy_repeats.empty()) {
    selection.energy_repeats = static_cast<int>(
        parse_int("--energy-repeats", args.energy_repeats, 1, TuneOptions::max_energy_repeats));
  }
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
  if (variant_factor) options.variant_factor = *variant_factor;
  if (final_loop_ms) options.final_loop_ms = *final_loop_ms;
  if (final_contenders) options.final_contenders = *final_contenders;
  if (host_tie) options.host_tie = *host_tie;
  if (search_budget_ms) options.search_budget_ms = *search_budget_ms;
  if (late_plan_share) options.late_plan_share = *late_plan_share;
  if (energy_window_ms) options.energy_window_ms = *energy_window_ms;
  if (energy_repeats) options.energy_repeats = *energy_repeats;
}

}  // namespace dnnx::cli
