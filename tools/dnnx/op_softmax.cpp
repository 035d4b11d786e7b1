// `dnnx algos softmax ...` and `dnnx profile softmax ...`: the candidates of a softmax or
// log-softmax, and their times. Every SoftmaxDesc::repro() line parses here.

#include <dnnx/ops/softmax.hpp>

#include "commands.hpp"

#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The description of one softmax, exactly as typed.
struct SoftmaxArgs {
  std::string input;
  std::string mode = "channel";
  bool log = false;
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct CommandArgs {
  SoftmaxArgs softmax;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

void add_softmax_options(CLI::App& command, SoftmaxArgs& args) {
  command
      .add_option("--input", args.input,
                  "src dims N x C [x spatial...] (rank 2 to 5), e.g. 64x1000 or 8x21x64x64")
      ->type_name("NxC[xHxW]")
      ->required();
  command
      .add_option("--mode", args.mode,
                  "channel: over C at every position (SpatialSoftMax) | instance: over C*H*W of "
                  "each sample (the same for N x C)")
      ->type_name("MODE")
      ->capture_default_str();
  command.add_flag("--log", args.log, "log-softmax instead of softmax");
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

SoftmaxDesc parse_softmax(const SoftmaxArgs& args) {
  SoftmaxDesc desc;
  desc.dims = parse_dims("--input", args.input);
  if (desc.dims.rank() < 2 || desc.dims.rank() > 5) {
    throw UsageError("--input '" + args.input +
                     "': expected rank 2 to 5 (N x C and 0 to 3 spatial dims), got rank " +
                     std::to_string(desc.dims.rank()));
  }
  desc.mode = parse_with("--mode", args.mode,
                         [](std::string_view value) { return parse_softmax_mode(value); });
  desc.log = args.log;
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  if (!is_floating(desc.dtype)) {
    throw UsageError("--dtype '" + args.dtype + "': softmax takes f32, f16 or bf16");
  }
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

std::string desc_text(const SoftmaxDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const SoftmaxDesc desc = parse_softmax(args.softmax);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.dtype);
  return print_algos(
      "softmax", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return softmax_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const SoftmaxDesc desc = parse_softmax(args.softmax);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json, [&](Direction direction) {
    return softmax_profile(context, desc, direction);
  });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command.add_option("--direction", args.direction, "fwd | bwd | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_softmax_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "softmax",
      "candidates of a softmax / log-softmax: id, support status or reason, workspace, "
      "determinism");
  auto list_args = std::make_shared<CommandArgs>();
  add_softmax_options(*list, list_args->softmax);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time = profile.add_subcommand(
      "softmax", "time every candidate of a softmax / log-softmax, per direction");
  auto time_args = std::make_shared<CommandArgs>();
  add_softmax_options(*time, time_args->softmax);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
