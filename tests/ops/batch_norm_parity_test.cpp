// Parity of every candidate of the cpu backend with the reference backend, forward and backward,
// for every case of the batch-norm table (STYLE.md "Tests"); the cudnn backend's are in
// tests/backends/cudnn_batch_norm_test.cpp (label gpu).
//
// Per (case, direction): the reference runs the case (the oracle); each candidate listed by
// batch_norm_list() runs it alone, through a context whose policy is fixed:<id>, on the same
// inputs (the backward on the reference forward's saved statistics). Outputs start as NaN and are
// checked for NaN/Inf first, then against the reference within Note [batch-norm tolerances]:
// dst, the running statistics after the call, saved_mean / saved_inv_std; diff_src, diff_scale,
// diff_shift. Candidates that claim determinism run twice and must agree bitwise. Unsupported
// candidates are counted and each must carry one of the reasons of Note [expected unsupported].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "ops/batch_norm_cases.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

namespace dnnx::test {
namespace {

// Note [expected unsupported]: the only reasons a cpu candidate may be unsupported. Anything else
// fails, so the backend cannot quietly stop supporting a case. There are none: where oneDNN has no
// f16/bf16 batch normalization (every CPU without avx512_core_fp16 / avx512_core), its f32 one
// runs on converted copies (Note [f32-compute batch norm] in src/backends/onednn/batch_norm.cpp),
// so whatever the CPU, every case has a oneDNN candidate as well as dnnx's kernel.

const std::vector<ExpectedReason<BatchNormDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<BatchNormDesc>> reasons;
  return reasons;
}

class BatchNormParity : public ::testing::TestWithParam<BatchNormCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_available(BackendKind::cpu, &why))
      GTEST_SKIP() << "backend cpu is not available here: " << why;
  }
};

TEST_P(BatchNormParity, EveryCpuCandidateMatchesTheReference) {
  const BatchNormCase& c = GetParam();
  const BatchNormDesc& desc = c.desc;
  const BatchNormInputs inputs = batch_norm_inputs(desc, seed_from(c.name));

  Context reference = batch_norm_context_with(BackendKind::reference, Direction::fwd);
  const BatchNormFwdResult ref_fwd = run_batch_norm_fwd(reference, desc, inputs);
  const BatchNormBwdResult ref_bwd =
      run_batch_norm_bwd(reference, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std);
  ASSERT_TRUE(all_finite(ref_fwd.dst, "reference dst", c.name));
  ASSERT_TRUE(all_finite(ref_bwd.diff_src, "reference diff_src", c.name));

  Context cpu = batch_norm_context_with(BackendKind::cpu, Direction::fwd);
  std::ostringstream summary;
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const std::vector<AlgoInfo> algos = batch_norm_list(cpu, desc, direction);
    ASSERT_FALSE(algos.empty()) << batch_norm_context(desc, direction, "(none)");
    EXPECT_TRUE(
        std::any_of(algos.begin(), algos.end(),
                    [](const AlgoInfo& a) { return a.supported && a.workspace_bytes == 0; }))
        << "no zero-workspace candidate\n  " << batch_norm_context(desc, direction, "(none)");
    int ran = 0, unsupported = 0;
    double worst = 0;
    for (const AlgoInfo& algo : algos) {
      const std::string context = batch_norm_context(desc, direction, algo.id);
      if (!algo.supported) {
        ++unsupported;
        EXPECT_NE(unsupported_category(expected_reasons(), desc, direction, algo), nullptr)
            << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
            << "(Note [expected unsupported]): \"" << algo.reason << "\"\n  " << context;
        summary << "\n    skip " << algo.id << ": " << algo.reason;
        continue;
      }
      Context fixed = batch_norm_context_with(BackendKind::cpu, direction, algo.id);
      ++ran;
      if (direction == Direction::fwd) {
        const BatchNormFwdResult run = run_batch_norm_fwd(fixed, desc, inputs);
        EXPECT_EQ(run.choice->algo.id, algo.id) << context;
        EXPECT_TRUE(compare_batch_norm_fwd(desc, inputs, ref_fwd, run, context, &worst));
        if (algo.deterministic) {
          EXPECT_TRUE(bitwise_equal_fwd(run, run_batch_norm_fwd(fixed, desc, inputs), context));
        }
      } else {
        const BatchNormBwdResult run =
            run_batch_norm_bwd(fixed, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std);
        EXPECT_EQ(run.choice->algo.id, algo.id) << context;
        EXPECT_TRUE(compare_batch_norm_bwd(desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std,
                                           ref_bwd, run, context, &worst));
        if (algo.deterministic) {
          EXPECT_TRUE(bitwise_equal_bwd(
              run,
              run_batch_norm_bwd(fixed, desc, inputs, ref_fwd.saved_mean, ref_fwd.saved_inv_std),
              context));
        }
      }
      summary << "\n    ran  " << algo.id;
    }
    EXPECT_TRUE(has_supported_onednn(algos)) << "no oneDNN candidate runs this case\n  "
                                             << batch_norm_context(desc, direction, "(none)");
    EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc.dtype));
    RecordProperty(direction == Direction::fwd ? "fwd_unsupported" : "bwd_unsupported",
                   unsupported);
    std::cout << "[ parity   ] cpu " << c.name << ' ' << to_string(direction) << ": " << ran
              << " ran, " << unsupported << " unsupported (expected), worst error " << worst
              << " of the bound" << summary.str() << '\n';
    summary.str({});
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BatchNormParity, ::testing::ValuesIn(batch_norm_cases()),
                         [](const ::testing::TestParamInfo<BatchNormCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dnnx::test
