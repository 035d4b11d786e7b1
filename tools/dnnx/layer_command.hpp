#pragma once
// The `dnnx algos <op>` and `dnnx profile <op>` subcommands of every op have the same shape: the
// op's own flags, --backend/--device, --direction (the op's directions, from the op table, or
// all), --json, and under profile the selection flags. An op describes its flags and how a parsed
// desc is listed and profiled (LayerCommand); add_layer_commands builds both subcommands from that.

#include "commands.hpp"

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::cli {

/// A desc parsed from an op's flags, reduced to what the two subcommands do with it.
struct ParsedLayer {
  std::string desc_text;  ///< the desc as operator<< prints it
  DType dtype = DType::f32;
  std::function<std::vector<AlgoInfo>(Context&, Direction)> list;
  std::function<ProfileResult(Context&, Direction)> profile;
  /// The candidate the op's selection picks for `direction` under the context's policies (the
  /// op's `select` call, e.g. conv_select).
  std::function<std::string(Context&, Direction)> select;
  std::function<std::string(Direction)> repro;
  /// Whether `--direction all` takes a direction of the op for this desc (unset: every one), e.g.
  /// a matmul's fwd_training only with an activation.
  std::function<bool(Direction)> has_direction;
};

/// The directions `--direction` names, less those `parsed` does not have when it says "all".
inline std::vector<Direction> directions_of(OpKind op, const ParsedLayer& parsed,
                                            const std::string& text) {
  std::vector<Direction> directions = parse_directions(op, "--direction", text);
  if (text != "all" || !parsed.has_direction) return directions;
  std::erase_if(directions, [&](Direction d) { return !parsed.has_direction(d); });
  return directions;
}

/// The parsed form of any desc with operator<< and repro(), whose tensors are of `dtype`, listed,
/// profiled and selected by the op's `list`, `profile` and `select` calls (e.g. conv_list,
/// conv_profile, conv_select).
template <typename Desc, typename List, typename Profile, typename Select>
ParsedLayer parsed_layer(Desc desc, DType dtype, List list, Profile profile, Select select) {
  std::ostringstream text;
  text << desc;
  ParsedLayer parsed;
  parsed.desc_text = text.str();
  parsed.dtype = dtype;
  parsed.list = [desc, list](Context& context, Direction direction) {
    return list(context, desc, direction);
  };
  parsed.profile = [desc, profile](Context& context, Direction direction) {
    return profile(context, desc, direction);
  };
  parsed.select = [desc, select](Context& context, Direction direction) {
    return select(context, desc, direction)->algo.id;
  };
  parsed.repro = [desc](Direction direction) { return desc.repro(direction); };
  return parsed;
}

/// One op's subcommands. `OpArgs` holds its flags exactly as typed.
template <typename OpArgs>
struct LayerCommand {
  OpKind op;                 ///< the op (its table name is the subcommand)
  std::string algos_help;    ///< help line under `dnnx algos`
  std::string profile_help;  ///< help line under `dnnx profile`
  std::function<void(CLI::App&, OpArgs&)> add_options;  ///< the op's own flags
  /// The desc the flags describe; throws UsageError for a malformed flag, dnnx::Error for a desc
  /// the library rejects.
  std::function<ParsedLayer(const OpArgs&)> parse;
};

/// Adds the subcommand `to_string(command.op)` under `algos` and under `profile`.
template <typename OpArgs>
void add_layer_commands(CLI::App& algos, CLI::App& profile, Action& action,
                        LayerCommand<OpArgs> command) {
  struct Args {
    OpArgs op;
    BackendArgs backend;
    SelectionArgs selection;
    std::string direction = "all";
    bool json = false;
    std::string plot;
    bool energy = false;
  };
  auto shared = std::make_shared<LayerCommand<OpArgs>>(std::move(command));
  auto add_common = [&shared](CLI::App& sub, Args& args, const char* json_help) {
    shared->add_options(sub, args.op);
    add_backend_options(sub, args.backend);
    sub.add_option("--direction", args.direction, direction_help(shared->op))
        ->type_name("DIR")
        ->capture_default_str();
    sub.add_flag("--json", args.json, json_help);
  };

  const std::string name(to_string(shared->op));
  CLI::App* list = algos.add_subcommand(name, shared->algos_help);
  auto list_args = std::make_shared<Args>();
  add_common(*list, *list_args, "print a JSON array, one entry per direction");
  list->callback([&action, shared, list_args] {
    action = [shared, list_args] {
      const Args& args = *list_args;
      const ParsedLayer parsed = shared->parse(args.op);
      const std::vector<Direction> directions = directions_of(shared->op, parsed, args.direction);
      Context context = make_context(parse_backend_args(args.backend), parsed.dtype);
      return print_algos(
          to_string(shared->op), parsed.desc_text, context, directions, args.json,
          [&](Direction direction) { return parsed.list(context, direction); }, parsed.repro);
    };
  });

  CLI::App* time = profile.add_subcommand(name, shared->profile_help);
  // The op table's other spellings ("convolution", "linear", ...) name the same subcommands.
  for (std::string_view rest = op_info(shared->op).aliases; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string alias(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (alias.empty()) continue;
    list->alias(alias);
    time->alias(alias);
  }
  auto time_args = std::make_shared<Args>();
  add_common(*time, *time_args, "print a JSON array, one profile per direction");
  add_selection_options(*time, time_args->selection);
  time->add_option("--plot", time_args->plot,
                   "also draw the profiles as SVG in FILE: time against workspace per candidate, "
                   "the Pareto front, the chosen and the heuristic pick, the reasons of those "
                   "that did not run")
      ->type_name("FILE.svg");
  time->add_flag("--energy", time_args->energy,
                 "also measure every timed candidate's energy per call on the device's counter "
                 "(NVML on a GPU): loops of --energy-window-ms, --energy-repeats times each");
  time->callback([&action, shared, time_args] {
    action = [shared, time_args] {
      const Args& args = *time_args;
      const ParsedLayer parsed = shared->parse(args.op);
      const std::vector<Direction> directions = directions_of(shared->op, parsed, args.direction);
      const BackendChoice backend = parse_backend_args(args.backend);
      const Selection selection = parse_selection(args.selection);
      // Opened before anything is timed, so that a path that cannot be written fails at once.
      OutputFile plot = args.plot.empty() ? OutputFile() : OutputFile("--plot", args.plot);
      Context context = make_context(backend, parsed.dtype);
      selection.apply(context.tune());
      context.tune().profile_energy = args.energy;
      const OpKind op = shared->op;
      return print_profiles(
          directions, args.json,
          [&](Direction direction) { return parsed.profile(context, direction); }, &plot,
          [&](Direction direction) {
            Context heuristic = context;
            heuristic.tune().policy(op, direction) = AlgoPolicy::heuristic();
            return parsed.select(heuristic, direction);
          });
    };
  });
}

}  // namespace dnnx::cli
