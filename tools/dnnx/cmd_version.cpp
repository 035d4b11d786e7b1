#include "commands.hpp"

#include <iostream>

namespace dnnx::cli {
namespace {

int run_version() {
  std::cout << "dnnx " << version() << '\n';
  for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
    std::string why;
    std::cout << "  " << to_string(kind) << ": ";
    if (backend_available(kind, &why))
      std::cout << backend_version(kind) << '\n';
    else
      std::cout << "unavailable (" << why << ")\n";
  }
  std::cout << "  auto: " << to_string(resolve_backend(BackendKind::automatic)) << '\n';
  return 0;
}

}  // namespace

void add_version_command(CLI::App& app, Action& action) {
  CLI::App* command =
      app.add_subcommand("version", "dnnx's version and the library version of each backend");
  command->callback([&action] { action = run_version; });
}

}  // namespace dnnx::cli
