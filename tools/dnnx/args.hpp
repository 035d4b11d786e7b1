#pragma once
// Argument parsing shared by the dnnx subcommands: every flag value is taken as text and parsed
// here, so that each bad value produces the same kind of one-line message naming the flag.

#include <dnnx/dnnx.hpp>

#include <CLI/CLI.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cli {

/// Exit status of a bad command line (unknown flag, malformed value, InvalidArgument).
inline constexpr int usage_exit_code = 2;
/// Exit status of a failure while running (backend unavailable, unsupported, out of memory...).
inline constexpr int failure_exit_code = 1;

/// Accepted ranges of the numeric flags that set how much work a command does (docs/cli.md):
/// wide enough for any real use, narrow enough that a typo cannot make a command run for days or
/// ask for memory without bound (the timings of every run are kept).
inline constexpr std::int64_t min_runs = 1;
inline constexpr std::int64_t max_runs = 1000;                    ///< --runs
inline constexpr std::int64_t max_warmup = 1000;                  ///< --warmup
inline constexpr std::int64_t max_benchmark_limit = 1000;         ///< --benchmark-limit (0 = all)
inline constexpr std::int64_t max_batch = std::int64_t{1} << 31;  ///< --batch (a desc's limit)
inline constexpr std::int64_t max_device = 1023;                  ///< --device (a CUDA ordinal)

/// A bad command-line argument; the message names the flag and the value received.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a subcommand does once the whole command line has parsed.
using Action = std::function<int()>;

/// An integer in [min, max] ("--runs", "5"); throws UsageError "<flag> '<text>': ..." naming the
/// accepted range. Every integer goes through one grammar (Note [one integer grammar], args.cpp):
/// an optional '-' and decimal digits, no '+', no spaces.
std::int64_t parse_int(std::string_view flag, std::string_view text, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int32_t>::max());
/// One integer or a comma-separated list ("2" or "2,2"), each in [min, max]; throws UsageError.
std::vector<std::int64_t> parse_int_list(
    std::string_view flag, std::string_view text, std::int64_t min,
    std::int64_t max = std::numeric_limits<std::int64_t>::max());
/// A list of parse_int_list with 1 entry (for every spatial dim) or `spatial_dims` entries, such
/// as --stride or --pad; throws UsageError naming the flag and the count.
std::vector<std::int64_t> parse_spatial_list(std::string_view flag, std::string_view text,
                                             std::int64_t min, int spatial_dims);
/// The `spatial_dims` values of a parse_spatial_list result (a single entry repeated).
std::array<std::int64_t, 3> per_spatial_dim(const std::vector<std::int64_t>& values,
                                            int spatial_dims);
/// Dims such as "32x64x56x56" (or "32,64,56,56"), at most 5 entries, every entry >= 1; throws
/// UsageError naming the flag, the text and the bad entry.
Dims parse_dims(std::string_view flag, std::string_view text);
/// Bytes: a plain integer or one with a K/M/G (KiB/MiB/GiB, powers of 1024) suffix.
std::size_t parse_bytes(std::string_view flag, std::string_view text);
/// `op`'s directions (the op table's): "all" or a comma-separated list of the op's direction names
/// ("bwd" for single-backward ops) or canonical names ("bwd_data"), in the order given, without
/// repeats; throws UsageError naming the flag and what the op accepts.
std::vector<Direction> parse_directions(OpKind op, std::string_view flag, std::string_view text);
/// The help line of --direction for `op`: "fwd | bwd | all, or a comma-separated list".
std::string direction_help(OpKind op);
DType parse_dtype_arg(std::string_view flag, std::string_view text);
Layout parse_layout_arg(std::string_view flag, std::string_view text);
AlgoPolicy parse_policy_arg(std::string_view flag, std::string_view text);

/// Where ops run: --backend (default: $DNNX_BACKEND, else auto) and --device.
struct BackendArgs {
  std::string backend;
  std::string device = "0";
};
void add_backend_options(CLI::App& command, BackendArgs& args);
/// The parsed form of BackendArgs.
struct BackendChoice {
  BackendKind backend = BackendKind::automatic;
  int device = 0;
};
BackendChoice parse_backend_args(const BackendArgs& args);
/// A Context for `choice`, with the DNNX_* tuning variables applied (flags are applied on top by
/// the caller). Backend errors (e.g. cudnn asked for but unavailable) propagate as dnnx::Error.
Context make_context(const BackendChoice& choice, DType dtype);

/// The description of one convolution, exactly as typed.
struct ConvArgs {
  std::string input;
  std::string weights;
  std::string stride = "1";
  std::string pad;
  std::string pad_before;
  std::string pad_after;
  std::string dilation = "1";
  std::string groups = "1";
  std::string dtype = "f32";
  std::string layout = "nchw";
};
/// Adds --input, --weights, --stride, --pad, --pad-before, --pad-after, --dilation, --groups,
/// --dtype, --layout to `command`.
void add_conv_options(CLI::App& command, ConvArgs& args);
/// The validated desc `args` describe; throws UsageError for malformed flags and dnnx::Error
/// (InvalidArgument) for shapes the library rejects.
ConvDesc parse_conv(const ConvArgs& args);

/// Selection constraints shared by `profile` and `tune`.
struct SelectionArgs {
  std::string workspace_limit;
  bool deterministic = false;
  bool fastest = false;
  bool verbose = false;
  bool time_naive = false;
  bool no_final_round = false;
  std::string runs;
  std::string warmup;
  std::string variant_factor;
  std::string final_loop_ms;
  std::string final_contenders;
  std::string host_tie;
  std::string search_budget_ms;
  std::string late_plan_share;
  std::string energy_window_ms;
  std::string energy_repeats;
};
void add_selection_options(CLI::App& command, SelectionArgs& args);
/// The parsed form of SelectionArgs: only what was given on the command line.
struct Selection {
  std::optional<std::size_t> workspace_limit;
  bool deterministic = false;
  bool fastest = false;
  bool verbose = false;
  bool time_naive = false;
  bool no_final_round = false;
  std::optional<int> runs;
  std::optional<int> warmup;
  std::optional<double> variant_factor;
  std::optional<double> final_loop_ms;
  std::optional<int> final_contenders;
  std::optional<double> host_tie;
  std::optional<double> search_budget_ms;
  std::optional<double> late_plan_share;
  std::optional<double> energy_window_ms;
  std::optional<int> energy_repeats;
  /// Applies the flags on top of `options` (which already hold the env values).
  void apply(TuneOptions& options) const;
};
Selection parse_selection(const SelectionArgs& args);

/// Parses a flag value with a library parser, turning its InvalidArgument into a UsageError that
/// names the flag and the value.
template <typename Parse>
auto parse_with(std::string_view flag, std::string_view text, Parse&& parse) {
  try {
    return parse(text);
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::InvalidArgument) throw;
    throw UsageError(std::string(flag) + " '" + std::string(text) + "': " + error.message());
  }
}

}  // namespace dnnx::cli
