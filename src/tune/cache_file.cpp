#include "tune/cache_file.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <random>

namespace dnnx::tune {

// Note [whose file]
// The cache path may name anything: a folder, a device, a FIFO, someone's own file. dnnx reads,
// writes, renames or replaces only what it can tell is its own:
// - Only regular files. A symbolic link is followed to its final target and written through (the
//   temporary file is made next to the target and renamed over it), so the link stays a link and
//   the target keeps its mode (and, when root writes it, its owner).
// - A regular file is ours when its text starts like a cache document of this schema version:
//   `{"schema": "dnnx.tune-cache", "version": 1` (whitespace aside), or `{"entries": [{"algo"`,
//   the order an earlier dnnx wrote; or when it is empty (it holds nothing). A document of ours
//   that cannot be parsed (truncated, corrupt) is set aside by the next writer: renamed to a new
//   `<file>.corrupt-<time>-<pid>`, never over another file, never applied, never dropped.
// - A document of another schema version belongs to another dnnx, anything else to someone else:
//   neither is ever renamed, replaced or written. The cache then keeps its choices in memory and
//   says so once on stderr.
// - A file this user may not write is only read.
// - Readers (DNNX_CACHE=read, `dnnx cache show|stats|export`) change nothing: they take the
//   shared lock only when the lock file exists and opens, and leave a corrupt file where it is.
// - An entry that is malformed or out of range (a negative size, an integer too large for its
//   field, a time that is not a finite number >= 0) is skipped with a warning naming the entry and
//   the field; the rest of the file is used, and the next rewrite leaves the bad entry out.

// Note [bounded reads]
// A cache file or journal is opened only after stat() says it is a regular file of at most
// max_file_bytes, with O_NONBLOCK, and checked again with fstat() on the open descriptor; at most
// max_file_bytes + 1 bytes are read. A FIFO or a device such as /dev/zero can neither block a
// reader (which may hold the lock) nor fill its memory. Writers keep the file within the limit by
// dropping least recently used entries.

// Note [journal]
// Rewriting the whole file for every new choice costs seconds per choice once the file holds tens
// of megabytes (parse, serialise, fsync). So a writer appends new choices and last-use times to
// `<file>.journal`, one JSON line each after a header line: an entry as in the file, or
// `{"key": ..., "last_used": ...}` for a use. Readers apply the journal over the file. The journal
// is merged into the file (compaction: read both, merge, prune to the bound, replace the file,
// remove the journal) while file and journal together are under compact_below, so small caches
// stay one document, and once the journal outgrows a quarter of the file, so each entry is
// rewritten a bounded number of times. The entry bound (max_entries) is applied at compaction.
// Kill safety: appends and compactions happen under the exclusive lock; a writer killed while
// appending leaves an incomplete last line, which readers ignore and the next writer cuts off; a
// compaction renames the new file in before it removes the journal, and readers read the journal
// before the file, so even a reader without the lock misses no entry (an entry read twice merges
// to itself: per key the newer measurement wins).

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* schema_name = "dnnx.tune-cache";
constexpr std::uint64_t compact_below = std::uint64_t{1} << 20;

std::string journal_header() {
  return detail::cat(R"({"schema": "dnnx.tune-cache-journal", "version": )",
                     CacheFileOptions::schema_version, "}\n");
}

std::string journal_path(const std::string& path) { return path + ".journal"; }

// ---- reading entries, every field checked

json number_or_null(double value) { return std::isnan(value) ? json(nullptr) : json(value); }

// A value as the error message shows it.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

[[noreturn]] void bad_field(const std::string& field, const json& value,
                            std::string_view accepted) {
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("field '", field, "' is ", shown(value), "; accepted: ", accepted));
}

// Reads the fields of one JSON object; messages name the field by its path in the entry.
class Fields {
 public:
  Fields(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) bad_field(path_.empty() ? "entry" : path_, object_, "an object");
  }

  const json& at(const char* name) const {
    const auto it = object_.find(name);
    if (it == object_.end())
      detail::raise(ErrorKind::InvalidArgument, detail::cat("field '", path(name), "' is missing"));
    return *it;
  }
  std::string path(const char* name) const { return path_.empty() ? name : path_ + "." + name; }

  std::string text(const char* name) const {
    const json& value = at(name);
    if (!value.is_string()) bad_field(path(name), value, "a string");
    return value.get<std::string>();
  }
  bool flag(const char* name) const {
    const json& value = at(name);
    if (!value.is_boolean()) bad_field(path(name), value, "true or false");
    return value.get<bool>();
  }
  std::vector<std::string> texts(const char* name) const {
    const json& value = at(name);
    const bool strings =
        value.is_array() &&
        std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); });
    if (!strings) bad_field(path(name), value, "an array of strings");
    return value.get<std::vector<std::string>>();
  }
  // An integer in [low, high] (low <= 0 <= high); floats and out-of-range values are rejected,
  // never converted.
  template <typename Int>
  Int integer(const char* name, Int low, Int high) const {
    const json& value = at(name);
    bool in_range = false;
    if (value.is_number_unsigned()) {
      in_range = value.get<std::uint64_t>() <= static_cast<std::uint64_t>(high);
    } else if (value.is_number_integer()) {
      const auto v = value.get<std::int64_t>();
      in_range = v >= static_cast<std::int64_t>(low) &&
                 (v < 0 || static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(high));
    }
    if (!in_range)
      bad_field(path(name), value, detail::cat("an integer from ", +low, " to ", +high));
    return value.is_number_unsigned() ? static_cast<Int>(value.get<std::uint64_t>())
                                      : static_cast<Int>(value.get<std::int64_t>());
  }
  std::size_t bytes(const char* name) const {
    return integer<std::size_t>(name, 0, std::numeric_limits<std::size_t>::max());
  }
  int count(const char* name) const { return integer<int>(name, 0, INT_MAX); }
  std::int64_t seconds(const char* name) const {
    return integer<std::int64_t>(name, 0, std::numeric_limits<std::int64_t>::max());
  }
  // Milliseconds: a finite number >= 0, or null (NaN) where `nullable`.
  double ms(const char* name, bool nullable) const {
    const json& value = at(name);
    if (nullable && value.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (value.is_number()) {
      const double v = value.get<double>();
      if (std::isfinite(v) && v >= 0) return v;
    }
    bad_field(path(name), value,
              nullable ? "a finite number >= 0, or null" : "a finite number >= 0");
  }
  // A measurement that may be negative (an energy above the idle baseline): a finite number,
  // or null (NaN).
  double real(const char* name) const {
    const json& value = at(name);
    if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (value.is_number() && std::isfinite(value.get<double>())) return value.get<double>();
    bad_field(path(name), value, "a finite number, or null");
  }
  bool has(const char* name) const { return object_.contains(name); }

 private:
  const json& object_;
  std::string path_;
};

// The timing table in short: enough to show it again and to read any candidate's time
// (e.g. the heuristic pick's, for `dnnx tune`'s speedup column) without re-running anything.
json timings_json(const std::vector<ProfileRow>& rows) {
  json out = json::array();
  for (const ProfileRow& row : rows) {
    out.push_back({{"id", row.algo.id},
                   {"status", std::string(to_string(row.status))},
                   {"median_ms", number_or_null(row.median_ms)},
                   {"min_ms", number_or_null(row.min_ms)},
                   {"runs", row.runs},
                   {"workspace_bytes", row.algo.workspace_bytes}});
    // Written only where measured (Note [energy policies] in select.cpp): most rows have none.
    if (!std::isnan(row.energy_j)) {
      out.back()["energy_j"] = row.energy_j;
      out.back()["energy_spread_j"] = number_or_null(row.energy_spread_j);
      out.back()["power_w"] = number_or_null(row.power_w);
      out.back()["clock_mhz"] = number_or_null(row.clock_mhz);
    }
  }
  return out;
}

CandidateStatus parse_status(const std::string& field, const json& value) {
  for (const CandidateStatus status :
       {CandidateStatus::ok, CandidateStatus::unsupported, CandidateStatus::over_workspace_limit,
        CandidateStatus::not_deterministic, CandidateStatus::failed, CandidateStatus::abandoned,
        CandidateStatus::not_timed}) {
    if (value.is_string() && to_string(status) == value.get<std::string>()) return status;
  }
  bad_field(field, value,
            "ok, unsupported, over_workspace_limit, not_deterministic, failed, abandoned, "
            "not_timed");
}

std::vector<ProfileRow> timings_from(const json& rows) {
  if (!rows.is_array()) bad_field("timings", rows, "an array");
  std::vector<ProfileRow> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Fields row(rows[i], detail::cat("timings[", i, "]"));
    ProfileRow parsed;
    parsed.algo.id = row.text("id");
    parsed.algo.supported = true;
    parsed.status = parse_status(row.path("status"), row.at("status"));
    parsed.median_ms = row.ms("median_ms", /*nullable=*/true);
    parsed.min_ms = row.ms("min_ms", /*nullable=*/true);
    parsed.runs = row.count("runs");
    parsed.algo.workspace_bytes = row.bytes("workspace_bytes");
    if (row.has("energy_j")) {
      parsed.energy_j = row.real("energy_j");
      parsed.energy_spread_j = row.real("energy_spread_j");
      parsed.power_w = row.real("power_w");
      parsed.clock_mhz = row.real("clock_mhz");
    }
    out.push_back(std::move(parsed));
  }
  return out;
}

json to_json(const std::string& key, const FileRecord& record) {
  const Choice& c = *record.choice;
  const AlgoInfo& a = c.algo;
  json environment = json::object();
  if (!c.environment.empty()) environment = json::parse(c.environment, nullptr, false);
  if (environment.is_discarded()) environment = json::object();
  json entry = {{"key", key},
                {"op", c.op},
                {"direction", std::string(to_string(c.direction))},
                {"policy", c.policy.to_string()},
                {"algo",
                 {{"id", a.id},
                  {"name", a.name},
                  {"workspace_bytes", a.workspace_bytes},
                  {"deterministic", a.deterministic},
                  {"notes", a.notes},
                  {"families", a.families},
                  {"priority", a.priority}}},
                {"time_ms", number_or_null(c.time_ms)},
                {"timings", timings_json(c.timings)},
                {"runner_up", c.runner_up},
                {"runner_up_ms", number_or_null(c.runner_up_ms)},
                {"tuning_ms", c.tuning_ms},
                {"candidates_timed", c.candidates_timed},
                {"backend", c.backend},
                {"fingerprint", c.fingerprint},
                {"environment", environment},
                {"measured_at", c.measured_at},
                {"measured", format_time(c.measured_at)},
                {"last_used", record.last_used}};
  // Written only when there are some (Note [late plans] in src/ops/dispatch.cpp): most entries
  // have none.
  if (!c.late_plans.empty()) entry["late_plans"] = c.late_plans;
  // The energy policies' (Note [energy policies] in select.cpp).
  if (!c.energy_meter.empty()) {
    entry["energy_j"] = number_or_null(c.energy_j);
    entry["energy_meter"] = c.energy_meter;
    if (!c.energy_fastest.empty()) entry["energy_fastest"] = c.energy_fastest;
  }
  return entry;
}

// One entry; throws InvalidArgument naming the field. `key` is set as soon as it is known.
FileRecord from_json(const json& entry, std::string& key) {
  const Fields fields(entry, "");
  auto choice = std::make_shared<Choice>();
  key = fields.text("key");
  DNNX_CHECK_ARG(!key.empty(), "field 'key' is empty");
  choice->key = key;
  choice->op = fields.text("op");
  choice->direction = parse_direction(fields.text("direction"));
  choice->policy = AlgoPolicy::parse(fields.text("policy"));
  const Fields algo(fields.at("algo"), "algo");
  choice->algo.id = algo.text("id");
  DNNX_CHECK_ARG(!choice->algo.id.empty(), "field 'algo.id' is empty");
  choice->algo.name = algo.text("name");
  choice->algo.supported = true;
  choice->algo.workspace_bytes = algo.bytes("workspace_bytes");
  choice->algo.deterministic = algo.flag("deterministic");
  choice->algo.notes = algo.texts("notes");
  choice->algo.families = algo.texts("families");
  choice->algo.priority = algo.count("priority");
  choice->time_ms = fields.ms("time_ms", /*nullable=*/true);
  choice->timings = timings_from(fields.at("timings"));
  choice->runner_up = fields.text("runner_up");
  choice->runner_up_ms = fields.ms("runner_up_ms", /*nullable=*/true);
  choice->tuning_ms = fields.ms("tuning_ms", /*nullable=*/false);
  choice->candidates_timed = fields.count("candidates_timed");
  choice->backend = fields.text("backend");
  choice->fingerprint = fields.text("fingerprint");
  const json& environment = fields.at("environment");
  if (!environment.is_object()) bad_field("environment", environment, "an object");
  choice->environment = environment.dump();
  choice->measured_at = fields.seconds("measured_at");
  if (entry.contains("late_plans")) choice->late_plans = fields.texts("late_plans");
  if (entry.contains("energy_meter")) {
    choice->energy_j = fields.real("energy_j");
    choice->energy_meter = fields.text("energy_meter");
    if (entry.contains("energy_fastest")) choice->energy_fastest = fields.text("energy_fastest");
  }
  choice->from_file = true;
  FileRecord record;
  record.last_used = fields.seconds("last_used");
  record.choice = std::move(choice);
  return record;
}

// "entry 3 ('<key>'): <what is wrong>" for the warning and the strict parse.
std::string entry_problem(std::string_view where, const std::string& key, const std::string& what) {
  return key.empty() ? detail::cat(where, ": ", what)
                     : detail::cat(where, " ('", key, "'): ", what);
}

// Parses one entry into `records`, or describes why it was rejected into `dropped`.
void add_entry(const json& entry, std::string_view where, FileRecords& records,
               std::vector<std::string>& dropped) {
  std::string key;
  try {
    FileRecord record = from_json(entry, key);
    merge(records, {{key, std::move(record)}});
  } catch (const json::exception& error) {
    dropped.push_back(entry_problem(where, key, error.what()));
  } catch (const Error& error) {
    dropped.push_back(entry_problem(where, key, error.message()));
  }
}

// ---- files

[[noreturn]] void os_failure(const std::string& what, const std::string& path, int error) {
  detail::raise(ErrorKind::BackendFailure,
                detail::cat("tune cache: ", what, " '", path, "' failed: ", std::strerror(error)));
}

std::string_view file_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

Error not_regular(std::string_view what, const std::string& path, mode_t mode) {
  return Error(ErrorKind::InvalidArgument,
               detail::cat(what, " '", path, "' is ", file_type(mode),
                           ", not a regular file; it is left untouched"));
}

Error too_large(std::string_view what, const std::string& path, std::uint64_t bytes) {
  return Error(ErrorKind::InvalidArgument,
               detail::cat(what, " '", path, "' is ", bytes, " bytes, more than the ",
                           max_file_bytes, " a cache file may hold; it is left untouched"));
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the result.
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

// A file's text, read only if it is a regular file within max_file_bytes (Note [bounded reads]).
struct Text {
  FileState state = FileState::missing;
  std::string text;
  std::optional<Error> problem;
};

Text read_text(std::string_view what, const std::string& path) {
  Text out;
  auto unusable = [&](Error error) {
    out.state = FileState::unusable;
    out.problem = std::move(error);
    return std::move(out);
  };
  auto os_problem = [&](std::string_view doing, int error) {
    return unusable(Error(ErrorKind::BackendFailure, detail::cat(doing, " ", what, " '", path,
                                                                 "' failed: ", std::strerror(error),
                                                                 "; it is left untouched")));
  };
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    // No file, or a folder on the way is a file: nothing to read (a writer reports the folder).
    if (errno == ENOENT || errno == ENOTDIR) return out;
    return os_problem("reading", errno);
  }
  if (!S_ISREG(info.st_mode)) return unusable(not_regular(what, path, info.st_mode));
  if (static_cast<std::uint64_t>(info.st_size) > max_file_bytes)
    return unusable(too_large(what, path, static_cast<std::uint64_t>(info.st_size)));
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return out;
    return os_problem("opening", errno);
  }
  // The path may have been replaced since stat(): judge what was opened.
  if (::fstat(fd.get(), &info) != 0) return os_problem("reading", errno);
  if (!S_ISREG(info.st_mode)) return unusable(not_regular(what, path, info.st_mode));
  // The file may grow while it is read: never past max_file_bytes + 1 bytes.
  std::string text(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(info.st_size), max_file_bytes) + 1, '\0');
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (got > max_file_bytes) break;
      text.resize(std::min<std::uint64_t>(std::uint64_t{2} * got, max_file_bytes + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_problem("reading", errno);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_file_bytes) return unusable(too_large(what, path, got));
  text.resize(got);
  out.state = FileState::ok;
  out.text = std::move(text);
  return out;
}

// The journal's entries and uses (Note [journal]).
struct Journal {
  FileRecords records;
  UseTimes uses;
};

Journal parse_journal(std::string_view text, std::vector<std::string>& dropped) {
  Journal out;
  std::size_t line_start = text.find('\n');
  std::size_t number = 2;
  while (line_start != std::string_view::npos && line_start + 1 < text.size()) {
    const std::size_t begin = line_start + 1;
    const std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) break;  // an append in progress, or one that was killed
    const std::string_view line = text.substr(begin, end - begin);
    line_start = end;
    const std::string where = detail::cat("journal line ", number++);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (value.is_object() && value.size() == 2 && value.contains("key") &&
        value.contains("last_used")) {
      try {
        const Fields use(value, "");
        std::int64_t& last = out.uses[use.text("key")];
        last = std::max(last, use.seconds("last_used"));
      } catch (const Error& error) {
        dropped.push_back(entry_problem(where, {}, error.message()));
      }
      continue;
    }
    if (value.is_discarded()) {
      dropped.push_back(entry_problem(where, {}, "not valid JSON"));
      continue;
    }
    add_entry(value, where, out.records, dropped);
  }
  return out;
}

// Matches literal tokens at the start of a text, whitespace between them aside; `end` when the
// text ends first (a truncated document matches as far as it goes).
enum class Match : std::uint8_t { yes, no, end };

class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}
  Match tokens(std::initializer_list<std::string_view> literals) {
    for (const std::string_view literal : literals) {
      skip_space();
      for (const char c : literal) {
        if (at_ == text_.size()) return Match::end;
        if (text_[at_] != c) return Match::no;
        ++at_;
      }
    }
    return Match::yes;
  }
  // Digits at the cursor: nullopt when the text ends within them or there are none.
  std::optional<std::int64_t> integer() {
    skip_space();
    std::int64_t value = 0;
    std::size_t digits = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9' && digits < 12) {
      value = value * 10 + (text_[at_++] - '0');
      ++digits;
    }
    if (digits == 0 || at_ == text_.size()) return std::nullopt;
    return value;
  }

 private:
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t'))
      ++at_;
  }
  std::string_view text_;
  std::size_t at_ = 0;
};

// A name that is new: `base`, else `base-1`, `base-2`... (never an existing file).
bool rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  // A file system without RENAME_NOREPLACE: writers hold the lock, so only another program could
  // take the name between these two calls.
  struct stat info {};
  if (::lstat(to.c_str(), &info) == 0) {
    errno = EEXIST;
    return false;
  }
  return ::rename(from.c_str(), to.c_str()) == 0;
}

void create_folder(const fs::path& target) {
  const fs::path folder = target.parent_path();
  if (folder.empty()) return;
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    detail::raise(ErrorKind::BackendFailure,
                  detail::cat("tune cache: creating the folder '", folder.string(),
                              "' failed: ", error.message()));
  }
}

// Writes all of `text` to `fd` at its current offset.
void write_all(int fd, std::string_view text, const std::string& path) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) os_failure("writing", path, errno);
    written += static_cast<std::size_t>(n);
  }
}

// Gives a new file `fd` the mode and owner of the file `like` (when `like` exists).
void take_mode(int fd, const struct stat* like) {
  if (like == nullptr) return;
  ::fchmod(fd, like->st_mode & 07777);
  // Only root can give a file away; a failure leaves it owned by root, still readable.
  if (::geteuid() == 0 && (like->st_uid != 0 || like->st_gid != 0) &&
      ::fchown(fd, like->st_uid, like->st_gid) != 0)
    return;
}

// The cache text to write: when it exceeds max_file_bytes, the least recently used records are
// dropped until it fits (Note [bounded reads]).
std::string serialize_within_limit(const FileRecords& records) {
  std::string text = serialize(records);
  if (text.size() <= max_file_bytes) return text;
  FileRecords kept = records;
  while (text.size() > max_file_bytes && !kept.empty()) {
    const double share =
        0.9 * static_cast<double>(max_file_bytes) / static_cast<double>(text.size());
    prune(kept, static_cast<std::size_t>(static_cast<double>(kept.size()) * share));
    text = serialize(kept);
  }
  return text;
}

}  // namespace

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_time(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string serialize(const FileRecords& records) {
  std::string text =
      detail::cat("{\n \"schema\": \"", schema_name,
                  "\",\n \"version\": ", CacheFileOptions::schema_version, ",\n \"entries\": [");
  bool first = true;
  for (const auto& [key, record] : records) {
    text += first ? "\n  " : ",\n  ";
    text += to_json(key, record).dump();
    first = false;
  }
  text += first ? "]\n}\n" : "\n ]\n}\n";
  return text;
}

Parsed parse_document(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  DNNX_CHECK_ARG(!doc.is_discarded(), "not valid JSON (", text.size(), " bytes)");
  DNNX_CHECK_ARG(doc.is_object(), "the document is a JSON ", doc.type_name(), ", not an object");
  DNNX_CHECK_ARG(doc.contains("schema") && doc["schema"] == schema_name, "schema is not '",
                 schema_name, "'");
  DNNX_CHECK_ARG(doc.contains("version") && doc["version"].is_number_integer() &&
                     doc["version"].get<std::int64_t>() == CacheFileOptions::schema_version,
                 "schema version is not ", CacheFileOptions::schema_version);
  DNNX_CHECK_ARG(doc.contains("entries") && doc["entries"].is_array(), "'entries' is not an array");
  Parsed parsed;
  std::size_t index = 0;
  for (const json& entry : doc["entries"])
    add_entry(entry, detail::cat("entry ", index++), parsed.records, parsed.dropped);
  return parsed;
}

FileRecords parse(std::string_view text) {
  Parsed parsed = parse_document(text);
  DNNX_CHECK_ARG(parsed.dropped.empty(), parsed.dropped.front());
  return std::move(parsed.records);
}

Owner owner_of(std::string_view text) {
  Cursor schema(text);
  switch (schema.tokens({"{", "\"schema\"", ":", "\"dnnx.tune-cache\""})) {
    case Match::end: return Owner::ours;
    case Match::yes: {
      if (schema.tokens({",", "\"version\"", ":"}) != Match::yes) return Owner::ours;
      const std::optional<std::int64_t> version = schema.integer();
      return version && *version != CacheFileOptions::schema_version ? Owner::other_version
                                                                     : Owner::ours;
    }
    case Match::no: break;
  }
  Cursor entries(text);
  switch (entries.tokens({"{", "\"entries\"", ":", "["})) {
    case Match::end: return Owner::ours;
    case Match::no: return Owner::foreign;
    case Match::yes: break;
  }
  Cursor empty = entries;
  if (empty.tokens({"]"}) == Match::yes) return Owner::ours;
  return entries.tokens({"{", "\"algo\""}) == Match::no ? Owner::foreign : Owner::ours;
}

void merge(FileRecords& into, const FileRecords& from) {
  for (const auto& [key, record] : from) {
    auto it = into.find(key);
    if (it == into.end()) {
      into.emplace(key, record);
      continue;
    }
    const std::int64_t last_used = std::max(it->second.last_used, record.last_used);
    if (record.choice->measured_at > it->second.choice->measured_at)
      it->second.choice = record.choice;
    it->second.last_used = last_used;
  }
}

void apply_uses(FileRecords& records, const UseTimes& uses) {
  for (const auto& [key, when] : uses) {
    if (auto it = records.find(key); it != records.end())
      it->second.last_used = std::max(it->second.last_used, when);
  }
}

std::size_t prune(FileRecords& records, std::size_t max_entries) {
  if (records.size() <= max_entries) return 0;
  std::vector<std::pair<std::int64_t, std::string>> by_use;
  by_use.reserve(records.size());
  for (const auto& [key, record] : records) by_use.emplace_back(record.last_used, key);
  std::sort(by_use.begin(), by_use.end());  // oldest first
  const std::size_t drop = records.size() - max_entries;
  for (std::size_t i = 0; i < drop; ++i) records.erase(by_use[i].second);
  return drop;
}

std::string resolve_path(const std::string& path) {
  fs::path current(path);
  for (int hops = 0;; ++hops) {
    struct stat info {};
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return current.string();
    DNNX_CHECK_ARG(hops < 40, "tune cache file '", path,
                   "': too many levels of symbolic links (a loop?)");
    std::error_code error;
    const fs::path target = fs::read_symlink(current, error);
    if (error) return current.string();
    current = target.is_absolute() ? target : current.parent_path() / target;
  }
}

ReadResult read_cache(const std::string& path) {
  ReadResult result;
  // The journal first (Note [journal]).
  const Text journal = read_text("tune cache journal", journal_path(path));
  result.journal_state = journal.state;
  result.journal_problem = journal.problem;
  Journal appended;
  if (journal.state == FileState::ok) {
    result.journal_bytes = journal.text.size();
    const std::string header = journal_header();
    const std::size_t first_line = journal.text.find('\n');
    const bool complete_header = first_line != std::string::npos &&
                                 std::string_view(journal.text).substr(0, first_line + 1) == header;
    // A header cut short (a writer killed while creating the journal) holds nothing yet.
    const bool partial_header =
        first_line == std::string::npos && std::string_view(header).starts_with(journal.text);
    if (complete_header) {
      appended = parse_journal(journal.text, result.dropped);
    } else if (!partial_header) {
      result.journal_state = FileState::unusable;
      result.journal_problem =
          Error(ErrorKind::InvalidArgument,
                detail::cat("tune cache journal '", journal_path(path),
                            "' does not start with dnnx's journal header; it is left untouched"));
    }
  }
  const Text file = read_text("tune cache file", path);
  result.state = file.state;
  result.problem = file.problem;
  if (file.state == FileState::ok) {
    result.file_bytes = file.text.size();
    try {
      if (file.text.find_first_not_of(" \t\r\n") != std::string::npos) {
        Parsed parsed = parse_document(file.text);
        result.records = std::move(parsed.records);
        result.dropped.insert(result.dropped.begin(), parsed.dropped.begin(), parsed.dropped.end());
      }
    } catch (const Error& error) {
      switch (owner_of(file.text)) {
        case Owner::ours:
          result.state = FileState::corrupt;
          result.problem = Error(
              ErrorKind::InvalidArgument,
              detail::cat("tune cache file '", path, "' is unreadable (", error.message(), ")"));
          break;
        case Owner::other_version:
          result.state = FileState::unusable;
          result.problem = Error(
              ErrorKind::InvalidArgument,
              detail::cat("tune cache file '", path,
                          "' was written by a dnnx with another schema version (this one reads "
                          "version ",
                          CacheFileOptions::schema_version, "); it is left untouched"));
          break;
        case Owner::foreign:
          result.state = FileState::unusable;
          result.problem =
              Error(ErrorKind::InvalidArgument,
                    detail::cat("tune cache file '", path, "' is not a dnnx tune cache (",
                                error.message(), "); it is left untouched"));
          break;
      }
    }
  }
  merge(result.records, appended.records);
  apply_uses(result.records, appended.uses);
  return result;
}

Error through_link(const Error& error, const std::string& path, const std::string& resolved) {
  if (path == resolved) return error;
  return Error(error.kind(),
               detail::cat("'", path, "' is a link to '", resolved, "': ", error.message()));
}

Parsed read_document(const std::string& path) {
  const std::string resolved = resolve_path(path);
  FileLock lock(resolved, FileLock::Kind::shared);
  Text file = read_text("cache file", resolved);
  if (file.state == FileState::missing) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("cache file '", path, "' does not exist"));
  }
  if (file.state != FileState::ok) throw through_link(*file.problem, path, resolved);
  try {
    return parse_document(file.text);
  } catch (const Error& error) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("'", path, "' is not a valid dnnx cache file: ", error.message()));
  }
}

std::string set_aside(const std::string& path) {
  const std::string base =
      detail::cat(path, ".corrupt-", now_seconds(), "-", static_cast<long>(::getpid()));
  for (int n = 0;; ++n) {
    const std::string aside = n == 0 ? base : detail::cat(base, "-", n);
    if (rename_no_replace(path, aside)) return aside;
    if (errno != EEXIST || n == 1000) os_failure("setting aside", path, errno);
  }
}

FileLock::FileLock(const std::string& path, Kind kind) {
  const std::string lock_path = path + ".lock";
  // O_NOFOLLOW and O_NONBLOCK: a link or a FIFO planted at the lock's name is never followed or
  // waited on.
  const int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  if (kind == Kind::shared) {
    fd_ = ::open(lock_path.c_str(), O_RDONLY | flags);
  } else {
    create_folder(lock_path);
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | flags, 0666);
    const int error = errno;
    // flock() needs no write access: a lock file another user made is opened for reading.
    if (fd_ < 0 && error == EACCES) fd_ = ::open(lock_path.c_str(), O_RDONLY | flags);
    if (fd_ < 0) os_failure("opening the lock file", lock_path, error);
  }
  if (fd_ < 0) return;
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    if (kind == Kind::shared) return;
    throw not_regular("tune cache lock file", lock_path, info.st_mode);
  }
  while (::flock(fd_, kind == Kind::exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    if (kind == Kind::shared) return;
    os_failure("locking", lock_path, error);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

void check_writable(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return;  // a new file; its folder is checked on writing
  if (!S_ISREG(info.st_mode)) throw not_regular("tune cache file", path, info.st_mode);
  if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0) {
    detail::raise(ErrorKind::BackendFailure,
                  detail::cat("tune cache file '", path, "' is not writable by this user (",
                              std::strerror(errno), "); it is only read"));
  }
}

void write_file(const std::string& path, const FileRecords& records) {
  const fs::path target(path);
  check_writable(path);
  create_folder(target);
  struct stat existing {};
  const bool exists = ::lstat(path.c_str(), &existing) == 0;
  const std::string text = serialize_within_limit(records);
  remove_orphans(path);
  std::random_device entropy;
  const std::string temp =
      detail::cat(path, ".tmp-", static_cast<long>(::getpid()), "-", entropy());
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               exists ? 0600 : 0666));
  if (fd.get() < 0) os_failure("creating", temp, errno);
  try {
    take_mode(fd.get(), exists ? &existing : nullptr);
    write_all(fd.get(), text, temp);
    if (::fsync(fd.get()) != 0) os_failure("flushing", temp, errno);
    if (fd.close() != 0) os_failure("closing", temp, errno);
    if (::rename(temp.c_str(), path.c_str()) != 0) os_failure("renaming over", path, errno);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  Fd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

void write_document(const std::string& path, const FileRecords& records) {
  const std::string resolved = resolve_path(path);
  // Checked before the lock, so that nothing is created beside a file that is not replaced, and
  // again under it.
  auto check = [&] {
    const Text current = read_text("cache file", resolved);
    if (current.state == FileState::unusable) throw through_link(*current.problem, path, resolved);
    if (current.state == FileState::ok && owner_of(current.text) != Owner::ours) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("'", path,
                                "' exists and is not a dnnx cache file of this version; it is "
                                "left untouched (remove it or choose another name)"));
    }
  };
  check();
  FileLock lock(resolved, FileLock::Kind::exclusive);
  check();
  write_file(resolved, records);
}

void append_journal(const std::string& path, const FileRecords& records, const UseTimes& uses) {
  const std::string journal = journal_path(path);
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  struct stat file {};
  const bool file_exists = ::stat(path.c_str(), &file) == 0 && S_ISREG(file.st_mode);
  int opened = ::open(journal.c_str(), flags);
  const bool create = opened < 0 && errno == ENOENT;
  if (create) opened = ::open(journal.c_str(), flags | O_CREAT | O_EXCL, file_exists ? 0600 : 0666);
  if (opened < 0) os_failure(create ? "creating" : "opening", journal, errno);
  Fd fd(opened);
  if (create) take_mode(fd.get(), file_exists ? &file : nullptr);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) os_failure("reading", journal, errno);
  if (!S_ISREG(info.st_mode)) throw not_regular("tune cache journal", journal, info.st_mode);
  const std::string header = journal_header();
  auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > 0) {
    // Whose journal is it, and did a killed writer leave an incomplete last line?
    std::string head(header.size(), '\0');
    const ssize_t n = ::pread(fd.get(), head.data(), head.size(), 0);
    if (n < 0) os_failure("reading", journal, errno);
    head.resize(static_cast<std::size_t>(n));
    if (head != header && !(size < header.size() && std::string_view(header).starts_with(head))) {
      detail::raise(
          ErrorKind::InvalidArgument,
          detail::cat("tune cache journal '", journal,
                      "' does not start with dnnx's journal header; it is left untouched"));
    }
    // Keep everything up to the last newline.
    std::uint64_t keep = size;
    char chunk[4096];
    while (keep > 0) {
      const std::uint64_t from = keep > sizeof chunk ? keep - sizeof chunk : 0;
      const ssize_t got = ::pread(fd.get(), chunk, keep - from, static_cast<off_t>(from));
      if (got != static_cast<ssize_t>(keep - from)) os_failure("reading", journal, errno);
      const std::string_view part(chunk, static_cast<std::size_t>(got));
      const std::size_t newline = part.rfind('\n');
      if (newline != std::string_view::npos) {
        keep = from + newline + 1;
        break;
      }
      keep = from;
    }
    if (keep < header.size()) keep = 0;  // not even the header is complete
    if (keep != size && ::ftruncate(fd.get(), static_cast<off_t>(keep)) != 0)
      os_failure("truncating", journal, errno);
    size = keep;
  }
  std::string text = size == 0 ? header : std::string();
  for (const auto& [key, record] : records) text += to_json(key, record).dump() + "\n";
  for (const auto& [key, when] : uses)
    text += json{{"key", key}, {"last_used", when}}.dump() + "\n";
  if (::lseek(fd.get(), static_cast<off_t>(size), SEEK_SET) < 0)
    os_failure("seeking", journal, errno);
  write_all(fd.get(), text, journal);
  if (::fsync(fd.get()) != 0) os_failure("flushing", journal, errno);
}

void remove_journal(const std::string& path) {
  const std::string journal = journal_path(path);
  struct stat info {};
  if (::lstat(journal.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return;
  if (::unlink(journal.c_str()) != 0) os_failure("removing", journal, errno);
}

bool prefer_journal(std::uint64_t file_bytes, std::uint64_t journal_bytes) {
  return file_bytes + journal_bytes >= compact_below && journal_bytes < file_bytes / 4;
}

// Temporary files are `<file>.tmp-<pid>-<random>`; under the exclusive lock no writer is
// writing one, so any that exists was left by a writer that died (Note [journal]).
void remove_orphans(const std::string& path) {
  const fs::path target(path);
  const std::string prefix = target.filename().string() + ".tmp-";
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  auto temp_suffix = [](std::string_view suffix) {
    const std::size_t dash = suffix.find('-');
    auto digits = [](std::string_view s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    return dash != std::string_view::npos && digits(suffix.substr(0, dash)) &&
           digits(suffix.substr(dash + 1));
  };
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !temp_suffix(std::string_view(name).substr(prefix.size())))
      continue;
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) == 0 && S_ISREG(info.st_mode))
      ::unlink(it->path().c_str());
  }
}

std::pair<std::uint64_t, std::uint64_t> file_sizes(const std::string& path) {
  auto size_of = [](const std::string& name) -> std::uint64_t {
    struct stat info {};
    if (::stat(name.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return 0;
    return static_cast<std::uint64_t>(info.st_size);
  };
  return {size_of(path), size_of(journal_path(path))};
}

}  // namespace dnnx::tune
