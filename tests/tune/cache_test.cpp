// The choice cache (src/tune/cache.cpp) and its keys (tune::make_key, ConvDesc::key): what makes
// two requests share an answer, what keeps them apart, and concurrent use.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "fake_candidates.hpp"
#include "tune/select.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using dnnx::AlgoPolicy;
using dnnx::Choice;
using dnnx::ChoiceCache;
using dnnx::ConvDesc;
using dnnx::Direction;
using dnnx::TuneOptions;
using dnnx::testing_fakes::Algo;
using dnnx::testing_fakes::fake_request;
using dnnx::testing_fakes::FakeBench;
using dnnx::testing_fakes::options_with;

std::shared_ptr<const Choice> choice_named(const std::string& id) {
  auto choice = std::make_shared<Choice>();
  choice->algo.id = id;
  return choice;
}

// ---------------------------------------------------------------- ChoiceCache

TEST(ChoiceCache, FindInsertCountersAndClear) {
  ChoiceCache cache;
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.find("k1"), nullptr);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 0u);
  const auto first = choice_named("a");
  const std::uint64_t before = cache.generation();
  cache.insert("k1", first);
  EXPECT_NE(cache.generation(), before);
  EXPECT_EQ(cache.find("k1"), first);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.find("k2"), nullptr);
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_EQ(cache.size(), 1u);

  const auto replacement = choice_named("b");
  cache.insert("k1", replacement);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find("k1")->algo.id, "b");

  cache.insert("k2", first);
  const auto entries = cache.entries();
  EXPECT_EQ(entries.size(), 2u);
  std::set<std::string> keys;
  for (const auto& [key, choice] : entries) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"k1", "k2"}));

  const std::uint64_t before_clear = cache.generation();
  cache.clear();
  EXPECT_NE(cache.generation(), before_clear);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_EQ(cache.misses(), 0u);
  EXPECT_EQ(cache.find("k1"), nullptr);
}

TEST(ChoiceCache, GlobalIsOneInstance) {
  EXPECT_NE(ChoiceCache::global(), nullptr);
  EXPECT_EQ(ChoiceCache::global().get(), ChoiceCache::global().get());
}

TEST(ChoiceCache, ConcurrentInsertAndFind) {
  ChoiceCache cache;
  constexpr int threads = 8;
  constexpr int per_thread = 300;
  std::atomic<int> wrong{0};
  std::atomic<std::uint64_t> finds{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string id = std::to_string(t) + ":" + std::to_string(i);
        cache.insert("key " + id, choice_named(id));
        auto mine = cache.find("key " + id);
        ++finds;
        if (!mine || mine->algo.id != id) ++wrong;
        // Read another thread's keys while it writes them: present or absent, never torn.
        const std::string other = std::to_string((t + 1) % threads) + ":" + std::to_string(i);
        auto theirs = cache.find("key " + other);
        ++finds;
        if (theirs && theirs->algo.id != other) ++wrong;
        if (i % 50 == 0) cache.entries();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache.size(), static_cast<std::size_t>(threads * per_thread));
  EXPECT_EQ(cache.hits() + cache.misses(), finds.load());
  EXPECT_GE(cache.hits(), static_cast<std::uint64_t>(threads * per_thread));
}

// ---------------------------------------------------------------- keys

ConvDesc base_desc() { return ConvDesc::from_shapes({2, 8, 14, 14}, {16, 8, 3, 3}, {1}, {1}); }

std::string key_of(const TuneOptions& options, Direction direction = Direction::fwd,
                   const ConvDesc& desc = base_desc(), const std::string& fingerprint = "fp1") {
  return dnnx::tune::make_key("conv", desc.key(), direction, options, fingerprint);
}

TEST(ChoiceKey, SameInputsSameKey) {
  TuneOptions a;
  TuneOptions b;
  EXPECT_EQ(key_of(a), key_of(b));
  // Verbosity does not change the answer, so it must not split the cache.
  b.verbose = true;
  EXPECT_EQ(key_of(a), key_of(b));
}

TEST(ChoiceKey, HeuristicNeverSharesAKeyWithExhaustive) {
  EXPECT_NE(key_of(options_with(AlgoPolicy::heuristic())),
            key_of(options_with(AlgoPolicy::exhaustive())));
}

TEST(ChoiceKey, EveryConstraintChangesTheKey) {
  const TuneOptions base = options_with(AlgoPolicy::exhaustive());
  std::vector<std::pair<std::string, std::function<void(TuneOptions&)>>> edits = {
      {"workspace limit 1 MiB", [](TuneOptions& o) { o.workspace_limit = 1 << 20; }},
      {"workspace limit 0", [](TuneOptions& o) { o.workspace_limit = 0; }},
      {"deterministic", [](TuneOptions& o) { o.deterministic = true; }},
      {"policy fixed", [](TuneOptions& o) { o.fwd = AlgoPolicy::fixed("x"); }},
      {"policy family", [](TuneOptions& o) { o.fwd = AlgoPolicy::of_family("winograd"); }},
      {"policy heuristic", [](TuneOptions& o) { o.fwd = AlgoPolicy::heuristic(); }},
      {"benchmark limit", [](TuneOptions& o) { o.benchmark_limit = 3; }},
      {"timing runs", [](TuneOptions& o) { o.timing_runs = 9; }},
      {"time naive", [](TuneOptions& o) { o.time_naive = true; }},
      {"variant factor off", [](TuneOptions& o) { o.variant_factor = 0; }},
      {"variant factor 1.5", [](TuneOptions& o) { o.variant_factor = 1.5; }},
      {"search budget", [](TuneOptions& o) { o.search_budget_ms = 2000; }},
      {"final contenders", [](TuneOptions& o) { o.final_contenders = 20; }},
  };
  std::set<std::string> keys{key_of(base)};
  for (const auto& [what, edit] : edits) {
    TuneOptions options = base;
    edit(options);
    EXPECT_TRUE(keys.insert(key_of(options)).second) << what << " did not change the key";
  }
  // Two different limits are two different keys.
  TuneOptions small = base;
  small.workspace_limit = 1024;
  TuneOptions large = base;
  large.workspace_limit = 2048;
  EXPECT_NE(key_of(small), key_of(large));
}

TEST(ChoiceKey, FastestMattersOnlyThroughTheLimitItLifts) {
  TuneOptions limited;
  limited.workspace_limit = 1024;
  TuneOptions fastest = limited;
  fastest.fastest = true;
  EXPECT_NE(key_of(limited), key_of(fastest));
  // fastest with a limit answers exactly like no limit at all.
  TuneOptions unlimited;
  EXPECT_EQ(key_of(fastest), key_of(unlimited));
}

TEST(ChoiceKey, DirectionFingerprintAndDescChangeTheKey) {
  const TuneOptions options;
  std::set<std::string> keys;
  keys.insert(key_of(options, Direction::fwd));
  EXPECT_TRUE(keys.insert(key_of(options, Direction::bwd_data)).second);
  EXPECT_TRUE(keys.insert(key_of(options, Direction::bwd_weights)).second);
  EXPECT_TRUE(keys.insert(key_of(options, Direction::fwd, base_desc(), "fp2")).second);

  std::vector<std::pair<std::string, std::function<void(ConvDesc&)>>> edits = {
      {"dtype f16", [](ConvDesc& d) { d.dtype = dnnx::DType::f16; }},
      {"dtype bf16", [](ConvDesc& d) { d.dtype = dnnx::DType::bf16; }},
      {"layout", [](ConvDesc& d) { d.layout = dnnx::Layout::channels_last; }},
      {"batch", [](ConvDesc& d) { d.batch = 3; }},
      {"in_channels", [](ConvDesc& d) { d.in_channels = 16; }},
      {"out_channels", [](ConvDesc& d) { d.out_channels = 8; }},
      {"groups", [](ConvDesc& d) { d.groups = 2; }},
      {"input h", [](ConvDesc& d) { d.input[0] = 15; }},
      {"input w", [](ConvDesc& d) { d.input[1] = 15; }},
      {"kernel",
       [](ConvDesc& d) {
         d.kernel = {1, 1, 1};
       }},
      {"stride", [](ConvDesc& d) { d.stride[1] = 2; }},
      {"pad_before only", [](ConvDesc& d) { d.pad_before[0] = 2; }},
      {"pad_after only", [](ConvDesc& d) { d.pad_after[0] = 2; }},
      {"dilation", [](ConvDesc& d) { d.dilation[0] = 2; }},
  };
  for (const auto& [what, edit] : edits) {
    ConvDesc desc = base_desc();
    edit(desc);
    desc.validate();
    EXPECT_NE(desc.key(), base_desc().key()) << what;
    EXPECT_FALSE(desc == base_desc()) << what;
    EXPECT_TRUE(keys.insert(key_of(options, Direction::fwd, desc)).second)
        << what << " did not change the key";
  }
}

TEST(ChoiceKey, UnusedSpatialEntriesDoNotChangeTheKey) {
  // A 2-D desc ignores its third spatial entry: two descs differing only there are one case.
  ConvDesc a = base_desc();
  ConvDesc b = base_desc();
  b.input[2] = 77;
  b.kernel[2] = 5;
  b.stride[2] = 3;
  EXPECT_EQ(a.key(), b.key());
}

// ---------------------------------------------------------------- engine + cache

// The op layer's lookup pattern with a counted fake: a hit must not run anything again.
TEST(ChoiceCache, AHitDoesNotRetime) {
  FakeBench bench;
  bench.add(Algo("a"), {2.0}).add(Algo("b"), {1.0});
  ChoiceCache cache;
  const TuneOptions options = options_with(AlgoPolicy::exhaustive());
  const std::string key = key_of(options);
  auto lookup = [&] {
    if (auto hit = cache.find(key)) return hit;
    auto choice = std::make_shared<const Choice>(
        dnnx::tune::select(fake_request(), bench.candidates(), options, bench.run()));
    cache.insert(key, choice);
    return choice;
  };
  const auto first = lookup();
  const int runs = bench.total_calls();
  // 1 + 3 runs each in the first pass, then 5 turns of two runs each in the final round (Note
  // [final round]).
  EXPECT_EQ(runs, 2 * (1 + 3) + 2 * 2 * options.timing_runs);
  const auto second = lookup();
  EXPECT_EQ(second, first);
  EXPECT_EQ(bench.total_calls(), runs);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(second->algo.id, "b");
}

}  // namespace
