// `dnnx algos <op> ...`: every candidate of each direction, before anything runs. The ops' own
// subcommands are added by add_<op>_commands (op_<op>.cpp).

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace dnnx::cli {
namespace {

nlohmann::json to_json(const AlgoInfo& algo) {
  return {{"id", algo.id},
          {"name", algo.name},
          {"supported", algo.supported},
          {"reason", algo.reason},
          {"workspace_bytes", algo.workspace_bytes},
          {"deterministic", algo.deterministic},
          {"notes", algo.notes},
          {"families", algo.families},
          {"priority", algo.priority},
          {"variant_of", algo.variant_of}};
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
}

}  // namespace dnnx::cli
