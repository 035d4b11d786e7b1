#pragma once
// The parity runner every op's parity test drives (STYLE.md "Tests"): one (case, backend,
// direction) at a time, every listed candidate of the backend against the reference backend.
//
// An op supplies a ParityCase: its desc's repro line, how to list and run one direction through
// the public API, how outputs are compared (its per-dtype tolerance lives with its case table),
// and the reasons a candidate may be unsupported. check_parity() then, for that case:
//   - runs the reference (the oracle) and checks its outputs for NaN/Inf;
//   - lists the backend's candidates (the listing must not be empty);
//   - counts each unsupported candidate, which must carry a reason the op expects;
//   - runs each supported one through a context whose policy is fixed to its id, into outputs
//     that start as NaN; checks that the fixed candidate ran, then NaN/Inf, then the op's
//     comparison with the reference; runs it again and compares every output bitwise when it
//     claims determinism;
//   - requires that enough candidates ran (one by default), and, when none ran, that the op
//     itself refuses the case with Unsupported instead of running something else.
// Failure messages carry the case's where() line: the candidate id and the desc's repro().

#include <dnnx/dnnx.hpp>

#include "support/compare.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One output of a run: what a direction writes (dst, diff_src, indices, statistics...), on the
/// host.
struct ParityOutput {
  std::string name;  ///< "output", "dst", "indices"... (failure messages)
  Tensor tensor;
};

/// What one run of one direction produced, and the choice that ran.
struct ParityRun {
  std::vector<ParityOutput> outputs;
  std::shared_ptr<const Choice> choice;
};

/// The reference's answer to one direction, and the per-element error scale the op's
/// comparison is relative to (empty for ops whose comparison computes its own).
struct ParityExpected {
  ParityRun run;
  std::vector<float> scale;
};

/// What check_parity() saw for one (case, backend, direction).
struct ParityTally {
  int listed = 0;
  int supported = 0;    ///< listed as supported
  int ran = 0;          ///< ran without throwing
  int unsupported = 0;  ///< counted skips, each with an expected reason
  double worst = 0;     ///< largest error / bound of the candidates that ran
  std::vector<std::string> ran_ids;
};

/// One case of an op in one dtype: what the runner needs to know about the op. Implementations
/// hold the case's inputs (built once, reproducible from the case name) and answer for any
/// direction the test asks for.
class ParityCase {
 public:
  virtual ~ParityCase() = default;

  /// The op whose policy a context fixes.
  virtual OpKind op_kind() const = 0;
  /// The case as the summary line names it, e.g. "c1000_log f16".
  virtual std::string label() const = 0;
  /// Failure context: op, direction, candidate id, the desc and its repro(direction) line.
  virtual std::string where(Direction direction, std::string_view candidate) const = 0;

  /// The candidates `context`'s backend lists for the direction.
  virtual std::vector<AlgoInfo> list(Context& context, Direction direction) const = 0;
  /// Runs the direction with `context`'s policy into fresh outputs that start as NaN (so an
  /// element left unwritten fails the NaN/Inf check). The same inputs on every call.
  virtual ParityRun run(Context& context, Direction direction) const = 0;
  /// The oracle: by default run() on the reference backend with the heuristic policy and no
  /// error scale.
  virtual ParityExpected reference(Direction direction) const;
  /// Whether the direction can be computed at all (e.g. an activation's backward from a saved
  /// tensor it has no derivative of). When not, no candidate may claim support and the op must
  /// refuse the case with Unsupported.
  virtual bool computable(Direction) const { return true; }

  /// The NaN/Inf check, run before the comparison: by default every floating-point output must
  /// be finite. `expected` is the reference's run (itself when checking the reference).
  virtual ::testing::AssertionResult finite(const ParityRun& run, const ParityRun& expected,
                                            std::string_view where) const;
  /// The comparison with the reference within the op's tolerance for the dtype (and, where the
  /// op needs it, the direction and candidate); `worst` receives the largest error / bound, where
  /// the comparison reports it.
  virtual ::testing::AssertionResult close(Direction direction, const AlgoInfo& algo,
                                           const ParityRun& actual, const ParityExpected& expected,
                                           std::string_view where, double* worst) const = 0;
  /// Whether `algo` may be unsupported for this case and direction: judged from the reason the
  /// listing gives, never from what one machine's ISA offers.
  virtual bool expected_unsupported(Direction direction, const AlgoInfo& algo) const = 0;
  /// Whether two runs of `algo` must agree bitwise: by default when it claims determinism.
  virtual bool repeat_bitwise(const AlgoInfo& algo) const { return algo.deterministic; }
  /// How many candidates must run: by default one (none where the direction is not computable).
  virtual int min_ran(BackendKind backend, Direction direction,
                      const std::vector<AlgoInfo>& algos) const;

  /// Op-specific checks the runner calls: on the whole listing before anything runs, ...
  virtual void check_listing(BackendKind, Direction, const std::vector<AlgoInfo>&) const {}
  /// ... on each candidate after its output compared (e.g. an in-place run, other index dtypes;
  /// `fixed` is the candidate's fixed-policy context) ...
  virtual void check_candidate(Context& /*fixed*/, Direction, const AlgoInfo&,
                               const ParityRun& /*first*/, const ParityExpected&,
                               std::string_view /*where*/) const {}
  /// ... and after every candidate (`base`: the backend's heuristic context).
  virtual void check_after(Context& /*base*/, Direction, const std::vector<AlgoInfo>&,
                           const ParityTally&, const ParityExpected&) const {}
};

/// A context on `backend` with a private memory-only choice cache (tests must not write the
/// user's cache file) whose policy for (op, direction) is `policy`.
Context parity_context(BackendKind backend, OpKind op, Direction direction,
                       const AlgoPolicy& policy);

/// The backends compared with the reference: cpu always (a test skips it, saying why, where it
/// is not built), cudnn where it can run, when `with_cudnn`.
std::vector<BackendKind> parity_backends(bool with_cudnn);

/// Checks every candidate `backend` lists for `c` in `direction` against the reference, as gtest
/// expectations; prints a summary line and records the counts in the test's report
/// (candidates_run, candidates_unsupported, summed over the calls of one test).
ParityTally check_parity(const ParityCase& c, BackendKind backend, Direction direction);

/// NaN/Inf check for outputs that may be NaN where the reference is (e.g. the mean loss of a
/// batch whose every position is ignored): fails where `actual` is NaN or Inf and `expected` is
/// finite; what matches the reference's NaN is the comparison's business.
::testing::AssertionResult finite_where_expected(const Tensor& actual, const Tensor& expected,
                                                 std::string_view what, std::string_view where);

/// `text` with every character outside [A-Za-z0-9] replaced by '_': a gtest parameter name.
std::string parity_test_name(std::string text);

/// A case of a table in one of the dtypes the parity tests run it in.
template <typename Case>
struct DTypeCase {
  Case c;
  DType dtype;
};

/// gtest prints parameters on failure; the default would be a byte dump.
template <typename Case>
void PrintTo(const DTypeCase<Case>& param,  // NOLINT(readability-identifier-naming): gtest's name
             std::ostream* out) {
  *out << param.c.name << " " << to_string(param.dtype);
}

/// Every case of `cases` in each of f32, f16 and bf16 that `representable(case, dtype)` allows.
template <typename Case, typename Representable>
std::vector<DTypeCase<Case>> in_every_dtype(const std::vector<Case>& cases,
                                            Representable representable) {
  std::vector<DTypeCase<Case>> out;
  for (const Case& c : cases) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
      if (representable(c, dtype)) out.push_back({c, dtype});
  }
  return out;
}

/// The gtest name of a DTypeCase: "<case name>_<dtype>", sanitized.
template <typename Case>
std::string dtype_case_name(const ::testing::TestParamInfo<DTypeCase<Case>>& info) {
  return parity_test_name(info.param.c.name + "_" + std::string(to_string(info.param.dtype)));
}

}  // namespace dnnx::test
