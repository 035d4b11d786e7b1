// Scaffolding: replaced by the op's subcommands (issue 4).

#include "commands.hpp"

namespace dnnx::cli {

void add_activation_commands(CLI::App&, CLI::App&, Action&) {}

}  // namespace dnnx::cli
