// Parity of every listed cpu softmax candidate with the reference backend, forward and
// backward, for every case of the softmax table in f32, f16 and bf16 (STYLE.md "Tests"), through
// the parity runner (support/parity.hpp).
//
// Per (case, dtype, direction): the backward runs on the reference's own forward output, rounded
// to the dtype, and a random diff_dst. Outputs are compared with Note [softmax tolerances] (the
// forward of the clustered large-logit rows with Note [large-logit tolerance]). Every candidate
// claims determinism, so each runs twice and the results must agree bitwise. Unsupported
// candidates are counted and must carry a reason of Note [expected unsupported softmax].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "ops/softmax_cases.hpp"
#include "support/compare.hpp"
#include "support/parity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported softmax]: the only reasons a cpu candidate may be unsupported.
bool expected_unsupported(const SoftmaxDesc& desc, const AlgoInfo& algo) {
  // oneDNN implements f16 / bf16 softmax only on ISAs with those types (avx512_core_fp16 /
  // avx512_core_bf16 or AMX); elsewhere the backend lists one unavailable candidate.
  return desc.dtype != DType::f32 && algo.id == "onednn:unavailable:softmax" &&
         algo.reason.find("has no softmax") != std::string::npos;
}

// A row of the softmax table in one dtype, for the parity runner.
class SoftmaxParityCase final : public ParityCase {
 public:
  SoftmaxParityCase(const SoftmaxCase& c, DType dtype)
      : c_(c),
        desc_(with_dtype(c.desc, dtype)),
        src_(softmax_src(c_, desc_)),
        diff_dst_(softmax_diff_dst(c_, desc_)) {
    Context reference =
        softmax_context_for(BackendKind::reference, Direction::fwd, AlgoPolicy::heuristic());
    dst_ = run_softmax(reference, desc_, Direction::fwd, src_).output;
  }

  OpKind op_kind() const override { return OpKind::softmax; }
  std::string label() const override { return c_.name + " " + std::string(to_string(desc_.dtype)); }
  std::string where(Direction direction, std::string_view candidate) const override {
    return softmax_context(desc_, direction, std::string(candidate));
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return softmax_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    const SoftmaxRun run = direction == Direction::fwd
                               ? run_softmax(context, desc_, direction, src_)
                               : run_softmax(context, desc_, direction, dst_, &diff_dst_);
    return {{{"output", run.output}}, run.choice};
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo& algo,
                                   const ParityRun& actual, const ParityExpected& expected,
                                   std::string_view where, double* worst) const override {
    const std::vector<float> expected_values = expected.run.outputs[0].tensor.to_f32();
    const SoftmaxBound bound =
        direction == Direction::fwd
            ? softmax_forward_bound(c_, desc_, expected_values, algo)
            : softmax_backward_bound(desc_, dst_.to_f32(), diff_dst_.to_f32());
    return close_within_scale(actual.outputs[0].tensor.to_f32(), expected_values, bound.scale,
                              desc_.dims, bound.tolerance, "output", where, worst);
  }
  bool expected_unsupported(Direction, const AlgoInfo& algo) const override {
    return dnnx::test::expected_unsupported(desc_, algo);
  }
  // Every candidate claims determinism; two runs agree bitwise whatever the flag says.
  bool repeat_bitwise(const AlgoInfo&) const override { return true; }

 private:
  const SoftmaxCase& c_;
  SoftmaxDesc desc_;
  Tensor src_;
  Tensor diff_dst_;
  Tensor dst_;  ///< the reference's forward output, which the backward reads
};

class SoftmaxParity : public ::testing::TestWithParam<DTypeCase<SoftmaxCase>> {
 protected:
  void check(Direction direction) {
    if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
    check_parity(SoftmaxParityCase(GetParam().c, GetParam().dtype), BackendKind::cpu, direction);
  }
};

TEST_P(SoftmaxParity, Forward) { check(Direction::fwd); }
TEST_P(SoftmaxParity, Backward) { check(Direction::bwd_data); }

// The reported case of Note [large-logit rows] on every backend and candidate, within
// large_logit_ulps() of max(1, |y|).
TEST(SoftmaxLargeLogits, ReportedCaseOnEveryCandidate) {
  for (const LargeLogitExample& example : large_logit_examples()) {
    const SoftmaxDesc& desc = example.desc;
    std::vector<float> scale(example.expected.size());
    for (std::size_t k = 0; k < scale.size(); ++k)
      scale[k] = std::max(1.0f, std::abs(example.expected[k]));
    for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
      if (!backend_available(backend)) continue;
      Context lister(backend);
      for (const AlgoInfo& algo : softmax_list(lister, desc, Direction::fwd)) {
        if (!algo.supported) continue;
        const std::string where = softmax_context(desc, Direction::fwd, algo.id) + " logits " +
                                  std::to_string(example.base) + " + (c mod 4)";
        Context context = softmax_context_for(backend, Direction::fwd, AlgoPolicy::fixed(algo.id));
        const SoftmaxRun run = run_softmax(context, desc, Direction::fwd, example.src);
        EXPECT_TRUE(close_within_scale(run.output.to_f32(), example.expected, scale, desc.dims,
                                       {large_logit_ulps(algo) * 0x1p-23, 0}, "output", where));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, SoftmaxParity,
                         ::testing::ValuesIn(in_every_dtype(softmax_cases(),
                                                            [](const SoftmaxCase& c, DType dtype) {
                                                              return representable(c, dtype);
                                                            })),
                         dtype_case_name<SoftmaxCase>);

}  // namespace
}  // namespace dnnx::test
