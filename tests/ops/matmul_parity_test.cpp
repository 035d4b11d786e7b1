// Parity of every listed cpu candidate of matmul with the reference backend, in every direction,
// for every case of the matmul table (STYLE.md "Tests"), through the parity runner
// (support/parity.hpp). Outputs start from random values to accumulate onto, or from NaN when
// beta = 0 (they must then not be read); the bias gradient is compared too. With an activation,
// fwd_training is compared as well (dst, and gelu's state), and the backward passes all read the
// state of the reference's training forward. Unsupported
// candidates must carry one of the reasons of Note [expected unsupported matmuls].

#include <dnnx/dnnx.hpp>

#include "ops/matmul_cases.hpp"
#include "support/layer_cases.hpp"
#include "support/parity.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported matmuls]: the only reasons a listed cpu candidate may be
// unsupported (src/backends/onednn/matmul.cpp, Note [matmul formulations]): the inner product
// runs linear layers only, and its backward ones no beta; with an activation the same, under the
// fused id (":<activation>") or a wrapped one ("+act", "+dact": Note [matmul activation
// candidates]).
const std::vector<ExpectedReason<MatmulDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<MatmulDesc>> reasons = {
      {"inner product: linear layers",
       std::regex("^onednn:unavailable:inner_product(:relu|:gelu_tanh)?(\\+(d?act|mask))?$"),
       std::regex("an inner product is a linear layer"),
       [](const MatmulDesc& d, Direction) {
         return d.batch != 1 || d.transpose_a || !d.transpose_b;
       }},
      {"inner product: alpha 1",
       std::regex("^onednn:unavailable:inner_product(:relu|:gelu_tanh)?(\\+(d?act|mask))?$"),
       std::regex("no scale for alpha"),
       [](const MatmulDesc& d, Direction) { return d.alpha != 1; }},
      {"inner product: backward without beta",
       std::regex("^onednn:unavailable:inner_product(:relu|:gelu_tanh)?(\\+(d?act|mask))?$"),
       std::regex("take no sum post-op"),
       [](const MatmulDesc& d, Direction dir) { return dir != Direction::fwd && d.beta != 0; }},
  };
  return reasons;
}

class MatmulParityCase final : public ParityCase {
 public:
  explicit MatmulParityCase(const MatmulCase& c)
      : name_(c.name), desc_(c.desc), inputs_(matmul_inputs(desc_, name_)) {}

  OpKind op_kind() const override { return OpKind::matmul; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return matmul_context(desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return matmul_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    MatmulOutputs outputs = matmul_outputs(desc_, direction, inputs_);
    ParityRun run;
    run.choice = run_matmul(context, desc_, direction, inputs_, outputs);
    for (auto& [name, tensor] : outputs.tensors) run.outputs.push_back({name, std::move(tensor)});
    return run;
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    return matmul_close(desc_, direction, outputs_of(actual), outputs_of(expected.run), inputs_,
                        where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc_, direction, algo) != nullptr;
  }
  // Some candidate runs on every CPU: natively, or in f32 where oneDNN has no f16/bf16 kernels.
  // With an activation: every candidate applies it fused or through dnnx's pass, and states its
  // saved-state format where it writes or reads one.
  void check_listing(BackendKind, Direction direction,
                     const std::vector<AlgoInfo>& algos) const override {
    if (desc_.activation == MatmulActivation::none) {
      EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc_.dtype));
      return;
    }
    for (const AlgoInfo& algo : algos) {
      const auto noted = [&](const char* note) {
        return std::find(algo.notes.begin(), algo.notes.end(), note) != algo.notes.end();
      };
      EXPECT_TRUE(noted("fused_activation") || noted("activation_pass")) << algo.id;
      EXPECT_EQ(algo.saved_state_format.empty(), direction == Direction::fwd) << algo.id;
      EXPECT_EQ(algo.saved_state_bytes > 0, direction == Direction::fwd_training) << algo.id;
    }
  }

 private:
  static MatmulOutputs outputs_of(const ParityRun& run) {
    MatmulOutputs outputs;
    for (const ParityOutput& output : run.outputs)
      outputs.tensors.emplace_back(output.name, output.tensor);
    return outputs;
  }

  std::string name_;
  MatmulDesc desc_;
  MatmulInputs inputs_;
};

class MatmulParity : public ::testing::TestWithParam<MatmulCase> {};

// One ctest test per case (a process each): every direction.
TEST_P(MatmulParity, every_direction) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why)) GTEST_SKIP() << "cpu backend unavailable: " << why;
  const MatmulParityCase c(GetParam());
  for (const Direction direction :
       {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
    if (direction == Direction::fwd_training &&
        GetParam().desc.activation == MatmulActivation::none)
      continue;  // a training forward keeps an activation's state
    SCOPED_TRACE(GetParam().name + " " + std::string(to_string(direction)));
    check_parity(c, BackendKind::cpu, direction);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, MatmulParity, ::testing::ValuesIn(matmul_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dnnx::test
