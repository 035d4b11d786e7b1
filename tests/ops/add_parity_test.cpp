// Parity of every listed cpu candidate of tensor add with the reference backend, forward and
// backward, for every case of the add table (STYLE.md "Tests"), through the parity runner
// (support/parity.hpp).
//
// Forward starts dst from random values, or from NaN when beta = 0 (dst must then not be read);
// backward writes into NaN. Outputs are compared with add_close(). Unsupported candidates are
// counted and must carry one of the reasons of Note [expected unsupported adds]. Beyond the
// runner's checks, the listing follows Note [f32 compute].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/add.hpp>

#include "ops/add_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported adds]: the only reasons a listed cpu candidate may be unsupported
// (src/backends/onednn/add.cpp, Note [binary candidates]).

const std::vector<ExpectedReason<AddDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<AddDesc>> reasons = {
      {"scaled_dst reads dst, beta = 0", std::regex(":scaled_dst(:f32)?$"),
       std::regex("reads dst as binary source 0"),
       [](const AddDesc& d, Direction dir) { return dir == Direction::fwd && d.beta == 0; }},
      // oneDNN 3.2 rejects a reduction over no axis; the linear formulation covers that case.
      {"no reduction over no axis", std::regex("^onednn:unavailable:reduction_sum$"),
       std::regex("has no implementation of reduction_sum"),
       [](const AddDesc& d, Direction dir) {
         return dir != Direction::fwd && d.src_dims == d.dst_dims;
       }},
      // Note [bias gradients by matmul]: one or two products cover up to three alternating groups
      // of axes; reduction_sum covers the rest.
      {"matmul covers up to three axis groups", std::regex("^onednn:unavailable:matmul$"),
       std::regex("merge into the groups [RK]{4,}.*matmul covers R, RK, KR, KRK and RKR"),
       [](const AddDesc& d, Direction dir) {
         return dir != Direction::fwd && d.src_dims != d.dst_dims;
       }},
  };
  return reasons;
}

// A row of the add table, for the parity runner.
class AddParityCase final : public ParityCase {
 public:
  explicit AddParityCase(const AddCase& c)
      : name_(c.name),
        desc_(c.desc),
        src_(random_tensor(desc_.src_dims, desc_.dtype, desc_.layout, seed_from(name_ + "src"))),
        dst0_(desc_.beta == 0 ? nan_tensor(desc_.dst_dims, desc_.dtype, desc_.layout)
                              : random_tensor(desc_.dst_dims, desc_.dtype, desc_.layout,
                                              seed_from(name_ + "dst"))),
        diff_dst_(
            random_tensor(desc_.dst_dims, desc_.dtype, desc_.layout, seed_from(name_ + "dy"))) {}

  OpKind op_kind() const override { return OpKind::add; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return add_context(desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return add_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    ParityRun run;
    if (direction == Direction::fwd) {
      Tensor out = Tensor::empty(desc_.dst_dims, desc_.dtype, desc_.layout);
      out.copy_from_f32(dst0_.to_f32());
      run.choice = add_fwd(context, desc_, src_, out);
      run.outputs.push_back({"output", std::move(out)});
    } else {
      Tensor out = nan_tensor(desc_.src_dims, desc_.dtype, desc_.layout);
      run.choice = add_bwd(context, desc_, diff_dst_, out);
      run.outputs.push_back({"output", std::move(out)});
    }
    return run;
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    return add_close(desc_, direction, actual.outputs[0].tensor, expected.run.outputs[0].tensor,
                     src_, dst0_, diff_dst_, where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc_, direction, algo) != nullptr;
  }
  // Whatever the CPU, some candidate runs: natively, or as f32 compute where oneDNN has no
  // f16/bf16 kernels (Note [f32-compute adds] in src/backends/onednn/add.cpp); the runner requires
  // one. The listing itself follows Note [f32 compute].
  void check_listing(BackendKind, Direction, const std::vector<AlgoInfo>& algos) const override {
    EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc_.dtype));
  }
  // A candidate that does not claim determinism still runs twice: the second run must not throw.
  void check_candidate(Context& fixed, Direction direction, const AlgoInfo& algo, const ParityRun&,
                       const ParityExpected&, std::string_view) const override {
    if (!algo.deterministic) run(fixed, direction);
  }

 private:
  std::string name_;
  AddDesc desc_;
  Tensor src_;
  Tensor dst0_;  ///< what dst holds before the forward (NaN when beta = 0: it must not be read)
  Tensor diff_dst_;
};

class AddParity : public ::testing::TestWithParam<AddCase> {
 protected:
  void check(Direction direction) {
    std::string why;
    if (!backend_available(BackendKind::cpu, &why))
      GTEST_SKIP() << "cpu backend unavailable: " << why;
    SCOPED_TRACE(GetParam().name + " " + std::string(to_string(direction)));
    check_parity(AddParityCase(GetParam()), BackendKind::cpu, direction);
  }
};

// One ctest test per case (a process each).
TEST_P(AddParity, fwd_and_bwd) {
  check(Direction::fwd);
  check(Direction::bwd_data);
}

INSTANTIATE_TEST_SUITE_P(Table, AddParity, ::testing::ValuesIn(add_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dnnx::test
