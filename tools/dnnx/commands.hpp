#pragma once
// The subcommands. Each adds itself to the app and, when it is the one given, stores in `action`
// what main runs once the whole command line has parsed.

#include "args.hpp"

#include <CLI/CLI.hpp>

namespace dnnx::cli {

void add_algos_command(CLI::App& app, Action& action);
void add_profile_command(CLI::App& app, Action& action);
void add_tune_command(CLI::App& app, Action& action);
void add_version_command(CLI::App& app, Action& action);
void add_cache_command(CLI::App& app, Action& action);

}  // namespace dnnx::cli
