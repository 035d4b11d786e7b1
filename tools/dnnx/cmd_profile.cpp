// `dnnx profile conv ...`: times every candidate of each direction (the seed's "FwdAlgorithms
// profile results" table).

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

struct ProfileArgs {
  ConvArgs conv;
  BackendArgs backend;
  SelectionArgs selection;
  std::string direction = "all";
  bool json = false;
};

int run_profile(const ProfileArgs& args) {
  const ConvDesc desc = parse_conv(args.conv);
  const std::vector<Direction> directions = parse_directions("--direction", args.direction);
  const BackendChoice backend = parse_backend_args(args.backend);
  const Selection selection = parse_selection(args.selection);
  Context context = make_context(backend, desc.dtype);
  selection.apply(context.tune());

  return print_profiles(directions, args.json, [&](Direction direction) {
    return conv_profile(context, desc, direction);
  });
}

}  // namespace

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
                   const std::function<ProfileResult(Direction)>& profile) {
  nlohmann::json document = nlohmann::json::array();
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
    if (json) {
      document.push_back(nlohmann::json::parse(result.json()));
      continue;
    }
    if (!first) std::cout << '\n';
    first = false;
    std::cout << result.table() << std::flush;
  }
  if (json) std::cout << document.dump(2) << '\n';
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
  CLI::App* conv = profile->add_subcommand(
      "conv", "time every candidate of a convolution, per direction, sorted by median time");
  auto args = std::make_shared<ProfileArgs>();
  add_conv_options(*conv, args->conv);
  add_backend_options(*conv, args->backend);
  add_selection_options(*conv, args->selection);
  conv->add_option("--direction", args->direction,
                   "fwd | bwd_data | bwd_weights | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  conv->add_flag("--json", args->json, "print a JSON array, one profile per direction");
  conv->callback([&action, args] { action = [args] { return run_profile(*args); }; });
}

}  // namespace dnnx::cli
