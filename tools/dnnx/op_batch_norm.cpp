// `dnnx algos bnorm ...` and `dnnx profile bnorm ...`: the candidates of a batch normalization,
// and their times. Every BatchNormDesc::repro() line parses here.

#include <dnnx/ops/batch_norm.hpp>

#include "commands.hpp"

#include <charconv>
#include <cmath>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The description of one batch normalization, exactly as typed.
struct BatchNormArgs {
  std::string input;
  std::string mode = "spatial";
  bool training = false;
  bool inference = false;
  bool no_affine = false;
  std::string eps = "1e-05";
  std::string momentum = "0.1";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct CommandArgs {
  BatchNormArgs bnorm;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

void add_batch_norm_options(CLI::App& command, BatchNormArgs& args) {
  command.add_option("--input", args.input, "src dims N x C [x spatial...] (rank 2 to 5)")
      ->type_name("NxCxHxW")
      ->required();
  command
      .add_option("--mode", args.mode,
                  "spatial (per channel over N and positions) | per_activation (per element "
                  "over N)")
      ->type_name("MODE")
      ->capture_default_str();
  auto* training = command.add_flag("--training", args.training,
                                    "batch statistics, running statistics updated (the default)");
  auto* inference = command.add_flag("--inference", args.inference,
                                     "running statistics; backward with frozen statistics");
  training->excludes(inference);
  command.add_flag("--no-affine", args.no_affine, "no scale and shift (scale 1, shift 0)");
  command.add_option("--eps", args.eps, "added to the variance, > 0")
      ->type_name("EPS")
      ->capture_default_str();
  command.add_option("--momentum", args.momentum, "running statistics update factor, in [0, 1]")
      ->type_name("M")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16 (of the data; statistics are f32)")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

// A finite number, the whole text; throws UsageError naming the flag.
double parse_number(std::string_view flag, std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || !std::isfinite(value)) {
    throw UsageError(std::string(flag) + " '" + std::string(text) +
                     "': expected a finite number, e.g. 1e-05 or 0.1");
  }
  return value;
}

BatchNormDesc parse_batch_norm(const BatchNormArgs& args) {
  BatchNormDesc desc;
  desc.dims = parse_dims("--input", args.input);
  if (desc.dims.rank() < 2 || desc.dims.rank() > 5) {
    throw UsageError("--input '" + args.input +
                     "': expected rank 2 to 5 (N x C x up to 3 spatial dims), got rank " +
                     std::to_string(desc.dims.rank()));
  }
  desc.mode = parse_with("--mode", args.mode,
                         [](std::string_view value) { return parse_batch_norm_mode(value); });
  desc.training = !args.inference;
  desc.affine = !args.no_affine;
  desc.eps = parse_number("--eps", args.eps);
  desc.momentum = parse_number("--momentum", args.momentum);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

std::string desc_text(const BatchNormDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const BatchNormDesc desc = parse_batch_norm(args.bnorm);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.dtype);
  return print_algos(
      "bnorm", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return batch_norm_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const BatchNormDesc desc = parse_batch_norm(args.bnorm);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json, [&](Direction direction) {
    return batch_norm_profile(context, desc, direction);
  });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command.add_option("--direction", args.direction, "fwd | bwd | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_batch_norm_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "bnorm",
      "candidates of a batch normalization: id, support status or reason, workspace, determinism");
  auto list_args = std::make_shared<CommandArgs>();
  add_batch_norm_options(*list, list_args->bnorm);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time = profile.add_subcommand(
      "bnorm", "time every candidate of a batch normalization, per direction, by median time");
  auto time_args = std::make_shared<CommandArgs>();
  add_batch_norm_options(*time, time_args->bnorm);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
