// `dnnx algos act ...` and `dnnx profile act ...`: the candidates of an activation, and their
// times. Every ActivationDesc::repro() line parses here.

#include <dnnx/ops/activation.hpp>

#include "commands.hpp"

#include <charconv>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The description of one activation, exactly as typed.
struct ActivationArgs {
  std::string input;
  std::string kind = "relu";
  std::string alpha;
  std::string ceiling;
  std::string saved = "src_and_dst";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct CommandArgs {
  ActivationArgs act;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

void add_activation_options(CLI::App& command, ActivationArgs& args) {
  command.add_option("--input", args.input, "src dims, rank 1 to 5 (N x C x spatial...)")
      ->type_name("NxCxHxW")
      ->required();
  command
      .add_option("--kind", args.kind,
                  "identity | relu | clipped_relu | tanh | sigmoid | elu | swish (silu)")
      ->type_name("KIND")
      ->capture_default_str();
  command.add_option("--alpha", args.alpha, "elu's alpha (default 1)")->type_name("A");
  command.add_option("--ceiling", args.ceiling, "clipped_relu's ceiling, > 0 (default 6)")
      ->type_name("C");
  command
      .add_option("--saved", args.saved,
                  "forward tensors the backward pass gets: src_and_dst | dst (after an in-place "
                  "forward) | src")
      ->type_name("SAVED")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

// A finite or infinite real number (the desc's validation judges the value); throws UsageError.
double parse_real(std::string_view flag, std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + " '" + std::string(text) +
                     "': expected a number (e.g. 1, 0.5, 6e-1)");
  }
  return value;
}

ActivationDesc parse_activation(const ActivationArgs& args) {
  ActivationDesc desc;
  desc.dims = parse_dims("--input", args.input);
  if (desc.dims.rank() < 1 || desc.dims.rank() > 5) {
    throw UsageError("--input '" + args.input + "': expected rank 1 to 5, got rank " +
                     std::to_string(desc.dims.rank()));
  }
  desc.kind = parse_with("--kind", args.kind,
                         [](std::string_view value) { return parse_activation_kind(value); });
  if (!args.alpha.empty()) {
    if (desc.kind != ActivationKind::elu) {
      throw UsageError("--alpha '" + args.alpha + "': only --kind elu takes alpha (got --kind " +
                       std::string(to_string(desc.kind)) + ")");
    }
    desc.alpha = parse_real("--alpha", args.alpha);
  }
  if (!args.ceiling.empty()) {
    if (desc.kind != ActivationKind::clipped_relu) {
      throw UsageError("--ceiling '" + args.ceiling +
                       "': only --kind clipped_relu takes a ceiling (got --kind " +
                       std::string(to_string(desc.kind)) + ")");
    }
    desc.ceiling = parse_real("--ceiling", args.ceiling);
  }
  desc.saved = parse_with("--saved", args.saved,
                          [](std::string_view value) { return parse_activation_saved(value); });
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

std::string desc_text(const ActivationDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const ActivationDesc desc = parse_activation(args.act);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.dtype);
  return print_algos(
      "act", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return activation_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const ActivationDesc desc = parse_activation(args.act);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json, [&](Direction direction) {
    return activation_profile(context, desc, direction);
  });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command.add_option("--direction", args.direction, "fwd | bwd | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_activation_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "act", "candidates of an activation: id, support status or reason, workspace, determinism");
  auto list_args = std::make_shared<CommandArgs>();
  add_activation_options(*list, list_args->act);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time = profile.add_subcommand(
      "act", "time every candidate of an activation, per direction, sorted by median time");
  auto time_args = std::make_shared<CommandArgs>();
  add_activation_options(*time, time_args->act);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
