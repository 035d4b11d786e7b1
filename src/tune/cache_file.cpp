#include "tune/cache_file.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

namespace dnnx::tune {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* schema_name = "dnnx.tune-cache";

json number_or_null(double value) { return std::isnan(value) ? json(nullptr) : json(value); }

double number_or_nan(const json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

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
  }
  return out;
}

CandidateStatus parse_status(const std::string& text) {
  for (const CandidateStatus status :
       {CandidateStatus::ok, CandidateStatus::unsupported, CandidateStatus::over_workspace_limit,
        CandidateStatus::not_deterministic, CandidateStatus::failed, CandidateStatus::abandoned,
        CandidateStatus::not_timed}) {
    if (to_string(status) == text) return status;
  }
  detail::raise(ErrorKind::InvalidArgument, detail::cat("unknown candidate status '", text, "'"));
}

std::vector<ProfileRow> timings_from(const json& rows) {
  DNNX_CHECK_ARG(rows.is_array(), "'timings' is not an array");
  std::vector<ProfileRow> out;
  for (const json& row : rows) {
    ProfileRow parsed;
    parsed.algo.id = row.at("id").get<std::string>();
    parsed.algo.supported = true;
    parsed.status = parse_status(row.at("status").get<std::string>());
    parsed.median_ms = number_or_nan(row.at("median_ms"));
    parsed.min_ms = number_or_nan(row.at("min_ms"));
    parsed.runs = row.at("runs").get<int>();
    parsed.algo.workspace_bytes = row.at("workspace_bytes").get<std::size_t>();
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
  return {{"key", key},
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
}

FileRecord from_json(const json& entry, std::string& key) {
  auto choice = std::make_shared<Choice>();
  key = entry.at("key").get<std::string>();
  DNNX_CHECK_ARG(!key.empty(), "entry has an empty key");
  choice->key = key;
  choice->op = entry.at("op").get<std::string>();
  choice->direction = parse_direction(entry.at("direction").get<std::string>());
  choice->policy = AlgoPolicy::parse(entry.at("policy").get<std::string>());
  const json& algo = entry.at("algo");
  choice->algo.id = algo.at("id").get<std::string>();
  DNNX_CHECK_ARG(!choice->algo.id.empty(), "entry '", key, "' has an empty algorithm id");
  choice->algo.name = algo.at("name").get<std::string>();
  choice->algo.supported = true;
  choice->algo.workspace_bytes = algo.at("workspace_bytes").get<std::size_t>();
  choice->algo.deterministic = algo.at("deterministic").get<bool>();
  choice->algo.notes = algo.at("notes").get<std::vector<std::string>>();
  choice->algo.families = algo.at("families").get<std::vector<std::string>>();
  choice->algo.priority = algo.at("priority").get<int>();
  choice->time_ms = number_or_nan(entry.at("time_ms"));
  choice->timings = timings_from(entry.at("timings"));
  choice->runner_up = entry.at("runner_up").get<std::string>();
  choice->runner_up_ms = number_or_nan(entry.at("runner_up_ms"));
  choice->tuning_ms = entry.at("tuning_ms").get<double>();
  choice->candidates_timed = entry.at("candidates_timed").get<int>();
  choice->backend = entry.at("backend").get<std::string>();
  choice->fingerprint = entry.at("fingerprint").get<std::string>();
  const json& environment = entry.at("environment");
  DNNX_CHECK_ARG(environment.is_object(), "entry '", key, "' has a non-object environment");
  choice->environment = environment.dump();
  choice->measured_at = entry.at("measured_at").get<std::int64_t>();
  choice->from_file = true;
  FileRecord record;
  record.last_used = entry.at("last_used").get<std::int64_t>();
  record.choice = std::move(choice);
  return record;
}

[[noreturn]] void os_failure(const std::string& what, const std::string& path) {
  detail::raise(ErrorKind::BackendFailure,
                detail::cat("tune cache: ", what, " '", path, "' failed: ", std::strerror(errno)));
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
  json doc{{"schema", schema_name},
           {"version", CacheFileOptions::schema_version},
           {"entries", json::array()}};
  for (const auto& [key, record] : records) doc["entries"].push_back(to_json(key, record));
  return doc.dump(1) + "\n";
}

FileRecords parse(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  DNNX_CHECK_ARG(!doc.is_discarded(), "not valid JSON (", text.size(), " bytes)");
  DNNX_CHECK_ARG(doc.is_object(), "the document is a JSON ", doc.type_name(), ", not an object");
  DNNX_CHECK_ARG(doc.contains("schema") && doc["schema"] == schema_name,
                 "schema is not '", schema_name, "'");
  DNNX_CHECK_ARG(doc.contains("version") && doc["version"].is_number_integer() &&
                     doc["version"].get<std::int64_t>() == CacheFileOptions::schema_version,
                 "schema version is not ", CacheFileOptions::schema_version);
  DNNX_CHECK_ARG(doc.contains("entries") && doc["entries"].is_array(), "'entries' is not an array");
  FileRecords records;
  std::size_t index = 0;
  for (const json& entry : doc["entries"]) {
    std::string key;
    try {
      DNNX_CHECK_ARG(entry.is_object(), "is a JSON ", entry.type_name());
      FileRecord record = from_json(entry, key);
      FileRecords one{{key, std::move(record)}};
      merge(records, one);
    } catch (const json::exception& error) {
      detail::raise(ErrorKind::InvalidArgument, detail::cat("entry ", index, ": ", error.what()));
    } catch (const Error& error) {
      detail::raise(ErrorKind::InvalidArgument, detail::cat("entry ", index, ": ", error.message()));
    }
    ++index;
  }
  return records;
}

void merge(FileRecords& into, const FileRecords& from) {
  for (const auto& [key, record] : from) {
    auto it = into.find(key);
    if (it == into.end()) {
      into.emplace(key, record);
      continue;
    }
    const std::int64_t last_used = std::max(it->second.last_used, record.last_used);
    if (record.choice->measured_at > it->second.choice->measured_at) it->second.choice = record.choice;
    it->second.last_used = last_used;
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

FileLock::FileLock(const std::string& path, bool exclusive) {
  const std::string lock_path = path + ".lock";
  std::error_code ignored;
  fs::create_directories(fs::path(lock_path).parent_path(), ignored);
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) os_failure("opening the lock file", lock_path);
  while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      os_failure("locking", lock_path);
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

ReadResult read_file(const std::string& path) {
  ReadResult result;
  std::ifstream in(path, std::ios::binary);
  if (!in) return result;  // no file yet
  std::ostringstream text;
  text << in.rdbuf();
  try {
    result.records = parse(text.str());
  } catch (const Error& error) {
    // Note [unreadable cache files]: never apply, never silently drop. The file is kept under
    // another name for inspection and the user is told once, whatever the verbosity.
    const std::string aside = path + ".corrupt-" + std::to_string(now_seconds());
    std::error_code rename_error;
    fs::rename(path, aside, rename_error);
    static std::mutex reported_mutex;
    static std::set<std::string> reported;
    std::lock_guard lock(reported_mutex);
    if (reported.insert(path).second) {
      std::cerr << "dnnx: tune cache file '" << path << "' is unreadable (" << error.message()
                << "); "
                << (rename_error ? "could not move it aside: " + rename_error.message()
                                 : "moved it to '" + aside + "'")
                << " and starting with an empty cache\n";
    }
    result.set_aside = !rename_error;
  }
  return result;
}

void write_file(const std::string& path, const FileRecords& records) {
  const fs::path target(path);
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code error;
  fs::create_directories(folder, error);
  std::random_device entropy;
  const std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(entropy());
  const std::string text = serialize(records);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) os_failure("creating", temp);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(temp.c_str());
      os_failure("writing", temp);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temp.c_str());
    os_failure("flushing", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    os_failure("renaming over", path);
  }
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace dnnx::tune
