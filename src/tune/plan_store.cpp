#include "tune/plan_store.hpp"

#include <dnnx/saved_plans.hpp>

#include "core/strings.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

namespace dnnx::tune {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view magic = "dnnx-plan 1\n";
constexpr std::string_view extension = ".plan";
constexpr std::string_view temporary_marker = ".plan.tmp-";

// FNV-1a, 64 bits: stable across builds and machines (the file names and checksums persist).
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string hex16(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Reads "<word> <n>[ <hex>]\n" at `pos`; false if the text does not continue so.
bool read_header(std::string_view text, std::size_t& pos, std::string_view word, std::size_t& n,
                 std::string* checksum) {
  if (text.substr(pos, word.size()) != word) return false;
  pos += word.size();
  if (pos >= text.size() || text[pos] != ' ') return false;
  ++pos;
  const std::size_t start = pos;
  n = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (pos - start >= 15) return false;  // no plan is a petabyte
    n = n * 10 + static_cast<std::size_t>(text[pos] - '0');
    ++pos;
  }
  if (pos == start) return false;
  if (checksum != nullptr) {
    if (pos + 17 > text.size() || text[pos] != ' ') return false;
    *checksum = std::string(text.substr(pos + 1, 16));
    pos += 17;
  }
  if (pos >= text.size() || text[pos] != '\n') return false;
  ++pos;
  return true;
}

bool is_plan_file(const fs::path& path) { return path.extension() == extension; }

bool is_temporary(const fs::path& path) {
  return path.filename().string().find(temporary_marker) != std::string::npos;
}

}  // namespace

std::string PlanStore::path_of(std::string_view key) const {
  return (fs::path(folder_) / (hex16(fnv1a(key)) + std::string(extension))).string();
}

std::string PlanStore::encode(std::string_view key, std::string_view payload) {
  std::string text(magic);
  text += detail::cat("key ", key.size(), '\n');
  text += key;
  text += detail::cat("\npayload ", payload.size(), ' ', hex16(fnv1a(payload)), '\n');
  text += payload;
  return text;
}

std::optional<std::string> PlanStore::decode(std::string_view text, std::string_view key,
                                             std::string* problem) {
  auto fail = [problem](std::string why) -> std::optional<std::string> {
    if (problem != nullptr) *problem = std::move(why);
    return std::nullopt;
  };
  if (text.substr(0, magic.size()) != magic) return fail("not a dnnx plan file (bad first line)");
  std::size_t pos = magic.size();
  std::size_t key_bytes = 0;
  if (!read_header(text, pos, "key", key_bytes, nullptr) || key_bytes > text.size() - pos)
    return fail("malformed key record");
  if (text.substr(pos, key_bytes) != key) return fail("it holds the plan of another key");
  pos += key_bytes;
  if (pos >= text.size() || text[pos] != '\n') return fail("malformed key record");
  ++pos;
  std::size_t payload_bytes = 0;
  std::string checksum;
  if (!read_header(text, pos, "payload", payload_bytes, &checksum))
    return fail("malformed payload record");
  if (text.size() - pos != payload_bytes) {
    return fail(detail::cat("truncated or extended: the payload has ", text.size() - pos,
                            " bytes, the record says ", payload_bytes));
  }
  const std::string_view payload = text.substr(pos);
  if (hex16(fnv1a(payload)) != checksum) return fail("checksum mismatch (corrupt payload)");
  return std::string(payload);
}

std::optional<std::string> PlanStore::load(std::string_view key, std::string* problem) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;  // no plan saved
  std::ostringstream buffer;
  buffer << in.rdbuf();
  in.close();
  std::string why;
  std::optional<std::string> payload = decode(buffer.str(), key, &why);
  if (!payload) {
    remove(key);
    if (problem != nullptr) *problem = detail::cat("saved plan ", path, " dropped: ", why);
  }
  return payload;
}

bool PlanStore::save(std::string_view key, std::string_view payload, std::string* problem) const {
  if (!enabled()) return false;
  auto fail = [problem](std::string why) {
    if (problem != nullptr) *problem = std::move(why);
    return false;
  };
  std::error_code error;
  fs::create_directories(folder_, error);
  if (error)
    return fail(detail::cat("cannot create the plan folder ", folder_, ": ", error.message()));
  const std::string path = path_of(key);
  // A name no other writer uses: process id, thread and a counter.
  static std::atomic<std::uint64_t> counter{0};
  const std::string temporary = detail::cat(
      path, temporary_marker.substr(std::string_view(".plan").size()), ::getpid(), '-',
      std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000, '-', ++counter);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    const std::string text = encode(key, payload);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(temporary, error);
      return fail(detail::cat("cannot write the saved plan ", temporary));
    }
  }
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return fail(detail::cat("cannot rename ", temporary, " to ", path, ": ", error.message()));
  }
  return true;
}

bool PlanStore::remove(std::string_view key) const {
  if (!enabled()) return false;
  std::error_code error;
  return fs::remove(path_of(key), error);
}

PlanStore::Summary PlanStore::summarize(const std::string& folder) {
  Summary summary;
  std::error_code error;
  if (folder.empty() || !fs::is_directory(folder, error)) return summary;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    if (!entry.is_regular_file(error) || !is_plan_file(entry.path())) continue;
    ++summary.files;
    const auto size = entry.file_size(error);
    if (!error) summary.bytes += static_cast<std::size_t>(size);
  }
  return summary;
}

std::size_t PlanStore::clear(const std::string& folder) {
  std::size_t removed = 0;
  std::error_code error;
  if (folder.empty() || !fs::is_directory(folder, error)) return 0;
  std::vector<fs::path> doomed;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    if (!entry.is_regular_file(error)) continue;
    if (is_plan_file(entry.path()) || is_temporary(entry.path())) doomed.push_back(entry.path());
  }
  for (const fs::path& path : doomed) {
    const bool plan = is_plan_file(path);
    if (fs::remove(path, error) && plan) ++removed;
  }
  return removed;
}

std::string PlanStore::folder_for(const CacheFileOptions& cache) {
  if (cache.mode == CacheMode::off || cache.path.empty()) return {};
  return cache.path + ".plans";
}

std::string PlanStore::folder_from_env(const CacheFileOptions& cache) {
  const char* value = std::getenv("DNNX_PLAN_DIR");
  if (value != nullptr && *value != '\0') {
    const std::string text = detail::lower(value);
    if (text == "off" || text == "0" || text == "none") return {};
    return value;
  }
  return folder_for(cache);
}

}  // namespace dnnx::tune

namespace dnnx {

SavedPlans saved_plans(const CacheFileOptions& cache) {
  SavedPlans plans;
  plans.folder = tune::PlanStore::folder_from_env(cache);
  const tune::PlanStore::Summary summary = tune::PlanStore::summarize(plans.folder);
  plans.files = summary.files;
  plans.bytes = summary.bytes;
  return plans;
}

std::size_t clear_saved_plans(const CacheFileOptions& cache) {
  return tune::PlanStore::clear(tune::PlanStore::folder_from_env(cache));
}

}  // namespace dnnx
