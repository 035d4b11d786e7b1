#pragma once
// The tuning cache's file: JSON serialisation, the advisory lock, atomic replacement, and what
// happens to files that cannot be read (they are renamed aside, never silently dropped).

#include <dnnx/algo.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::tune {

/// One persisted choice.
struct FileRecord {
  std::shared_ptr<const Choice> choice;  ///< key, algo, timings summary, environment...
  std::int64_t last_used = 0;            ///< seconds since the epoch, for the LRU bound
};

/// Records by key.
using FileRecords = std::map<std::string, FileRecord>;

/// Text of a cache file holding `records`.
std::string serialize(const FileRecords& records);
/// Parses a cache file's text; throws Error(InvalidArgument) saying what is wrong (not JSON,
/// wrong schema or version, a malformed entry).
FileRecords parse(std::string_view text);

/// Merges `from` into `into`: per key the later measurement wins; last_used is the later of both.
void merge(FileRecords& into, const FileRecords& from);
/// Drops the least recently used records beyond `max_entries`; returns how many were dropped.
std::size_t prune(FileRecords& records, std::size_t max_entries);

/// Outcome of reading a cache file.
struct ReadResult {
  FileRecords records;
  bool set_aside = false;  ///< the file was unreadable and has been renamed
};

/// An exclusive (writer) or shared (reader) advisory lock on `<path>.lock`, held while alive.
class FileLock {
 public:
  FileLock(const std::string& path, bool exclusive);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

/// Reads `path` (a missing or empty-named file reads as no records). An unreadable file — corrupt,
/// truncated, empty, wrong schema — is reported once on stderr and renamed to
/// `<path>.corrupt-<unix time>`. Call with an exclusive FileLock held.
ReadResult read_file(const std::string& path);
/// Replaces `path` atomically (temp file in the same folder, fsync, rename, fsync of the folder),
/// creating missing folders. Call with an exclusive FileLock held. Throws Error(BackendFailure)
/// with the OS error on failure.
void write_file(const std::string& path, const FileRecords& records);

/// "2026-11-22T01:20:00Z".
std::string format_time(std::int64_t unix_seconds);
/// Seconds since the epoch now.
std::int64_t now_seconds();

}  // namespace dnnx::tune
