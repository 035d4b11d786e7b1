// `dnnx profile conv ...`: times every candidate of each direction (the seed's "FwdAlgorithms
// profile results" table).

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

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

int print_profiles(const std::vector<Direction>& directions, bool json,
                   const std::function<ProfileResult(Direction)>& profile) {
  nlohmann::json document = nlohmann::json::array();
  bool first = true;
  for (const Direction direction : directions) {
    const ProfileResult result = profile(direction);
    if (json) {
      document.push_back(nlohmann::json::parse(result.json()));
      continue;
    }
    if (!first) std::cout << '\n';
    first = false;
    std::cout << result.table() << std::flush;
  }
  if (json) std::cout << document.dump(2) << '\n';
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
