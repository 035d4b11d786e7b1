// dnnx: list, profile and tune the algorithms of dnnx ops from the command line.

#include "commands.hpp"
#include "output.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

// Messages go out on one line whatever the library put in them, so scripts can grep them.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// CLI11 says "A subcommand is required" for both a missing and a misspelt subcommand; name the
// command, what was typed and what is accepted instead.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error) {
  const std::string what = error.what();
  if (what != "A subcommand is required") return what + " (see --help)";
  const CLI::App* command = &app;
  std::string path = command->get_name();
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    path += " " + command->get_name();
  }
  std::vector<std::string> names;
  for (const CLI::App* sub : command->get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  const std::string accepted = dnnx::cli::join(names, ", ");
  const std::vector<std::string> typed = command->remaining();
  if (!typed.empty())
    return path + ": unknown subcommand '" + typed.front() + "'; accepted: " + accepted;
  return path + ": a subcommand is required; accepted: " + accepted + " (see --help)";
}

// CLI11 gives an option that takes a value the next word even when that word is another flag, so
// `--stride --pad 1` set the stride to "--pad" and then failed on the stray "1" without naming
// --stride. No value of a dnnx option starts with "--": such a value is a forgotten one, reported
// naming the option (this runs before CLI11's check for stray words).
void reject_flags_as_values(CLI::App& command) {
  for (CLI::Option* option : command.get_options()) {
    if (option->get_positional() || option->get_expected_min() < 1) continue;  // flags, operands
    const std::string type = option->get_type_name();
    option->check(CLI::Validator(
        [type](std::string& value) -> std::string {
          if (value.rfind("--", 0) != 0) return {};
          return "expected a value (" + type + ") but got the flag '" + value + "'";
        },
        "", "value, not a flag"));
  }
  for (CLI::App* sub : command.get_subcommands([](const CLI::App*) { return true; }))
    reject_flags_as_values(*sub);
}

// Note [write errors]
// Output that did not reach stdout (a full disk, a closed pipe, /dev/full) is a failure: the
// command exits 1 with a message naming stdout rather than 0 with a truncated table or JSON.
// Writes are buffered, so the error shows when stdout is flushed at the end.
int check_stdout(int status) {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && std::cout.good() && std::ferror(stdout) == 0) return status;
  std::cerr << "dnnx: writing to stdout failed"
            << (error != 0 ? std::string(": ") + std::strerror(error) : std::string())
            << "; the output is incomplete\n";
  return status == 0 ? dnnx::cli::failure_exit_code : status;
}

int run(int argc, char** argv) {
  using namespace dnnx::cli;
  CLI::App app{
      "dnnx: deep-learning primitives with algorithm selection.\n"
      "List, profile and tune the candidate algorithms of dnnx ops.",
      "dnnx"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(dnnx::version()));
  Action action;
  add_algos_command(app, action);
  add_profile_command(app, action);
  {
    CLI::App& algos = *app.get_subcommand("algos");
    CLI::App& profile = *app.get_subcommand("profile");
#define DNNX_CLI_ADD_COMMANDS(kind, ...) add_##kind##_commands(algos, profile, action);
    DNNX_OP_TABLE(DNNX_CLI_ADD_COMMANDS)
#undef DNNX_CLI_ADD_COMMANDS
  }
  add_tune_command(app, action);
  add_version_command(app, action);
  add_cache_command(app, action);
  add_train_command(app, action);
  add_pictures_commands(app, action);
  reject_flags_as_values(app);

  try {
    app.parse(argc, argv);
    return check_stdout(action());
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return check_stdout(app.exit(error));  // --help / --version
    std::cerr << "dnnx: " << one_line(parse_error_message(app, error)) << '\n';
    return usage_exit_code;
  } catch (const UsageError& error) {
    std::cerr << "dnnx: " << one_line(error.what()) << '\n';
    return usage_exit_code;
  } catch (const dnnx::Error& error) {
    std::cerr << "dnnx: " << one_line(error.what()) << '\n';
    return error.kind() == dnnx::ErrorKind::InvalidArgument ? usage_exit_code : failure_exit_code;
  } catch (const std::exception& error) {
    std::cerr << "dnnx: internal error: " << one_line(error.what()) << '\n';
    return failure_exit_code;
  }
}

}  // namespace

// Setting up the parser or reporting an error can itself throw (allocation); never let that
// escape as std::terminate.
int main(int argc, char** argv) {
  int code = dnnx::cli::failure_exit_code;
  try {
    code = run(argc, argv);
  } catch (...) {
    std::fputs("dnnx: internal error while reporting an error\n", stderr);
  }
  dnnx::stop_background_work();  // before exit destroys what a running compile uses
  return code;
}
