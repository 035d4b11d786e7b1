// `dnnx algos add ...` and `dnnx profile add ...`: the candidates of a broadcasting tensor add,
// and their times. Every AddDesc::repro() line parses here.

#include <dnnx/ops/add.hpp>

#include "commands.hpp"

#include <charconv>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The description of one add, exactly as typed.
struct AddArgs {
  std::string src;
  std::string dst;
  std::string alpha = "1";
  std::string beta = "1";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct CommandArgs {
  AddArgs add;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

void add_add_options(CLI::App& command, AddArgs& args) {
  command.add_option("--src", args.src, "src dims: each equal to dst's or 1 (e.g. 1x256x1x1)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--dst", args.dst, "dst dims, rank 1 to 5 (N x C x spatial...)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--alpha", args.alpha, "scale of src")->type_name("A")->capture_default_str();
  command.add_option("--beta", args.beta, "scale of dst's previous contents (0: dst is not read)")
      ->type_name("B")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

// A real number in f32 (the desc's validation judges the value); throws UsageError.
float parse_real(std::string_view flag, std::string_view text) {
  float value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + " '" + std::string(text) +
                     "': expected a number (e.g. 1, 0.5, -2e-1)");
  }
  return value;
}

AddDesc parse_add(const AddArgs& args) {
  AddDesc desc;
  desc.src_dims = parse_dims("--src", args.src);
  desc.dst_dims = parse_dims("--dst", args.dst);
  desc.alpha = parse_real("--alpha", args.alpha);
  desc.beta = parse_real("--beta", args.beta);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

std::string desc_text(const AddDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const AddDesc desc = parse_add(args.add);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.dtype);
  return print_algos(
      "add", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return add_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const AddDesc desc = parse_add(args.add);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json,
                        [&](Direction direction) { return add_profile(context, desc, direction); });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command.add_option("--direction", args.direction, "fwd | bwd | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_add_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "add", "candidates of a broadcasting tensor add: id, support status or reason, workspace");
  auto list_args = std::make_shared<CommandArgs>();
  add_add_options(*list, list_args->add);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time = profile.add_subcommand(
      "add", "time every candidate of a broadcasting tensor add, per direction, by median time");
  auto time_args = std::make_shared<CommandArgs>();
  add_add_options(*time, time_args->add);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
