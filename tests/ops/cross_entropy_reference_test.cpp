// The reference cross-entropy on its own: hand-computed losses, PyTorch's conventions (ignored
// positions, weighted mean, mean of nothing), large logits, spatial positions in both layouts,
// and the backward pass against central finite differences of the forward.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include "ops/cross_entropy_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace dnnx::test {
namespace {

CrossEntropyDesc desc_of(const Dims& dims, Reduction reduction, bool weighted = false,
                         Layout layout = Layout::channels_first) {
  CrossEntropyDesc desc;
  desc.dims = dims;
  desc.reduction = reduction;
  desc.weighted = weighted;
  desc.layout = layout;
  return desc;
}

XentInputs inputs_of(const CrossEntropyDesc& desc, const std::vector<float>& logits,
                     const std::vector<std::int64_t>& labels,
                     const std::vector<float>& weights = {},
                     const std::vector<float>& diff_loss = {}) {
  XentInputs in;
  in.logits = tensor_from(desc.dims, desc.dtype, desc.layout, logits);
  in.labels = labels_tensor(desc.labels_dims(), desc.label_dtype, labels);
  if (desc.weighted)
    in.weights = tensor_from(desc.weights_dims(), DType::f32, Layout::channels_first, weights);
  std::vector<float> dl = diff_loss;
  if (dl.empty()) dl.assign(static_cast<std::size_t>(desc.loss_dims().product()), 1.0f);
  in.diff_loss = tensor_from(desc.loss_dims(), desc.dtype, Layout::channels_first, dl);
  return in;
}

std::vector<float> run(const CrossEntropyDesc& desc, Direction direction, const XentInputs& in) {
  Context context = xent_context_for(BackendKind::reference, direction, AlgoPolicy::heuristic());
  return run_xent(context, desc, direction, in).output.to_f32();
}

TEST(XentReference, HandComputedLosses) {
  // Two positions, three classes: -log softmax(x)[y].
  const std::vector<float> x{0.0f, std::log(2.0f), std::log(3.0f), 1.0f, 1.0f, 1.0f};
  const std::vector<std::int64_t> y{2, 0};
  const double nll0 = -std::log(3.0 / 6.0), nll1 = -std::log(1.0 / 3.0);
  const auto none = run(desc_of({2, 3}, Reduction::none), Direction::fwd,
                        inputs_of(desc_of({2, 3}, Reduction::none), x, y));
  EXPECT_NEAR(none[0], nll0, 1e-6);
  EXPECT_NEAR(none[1], nll1, 1e-6);
  const auto sum = run(desc_of({2, 3}, Reduction::sum), Direction::fwd,
                       inputs_of(desc_of({2, 3}, Reduction::sum), x, y));
  EXPECT_NEAR(sum[0], nll0 + nll1, 1e-6);
  // Weighted mean divides by the weights of the labels (PyTorch), not by the count.
  const CrossEntropyDesc weighted = desc_of({2, 3}, Reduction::mean, true);
  const auto mean = run(weighted, Direction::fwd, inputs_of(weighted, x, y, {0.5f, 1.0f, 3.0f}));
  EXPECT_NEAR(mean[0], (3.0 * nll0 + 0.5 * nll1) / 3.5, 1e-6);
}

TEST(XentReference, IgnoredPositionsAndEmptyMean) {
  CrossEntropyDesc desc = desc_of({3, 2}, Reduction::none);
  desc.ignore_index = 1;  // a class index can be the ignored value
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  const auto none = run(desc, Direction::fwd, inputs_of(desc, x, {1, 0, 1}));
  EXPECT_EQ(none[0], 0.0f);
  EXPECT_EQ(none[2], 0.0f);
  EXPECT_NEAR(none[1], std::log(1 + std::exp(1.0)), 1e-6);
  desc.reduction = Reduction::mean;
  const auto mean = run(desc, Direction::fwd, inputs_of(desc, x, {1, 1, 1}));
  EXPECT_TRUE(std::isnan(mean[0])) << "mean over no position is 0/0, as PyTorch";
  const auto grad = run(desc, Direction::bwd_data, inputs_of(desc, x, {1, 1, 1}));
  for (float g : grad) EXPECT_EQ(g, 0.0f) << "ignored positions get no gradient";
}

TEST(XentReference, LargeLogitsAreStable) {
  const CrossEntropyDesc desc = desc_of({2, 3}, Reduction::none);
  const auto loss =
      run(desc, Direction::fwd, inputs_of(desc, {1e4f, 0.0f, -1e4f, -1e4f, 1e4f, 1e4f}, {1, 0}));
  EXPECT_EQ(loss[0], 1e4f);
  EXPECT_NEAR(loss[1], 2e4 + std::log(2.0), 1e-2);
  const auto grad = run(desc, Direction::bwd_data,
                        inputs_of(desc, {1e4f, 0.0f, -1e4f, -1e4f, 1e4f, 1e4f}, {1, 0}));
  EXPECT_EQ(grad[0], 1.0f);
  EXPECT_EQ(grad[1], -1.0f);
  EXPECT_EQ(grad[3], -1.0f);
  EXPECT_NEAR(grad[4], 0.5f, 1e-7);
}

// Spatial positions: one label per (n, h, w), classes along C, in either layout.
TEST(XentReference, SpatialPositionsInBothLayouts) {
  const Dims dims{2, 3, 2, 2};
  const std::vector<float> x = random_uniform(24, 3, -2.0f, 2.0f);
  const std::vector<std::int64_t> y{0, 1, 2, 0, 2, 2, 1, -100};
  std::vector<float> first;
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    const CrossEntropyDesc desc = desc_of(dims, Reduction::none, false, layout);
    const auto loss = run(desc, Direction::fwd, inputs_of(desc, x, y));
    ASSERT_EQ(loss.size(), 8u);
    for (std::size_t p = 0; p < 7; ++p) {
      const std::size_t n = p / 4, s = p % 4;
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::exp(x[(n * 3 + static_cast<std::size_t>(c)) * 4 + s]);
      const double expected = std::log(sum) - x[(n * 3 + static_cast<std::size_t>(y[p])) * 4 + s];
      EXPECT_NEAR(loss[p], expected, 1e-5) << to_string(layout) << " position " << p;
    }
    EXPECT_EQ(loss[7], 0.0f);
    if (first.empty()) first = loss;
    EXPECT_EQ(loss, first) << "the loss does not depend on the layout";
  }
}

// The backward pass is the gradient of L(x) = sum(diff_loss * loss(x)), checked by central
// differences of the reference's own forward (f32 storage, f64 inside; step 1e-2 on logits of
// magnitude ~2 keeps both error terms well under the 2e-3 bound).
void check_finite_differences(const CrossEntropyDesc& desc) {
  SCOPED_TRACE(desc.repro(Direction::bwd_data));
  const auto count = static_cast<std::size_t>(desc.dims.product());
  const auto positions = static_cast<std::size_t>(desc.positions());
  const std::vector<float> x = random_uniform(count, seed_from(desc.key()), -2.0f, 2.0f);
  std::vector<std::int64_t> y(positions);
  for (std::size_t p = 0; p < positions; ++p)
    y[p] = p % 5 == 3 ? desc.ignore_index : static_cast<std::int64_t>(p * 7 % desc.classes());
  const std::vector<float> w =
      random_uniform(static_cast<std::size_t>(desc.classes()), 5, 0.5f, 2.0f);
  const std::vector<float> dl =
      random_uniform(static_cast<std::size_t>(desc.loss_dims().product()), 9, 0.5f, 1.5f);
  auto objective = [&](const std::vector<float>& logits) {
    const auto loss = run(desc, Direction::fwd, inputs_of(desc, logits, y, w, dl));
    double total = 0;
    for (std::size_t k = 0; k < loss.size(); ++k) total += static_cast<double>(dl[k]) * loss[k];
    return total;
  };
  const auto analytic = run(desc, Direction::bwd_data, inputs_of(desc, x, y, w, dl));
  constexpr float h = 1e-2f;
  for (std::size_t k = 0; k < count; ++k) {
    std::vector<float> plus = x, minus = x;
    plus[k] += h;
    minus[k] -= h;
    const double numeric = (objective(plus) - objective(minus)) / (2.0 * h);
    EXPECT_NEAR(analytic[k], numeric, 2e-3 * (1 + std::abs(numeric))) << "element " << k;
  }
}

TEST(XentReference, BackwardMatchesFiniteDifferences) {
  check_finite_differences(desc_of({4, 5}, Reduction::mean));
  check_finite_differences(desc_of({4, 5}, Reduction::sum, true));
  check_finite_differences(desc_of({4, 5}, Reduction::none, true));
  check_finite_differences(desc_of({2, 3, 2, 2}, Reduction::mean, true, Layout::channels_last));
  check_finite_differences(desc_of({1, 4, 3}, Reduction::none));
  check_finite_differences(desc_of({1, 2, 2, 1, 2}, Reduction::sum, false, Layout::channels_last));
}

}  // namespace
}  // namespace dnnx::test
