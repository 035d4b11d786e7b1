// `dnnx algos xent ...` and `dnnx profile xent ...`: the candidates of a cross-entropy loss, and
// their times. Every CrossEntropyDesc::repro() line parses here.

#include <dnnx/ops/cross_entropy.hpp>

#include "commands.hpp"

#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

// The description of one cross-entropy, exactly as typed.
struct XentArgs {
  std::string input;
  std::string reduction = "mean";
  std::string ignore_index = "-100";
  bool weighted = false;
  std::string label_dtype = "i64";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct CommandArgs {
  XentArgs xent;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

void add_xent_options(CLI::App& command, XentArgs& args) {
  command
      .add_option("--input", args.input,
                  "logits dims N x C [x spatial...] (rank 2 to 5), e.g. 64x1000 or 8x21x64x64")
      ->type_name("NxC[xHxW]")
      ->required();
  command.add_option("--reduction", args.reduction, "none | mean | sum")
      ->type_name("MODE")
      ->capture_default_str();
  command
      .add_option("--ignore-index", args.ignore_index,
                  "label value of positions that contribute nothing (PyTorch's default -100)")
      ->type_name("INT")
      ->capture_default_str();
  command.add_flag("--weighted", args.weighted, "per-class f32 weights are given");
  command.add_option("--label-dtype", args.label_dtype, "i32 | i64")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "dtype of logits and loss: f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

CrossEntropyDesc parse_xent(const XentArgs& args) {
  CrossEntropyDesc desc;
  desc.dims = parse_dims("--input", args.input);
  if (desc.dims.rank() < 2 || desc.dims.rank() > 5) {
    throw UsageError("--input '" + args.input +
                     "': expected rank 2 to 5 (N x C and 0 to 3 spatial dims), got rank " +
                     std::to_string(desc.dims.rank()));
  }
  desc.reduction = parse_with("--reduction", args.reduction,
                              [](std::string_view value) { return parse_reduction(value); });
  desc.ignore_index =
      parse_int("--ignore-index", args.ignore_index, std::numeric_limits<std::int64_t>::min(),
                std::numeric_limits<std::int64_t>::max());
  desc.weighted = args.weighted;
  desc.label_dtype = parse_dtype_arg("--label-dtype", args.label_dtype);
  if (desc.label_dtype != DType::i32 && desc.label_dtype != DType::i64) {
    throw UsageError("--label-dtype '" + args.label_dtype +
                     "': labels are class indices; accepted: i32, i64");
  }
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  if (!is_floating(desc.dtype)) {
    throw UsageError("--dtype '" + args.dtype + "': logits take f32, f16 or bf16");
  }
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

std::string desc_text(const CrossEntropyDesc& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

int run_algos(const CommandArgs& args) {
  const CrossEntropyDesc desc = parse_xent(args.xent);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  Context context = make_context(parse_backend_args(args.backend), desc.dtype);
  return print_algos(
      "xent", desc_text(desc), context, directions, args.json,
      [&](Direction direction) { return cross_entropy_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

int run_profile(const CommandArgs& args) {
  const CrossEntropyDesc desc = parse_xent(args.xent);
  const std::vector<Direction> directions = parse_layer_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());
  return print_profiles(directions, args.json, [&](Direction direction) {
    return cross_entropy_profile(context, desc, direction);
  });
}

void add_direction_options(CLI::App& command, CommandArgs& args, const char* json_help) {
  command.add_option("--direction", args.direction, "fwd | bwd | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  command.add_flag("--json", args.json, json_help);
}

}  // namespace

void add_cross_entropy_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  CLI::App* list = algos.add_subcommand(
      "xent",
      "candidates of a cross-entropy loss (log-softmax + NLL over the channels): id, support "
      "status or reason, workspace, determinism");
  auto list_args = std::make_shared<CommandArgs>();
  add_xent_options(*list, list_args->xent);
  add_backend_options(*list, list_args->backend);
  add_direction_options(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, list_args] { action = [list_args] { return run_algos(*list_args); }; });

  CLI::App* time =
      profile.add_subcommand("xent", "time every candidate of a cross-entropy loss, per direction");
  auto time_args = std::make_shared<CommandArgs>();
  add_xent_options(*time, time_args->xent);
  add_backend_options(*time, time_args->backend);
  add_selection_options(*time, time_args->selection);
  add_direction_options(*time, *time_args, "print a JSON array, one profile per direction");
  time->callback(
      [&action, time_args] { action = [time_args] { return run_profile(*time_args); }; });
}

}  // namespace dnnx::cli
