// Parity of every listed cpu cross-entropy candidate with the reference backend, forward (loss)
// and backward (diff_logits), for every case of the xent table in f32, f16 and bf16, through the
// parity runner (support/parity.hpp).
//
// NaN is accepted only where the reference has it (the mean of an all-ignored batch); the rest is
// compared with Note [xent tolerances] (the loss of the clustered large-logit rows with Note
// [xent large-logit tolerance]). Every candidate claims determinism and runs twice (bitwise).
// Unsupported candidates are counted and must carry a reason of Note [expected unsupported xent];
// the fused candidate and, where oneDNN has a softmax for the dtype, a oneDNN one must run.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "ops/cross_entropy_cases.hpp"
#include "support/compare.hpp"
#include "support/parity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported xent]: oneDNN has f16 / bf16 softmax only on ISAs with those types;
// elsewhere its candidates collapse into one unavailable entry. The fused candidate runs
// everything.
bool expected_unsupported(const CrossEntropyDesc& desc, const AlgoInfo& algo) {
  return desc.dtype != DType::f32 && algo.id == "onednn:unavailable:softmax+nll" &&
         algo.reason.find("has no softmax") != std::string::npos;
}

// A row of the xent table in one dtype, for the parity runner.
class XentParityCase final : public ParityCase {
 public:
  XentParityCase(const XentCase& c, DType dtype)
      : c_(c), desc_(with_dtype(c.desc, dtype)), inputs_(xent_inputs(c_, desc_)) {}

  OpKind op_kind() const override { return OpKind::cross_entropy; }
  std::string label() const override { return c_.name + " " + std::string(to_string(desc_.dtype)); }
  std::string where(Direction direction, std::string_view candidate) const override {
    return xent_context(desc_, direction, std::string(candidate));
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return cross_entropy_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    XentRun run = run_xent(context, desc_, direction, inputs_);
    return {{{"output", std::move(run.output)}}, std::move(run.choice)};
  }
  ParityExpected reference(Direction direction) const override {
    ParityExpected expected = ParityCase::reference(direction);
    if (direction != Direction::fwd) expected.scale = xent_backward_scale(desc_, inputs_);
    return expected;
  }
  // The mean loss of a batch whose every position is ignored is NaN, in the reference too.
  ::testing::AssertionResult finite(const ParityRun& run, const ParityRun& expected,
                                    std::string_view where) const override {
    return finite_where_expected(run.outputs[0].tensor, expected.outputs[0].tensor, "output",
                                 where);
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo& algo,
                                   const ParityRun& actual, const ParityExpected& expected,
                                   std::string_view where, double*) const override {
    const XentBound bound = direction == Direction::fwd
                                ? xent_forward_bound(c_, desc_, inputs_, algo)
                                : XentBound{expected.scale, xent_tolerance(desc_.dtype)};
    const Dims dims = direction == Direction::fwd ? desc_.loss_dims() : desc_.dims;
    return xent_close(actual.outputs[0].tensor, expected.run.outputs[0].tensor.to_f32(),
                      bound.scale, dims, bound.tolerance, std::string(where));
  }
  bool expected_unsupported(Direction, const AlgoInfo& algo) const override {
    return dnnx::test::expected_unsupported(desc_, algo);
  }
  // Every candidate claims determinism; two runs agree bitwise whatever the flag says.
  bool repeat_bitwise(const AlgoInfo&) const override { return true; }
  // The fused candidate always runs; oneDNN's run too unless this CPU has no softmax for the
  // dtype (Note [expected unsupported xent]), which the listing says.
  int min_ran(BackendKind, Direction, const std::vector<AlgoInfo>& algos) const override {
    const bool onednn_unavailable =
        std::any_of(algos.begin(), algos.end(), [&](const AlgoInfo& algo) {
          return !algo.supported && dnnx::test::expected_unsupported(desc_, algo);
        });
    return onednn_unavailable ? 1 : 2;
  }

 private:
  const XentCase& c_;
  CrossEntropyDesc desc_;
  XentInputs inputs_;
};

class XentParity : public ::testing::TestWithParam<DTypeCase<XentCase>> {
 protected:
  void check(Direction direction) {
    if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend not built";
    check_parity(XentParityCase(GetParam().c, GetParam().dtype), BackendKind::cpu, direction);
  }
};

TEST_P(XentParity, Forward) { check(Direction::fwd); }
TEST_P(XentParity, Backward) { check(Direction::bwd_data); }

INSTANTIATE_TEST_SUITE_P(Table, XentParity,
                         ::testing::ValuesIn(in_every_dtype(xent_cases(),
                                                            [](const XentCase& c, DType dtype) {
                                                              return representable(c, dtype);
                                                            })),
                         dtype_case_name<XentCase>);

}  // namespace
}  // namespace dnnx::test
