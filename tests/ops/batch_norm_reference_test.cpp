// The batch-norm desc and the reference backend (label unit): the case table, desc keys and
// repro lines, the reference against closed forms (inference output, running statistics after k
// training steps) and against finite differences of its own forward (training and inference),
// and the optional tensors of a training forward.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "ops/batch_norm_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

namespace dnnx::test {
namespace {

Context reference() { return batch_norm_context_with(BackendKind::reference, Direction::fwd); }

BatchNormDesc desc_of(Dims dims, BatchNormMode mode, bool training, bool affine = true,
                      Layout layout = Layout::channels_first) {
  BatchNormDesc desc;
  desc.dims = dims;
  desc.mode = mode;
  desc.training = training;
  desc.affine = affine;
  desc.layout = layout;
  desc.eps = 1e-3;
  desc.momentum = 0.2;
  desc.validate();
  return desc;
}

// ---- the desc
// -------------------------------------------------------------------------------------

TEST(BatchNormDesc, TableIsValidVariedAndUniquelyNamed) {
  const std::vector<BatchNormCase> cases = batch_norm_cases();
  std::set<std::string> names;
  std::set<int> ranks;
  std::set<std::string> variants;
  bool batch_one = false;
  for (const BatchNormCase& c : cases) {
    EXPECT_NO_THROW(c.desc.validate()) << c.name;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    ranks.insert(c.desc.dims.rank());
    batch_one = batch_one || c.desc.dims[0] == 1;
    std::ostringstream variant;
    variant << to_string(c.desc.mode) << c.desc.training << c.desc.affine << to_string(c.desc.dtype)
            << to_string(c.desc.layout);
    variants.insert(variant.str());
  }
  EXPECT_EQ(ranks, (std::set<int>{2, 3, 4, 5}));
  EXPECT_TRUE(batch_one);
  // Every (mode, training, affine, dtype, layout) combination appears.
  EXPECT_EQ(variants.size(), 2u * 2 * 2 * 3 * 2);
}

TEST(BatchNormDesc, ShapesOfParametersAndStatistics) {
  const BatchNormDesc spatial = desc_of({4, 3, 5, 7}, BatchNormMode::spatial, true);
  EXPECT_EQ(spatial.param_dims(), (Dims{3}));
  EXPECT_EQ(spatial.statistics(), 3);
  EXPECT_EQ(spatial.reduction_size(), 4 * 5 * 7);
  const BatchNormDesc activation = desc_of({4, 3, 5, 7}, BatchNormMode::per_activation, true);
  EXPECT_EQ(activation.param_dims(), (Dims{1, 3, 5, 7}));
  EXPECT_EQ(activation.statistics(), 3 * 5 * 7);
  EXPECT_EQ(activation.reduction_size(), 4);
  const BatchNormDesc rank2 = desc_of({6, 10}, BatchNormMode::per_activation, true);
  EXPECT_EQ(rank2.param_dims(), (Dims{1, 10}));
}

TEST(BatchNormDesc, KeyHashAndReproNameEveryField) {
  const BatchNormDesc base = desc_of({4, 3, 5, 7}, BatchNormMode::spatial, true);
  std::vector<BatchNormDesc> variants(9, base);
  variants[1].dims = {4, 3, 5, 8};
  variants[2].mode = BatchNormMode::per_activation;
  variants[3].training = false;
  variants[4].affine = false;
  variants[5].eps = 2e-3;
  variants[6].momentum = 0.25;
  variants[7].dtype = DType::bf16;
  variants[8].layout = Layout::channels_last;
  std::set<std::string> keys;
  std::set<std::string> repros;
  for (const BatchNormDesc& d : variants) {
    keys.insert(d.key());
    repros.insert(d.repro(Direction::fwd));
  }
  EXPECT_EQ(keys.size(), variants.size());
  EXPECT_EQ(repros.size(), variants.size());
  BatchNormDesc copy = base;
  EXPECT_EQ(copy, base);
  EXPECT_EQ(copy.hash(), base.hash());
  copy.momentum = -0.0;
  BatchNormDesc zero = base;
  zero.momentum = 0.0;
  EXPECT_EQ(copy, zero);
  EXPECT_EQ(copy.hash(), zero.hash());
  EXPECT_EQ(base.repro(Direction::bwd_data),
            "dnnx profile bnorm --input 4x3x5x7 --mode spatial --training --eps 0.001 "
            "--momentum 0.2 --dtype f32 --layout nchw --direction bwd");
  EXPECT_NE(variants[4].repro().find("--no-affine"), std::string::npos);
  EXPECT_NE(variants[3].repro().find("--inference"), std::string::npos);
  std::ostringstream printed;
  printed << base;
  EXPECT_EQ(printed.str(), base.key());
}

TEST(BatchNormDesc, SpatialOfBuildsAValidatedDesc) {
  const BatchNormDesc desc =
      BatchNormDesc::spatial_of({8, 4, 3}, false, DType::bf16, Layout::channels_last);
  EXPECT_EQ(desc.mode, BatchNormMode::spatial);
  EXPECT_FALSE(desc.training);
  EXPECT_EQ(desc.dtype, DType::bf16);
  EXPECT_EQ(desc.layout, Layout::channels_last);
  EXPECT_THROW(BatchNormDesc::spatial_of({1, 4}), Error);  // training on one value per channel
}

TEST(BatchNormDesc, ModeNames) {
  EXPECT_EQ(parse_batch_norm_mode("spatial"), BatchNormMode::spatial);
  EXPECT_EQ(parse_batch_norm_mode("per_activation"), BatchNormMode::per_activation);
  EXPECT_EQ(parse_batch_norm_mode("Per-Activation"), BatchNormMode::per_activation);
  EXPECT_EQ(to_string(BatchNormMode::per_activation), "per_activation");
}

// ---- closed forms -----------------------------------------------------------------------------

TEST(BatchNormReference, InferenceIsTheAffineMapOfTheRunningStatistics) {
  const BatchNormDesc desc = desc_of({2, 2, 3}, BatchNormMode::spatial, false);
  const BatchNormInputs in = batch_norm_inputs(desc, 7);
  Context context = reference();
  const BatchNormFwdResult out = run_batch_norm_fwd(context, desc, in);
  const auto x = in.src.to_f32(), y = out.dst.to_f32();
  const auto g = in.scale.to_f32(), b = in.shift.to_f32();
  const auto rm = in.running_mean.to_f32(), rv = in.running_var.to_f32();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = (i / 3) % 2;
    const double want = (x[i] - rm[c]) / std::sqrt(rv[c] + desc.eps) * g[c] + b[c];
    EXPECT_NEAR(y[i], want, 1e-6 * (1 + std::abs(want))) << i;
  }
  // Inference leaves the running statistics alone.
  EXPECT_TRUE(bitwise_equal(out.running_mean, in.running_mean, "running_mean", ""));
  EXPECT_TRUE(bitwise_equal(out.running_var, in.running_var, "running_var", ""));
}

// PyTorch's update, k times: running = (1 - m) running + m batch, unbiased batch variance.
TEST(BatchNormReference, RunningStatisticsAfterKStepsFollowPyTorchsRecurrence) {
  const BatchNormDesc desc = desc_of({3, 2, 4}, BatchNormMode::spatial, true);
  Context context = reference();
  std::vector<double> rm = {0.0, 0.0}, rv = {1.0, 1.0};
  Tensor running_mean = batch_norm_param(desc, {0.0f, 0.0f});
  Tensor running_var = batch_norm_param(desc, {1.0f, 1.0f});
  const Tensor scale = batch_norm_param(desc, {1.0f, 2.0f});
  const Tensor shift = batch_norm_param(desc, {0.0f, -1.0f});
  for (int step = 0; step < 5; ++step) {
    const Tensor src = random_tensor(desc.dims, DType::f32, desc.layout, 100 + step);
    Tensor dst = Tensor::empty(desc.dims, DType::f32);
    BatchNormTensors t;
    t.scale = &scale;
    t.shift = &shift;
    t.running_mean = &running_mean;
    t.running_var = &running_var;
    batch_norm_fwd(context, desc, src, dst, t);
    const auto x = src.to_f32();
    for (std::size_t c = 0; c < 2; ++c) {
      double sum = 0, sq = 0;
      for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t w = 0; w < 4; ++w) sum += x[(n * 2 + c) * 4 + w];
      const double mean = sum / 12;
      for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t w = 0; w < 4; ++w) sq += std::pow(x[(n * 2 + c) * 4 + w] - mean, 2);
      rm[c] = (1 - desc.momentum) * rm[c] + desc.momentum * mean;
      rv[c] = (1 - desc.momentum) * rv[c] + desc.momentum * sq / 11;
    }
  }
  const auto got_mean = running_mean.to_f32(), got_var = running_var.to_f32();
  for (std::size_t c = 0; c < 2; ++c) {
    // f32 storage between steps: a few f32 roundings.
    EXPECT_NEAR(got_mean[c], rm[c], 1e-6) << c;
    EXPECT_NEAR(got_var[c], rv[c], 1e-6) << c;
  }
}

// A training forward without running or saved tensors computes the same dst.
TEST(BatchNormReference, TrainingTensorsAreOptional) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    const BatchNormDesc desc = desc_of({4, 3, 5}, BatchNormMode::spatial, true);
    const BatchNormInputs in = batch_norm_inputs(desc, 11);
    Context context = batch_norm_context_with(backend, Direction::fwd);
    const BatchNormFwdResult full = run_batch_norm_fwd(context, desc, in);
    Tensor dst = Tensor::empty(desc.dims, desc.dtype);
    BatchNormTensors t;
    t.scale = &in.scale;
    t.shift = &in.shift;
    batch_norm_fwd(context, desc, in.src, dst, t);
    EXPECT_TRUE(bitwise_equal(dst, full.dst, "dst", to_string(backend)));
  }
}

// ---- finite differences -------------------------------------------------------------------------

// L = sum(dst * w) through the reference forward, in f64 from the f32 dst.
double loss(const BatchNormDesc& desc, const BatchNormInputs& in, const std::vector<float>& w) {
  Context context = reference();
  const BatchNormFwdResult out = run_batch_norm_fwd(context, desc, in);
  const std::vector<float> y = out.dst.to_f32();
  double sum = 0;
  for (std::size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * w[i];
  return sum;
}

// Central differences of L with respect to every element of `target` (a member of `in`).
std::vector<double> numeric_gradient(const BatchNormDesc& desc, BatchNormInputs in,
                                     Tensor BatchNormInputs::*target, const std::vector<float>& w) {
  // A step large enough that the f32 rounding of dst (about 1e-7 of L per element) stays below
  // the truncation error (h^2 times the third derivative), both well inside the tolerance.
  constexpr float h = 1e-2f;
  std::vector<float> values = (in.*target).to_f32();
  std::vector<double> gradient(values.size());
  const Dims dims = (in.*target).dims();
  const Layout layout = (in.*target).layout().value();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float original = values[i];
    values[i] = original + h;
    in.*target = tensor_from(dims, DType::f32, layout, values);
    const double plus = loss(desc, in, w);
    values[i] = original - h;
    in.*target = tensor_from(dims, DType::f32, layout, values);
    const double minus = loss(desc, in, w);
    values[i] = original;
    gradient[i] = (plus - minus) / (2 * static_cast<double>(h));
  }
  in.*target = tensor_from(dims, DType::f32, layout, values);
  return gradient;
}

void expect_close(const std::vector<double>& numeric, const Tensor& analytic, const char* what,
                  const std::string& context) {
  const std::vector<float> a = analytic.to_f32();
  ASSERT_EQ(numeric.size(), a.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], numeric[i], 2e-3 * (1 + std::abs(numeric[i])))
        << what << '[' << i << "] " << context;
  }
}

struct FiniteDifferenceCase {
  Dims dims;
  BatchNormMode mode;
  bool training;
  bool affine;
  Layout layout;
};

class BatchNormFiniteDifferences : public ::testing::TestWithParam<FiniteDifferenceCase> {};

TEST_P(BatchNormFiniteDifferences, BackwardIsTheGradientOfForward) {
  const FiniteDifferenceCase& p = GetParam();
  const BatchNormDesc desc = desc_of(p.dims, p.mode, p.training, p.affine, p.layout);
  const std::string context = batch_norm_context(desc, Direction::bwd_data, "reference:direct");
  BatchNormInputs in = batch_norm_inputs(desc, seed_from(desc.key()));
  // diff_dst doubles as the weights of the loss: d(sum dst * w)/d dst = w.
  const std::vector<float> w = in.diff_dst.to_f32();
  Context context_ref = reference();
  const BatchNormFwdResult fwd = run_batch_norm_fwd(context_ref, desc, in);
  const BatchNormBwdResult bwd =
      run_batch_norm_bwd(context_ref, desc, in, fwd.saved_mean, fwd.saved_inv_std);
  // The loss is read from dst in logical order; diff_dst's logical values are w.
  expect_close(numeric_gradient(desc, in, &BatchNormInputs::src, w), bwd.diff_src, "diff_src",
               context);
  if (desc.affine) {
    expect_close(numeric_gradient(desc, in, &BatchNormInputs::scale, w), bwd.diff_scale,
                 "diff_scale", context);
    expect_close(numeric_gradient(desc, in, &BatchNormInputs::shift, w), bwd.diff_shift,
                 "diff_shift", context);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BatchNormFiniteDifferences,
    ::testing::Values(
        FiniteDifferenceCase{{3, 2, 4}, BatchNormMode::spatial, true, true, Layout::channels_first},
        FiniteDifferenceCase{
            {2, 3, 2, 3}, BatchNormMode::spatial, true, true, Layout::channels_last},
        FiniteDifferenceCase{
            {2, 2, 2, 2, 2}, BatchNormMode::spatial, true, false, Layout::channels_first},
        FiniteDifferenceCase{
            {5, 6}, BatchNormMode::per_activation, true, true, Layout::channels_first},
        FiniteDifferenceCase{
            {3, 2, 2, 2}, BatchNormMode::per_activation, true, true, Layout::channels_last},
        FiniteDifferenceCase{
            {3, 2, 4}, BatchNormMode::spatial, false, true, Layout::channels_first},
        FiniteDifferenceCase{
            {2, 3, 2, 3}, BatchNormMode::spatial, false, true, Layout::channels_last},
        FiniteDifferenceCase{
            {4, 5}, BatchNormMode::per_activation, false, true, Layout::channels_first},
        FiniteDifferenceCase{
            {3, 2, 3}, BatchNormMode::spatial, false, false, Layout::channels_first}),
    [](const ::testing::TestParamInfo<FiniteDifferenceCase>& info) {
      std::ostringstream name;
      const FiniteDifferenceCase& p = info.param;
      name << p.dims.to_string() << '_' << to_string(p.mode) << (p.training ? "_train" : "_infer")
           << (p.affine ? "_affine_" : "_plain_") << to_string(p.layout);
      return name.str();
    });

}  // namespace
}  // namespace dnnx::test
