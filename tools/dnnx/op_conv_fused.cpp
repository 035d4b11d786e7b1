// Scaffolding: replaced by the op's subcommands (issue 3, fused convolution).

#include "commands.hpp"

namespace dnnx::cli {

void add_conv_fused_commands(CLI::App&, CLI::App&, Action&) {}

}  // namespace dnnx::cli
