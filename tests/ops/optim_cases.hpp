#pragma once
// The case table of the optimizer and loss-scaling ops (sgd, adam, unscale, update_scale), shared
// by the parity test, the cudnn GPU test and the error tests: each case runs a few calls from a
// state made from its name's seed and hands back everything the calls wrote.

#include <dnnx/dnnx.hpp>

#include "support/parity.hpp"

#include <string>
#include <vector>

namespace dnnx::test {

struct OptimCase {
  std::string name;
  OpKind op = OpKind::sgd;  ///< sgd, adam, unscale or update_scale
  std::vector<Dims> shapes;
  SgdDesc sgd;  ///< op sgd (shapes and dtype filled by the parity case)
  SgdHyper sgd_hyper;
  AdamDesc adam;  ///< op adam
  AdamHyper adam_hyper;
  UnscaleDesc unscale;  ///< op unscale
  UpdateScaleHyper update_hyper;
  int steps = 3;            ///< calls made
  float grad_scale = 4.0f;  ///< the grad_scale value (unscale: inv_scale or scale)
  /// found_inf of call k (when the desc takes found_inf; unscale: its value before the first call;
  /// update_scale: the sequence itself).
  std::vector<float> found_inf;
  bool non_finite = false;  ///< unscale: plant an inf and a NaN in the gradients
  bool misaligned = false;  ///< every tensor starts one element into its allocation
};

/// The table: every op, flags on and off, odd sizes, numel 0, many tensors.
const std::vector<OptimCase>& optim_cases();

/// A case in one dtype as a ParityCase (the reference and every candidate run the same calls).
std::unique_ptr<ParityCase> optim_parity_case(const OptimCase& c, DType dtype);

/// Whether `c` is meaningful in `dtype` (update_scale has no dtype: f32 only).
bool optim_representable(const OptimCase& c, DType dtype);

}  // namespace dnnx::test
