// `dnnx algos conv ...`: every candidate of each direction, before anything runs.

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

struct AlgosArgs {
  ConvArgs conv;
  BackendArgs backend;
  std::string direction = "all";
  bool json = false;
};

nlohmann::json to_json(const AlgoInfo& algo) {
  return {{"id", algo.id},
          {"name", algo.name},
          {"supported", algo.supported},
          {"reason", algo.reason},
          {"workspace_bytes", algo.workspace_bytes},
          {"deterministic", algo.deterministic},
          {"notes", algo.notes},
          {"families", algo.families},
          {"priority", algo.priority}};
}

int run_algos(const AlgosArgs& args) {
  const ConvDesc desc = parse_conv(args.conv);
  const std::vector<Direction> directions = parse_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  Context context = make_context(backend, desc.dtype);
  std::ostringstream desc_text;
  desc_text << desc;
  return print_algos(
      "conv", desc_text.str(), context, directions, args.json,
      [&](Direction direction) { return conv_list(context, desc, direction); },
      [&](Direction direction) { return desc.repro(direction); });
}

}  // namespace

int print_algos(std::string_view op, std::string_view desc_text, Context& context,
                const std::vector<Direction>& directions, bool json,
                const std::function<std::vector<AlgoInfo>(Direction)>& list,
                const std::function<std::string(Direction)>& repro) {
  nlohmann::json document = nlohmann::json::array();
  bool first = true;
  for (const Direction direction : directions) {
    const std::vector<AlgoInfo> algos = list(direction);
    if (json) {
      nlohmann::json algos_json = nlohmann::json::array();
      for (const AlgoInfo& algo : algos) algos_json.push_back(to_json(algo));
      document.push_back({{"op", op},
                          {"direction", to_string(direction)},
                          {"desc", desc_text},
                          {"repro", repro(direction)},
                          {"backend", to_string(context.backend())},
                          {"algos", algos_json}});
      continue;
    }
    if (!first) std::cout << '\n';
    first = false;
    std::cout << op << ' ' << to_string(direction) << " on " << to_string(context.backend())
              << ": " << desc_text << '\n'
              << format_algo_table(algos);
  }
  if (json) std::cout << document.dump(2) << '\n';
  return 0;
}

void add_algos_command(CLI::App& app, Action& action) {
  CLI::App* algos =
      app.add_subcommand("algos", "list the candidate algorithms of an op (nothing is run)");
  algos->require_subcommand(1);
  CLI::App* conv = algos->add_subcommand(
      "conv", "candidates of a convolution: id, support status or reason, workspace, determinism");
  auto args = std::make_shared<AlgosArgs>();
  add_conv_options(*conv, args->conv);
  add_backend_options(*conv, args->backend);
  conv->add_option("--direction", args->direction,
                   "fwd | bwd_data | bwd_weights | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  conv->add_flag("--json", args->json, "print a JSON array, one entry per direction");
  conv->callback([&action, args] { action = [args] { return run_algos(*args); }; });
}

}  // namespace dnnx::cli
