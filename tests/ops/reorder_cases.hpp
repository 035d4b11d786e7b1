#pragma once
// THE reorder case table (STYLE.md "Tests"): ranks 1 to 5, odd sizes (3x5x7x9), C = 1, N = 1,
// a spatial extent of 1, an empty tensor and tiles that do not divide the transpose's 32 x 32;
// each shape in every layout pair and every dtype pair (f32, f16, bf16 both ways), with scales
// (1, 0), (0.5, -2), (2, 1) rotating through them. Also the tolerance, the comparison, and the
// parity case every reorder test shares (cpu parity, the cudnn test).

#include <dnnx/ops/reorder.hpp>
#include <dnnx/tensor.hpp>

#include "support/parity.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct ReorderCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique: <shape>_<src>_<dst>_<scales>
  ReorderDesc desc;
};

/// One shape of the table with every layout pair x dtype pair of it.
struct ReorderShape {
  std::string name;  ///< [A-Za-z0-9_]+, unique
  std::vector<ReorderCase> cases;
};

/// Every shape, each with its 4 layout pairs x 9 dtype pairs (36 cases).
std::vector<ReorderShape> reorder_shapes();

/// Fails unless `actual` is finite and within dst's dtype's bound of `expected` (Note [reorder
/// tolerances] in reorder_cases.cpp): exact for a plain conversion (alpha 1, beta 0), else
/// relative to |alpha src| + |beta dst0| per element. `worst` gets the largest error / bound.
::testing::AssertionResult reorder_close(const ReorderDesc& desc, const Tensor& actual,
                                         const Tensor& expected, const Tensor& src,
                                         const Tensor& dst0, std::string_view context,
                                         double* worst = nullptr);

/// Failure context: op, candidate id, the desc and its `dnnx` reproduction line.
std::string reorder_context(const ReorderDesc& desc, std::string_view candidate);

/// A row of the table for the parity runner, on any backend (tensors are placed in the
/// context's memory and fetched back). dst starts from random values, or from NaN when beta = 0
/// (dst must then not be read). Unsupported candidates must carry one of the reasons of Note
/// [expected unsupported reorders].
class ReorderParityCase final : public ParityCase {
 public:
  explicit ReorderParityCase(const ReorderCase& c);

  OpKind op_kind() const override { return OpKind::reorder; }
  std::string label() const override { return name_; }
  std::string where(Direction direction, std::string_view candidate) const override;
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override;
  ParityRun run(Context& context, Direction direction) const override;
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override;
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override;

 private:
  std::string name_;
  ReorderDesc desc_;
  Tensor src_;
  Tensor dst0_;  ///< what dst holds before the call (NaN when beta = 0: it must not be read)
};

}  // namespace dnnx::test
