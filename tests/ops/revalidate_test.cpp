// Note [re-validating persisted choices] (src/ops/dispatch.cpp): a choice read from the cache file
// is checked by describing its id alone (OpBackend::describe_candidate), and the candidates are
// listed only when that description is missing or not admissible here; then the listing decides
// as it always did. Note [late plans] (same file): a candidate a search skipped while its plan
// was still building is timed against the kept choice by the next process that reads it. Driven
// through detail::Dispatch with an op of this test's own (it borrows add's line of the op table)
// whose backend counts its listings and descriptions, so every expectation is exact. A first
// Context writes the file; a fresh Context with a fresh cache object reads it, as another process
// would.

#include <dnnx/dnnx.hpp>

#include "core/check.hpp"
#include "ops/dispatch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace dnnx;
namespace fs = std::filesystem;

struct RevalDesc {
  std::int64_t size = 8;
  void validate() const { DNNX_CHECK_ARG(size > 0, "size must be positive, got ", size); }
  std::string key() const { return "revalidate size=" + std::to_string(size); }
  std::size_t hash() const { return std::hash<std::int64_t>{}(size); }
  std::string repro(Direction direction) const {
    return "revalidate --size " + std::to_string(size) + " --direction " +
           std::string(to_string(direction));
  }
  bool operator==(const RevalDesc&) const = default;
};

struct RevalArgs {
  const Tensor* src = nullptr;
  Tensor* dst = nullptr;
};

AlgoInfo supported(std::string id, std::size_t workspace = 0, bool deterministic = true) {
  AlgoInfo info;
  info.id = std::move(id);
  info.name = info.id;
  info.supported = true;
  info.workspace_bytes = workspace;
  info.deterministic = deterministic;
  return info;
}

// What the backend lists, in order; each test sets it before each Context.
struct Table {
  std::vector<AlgoInfo> candidates;
  // Ids whose description throws (a backend failing to build the plan it describes by).
  std::vector<std::string> describe_throws;
  int listings = 0;
  int descriptions = 0;
  // Note [late plans]: descriptions without a plan (describe_unbuilt), and the ids whose full
  // plans were asked for (plan()).
  int unbuilt_descriptions = 0;
  std::vector<std::string> planned;
  std::vector<std::string> ran;
  // Note [late plans]: ids whose plans are still building when a search wants them (it skips
  // them), those whose plans the backend saves for later when asked (keep_late_plan), those a
  // later process has at hand (plan_at_hand), and how long each id's run takes (a sleep: a
  // test that needs one sleeping id to time faster than another sleeping one keeps them 10 ms
  // apart or more, as a loaded machine wakes a sleeper milliseconds late).
  std::vector<std::string> building;
  std::vector<std::string> saves_late;
  std::vector<std::string> at_hand;
  std::map<std::string, int> run_us;
  std::vector<std::string> kept_late;
  // Note [probing slow candidates]: whether searches probe (on a slice of half the size, whose
  // runs take a quarter of the full run's time and are recorded in `probed`), and the ids whose
  // plans for the slice are still building (probe_pending() skips them).
  bool slices = false;
  std::vector<std::string> slice_building;
  std::vector<std::string> probed;
  // Note [compile budget]: how long a listing takes, when the last one began, and what the last
  // prepare() was given as the search's start and when it was called.
  std::chrono::milliseconds listing_takes{0};
  std::chrono::steady_clock::time_point listed_at, search_start, prepared_at;
  void reset_counts() {
    listings = 0;
    descriptions = 0;
    unbuilt_descriptions = 0;
    planned.clear();
    ran.clear();
    kept_late.clear();
    probed.clear();
  }
};

bool contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

Table& table() {
  static Table t;
  return t;
}

class RevalPlan final : public detail::OpPlan<RevalArgs> {
 public:
  explicit RevalPlan(AlgoInfo info, bool slice = false) : info_(std::move(info)), slice_(slice) {}
  const AlgoInfo& algo() const override { return info_; }
  void execute(const RevalArgs& args, detail::Workspace workspace) override {
    EXPECT_GE(workspace.bytes, info_.workspace_bytes);
    (slice_ ? table().probed : table().ran).push_back(info_.id);
    if (const auto us = table().run_us.find(info_.id); us != table().run_us.end())
      std::this_thread::sleep_for(std::chrono::microseconds(slice_ ? us->second / 4 : us->second));
    args.dst->copy_from_f32(args.src->to_f32());
  }

 private:
  AlgoInfo info_;
  bool slice_;
};

// `Direct`: whether describe_candidate() answers without listing (a backend whose listing is
// costly) or keeps OpBackend's default (list, look the id up).
template <bool Direct>
class RevalBackend final : public detail::OpBackend<RevalDesc, RevalArgs> {
  // The table's candidate `id`, as the listing has it.
  static std::optional<AlgoInfo> listed(const std::string& id) {
    for (const AlgoInfo& info : table().candidates) {
      if (info.id == id) return info;
    }
    return std::nullopt;
  }

 public:
  std::vector<AlgoInfo> list(const RevalDesc&, Direction) override {
    ++table().listings;
    table().listed_at = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(table().listing_takes);
    return table().candidates;
  }
  void prepare(const RevalDesc&, Direction, const std::vector<std::string>&,
               std::chrono::steady_clock::time_point search_start) override {
    table().search_start = search_start;
    table().prepared_at = std::chrono::steady_clock::now();
  }
  std::optional<AlgoInfo> describe_candidate(const RevalDesc& desc, Direction direction,
                                             const std::string& id) override {
    if constexpr (!Direct) {
      return OpBackend::describe_candidate(desc, direction, id);
    } else {
      ++table().descriptions;
      const auto& throws = table().describe_throws;
      if (std::find(throws.begin(), throws.end(), id) != throws.end())
        throw Error(ErrorKind::BackendFailure, "cannot build the plan of " + id);
      return listed(id);
    }
  }
  std::optional<AlgoInfo> describe_unbuilt(const RevalDesc& desc, Direction direction,
                                           const std::string& id) override {
    if constexpr (!Direct) {
      return OpBackend::describe_unbuilt(desc, direction, id);
    } else {
      ++table().unbuilt_descriptions;
      return listed(id);
    }
  }
  // Plans are found without listing, as a backend's plan cache would serve them.
  std::shared_ptr<detail::OpPlan<RevalArgs>> plan(const RevalDesc&, Direction,
                                                  const std::string& id) override {
    table().planned.push_back(id);
    for (const AlgoInfo& info : table().candidates) {
      if (info.id != id) continue;
      if (!info.supported) throw Error(ErrorKind::Unsupported, info.reason);
      return std::make_shared<RevalPlan>(info);
    }
    throw Error(ErrorKind::InvalidArgument, "not a candidate: " + id);
  }
  std::vector<std::string> pending_plans(const RevalDesc&, Direction) override {
    return table().building;
  }
  std::string await_plan(const RevalDesc&, Direction, const std::string& id) override {
    return contains(table().building, id) ? "still building when the compile budget ran out"
                                          : std::string();
  }
  bool keep_late_plan(const RevalDesc&, Direction, const std::string& id) override {
    table().kept_late.push_back(id);
    return contains(table().saves_late, id);
  }
  bool plan_at_hand(const RevalDesc&, Direction, const std::string& id) override {
    return !contains(table().building, id) && !contains(table().slice_building, id) &&
           contains(table().at_hand, id);
  }
  std::shared_ptr<detail::OpPlan<RevalArgs>> probe_plan(const RevalDesc&, Direction,
                                                        const std::string& id) override {
    if (contains(table().slice_building, id)) return nullptr;
    for (const AlgoInfo& info : table().candidates) {
      if (info.id == id) return std::make_shared<RevalPlan>(info, /*slice=*/true);
    }
    return nullptr;
  }
  std::string probe_pending(const RevalDesc&, Direction, const std::string& id) override {
    return contains(table().slice_building, id) ? "its plan for the slice is still building"
                                                : std::string();
  }
};

template <bool Direct>
struct RevalOp {
  using Desc = RevalDesc;
  using Args = RevalArgs;
  static constexpr OpKind kind = OpKind::add;
  static detail::OpBackend<RevalDesc, RevalArgs>& backend(detail::ContextState&) {
    static RevalBackend<Direct> instance;
    return instance;
  }
  static void check(const Context&, const RevalDesc&, Direction, const RevalArgs&) {}
  struct Slice {
    RevalDesc desc;
    double fraction = 0.5;
    RevalArgs args;
  };
  static std::unique_ptr<Slice> slice(const RevalDesc& desc, Direction, const RevalArgs& args,
                                      int level) {
    if (!table().slices || level > 0) return nullptr;
    return std::make_unique<Slice>(Slice{RevalDesc{desc.size / 2}, 0.5, args});
  }
  struct Scratch {
    Tensor src, dst;
    RevalArgs args(Direction) { return {&src, &dst}; }
  };
  static Scratch scratch(const Context&, const RevalDesc& desc, Direction) {
    return {Tensor::zeros(Dims{desc.size}, DType::f32), Tensor::zeros(Dims{desc.size}, DType::f32)};
  }
};

class RevalidateTest : public ::testing::Test {
 protected:
  RevalidateTest() {
    std::string pattern = (fs::temp_directory_path() / "dnnx-revalidate-XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    folder_ = pattern;
    table() = Table{};
  }
  ~RevalidateTest() override {
    std::error_code ignored;
    fs::remove_all(folder_, ignored);
  }

  // A context whose cache reads and writes this test's file, with a cache object of its own.
  Context context(TuneOptions tune = {}, AlgoPolicy policy = AlgoPolicy::heuristic()) {
    CacheFileOptions file;
    file.mode = CacheMode::readwrite;
    file.path = (folder_ / "tune.json").string();
    cache_ = std::make_shared<ChoiceCache>(file);
    Context made(BackendKind::reference);
    made.set_choice_cache(cache_);
    tune.fwd = AlgoPolicy::heuristic();
    tune.policy(OpKind::add, Direction::fwd) = policy;  // the op of this test is add's line
    made.tune() = tune;
    return made;
  }

  // A call of the op; `size` makes the desc, and so the key, another.
  template <bool Direct = true>
  std::shared_ptr<const Choice> run(Context& context, std::int64_t size = 8) {
    Tensor src = Tensor::zeros(Dims{8}, DType::f32);
    Tensor dst = Tensor::zeros(Dims{8}, DType::f32);
    return detail::Dispatch<RevalOp<Direct>>::run(context, RevalDesc{size}, Direction::fwd,
                                                  RevalArgs{&src, &dst});
  }

  // No file and no cache object that could still write one: the next context starts afresh.
  void forget_the_file() {
    cache_.reset();
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }

  // The first process: its heuristic pick, "test:b" (listed first), goes to the file.
  template <bool Direct = true>
  void write_choice_of_b(TuneOptions tune = {}) {
    table().candidates = {supported("test:b", 1024), supported("test:a")};
    Context first = context(tune);
    EXPECT_EQ(run<Direct>(first)->algo.id, "test:b");
    EXPECT_EQ(cache_->file_stats().writes, 1u);
    table().reset_counts();
  }

  fs::path folder_;
  std::shared_ptr<ChoiceCache> cache_;
};

TEST_F(RevalidateTest, AValidChoiceFromTheFileIsDescribedAloneAndNeverListed) {
  write_choice_of_b();
  Context second = context();
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:b");
  EXPECT_FALSE(choice->from_file);
  EXPECT_EQ(choice->algo.workspace_bytes, 1024u) << "the description, not the file's record";
  EXPECT_EQ(table().listings, 0) << "a valid persisted choice must not list the candidates";
  EXPECT_EQ(table().descriptions, 1);
  EXPECT_EQ(table().ran, std::vector<std::string>{"test:b"});
  EXPECT_EQ(cache_->file_stats().applied, 1u);
  EXPECT_EQ(cache_->file_stats().invalidated, 0u);
  EXPECT_EQ(cache_->hits(), 1u);

  // Validated once per key and process: the next calls neither describe nor list.
  run(second);
  detail::Dispatch<RevalOp<true>>::select(second, RevalDesc{}, Direction::fwd);
  EXPECT_EQ(table().listings, 0);
  EXPECT_EQ(table().descriptions, 1);
}

TEST_F(RevalidateTest, TheDescriptionIsWhatTheChecksJudge) {
  // The file says 1024 B; the backend now describes b with more workspace than the limit, which
  // is the same in both processes (it is part of the key).
  TuneOptions limited;
  limited.workspace_limit = 2048;
  write_choice_of_b(limited);
  table().candidates = {supported("test:b", 4096), supported("test:a")};
  Context second = context(limited);
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:a");
  EXPECT_EQ(table().descriptions, 1);
  EXPECT_EQ(table().listings, 1) << "an inadmissible description falls back to the listing";
  EXPECT_EQ(table().ran, std::vector<std::string>{"test:a"});
  EXPECT_EQ(cache_->file_stats().invalidated, 1u);
}

// Each way a persisted id can stop being admissible: described unknown, unsupported, not
// deterministic under deterministic mode, overflow_risk. Every one lists once and re-selects
// from that listing, as before descriptions existed.
TEST_F(RevalidateTest, AnInadmissibleDescriptionFallsBackToTheListingAndReselects) {
  struct Case {
    const char* what;
    bool deterministic_mode;
    AlgoInfo b_now;  // id "" = b is gone
  };
  AlgoInfo unsupported = supported("test:b", 1024);
  unsupported.supported = false;
  unsupported.reason = "not on this device";
  AlgoInfo risky = supported("test:b", 1024);
  detail::mark_overflow_risk(risky);
  const std::vector<Case> cases{
      {"unknown id", false, AlgoInfo{}},
      {"unsupported", false, unsupported},
      {"not deterministic", true, supported("test:b", 1024, /*deterministic=*/false)},
      {"overflow_risk", false, risky},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TuneOptions tune;
    tune.deterministic = c.deterministic_mode;
    forget_the_file();
    write_choice_of_b(tune);
    table().candidates = {supported("test:a")};
    if (!c.b_now.id.empty()) table().candidates.insert(table().candidates.begin(), c.b_now);
    Context second = context(tune);
    const auto choice = run(second);
    EXPECT_EQ(choice->algo.id, "test:a");
    EXPECT_EQ(table().descriptions, 1);
    EXPECT_EQ(table().listings, 1);
    EXPECT_EQ(table().ran, std::vector<std::string>{"test:a"});
    EXPECT_EQ(cache_->file_stats().invalidated, 1u);
    EXPECT_EQ(cache_->hits(), 0u) << "a lookup whose entry failed re-validation is a miss";
  }
}

TEST_F(RevalidateTest, ADescriptionThatThrowsLeavesTheDecisionToTheListing) {
  write_choice_of_b();
  table().describe_throws = {"test:b"};
  Context second = context();
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:b") << "the listing still finds b valid";
  EXPECT_EQ(table().descriptions, 1);
  EXPECT_EQ(table().listings, 1);
  EXPECT_EQ(cache_->file_stats().applied, 1u);
}

TEST_F(RevalidateTest, ABackendWithoutItsOwnDescriptionListsOnceAsBefore) {
  write_choice_of_b</*Direct=*/false>();
  {
    Context second = context();
    const auto choice = run</*Direct=*/false>(second);
    EXPECT_EQ(choice->algo.id, "test:b");
    EXPECT_EQ(table().descriptions, 0);
    EXPECT_EQ(table().listings, 1) << "the default description lists and looks the id up";
    EXPECT_EQ(cache_->file_stats().applied, 1u);
  }

  // And an id the default description does not find is re-selected from that listing.
  forget_the_file();
  write_choice_of_b</*Direct=*/false>();
  table().candidates = {supported("test:a")};
  Context third = context();
  EXPECT_EQ(run</*Direct=*/false>(third)->algo.id, "test:a");
  EXPECT_EQ(table().listings, 2) << "one for the description, one for the re-selection";
  EXPECT_EQ(cache_->file_stats().invalidated, 1u);
}

// Note [compile budget]: a backend's compile budget counts from the search's start, so prepare()
// is given the time the search began, before its listing, not the time prepare() is called.
TEST_F(RevalidateTest, PrepareIsGivenTheSearchStartBeforeItsListing) {
  table().candidates = {supported("test:a"), supported("test:b")};
  table().listing_takes = std::chrono::milliseconds(30);
  Context process = context({}, AlgoPolicy::exhaustive());
  const auto before = std::chrono::steady_clock::now();
  run(process);
  EXPECT_EQ(table().listings, 1);
  EXPECT_GE(table().search_start, before);
  EXPECT_LE(table().search_start, table().listed_at) << "the listing is part of the search";
  EXPECT_GE(table().prepared_at - table().search_start, table().listing_takes);
}

// ---- Note [late plans] ------------------------------------------------------------------------

class LatePlansTest : public RevalidateTest {
 protected:
  // An exhaustive search in its own context (a process of its own), its cache file this test's.
  std::shared_ptr<const Choice> search() {
    Context process = context({}, AlgoPolicy::exhaustive());
    return run(process);
  }

  // The late plans of the file's one entry, as another process reads them.
  std::vector<std::string> late_on_file() const {
    CacheFileOptions file;
    file.mode = CacheMode::read;
    file.path = (folder_ / "tune.json").string();
    const auto entries = ChoiceCache(file).entries();
    EXPECT_EQ(entries.size(), 1u);
    return entries.empty() ? std::vector<std::string>{} : entries.front().second->late_plans;
  }

  // A search that probes (Note [probing slow candidates]): "test:huge" is abandoned on its full
  // run, which turns probing on; "test:rtc", whose run takes `rtc_us` (0, or 80000: its slice, a
  // quarter of that, 20 ms against 1 ms for the best's full run, far enough apart for a loaded
  // machine's late wake-ups), has its plan for the slice still building, and the backend saves its
  // plan for later when asked.
  void probes_with_a_late_slice_plan(int rtc_us) {
    table().slices = true;
    table().candidates = {supported("test:best"), supported("test:huge"), supported("test:rtc")};
    table().run_us = {{"test:best", 1000}, {"test:huge", 20000}, {"test:rtc", rtc_us}};
    table().slice_building = {"test:rtc"};
    table().saves_late = {"test:rtc"};
  }

  // The first process: "test:late" is still building when its search wants it, so "test:slow"
  // is chosen; the backend saves the late plan once built.
  std::shared_ptr<const Choice> first_process(int slow_us, int late_us) {
    table().candidates = {supported("test:slow"), supported("test:late")};
    table().run_us = {{"test:slow", slow_us}, {"test:late", late_us}};
    table().building = {"test:late"};
    table().saves_late = {"test:late"};
    const auto choice = search();
    table().building.clear();
    table().reset_counts();
    return choice;
  }
};

TEST_F(LatePlansTest, ASkippedPlanIsListedWithTheChoiceAndTheNextProcessTimesIt) {
  const auto first = first_process(/*slow_us=*/3000, /*late_us=*/0);
  EXPECT_EQ(first->algo.id, "test:slow");
  EXPECT_EQ(first->search.plans_skipped, 1);
  EXPECT_EQ(first->late_plans, std::vector<std::string>{"test:late"});
  EXPECT_EQ(late_on_file(), std::vector<std::string>{"test:late"});

  // The next process finds the saved plan and times it against the kept choice.
  table().at_hand = {"test:late"};
  {
    Context second = context({}, AlgoPolicy::exhaustive());
    const auto choice = run(second);
    EXPECT_EQ(choice->algo.id, "test:late");
    EXPECT_TRUE(choice->late_plans.empty());
    EXPECT_EQ(table().listings, 0) << "settling needs no listing";
    EXPECT_EQ(table().descriptions, 1) << "the kept choice";
    EXPECT_EQ(table().unbuilt_descriptions, 1) << "the late candidate, its plan built by its run";
    EXPECT_TRUE(contains(table().ran, "test:slow")) << "timed again, beside the late one";
    const auto late_row =
        std::find_if(choice->timings.begin(), choice->timings.end(),
                     [](const ProfileRow& row) { return row.algo.id == "test:late"; });
    ASSERT_NE(late_row, choice->timings.end());
    EXPECT_EQ(late_row->status, CandidateStatus::ok);
    EXPECT_EQ(choice->timings.front().algo.id, "test:late");
    EXPECT_EQ(cache_->file_stats().applied, 1u);
    EXPECT_EQ(cache_->file_stats().invalidated, 0u);
    EXPECT_EQ(cache_->file_stats().writes, 1u) << "the settled entry goes back to the file";
  }
  EXPECT_TRUE(late_on_file().empty());

  // Settled once: a third process runs the new choice and times nothing.
  table().reset_counts();
  Context third = context({}, AlgoPolicy::exhaustive());
  const auto choice = run(third);
  EXPECT_EQ(choice->algo.id, "test:late");
  EXPECT_EQ(table().ran, std::vector<std::string>{"test:late"});
  EXPECT_EQ(table().descriptions, 1);
  EXPECT_EQ(cache_->file_stats().writes, 0u);
}

// The process that made the choice times a late plan once it is at hand (asked at most every
// late_check_interval), keeping the one still building listed until it is at hand too.
TEST_F(LatePlansTest, TheSameProcessTimesEachLatePlanOnceItIsAtHand) {
  table().candidates = {supported("test:slow"), supported("test:late1"), supported("test:late2")};
  table().run_us = {{"test:slow", 30000}, {"test:late1", 10000}, {"test:late2", 0}};
  table().building = {"test:late1", "test:late2"};
  table().saves_late = {"test:late1", "test:late2"};
  Context process = context({}, AlgoPolicy::exhaustive());
  EXPECT_EQ(run(process)->algo.id, "test:slow");
  const auto wait = [] { std::this_thread::sleep_for(detail::late_check_interval * 3 / 2); };

  // Both still building: the call runs the choice and times nothing.
  table().reset_counts();
  wait();
  EXPECT_EQ(run(process)->algo.id, "test:slow");
  EXPECT_EQ(table().ran, std::vector<std::string>{"test:slow"});

  // late1 built: timed against the choice and chosen; late2 stays listed.
  table().building = {"test:late2"};
  table().at_hand = {"test:late1", "test:late2"};
  table().reset_counts();
  wait();
  auto choice = run(process);
  EXPECT_EQ(choice->algo.id, "test:late1");
  EXPECT_EQ(choice->late_plans, std::vector<std::string>{"test:late2"});
  EXPECT_TRUE(contains(table().ran, "test:slow"));
  EXPECT_FALSE(contains(table().ran, "test:late2"));
  EXPECT_EQ(late_on_file(), std::vector<std::string>{"test:late2"});

  // late2 built: timed against the new choice and chosen; nothing is listed any more.
  table().building.clear();
  table().reset_counts();
  wait();
  choice = run(process);
  EXPECT_EQ(choice->algo.id, "test:late2");
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_TRUE(contains(table().ran, "test:late1"));
  EXPECT_TRUE(late_on_file().empty());

  // Settled: the next calls run the choice alone.
  table().reset_counts();
  wait();
  EXPECT_EQ(run(process)->algo.id, "test:late2");
  EXPECT_EQ(table().ran, std::vector<std::string>{"test:late2"});
}

// Note [probing runtime-compiled candidates] (backends/cudnn/conv.cpp): once a search probes, a
// candidate whose plan for the slice is still building is skipped, not run in full, and kept as a
// late plan; it is at hand only once that plan is built, and its settling probes it first: a slow
// one is abandoned on its slice, a fast one timed and chosen.
TEST_F(LatePlansTest, ACandidateItsProbeCouldNotRunIsALatePlanSettledByAProbe) {
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "a fast late candidate" : "a slow late candidate");
    table() = Table{};
    forget_the_file();
    probes_with_a_late_slice_plan(fast ? 0 : 80000);
    table().at_hand = {"test:rtc"};
    Context process = context({}, AlgoPolicy::exhaustive());
    auto choice = run(process);
    EXPECT_EQ(choice->algo.id, "test:best");
    EXPECT_FALSE(contains(table().ran, "test:rtc")) << "never run in full";
    EXPECT_FALSE(contains(table().probed, "test:rtc"));
    const auto row = std::find_if(choice->timings.begin(), choice->timings.end(),
                                  [](const ProfileRow& r) { return r.algo.id == "test:rtc"; });
    ASSERT_NE(row, choice->timings.end());
    EXPECT_EQ(row->status, CandidateStatus::not_timed);
    EXPECT_EQ(row->detail, "its plan for the slice is still building");
    EXPECT_EQ(choice->late_plans, std::vector<std::string>{"test:rtc"});
    EXPECT_EQ(late_on_file(), std::vector<std::string>{"test:rtc"});

    // Its slice plan still building: not at hand, nothing is timed.
    const auto wait = [] { std::this_thread::sleep_for(detail::late_check_interval * 3 / 2); };
    table().reset_counts();
    wait();
    EXPECT_EQ(run(process)->algo.id, "test:best");
    EXPECT_EQ(table().ran, std::vector<std::string>{"test:best"});
    EXPECT_TRUE(table().probed.empty());

    // Built: the settling probes it first.
    table().slice_building.clear();
    table().reset_counts();
    wait();
    choice = run(process);
    EXPECT_TRUE(contains(table().probed, "test:rtc"));
    EXPECT_EQ(contains(table().ran, "test:rtc"), fast) << "a full run only after a fast slice";
    EXPECT_EQ(choice->algo.id, fast ? "test:rtc" : "test:best");
    EXPECT_TRUE(choice->late_plans.empty());
    EXPECT_TRUE(late_on_file().empty());
  }
}

// A later process settles such a late plan the same way, probing first with probe plans for the
// settled candidates alone: it lists nothing, and a slow late candidate costs no full run.
TEST_F(LatePlansTest, ALaterProcessProbesALatePlanFirstWithoutListing) {
  probes_with_a_late_slice_plan(80000);
  {
    Context process = context({}, AlgoPolicy::exhaustive());
    EXPECT_EQ(run(process)->late_plans, std::vector<std::string>{"test:rtc"});
  }
  // The next process has both plans (the slice plan saved once built).
  table().slice_building.clear();
  table().at_hand = {"test:rtc"};
  table().reset_counts();
  Context second = context({}, AlgoPolicy::exhaustive());
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:best");
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_EQ(table().listings, 0) << "settling needs no listing, its probes neither";
  EXPECT_EQ(table().probed, std::vector<std::string>{"test:rtc"})
      << "the kept choice, timed first, has no probe";
  EXPECT_FALSE(contains(table().ran, "test:rtc")) << "abandoned on its slice";
  EXPECT_EQ(table().unbuilt_descriptions, 1);
  EXPECT_FALSE(contains(table().planned, "test:rtc")) << "its full plan never built";
  EXPECT_TRUE(late_on_file().empty());
}

// Without a cache file no late plan is kept, so a probe that cannot run yet skips nothing: the
// candidate's full run decides, as it would without probes.
TEST_F(LatePlansTest, WithoutACacheFileAProbeThatCannotRunLeavesItToTheFullRun) {
  probes_with_a_late_slice_plan(0);
  Context process(BackendKind::reference);
  process.set_choice_cache(std::make_shared<ChoiceCache>());
  process.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::exhaustive();
  const auto choice = run(process);
  EXPECT_EQ(choice->algo.id, "test:rtc");
  EXPECT_TRUE(contains(table().ran, "test:rtc"));
  EXPECT_TRUE(choice->late_plans.empty());
}

// A later process settles within TuneOptions::late_plan_share of the recorded search: the kept
// choice and the first late plan always run, the others stay listed for the next process (a
// share too small for more than one: one a process); 0 settles them all at once.
TEST_F(LatePlansTest, ALaterProcessSettlesWithinItsShareAndLeavesTheRest) {
  const std::vector<std::string> late = {"test:late1", "test:late2", "test:late3"};
  auto first = [&] {
    table() = Table{};
    forget_the_file();
    table().candidates = {supported("test:slow"), supported(late[0]), supported(late[1]),
                          supported(late[2])};
    table().run_us = {{"test:slow", 30000}, {late[0], 20000}, {late[1], 10000}, {late[2], 0}};
    table().building = late;
    table().saves_late = late;
    EXPECT_EQ(search()->late_plans, late);
    table().building.clear();
    table().at_hand = late;
  };
  first();
  TuneOptions bounded;
  bounded.late_plan_share = 1e-9;
  for (std::size_t process = 0; process < late.size(); ++process) {
    SCOPED_TRACE("later process " + std::to_string(process + 1));
    table().reset_counts();
    Context later = context(bounded, AlgoPolicy::exhaustive());
    const auto choice = run(later);
    EXPECT_EQ(choice->algo.id, late[process]) << "each late plan is faster than the last";
    const std::vector<std::string> left(late.begin() + static_cast<std::ptrdiff_t>(process) + 1,
                                        late.end());
    EXPECT_EQ(choice->late_plans, left);
    EXPECT_EQ(late_on_file(), left);
    EXPECT_TRUE(contains(table().ran, late[process]));
    for (const std::string& id : left) {
      EXPECT_FALSE(contains(table().ran, id)) << id;
      // Its row is still the first search's (skipped while building) until it is timed.
      const auto row =
          std::find_if(choice->timings.begin(), choice->timings.end(),
                       [&](const ProfileRow& r) { return r.algo.id == id; });
      ASSERT_NE(row, choice->timings.end()) << id;
      EXPECT_EQ(row->status, CandidateStatus::not_timed) << id;
      EXPECT_FALSE(row->detail.starts_with(tune::settling_budget_detail)) << row->detail;
    }
  }
  // Settled: the next process times nothing.
  table().reset_counts();
  {
    Context settled = context(bounded, AlgoPolicy::exhaustive());
    EXPECT_EQ(run(settled)->algo.id, late[2]);
    EXPECT_EQ(table().ran, std::vector<std::string>{late[2]});
  }

  // Share 0: every late plan in the first later process.
  first();
  TuneOptions unbounded;
  unbounded.late_plan_share = 0;
  table().reset_counts();
  Context later = context(unbounded, AlgoPolicy::exhaustive());
  const auto choice = run(later);
  EXPECT_EQ(choice->algo.id, late[2]);
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_TRUE(late_on_file().empty());

  // An out-of-range share is an InvalidArgument naming it.
  first();
  TuneOptions bad;
  bad.late_plan_share = 1.5;
  Context invalid = context(bad, AlgoPolicy::exhaustive());
  try {
    run(invalid);
    ADD_FAILURE() << "a late_plan_share of 1.5 was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(error.what()).find("late_plan_share"), std::string::npos) << error.what();
  }
}

// Note [settling credit]: the share is pooled over the choices a process reads from the file.
// With a share too small for one late plan, the first choice that lists late plans still settles
// one and leaves the credit in debt, so the next choice keeps its list untouched (its late plans
// neither described nor run) for a later process, whose credit is its own; what a process leaves
// listed it does not take up on later calls either.
TEST_F(LatePlansTest, ALaterProcessPoolsItsShareOverTheChoicesItReads) {
  const std::vector<std::string> late = {"test:late1", "test:late2"};
  table().candidates = {supported("test:slow"), supported(late[0]), supported(late[1])};
  table().run_us = {{"test:slow", 20000}, {late[0], 10000}, {late[1], 0}};
  table().building = late;
  table().saves_late = late;
  {
    Context first = context({}, AlgoPolicy::exhaustive());
    EXPECT_EQ(run(first, 8)->late_plans, late);
    EXPECT_EQ(run(first, 16)->late_plans, late);
  }
  table().building.clear();
  table().at_hand = late;
  auto late_of = [&](std::int64_t size) {
    CacheFileOptions file;
    file.mode = CacheMode::read;
    file.path = (folder_ / "tune.json").string();
    for (const auto& [key, choice] : ChoiceCache(file).entries()) {
      if (key.find(RevalDesc{size}.key()) != std::string::npos) return choice->late_plans;
    }
    ADD_FAILURE() << "no entry for size " << size;
    return std::vector<std::string>{};
  };
  TuneOptions bounded;
  bounded.late_plan_share = 1e-9;
  {
    table().reset_counts();
    Context later = context(bounded, AlgoPolicy::exhaustive());
    const auto settled = run(later, 8);
    EXPECT_EQ(settled->algo.id, late[0]);
    EXPECT_EQ(settled->late_plans, std::vector<std::string>{late[1]});
    table().reset_counts();
    const auto kept = run(later, 16);
    EXPECT_EQ(kept->algo.id, "test:slow");
    EXPECT_EQ(kept->late_plans, late);
    EXPECT_EQ(table().ran, std::vector<std::string>{"test:slow"}) << "the call alone ran";
    EXPECT_TRUE(table().probed.empty());
    EXPECT_EQ(table().unbuilt_descriptions, 0);
    EXPECT_EQ(late_of(8), std::vector<std::string>{late[1]});
    EXPECT_EQ(late_of(16), late);
    // Deferred for the rest of the process: later calls, past the interval at which a call
    // asks whether a late plan is at hand (their saved plans are), do not take them up.
    std::this_thread::sleep_for(detail::late_check_interval + std::chrono::milliseconds(20));
    table().reset_counts();
    for (const std::int64_t size : {8, 16, 16}) run(later, size);
    EXPECT_EQ(table().ran, (std::vector<std::string>{late[0], "test:slow", "test:slow"}))
        << "the calls alone ran";
    EXPECT_TRUE(table().probed.empty());
    EXPECT_EQ(late_of(8), std::vector<std::string>{late[1]});
    EXPECT_EQ(late_of(16), late);
  }
  {
    table().reset_counts();
    Context next = context(bounded, AlgoPolicy::exhaustive());
    const auto settled = run(next, 16);
    EXPECT_EQ(settled->algo.id, late[0]) << "a new process has a credit of its own";
    EXPECT_EQ(settled->late_plans, std::vector<std::string>{late[1]});
    EXPECT_EQ(late_of(16), std::vector<std::string>{late[1]});
  }
}

TEST_F(LatePlansTest, TheKeptChoiceStaysWhenItIsFaster) {
  first_process(/*slow_us=*/0, /*late_us=*/3000);
  table().at_hand = {"test:late"};
  Context second = context({}, AlgoPolicy::exhaustive());
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:slow");
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_TRUE(contains(table().ran, "test:late"));
  EXPECT_EQ(cache_->file_stats().writes, 1u);
  EXPECT_TRUE(late_on_file().empty());
}

TEST_F(LatePlansTest, APlanNotAtHandIsDroppedWithoutBuildingIt) {
  first_process(/*slow_us=*/3000, /*late_us=*/0);
  // at_hand stays empty: the plan was never saved, or its file is gone.
  Context second = context({}, AlgoPolicy::exhaustive());
  const auto choice = run(second);
  EXPECT_EQ(choice->algo.id, "test:slow");
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_FALSE(contains(table().ran, "test:late"));
  EXPECT_EQ(table().descriptions, 1) << "the late candidate is not described (built)";
  EXPECT_EQ(table().unbuilt_descriptions, 0);
  EXPECT_EQ(cache_->file_stats().writes, 1u) << "the list is dropped from the file";
  EXPECT_TRUE(late_on_file().empty());
}

TEST_F(LatePlansTest, NothingIsListedWhenTheBackendSavesNoPlan) {
  table().candidates = {supported("test:slow"), supported("test:late")};
  table().building = {"test:late"};
  const auto choice = search();
  EXPECT_EQ(choice->search.plans_skipped, 1);
  EXPECT_EQ(table().kept_late, std::vector<std::string>{"test:late"}) << "it was asked";
  EXPECT_TRUE(choice->late_plans.empty());
  EXPECT_TRUE(late_on_file().empty());
}

TEST_F(LatePlansTest, AMemoryOnlyCacheAsksTheBackendToSaveNothing) {
  table().candidates = {supported("test:slow"), supported("test:late")};
  table().building = {"test:late"};
  table().saves_late = {"test:late"};
  Context process(BackendKind::reference);
  process.set_choice_cache(std::make_shared<ChoiceCache>());
  process.tune().policy(OpKind::add, Direction::fwd) = AlgoPolicy::exhaustive();
  const auto choice = run(process);
  EXPECT_TRUE(table().kept_late.empty());
  EXPECT_TRUE(choice->late_plans.empty());
}

}  // namespace
