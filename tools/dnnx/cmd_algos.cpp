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
  nlohmann::json document = nlohmann::json::array();
  bool first = true;
  for (const Direction direction : directions) {
    const std::vector<AlgoInfo> algos = conv_list(context, desc, direction);
    if (args.json) {
      nlohmann::json algos_json = nlohmann::json::array();
      for (const AlgoInfo& algo : algos) algos_json.push_back(to_json(algo));
      document.push_back({{"op", "conv"},
                          {"direction", to_string(direction)},
                          {"desc", desc_text.str()},
                          {"repro", desc.repro(direction)},
                          {"backend", to_string(context.backend())},
                          {"algos", algos_json}});
      continue;
    }
    if (!first) std::cout << '\n';
    first = false;
    std::cout << "conv " << to_string(direction) << " on " << to_string(context.backend()) << ": "
              << desc_text.str() << '\n'
              << format_algo_table(algos);
  }
  if (args.json) std::cout << document.dump(2) << '\n';
  return 0;
}

}  // namespace

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
