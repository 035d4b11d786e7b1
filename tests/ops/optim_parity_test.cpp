// Parity of every listed cpu candidate of sgd, adam, unscale and update_scale with the reference
// backend, for every case of the optimizer table (ops/optim_cases.hpp) in f32, f16 and bf16,
// through the parity runner: several calls from the same state, found_inf skips, grad scales,
// master weights, odd sizes, empty tensors, many tensors, misaligned tensors.

#include "ops/optim_cases.hpp"

#include <gtest/gtest.h>

namespace dnnx::test {
namespace {

class OptimParity : public ::testing::TestWithParam<DTypeCase<OptimCase>> {};

TEST_P(OptimParity, cpu) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  const auto c = optim_parity_case(GetParam().c, GetParam().dtype);
  const ParityTally tally = check_parity(*c, BackendKind::cpu, Direction::fwd);
  EXPECT_EQ(tally.ran, 1) << "the cpu backend lists one candidate per op";
}

INSTANTIATE_TEST_SUITE_P(Table, OptimParity,
                         ::testing::ValuesIn(in_every_dtype(optim_cases(), optim_representable)),
                         dtype_case_name<OptimCase>);

}  // namespace
}  // namespace dnnx::test
