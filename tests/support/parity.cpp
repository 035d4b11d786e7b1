#include "support/parity.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>
#include <utility>

namespace dnnx::test {

ParityExpected ParityCase::reference(Direction direction) const {
  Context context =
      parity_context(BackendKind::reference, op_kind(), direction, AlgoPolicy::heuristic());
  return {run(context, direction), {}};
}

::testing::AssertionResult ParityCase::finite(const ParityRun& run, const ParityRun& /*expected*/,
                                              std::string_view where) const {
  for (const ParityOutput& output : run.outputs) {
    if (output.tensor.is_null() || !is_floating(output.tensor.dtype())) continue;
    ::testing::AssertionResult result = all_finite(output.tensor, output.name, where);
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}

int ParityCase::min_ran(BackendKind /*backend*/, Direction direction,
                        const std::vector<AlgoInfo>& /*algos*/) const {
  return computable(direction) ? 1 : 0;
}

Context parity_context(BackendKind backend, OpKind op, Direction direction,
                       const AlgoPolicy& policy) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune().policy(op, direction) = policy;
  return context;
}

std::vector<BackendKind> parity_backends(bool with_cudnn) {
  std::vector<BackendKind> backends{BackendKind::cpu};
  if (with_cudnn && backend_available(BackendKind::cudnn)) backends.push_back(BackendKind::cudnn);
  return backends;
}

namespace {

// gtest keeps the last value recorded under a key; a test that checks several cases or
// directions reports their sum.
void record_counts(const ParityTally& tally) {
  struct Totals {
    std::string test;
    int ran = 0;
    int unsupported = 0;
  };
  static Totals totals;
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return;
  const std::string test = std::string(info->test_suite_name()) + "." + info->name();
  if (totals.test != test) totals = {test, 0, 0};
  totals.ran += tally.ran;
  totals.unsupported += tally.unsupported;
  ::testing::Test::RecordProperty("candidates_run", totals.ran);
  ::testing::Test::RecordProperty("candidates_unsupported", totals.unsupported);
}

::testing::AssertionResult same_bits(const ParityRun& first, const ParityRun& second,
                                     std::string_view where) {
  if (first.outputs.size() != second.outputs.size()) {
    return ::testing::AssertionFailure() << "two runs wrote " << first.outputs.size() << " and "
                                         << second.outputs.size() << " outputs\n  " << where;
  }
  for (std::size_t k = 0; k < first.outputs.size(); ++k) {
    // An output the desc does not have (e.g. batch norm's saved statistics in inference).
    if (first.outputs[k].tensor.is_null() && second.outputs[k].tensor.is_null()) continue;
    ::testing::AssertionResult result = bitwise_equal(
        first.outputs[k].tensor, second.outputs[k].tensor, first.outputs[k].name, where);
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}

// One candidate listed as supported: run, check, and (deterministic) run again.
void check_candidate_run(const ParityCase& c, BackendKind backend, Direction direction,
                         const AlgoInfo& algo, const ParityExpected& expected,
                         const std::string& where, ParityTally& tally, std::ostream& summary) {
  Context fixed = parity_context(backend, c.op_kind(), direction, AlgoPolicy::fixed(algo.id));
  const auto start = std::chrono::steady_clock::now();
  ParityRun first;
  try {
    first = c.run(fixed, direction);
  } catch (const Error& error) {
    ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                  << error.what() << "\n  " << where;
    return;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++tally.ran;
  tally.ran_ids.push_back(algo.id);
  if (first.choice == nullptr) {
    ADD_FAILURE() << "the op returned no choice\n  " << where;
    return;
  }
  EXPECT_EQ(first.choice->algo.id, algo.id) << "a fixed policy ran another candidate\n  " << where;
  EXPECT_EQ(first.choice->direction, direction) << where;
  const ::testing::AssertionResult finite = c.finite(first, expected.run, where);
  if (!finite) {
    ADD_FAILURE() << finite.message();
    return;
  }
  // Stays negative for a comparison that does not report its worst ratio.
  double ratio = -1;
  EXPECT_TRUE(c.close(direction, algo, first, expected, where, &ratio));
  tally.worst = std::max(tally.worst, ratio);
  summary << "\n    ran  " << algo.id << " (" << ms << " ms";
  if (ratio >= 0) summary << ", error " << ratio << " of the bound";
  summary << (algo.deterministic ? ", deterministic" : "") << ")";
  try {
    c.check_candidate(fixed, direction, algo, first, expected, where);
    if (c.repeat_bitwise(algo)) {
      const ParityRun again = c.run(fixed, direction);
      EXPECT_TRUE(same_bits(first, again, where));
    }
  } catch (const Error& error) {
    ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind())
                  << " on a later run: " << error.what() << "\n  " << where;
  }
}

}  // namespace

ParityTally check_parity(const ParityCase& c, BackendKind backend, Direction direction) {
  ParityTally tally;
  const std::string none = c.where(direction, "(none)");
  const bool computable = c.computable(direction);
  ParityExpected expected;
  if (computable) {
    expected = c.reference(direction);
    const ::testing::AssertionResult finite =
        c.finite(expected.run, expected.run,
                 "reference: " + c.where(direction, expected.run.choice != nullptr
                                                        ? expected.run.choice->algo.id
                                                        : std::string("(reference)")));
    if (!finite) {
      ADD_FAILURE() << finite.message();
      return tally;
    }
  }

  Context base = parity_context(backend, c.op_kind(), direction, AlgoPolicy::heuristic());
  const std::vector<AlgoInfo> algos = c.list(base, direction);
  tally.listed = static_cast<int>(algos.size());
  if (algos.empty()) {
    ADD_FAILURE() << "the listing has no candidates at all\n  " << none;
    return tally;
  }
  c.check_listing(backend, direction, algos);

  std::ostringstream summary;
  for (const AlgoInfo& algo : algos) {
    const std::string where = c.where(direction, algo.id);
    if (!algo.supported) {
      ++tally.unsupported;
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_FALSE(algo.reason.empty()) << "unsupported candidate without a reason\n  " << where;
      EXPECT_TRUE(c.expected_unsupported(direction, algo))
          << "candidate " << algo.id << " is unsupported for a reason the op does not expect: \""
          << algo.reason << "\"\n  " << where;
      continue;
    }
    ++tally.supported;
    if (!computable) {
      ADD_FAILURE() << "a candidate claims support where the direction cannot be computed\n  "
                    << where;
      continue;
    }
    check_candidate_run(c, backend, direction, algo, expected, where, tally, summary);
  }
  std::cout << "[ parity   ] " << to_string(backend) << " " << c.label() << " "
            << to_string(direction) << ": " << tally.ran << " ran, " << tally.unsupported
            << " unsupported, worst error " << tally.worst << " of the bound" << summary.str()
            << "\n";
  record_counts(tally);

  EXPECT_GE(tally.ran, c.min_ran(backend, direction, algos))
      << "too few " << to_string(backend) << " candidates ran\n  " << none;
  if (tally.ran == 0) {
    // Nothing can run: the op itself must refuse with Unsupported, not run something else.
    try {
      c.run(base, direction);
      ADD_FAILURE() << "no candidate ran but the op ran anyway\n  "
                    << c.where(direction, "(heuristic)");
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    }
  }
  c.check_after(base, direction, algos, tally, expected);
  return tally;
}

::testing::AssertionResult finite_where_expected(const Tensor& actual, const Tensor& expected,
                                                 std::string_view what, std::string_view where) {
  std::vector<float> got = actual.to_f32();
  const std::vector<float> want = expected.to_f32();
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " elements, the reference " << want.size() << "\n  "
           << where;
  }
  // Where the reference is not finite, this check has nothing to say.
  for (std::size_t k = 0; k < got.size(); ++k)
    if (!std::isfinite(want[k])) got[k] = 0;
  return all_finite(got, actual.dims(), what, where);
}

std::string parity_test_name(std::string text) {
  for (char& ch : text)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return text;
}

}  // namespace dnnx::test
