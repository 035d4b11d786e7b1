// Parity of every listed cpu candidate of tensor add with the reference backend, forward and
// backward, for every case of the add table (STYLE.md "Tests").
//
// Forward starts dst from random values, or from NaN when beta = 0 (dst must then not be read);
// backward writes into NaN. NaN/Inf are checked first, then add_close() against the reference.
// Candidates that claim determinism run twice and must agree bitwise. Unsupported candidates are
// counted and must carry one of the reasons of Note [expected unsupported adds].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/add.hpp>

#include "ops/add_cases.hpp"
#include "support/compare.hpp"
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

class AddParity : public ::testing::TestWithParam<AddCase> {
 protected:
  void check(Direction direction);
};

void AddParity::check(Direction direction) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  const AddDesc& desc = GetParam().desc;
  const std::string& name = GetParam().name;
  SCOPED_TRACE(name + " " + std::string(to_string(direction)));
  const Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from(name + "src"));
  const Tensor dst0 = desc.beta == 0 ? nan_tensor(desc.dst_dims, desc.dtype, desc.layout)
                                     : random_tensor(desc.dst_dims, desc.dtype, desc.layout,
                                                     seed_from(name + "dst"));
  const Tensor diff_dst =
      random_tensor(desc.dst_dims, desc.dtype, desc.layout, seed_from(name + "dy"));
  const Tensor expected = direction == Direction::fwd ? reference_add_fwd(desc, src, dst0)
                                                      : reference_add_bwd(desc, diff_dst);
  const auto run = [&](Context& context) {
    if (direction == Direction::fwd) {
      Tensor out = Tensor::empty(desc.dst_dims, desc.dtype, desc.layout);
      out.copy_from_f32(dst0.to_f32());
      add_fwd(context, desc, src, out);
      return out;
    }
    Tensor out = nan_tensor(desc.src_dims, desc.dtype, desc.layout);
    add_bwd(context, desc, diff_dst, out);
    return out;
  };

  Context base(BackendKind::cpu);
  base.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<AlgoInfo> algos = add_list(base, desc, direction);
  int ran = 0, unsupported = 0;
  double worst = 0;
  std::ostringstream summary;
  for (const AlgoInfo& algo : algos) {
    const std::string context = add_context(desc, direction, algo.id);
    if (!algo.supported) {
      ++unsupported;
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_NE(unsupported_category(expected_reasons(), desc, direction, algo), nullptr)
          << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
          << "(Note [expected unsupported adds]): \"" << algo.reason << "\"\n  " << context;
      continue;
    }
    Context fixed = base;
    fixed.tune().policy(OpKind::add, direction) = AlgoPolicy::fixed(algo.id);
    Tensor out, again;
    try {
      out = run(fixed);
      again = run(fixed);
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    ++ran;
    double ratio = 0;
    EXPECT_TRUE(add_close(desc, direction, out, expected, src, dst0, diff_dst, context, &ratio));
    worst = std::max(worst, ratio);
    summary << "\n    ran  " << algo.id << " (error " << ratio << " of the bound)";
    if (algo.deterministic) {
      EXPECT_TRUE(bitwise_equal(out, again, "output", context));
    }
  }
  std::cout << "[ parity   ] cpu " << name << " " << to_string(direction) << ": " << ran << " ran, "
            << unsupported << " unsupported, worst error " << worst << " of the bound"
            << summary.str() << "\n";
  // Whatever the CPU: natively, or as f32 compute where oneDNN has no f16/bf16 kernels
  // (Note [f32-compute adds] in src/backends/onednn/add.cpp).
  EXPECT_GT(ran, 0) << "no cpu candidate ran\n  " << add_context(desc, direction, "(none)");
  EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc.dtype));
}

// One ctest test per case (a process each).
TEST_P(AddParity, fwd_and_bwd) {
  check(Direction::fwd);
  check(Direction::bwd_data);
}

INSTANTIATE_TEST_SUITE_P(Table, AddParity, ::testing::ValuesIn(add_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dnnx::test
