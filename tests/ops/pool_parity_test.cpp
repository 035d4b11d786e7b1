// Parity of every listed pooling candidate of every non-reference backend with the reference
// backend, forward and backward, for every case of the pool case table (STYLE.md "Tests").
//
// One test per (backend, shape); it runs the shape in every mode (max with indices included),
// dtype and layout. With indices the forward's indices must equal the reference's exactly, and
// both directions also run with i32 indices (the backward reading the reference's). Per variant
// and direction: tie-free inputs (Note [tie-free inputs]) are computed by the reference (the
// oracle), then by each candidate of pool_list() individually through a Context whose pool
// policy is AlgoPolicy::fixed(id). Outputs start as NaN and are checked for NaN/Inf first; then
// |candidate - reference| <= tolerance * scale elementwise (Note [pool tolerances]). Candidates
// that claim determinism run twice and must agree bitwise. Unsupported candidates are counted,
// reported, and each must carry one of the reasons of Note [expected unsupported pool]; anything
// else fails. Finally the heuristic policy must run (every cpu case has a candidate).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"
#include "ops/pool_support.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

namespace dnnx::test {
namespace {

bool overhangs(const PoolDesc& desc) {
  for (int i = 0; i < desc.spatial_dims; ++i) {
    if (desc.overhang(i) > 0) return true;
  }
  return false;
}

// Note [expected unsupported pool]: the only reasons a listed candidate may be unsupported.
const std::vector<ExpectedReason<PoolDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<PoolDesc>> reasons = {
      // Note [oneDNN pooling semantics]: oneDNN's include-pad average divides by the whole
      // kernel; PyTorch leaves out the ceil-mode overhang.
      {"onednn: include-pad divisor differs on a ceil-mode overhang", std::regex("^onednn:"),
       std::regex("avg_include_padding divides every window by the whole kernel"),
       [](const PoolDesc& desc, Direction) {
         return desc.mode == PoolMode::avg_include_pad && desc.ceil_mode && overhangs(desc);
       }},
      // f16/bf16 pooling exists only on some ISAs; f32 has oneDNN's reference implementation.
      {"onednn: no implementation for f16/bf16", std::regex("^onednn:unavailable:pooling$"),
       std::regex("has no"),
       [](const PoolDesc& desc, Direction) { return desc.dtype != DType::f32; }},
      // Note [cudnn pool candidates]: the legacy descriptor has symmetric padding, no ceil mode.
      {"cudnn: legacy pooling needs symmetric padding", std::regex("^cudnn:legacy:pool:"),
       std::regex("one padding per spatial dim"),
       [](const PoolDesc& desc, Direction) { return desc.pad_before != desc.pad_after; }},
      {"cudnn: legacy pooling has no dilation", std::regex("^cudnn:legacy:pool:"),
       std::regex("pooling descriptor has no dilation"),
       [](const PoolDesc& desc, Direction) {
         return desc.dilation != std::array<std::int64_t, 3>{1, 1, 1};
       }},
      {"cudnn: legacy pooling has no ceil mode", std::regex("^cudnn:legacy:pool:"),
       std::regex("cuDNN has no ceil mode"),
       [](const PoolDesc& desc, Direction) { return desc.ceil_mode; }},
      {"cudnn: bf16 legacy pooling needs compute capability 8.0", std::regex("^cudnn:legacy:pool:"),
       std::regex("compute capability 8.0"),
       [](const PoolDesc& desc, Direction) { return desc.dtype == DType::bf16; }},
      // Max pooling with PyTorch's indices: neither library's pooling writes or reads them, and
      // dnnx's generic loops do not either (Note [cpu max-pool indices], Note [cudnn pool
      // candidates]).
      {"onednn: workspace is not PyTorch's indices", std::regex("^onednn:"),
       std::regex("implementation-defined window offsets, not PyTorch's flat plane indices"),
       [](const PoolDesc& desc, Direction) { return desc.indices; }},
      {"cpu:kernel:pool: no indices", std::regex("^cpu:kernel:pool$"),
       std::regex("neither write nor read argmax indices"),
       [](const PoolDesc& desc, Direction) { return desc.indices; }},
      {"cudnn: legacy pooling has no indices", std::regex("^cudnn:legacy:pool:"),
       std::regex("neither writes nor reads argmax indices"),
       [](const PoolDesc& desc, Direction) { return desc.indices; }},
  };
  return reasons;
}

struct ParityCase {
  BackendKind backend;
  std::string name;
  std::vector<PoolCase> variants;
};

void PrintTo(const ParityCase& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.name << " (" << param.variants.size()
       << " variants)";
}

std::string parity_name(const ::testing::TestParamInfo<ParityCase>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.name;
}

std::vector<BackendKind> tested_backends() {
  std::vector<BackendKind> backends{BackendKind::cpu};
  if (backend_available(BackendKind::cudnn)) backends.push_back(BackendKind::cudnn);
  return backends;
}

std::vector<ParityCase> edge_params() {
  std::vector<ParityCase> params;
  for (const BackendKind backend : tested_backends()) {
    for (const PoolShape& shape : pool_edge_shapes())
      params.push_back({backend, shape.name, pool_variants(shape)});
  }
  return params;
}

std::vector<ParityCase> benchmark_params() {
  std::vector<ParityCase> params;
  for (const BackendKind backend : tested_backends())
    params.push_back({backend, "resnet50_maxpool_n1", pool_benchmark_cases(1)});
  return params;
}

class PoolParity : public ::testing::TestWithParam<ParityCase> {
 protected:
  void check(const PoolCase& variant, Direction direction);
};

void PoolParity::check(const PoolCase& variant, Direction direction) {
  const BackendKind backend = GetParam().backend;
  const PoolDesc& desc = variant.desc;
  SCOPED_TRACE(variant.name + " " + pool_direction_name(direction));

  const PoolOperands operands = pool_operands(desc, seed_from(variant.name));
  Context reference(BackendKind::reference);
  const PoolRun expected = run_pool(reference, desc, direction, operands);
  ASSERT_TRUE(all_finite(expected.output, "reference output",
                         pool_context(desc, direction, expected.choice->algo.id)));
  const std::vector<float> expected_values = expected.output.to_f32();
  const std::vector<float> scale = pool_error_scale(desc, direction, operands);
  const Tolerance tolerance = pool_tolerance(desc, direction);

  Context base(backend);
  base.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<AlgoInfo> algos = pool_list(base, desc, direction);
  ASSERT_FALSE(algos.empty()) << "pool_list returned no candidates at all\n  "
                              << pool_context(desc, direction, "(none)");

  std::ostringstream summary;
  int ran = 0;
  int unsupported = 0;
  double worst_ratio = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string context = pool_context(desc, direction, algo.id);
    if (!algo.supported) {
      ++unsupported;
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_NE(unsupported_category(expected_reasons(), desc, direction, algo), nullptr)
          << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
          << "(Note [expected unsupported pool]): \"" << algo.reason << "\"\n  " << context;
      continue;
    }
    Context fixed = base;
    fixed.tune().policy(OpKind::pool, direction) = AlgoPolicy::fixed(algo.id);
    const auto start = std::chrono::steady_clock::now();
    PoolRun run;
    try {
      run = run_pool(fixed, desc, direction, operands);
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++ran;
    ASSERT_NE(run.choice, nullptr) << context;
    EXPECT_EQ(run.choice->algo.id, algo.id)
        << "a fixed policy ran another candidate\n  " << context;
    const ::testing::AssertionResult finite = all_finite(run.output, "output", context);
    if (!finite) {
      ADD_FAILURE() << finite.message();
      continue;
    }
    double ratio = 0;
    EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected_values, scale, run.output.dims(),
                                   tolerance, "output", context, &ratio));
    worst_ratio = std::max(worst_ratio, ratio);
    if (desc.indices) {
      if (direction == Direction::fwd)
        EXPECT_EQ(index_values(run.indices), index_values(expected.indices)) << context;
      // i32 indices: the same results.
      const PoolRun narrow = run_pool(fixed, desc, direction, operands, DType::i32);
      EXPECT_TRUE(bitwise_equal(narrow.output, run.output, "output with i32 indices", context));
      if (direction == Direction::fwd) {
        EXPECT_EQ(narrow.indices.dtype(), DType::i32);
        EXPECT_EQ(index_values(narrow.indices), index_values(expected.indices)) << context;
      }
    }
    summary << "\n    ran  " << algo.id << " (" << ms << " ms, error " << ratio << " of the bound"
            << (algo.deterministic ? ", deterministic" : "") << ")";
    if (algo.deterministic) {
      const PoolRun again = run_pool(fixed, desc, direction, operands);
      EXPECT_TRUE(bitwise_equal(run.output, again.output, "output", context));
      if (desc.indices && direction == Direction::fwd)
        EXPECT_TRUE(bitwise_equal(run.indices, again.indices, "indices", context));
    }
  }
  std::cout << "[ parity   ] " << to_string(backend) << " " << variant.name << " "
            << pool_direction_name(direction) << ": " << ran << " ran, " << unsupported
            << " unsupported, worst error " << worst_ratio << " of the bound" << summary.str()
            << "\n";
  EXPECT_GT(ran, 0) << "no candidate of backend " << to_string(backend) << " ran\n  "
                    << pool_context(desc, direction, "(none)");

  // The heuristic policy runs the first admissible candidate.
  const PoolRun heuristic = run_pool(base, desc, direction, operands);
  const auto first =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& algo) { return algo.supported; });
  if (first != algos.end()) {
    EXPECT_EQ(heuristic.choice->algo.id, first->id);
  }
  EXPECT_TRUE(close_within_scale(heuristic.output.to_f32(), expected_values, scale,
                                 heuristic.output.dims(), tolerance, "heuristic output",
                                 pool_context(desc, direction, "(heuristic)")));
}

TEST_P(PoolParity, EveryCandidateMatchesTheReference) {
  std::string why;
  if (!backend_available(GetParam().backend, &why))
    GTEST_SKIP() << "backend " << to_string(GetParam().backend)
                 << " is not available here: " << why;
  for (const PoolCase& variant : GetParam().variants) {
    for (const Direction direction : {Direction::fwd, Direction::bwd_data})
      check(variant, direction);
  }
}

INSTANTIATE_TEST_SUITE_P(Edge, PoolParity, ::testing::ValuesIn(edge_params()), parity_name);
INSTANTIATE_TEST_SUITE_P(Benchmark, PoolParity, ::testing::ValuesIn(benchmark_params()),
                         parity_name);

// Every unsupported candidate of the whole table, listed without running anything, tallied by
// reason: each must fall in an expected category (the tally shows in the log when what a
// backend supports changes).
TEST(PoolParityBudget, EveryUnsupportedCandidateHasAnExpectedReason) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "backend cpu is not available here: " << why;
  Context cpu(BackendKind::cpu);
  std::map<std::string, int> by_category;
  int total = 0;
  int supported = 0;
  for (const PoolCase& c : pool_edge_cases()) {
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      int supported_here = 0;
      for (const AlgoInfo& algo : pool_list(cpu, c.desc, direction)) {
        ++total;
        if (algo.supported) {
          ++supported;
          ++supported_here;
          continue;
        }
        const char* category = unsupported_category(expected_reasons(), c.desc, direction, algo);
        ++by_category[category ? category : "UNEXPECTED"];
        EXPECT_NE(category, nullptr) << "unexpected reason \"" << algo.reason << "\"\n  "
                                     << pool_context(c.desc, direction, algo.id);
      }
      // cpu:kernel:pool runs every desc.
      EXPECT_GT(supported_here, 0) << pool_context(c.desc, direction, "(none)");
    }
  }
  std::cout << "[ budget   ] " << pool_edge_cases().size() << " cases x 2 directions: " << total
            << " candidates listed, " << supported << " supported\n";
  for (const auto& [category, count] : by_category)
    std::cout << "[ budget   ]   unsupported (" << category << "): " << count << "\n";
}

}  // namespace
}  // namespace dnnx::test
