// The choice cache's file never stands in the way and never harms a file it does not own:
// unusable locations, read-only folders, files that are not regular, links, modes, bounded reads,
// the journal that keeps big files from being rewritten, temporary files of killed writers, and
// which texts count as dnnx's own (src/tune/cache_file.cpp, Note [whose file], Note [journal]).

#include "tune/cache_file.hpp"

#include <dnnx/dnnx.hpp>

#include "cache_folder.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace dnnx;
using testing_cache::As;
using testing_cache::fake_choice;

// "k<i>" (not "k" + std::to_string(i), about which GCC 12 warns wrongly with -Wrestrict).
std::string key_of(int i) {
  std::string key = "k";
  key += std::to_string(i);
  return key;
}

class CacheFileTest : public testing_cache::CacheFolderTest {
 protected:
  // A context on the reference backend whose choices go to `cache`, selecting exhaustively.
  static Context context_with(std::shared_ptr<ChoiceCache> cache) {
    Context context(BackendKind::reference);
    context.set_choice_cache(std::move(cache));
    context.tune().fwd = AlgoPolicy::exhaustive();
    return context;
  }

  // A cache file holding `count` entries "k0", "k1", ... with `rows` timing rows each.
  void write_entries(const std::string& path, int count, int rows = 0) {
    tune::FileRecords records;
    for (int i = 0; i < count; ++i) {
      const std::string key = key_of(i);
      records.emplace(key, tune::FileRecord{fake_choice(key, "fake:a", 100 + i, rows), 100 + i});
    }
    tune::write_file(path, records);
  }

  static mode_t mode_of(const std::string& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return info.st_mode & 07777;
  }
};

ConvDesc small_desc(std::int64_t channels = 4) {
  return ConvDesc::from_shapes(Dims{2, channels, 9, 9}, Dims{6, channels, 3, 3}, {1}, {1});
}

// In a child process: "" when `condition` holds, else `what`.
std::string unless(bool condition, const std::string& what) { return condition ? "" : what; }

TEST_F(CacheFileTest, ReadOnlyFolderIsReadAndNothingIsCreatedInIt) {
  write_entries(file(), 2);
  const fs::path writable = folder_ / "writable";
  fs::create_directories(writable);
  fs::permissions(writable, fs::perms::all);
  fs::permissions(folder_, fs::perms::owner_write, fs::perm_options::remove);
  const std::string before = read(file());
  DNNX_EXPECT_CHILD_PASSES(As::unprivileged, [&]() -> std::string {
    {
      ChoiceCache reader(options(CacheMode::read));
      if (reader.find("k0") == nullptr) return "read mode: k0 not loaded";
      const CacheFileStats stats = reader.file_stats();
      if (stats.in_force != CacheMode::read || !stats.problem.empty())
        return "read mode degraded: " + stats.problem;
    }
    ::testing::internal::CaptureStderr();
    {
      ChoiceCache cache(options());
      if (cache.find("k1") == nullptr) return "readwrite mode: k1 not loaded";
      cache.insert("new1", fake_choice("new1", "fake:b", 300));
      cache.insert("new2", fake_choice("new2", "fake:b", 301));
      const CacheFileStats stats = cache.file_stats();
      if (stats.in_force != CacheMode::read) return "an unwritable folder must lower the mode";
      if (stats.problem.find(folder_.string()) == std::string::npos ||
          stats.problem.find("Permission denied") == std::string::npos)
        return "the problem must name the folder and the reason: " + stats.problem;
      if (cache.find("new2") == nullptr) return "new choices stay in memory";
      try {
        cache.prune(1);
        return "an explicit prune of an unwritable file must throw";
      } catch (const Error& error) {
        if (error.message().find(folder_.string()) == std::string::npos)
          return "prune's error must name the path: " + error.message();
      }
    }
    const std::string log = ::testing::internal::GetCapturedStderr();
    const auto lines = std::count(log.begin(), log.end(), '\n');
    if (lines != 1) return "expected one warning, got:\n" + log;
    // Importing from the read-only folder into a cache of one's own.
    ChoiceCache mine(CacheFileOptions{CacheMode::readwrite, (writable / "mine.json").string()});
    if (mine.import_file(file()) != 2) return "import from a read-only folder failed";
    if (tune::parse(read((writable / "mine.json").string())).size() != 2)
      return "the import was not written";
    return "";
  });
  fs::permissions(folder_, fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(read(file()), before);
  EXPECT_EQ(listing(folder_), "tune.json writable") << "nothing may be created in the folder";
}

TEST_F(CacheFileTest, ReadersTakeTheSharedLockWhenTheLockFileExists) {
  write_entries(file(), 1);
  { std::ofstream(file() + ".lock") << ""; }
  ::chmod((file() + ".lock").c_str(), 0644);
  // A writer waits for a reader's lock: a shared lock held here delays the exclusive one.
  auto lock = std::make_unique<tune::FileLock>(file(), tune::FileLock::Kind::shared);
  ASSERT_TRUE(lock->held());
  std::atomic<bool> written{false};
  std::thread writer([&] {
    ChoiceCache cache(options());
    cache.insert("late", fake_choice("late", "fake:a", 500));
    written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(written) << "the writer must wait for the shared lock";
  lock.reset();
  writer.join();
  EXPECT_EQ(tune::parse(read(file())).count("late"), 1u);
  // A user who may not write the lock file still takes the shared lock through it.
  DNNX_EXPECT_CHILD_PASSES(As::unprivileged, [&]() -> std::string {
    tune::FileLock shared(file(), tune::FileLock::Kind::shared);
    if (!shared.held()) return "the shared lock was not taken";
    ChoiceCache reader(options(CacheMode::read));
    return unless(reader.find("k0") != nullptr, "k0 not loaded with a read-only lock file");
  });
}

TEST_F(CacheFileTest, UnwritableLocationNeverFailsSelection) {
  // A folder that is a file: every user meets it, root included.
  { std::ofstream(file("not-a-folder")) << "x"; }
  const std::string under_a_file = file("not-a-folder") + "/dnnx/tune.json";
  ::testing::internal::CaptureStderr();
  auto cache = std::make_shared<ChoiceCache>(CacheFileOptions{CacheMode::readwrite, under_a_file});
  Context context = context_with(cache);
  EXPECT_NO_THROW(conv_select(context, small_desc(4), Direction::fwd));
  EXPECT_NO_THROW(conv_select(context, small_desc(5), Direction::fwd));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << "one warning:\n" << log;
  EXPECT_NE(log.find("not-a-folder"), std::string::npos) << log;
  EXPECT_EQ(cache->size(), 2u) << "choices stay in memory";
  EXPECT_EQ(read(file("not-a-folder")), "x");
  // Once the location is fixed, a reload uses the file again.
  fs::remove(file("not-a-folder"));
  cache->reload();
  EXPECT_EQ(cache->file_stats().in_force, CacheMode::readwrite);
  EXPECT_EQ(cache->file_stats().problem, "");
  conv_select(context, small_desc(6), Direction::fwd);
  EXPECT_EQ(tune::parse(read(under_a_file)).size(), 1u);

  // A folder this user may not create: the unprivileged child.
  DNNX_EXPECT_CHILD_PASSES(As::unprivileged, [&]() -> std::string {
    ::testing::internal::CaptureStderr();
    auto cache = std::make_shared<ChoiceCache>(
        CacheFileOptions{CacheMode::readwrite, file("sub") + "/dnnx/tune.json"});
    Context context = context_with(cache);
    conv_select(context, small_desc(4), Direction::fwd);
    conv_select(context, small_desc(5), Direction::fwd);
    const std::string log = ::testing::internal::GetCapturedStderr();
    if (std::count(log.begin(), log.end(), '\n') != 1) return "expected one warning:\n" + log;
    return unless(log.find("Permission denied") != std::string::npos, "no reason given:\n" + log);
  });
  EXPECT_FALSE(fs::exists(file("sub")));
}

TEST_F(CacheFileTest, NonRegularFilesAreNeverReadReplacedOrSetAside) {
  fs::create_directories(file("folder.json"));
  ASSERT_EQ(::mkfifo(file("fifo.json").c_str(), 0644), 0);
  fs::create_symlink("/dev/null", file("null.json"));
  for (const std::string name : {"folder.json", "fifo.json", "null.json"}) {
    SCOPED_TRACE(name);
    const std::string path = file(name);
    // A child, so that a read blocking on the FIFO fails the test instead of hanging it.
    DNNX_EXPECT_CHILD_PASSES(As::this_user, [&]() -> std::string {
      ::testing::internal::CaptureStderr();
      auto cache = std::make_shared<ChoiceCache>(CacheFileOptions{CacheMode::readwrite, path});
      Context context = context_with(cache);
      conv_select(context, small_desc(), Direction::fwd);
      ::testing::internal::GetCapturedStderr();
      const CacheFileStats stats = cache->file_stats();
      if (stats.in_force != CacheMode::off) return "the cache must run in memory only";
      if (stats.problem.find("not a regular file") == std::string::npos)
        return "problem: " + stats.problem;
      try {
        cache->export_file(path);
        return "export over a non-regular file must throw";
      } catch (const Error& error) {
        if (error.kind() != ErrorKind::InvalidArgument ||
            error.message().find(path) == std::string::npos)
          return std::string("export: ") + error.what();
      }
      try {
        ChoiceCache other;
        other.import_file(path);
        return "import of a non-regular file must throw";
      } catch (const Error& error) {
        if (error.message().find("not a regular file") == std::string::npos)
          return std::string("import: ") + error.what();
      }
      CacheFileOptions strict{CacheMode::read, path};
      strict.on_problem = FileProblem::raise;
      try {
        ChoiceCache raising(strict);
        return "FileProblem::raise must throw";
      } catch (const Error&) {
      }
      return "";
    });
  }
  EXPECT_TRUE(fs::is_directory(file("folder.json")));
  EXPECT_TRUE(fs::is_empty(file("folder.json")));
  EXPECT_TRUE(fs::is_fifo(file("fifo.json")));
  EXPECT_TRUE(fs::is_symlink(file("null.json")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(listing(folder_), "fifo.json folder.json null.json");

  // Reading /dev/zero ends at once; so does a lock file that is a FIFO.
  DNNX_EXPECT_CHILD_PASSES(As::this_user, [&]() -> std::string {
    ChoiceCache cache;
    try {
      cache.import_file("/dev/zero");
      return "import of /dev/zero must throw";
    } catch (const Error& error) {
      if (error.message().find("/dev/zero") == std::string::npos) return error.what();
    }
    return "";
  });
  ASSERT_EQ(::mkfifo((file() + ".lock").c_str(), 0644), 0);
  DNNX_EXPECT_CHILD_PASSES(As::this_user, [&]() -> std::string {
    ::testing::internal::CaptureStderr();
    ChoiceCache cache(options());
    cache.insert("k", fake_choice("k", "fake:a", 10));
    ::testing::internal::GetCapturedStderr();
    return unless(cache.file_stats().in_force == CacheMode::read,
                  "a FIFO lock file must stop writes: " + cache.file_stats().problem);
  });
  EXPECT_TRUE(fs::is_fifo(file() + ".lock"));
  EXPECT_FALSE(fs::exists(file()));
}

TEST_F(CacheFileTest, OversizedFileIsLeftUntouched) {
  { std::ofstream(file()) << R"({"schema": "dnnx.tune-cache", "version": 1, "entries": [)"; }
  fs::resize_file(file(), tune::max_file_bytes + 1);  // sparse: costs no disk
  ::testing::internal::CaptureStderr();
  ChoiceCache cache(options());
  cache.insert("k", fake_choice("k", "fake:a", 10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.file_stats().in_force, CacheMode::off);
  EXPECT_NE(log.find("more than the"), std::string::npos) << log;
  EXPECT_EQ(fs::file_size(file()), tune::max_file_bytes + 1);
  EXPECT_EQ(listing(folder_), "tune.json");
  ChoiceCache other;
  EXPECT_THROW(other.import_file(file()), Error);
}

TEST_F(CacheFileTest, LinksAreWrittenThroughAndModeAndOwnerAreKept) {
  fs::create_directories(folder_ / "real");
  fs::create_directories(folder_ / "links");
  const std::string target = (folder_ / "real" / "tune.json").string();
  write_entries(target, 1);
  ASSERT_EQ(::chmod(target.c_str(), 0640), 0);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(target.c_str(), 65534, 65534), 0);
  }
  const std::string link = (folder_ / "links" / "tune.json").string();
  fs::create_symlink("../real/tune.json", link);
  {
    ChoiceCache cache(CacheFileOptions{CacheMode::readwrite, link});
    EXPECT_NE(cache.find("k0"), nullptr);
    cache.insert("new", fake_choice("new", "fake:b", 200));
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(tune::parse(read(target)).count("new"), 1u);
  EXPECT_EQ(mode_of(target), 0640u);
  if (root) {
    struct stat info {};
    ASSERT_EQ(::stat(target.c_str(), &info), 0);
    EXPECT_EQ(info.st_uid, 65534u);
  }
  EXPECT_EQ(listing(folder_ / "links"), "tune.json");
  EXPECT_EQ(listing(folder_ / "real"), "tune.json tune.json.lock");

  // A dangling link: the file is made where it points.
  const std::string dangling = (folder_ / "links" / "later.json").string();
  fs::create_symlink("../real/later.json", dangling);
  ChoiceCache(CacheFileOptions{CacheMode::readwrite, dangling})
      .insert("k", fake_choice("k", "fake:a", 1));
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(tune::parse(read((folder_ / "real" / "later.json").string())).count("k"), 1u);

  // Export through a link keeps it too.
  ChoiceCache(CacheFileOptions{CacheMode::read, target}).export_file(dangling);
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(tune::parse(read(dangling)).size(), 2u);
}

TEST_F(CacheFileTest, AFileWithoutWritePermissionIsOnlyRead) {
  write_entries(file(), 1);
  ASSERT_EQ(::chmod(file().c_str(), 0444), 0);
  if (::geteuid() == 0) {
    // Root may write it: the mode survives the rewrite.
    ChoiceCache(options()).insert("root", fake_choice("root", "fake:a", 5));
    EXPECT_EQ(tune::parse(read(file())).count("root"), 1u);
    EXPECT_EQ(mode_of(file()), 0444u);
    ASSERT_EQ(::chown(folder_.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chown(file().c_str(), 65534, 65534), 0);
  }
  const std::string before = read(file());
  DNNX_EXPECT_CHILD_PASSES(As::unprivileged, [&]() -> std::string {
    ::testing::internal::CaptureStderr();
    ChoiceCache cache(options());
    cache.insert("mine", fake_choice("mine", "fake:a", 6));
    ::testing::internal::GetCapturedStderr();
    if (cache.find("k0") == nullptr) return "the file must be read";
    return unless(cache.file_stats().problem.find("not writable") != std::string::npos,
                  "problem: " + cache.file_stats().problem);
  });
  EXPECT_EQ(read(file()), before);
}

TEST_F(CacheFileTest, TemporaryFilesOfKilledWritersAreRemovedByTheNextWriter) {
  for (const char* name : {"tune.json.tmp-999999-12345", "tune.json.tmp-1-2", "tune.json.tmp-mine",
                           "other.json.tmp-3-4"})
    std::ofstream(file(name)) << "partial";
  fs::create_directories(file("tune.json.tmp-5-6"));
  ChoiceCache(options()).insert("k", fake_choice("k", "fake:a", 1));
  EXPECT_EQ(listing(folder_),
            "other.json.tmp-3-4 tune.json tune.json.lock tune.json.tmp-5-6 tune.json.tmp-mine");
}

TEST_F(CacheFileTest, AWriterKilledMidWriteNeverLosesTheEntriesThatWereThere) {
  write_entries(file(), 50, 20);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ChoiceCache cache(options());
      for (int i = 0;; ++i) {
        const std::string key = "round" + std::to_string(round) + "-" + std::to_string(i);
        cache.insert(key, fake_choice(key, "fake:b", 1000 + i, 20));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 15 * round));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    const tune::ReadResult result = tune::read_cache(file());
    ASSERT_EQ(result.state, tune::FileState::ok) << (result.problem ? result.problem->what() : "");
    EXPECT_TRUE(result.dropped.empty());
    for (int i = 0; i < 50; ++i) EXPECT_EQ(result.records.count(key_of(i)), 1u) << i;
  }
  // The next writer removes what the killed ones left.
  ChoiceCache(options()).insert("last", fake_choice("last", "fake:a", 1));
  for (const auto& entry : fs::directory_iterator(folder_))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST_F(CacheFileTest, BigFilesAreNotRewrittenForEveryChoice) {
  // Over the size below which every write rewrites the file (Note [journal]).
  write_entries(file(), 800, 10);
  const auto file_bytes = fs::file_size(file());
  ASSERT_GT(file_bytes, std::uintmax_t{1} << 20);
  const std::string before = read(file());
  struct stat original {};
  ASSERT_EQ(::stat(file().c_str(), &original), 0);
  {
    ChoiceCache cache(options());
    cache.insert("new0", fake_choice("new0", "fake:b", 2000, 10));
    cache.insert("new1", fake_choice("new1", "fake:b", 2001, 10));
    ASSERT_NE(cache.find("k3"), nullptr);
    EXPECT_EQ(cache.file_stats().writes, 2u);
  }  // the use of k3 is recorded too
  struct stat after {};
  ASSERT_EQ(::stat(file().c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, original.st_ino) << "the file must not be replaced";
  EXPECT_EQ(read(file()), before);
  ASSERT_TRUE(fs::exists(file() + ".journal"));
  {
    ChoiceCache cache(options());
    EXPECT_NE(cache.find("new1"), nullptr);
    EXPECT_NE(cache.find("k799"), nullptr);
  }
  tune::ReadResult read_back = tune::read_cache(file());
  EXPECT_GT(read_back.records.at("k3").last_used, 103) << "the use went to the journal";

  // A writer killed while appending leaves half a line: readers skip it, the next writer cuts it.
  { std::ofstream(file() + ".journal", std::ios::app) << R"({"algo":{"id":"half)"; }
  read_back = tune::read_cache(file());
  EXPECT_TRUE(read_back.dropped.empty());
  EXPECT_EQ(read_back.records.count("new1"), 1u);
  std::ofstream(file("tune.json.tmp-1-1")) << "left by a killed compaction";
  ChoiceCache(options()).insert("new2", fake_choice("new2", "fake:b", 2002, 10));
  EXPECT_EQ(read(file() + ".journal").find("half"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("tune.json.tmp-1-1"))) << "an append removes orphans too";
  EXPECT_EQ(tune::read_cache(file()).records.count("new2"), 1u);

  // Once the journal outgrows a quarter of the file, it is merged into the file.
  {
    ChoiceCache cache(options());
    for (int i = 3; fs::exists(file() + ".journal"); ++i) {
      ASSERT_LT(i, 10000) << "the journal is never merged";
      const std::string key = "new" + std::to_string(i);
      cache.insert(key, fake_choice(key, "fake:b", 2000 + i, 200));
    }
  }
  const auto merged = tune::parse(read(file()));
  EXPECT_EQ(merged.count("new0"), 1u);
  EXPECT_EQ(merged.count("new2"), 1u);
  EXPECT_EQ(merged.count("k0"), 1u);
  EXPECT_GT(merged.at("k3").last_used, 103);
}

TEST_F(CacheFileTest, ExportReplacesOnlyCacheFiles) {
  {
    ChoiceCache source(options());
    source.insert("k", fake_choice("k", "fake:a", 1));
  }
  ChoiceCache loaded(options(CacheMode::read));
  { std::ofstream(file("notes.txt")) << "my notes"; }
  EXPECT_THROW(loaded.export_file(file("notes.txt")), Error);
  EXPECT_EQ(read(file("notes.txt")), "my notes");
  EXPECT_FALSE(fs::exists(file("notes.txt.lock"))) << "nothing is created beside it";
  { std::ofstream(file("empty.json")) << ""; }
  EXPECT_EQ(loaded.export_file(file("empty.json")), 1u);
  EXPECT_EQ(loaded.export_file(file("empty.json")), 1u) << "an export replaces an export";
  EXPECT_EQ(tune::parse(read(file("empty.json"))).count("k"), 1u);
}

TEST(CacheFileOwner, TellsDnnxDocumentsFromOthers) {
  using tune::Owner;
  const std::vector<std::pair<std::string, Owner>> cases{
      {"", Owner::ours},
      {" \n", Owner::ours},
      {"{", Owner::ours},
      {R"({ "schema" : "dnnx.tune)", Owner::ours},
      {R"({"schema": "dnnx.tune-cache", "version": 1, "entries": [)", Owner::ours},
      {R"({"schema": "dnnx.tune-cache", "version": 1)", Owner::ours},
      {R"({"schema": "dnnx.tune-cache", "entries": [])", Owner::ours},
      {R"({"entries": [{"algo": {"deterministic)", Owner::ours},
      {R"({"entries": [], "schema": "dnnx.tune-cache", "version": 1})", Owner::ours},
      {R"({"schema": "dnnx.tune-cache", "version": 2, "entries": []})", Owner::other_version},
      {R"({"schema": "dnnx.tune-cache", "version": 10, "entries": [)", Owner::other_version},
      {R"({"schema": "dnnx.tune-cache-journal", "version": 1})", Owner::foreign},
      {R"({"schema": "other"})", Owner::foreign},
      {R"({"entries": 3})", Owner::foreign},
      {R"({"entries": [{"name": "x"}]})", Owner::foreign},
      {"[1, 2]", Owner::foreign},
      {"# my settings\n", Owner::foreign},
      {"\xef\xbb\xbf{\"schema\": \"dnnx.tune-cache\"", Owner::foreign},
  };
  for (const auto& [text, owner] : cases)
    EXPECT_EQ(tune::owner_of(text), owner) << "'" << text << "'";
  EXPECT_EQ(tune::owner_of(tune::serialize({})), Owner::ours);
  tune::FileRecords one{{"k", tune::FileRecord{fake_choice("k", "fake:a", 1), 1}}};
  EXPECT_EQ(tune::owner_of(tune::serialize(one)), Owner::ours);
}

}  // namespace
