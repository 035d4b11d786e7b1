#pragma once
// Small pieces the layer ops' case tables and api tests share (tests/ops/<op>_cases.cpp,
// tests/ops/<op>_api_test.cpp).

#include <dnnx/algo.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
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

/// Whether `algo` is a cpu f32-compute candidate (src/backends/onednn/layer_common.hpp, Note [f32
/// compute]): it has the note "f32_compute".
inline bool is_f32_compute(const AlgoInfo& algo) {
  return std::find(algo.notes.begin(), algo.notes.end(), "f32_compute") != algo.notes.end();
}

/// Whether `algo` is one of oneDNN's reference implementations (id "onednn:ref:...").
inline bool is_onednn_reference(const AlgoInfo& algo) { return algo.id.starts_with("onednn:ref:"); }

/// Whether a cpu listing has a supported oneDNN candidate (id "onednn:..."), native or f32 compute.
inline bool has_supported_onednn(const std::vector<AlgoInfo>& algos) {
  return std::any_of(algos.begin(), algos.end(), [](const AlgoInfo& algo) {
    return algo.supported && algo.id.starts_with("onednn:");
  });
}

/// Checks a cpu listing for tensors of `dtype` against Note [f32 compute]: an f32-compute candidate
/// says so three ways at once (id ending in ":f32", note "f32_compute", "f32 compute" in its name);
/// there are none for f32 tensors; and candidates come in the order supported native non-reference
/// ones, supported f32-compute non-reference ones, supported ref:any ones, unsupported ones.
/// Nothing here depends on which ones the CPU offers.
inline ::testing::AssertionResult f32_compute_marked_and_ordered(const std::vector<AlgoInfo>& algos,
                                                                 DType dtype) {
  int previous = 0;
  for (const AlgoInfo& algo : algos) {
    const bool noted = is_f32_compute(algo);
    const bool suffixed = algo.id.ends_with(":f32");
    const bool named = algo.name.find("f32 compute") != std::string::npos;
    if (noted != suffixed || noted != named) {
      return ::testing::AssertionFailure()
             << algo.id << " (\"" << algo.name << "\") is marked as f32 compute only partly: note "
             << noted << ", id suffix " << suffixed << ", name " << named;
    }
    if (noted && dtype == DType::f32)
      return ::testing::AssertionFailure()
             << algo.id << " is an f32-compute candidate of f32 tensors";
    const int rank = !algo.supported ? 3 : is_onednn_reference(algo) ? 2 : noted ? 1 : 0;
    if (rank < previous) {
      return ::testing::AssertionFailure()
             << algo.id << " is listed after a candidate of a later group (native, f32 compute, "
             << "ref:any, unsupported): group " << rank << " after group " << previous;
    }
    previous = rank;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace dnnx::test
