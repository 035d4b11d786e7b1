// The persistent choice cache: round trip through a file, choices from other machines ignored,
// re-validation before use, corrupt files set aside and files of others left alone, malformed
// entries skipped, concurrent writers, the LRU bound, modes.

#include <dnnx/dnnx.hpp>

#include "cache_folder.hpp"
#include "ops/context_state.hpp"
#include "tune/cache_file.hpp"
#include "tune/select.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace dnnx;

using testing_cache::fake_choice;

class PersistTest : public testing_cache::CacheFolderTest {
 protected:
  // A context on `backend` whose choices go to `cache`.
  static Context context_with(BackendKind backend, std::shared_ptr<ChoiceCache> cache) {
    Context context(backend);
    context.set_choice_cache(std::move(cache));
    return context;
  }
};

ConvDesc small_desc() {
  return ConvDesc::from_shapes(Dims{2, 4, 9, 9}, Dims{6, 4, 3, 3}, {1}, {1});
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
  const std::string fingerprint = probe.fingerprint();
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
                     probe.fingerprint() + " dnnx-" + std::string(version()));
  auto stale = fake_choice(key, heavy->id, 100);
  stale->algo.workspace_bytes = heavy->workspace_bytes;  // as recorded where it was chosen
  stale->policy = AlgoPolicy::heuristic();
  stale->backend = "cpu";
  stale->fingerprint = probe.fingerprint();
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
                     probe.fingerprint() + " dnnx-" + std::string(version()));
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

TEST_F(PersistTest, LoadedChoiceThatIsNoCandidateIsNeitherReportedNorCountedAsAHit) {
  const ConvDesc desc = small_desc();
  Context probe(BackendKind::reference);
  probe.tune().fwd = AlgoPolicy::exhaustive();
  const std::string key =
      tune::make_key("conv", desc.key(), Direction::fwd, probe.tune(),
                     probe.fingerprint() + " dnnx-" + std::string(version()));
  tune::write_file(file(), {{key, tune::FileRecord{fake_choice(key, "reference:gone", 100), 100}}});

  auto cache = std::make_shared<ChoiceCache>(options());
  Context context = context_with(BackendKind::reference, cache);
  context.tune() = probe.tune();
  auto choice = conv_select(context, desc, Direction::fwd);
  const auto listed = conv_list(context, desc, Direction::fwd);
  EXPECT_TRUE(
      std::any_of(listed.begin(), listed.end(),
                  [&](const AlgoInfo& a) { return a.id == choice->algo.id && a.supported; }))
      << choice->algo.id << " is not a supported candidate";
  EXPECT_GT(choice->candidates_timed, 0) << "the stale entry must be selected again";
  EXPECT_EQ(cache->hits(), 0u) << "a lookup whose entry failed re-validation is a miss";
  EXPECT_EQ(cache->misses(), 1u);
  EXPECT_EQ(cache->file_stats().applied, 0u);
  EXPECT_EQ(cache->file_stats().invalidated, 1u);
  EXPECT_EQ(tune::parse(read(file())).at(key).choice->algo.id, choice->algo.id)
      << "the file entry must be replaced";

  // The next lookup in the same process is a hit on the new choice, without listing again.
  auto again = conv_select(context, desc, Direction::fwd);
  EXPECT_EQ(again->algo.id, choice->algo.id);
  EXPECT_EQ(cache->hits(), 1u);
}

TEST_F(PersistTest, LoadedChoiceIsReportedWithTheListedCandidate) {
  const ConvDesc desc = small_desc();
  Context probe(BackendKind::reference);
  probe.tune().fwd = AlgoPolicy::exhaustive();
  const auto listed = conv_list(probe, desc, Direction::fwd);
  const auto supported =
      std::find_if(listed.begin(), listed.end(), [](const AlgoInfo& a) { return a.supported; });
  ASSERT_NE(supported, listed.end());
  const std::string key =
      tune::make_key("conv", desc.key(), Direction::fwd, probe.tune(),
                     probe.fingerprint() + " dnnx-" + std::string(version()));
  auto recorded = fake_choice(key, supported->id, 100);
  recorded->algo.name = "edited by hand";
  recorded->algo.workspace_bytes = supported->workspace_bytes + 12345;
  tune::write_file(file(), {{key, tune::FileRecord{recorded, 100}}});

  auto cache = std::make_shared<ChoiceCache>(options());
  Context context = context_with(BackendKind::reference, cache);
  context.tune() = probe.tune();
  auto choice = conv_select(context, desc, Direction::fwd);
  EXPECT_EQ(choice->algo.id, supported->id);
  EXPECT_EQ(choice->algo.workspace_bytes, supported->workspace_bytes);
  EXPECT_EQ(choice->algo.name, supported->name);
  EXPECT_EQ(choice->candidates_timed, 0) << "a valid entry is applied without timing";
  EXPECT_EQ(cache->hits(), 1u);
  EXPECT_EQ(cache->file_stats().writes, 0u);
}

TEST_F(PersistTest, CorruptFilesOfOursAreSetAsideNeverApplied) {
  const std::vector<std::pair<std::string, std::string>> crafted{
      {"truncated", R"({"schema":"dnnx.tune-cache","version":1,"entries":[{"key":"k","op":"co)"},
      {"truncated_in_the_header", R"({ "schema" : "dnnx.tune)"},
      {"entries_not_array", R"({"schema":"dnnx.tune-cache","version":1,"entries":{}})"},
      {"no_version", R"({"schema":"dnnx.tune-cache","entries":[]})"},
      {"earlier_layout_truncated", R"({"entries": [{"algo": {"deterministic": tr)"},
  };
  for (const auto& [name, text] : crafted) {
    SCOPED_TRACE(name);
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    { std::ofstream(file()) << text; }
    ::testing::internal::CaptureStderr();
    auto cache = std::make_shared<ChoiceCache>(options());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("moved it to"), std::string::npos) << log;
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

TEST_F(PersistTest, SetAsideNamesNeverOverwriteEachOther) {
  // Two corrupt files in the same second (and one more, named as a set-aside already is).
  const std::string text = R"({"schema":"dnnx.tune-cache","version":1,"entries":[)";
  for (int round = 0; round < 3; ++round) {
    { std::ofstream(file()) << text << round; }
    ::testing::internal::CaptureStderr();
    ChoiceCache cache(options());
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(cache.file_stats().set_aside, 1u);
  }
  std::set<std::string> contents;
  for (const auto& entry : fs::directory_iterator(folder_)) {
    if (entry.path().filename().string().starts_with("tune.json.corrupt-"))
      contents.insert(read(entry.path().string()));
  }
  EXPECT_EQ(contents, (std::set<std::string>{text + "0", text + "1", text + "2"}));
}

TEST_F(PersistTest, FilesThatAreNotOursAreLeftUntouchedAndTheCacheRunsInMemory) {
  const std::vector<std::pair<std::string, std::string>> crafted{
      {"garbage", "this is not json {"},
      {"wrong_schema", R"({"schema":"something-else","version":1,"entries":[]})"},
      {"wrong_version", R"({"schema":"dnnx.tune-cache","version":999,"entries":[]})"},
      {"wrong_version_truncated", R"({"schema":"dnnx.tune-cache","version":2,"entries":[{"ke)"},
      {"array_document", "[1, 2, 3]"},
      {"someone_elses_json", R"({"name": "my settings", "entries": 3})"},
  };
  for (const auto& [name, text] : crafted) {
    SCOPED_TRACE(name);
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    { std::ofstream(file()) << text; }
    ::testing::internal::CaptureStderr();
    auto cache = std::make_shared<ChoiceCache>(options());
    Context context = context_with(BackendKind::reference, cache);
    context.tune().fwd = AlgoPolicy::exhaustive();
    EXPECT_NO_THROW(conv_select(context, small_desc(), Direction::fwd));
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(cache->file_stats().in_force, CacheMode::off);
    EXPECT_NE(cache->file_stats().problem.find(file()), std::string::npos)
        << cache->file_stats().problem;
    EXPECT_NE(cache->file_stats().problem.find("left untouched"), std::string::npos)
        << cache->file_stats().problem;
    EXPECT_EQ(cache->file_stats().writes, 0u);
    EXPECT_EQ(cache->file_stats().set_aside, 0u);
    EXPECT_EQ(read(file()), text) << "a file that is not ours is never changed";
    EXPECT_EQ(std::distance(fs::directory_iterator(folder_), fs::directory_iterator()), 1)
        << "nothing is created beside it";
    CacheFileOptions strict = options();
    strict.on_problem = FileProblem::raise;
    try {
      ChoiceCache raising(strict);
      ADD_FAILURE() << "FileProblem::raise must throw";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find(file()), std::string::npos) << error.what();
    }
  }
}

TEST_F(PersistTest, EmptyFileHoldsNoChoicesAndIsReplaced) {
  { std::ofstream(file()) << ""; }
  auto cache = std::make_shared<ChoiceCache>(options());
  EXPECT_EQ(cache->file_stats().in_force, CacheMode::readwrite);
  EXPECT_EQ(cache->file_stats().set_aside, 0u);
  cache->insert("k", fake_choice("k", "fake:a", 10));
  EXPECT_EQ(tune::parse(read(file())).count("k"), 1u);
}

TEST_F(PersistTest, ReadersNeverChangeACorruptFile) {
  const std::string text = R"({"schema":"dnnx.tune-cache","version":1,"entries":[{"key":)";
  { std::ofstream(file()) << text; }
  ::testing::internal::CaptureStderr();
  {
    ChoiceCache cache(options(CacheMode::read));
    EXPECT_EQ(cache.file_stats().in_force, CacheMode::off);
    EXPECT_NE(cache.file_stats().problem.find("unreadable"), std::string::npos);
    EXPECT_EQ(cache.file_stats().set_aside, 0u);
    cache.insert("k", fake_choice("k", "fake:a", 10));
  }
  CacheFileOptions strict = options(CacheMode::read);
  strict.on_problem = FileProblem::raise;
  EXPECT_THROW(ChoiceCache{strict}, Error) << "`dnnx cache show` reports it as an error";
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(read(file()), text);
  EXPECT_EQ(std::distance(fs::directory_iterator(folder_), fs::directory_iterator()), 1)
      << "a reader creates nothing (no lock file, no set-aside)";
}

TEST_F(PersistTest, MalformedEntriesAreSkippedNamingTheFieldAndTheRestIsUsed) {
  tune::FileRecords records;
  for (const char* key : {"good", "negative_workspace", "huge_priority", "float_runs", "bad_time"})
    records.emplace(key, tune::FileRecord{fake_choice(key, "fake:a", 10), 10});
  std::string text = tune::serialize(records);
  auto replace_in_entry = [&](const std::string& key, const std::string& from,
                              const std::string& to) {
    const std::size_t entry = text.find("\"key\":\"" + key + "\"");
    ASSERT_NE(entry, std::string::npos) << key;
    const std::size_t line_start = text.rfind('\n', entry);
    const std::size_t at = text.find(from, line_start);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace_in_entry("negative_workspace", "\"workspace_bytes\":0", "\"workspace_bytes\":-5");
  replace_in_entry("huge_priority", "\"priority\":0", "\"priority\":4294967296");
  replace_in_entry("float_runs", "\"candidates_timed\":0", "\"candidates_timed\":2.5");
  replace_in_entry("bad_time", "\"time_ms\":1.0", "\"time_ms\":-1.0");
  { std::ofstream(file()) << text; }

  ::testing::internal::CaptureStderr();
  ChoiceCache cache(options());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(cache.find("good"), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.file_stats().dropped, 4u);
  EXPECT_EQ(cache.file_stats().set_aside, 0u);
  EXPECT_NE(log.find("skipped 4 malformed entries"), std::string::npos) << log;
  EXPECT_NE(log.find("entry 0 ('bad_time'): field 'time_ms' is -1.0"), std::string::npos) << log;

  const tune::Parsed parsed = tune::parse_document(text);
  ASSERT_EQ(parsed.dropped.size(), 4u);
  const std::string all =
      parsed.dropped[0] + parsed.dropped[1] + parsed.dropped[2] + parsed.dropped[3];
  for (const char* expected :
       {"('negative_workspace'): field 'algo.workspace_bytes' is -5; accepted: an integer from 0",
        "('huge_priority'): field 'algo.priority' is 4294967296; accepted: an integer from 0 to "
        "2147483647",
        "('float_runs'): field 'candidates_timed' is 2.5", "('bad_time'): field 'time_ms' is -1.0"})
    EXPECT_NE(all.find(expected), std::string::npos) << expected << "\n" << all;
  EXPECT_THROW(tune::parse(text), Error) << "the strict parser rejects the file";
}

// Note [late plans] (src/ops/dispatch.cpp): an entry's late plans are written only when it has
// some, read back as written, and a list that is not all strings skips the entry naming the field.
TEST_F(PersistTest, LatePlansRoundTripAndAMalformedListIsSkipped) {
  auto late = fake_choice("late", "fake:a", 10);
  late->late_plans = {"fake:b", "fake:c"};
  tune::FileRecords records;
  records.emplace("late", tune::FileRecord{late, 10});
  records.emplace("none", tune::FileRecord{fake_choice("none", "fake:a", 10), 10});
  std::string text = tune::serialize(records);
  EXPECT_EQ(text.find("late_plans"), text.rfind("late_plans")) << "written once: " << text;
  const tune::FileRecords back = tune::parse(text);
  EXPECT_EQ(back.at("late").choice->late_plans, late->late_plans);
  EXPECT_TRUE(back.at("none").choice->late_plans.empty());

  const std::string list = R"("late_plans":["fake:b","fake:c"])";
  const std::size_t at = text.find(list);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, list.size(), R"("late_plans":["fake:b",7])");
  const tune::Parsed parsed = tune::parse_document(text);
  ASSERT_EQ(parsed.dropped.size(), 1u);
  EXPECT_NE(parsed.dropped[0].find("('late'): field 'late_plans'"), std::string::npos)
      << parsed.dropped[0];
  EXPECT_EQ(parsed.records.count("none"), 1u);
}

// Note [energy policies] (src/tune/select.cpp): an energy choice keeps its energy and meter, and
// each measured row its energy, spread, power and clock (negative energies too: a reading below
// the idle baseline); rows and choices without a measurement are written without those fields.
TEST_F(PersistTest, EnergyMeasurementsRoundTrip) {
  auto energy = fake_choice("energy", "fake:a", 10);
  energy->policy = AlgoPolicy::min_energy();
  energy->energy_j = 2.5e-3;
  energy->energy_meter = "nvml: a test GPU";
  energy->energy_fastest = "fake:b";
  energy->timings.resize(2);
  energy->timings[0].algo.id = "fake:a";
  energy->timings[0].status = CandidateStatus::ok;
  energy->timings[0].median_ms = 1.0;
  energy->timings[0].min_ms = 0.9;
  energy->timings[0].runs = 5;
  energy->timings[0].energy_j = 2.5e-3;
  energy->timings[0].energy_spread_j = 1e-5;
  energy->timings[0].power_w = 310.5;
  energy->timings[0].clock_mhz = 1980;
  energy->timings[1] = energy->timings[0];
  energy->timings[1].algo.id = "fake:b";
  energy->timings[1].energy_j = -1e-6;
  energy->timings[1].clock_mhz = std::numeric_limits<double>::quiet_NaN();
  tune::FileRecords records;
  records.emplace("energy", tune::FileRecord{energy, 10});
  records.emplace("none", tune::FileRecord{fake_choice("none", "fake:a", 10), 10});
  const std::string text = tune::serialize(records);
  const tune::FileRecords back = tune::parse(text);
  const Choice& read = *back.at("energy").choice;
  EXPECT_EQ(read.policy, AlgoPolicy::min_energy());
  EXPECT_DOUBLE_EQ(read.energy_j, 2.5e-3);
  EXPECT_EQ(read.energy_meter, "nvml: a test GPU");
  EXPECT_EQ(read.energy_fastest, "fake:b");
  ASSERT_EQ(read.timings.size(), 2u);
  EXPECT_DOUBLE_EQ(read.timings[0].energy_j, 2.5e-3);
  EXPECT_DOUBLE_EQ(read.timings[0].energy_spread_j, 1e-5);
  EXPECT_DOUBLE_EQ(read.timings[0].power_w, 310.5);
  EXPECT_DOUBLE_EQ(read.timings[0].clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(read.timings[1].energy_j, -1e-6);
  EXPECT_TRUE(std::isnan(read.timings[1].clock_mhz));
  const Choice& plain = *back.at("none").choice;
  EXPECT_TRUE(std::isnan(plain.energy_j));
  EXPECT_TRUE(plain.energy_meter.empty());
  EXPECT_TRUE(plain.energy_fastest.empty());
  // Written for the energy choice only: its meter once, its rows' energy twice.
  EXPECT_EQ(text.find("energy_meter"), text.rfind("energy_meter")) << text;
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
