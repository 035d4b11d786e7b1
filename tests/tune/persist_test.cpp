// The persistent choice cache: round trip through a file, choices from other machines ignored,
// re-validation before use, unreadable files set aside, concurrent writers, the LRU bound, modes.

#include <dnnx/dnnx.hpp>

#include "ops/context_state.hpp"
#include "tune/cache_file.hpp"
#include "tune/select.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace dnnx;

// A fresh folder per test, removed afterwards.
class PersistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    folder_ = fs::temp_directory_path() /
              ("dnnx-persist-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }

  std::string file(const std::string& name = "tune.json") const { return (folder_ / name).string(); }

  CacheFileOptions options(CacheMode mode = CacheMode::readwrite, std::size_t max_entries = 4096) {
    return {mode, file(), max_entries};
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // A context on `backend` whose choices go to `cache`.
  static Context context_with(BackendKind backend, std::shared_ptr<ChoiceCache> cache) {
    Context context(backend);
    context.set_choice_cache(std::move(cache));
    return context;
  }

  fs::path folder_;
};

ConvDesc small_desc() {
  return ConvDesc::from_shapes(Dims{2, 4, 9, 9}, Dims{6, 4, 3, 3}, {1}, {1});
}

std::shared_ptr<Choice> fake_choice(const std::string& key, const std::string& id,
                                    std::int64_t measured_at) {
  auto choice = std::make_shared<Choice>();
  choice->key = key;
  choice->op = "conv";
  choice->policy = AlgoPolicy::exhaustive();
  choice->algo.id = id;
  choice->algo.name = id;
  choice->algo.supported = true;
  choice->time_ms = 1.0;
  choice->backend = "fake";
  choice->fingerprint = "fake-fp";
  choice->environment = R"({"device":"test"})";
  choice->measured_at = measured_at;
  return choice;
}

TEST_F(PersistTest, ChoiceSurvivesTheProcessAndIsAppliedWithoutTiming) {
  const ConvDesc desc = small_desc();
  std::string chosen;
  {
    auto cache = std::make_shared<ChoiceCache>(options());
    Context context = context_with(BackendKind::reference, cache);
    context.tune().fwd = AlgoPolicy::exhaustive();
    auto choice = conv_select(context, desc, Direction::fwd);
    EXPECT_FALSE(choice->from_file);
    EXPECT_GT(choice->candidates_timed, 0);
    chosen = choice->algo.id;
    EXPECT_EQ(cache->file_stats().writes, 1u);
  }
  const std::string text = read(file());
  EXPECT_NE(text.find("\"schema\": \"dnnx.tune-cache\""), std::string::npos) << text;
  EXPECT_NE(text.find(chosen), std::string::npos);
  EXPECT_NE(text.find("\"environment\""), std::string::npos);
  EXPECT_NE(text.find("\"measured_at\""), std::string::npos);

  // A new cache on the same file stands for the next process.
  auto cache = std::make_shared<ChoiceCache>(options());
  Context context = context_with(BackendKind::reference, cache);
  context.tune().fwd = AlgoPolicy::exhaustive();
  auto choice = conv_select(context, desc, Direction::fwd);
  EXPECT_EQ(choice->algo.id, chosen);
  EXPECT_FALSE(choice->from_file) << "the op layer hands out the re-validated copy";
  EXPECT_EQ(cache->file_stats().applied, 1u);
  EXPECT_EQ(cache->file_stats().writes, 0u) << "re-validating an entry must not rewrite the file";
  EXPECT_GT(choice->measured_at, 0);
}

TEST_F(PersistTest, EntriesFromAnotherDeviceOrVersionAreIgnoredAndCounted) {
  const ConvDesc desc = small_desc();
  Context probe(BackendKind::reference);
  probe.tune().fwd = AlgoPolicy::exhaustive();
  const std::string fingerprint = probe.state().backend().fingerprint();
  // The same desc and options, measured under another library version.
  const std::string foreign_key = tune::make_key("conv", desc.key(), Direction::fwd, probe.tune(),
                                                 "reference dnnx-0.0.1 dnnx-0.0.1");
  tune::FileRecords records;
  auto foreign = fake_choice(foreign_key, "reference:direct", 100);
  foreign->backend = "reference";
  foreign->fingerprint = "reference dnnx-0.0.1";
  records.emplace(foreign_key, tune::FileRecord{foreign, 100});
  tune::write_file(file(), records);

  auto cache = std::make_shared<ChoiceCache>(options());
  EXPECT_EQ(cache->foreign_entries("reference", fingerprint), 1u);
  Context context = context_with(BackendKind::reference, cache);
  context.tune().fwd = AlgoPolicy::exhaustive();
  context.tune().verbose = true;
  ::testing::internal::CaptureStderr();
  auto choice = conv_select(context, desc, Direction::fwd);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(choice->candidates_timed, 0) << "a foreign entry must never be applied";
  EXPECT_EQ(cache->file_stats().applied, 0u);
  EXPECT_NE(log.find("1 choices for reference measured on another device kind or library version"),
            std::string::npos)
      << log;
}

TEST_F(PersistTest, LoadedChoiceOverTheWorkspaceLimitIsReselectedAndTheFileUpdated) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not available";
  const ConvDesc desc = ConvDesc::from_shapes(Dims{1, 16, 12, 12}, Dims{16, 16, 3, 3}, {1}, {1});
  Context probe(BackendKind::cpu);
  const auto candidates = conv_list(probe, desc, Direction::fwd);
  const auto heavy = std::find_if(candidates.begin(), candidates.end(), [](const AlgoInfo& a) {
    return a.supported && a.workspace_bytes > 0;
  });
  ASSERT_NE(heavy, candidates.end()) << "no candidate with a workspace to exceed";
  // Another machine (or an older dnnx) recorded `heavy` as the heuristic pick under a limit it no
  // longer fits: the entry's key matches this process exactly.
  probe.tune().fwd = AlgoPolicy::heuristic();
  probe.tune().workspace_limit = heavy->workspace_bytes - 1;
  const std::string key =
      tune::make_key("conv", desc.key(), Direction::fwd, probe.tune(),
                     probe.state().backend().fingerprint() + " dnnx-" + std::string(version()));
  auto stale = fake_choice(key, heavy->id, 100);
  stale->algo.workspace_bytes = heavy->workspace_bytes;  // as recorded where it was chosen
  stale->policy = AlgoPolicy::heuristic();
  stale->backend = "cpu";
  stale->fingerprint = probe.state().backend().fingerprint();
  tune::write_file(file(), {{key, tune::FileRecord{stale, 100}}});

  auto cache = std::make_shared<ChoiceCache>(options());
  Context context = context_with(BackendKind::cpu, cache);
  context.tune() = probe.tune();
  auto choice = conv_select(context, desc, Direction::fwd);
  EXPECT_NE(choice->algo.id, heavy->id);
  EXPECT_LE(choice->algo.workspace_bytes, heavy->workspace_bytes - 1);
  EXPECT_EQ(cache->file_stats().invalidated, 1u);
  EXPECT_EQ(cache->file_stats().writes, 1u);
  const auto on_disk = tune::parse(read(file()));
  ASSERT_EQ(on_disk.count(key), 1u);
  EXPECT_EQ(on_disk.at(key).choice->algo.id, choice->algo.id) << "the file must be updated";
}

TEST_F(PersistTest, LoadedChoiceThatCannotBeBuiltIsReselectedWhenTheCallRuns) {
  const ConvDesc desc = small_desc();
  Context probe(BackendKind::reference);
  probe.tune().fwd = AlgoPolicy::heuristic();
  const std::string key =
      tune::make_key("conv", desc.key(), Direction::fwd, probe.tune(),
                     probe.state().backend().fingerprint() + " dnnx-" + std::string(version()));
  auto bogus = fake_choice(key, "reference:renamed_in_a_later_version", 100);
  bogus->policy = AlgoPolicy::heuristic();
  tune::write_file(file(), {{key, tune::FileRecord{bogus, 100}}});

  auto cache = std::make_shared<ChoiceCache>(options());
  Context context = context_with(BackendKind::reference, cache);
  context.tune() = probe.tune();
  Tensor src = Tensor::zeros(desc.src_dims(), DType::f32);
  Tensor weights = Tensor::zeros(desc.weights_dims(), DType::f32);
  Tensor dst = Tensor::empty(desc.dst_dims(), DType::f32);
  auto used = conv_fwd(context, desc, src, weights, dst);
  EXPECT_EQ(used->algo.id, "reference:direct");
  EXPECT_EQ(tune::parse(read(file())).at(key).choice->algo.id, "reference:direct")
      << "the file must be corrected";
}

TEST_F(PersistTest, UnreadableFilesAreSetAsideNeverApplied) {
  const std::vector<std::pair<std::string, std::string>> crafted{
      {"garbage", "this is not json {"},
      {"empty", ""},
      {"truncated", R"({"schema":"dnnx.tune-cache","version":1,"entries":[{"key":"k","op":"co)"},
      {"wrong_schema", R"({"schema":"something-else","version":1,"entries":[]})"},
      {"wrong_version", R"({"schema":"dnnx.tune-cache","version":999,"entries":[]})"},
      {"entries_not_array", R"({"schema":"dnnx.tune-cache","version":1,"entries":{}})"},
      {"entry_missing_field",
       R"({"schema":"dnnx.tune-cache","version":1,"entries":[{"key":"k","op":"conv"}]})"},
      {"array_document", "[1, 2, 3]"},
  };
  for (const auto& [name, text] : crafted) {
    SCOPED_TRACE(name);
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    { std::ofstream(file()) << text; }
    ::testing::internal::CaptureStderr();
    auto cache = std::make_shared<ChoiceCache>(options());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(cache->size(), 0u);
    EXPECT_EQ(cache->file_stats().set_aside, 1u);
    EXPECT_FALSE(fs::exists(file())) << "the unreadable file must be moved away";
    std::size_t corrupt_files = 0;
    for (const auto& entry : fs::directory_iterator(folder_)) {
      if (entry.path().filename().string().starts_with("tune.json.corrupt-")) {
        ++corrupt_files;
        EXPECT_EQ(read(entry.path().string()), text) << "set aside unchanged, never discarded";
      }
    }
    EXPECT_EQ(corrupt_files, 1u);
    // The cache still works and writes a fresh file.
    Context context = context_with(BackendKind::reference, cache);
    context.tune().fwd = AlgoPolicy::exhaustive();
    conv_select(context, small_desc(), Direction::fwd);
    EXPECT_NO_THROW(tune::parse(read(file())));
  }
}

// Writes `count` distinct entries through its own ChoiceCache, one insert (one file write) each.
void write_entries(const std::string& path, int writer, int count) {
  ChoiceCache cache(CacheFileOptions{CacheMode::readwrite, path, 100000});
  for (int i = 0; i < count; ++i) {
    const std::string key = "writer" + std::to_string(writer) + "-entry" + std::to_string(i);
    cache.insert(key, fake_choice(key, "fake:algo" + std::to_string(i), 1000 + i));
  }
}

TEST_F(PersistTest, EightConcurrentWriterProcessesLoseNoEntry) {
  constexpr int writers = 8;
  constexpr int per_writer = 25;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        write_entries(file(), w, per_writer);
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto records = tune::parse(read(file()));
  EXPECT_EQ(records.size(), static_cast<std::size_t>(writers * per_writer));
  for (int w = 0; w < writers; ++w) {
    for (int i = 0; i < per_writer; ++i) {
      EXPECT_EQ(records.count("writer" + std::to_string(w) + "-entry" + std::to_string(i)), 1u);
    }
  }
  for (const auto& entry : fs::directory_iterator(folder_)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos)
        << "temporary file left behind: " << entry.path();
  }
}

TEST_F(PersistTest, FileIsBoundedByLeastRecentUse) {
  {
    ChoiceCache cache(options(CacheMode::readwrite, /*max_entries=*/3));
    for (int i = 0; i < 3; ++i) {
      const std::string key = "k" + std::to_string(i);
      cache.insert(key, fake_choice(key, "fake:a", 10 + i));
    }
  }
  // Make k0 the most recently used, then add a fourth: k1 (least recently used) goes.
  auto records = tune::parse(read(file()));
  ASSERT_EQ(records.size(), 3u);
  records.at("k0").last_used = 4000000000;
  records.at("k1").last_used = 1;
  records.at("k2").last_used = 2;
  tune::write_file(file(), records);
  {
    ChoiceCache cache(options(CacheMode::readwrite, /*max_entries=*/3));
    cache.insert("k3", fake_choice("k3", "fake:a", 20));
  }
  records = tune::parse(read(file()));
  EXPECT_EQ(records.size(), 3u);
  EXPECT_EQ(records.count("k0"), 1u);
  EXPECT_EQ(records.count("k1"), 0u);
  EXPECT_EQ(records.count("k3"), 1u);

  ChoiceCache cache(options());
  EXPECT_EQ(cache.prune(1), 2u);
  EXPECT_EQ(tune::parse(read(file())).size(), 1u);
}

TEST_F(PersistTest, UseRefreshesTheLeastRecentUseOrder) {
  {
    ChoiceCache cache(options());
    cache.insert("old", fake_choice("old", "fake:a", 10));
  }
  auto records = tune::parse(read(file()));
  records.at("old").last_used = 5;
  tune::write_file(file(), records);
  {
    ChoiceCache cache(options());
    ASSERT_NE(cache.find("old"), nullptr);
  }  // the destructor records the use
  EXPECT_GT(tune::parse(read(file())).at("old").last_used, 5);
}

TEST_F(PersistTest, ReadModeLoadsButNeverWritesAndOffModeIgnoresTheFile) {
  {
    ChoiceCache cache(options());
    cache.insert("k", fake_choice("k", "fake:a", 10));
  }
  const std::string before = read(file());
  {
    ChoiceCache cache(options(CacheMode::read));
    EXPECT_NE(cache.find("k"), nullptr);
    cache.insert("k2", fake_choice("k2", "fake:b", 11));
    EXPECT_EQ(cache.file_stats().writes, 0u);
  }
  EXPECT_EQ(read(file()), before);
  {
    ChoiceCache cache(options(CacheMode::off));
    EXPECT_EQ(cache.find("k"), nullptr);
    cache.insert("k3", fake_choice("k3", "fake:c", 12));
  }
  EXPECT_EQ(read(file()), before);
}

TEST_F(PersistTest, ExportImportShipsChoicesToAnotherCache) {
  {
    ChoiceCache cache(options());
    cache.insert("k", fake_choice("k", "fake:a", 10));
    cache.insert("fixed", [] {
      auto c = fake_choice("fixed", "fake:b", 11);
      c->policy = AlgoPolicy::fixed("fake:b");
      return c;
    }());
    EXPECT_EQ(cache.export_file(file("shipped.json")), 1u) << "fixed choices are not exported";
  }
  CacheFileOptions other{CacheMode::readwrite, file("other.json"), 4096};
  ChoiceCache cache(other);
  EXPECT_EQ(cache.import_file(file("shipped.json")), 1u);
  EXPECT_NE(cache.find("k"), nullptr);
  EXPECT_EQ(tune::parse(read(file("other.json"))).count("k"), 1u);
  { std::ofstream(file("bad.json")) << "nope"; }
  try {
    cache.import_file(file("bad.json"));
    FAIL() << "importing a bad file must throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("bad.json"), std::string::npos) << error.what();
  }
  cache.clear_file();
  EXPECT_EQ(tune::parse(read(file("other.json"))).size(), 0u);
}

TEST_F(PersistTest, NewerMeasurementWinsWhenMerging) {
  tune::FileRecords a{{"k", tune::FileRecord{fake_choice("k", "fake:old", 10), 50}}};
  const tune::FileRecords b{{"k", tune::FileRecord{fake_choice("k", "fake:new", 20), 40}}};
  tune::merge(a, b);
  EXPECT_EQ(a.at("k").choice->algo.id, "fake:new");
  EXPECT_EQ(a.at("k").last_used, 50);
}

TEST(CacheOptionsEnv, ModesPathsAndBadValues) {
  ::setenv("DNNX_CACHE", "read", 1);
  ::setenv("DNNX_CACHE_FILE", "/tmp/x/tune.json", 1);
  ::setenv("DNNX_CACHE_MAX_ENTRIES", "12", 1);
  CacheFileOptions options = CacheFileOptions::from_env();
  EXPECT_EQ(options.mode, CacheMode::read);
  EXPECT_EQ(options.path, "/tmp/x/tune.json");
  EXPECT_EQ(options.max_entries, 12u);
  ::setenv("DNNX_CACHE", "sometimes", 1);
  try {
    CacheFileOptions::from_env();
    FAIL() << "DNNX_CACHE=sometimes must be rejected";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("DNNX_CACHE"), std::string::npos);
    EXPECT_NE(error.message().find("sometimes"), std::string::npos);
  }
  ::setenv("DNNX_CACHE", "off", 1);
  ::setenv("DNNX_CACHE_MAX_ENTRIES", "0", 1);
  EXPECT_THROW(CacheFileOptions::from_env(), Error);
  ::unsetenv("DNNX_CACHE");
  ::unsetenv("DNNX_CACHE_FILE");
  ::unsetenv("DNNX_CACHE_MAX_ENTRIES");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(CacheFileOptions::default_path(),
            "/tmp/xdg/dnnx/tune-v" + std::to_string(CacheFileOptions::schema_version) + ".json");
}

}  // namespace
