#pragma once
// What the nn tests share: the context they run on, seeded inputs and labels, and closeness
// checks of tensors.

#include <dnnx/dnnx.hpp>
#include <dnnx/nn/nn.hpp>

#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dnnx::test::nn {

/// The cpu backend (oneDNN) where this build has it, else the reference.
inline Context fast_context() {
  return Context(backend_available(BackendKind::cpu) ? BackendKind::cpu : BackendKind::reference);
}

/// A host f32 tensor of `dims` uniform in [-1, 1) from `seed`.
inline Tensor input(const Dims& dims, std::uint64_t seed) {
  return random_tensor(dims, DType::f32, Layout::channels_first, seed);
}

/// A host i64 tensor of `count` labels in [0, classes) from `seed`.
inline Tensor labels(std::int64_t count, std::int64_t classes, std::uint64_t seed) {
  Tensor out = Tensor::empty(Dims{count}, DType::i64);
  const auto values = random_uniform(static_cast<std::size_t>(count), seed, 0.0f, 1.0f);
  for (std::int64_t i = 0; i < count; ++i) {
    static_cast<std::int64_t*>(out.data())[i] =
        std::min<std::int64_t>(classes - 1, static_cast<std::int64_t>(values[i] * classes));
  }
  return out;
}

/// The largest |a - b| / (atol + rtol |b|) over the elements; > 1 means not close.
inline double worst_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                          double atol) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (atol + rtol * std::abs(double(b[i]))));
  }
  return worst;
}

/// Expects every element of `a` within atol + rtol |b| of `b` (host or device tensors).
inline void expect_close(const Tensor& a, const Tensor& b, double rtol, double atol,
                         const std::string& what) {
  ASSERT_EQ(a.dims(), b.dims()) << what;
  const auto host = [](const Tensor& t) {
    if (t.device().kind == Device::Kind::cpu) return t.to_f32();
    Tensor h = Tensor::empty(t.dims(), t.dtype());
    copy(t, h);
    return h.to_f32();
  };
  EXPECT_LE(worst_ratio(host(a), host(b), rtol, atol), 1.0) << what;
}

}  // namespace dnnx::test::nn
