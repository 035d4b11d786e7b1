// Note [run-time fallback] (src/ops/dispatch.hpp): when the candidate a call chose fails while
// running, every op's call path hands the error to detail::fall_back, which tries the other
// admissible candidates and keeps the one that works. Driven here with scripted candidates, so
// every expectation is exact: the order tried, what is skipped, what is rethrown, what the cache
// holds afterwards.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>

#include "ops/dispatch.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using dnnx::AlgoInfo;
using dnnx::AlgoPolicy;
using dnnx::BackendKind;
using dnnx::CandidateStatus;
using dnnx::Choice;
using dnnx::ChoiceCache;
using dnnx::Context;
using dnnx::Direction;
using dnnx::Error;
using dnnx::ErrorKind;
using dnnx::OpKind;
using dnnx::ProfileRow;

AlgoInfo algo(const std::string& id, std::size_t workspace = 0, bool supported = true) {
  AlgoInfo info;
  info.id = id;
  info.name = id;
  info.supported = supported;
  if (!supported) info.reason = "scripted: cannot run";
  info.workspace_bytes = workspace;
  return info;
}

ProfileRow row(const AlgoInfo& info, CandidateStatus status, double ms) {
  ProfileRow r;
  r.algo = info;
  r.status = status;
  r.median_ms = r.min_ms = ms;
  r.runs = status == CandidateStatus::ok ? 5 : 0;
  return r;
}

// A backend's candidates and what happens when each runs: ids in `fails` throw their kind.
struct Script {
  std::vector<AlgoInfo> listed;
  std::map<std::string, ErrorKind> fails;
  std::vector<std::string> tried;

  AlgoInfo run(const std::string& id) {
    tried.push_back(id);
    if (auto it = fails.find(id); it != fails.end())
      throw Error(it->second, "scripted failure of " + id);
    for (const AlgoInfo& info : listed) {
      if (info.id == id) return info;
    }
    throw Error(ErrorKind::InvalidArgument, "not listed: " + id);
  }
};

class RunTimeFallback : public ::testing::Test {
 protected:
  RunTimeFallback() : context_(BackendKind::reference) {
    context_.set_choice_cache(std::make_shared<ChoiceCache>());
  }

  // Calls fall_back as the op layer does: from the handler of the chosen candidate's failure.
  std::shared_ptr<const Choice> fail_and_fall_back(std::shared_ptr<const Choice> choice,
                                                   ErrorKind kind, Script& script) {
    try {
      throw Error(kind, "scripted failure of " + choice->algo.id);
    } catch (const Error& error) {
      return dnnx::detail::fall_back(
          context_, dnnx::detail::state_of(context_), OpKind::pool, Direction::fwd, std::move(choice), error,
          [&] { return script.listed; }, [&](const std::string& id) { return script.run(id); });
    }
  }

  std::shared_ptr<Choice> choice(const AlgoPolicy& policy, const AlgoInfo& chosen,
                                 std::vector<ProfileRow> timings = {}) {
    auto c = std::make_shared<Choice>();
    c->policy = policy;
    c->algo = chosen;
    c->op = "pool";
    c->key = "fallback-test-key";
    c->timings = std::move(timings);
    context_.choice_cache()->insert(c->key, c);
    return c;
  }

  Context context_;
};

TEST_F(RunTimeFallback, ExhaustiveTriesTheTimedCandidatesFastestFirstThenTheList) {
  Script script;
  const AlgoInfo a = algo("a"), b = algo("b"), c = algo("c"), d = algo("d"), e = algo("e");
  script.listed = {e, d, a, b, c, algo("x", 0, false)};
  script.fails = {{"b", ErrorKind::OutOfMemory}, {"c", ErrorKind::BackendFailure}};
  // Timed fastest first: a (the choice), b, c; d was abandoned; e never timed.
  auto chosen =
      choice(AlgoPolicy::exhaustive(), a,
             {row(a, CandidateStatus::ok, 1.0), row(b, CandidateStatus::ok, 2.0),
              row(c, CandidateStatus::ok, 3.0), row(d, CandidateStatus::abandoned, 40.0)});
  const auto ran = fail_and_fall_back(chosen, ErrorKind::BackendFailure, script);
  EXPECT_EQ(ran->algo.id, "e");  // then the list order: e before d
  EXPECT_EQ(script.tried, (std::vector<std::string>{"b", "c", "e"}));
  // Later calls go straight to the candidate that worked.
  const auto cached = context_.choice_cache()->find("fallback-test-key");
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->algo.id, "e");
  EXPECT_EQ(cached->policy.kind, dnnx::PolicyKind::exhaustive);
}

TEST_F(RunTimeFallback, HeuristicFollowsTheListSkippingInadmissibleCandidates) {
  Script script;
  script.listed = {algo("first"), algo("big", 1 << 20), algo("unsupported", 0, false),
                   algo("risky"), algo("small", 16)};
  dnnx::detail::mark_overflow_risk(script.listed[3]);  // Note [unsafe candidates]
  context_.tune().workspace_limit = 1024;
  auto chosen = choice(AlgoPolicy::heuristic(), script.listed[0]);
  const auto ran = fail_and_fall_back(chosen, ErrorKind::OutOfMemory, script);
  EXPECT_EQ(ran->algo.id, "small");
  EXPECT_EQ(script.tried, (std::vector<std::string>{"small"}));
}

TEST_F(RunTimeFallback, FixedIdsAndCallerErrorsAreRethrownUntouched) {
  Script script;
  script.listed = {algo("a"), algo("b")};
  auto fixed = choice(AlgoPolicy::fixed("a"), script.listed[0]);
  try {
    fail_and_fall_back(fixed, ErrorKind::BackendFailure, script);
    ADD_FAILURE() << "a fixed id fell back";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::BackendFailure);
    EXPECT_NE(std::string(error.what()).find("scripted failure of a"), std::string::npos);
  }
  auto heuristic = choice(AlgoPolicy::heuristic(), script.listed[0]);
  try {
    fail_and_fall_back(heuristic, ErrorKind::InvalidArgument, script);
    ADD_FAILURE() << "an InvalidArgument fell back";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_TRUE(script.tried.empty());
}

TEST_F(RunTimeFallback, ANonRecoverableErrorOfAFallbackStopsTheSearch) {
  Script script;
  script.listed = {algo("a"), algo("b"), algo("c")};
  script.fails = {{"b", ErrorKind::InvalidArgument}};
  auto chosen = choice(AlgoPolicy::heuristic(), script.listed[0]);
  try {
    fail_and_fall_back(chosen, ErrorKind::OutOfMemory, script);
    ADD_FAILURE() << "fell past a non-recoverable error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_EQ(script.tried, (std::vector<std::string>{"b"}));
}

TEST_F(RunTimeFallback, WhenEveryCandidateFailsTheErrorNamesEachFailure) {
  Script script;
  script.listed = {algo("a"), algo("b"), algo("c")};
  script.fails = {{"b", ErrorKind::OutOfMemory}, {"c", ErrorKind::BackendFailure}};
  auto chosen = choice(AlgoPolicy::heuristic(), script.listed[0]);
  try {
    fail_and_fall_back(chosen, ErrorKind::OutOfMemory, script);
    ADD_FAILURE() << "no error although every candidate failed";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::OutOfMemory);  // the original failure's kind
    const std::string message = error.what();
    for (const char* expected :
         {"every admissible candidate failed at run time", "scripted failure of a",
          "b: scripted failure of b", "c: scripted failure of c"}) {
      EXPECT_NE(message.find(expected), std::string::npos) << expected << " in " << message;
    }
  }
  EXPECT_EQ(script.tried, (std::vector<std::string>{"b", "c"}));
  // The cache still holds the original choice: nothing worked.
  EXPECT_EQ(context_.choice_cache()->find("fallback-test-key")->algo.id, "a");
}

}  // namespace
