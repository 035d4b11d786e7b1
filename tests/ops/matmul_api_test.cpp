// matmul through the public API: the desc (shapes, the linear helper, keys), the semantics of
// every direction on small products worked out by hand (independent of the reference backend's
// loops), beta's accumulation under exhaustive selection, and the listing on every backend.

#include <dnnx/dnnx.hpp>

#include "ops/matmul_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

const Layout rows = Layout::channels_first;

Tensor host(const Dims& dims, const std::vector<float>& values, DType dtype = DType::f32) {
  return tensor_from(dims, dtype, rows, values);
}

TEST(MatmulDesc, ShapesFollowTransposesBatchAndSharing) {
  MatmulDesc d;
  d.m = 2, d.n = 3, d.k = 4;
  EXPECT_EQ(d.a_dims(), (Dims{2, 4}));
  EXPECT_EQ(d.b_dims(), (Dims{4, 3}));
  EXPECT_EQ(d.dst_dims(), (Dims{2, 3}));
  d.transpose_a = d.transpose_b = true;
  EXPECT_EQ(d.a_dims(), (Dims{4, 2}));
  EXPECT_EQ(d.b_dims(), (Dims{3, 4}));
  d.batch = 5;
  EXPECT_EQ(d.a_dims(), (Dims{5, 4, 2}));
  EXPECT_EQ(d.b_dims(), (Dims{5, 3, 4}));
  EXPECT_EQ(d.dst_dims(), (Dims{5, 2, 3}));
  d.broadcast_b = true;
  EXPECT_EQ(d.b_dims(), (Dims{3, 4}));
  EXPECT_EQ(d.bias_dims(), (Dims{3}));
  EXPECT_DOUBLE_EQ(d.flops(), 2.0 * 5 * 2 * 3 * 4);
  d.broadcast_b = false, d.broadcast_a = true;
  EXPECT_EQ(d.a_dims(), (Dims{4, 2}));
  EXPECT_EQ(d.b_dims(), (Dims{5, 3, 4}));
  EXPECT_EQ(d.dst_dims(), (Dims{5, 2, 3}));
  EXPECT_NE(d.key().find(" shared_a"), std::string::npos) << d.key();
  EXPECT_NE(d.repro(Direction::bwd_data).find(" --broadcast-a"), std::string::npos);
}

TEST(MatmulDesc, LinearIsOutByInWeights) {
  const MatmulDesc d = MatmulDesc::linear(64, 2048, 1000, true, DType::f16);
  EXPECT_EQ(d.a_dims(), (Dims{64, 2048}));
  EXPECT_EQ(d.b_dims(), (Dims{1000, 2048}));
  EXPECT_EQ(d.dst_dims(), (Dims{64, 1000}));
  EXPECT_TRUE(d.bias);
  EXPECT_EQ(d.repro(Direction::bwd_weights),
            "dnnx profile matmul --batch 1 --m 64 --n 1000 --k 2048 --transpose-b --bias "
            "--alpha 1 --beta 0 --dtype f16 --direction bwd_weights");
}

TEST(MatmulDesc, KeysAndHashesTellEveryFieldApart) {
  const MatmulDesc base = MatmulDesc::linear(8, 4, 2);
  std::vector<MatmulDesc> variants(10, base);
  variants[1].transpose_a = true;
  variants[2].transpose_b = false;
  variants[3].bias = false;
  variants[4].alpha = 2;
  variants[5].beta = 1;
  variants[6].dtype = DType::bf16;
  variants[7].batch = 2, variants[7].broadcast_b = true;
  variants[8].k = 5;
  variants[9].batch = 2, variants[9].broadcast_a = true;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    for (std::size_t j = i + 1; j < variants.size(); ++j) {
      EXPECT_NE(variants[i].key(), variants[j].key()) << i << " " << j;
      EXPECT_NE(variants[i], variants[j]);
    }
  }
  EXPECT_EQ(base.hash(), MatmulDesc::linear(8, 4, 2).hash());
  MatmulDesc relu = base, gelu = base;
  relu.activation = MatmulActivation::relu;
  gelu.activation = parse_matmul_activation("gelu");
  EXPECT_EQ(gelu.activation, MatmulActivation::gelu_tanh);
  EXPECT_NE(relu.key(), base.key());
  EXPECT_NE(relu.key(), gelu.key());
  EXPECT_NE(relu.hash(), gelu.hash());
  // No activation keeps the key and repro line a desc had before the field existed.
  EXPECT_EQ(base.key().find("act"), std::string::npos);
  EXPECT_NE(gelu.repro(Direction::fwd_training)
                .find("--activation gelu_tanh --direction "
                      "fwd_training"),
            std::string::npos);
}

// pre = a b + bias = [[-1 1.5] [1 -0.5]] for a = [[1 2] [4 3]], b = [[1 -1] [-1 1]],
// bias = [0 0.5]; the activation and both gradients worked out by hand, on every host backend.
TEST(MatmulSemantics, ActivationsAndTheirGradientsWorkedOutByHand) {
  const auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  const std::vector<double> pre = {-1, 1.5, 1, -0.5};
  const std::vector<double> g = {1, 2, 3, 4};
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    for (const MatmulActivation act : {MatmulActivation::relu, MatmulActivation::gelu_tanh}) {
      SCOPED_TRACE(std::string(to_string(backend)) + " " + std::string(to_string(act)));
      Context context(backend);
      MatmulDesc d;
      d.m = d.n = d.k = 2;
      d.bias = true;
      d.activation = act;
      const Tensor a = host({2, 2}, {1, 2, 4, 3});
      const Tensor b = host({2, 2}, {1, -1, -1, 1});
      const Tensor bias = host({2}, {0, 0.5f});
      Tensor dst = nan_tensor({2, 2}, DType::f32, rows);
      SavedState state;
      matmul_fwd_training(context, d, a, b, bias, dst, state);
      // slope = act'(pre): relu's mask, or gelu's derivative by central differences.
      std::vector<double> slope(4);
      for (std::size_t i = 0; i < 4; ++i) {
        const double h = 1e-4;
        slope[i] = act == MatmulActivation::relu ? (pre[i] > 0 ? 1.0 : 0.0)
                                                 : (gelu(pre[i] + h) - gelu(pre[i] - h)) / (2 * h);
        const double want = act == MatmulActivation::relu ? std::max(pre[i], 0.0) : gelu(pre[i]);
        EXPECT_NEAR(dst.to_f32()[i], want, 1e-6) << i;
      }
      ASSERT_FALSE(state.empty());
      if (act == MatmulActivation::relu) {
        EXPECT_EQ(state.format(), "dnnx:matmul_relu_mask");
        ASSERT_EQ(state.bytes(), 4u);
        EXPECT_EQ(*static_cast<const std::uint32_t*>(state.data()), 6u);  // elements 1 and 2
      } else {
        EXPECT_EQ(state.format(), "dnnx:matmul_gelu_pre");
        ASSERT_EQ(state.bytes(), 16u);
        const auto* kept = static_cast<const float*>(state.data());
        for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(kept[i], static_cast<float>(pre[i])) << i;
      }
      // gm = g * slope; diff_a = gm b^T, diff_b = a^T gm, diff_bias = column sums of gm.
      std::vector<double> gm(4);
      for (std::size_t i = 0; i < 4; ++i) gm[i] = g[i] * slope[i];
      const Tensor diff_dst = host({2, 2}, {1, 2, 3, 4});
      Tensor diff_a = nan_tensor({2, 2}, DType::f32, rows);
      matmul_bwd_data(context, d, diff_dst, b, diff_a, state);
      const std::vector<double> want_a = {gm[0] - gm[1], -gm[0] + gm[1], gm[2] - gm[3],
                                          -gm[2] + gm[3]};
      Tensor diff_b = nan_tensor({2, 2}, DType::f32, rows);
      Tensor diff_bias = nan_tensor({2}, DType::f32, rows);
      matmul_bwd_weights(context, d, a, diff_dst, diff_b, diff_bias, state);
      const std::vector<double> want_b = {gm[0] + 4 * gm[2], gm[1] + 4 * gm[3],
                                          2 * gm[0] + 3 * gm[2], 2 * gm[1] + 3 * gm[3]};
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_NEAR(diff_a.to_f32()[i], want_a[i], 1e-4) << i;
        EXPECT_NEAR(diff_b.to_f32()[i], want_b[i], 1e-4) << i;
      }
      EXPECT_NEAR(diff_bias.to_f32()[0], gm[0] + gm[2], 1e-4);
      EXPECT_NEAR(diff_bias.to_f32()[1], gm[1] + gm[3], 1e-4);
    }
  }
}

// [[1 2] [3 4]] . [[5 6] [7 8]] = [[19 22] [43 50]], by hand.
TEST(MatmulSemantics, EveryDirectionOnAProductWorkedOutByHand) {
  Context context(BackendKind::reference);
  MatmulDesc d;
  d.m = d.n = d.k = 2;
  d.bias = true;
  d.alpha = 2;
  d.beta = 1;
  const Tensor a = host({2, 2}, {1, 2, 3, 4});
  const Tensor b = host({2, 2}, {5, 6, 7, 8});
  const Tensor bias = host({2}, {100, 200});
  Tensor dst = host({2, 2}, {1, 1, 1, 1});
  matmul_fwd(context, d, a, b, bias, dst);
  // 2 * AB + 1 * dst + bias
  EXPECT_EQ(dst.to_f32(), (std::vector<float>{139, 245, 187, 301}));

  // b stored transposed: b^T = [[5 7] [6 8]] gives the same product.
  MatmulDesc t = d;
  t.transpose_b = true, t.bias = false, t.alpha = 1, t.beta = 0;
  Tensor dst_t = nan_tensor({2, 2}, DType::f32, rows);
  matmul_fwd(context, t, a, host({2, 2}, {5, 7, 6, 8}), dst_t);
  EXPECT_EQ(dst_t.to_f32(), (std::vector<float>{19, 22, 43, 50}));

  // bwd_data: diff_a = alpha * G b^T + beta * diff_a, G = [[1 0] [0 1]].
  const Tensor g = host({2, 2}, {1, 0, 0, 1});
  Tensor diff_a = host({2, 2}, {10, 10, 10, 10});
  matmul_bwd_data(context, d, g, b, diff_a);
  EXPECT_EQ(diff_a.to_f32(), (std::vector<float>{20, 24, 22, 26}));  // 2 * [[5 7] [6 8]] + 10
  // transpose_a: diff_a is stored k x m, the transpose of that product.
  MatmulDesc ta = d;
  ta.transpose_a = true, ta.beta = 0;
  Tensor diff_at = nan_tensor({2, 2}, DType::f32, rows);
  matmul_bwd_data(context, ta, g, b, diff_at);
  EXPECT_EQ(diff_at.to_f32(), (std::vector<float>{10, 12, 14, 16}));

  // bwd_weights: diff_b = alpha * a^T G + beta * diff_b, diff_bias = column sums of G + beta.
  const Tensor g2 = host({2, 2}, {1, 2, 3, 4});
  Tensor diff_b = host({2, 2}, {0, 0, 0, 0});
  Tensor diff_bias = host({2}, {1, 1});
  matmul_bwd_weights(context, d, a, g2, diff_b, diff_bias);
  // a^T G = [[1 3] [2 4]] . [[1 2] [3 4]] = [[10 14] [14 20]]
  EXPECT_EQ(diff_b.to_f32(), (std::vector<float>{20, 28, 28, 40}));
  EXPECT_EQ(diff_bias.to_f32(), (std::vector<float>{5, 7}));
}

// A b shared by the batch gets the gradient summed over the batch.
TEST(MatmulSemantics, SharedBGradientSumsTheBatch) {
  Context context(BackendKind::reference);
  MatmulDesc d;
  d.batch = 2, d.m = 1, d.n = 1, d.k = 2, d.broadcast_b = true;
  const Tensor a = host({2, 1, 2}, {1, 2, 3, 4});
  const Tensor g = host({2, 1, 1}, {1, 10});
  Tensor diff_b = nan_tensor({2, 1}, DType::f32, rows);
  matmul_bwd_weights(context, d, a, g, diff_b);
  EXPECT_EQ(diff_b.to_f32(), (std::vector<float>{31, 42}));  // 1*[1 2] + 10*[3 4]
  Tensor dst = nan_tensor({2, 1, 1}, DType::f32, rows);
  matmul_fwd(context, d, a, host({2, 1}, {1, 1}), dst);
  EXPECT_EQ(dst.to_f32(), (std::vector<float>{3, 7}));
}

// An a shared by the batch (a matrix times a batch, as torch.matmul broadcasts it) serves every
// product and gets the gradient summed over the batch, on every host backend.
TEST(MatmulSemantics, SharedAGradientSumsTheBatch) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    SCOPED_TRACE(to_string(backend));
    Context context(backend);
    MatmulDesc d;
    d.batch = 2, d.m = 1, d.n = 1, d.k = 2, d.broadcast_a = true;
    const Tensor a = host({1, 2}, {1, 2});
    const Tensor b = host({2, 2, 1}, {3, 4, 5, 6});
    Tensor dst = nan_tensor({2, 1, 1}, DType::f32, rows);
    matmul_fwd(context, d, a, b, dst);
    EXPECT_EQ(dst.to_f32(), (std::vector<float>{11, 17}));  // [1 2].[3 4], [1 2].[5 6]
    const Tensor g = host({2, 1, 1}, {1, 10});
    Tensor diff_a = nan_tensor({1, 2}, DType::f32, rows);
    matmul_bwd_data(context, d, g, b, diff_a);
    EXPECT_EQ(diff_a.to_f32(), (std::vector<float>{53, 64}));  // 1*[3 4] + 10*[5 6]
    Tensor diff_b = nan_tensor({2, 2, 1}, DType::f32, rows);
    matmul_bwd_weights(context, d, a, g, diff_b);
    EXPECT_EQ(diff_b.to_f32(), (std::vector<float>{1, 2, 10, 20}));
  }
}

// With beta = 1 the output is read: exhaustive selection must not time the call on the caller's
// tensors (which would add the product once per timed run), so the result is one accumulation.
// With an activation the backward times on scratch tensors and a scratch state, and the training
// forward fills the caller's state once, from the candidate chosen.
TEST(MatmulSemantics, ExhaustiveSelectionAccumulatesOnce) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu})
    for (const MatmulActivation act : {MatmulActivation::none, MatmulActivation::gelu_tanh}) {
      if (!backend_available(backend)) continue;
      SCOPED_TRACE(std::string(to_string(backend)) + " " + std::string(to_string(act)));
      MatmulDesc d = MatmulDesc::linear(16, 24, 8);
      d.beta = 1;
      d.activation = act;
      const MatmulInputs in = matmul_inputs(d, "accumulate");
      Context context(backend);
      context.set_choice_cache(std::make_shared<ChoiceCache>());
      for (const OpDirection& direction : op_info(OpKind::matmul).directions)
        context.tune().policy(OpKind::matmul, direction.direction) = AlgoPolicy::exhaustive();
      Context reference(BackendKind::reference);
      for (const Direction direction :
           {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
        if (direction == Direction::fwd_training && act == MatmulActivation::none) continue;
        MatmulOutputs got = matmul_outputs(d, direction, in);
        MatmulOutputs want = matmul_outputs(d, direction, in);
        run_matmul(context, d, direction, in, got);
        run_matmul(reference, d, direction, in, want);
        EXPECT_TRUE(
            matmul_close(d, direction, got, want, in, matmul_context(d, direction, "chosen")));
      }
    }
}

// Every backend that runs here lists candidates for every direction, the first supported one
// being the heuristic's choice.
TEST(MatmulApi, EveryAvailableBackendListsEveryDirection) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
    std::string why;
    if (!backend_available(backend, &why)) continue;
    Context context(backend);
    for (const Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      const std::vector<AlgoInfo> algos = matmul_list(context, MatmulDesc::linear(32, 64, 16), direction);
      ASSERT_FALSE(algos.empty()) << to_string(backend);
      EXPECT_TRUE(algos.front().supported) << to_string(backend) << " " << algos.front().reason;
    }
    // With an activation every direction, the training forward included; without one the
    // training forward has nothing to keep.
    MatmulDesc relu = MatmulDesc::linear(32, 64, 16);
    relu.activation = MatmulActivation::relu;
    for (const OpDirection& direction : op_info(OpKind::matmul).directions) {
      const std::vector<AlgoInfo> algos = matmul_list(context, relu, direction.direction);
      ASSERT_FALSE(algos.empty()) << to_string(backend);
      EXPECT_TRUE(algos.front().supported) << to_string(backend) << " " << algos.front().reason;
    }
    for (const AlgoInfo& algo :
         matmul_list(context, MatmulDesc::linear(32, 64, 16), Direction::fwd_training)) {
      EXPECT_FALSE(algo.supported) << algo.id;
      EXPECT_NE(algo.reason.find("activation none"), std::string::npos) << algo.reason;
    }
  }
}

// The op is selected under its own policies, spelled in the environment DNNX_ALGO_MATMUL_<DIR>.
TEST(MatmulApi, PoliciesAreTheOpTablesLine) {
  const OpInfo& info = op_info(OpKind::matmul);
  EXPECT_EQ(info.name, "matmul");
  EXPECT_EQ(parse_op_kind("linear"), OpKind::matmul);
  EXPECT_EQ(parse_op_kind("gemm"), OpKind::matmul);
  ASSERT_EQ(info.directions.size(), 4u);
  EXPECT_EQ(info.parse_direction("fwd_training"), Direction::fwd_training);
  const auto names = info.policy_env_names(Direction::bwd_weights);
  EXPECT_NE(std::find(names.begin(), names.end(), "DNNX_ALGO_MATMUL_BWD_WEIGHTS"), names.end());
}

}  // namespace
}  // namespace dnnx::test
