// Parity of every candidate of the cpu backend with the reference backend, forward and backward,
// for every case of the batch-norm table (STYLE.md "Tests"), through the parity runner
// (support/parity.hpp); the cudnn backend's are in tests/backends/cudnn_batch_norm_test.cpp
// (label gpu).
//
// Per (case, direction): the backward runs on the reference forward's saved statistics. Outputs
// are compared with the reference within Note [batch-norm tolerances]: dst, the running
// statistics after the call, saved_mean / saved_inv_std; diff_src, diff_scale, diff_shift; a
// deterministic candidate's second run must agree bitwise on all of them. Unsupported candidates
// are counted and each must carry one of the reasons of Note [expected unsupported]. Beyond the
// runner's checks, each listing has a zero-workspace candidate and a oneDNN one, and follows
// Note [f32 compute].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "ops/batch_norm_cases.hpp"
#include "support/layer_cases.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

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

// A row of the batch-norm table, for the parity runner. Outputs in a fixed order, the optional
// ones null where the desc has none: forward dst, running_mean, running_var, saved_mean,
// saved_inv_std; backward diff_src, diff_scale, diff_shift.
class BatchNormParityCase final : public ParityCase {
 public:
  explicit BatchNormParityCase(const BatchNormCase& c)
      : c_(c), inputs_(batch_norm_inputs(c.desc, seed_from(c.name))) {
    Context reference = batch_norm_context_with(BackendKind::reference, Direction::fwd);
    reference_fwd_ = run_batch_norm_fwd(reference, desc(), inputs_);
  }

  OpKind op_kind() const override { return OpKind::batch_norm; }
  std::string label() const override { return c_.name; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return batch_norm_context(desc(), direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return batch_norm_list(context, desc(), direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    if (direction == Direction::fwd) return to_parity(run_batch_norm_fwd(context, desc(), inputs_));
    return to_parity(run_batch_norm_bwd(context, desc(), inputs_, reference_fwd_.saved_mean,
                                        reference_fwd_.saved_inv_std));
  }
  ParityExpected reference(Direction direction) const override {
    if (direction == Direction::fwd) return {to_parity(reference_fwd_), {}};
    return ParityCase::reference(direction);
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    if (direction == Direction::fwd) {
      return compare_batch_norm_fwd(desc(), inputs_, fwd_of(expected.run), fwd_of(actual), where,
                                    worst);
    }
    return compare_batch_norm_bwd(desc(), inputs_, reference_fwd_.saved_mean,
                                  reference_fwd_.saved_inv_std, bwd_of(expected.run),
                                  bwd_of(actual), where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc(), direction, algo) != nullptr;
  }
  void check_listing(BackendKind, Direction direction,
                     const std::vector<AlgoInfo>& algos) const override {
    EXPECT_TRUE(
        std::any_of(algos.begin(), algos.end(),
                    [](const AlgoInfo& a) { return a.supported && a.workspace_bytes == 0; }))
        << "no zero-workspace candidate\n  " << where(direction, "(none)");
    EXPECT_TRUE(has_supported_onednn(algos))
        << "no oneDNN candidate runs this case\n  " << where(direction, "(none)");
    EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc().dtype));
  }

 private:
  const BatchNormDesc& desc() const { return c_.desc; }

  static ParityRun to_parity(BatchNormFwdResult r) {
    return {{{"dst", std::move(r.dst)},
             {"running_mean", std::move(r.running_mean)},
             {"running_var", std::move(r.running_var)},
             {"saved_mean", std::move(r.saved_mean)},
             {"saved_inv_std", std::move(r.saved_inv_std)}},
            std::move(r.choice)};
  }
  static ParityRun to_parity(BatchNormBwdResult r) {
    return {{{"diff_src", std::move(r.diff_src)},
             {"diff_scale", std::move(r.diff_scale)},
             {"diff_shift", std::move(r.diff_shift)}},
            std::move(r.choice)};
  }
  static BatchNormFwdResult fwd_of(const ParityRun& run) {
    const std::vector<ParityOutput>& o = run.outputs;
    return {o[0].tensor, o[1].tensor, o[2].tensor, o[3].tensor, o[4].tensor, run.choice};
  }
  static BatchNormBwdResult bwd_of(const ParityRun& run) {
    const std::vector<ParityOutput>& o = run.outputs;
    return {o[0].tensor, o[1].tensor, o[2].tensor, run.choice};
  }

  const BatchNormCase& c_;
  BatchNormInputs inputs_;
  BatchNormFwdResult reference_fwd_;
};

class BatchNormParity : public ::testing::TestWithParam<BatchNormCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_available(BackendKind::cpu, &why))
      GTEST_SKIP() << "backend cpu is not available here: " << why;
  }
};

TEST_P(BatchNormParity, EveryCpuCandidateMatchesTheReference) {
  const BatchNormParityCase c(GetParam());
  for (const Direction direction : {Direction::fwd, Direction::bwd_data})
    check_parity(c, BackendKind::cpu, direction);
}

INSTANTIATE_TEST_SUITE_P(Cases, BatchNormParity, ::testing::ValuesIn(batch_norm_cases()),
                         [](const ::testing::TestParamInfo<BatchNormCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dnnx::test
