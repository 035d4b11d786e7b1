// Parity of every listed cpu softmax candidate with the reference backend, forward and
// backward, for every case of the softmax table in f32, f16 and bf16 (STYLE.md "Tests").
//
// Per (case, dtype, direction): the reference computes the output (backward: from the
// reference's own forward output, rounded to the dtype, and a random diff_dst); each candidate of
// softmax_list() then runs through a context whose policy is fixed to its id. Outputs start as
// NaN and are checked for NaN/Inf first, then against Note [softmax tolerances]. Every candidate
// claims determinism, so each runs twice and the results must agree bitwise. Unsupported
// candidates are counted and must carry a reason of Note [expected unsupported softmax].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "ops/softmax_cases.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <regex>
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

struct ParityParam {
  SoftmaxCase c;
  DType dtype;
};

void PrintTo(const ParityParam& p, std::ostream* out) {
  *out << p.c.name << " " << to_string(p.dtype);
}

std::vector<ParityParam> params() {
  std::vector<ParityParam> out;
  for (const SoftmaxCase& c : softmax_cases()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
      if (representable(c, dtype)) out.push_back({c, dtype});
  }
  return out;
}

class SoftmaxParity : public ::testing::TestWithParam<ParityParam> {
 protected:
  void check(Direction direction);
};

void SoftmaxParity::check(Direction direction) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
  const SoftmaxCase& c = GetParam().c;
  const SoftmaxDesc desc = with_dtype(c.desc, GetParam().dtype);
  const Tensor src = softmax_src(c, desc);
  Context reference =
      softmax_context_for(BackendKind::reference, Direction::fwd, AlgoPolicy::heuristic());
  const Tensor dst = run_softmax(reference, desc, Direction::fwd, src).output;
  const Tensor diff_dst = softmax_diff_dst(c, desc);
  const Tensor& input = direction == Direction::fwd ? src : dst;
  const Tensor* diff = direction == Direction::fwd ? nullptr : &diff_dst;
  const Tensor expected = direction == Direction::fwd
                              ? dst
                              : run_softmax(reference, desc, direction, dst, &diff_dst).output;
  const std::vector<float> expected_values = expected.to_f32();
  const std::vector<float> dst_values = dst.to_f32();
  const std::vector<float> diff_dst_values = diff_dst.to_f32();

  Context cpu(BackendKind::cpu);
  int ran = 0, unsupported = 0;
  for (const AlgoInfo& algo : softmax_list(cpu, desc, direction)) {
    const std::string where = softmax_context(desc, direction, algo.id);
    if (!algo.supported) {
      ++unsupported;
      EXPECT_TRUE(expected_unsupported(desc, algo))
          << "unexpected unsupported: " << algo.reason << "\n  " << where;
      continue;
    }
    Context context = softmax_context_for(BackendKind::cpu, direction, AlgoPolicy::fixed(algo.id));
    const SoftmaxRun first = run_softmax(context, desc, direction, input, diff);
    ASSERT_EQ(first.choice->algo.id, algo.id) << where;
    ASSERT_TRUE(all_finite(first.output, "output", where));
    const SoftmaxBound bound = direction == Direction::fwd
                                   ? softmax_forward_bound(c, desc, expected_values, algo)
                                   : softmax_backward_bound(desc, dst_values, diff_dst_values);
    double worst = 0;
    EXPECT_TRUE(close_within_scale(first.output.to_f32(), expected_values, bound.scale, desc.dims,
                                   bound.tolerance, "output", where, &worst));
    const SoftmaxRun second = run_softmax(context, desc, direction, input, diff);
    EXPECT_TRUE(bitwise_equal(first.output, second.output, "output of two runs", where));
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no cpu candidate ran for " << desc.repro(direction);
  RecordProperty("candidates_run", ran);
  RecordProperty("unsupported", unsupported);
}

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

INSTANTIATE_TEST_SUITE_P(Table, SoftmaxParity, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<ParityParam>& info) {
                           std::string name =
                               info.param.c.name + "_" + std::string(to_string(info.param.dtype));
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace dnnx::test
