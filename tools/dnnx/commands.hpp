#pragma once
// The subcommands. Each adds itself to the app and, when it is the one given, stores in `action`
// what main runs once the whole command line has parsed.

#include "args.hpp"
#include "pictures.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cli {

void add_algos_command(CLI::App& app, Action& action);
void add_profile_command(CLI::App& app, Action& action);
void add_tune_command(CLI::App& app, Action& action);
void add_version_command(CLI::App& app, Action& action);
void add_cache_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
/// `dnnx plot` and `dnnx report`: the pictures drawn again from saved JSON (cmd_pictures.cpp).
void add_pictures_commands(CLI::App& app, Action& action);

/// Prints `op`'s candidates for each direction as `dnnx algos` does: a table per direction, or
/// with `json` one JSON array (an entry per direction). Returns the exit status.
int print_algos(std::string_view op, std::string_view desc_text, Context& context,
                const std::vector<Direction>& directions, bool json,
                const std::function<std::vector<AlgoInfo>(Direction)>& list,
                const std::function<std::string(Direction)>& repro);
/// Prints one profile per direction as `dnnx profile` does (tables, or one JSON array). With a
/// `plot` file (pictures.hpp) it also draws them there as SVG, each with the pick of
/// `heuristic` (the heuristic policy's candidate id for a direction; it throws dnnx::Error when
/// there is none).
int print_profiles(const std::vector<Direction>& directions, bool json,
                   const std::function<ProfileResult(Direction)>& profile,
                   OutputFile* plot = nullptr,
                   const std::function<std::string(Direction)>& heuristic = {});

/// Every op's subcommands of `dnnx algos` and `dnnx profile` (tools/dnnx/op_<op>.cpp), one per
/// line of the op table: each adds `<op>` under both, with its own flags plus --backend/--device,
/// --direction and --json (and the selection flags under profile).
#define DNNX_CLI_DECLARE_COMMANDS(kind, ...) \
  void add_##kind##_commands(CLI::App& algos, CLI::App& profile, Action& action);
DNNX_OP_TABLE(DNNX_CLI_DECLARE_COMMANDS)
#undef DNNX_CLI_DECLARE_COMMANDS

}  // namespace dnnx::cli
