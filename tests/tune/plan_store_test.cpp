// The saved-plan store (Note [saved plans] in src/tune/plan_store.hpp): the file format, keys,
// and that a corrupt, truncated or foreign file is dropped with a reason, never applied.

#include "tune/plan_store.hpp"

#include "cache_folder.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace dnnx {
namespace {

using testing_cache::CacheFolderTest;
using tune::PlanStore;
namespace fs = std::filesystem;

class PlanStoreTest : public CacheFolderTest {
 protected:
  std::string plans() const { return file("plans"); }
  static void overwrite(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
};

const std::string key_a =
    "cudnn 9.19.0 NVIDIA H100 sm_90 | conv bwd_data | desc A | cudnn:engine:6";
const std::string key_b =
    "cudnn 9.19.0 NVIDIA H100 sm_90 | conv bwd_data | desc B | cudnn:engine:6";
// A payload with the bytes a JSON plan may hold, newlines and NULs included.
const std::string payload =
    std::string("{\"engine\":6,\n\"blob\":\"") + std::string(1, '\0') + "\xff\x01 tail\"}\n";

TEST(PlanStoreFormat, RoundTripsAnyPayload) {
  const std::string text = PlanStore::encode(key_a, payload);
  std::string problem;
  const auto decoded = PlanStore::decode(text, key_a, &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(*decoded, payload);
  EXPECT_EQ(PlanStore::decode(PlanStore::encode(key_a, ""), key_a).value_or("x"), "");
}

TEST(PlanStoreFormat, RejectsWhatIsNotAWholeFileOfTheKey) {
  const std::string text = PlanStore::encode(key_a, payload);
  std::string problem;
  EXPECT_FALSE(PlanStore::decode(text, key_b, &problem));
  EXPECT_NE(problem.find("another key"), std::string::npos) << problem;

  EXPECT_FALSE(PlanStore::decode(text.substr(0, text.size() - 3), key_a, &problem));
  EXPECT_NE(problem.find("truncated"), std::string::npos) << problem;

  std::string flipped = text;
  flipped[flipped.size() - 2] ^= 0x20;
  EXPECT_FALSE(PlanStore::decode(flipped, key_a, &problem));
  EXPECT_NE(problem.find("checksum"), std::string::npos) << problem;

  EXPECT_FALSE(PlanStore::decode("{\"not\":\"a plan\"}", key_a, &problem));
  EXPECT_NE(problem.find("not a dnnx plan file"), std::string::npos) << problem;
  EXPECT_FALSE(PlanStore::decode("", key_a, &problem));
  EXPECT_FALSE(PlanStore::decode("dnnx-plan 1\nkey 99999999999\n", key_a, &problem));
  EXPECT_FALSE(PlanStore::decode("dnnx-plan 1\nkey 5\nabc", key_a, &problem));
}

TEST_F(PlanStoreTest, SavesLoadsAndNamesFilesByKey) {
  const PlanStore store(plans());
  ASSERT_TRUE(store.enabled());
  EXPECT_FALSE(store.load(key_a));  // nothing saved yet, and no folder
  std::string problem;
  ASSERT_TRUE(store.save(key_a, payload, &problem)) << problem;
  ASSERT_TRUE(store.save(key_b, "b", &problem)) << problem;
  EXPECT_NE(store.path_of(key_a), store.path_of(key_b));
  EXPECT_EQ(store.load(key_a).value_or(""), payload);
  EXPECT_EQ(store.load(key_b).value_or(""), "b");
  // Saving again replaces the file; no temporary file is left behind.
  ASSERT_TRUE(store.save(key_a, "second", &problem)) << problem;
  EXPECT_EQ(store.load(key_a).value_or(""), "second");
  const auto summary = PlanStore::summarize(plans());
  EXPECT_EQ(summary.files, 2u);
  EXPECT_GT(summary.bytes, key_a.size() + key_b.size());
  EXPECT_EQ(listing(plans()).find("tmp"), std::string::npos) << listing(plans());
}

TEST_F(PlanStoreTest, DropsACorruptFileWithAReason) {
  const PlanStore store(plans());
  ASSERT_TRUE(store.save(key_a, payload));
  const std::string path = store.path_of(key_a);
  std::string text = read(path);
  overwrite(path, text.substr(0, text.size() / 2));
  std::string problem;
  EXPECT_FALSE(store.load(key_a, &problem));
  EXPECT_NE(problem.find(path), std::string::npos) << problem;
  EXPECT_NE(problem.find("dropped"), std::string::npos) << problem;
  EXPECT_FALSE(fs::exists(path)) << "a corrupt plan file must be removed";
  // Saved anew, it loads again.
  ASSERT_TRUE(store.save(key_a, payload));
  EXPECT_EQ(store.load(key_a).value_or(""), payload);
}

TEST_F(PlanStoreTest, AFileRenamedToAnotherKeysNameIsNotApplied) {
  const PlanStore store(plans());
  ASSERT_TRUE(store.save(key_a, payload));
  fs::rename(store.path_of(key_a), store.path_of(key_b));
  std::string problem;
  EXPECT_FALSE(store.load(key_b, &problem));
  EXPECT_NE(problem.find("another key"), std::string::npos) << problem;
}

TEST_F(PlanStoreTest, ClearRemovesPlanFilesOnly) {
  const PlanStore store(plans());
  ASSERT_TRUE(store.save(key_a, payload));
  ASSERT_TRUE(store.save(key_b, payload));
  overwrite(plans() + "/notes.txt", "not a plan");
  overwrite(store.path_of(key_a) + ".tmp-1-2-3", "left by a crash");
  EXPECT_EQ(PlanStore::clear(plans()), 2u);
  EXPECT_EQ(PlanStore::summarize(plans()).files, 0u);
  EXPECT_EQ(listing(plans()), "notes.txt");
  EXPECT_EQ(PlanStore::clear(file("missing")), 0u);
  EXPECT_EQ(PlanStore::summarize(file("missing")).files, 0u);
}

TEST_F(PlanStoreTest, ADisabledStoreStoresNothing) {
  const PlanStore store("");
  EXPECT_FALSE(store.enabled());
  EXPECT_FALSE(store.save(key_a, payload));
  EXPECT_FALSE(store.load(key_a));
}

TEST(PlanStoreFolder, SitsNextToTheCacheFile) {
  CacheFileOptions cache;
  cache.mode = CacheMode::readwrite;
  cache.path = "/some/where/tune-v1.json";
  EXPECT_EQ(PlanStore::folder_for(cache), "/some/where/tune-v1.json.plans");
  cache.mode = CacheMode::read;
  EXPECT_EQ(PlanStore::folder_for(cache), "/some/where/tune-v1.json.plans");
  cache.mode = CacheMode::off;
  EXPECT_EQ(PlanStore::folder_for(cache), "");
  cache.mode = CacheMode::readwrite;
  cache.path.clear();
  EXPECT_EQ(PlanStore::folder_for(cache), "");
}

TEST(PlanStoreFolder, DNNX_PLAN_DIR_OverridesOrTurnsOff) {
  CacheFileOptions cache;
  cache.mode = CacheMode::readwrite;
  cache.path = "/some/where/tune-v1.json";
  ::setenv("DNNX_PLAN_DIR", "/elsewhere/plans", 1);
  EXPECT_EQ(PlanStore::folder_from_env(cache), "/elsewhere/plans");
  for (const char* off : {"off", "OFF", "0", "none"}) {
    ::setenv("DNNX_PLAN_DIR", off, 1);
    EXPECT_EQ(PlanStore::folder_from_env(cache), "") << off;
  }
  ::setenv("DNNX_PLAN_DIR", "", 1);
  EXPECT_EQ(PlanStore::folder_from_env(cache), "/some/where/tune-v1.json.plans");
  ::unsetenv("DNNX_PLAN_DIR");
  EXPECT_EQ(PlanStore::folder_from_env(cache), "/some/where/tune-v1.json.plans");
}

}  // namespace
}  // namespace dnnx
