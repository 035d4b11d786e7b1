// Parity of every listed cpu candidate of reorder with the reference backend, for every case of
// the reorder table (STYLE.md "Tests"), through the parity runner (support/parity.hpp): one test
// per shape, each running its 36 layout x dtype pairs. Outputs are compared with
// reorder_close(); unsupported candidates are counted and must carry one of the reasons of Note
// [expected unsupported reorders] (reorder_cases.cpp).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/reorder.hpp>

#include "ops/reorder_cases.hpp"
#include "support/parity.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dnnx::test {
namespace {

class ReorderParity : public ::testing::TestWithParam<ReorderShape> {};

// One ctest test per shape (a process each).
TEST_P(ReorderParity, EveryLayoutAndDtypePair) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  for (const ReorderCase& c : GetParam().cases) {
    SCOPED_TRACE(c.name);
    check_parity(ReorderParityCase(c), BackendKind::cpu, Direction::fwd);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ReorderParity, ::testing::ValuesIn(reorder_shapes()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dnnx::test
