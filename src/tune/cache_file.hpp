#pragma once
// The tuning cache's file: JSON serialisation, the advisory lock, the journal of appended entries,
// atomic replacement, and the rules on which files are read, written or set aside (Note [whose
// file], Note [bounded reads], Note [journal] in cache_file.cpp).

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
/// Last-use times by key (seconds since the epoch), recorded without the choice.
using UseTimes = std::map<std::string, std::int64_t>;

/// Largest cache file, or journal, that is read: bytes (Note [bounded reads]).
inline constexpr std::uint64_t max_file_bytes = std::uint64_t{256} << 20;

/// Text of a cache file holding `records`: schema and version first, one entry per line.
std::string serialize(const FileRecords& records);

/// What a cache file's text holds.
struct Parsed {
  FileRecords records;
  /// One message per entry that was rejected and skipped: "entry 3 ('<key>'): field
  /// 'algo.workspace_bytes' is -5; accepted: an integer from 0 to ...".
  std::vector<std::string> dropped;
};
/// Parses a cache file's text. Throws Error(InvalidArgument) saying what is wrong with the
/// document (not JSON, wrong schema or version, no entries array); a malformed or out-of-range
/// entry is skipped and described in `dropped`.
Parsed parse_document(std::string_view text);
/// As parse_document, but a malformed entry throws Error(InvalidArgument) too.
FileRecords parse(std::string_view text);

/// Whose file a text is (Note [whose file]).
enum class Owner : std::uint8_t {
  ours,           ///< a dnnx cache document of this schema version, maybe truncated; or empty
  other_version,  ///< a dnnx cache document of another schema version
  foreign,        ///< anything else: never renamed, replaced or written
};
Owner owner_of(std::string_view text);

/// Merges `from` into `into`: per key the later measurement wins; last_used is the later of both.
void merge(FileRecords& into, const FileRecords& from);
/// Raises the last_used of the records named in `uses`.
void apply_uses(FileRecords& records, const UseTimes& uses);
/// Drops the least recently used records beyond `max_entries`; returns how many were dropped.
std::size_t prune(FileRecords& records, std::size_t max_entries);

/// The file a cache path stands for: symbolic links followed to their final target, which need
/// not exist (Note [whose file]). Throws Error(InvalidArgument) naming `path` on a link loop.
std::string resolve_path(const std::string& path);

/// How a read of one file went.
enum class FileState : std::uint8_t {
  missing,   ///< no file: no records
  ok,        ///< read (entries that were rejected are in `dropped`)
  corrupt,   ///< a file of ours that cannot be parsed: a writer sets it aside
  unusable,  ///< not ours to read or change (not a regular file, foreign, too large, no access)
};

/// Outcome of reading a cache file and its journal.
struct ReadResult {
  FileRecords records;
  FileState state = FileState::missing;  ///< the cache file's
  std::optional<Error> problem;          ///< why the cache file is corrupt or unusable, naming it
  FileState journal_state = FileState::missing;  ///< the journal's (never corrupt: bad lines are
                                                 ///< dropped)
  std::optional<Error> journal_problem;          ///< why the journal is unusable, naming it
  std::vector<std::string> dropped;              ///< rejected entries and journal lines
  std::uint64_t file_bytes = 0;                  ///< size of the cache file read
  std::uint64_t journal_bytes = 0;               ///< size of the journal read
};

/// Reads the cache file at `path` (already resolved) and its journal `<path>.journal`, the journal
/// first (Note [journal]). Only regular files are opened, never blocking, and only up to
/// max_file_bytes (Note [bounded reads]). Never changes anything.
ReadResult read_cache(const std::string& path);

/// `error` about the file a link at `path` resolves to, saying so ("'<path>' is a link to
/// '<resolved>': ..."); `error` itself when `path` is no link.
Error through_link(const Error& error, const std::string& path, const std::string& resolved);

/// Reads the cache document at `path` (symbolic links followed) for an import: throws
/// Error(InvalidArgument) naming the path when it is missing, not a regular file, too large, or
/// not a cache document. Never changes anything.
Parsed read_document(const std::string& path);

/// Renames the cache file `path` of ours that cannot be parsed to a new name
/// `<path>.corrupt-<unix time>-<pid>[-<n>]`, never over an existing file; returns that name.
/// Call with an exclusive FileLock held. Throws Error(BackendFailure) with the OS error.
std::string set_aside(const std::string& path);

/// An advisory lock on `<path>.lock` (`path` resolved), held while alive.
class FileLock {
 public:
  enum class Kind : std::uint8_t {
    exclusive,  ///< a writer's: creates the folder and the lock file; throws when it cannot
    shared,     ///< a reader's, when the lock file exists and opens; creates nothing, never throws
  };
  FileLock(const std::string& path, Kind kind);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  /// Whether the lock is held (a shared lock may not be).
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// Throws Error naming `path` when the cache file exists and may not be replaced: it is not a
/// regular file (InvalidArgument), or this user may not write it (BackendFailure).
void check_writable(const std::string& path);

/// Replaces the cache file `path` (resolved) atomically: a temporary file in the same folder,
/// fsync, rename, fsync of the folder. The mode (and, for root, the owner) of the file it replaces
/// are kept; temporary files left by writers that died are removed. Call with an exclusive
/// FileLock held. Throws Error(BackendFailure) with the OS error on failure.
void write_file(const std::string& path, const FileRecords& records);

/// Writes `records` to `path` (symbolic links followed), e.g. an export: replaces a missing or
/// empty file or a cache document, nothing else (Error(InvalidArgument) naming the path). Takes
/// the lock itself.
void write_document(const std::string& path, const FileRecords& records);

/// Appends `records` and `uses` to the journal of `path` (resolved), creating it if needed, and
/// drops an incomplete last line a killed writer left (Note [journal]). Call with an exclusive
/// FileLock held. Throws Error(BackendFailure) with the OS error on failure.
void append_journal(const std::string& path, const FileRecords& records, const UseTimes& uses);
/// Removes the journal of `path` (after its entries went into the file). Exclusive lock held.
void remove_journal(const std::string& path);
/// Whether a writer appends to the journal (true) or merges it into a rewritten file, given the
/// sizes of both now (Note [journal]).
bool prefer_journal(std::uint64_t file_bytes, std::uint64_t journal_bytes);
/// Removes the temporary files `<path>.tmp-<pid>-<n>` that writers killed while writing left
/// behind (regular files only). Exclusive lock held: then no writer is writing one.
void remove_orphans(const std::string& path);
/// Sizes of the cache file and its journal now (0 when missing).
std::pair<std::uint64_t, std::uint64_t> file_sizes(const std::string& path);

/// "2026-11-22T01:20:00Z".
std::string format_time(std::int64_t unix_seconds);
/// Seconds since the epoch now.
std::int64_t now_seconds();

}  // namespace dnnx::tune
