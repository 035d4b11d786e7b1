// ChoiceCache: choices in memory, optionally backed by a file shared by every process.

#include <dnnx/algo.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"
#include "tune/cache_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace dnnx {

std::string_view to_string(CacheMode mode) {
  switch (mode) {
    case CacheMode::off: return "off";
    case CacheMode::read: return "read";
    case CacheMode::readwrite: return "readwrite";
  }
  return "?";
}

CacheMode parse_cache_mode(std::string_view text) {
  const std::string name = detail::lower(text);
  if (name == "off" || name == "0" || name == "none") return CacheMode::off;
  if (name == "read" || name == "readonly" || name == "ro") return CacheMode::read;
  if (name == "readwrite" || name == "rw" || name == "on" || name == "1") return CacheMode::readwrite;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown cache mode '", text, "'; accepted: off, read, readwrite"));
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

}  // namespace

struct ChoiceCache::Impl {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Choice>> entries;
  mutable std::atomic<std::uint64_t> hits{0};
  mutable std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> generation{next_generation()};

  // The persistent side (guarded by `mutex`).
  CacheFileOptions file{CacheMode::off, {}, 0};
  tune::FileRecords file_records;
  mutable std::unordered_map<std::string, std::int64_t> used;  // key -> last use, not yet written
  mutable std::mutex used_mutex;
  CacheFileStats stats;

  bool persistent() const { return file.mode != CacheMode::off && !file.path.empty(); }
  bool writable() const { return file.mode == CacheMode::readwrite && !file.path.empty(); }

  void note_read(const tune::ReadResult& result) {
    if (result.set_aside) ++stats.set_aside;
  }

  // Loads the file into file_records, merging with what is there. The lock is exclusive because
  // an unreadable file is renamed aside, which must not race with another process's write.
  void load() {
    tune::FileLock lock(file.path, /*exclusive=*/true);
    tune::ReadResult result = tune::read_file(file.path);
    note_read(result);
    tune::merge(file_records, result.records);
    stats.file_entries = file_records.size();
  }

  // Merges `updates` and pending last-use times into the file under the exclusive lock, prunes
  // it, writes it atomically, and refreshes file_records with what is now on disk.
  void write(const tune::FileRecords& updates, bool replace_all = false) {
    tune::FileLock lock(file.path, /*exclusive=*/true);
    tune::ReadResult current = tune::read_file(file.path);
    note_read(current);
    tune::FileRecords merged = replace_all ? tune::FileRecords{} : std::move(current.records);
    tune::merge(merged, updates);
    {
      std::lock_guard used_lock(used_mutex);
      for (const auto& [key, when] : used) {
        if (auto it = merged.find(key); it != merged.end())
          it->second.last_used = std::max(it->second.last_used, when);
      }
      used.clear();
    }
    tune::prune(merged, file.max_entries);
    tune::write_file(file.path, merged);
    ++stats.writes;
    file_records = std::move(merged);
    stats.file_entries = file_records.size();
  }
};

ChoiceCache::ChoiceCache() : impl_(std::make_unique<Impl>()) {}

ChoiceCache::ChoiceCache(CacheFileOptions file) : impl_(std::make_unique<Impl>()) {
  DNNX_CHECK_ARG(file.mode == CacheMode::off || !file.path.empty(),
                 "a cache file in mode ", to_string(file.mode), " needs a path");
  DNNX_CHECK_ARG(file.max_entries >= 1, "cache max_entries must be >= 1, got ", file.max_entries);
  impl_->file = std::move(file);
  impl_->stats.path = impl_->file.path;
  impl_->stats.mode = impl_->file.mode;
  if (impl_->persistent()) impl_->load();
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
    impl_->write({});
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
  // A re-validated copy of a file entry (same measurement) needs no write; a file entry replaced
  // by a new selection counts as invalidated.
  const bool same_measurement = known_on_file &&
                                file_it->second.choice->measured_at == choice->measured_at &&
                                file_it->second.choice->algo.id == choice->algo.id;
  if (known_on_file && !same_measurement && choice->from_file == false) ++impl_->stats.invalidated;
  impl_->entries[key] = choice;
  impl_->generation = next_generation();
  // Only selections worth keeping go to disk: fixed ids and families are the user's own words.
  const bool persist = choice->policy.kind == PolicyKind::exhaustive ||
                       choice->policy.kind == PolicyKind::heuristic;
  if (impl_->writable() && persist && !same_measurement) {
    tune::FileRecord record{choice, tune::now_seconds()};
    impl_->write({{key, std::move(record)}});
  }
}

void ChoiceCache::clear() {
  std::unique_lock lock(impl_->mutex);
  impl_->entries.clear();
  impl_->file_records.clear();
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
  if (!impl_->persistent()) return;
  impl_->load();
  impl_->generation = next_generation();
}

std::size_t ChoiceCache::export_file(const std::string& path) const {
  tune::FileRecords records;
  {
    std::shared_lock lock(impl_->mutex);
    records = impl_->file_records;
    const std::int64_t now = tune::now_seconds();
    for (const auto& [key, choice] : impl_->entries) {
      const bool persist = choice->policy.kind == PolicyKind::exhaustive ||
                           choice->policy.kind == PolicyKind::heuristic;
      if (persist) tune::merge(records, {{key, tune::FileRecord{choice, now}}});
    }
  }
  tune::FileLock lock(path, /*exclusive=*/true);
  tune::write_file(path, records);
  return records.size();
}

std::size_t ChoiceCache::import_file(const std::string& path) {
  tune::FileRecords records;
  {
    tune::FileLock lock(path, /*exclusive=*/false);
    std::ifstream in(path, std::ios::binary);
    DNNX_CHECK_ARG(static_cast<bool>(in), "cannot open cache file '", path, "' for import");
    std::ostringstream text;
    text << in.rdbuf();
    try {
      records = tune::parse(text.str());
    } catch (const Error& error) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("'", path, "' is not a valid dnnx cache file: ", error.message()));
    }
  }
  std::unique_lock lock(impl_->mutex);
  if (impl_->writable()) {
    impl_->write(records);
  } else {
    tune::merge(impl_->file_records, records);
    impl_->stats.file_entries = impl_->file_records.size();
  }
  impl_->generation = next_generation();
  return records.size();
}

std::size_t ChoiceCache::prune(std::size_t max_entries) {
  DNNX_CHECK_ARG(max_entries >= 1, "prune needs max_entries >= 1, got ", max_entries);
  std::unique_lock lock(impl_->mutex);
  if (!impl_->writable()) {
    const std::size_t dropped = tune::prune(impl_->file_records, max_entries);
    impl_->stats.file_entries = impl_->file_records.size();
    return dropped;
  }
  const std::size_t saved = impl_->file.max_entries;
  const std::size_t before = impl_->file_records.size();
  impl_->file.max_entries = max_entries;
  try {
    impl_->write({});
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
  impl_->entries.clear();
  impl_->file_records.clear();
  if (impl_->writable()) impl_->write({}, /*replace_all=*/true);
  impl_->generation = next_generation();
}

}  // namespace dnnx
