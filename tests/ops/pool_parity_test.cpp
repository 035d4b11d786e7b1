// Parity of every listed pooling candidate of every non-reference backend with the reference
// backend, forward and backward, for every case of the pool case table (STYLE.md "Tests"),
// through the parity runner (support/parity.hpp).
//
// One test per (backend, shape); it runs the shape in every mode (max with indices included),
// dtype and layout. Inputs are tie-free (Note [tie-free inputs]); outputs are compared elementwise
// within Note [pool tolerances]. Beyond the runner's checks: with indices the forward's indices
// must equal the reference's exactly, and both directions also run with i32 indices (the backward
// reading the reference's); the heuristic policy must run the first supported candidate, within
// the tolerance. Unsupported candidates are counted, reported, and each must carry one of the
// reasons of Note [expected unsupported pool]; anything else fails.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"
#include "ops/pool_support.hpp"
#include "support/compare.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <regex>

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

struct PoolParityParam {
  BackendKind backend;
  std::string name;
  std::vector<PoolCase> variants;
};

void PrintTo(const PoolParityParam& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.name << " (" << param.variants.size()
       << " variants)";
}

std::string parity_name(const ::testing::TestParamInfo<PoolParityParam>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.name;
}

std::vector<PoolParityParam> edge_params() {
  std::vector<PoolParityParam> params;
  for (const BackendKind backend : parity_backends(true)) {
    for (const PoolShape& shape : pool_edge_shapes())
      params.push_back({backend, shape.name, pool_variants(shape)});
  }
  return params;
}

std::vector<PoolParityParam> benchmark_params() {
  std::vector<PoolParityParam> params;
  for (const BackendKind backend : parity_backends(true))
    params.push_back({backend, "resnet50_maxpool_n1", pool_benchmark_cases(1)});
  return params;
}

// One variant of the pool table, for the parity runner.
class PoolParityCase final : public ParityCase {
 public:
  explicit PoolParityCase(const PoolCase& variant)
      : variant_(variant), operands_(pool_operands(variant.desc, seed_from(variant.name))) {}

  OpKind op_kind() const override { return OpKind::pool; }
  std::string label() const override { return variant_.name; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return pool_context(desc(), direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return pool_list(context, desc(), direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    PoolRun run = run_pool(context, desc(), direction, operands_);
    ParityRun out{{{"output", std::move(run.output)}}, std::move(run.choice)};
    // Only the forward writes indices; two runs must then agree on them bitwise too.
    if (desc().indices && direction == Direction::fwd)
      out.outputs.push_back({"indices", std::move(run.indices)});
    return out;
  }
  ParityExpected reference(Direction direction) const override {
    ParityExpected expected = ParityCase::reference(direction);
    expected.scale = pool_error_scale(desc(), direction, operands_);
    return expected;
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    const Tensor& output = actual.outputs[0].tensor;
    return close_within_scale(output.to_f32(), expected.run.outputs[0].tensor.to_f32(),
                              expected.scale, output.dims(), pool_tolerance(desc(), direction),
                              "output", where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc(), direction, algo) != nullptr;
  }
  // With indices: the forward's equal the reference's exactly, and i32 indices give the same
  // results (the backward reading the reference's, converted).
  void check_candidate(Context& fixed, Direction direction, const AlgoInfo&, const ParityRun& first,
                       const ParityExpected& expected, std::string_view where) const override {
    if (!desc().indices) return;
    const bool fwd = direction == Direction::fwd;
    if (fwd) {
      EXPECT_EQ(index_values(first.outputs[1].tensor), index_values(expected.run.outputs[1].tensor))
          << where;
    }
    const PoolRun narrow = run_pool(fixed, desc(), direction, operands_, DType::i32);
    EXPECT_TRUE(
        bitwise_equal(narrow.output, first.outputs[0].tensor, "output with i32 indices", where));
    if (fwd) {
      EXPECT_EQ(narrow.indices.dtype(), DType::i32);
      EXPECT_EQ(index_values(narrow.indices), index_values(expected.run.outputs[1].tensor))
          << where;
    }
  }
  // The heuristic policy runs the first supported candidate.
  void check_after(Context& base, Direction direction, const std::vector<AlgoInfo>& algos,
                   const ParityTally&, const ParityExpected& expected) const override {
    const ParityRun heuristic = run(base, direction);
    const auto first = std::find_if(algos.begin(), algos.end(),
                                    [](const AlgoInfo& algo) { return algo.supported; });
    if (first != algos.end()) {
      EXPECT_EQ(heuristic.choice->algo.id, first->id);
    }
    EXPECT_TRUE(close(direction, AlgoInfo{}, heuristic, expected, where(direction, "(heuristic)"),
                      nullptr));
  }

 private:
  const PoolDesc& desc() const { return variant_.desc; }

  const PoolCase& variant_;
  PoolOperands operands_;
};

class PoolParity : public ::testing::TestWithParam<PoolParityParam> {};

TEST_P(PoolParity, EveryCandidateMatchesTheReference) {
  std::string why;
  if (!backend_available(GetParam().backend, &why))
    GTEST_SKIP() << "backend " << to_string(GetParam().backend)
                 << " is not available here: " << why;
  for (const PoolCase& variant : GetParam().variants) {
    const PoolParityCase c(variant);
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      SCOPED_TRACE(variant.name + " " + pool_direction_name(direction));
      check_parity(c, GetParam().backend, direction);
    }
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
