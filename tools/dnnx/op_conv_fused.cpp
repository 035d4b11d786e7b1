// `dnnx algos conv_fused ...` and `dnnx profile conv_fused ...`: the candidates of a forward
// convolution with a fused epilogue, and their times. Every ConvFusedDesc::repro() line parses
// here.

#include <dnnx/ops/conv_fused.hpp>

#include "commands.hpp"

#include <charconv>
#include <cmath>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The epilogue, exactly as typed.
struct EpilogueArgs {
  bool bias = false;
  bool residual = false;
  std::string residual_scale;  // empty: 1
  std::string activation = "relu";
};

struct CommandArgs {
  ConvArgs conv;
  EpilogueArgs epilogue;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "fwd";
  bool json = false;
};

void add_epilogue_options(CLI::App& command, EpilogueArgs& args) {
  command.add_flag("--bias", args.bias, "add a bias, one value per output channel");
  command.add_flag("--residual", args.residual, "add a residual tensor of dst's dims");
  command
      .add_option("--residual-scale", args.residual_scale,
                  "scale of the residual (finite; default 1; needs --residual)")
      ->type_name("S");
  command.add_option("--activation", args.activation, "identity | relu, applied last")
      ->type_name("ACT")
      ->capture_default_str();
}

float parse_scale(std::string_view flag, std::string_view text) {
  float value = 0;
  const char* end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || next != end || !std::isfinite(value)) {
    throw UsageError(std::string(flag) + " '" + std::string(text) +
                     "': expected a finite number such as 0.5");
  }
  return value;
}

ConvFusedDesc parse_conv_fused(const CommandArgs& args) {
  ConvFusedDesc desc;
  desc.conv = parse_conv(args.conv);
  desc.bias = args.epilogue.bias;
  desc.residual = args.epilogue.residual;
  if (!args.epilogue.residual_scale.empty())
    desc.residual_scale = parse_scale("--residual-scale", args.epilogue.residual_scale);
  desc.activation =
      parse_with("--activation", args.epilogue.activation,
                 [](std::string_view value) { return parse_fused_activation(value); });
  desc.validate();
  return desc;
}

std::string desc_text(const ConvFusedDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const ConvFusedDesc desc = parse_conv_fused(args);
  // Directions other than fwd parse, and the library rejects them with its own message.
  const std::vector<Direction> directions = args.direction == "all"
                                                ? std::vector<Direction>{Direction::fwd}
                                                : parse_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.conv.dtype);
  return print_algos(
      "conv_fused", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return conv_fused_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const ConvFusedDesc desc = parse_conv_fused(args);
  const std::vector<Direction> directions = args.direction == "all"
                                                ? std::vector<Direction>{Direction::fwd}
                                                : parse_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.conv.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json, [&](Direction direction) {
    return conv_fused_profile(context, desc, direction);
  });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command
      .add_option("--direction", args.direction,
                  "fwd (the only direction of a fused convolution; all = fwd)")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_conv_fused_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "conv_fused",
      "candidates of a forward convolution with a fused bias / residual / activation epilogue: "
      "id, support status or reason, workspace, determinism");
  auto list_args = std::make_shared<CommandArgs>();
  add_conv_options(*list, list_args->conv);
  add_epilogue_options(*list, list_args->epilogue);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time = profile.add_subcommand(
      "conv_fused",
      "time every candidate of a forward convolution with a fused epilogue, sorted by median time");
  auto time_args = std::make_shared<CommandArgs>();
  add_conv_options(*time, time_args->conv);
  add_epilogue_options(*time, time_args->epilogue);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
