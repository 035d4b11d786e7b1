#pragma once
// Small pieces the layer ops' case tables and api tests share (tests/ops/<op>_cases.cpp,
// tests/ops/<op>_api_test.cpp).

#include <dnnx/algo.hpp>
#include <dnnx/tensor.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace dnnx::test {

/// The unit roundoff of `dtype`'s storage: half its ulp of 1 (2^-24 for f32, 2^-11 for f16,
/// 2^-8 for bf16), the relative error of one rounding to it.
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

/// The id of the first supported candidate of a list (what the heuristic policy runs); empty when
/// none is.
inline std::string first_supported(const std::vector<AlgoInfo>& algos) {
  for (const AlgoInfo& algo : algos)
    if (algo.supported) return algo.id;
  return {};
}

}  // namespace dnnx::test
