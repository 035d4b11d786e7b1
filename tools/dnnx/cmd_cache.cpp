// `dnnx cache show|stats|export FILE|import FILE|clear|prune`: the persistent choice cache and
// the saved plans next to it.

#include <dnnx/saved_plans.hpp>

#include "commands.hpp"
#include "output.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>

namespace dnnx::cli {
namespace {

struct CacheArgs {
  std::string file;         // --file; default $DNNX_CACHE_FILE, else the default path
  std::string max_entries;  // prune --max
  std::string path;         // export / import FILE
  bool json = false;        // show --json
};

// The cache the command works on: the file the library would use, or --file. Commands that only
// read open it read-only so they can never modify it. The user asked for this file, so a file
// that cannot be used is an error naming it, not a warning.
ChoiceCache open_cache(const CacheArgs& args, CacheMode mode) {
  CacheFileOptions options = CacheFileOptions::from_env();
  if (!args.file.empty()) options.path = args.file;
  options.mode = mode;
  options.on_problem = FileProblem::raise;
  return ChoiceCache(options);
}

// The saved plans that go with the cache file (DNNX_PLAN_DIR, else "<file>.plans").
SavedPlans plans_of(const ChoiceCache& cache) {
  CacheFileOptions options = cache.file_options();
  options.mode = CacheMode::readwrite;  // the folder exists whatever this command's mode
  return saved_plans(options);
}

std::string plans_line(const SavedPlans& plans) {
  if (plans.folder.empty()) return "saved plans: none (DNNX_PLAN_DIR is off)\n";
  return "saved plans " + plans.folder + ": " + std::to_string(plans.files) + " (" +
         format_bytes(plans.bytes) + ")\n";
}

std::string date_text(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &utc);
  return text;
}

// Current fingerprints of the backends usable here: an entry under another one is foreign.
std::map<std::string, std::string> local_fingerprints() {
  std::map<std::string, std::string> out;
  for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
    if (!backend_available(kind)) continue;
    try {
      out[std::string(to_string(kind))] = Context(kind).fingerprint();
    } catch (const Error&) {
      // A backend that cannot start here has no local fingerprint: its entries count as foreign.
    }
  }
  return out;
}

bool is_local(const Choice& choice, const std::map<std::string, std::string>& local) {
  const auto it = local.find(choice.backend);
  return it != local.end() && it->second == choice.fingerprint;
}

int run_show(const CacheArgs& args) {
  const ChoiceCache cache = open_cache(args, CacheMode::read);
  const auto entries = cache.entries();
  const auto local = local_fingerprints();
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [key, choice] : entries) {
      nlohmann::json entry = {
          {"key", key},
          {"backend", choice->backend},
          {"algo", choice->algo.id},
          {"time_ms",
           std::isnan(choice->time_ms) ? nlohmann::json() : nlohmann::json(choice->time_ms)},
          {"workspace_bytes", choice->algo.workspace_bytes},
          {"runner_up", choice->runner_up},
          {"late_plans", choice->late_plans},
          {"measured_at", choice->measured_at},
          {"local", is_local(*choice, local)}};
      // The energy policies' entries (docs/energy.md): the chosen candidate's joules per call,
      // the counter read (or why none was), and what time alone would have kept.
      if (!choice->energy_meter.empty()) {
        entry["energy_j"] =
            std::isnan(choice->energy_j) ? nlohmann::json() : nlohmann::json(choice->energy_j);
        entry["energy_meter"] = choice->energy_meter;
        entry["energy_fastest"] = choice->energy_fastest.empty()
                                      ? nlohmann::json()
                                      : nlohmann::json(choice->energy_fastest);
      }
      out.push_back(std::move(entry));
    }
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  std::cout << "choice cache " << cache.file_options().path << ": " << entries.size()
            << " entries\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, choice] : entries) {
    rows.push_back({choice->op + " " + std::string(to_string(choice->direction)), choice->backend,
                    choice->algo.id, format_ms(choice->time_ms),
                    format_bytes(choice->algo.workspace_bytes),
                    choice->runner_up.empty() ? "-" : choice->runner_up,
                    date_text(choice->measured_at), is_local(*choice, local) ? "yes" : "no", key});
  }
  std::cout << format_table(
      {"op", "backend", "chosen", "ms", "workspace", "runner-up", "measured", "here", "key"}, rows,
      {3, 4});
  std::cout << plans_line(plans_of(cache));
  return 0;
}

int run_stats(const CacheArgs& args) {
  const ChoiceCache cache = open_cache(args, CacheMode::read);
  const auto entries = cache.entries();
  const auto local = local_fingerprints();
  std::map<std::pair<std::string, std::string>, std::size_t> by_fingerprint;
  for (const auto& [key, choice] : entries)
    ++by_fingerprint[{choice->backend, choice->fingerprint}];
  const CacheFileStats stats = cache.file_stats();
  std::cout << "file: " << stats.path << '\n'
            << "mode for this process: " << to_string(CacheFileOptions::from_env().mode) << '\n'
            << "entries: " << entries.size() << " (bound " << cache.file_options().max_entries
            << ", least recently used dropped first)\n";
  if (stats.set_aside > 0) std::cout << "unreadable file set aside: yes\n";
  if (stats.dropped > 0) std::cout << "malformed entries skipped: " << stats.dropped << '\n';
  std::cout << plans_line(plans_of(cache));
  std::vector<std::vector<std::string>> rows;
  for (const auto& [group, count] : by_fingerprint) {
    const auto it = local.find(group.first);
    const bool here = it != local.end() && it->second == group.second;
    rows.push_back(
        {group.first, std::to_string(count), here ? "applies here" : "ignored here", group.second});
  }
  std::cout << format_table({"backend", "entries", "status", "fingerprint"}, rows, {1});
  return 0;
}

int run_export(const CacheArgs& args) {
  const ChoiceCache cache = open_cache(args, CacheMode::read);
  const std::size_t n = cache.export_file(args.path);
  std::cout << "exported " << n << " entries to " << args.path << '\n';
  return 0;
}

int run_import(const CacheArgs& args) {
  ChoiceCache cache = open_cache(args, CacheMode::readwrite);
  const std::size_t n = cache.import_file(args.path);
  std::cout << "imported " << n << " entries from " << args.path << " into "
            << cache.file_options().path << " (now " << cache.size() << " entries)\n";
  return 0;
}

int run_clear(const CacheArgs& args) {
  ChoiceCache cache = open_cache(args, CacheMode::readwrite);
  const std::size_t before = cache.size();
  cache.clear_file();
  std::cout << "cleared " << before << " entries from " << cache.file_options().path << '\n';
  // Plans were saved for those choices: they go too.
  CacheFileOptions options = cache.file_options();
  const SavedPlans plans = saved_plans(options);
  if (!plans.folder.empty()) {
    std::cout << "cleared " << clear_saved_plans(options) << " saved plans from " << plans.folder
              << '\n';
  }
  return 0;
}

int run_prune(const CacheArgs& args) {
  ChoiceCache cache = open_cache(args, CacheMode::readwrite);
  const auto max_entries = static_cast<std::size_t>(
      args.max_entries.empty()
          ? static_cast<std::int64_t>(cache.file_options().max_entries)
          : parse_int("--max", args.max_entries, 1, std::numeric_limits<std::int64_t>::max()));
  const std::size_t dropped = cache.prune(max_entries);
  std::cout << "pruned " << dropped << " least recently used entries; " << cache.size()
            << " remain (bound " << max_entries << ")\n";
  return 0;
}

}  // namespace

void add_cache_command(CLI::App& app, Action& action) {
  CLI::App* cache =
      app.add_subcommand("cache",
                         "the persistent choice cache (file: --file, else $DNNX_CACHE_FILE, else "
                         "$XDG_CACHE_HOME/dnnx/tune-v1.json)");
  cache->require_subcommand(1);
  auto args = std::make_shared<CacheArgs>();
  cache->add_option("--file", args->file, "the cache file to work on")->type_name("FILE");

  CLI::App* show = cache->add_subcommand("show", "list every entry: choice, time, runner-up, key");
  show->add_flag("--json", args->json, "as JSON");
  show->callback([&action, args] { action = [args] { return run_show(*args); }; });

  cache->add_subcommand("stats", "entries per backend and fingerprint, and which apply here")
      ->callback([&action, args] { action = [args] { return run_stats(*args); }; });

  CLI::App* export_command =
      cache->add_subcommand("export", "write every entry to FILE (to ship to same-kind machines)");
  export_command->add_option("FILE", args->path, "destination")->required();
  export_command->callback([&action, args] { action = [args] { return run_export(*args); }; });

  CLI::App* import_command =
      cache->add_subcommand("import", "merge the entries of FILE (newer measurement wins)");
  import_command->add_option("FILE", args->path, "an exported cache file")->required();
  import_command->callback([&action, args] { action = [args] { return run_import(*args); }; });

  cache->add_subcommand("clear", "remove every entry and the saved plans that go with them")
      ->callback([&action, args] { action = [args] { return run_clear(*args); }; });

  CLI::App* prune =
      cache->add_subcommand("prune", "keep the N most recently used entries (default: the bound)");
  prune->add_option("--max", args->max_entries, "entries to keep")->type_name("N");
  prune->callback([&action, args] { action = [args] { return run_prune(*args); }; });
}

}  // namespace dnnx::cli
