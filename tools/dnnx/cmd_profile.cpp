// `dnnx profile <op> ...`: times every candidate of each direction (the seed's "FwdAlgorithms
// profile results" table). The ops' own subcommands are added by add_<op>_commands (op_<op>.cpp).

#include "commands.hpp"
#include "output.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::cli {
namespace {

// "3 failed, 1 unsupported": how many rows of `result` ended in each status.
std::string status_counts(const ProfileResult& result) {
  std::map<std::string, int> counts;
  for (const ProfileRow& row : result.rows) ++counts[std::string(to_string(row.status))];
  std::vector<std::string> parts;
  for (const auto& [status, count] : counts) parts.push_back(std::to_string(count) + " " + status);
  return parts.empty() ? "no candidates" : join(parts, ", ");
}

}  // namespace

int print_profiles(const std::vector<Direction>& directions, bool json,
                   const std::function<ProfileResult(Direction)>& profile, OutputFile* plot,
                   const std::function<std::string(Direction)>& heuristic) {
  nlohmann::json document = nlohmann::json::array();
  std::vector<nlohmann::json> plotted;
  bool first = true;
  // A profile in which no candidate ran measured nothing: the command fails (after printing the
  // tables, whose rows say why each candidate did not run).
  std::vector<std::string> empty;
  for (const Direction direction : directions) {
    const ProfileResult result = profile(direction);
    const bool ran = std::any_of(result.rows.begin(), result.rows.end(), [](const ProfileRow& row) {
      return row.status == CandidateStatus::ok;
    });
    if (!ran) {
      empty.push_back(result.op + " " + std::string(to_string(direction)) + " (" +
                      status_counts(result) + ")");
    }
    // The JSON (printed, and what the plot is drawn from) names the heuristic's pick too.
    const bool drawn = plot != nullptr && plot->wanted();
    if (json || drawn) {
      nlohmann::json profiled = nlohmann::json::parse(result.json());
      profiled["heuristic"] = {{"id", nullptr}, {"error", nullptr}};
      try {
        if (heuristic) profiled["heuristic"]["id"] = heuristic(direction);
      } catch (const Error& error) {
        profiled["heuristic"]["error"] = error.message();
      }
      if (drawn) plotted.push_back(profiled);
      if (json) {
        document.push_back(std::move(profiled));
        continue;
      }
    }
    if (!first) std::cout << '\n';
    first = false;
    std::cout << result.table() << std::flush;
  }
  if (json) std::cout << document.dump(2) << '\n';
  if (plot != nullptr && plot->wanted() && !plot->write(profile_svg(plotted)))
    return failure_exit_code;
  if (!empty.empty()) {
    std::cerr << "dnnx: profile: no candidate ran for " << join(empty, "; ")
              << "; nothing was timed (see each candidate's status and reason)\n";
    return failure_exit_code;
  }
  return 0;
}

void add_profile_command(CLI::App& app, Action& action) {
  CLI::App* profile = app.add_subcommand("profile", "time every candidate algorithm of an op");
  profile->require_subcommand(1);
}

}  // namespace dnnx::cli
