// ChoiceCache: choices in memory, optionally backed by a file shared by every process.

#include <dnnx/algo.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"
#include "tune/cache_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <unordered_map>

namespace dnnx {

constexpr std::array<detail::EnumName<CacheMode>, 3> cache_mode_names{{
    {CacheMode::off, "off", {"0", "none"}},
    {CacheMode::read, "read", {"readonly", "ro"}},
    {CacheMode::readwrite, "readwrite", {"rw", "on", "1"}},
}};

std::string_view to_string(CacheMode mode) { return detail::enum_name(cache_mode_names, mode); }

CacheMode parse_cache_mode(std::string_view text) {
  return detail::parse_enum(cache_mode_names, text, "cache mode", "off, read, readwrite");
}

std::string CacheFileOptions::default_path() {
  const std::string name = "tune-v" + std::to_string(schema_version) + ".json";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/')
    return std::string(xdg) + "/dnnx/" + name;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/dnnx/" + name;
  return "/tmp/dnnx-" + name;
}

CacheFileOptions CacheFileOptions::from_env() {
  CacheFileOptions options;
  options.path = default_path();
  auto value_of = [](const char* name) -> const char* {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  if (const char* mode = value_of("DNNX_CACHE")) {
    try {
      options.mode = parse_cache_mode(mode);
    } catch (const Error& error) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("environment variable DNNX_CACHE: ", error.message()));
    }
  }
  if (const char* path = value_of("DNNX_CACHE_FILE")) options.path = path;
  if (const char* max = value_of("DNNX_CACHE_MAX_ENTRIES")) {
    errno = 0;
    char* end = nullptr;
    const long long parsed = std::strtoll(max, &end, 10);
    DNNX_CHECK_ARG(errno == 0 && end != max && *end == '\0' && parsed >= 1,
                   "environment variable DNNX_CACHE_MAX_ENTRIES='", max,
                   "' is not an integer >= 1");
    options.max_entries = static_cast<std::size_t>(parsed);
  }
  return options;
}

namespace {

// Note [cache generations]: generations are drawn from one process-wide counter, so no two states
// of any two caches share a value; the op layer's fast path can then trust (address, generation)
// even if a cache is destroyed and another is allocated at the same address.
std::uint64_t next_generation() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

// Whether a choice goes to the file: fixed ids and families are the user's own words.
bool persisted(const Choice& choice) {
  return timed_policy(choice.policy.kind) || choice.policy.kind == PolicyKind::heuristic;
}

// How a write treats the file (Note [journal] in cache_file.cpp).
enum class Rewrite : std::uint8_t {
  when_due,  // append to the journal unless a compaction is cheap or due
  merge,     // compact now: file, journal and updates into one file
  replace,   // compact now, dropping what the file and journal hold
};

}  // namespace

struct ChoiceCache::Impl {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Choice>> entries;
  mutable std::atomic<std::uint64_t> hits{0};
  mutable std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> generation{next_generation()};

  // The persistent side (guarded by `mutex`).
  CacheFileOptions file{CacheMode::off, {}, 0};
  std::string target;  // file.path with symbolic links followed
  tune::FileRecords file_records;
  mutable tune::UseTimes used;  // key -> last use, not yet written
  // Keys whose file entry find() returned and the op layer has not re-validated yet (Note
  // [re-validating persisted choices] in src/ops/dispatch.cpp).
  mutable std::set<std::string> unvalidated;
  mutable std::mutex used_mutex;  // guards used, unvalidated and stats.applied
  CacheFileStats stats;
  std::optional<Error> problem;  // the first one fail() met; stats.problem is its message

  bool writable() const { return stats.in_force == CacheMode::readwrite; }

  // Whether an explicit request (import, prune, clear) changes the file: in readwrite mode, and
  // then it must be able to (Note [file problems]); other modes change the cache in memory only.
  bool explicit_write() const {
    if (file.mode != CacheMode::readwrite) return false;
    if (!writable()) throw *problem;
    return true;
  }

  // Note [file problems]: a file that cannot be read or written lowers the mode in force (to off,
  // or to read) and is reported once, so selection never fails because of the cache file. Explicit
  // requests (import, export, prune, clear, reload) and caches made with FileProblem::raise throw
  // instead, naming the path.
  void fail(CacheMode lowered, const Error& raw, bool explicit_request) {
    const Error error = tune::through_link(raw, file.path, target);
    if (explicit_request || file.on_problem == FileProblem::raise) throw error;
    stats.in_force = std::min(stats.in_force, lowered);
    if (!problem) {
      problem = error;
      stats.problem = error.message();
    }
    detail::warn_once(detail::cat(error.message(), "; ",
                                  lowered == CacheMode::off
                                      ? "the choice cache runs in memory only"
                                      : "new choices are kept in memory only"));
  }

  void report(const tune::ReadResult& result) {
    if (result.dropped.empty()) return;
    stats.dropped += result.dropped.size();
    detail::warn_once(detail::cat("tune cache file '", target, "': skipped ", result.dropped.size(),
                                  " malformed entries (", result.dropped.front(),
                                  result.dropped.size() > 1 ? "; ..." : "", ")"));
  }

  // Renames a corrupt file of ours aside (Note [whose file]). Exclusive lock held.
  void set_aside(const Error& why) {
    const std::string aside = tune::set_aside(target);
    ++stats.set_aside;
    detail::warn_once(
        detail::cat(why.message(), "; moved it to '", aside, "' and starting with an empty cache"));
  }

  // Reads the file into file_records. Readers change nothing; a readwrite cache sets a corrupt
  // file aside under the exclusive lock.
  void load(bool explicit_request) {
    tune::ReadResult result;
    try {
      target = tune::resolve_path(file.path);
      tune::FileLock lock(target, tune::FileLock::Kind::shared);
      result = tune::read_cache(target);
    } catch (const Error& error) {
      fail(CacheMode::off, error, explicit_request);
      return;
    }
    if (result.state == tune::FileState::corrupt && writable()) {
      try {
        tune::FileLock lock(target, tune::FileLock::Kind::exclusive);
        result = tune::read_cache(target);
        if (result.state == tune::FileState::corrupt) {
          set_aside(*result.problem);
          result.state = tune::FileState::missing;
        }
      } catch (const Error& error) {
        fail(CacheMode::off,
             Error(error.kind(),
                   detail::cat(result.problem->message(),
                               "; it is not used and cannot be set aside: ", error.message())),
             explicit_request);
        return;
      }
    }
    report(result);
    if (result.state == tune::FileState::corrupt) {
      fail(CacheMode::off,
           Error(result.problem->kind(), result.problem->message() +
                                             "; it is not used (a process that writes the cache "
                                             "sets it aside)"),
           explicit_request);
      return;
    }
    if (result.state == tune::FileState::unusable) {
      fail(CacheMode::off, *result.problem, explicit_request);
      return;
    }
    if (result.journal_state == tune::FileState::unusable && writable())
      fail(CacheMode::read, *result.journal_problem, explicit_request);
    tune::merge(file_records, result.records);
    stats.file_entries = file_records.size();
  }

  // Writes `updates` and the pending last-use times under the exclusive lock: appended to the
  // journal, or merged with the file and journal, pruned and written as a new file (Note
  // [journal]). A failure goes through fail(); the cache stays usable.
  void write(const tune::FileRecords& updates, Rewrite how, bool explicit_request) {
    if (!writable()) return;
    tune::UseTimes uses;
    {
      std::lock_guard used_lock(used_mutex);
      uses = used;
    }
    try {
      tune::FileLock lock(target, tune::FileLock::Kind::exclusive);
      tune::check_writable(target);
      const auto [file_bytes, journal_bytes] = tune::file_sizes(target);
      if (how == Rewrite::when_due && tune::prefer_journal(file_bytes, journal_bytes)) {
        tune::remove_orphans(target);
        tune::append_journal(target, updates, uses);
        tune::merge(file_records, updates);
        tune::apply_uses(file_records, uses);
      } else {
        tune::ReadResult current = tune::read_cache(target);
        report(current);
        if (current.state == tune::FileState::unusable) throw *current.problem;
        if (current.journal_state == tune::FileState::unusable) throw *current.journal_problem;
        if (current.state == tune::FileState::corrupt) set_aside(*current.problem);
        tune::FileRecords merged =
            how == Rewrite::replace ? tune::FileRecords{} : std::move(current.records);
        tune::merge(merged, updates);
        tune::apply_uses(merged, uses);
        tune::prune(merged, file.max_entries);
        tune::write_file(target, merged);
        tune::remove_journal(target);
        file_records = std::move(merged);
      }
    } catch (const Error& error) {
      fail(CacheMode::read, error, explicit_request);
      return;
    }
    {
      std::lock_guard used_lock(used_mutex);
      for (const auto& [key, when] : uses) {
        if (auto it = used.find(key); it != used.end() && it->second <= when) used.erase(it);
      }
    }
    ++stats.writes;
    stats.file_entries = file_records.size();
  }
};

ChoiceCache::ChoiceCache() : impl_(std::make_unique<Impl>()) {}

ChoiceCache::ChoiceCache(CacheFileOptions file) : impl_(std::make_unique<Impl>()) {
  DNNX_CHECK_ARG(file.mode == CacheMode::off || !file.path.empty(), "a cache file in mode ",
                 to_string(file.mode), " needs a path");
  DNNX_CHECK_ARG(file.max_entries >= 1, "cache max_entries must be >= 1, got ", file.max_entries);
  impl_->file = std::move(file);
  impl_->target = impl_->file.path;
  impl_->stats.path = impl_->file.path;
  impl_->stats.mode = impl_->file.mode;
  impl_->stats.in_force = impl_->file.mode;
  if (impl_->file.mode != CacheMode::off) impl_->load(/*explicit_request=*/false);
}

ChoiceCache::~ChoiceCache() {
  // Last-use times of file entries that answered lookups are only in memory; keep the LRU order
  // honest by writing them once at the end. Destructors never throw.
  if (!impl_->writable()) return;
  bool pending = false;
  {
    std::lock_guard lock(impl_->used_mutex);
    pending = !impl_->used.empty();
  }
  if (!pending) return;
  try {
    std::unique_lock lock(impl_->mutex);
    impl_->write({}, Rewrite::when_due, /*explicit_request=*/false);
  } catch (const std::exception& error) {
    std::cerr << "dnnx: could not record cache use times in '" << impl_->file.path
              << "': " << error.what() << '\n';
  }
}

std::shared_ptr<ChoiceCache> ChoiceCache::global() {
  static const auto cache = std::make_shared<ChoiceCache>(CacheFileOptions::from_env());
  return cache;
}

std::shared_ptr<const Choice> ChoiceCache::find(const std::string& key) const {
  std::shared_lock lock(impl_->mutex);
  if (const auto it = impl_->entries.find(key); it != impl_->entries.end()) {
    ++impl_->hits;
    return it->second;
  }
  if (const auto it = impl_->file_records.find(key); it != impl_->file_records.end()) {
    ++impl_->hits;
    {
      std::lock_guard used_lock(impl_->used_mutex);
      impl_->used[key] = tune::now_seconds();
      ++impl_->stats.applied;
      if (it->second.choice->from_file) impl_->unvalidated.insert(key);
    }
    return it->second.choice;
  }
  ++impl_->misses;
  return nullptr;
}

void ChoiceCache::insert(const std::string& key, std::shared_ptr<const Choice> choice) {
  DNNX_CHECK_ARG(choice != nullptr, "ChoiceCache::insert needs a choice, got null");
  std::unique_lock lock(impl_->mutex);
  const auto file_it = impl_->file_records.find(key);
  const bool known_on_file = file_it != impl_->file_records.end();
  // A re-validated copy of a file entry (same measurement) needs no write; one whose late plans
  // were settled does (Note [late plans] in src/ops/dispatch.cpp). A file entry that was looked up
  // and is replaced before it was re-validated failed re-validation: that lookup counts as a miss,
  // not a hit.
  const bool same_measurement = known_on_file &&
                                file_it->second.choice->measured_at == choice->measured_at &&
                                file_it->second.choice->algo.id == choice->algo.id &&
                                file_it->second.choice->late_plans == choice->late_plans;
  if (!choice->from_file) {
    std::lock_guard used_lock(impl_->used_mutex);
    if (impl_->unvalidated.erase(key) != 0 && !same_measurement) {
      ++impl_->stats.invalidated;
      --impl_->stats.applied;
      --impl_->hits;
      ++impl_->misses;
    }
  }
  impl_->entries[key] = choice;
  impl_->generation = next_generation();
  if (impl_->writable() && persisted(*choice) && !same_measurement) {
    tune::FileRecord record{choice, tune::now_seconds()};
    impl_->write({{key, std::move(record)}}, Rewrite::when_due, /*explicit_request=*/false);
  }
}

void ChoiceCache::clear() {
  std::unique_lock lock(impl_->mutex);
  impl_->entries.clear();
  impl_->file_records.clear();
  {
    std::lock_guard used_lock(impl_->used_mutex);
    impl_->unvalidated.clear();
  }
  impl_->hits = 0;
  impl_->misses = 0;
  impl_->generation = next_generation();
}

std::size_t ChoiceCache::size() const {
  std::shared_lock lock(impl_->mutex);
  std::size_t n = impl_->entries.size();
  for (const auto& [key, record] : impl_->file_records) n += impl_->entries.count(key) == 0;
  return n;
}

std::uint64_t ChoiceCache::hits() const { return impl_->hits; }
std::uint64_t ChoiceCache::misses() const { return impl_->misses; }
std::uint64_t ChoiceCache::generation() const { return impl_->generation; }

std::vector<std::pair<std::string, std::shared_ptr<const Choice>>> ChoiceCache::entries() const {
  std::shared_lock lock(impl_->mutex);
  std::vector<std::pair<std::string, std::shared_ptr<const Choice>>> out(impl_->entries.begin(),
                                                                         impl_->entries.end());
  for (const auto& [key, record] : impl_->file_records) {
    if (impl_->entries.count(key) == 0) out.emplace_back(key, record.choice);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

const CacheFileOptions& ChoiceCache::file_options() const { return impl_->file; }

CacheFileStats ChoiceCache::file_stats() const {
  std::shared_lock lock(impl_->mutex);
  std::lock_guard used_lock(impl_->used_mutex);
  return impl_->stats;
}

std::size_t ChoiceCache::foreign_entries(std::string_view backend,
                                         std::string_view fingerprint) const {
  std::shared_lock lock(impl_->mutex);
  std::size_t n = 0;
  for (const auto& [key, record] : impl_->file_records) {
    n += record.choice->backend == backend && record.choice->fingerprint != fingerprint;
  }
  return n;
}

void ChoiceCache::reload() {
  std::unique_lock lock(impl_->mutex);
  if (impl_->file.mode == CacheMode::off) return;
  // A file that could not be used is tried again: it may have been fixed.
  const CacheMode before = impl_->stats.in_force;
  impl_->stats.in_force = impl_->file.mode;
  try {
    impl_->load(/*explicit_request=*/true);
  } catch (...) {
    impl_->stats.in_force = before;
    throw;
  }
  impl_->problem.reset();
  impl_->stats.problem.clear();
  impl_->generation = next_generation();
}

std::size_t ChoiceCache::export_file(const std::string& path) const {
  tune::FileRecords records;
  {
    std::shared_lock lock(impl_->mutex);
    records = impl_->file_records;
    const std::int64_t now = tune::now_seconds();
    for (const auto& [key, choice] : impl_->entries) {
      if (persisted(*choice)) tune::merge(records, {{key, tune::FileRecord{choice, now}}});
    }
  }
  tune::write_document(path, records);
  return records.size();
}

std::size_t ChoiceCache::import_file(const std::string& path) {
  tune::Parsed parsed = tune::read_document(path);
  if (!parsed.dropped.empty()) {
    detail::warn_once(detail::cat("cache file '", path, "': skipped ", parsed.dropped.size(),
                                  " malformed entries (", parsed.dropped.front(),
                                  parsed.dropped.size() > 1 ? "; ..." : "", ")"));
  }
  std::unique_lock lock(impl_->mutex);
  if (impl_->explicit_write()) {
    impl_->write(parsed.records, Rewrite::merge, /*explicit_request=*/true);
  } else {
    tune::merge(impl_->file_records, parsed.records);
    impl_->stats.file_entries = impl_->file_records.size();
  }
  impl_->generation = next_generation();
  return parsed.records.size();
}

std::size_t ChoiceCache::prune(std::size_t max_entries) {
  DNNX_CHECK_ARG(max_entries >= 1, "prune needs max_entries >= 1, got ", max_entries);
  std::unique_lock lock(impl_->mutex);
  if (!impl_->explicit_write()) {
    const std::size_t dropped = tune::prune(impl_->file_records, max_entries);
    impl_->stats.file_entries = impl_->file_records.size();
    return dropped;
  }
  const std::size_t saved = impl_->file.max_entries;
  const std::size_t before = impl_->file_records.size();
  impl_->file.max_entries = max_entries;
  try {
    impl_->write({}, Rewrite::merge, /*explicit_request=*/true);
  } catch (...) {
    impl_->file.max_entries = saved;
    throw;
  }
  impl_->file.max_entries = saved;
  impl_->generation = next_generation();
  return before > impl_->file_records.size() ? before - impl_->file_records.size() : 0;
}

void ChoiceCache::clear_file() {
  std::unique_lock lock(impl_->mutex);
  if (impl_->explicit_write()) impl_->write({}, Rewrite::replace, /*explicit_request=*/true);
  impl_->entries.clear();
  impl_->file_records.clear();
  impl_->stats.file_entries = 0;
  impl_->generation = next_generation();
}

}  // namespace dnnx
