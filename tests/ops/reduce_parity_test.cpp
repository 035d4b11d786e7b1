// Parity of every listed cpu candidate of reduce (forward and backward), argmax and accuracy with
// the reference backend, for every case of their tables (STYLE.md "Tests"), through the parity
// runner (support/parity.hpp). Outputs start as NaN (indices and counts: as a value no answer
// has). Unsupported candidates must carry one of the reasons of Note [expected unsupported
// reductions]; every candidate claims determinism and is run twice and compared bitwise.

#include <dnnx/dnnx.hpp>

#include "ops/reduce_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported reductions]: the only reasons a listed cpu candidate may be
// unsupported (src/backends/onednn/reduce.cpp, Note [cpu reduce candidates]).
const std::vector<ExpectedReason<ReduceDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ReduceDesc>> reasons = {
      // oneDNN 3.2 rejects a reduction over no axis; cpu:kernel:reduce covers that case.
      {"no reduction over no axis", std::regex("^onednn:unavailable:reduction$"),
       std::regex("has no implementation of reduction"),
       [](const ReduceDesc& d, Direction dir) {
         return dir == Direction::fwd && d.src_dims == d.dst_dims;
       }},
  };
  return reasons;
}

// An index or count tensor that no answer equals, so that an unwritten output fails.
Tensor poisoned(const Dims& dims, DType dtype, Layout layout) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  std::memset(tensor.data(), 0x7f, static_cast<std::size_t>(tensor.numel()) * size_of(dtype));
  return tensor;
}

class ReduceParityCase final : public ParityCase {
 public:
  explicit ReduceParityCase(const ReduceCase& c)
      : name_(c.name), desc_(c.desc), inputs_(reduce_inputs(desc_, name_)) {}

  OpKind op_kind() const override { return OpKind::reduce; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return op_case_context("reduce", desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return reduce_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    ParityRun run;
    if (direction == Direction::fwd) {
      Tensor out = nan_tensor(desc_.dst_dims, desc_.dtype, desc_.layout);
      run.choice = reduce_fwd(context, desc_, inputs_.src, out);
      run.outputs.push_back({"output", std::move(out)});
    } else {
      Tensor out = nan_tensor(desc_.src_dims, desc_.dtype, desc_.layout);
      run.choice = desc_.backward_reads_values()
                       ? reduce_bwd(context, desc_, inputs_.src, inputs_.dst, inputs_.diff_dst, out)
                       : reduce_bwd(context, desc_, inputs_.diff_dst, out);
      run.outputs.push_back({"output", std::move(out)});
    }
    return run;
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    return reduce_close(desc_, direction, actual.outputs[0].tensor, expected.run.outputs[0].tensor,
                        inputs_, where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc_, direction, algo) != nullptr;
  }
  void check_listing(BackendKind, Direction, const std::vector<AlgoInfo>& algos) const override {
    EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc_.dtype));
  }

 private:
  std::string name_;
  ReduceDesc desc_;
  ReduceInputs inputs_;
};

class ArgmaxParityCase final : public ParityCase {
 public:
  explicit ArgmaxParityCase(const ArgmaxCase& c, std::size_t index)
      : name_(c.name),
        desc_(c.desc),
        src_(index % 2 == 0
                 ? tied_tensor(desc_.src_dims, desc_.dtype, desc_.layout, seed_from(name_))
                 : random_tensor(desc_.src_dims, desc_.dtype, desc_.layout, seed_from(name_))) {}

  OpKind op_kind() const override { return OpKind::argmax; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return op_case_context("argmax", desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return argmax_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction) const override {
    ParityRun run;
    Tensor out = poisoned(desc_.dst_dims(), desc_.index_dtype, desc_.layout);
    run.choice = argmax_fwd(context, desc_, src_, out);
    run.outputs.push_back({"indices", std::move(out)});
    return run;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double*) const override {
    return bitwise_equal(actual.outputs[0].tensor, expected.run.outputs[0].tensor, "indices",
                         where);
  }
  bool expected_unsupported(Direction, const AlgoInfo&) const override { return false; }

 private:
  std::string name_;
  ArgmaxDesc desc_;
  Tensor src_;
};

class AccuracyParityCase final : public ParityCase {
 public:
  explicit AccuracyParityCase(const AccuracyCase& c)
      : name_(c.name),
        desc_(c.desc),
        logits_(tied_tensor(desc_.dims, desc_.dtype, desc_.layout, seed_from(name_))),
        labels_(random_label_tensor(desc_.labels_dims(), desc_.label_dtype, desc_.classes(),
                                    desc_.ignore_index, seed_from(name_ + "labels"))) {}

  OpKind op_kind() const override { return OpKind::accuracy; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return op_case_context("accuracy", desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return accuracy_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction) const override {
    ParityRun run;
    // Accumulating cases start from 7, the others from a value no count equals.
    Tensor count = count_tensor(desc_.count_dtype, desc_.accumulate ? 7 : -12345);
    run.choice = accuracy_fwd(context, desc_, logits_, labels_, count);
    run.outputs.push_back({"count", std::move(count)});
    return run;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double*) const override {
    const double got = count_value(actual.outputs[0].tensor);
    const double want = count_value(expected.run.outputs[0].tensor);
    if (got == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "count " << got << ", reference " << want << "\n  " << where;
  }
  bool expected_unsupported(Direction, const AlgoInfo&) const override { return false; }

 private:
  std::string name_;
  AccuracyDesc desc_;
  Tensor logits_, labels_;
};

class ReduceParity : public ::testing::TestWithParam<ReduceCase> {};

// One ctest test per case (a process each).
TEST_P(ReduceParity, fwd_and_bwd) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  const ReduceParityCase c(GetParam());
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    SCOPED_TRACE(GetParam().name + " " + std::string(to_string(direction)));
    check_parity(c, BackendKind::cpu, direction);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ReduceParity, ::testing::ValuesIn(reduce_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ArgmaxParity, EveryCase) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  const std::vector<ArgmaxCase> cases = argmax_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    check_parity(ArgmaxParityCase(cases[i], i), BackendKind::cpu, Direction::fwd);
  }
}

TEST(AccuracyParity, EveryCase) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  for (const AccuracyCase& c : accuracy_cases()) {
    SCOPED_TRACE(c.name);
    check_parity(AccuracyParityCase(c), BackendKind::cpu, Direction::fwd);
  }
}

}  // namespace
}  // namespace dnnx::test
