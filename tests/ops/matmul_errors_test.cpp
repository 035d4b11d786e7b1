// Bad inputs to matmul: every case must raise dnnx::Error of the right kind whose message
// (without the context decorations) names the argument and the value received.

#include <dnnx/dnnx.hpp>

#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// A linear layer: 4 rows, 6 inputs, 5 outputs, with bias.
MatmulDesc base_desc() { return MatmulDesc::linear(4, 6, 5); }

std::function<void()> list_with(std::function<void(MatmulDesc&)> edit) {
  return list_after(base_desc(), std::move(edit), dnnx::matmul_list);
}

// The tensors of every direction for base_desc(), which `edit` may change before the call.
struct Tensors {
  Tensor a, b, bias, dst, diff_dst, diff_a, diff_b, diff_bias;
};

Tensors tensors_of(const MatmulDesc& d) {
  const Layout rows = Layout::channels_first;
  return {random_tensor(d.a_dims(), d.dtype, rows, 1),
          random_tensor(d.b_dims(), d.dtype, rows, 2),
          random_tensor(d.bias_dims(), d.dtype, rows, 3),
          random_tensor(d.dst_dims(), d.dtype, rows, 4),
          random_tensor(d.dst_dims(), d.dtype, rows, 5),
          random_tensor(d.a_dims(), d.dtype, rows, 6),
          random_tensor(d.b_dims(), d.dtype, rows, 7),
          random_tensor(d.bias_dims(), d.dtype, rows, 8)};
}

std::function<void()> call_with(Direction direction,
                                std::function<void(MatmulDesc&, Tensors&)> edit) {
  return [direction, edit] {
    MatmulDesc desc = base_desc();
    Tensors t = tensors_of(desc);
    edit(desc, t);
    Context context = reference_context();
    switch (direction) {
      case Direction::fwd: dnnx::matmul_fwd(context, desc, t.a, t.b, t.bias, t.dst); break;
      case Direction::bwd_data: dnnx::matmul_bwd_data(context, desc, t.diff_dst, t.b, t.diff_a); break;
      default: dnnx::matmul_bwd_weights(context, desc, t.a, t.diff_dst, t.diff_b, t.diff_bias);
    }
  };
}

// A training forward of `trained` fills a state, then a backward of `desc` (edited base_desc()
// with `edit`) reads `state_for_backward(state)`: the state's checks.
std::function<void()> backward_with_state(
    Direction direction,
    std::function<void(MatmulDesc& trained, MatmulDesc& desc, bool& pass_state)> edit) {
  return [direction, edit] {
    MatmulDesc trained = base_desc();
    trained.activation = MatmulActivation::relu;
    MatmulDesc desc = trained;
    bool pass_state = true;
    edit(trained, desc, pass_state);
    Context context = reference_context();
    SavedState state;
    Tensors t = tensors_of(trained);
    if (trained.activation != MatmulActivation::none)
      dnnx::matmul_fwd_training(context, trained, t.a, t.b, t.bias, t.dst, state);
    Tensors u = tensors_of(desc);
    Tensor no_bias;
    Tensor& diff_bias = desc.bias ? u.diff_bias : no_bias;
    if (direction == Direction::bwd_data) {
      if (pass_state) {
        dnnx::matmul_bwd_data(context, desc, u.diff_dst, u.b, u.diff_a, state);
      } else {
        dnnx::matmul_bwd_data(context, desc, u.diff_dst, u.b, u.diff_a);
      }
    } else if (pass_state) {
      dnnx::matmul_bwd_weights(context, desc, u.a, u.diff_dst, u.diff_b, diff_bias, state);
    } else {
      dnnx::matmul_bwd_weights(context, desc, u.a, u.diff_dst, u.diff_b, diff_bias);
    }
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  const Direction fwd = Direction::fwd, bwd_data = Direction::bwd_data,
                  bwd_weights = Direction::bwd_weights;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);

  // --- the desc ---
  add("m_zero", list_with([](MatmulDesc& d) { d.m = 0; }), K::InvalidArgument,
      {"m must be in [1, 2^31], got 0"});
  add("k_negative", list_with([](MatmulDesc& d) { d.k = -3; }), K::InvalidArgument,
      {"k must be", "got -3"});
  add("batch_zero", list_with([](MatmulDesc& d) { d.batch = 0; }), K::InvalidArgument,
      {"batch must be", "got 0"});
  add("n_too_large", list_with([](MatmulDesc& d) { d.n = std::int64_t{1} << 40; }),
      K::InvalidArgument, {"n must be in [1, 2^31]"});
  add("too_many_elements", list_with([](MatmulDesc& d) {
        d.batch = std::int64_t{1} << 31, d.m = std::int64_t{1} << 31;
      }),
      K::InvalidArgument, {"a dims", "2^60"});
  add("broadcast_b_batch_1", list_with([](MatmulDesc& d) { d.broadcast_b = true; }),
      K::InvalidArgument, {"broadcast_b", "batch is 1"});
  add("broadcast_a_batch_1", list_with([](MatmulDesc& d) { d.broadcast_a = true; }),
      K::InvalidArgument, {"broadcast_a", "batch is 1"});
  add("broadcast_a_and_b",
      list_with([](MatmulDesc& d) { d.batch = 2, d.broadcast_a = true, d.broadcast_b = true; }),
      K::InvalidArgument, {"broadcast_a and broadcast_b together"});
  add("dtype_int", list_with([](MatmulDesc& d) { d.dtype = DType::i32; }), K::InvalidArgument,
      {"dtype must be f32, f16 or bf16, got i32"});
  add("alpha_nan", list_with([](MatmulDesc& d) { d.alpha = std::numeric_limits<float>::quiet_NaN(); }),
      K::InvalidArgument, {"alpha must be finite, got nan"});
  add("beta_inf", list_with([](MatmulDesc& d) { d.beta = std::numeric_limits<float>::infinity(); }),
      K::InvalidArgument, {"beta must be finite, got inf"});
  add("direction_fwd_training_without_activation",
      [] {
        Context context = reference_context();
        dnnx::matmul_select(context, base_desc(), Direction::fwd_training);
      },
      K::Unsupported, {"fwd_training", "activation none"});

  // --- the tensors ---
  add("a_dims", call_with(fwd, [](MatmulDesc&, Tensors& t) {
        t.a = random_tensor(Dims{6, 4}, DType::f32, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"a dims 6x4", "4x6"});
  add("b_not_transposed_dims", call_with(fwd, [](MatmulDesc&, Tensors& t) {
        t.b = random_tensor(Dims{6, 5}, DType::f32, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"b dims 6x5", "5x6"});
  add("dst_dtype", call_with(fwd, [](MatmulDesc&, Tensors& t) {
        t.dst = random_tensor(Dims{4, 5}, DType::f16, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"dst", "f16", "f32"});
  add("bias_missing", call_with(fwd, [](MatmulDesc&, Tensors& t) { t.bias = Tensor(); }),
      K::InvalidArgument, {"bias is missing", "desc has bias set"});
  add("bias_unexpected", call_with(fwd, [](MatmulDesc& d, Tensors&) { d.bias = false; }),
      K::InvalidArgument, {"bias was given", "no bias"});
  add("bias_dims", call_with(fwd, [](MatmulDesc&, Tensors& t) {
        t.bias = random_tensor(Dims{4}, DType::f32, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"bias dims 4", "expects 5"});
  add("dst_overlaps_a", call_with(fwd, [](MatmulDesc& d, Tensors& t) {
        d.m = 6, d.k = 6, d.n = 6;
        t.a = random_tensor(Dims{6, 6}, DType::f32, Layout::channels_first, 1);
        t.b = random_tensor(Dims{6, 6}, DType::f32, Layout::channels_first, 2);
        t.bias = random_tensor(Dims{6}, DType::f32, Layout::channels_first, 3);
        t.dst = t.a;
      }),
      K::InvalidArgument, {"dst overlaps a"});
  add("dst_transposed_view", call_with(fwd, [](MatmulDesc&, Tensors& t) {
        t.dst = Tensor::view(t.dst.data(), Dims{4, 5}, DType::f32, Dims{1, 4});
      }),
      K::InvalidArgument, {"dst"});
  add("diff_a_dims", call_with(bwd_data, [](MatmulDesc&, Tensors& t) {
        t.diff_a = random_tensor(Dims{4, 5}, DType::f32, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"diff_a dims 4x5", "4x6"});
  add("diff_a_overlaps_diff_dst", call_with(bwd_data, [](MatmulDesc& d, Tensors& t) {
        d.n = 6;
        t.b = random_tensor(Dims{6, 6}, DType::f32, Layout::channels_first, 2);
        t.diff_dst = random_tensor(Dims{4, 6}, DType::f32, Layout::channels_first, 2);
        t.diff_a = t.diff_dst;
      }),
      K::InvalidArgument, {"diff_a overlaps diff_dst"});
  add("diff_bias_missing", call_with(bwd_weights, [](MatmulDesc&, Tensors& t) {
        t.diff_bias = Tensor();
      }),
      K::InvalidArgument, {"diff_bias is missing"});
  add("diff_bias_overlaps_diff_b", call_with(bwd_weights, [](MatmulDesc&, Tensors& t) {
        t.diff_bias = Tensor::view(t.diff_b.data(), Dims{5}, DType::f32);
      }),
      K::InvalidArgument, {"diff_bias overlaps diff_b"});
  add("diff_b_dims", call_with(bwd_weights, [](MatmulDesc&, Tensors& t) {
        t.diff_b = random_tensor(Dims{6, 5}, DType::f32, Layout::channels_first, 1);
      }),
      K::InvalidArgument, {"diff_b dims 6x5", "5x6"});
  // --- the activation and its state ---
  add("activation_out_of_range",
      list_with([](MatmulDesc& d) { d.activation = static_cast<MatmulActivation>(9); }),
      K::InvalidArgument, {"activation must be none, relu or gelu_tanh", "got value 9"});
  add("fwd_training_without_activation",
      [] {
        const MatmulDesc desc = base_desc();
        Tensors t = tensors_of(desc);
        Context context = reference_context();
        SavedState state;
        dnnx::matmul_fwd_training(context, desc, t.a, t.b, t.bias, t.dst, state);
      },
      K::InvalidArgument, {"fwd_training", "activation none"});
  add("bwd_data_activation_without_state",
      backward_with_state(bwd_data, [](MatmulDesc&, MatmulDesc&, bool& pass) { pass = false; }),
      K::InvalidArgument, {"state is missing", "activation relu"});
  add("bwd_weights_state_without_activation",
      backward_with_state(bwd_weights, [](MatmulDesc&, MatmulDesc& d,
                                          bool&) { d.activation = MatmulActivation::none; }),
      K::InvalidArgument, {"state was given", "activation none"});
  add("bwd_weights_state_never_filled",
      backward_with_state(bwd_weights, [](MatmulDesc& trained, MatmulDesc&,
                                          bool&) { trained.activation = MatmulActivation::none; }),
      K::InvalidArgument, {"saved_state is empty"});
  add("bwd_data_state_of_another_activation",
      backward_with_state(bwd_data, [](MatmulDesc&, MatmulDesc& d,
                                       bool&) { d.activation = MatmulActivation::gelu_tanh; }),
      K::InvalidArgument, {"another matmul", "act=relu"});
  add("bwd_data_state_of_another_alpha",
      backward_with_state(bwd_data, [](MatmulDesc&, MatmulDesc& d, bool&) { d.alpha = 2; }),
      K::InvalidArgument, {"alpha=1"});
  return cases;
}

// beta is left out of the state's record: a forward with beta 0 serves a backward that
// accumulates (beta 1), the way a layer accumulates gradients.
TEST(MatmulErrors, StateServesABackwardOfAnotherBeta) {
  EXPECT_NO_THROW(backward_with_state(Direction::bwd_weights,
                                      [](MatmulDesc&, MatmulDesc& d, bool&) { d.beta = 1; })());
}

class MatmulErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(MatmulErrors, RaisesWithKindAndMessage) { expect_raises(GetParam(), "matmul"); }

INSTANTIATE_TEST_SUITE_P(Table, MatmulErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(MatmulErrors, TableHasAtLeastFifteenCases) { EXPECT_GE(bad_cases().size(), 22u); }

// An unknown id names the valid ones; the inner product's reason reaches a fixed policy.
TEST(MatmulErrors, FixedIdsAreCheckedAgainstTheListing) {
  std::string why;
  if (!dnnx::backend_available(BackendKind::cpu, &why)) GTEST_SKIP() << why;
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
  MatmulDesc desc = base_desc();
  desc.transpose_b = false;  // not a linear layer: the inner product cannot run it
  context.tune().policy(dnnx::OpKind::matmul, Direction::fwd) =
      dnnx::AlgoPolicy::fixed("onednn:unavailable:inner_product");
  expect_error(ErrorKind::Unsupported, {"an inner product is a linear layer"},
               [&] { dnnx::matmul_select(context, desc, Direction::fwd); });
  context.tune().policy(dnnx::OpKind::matmul, Direction::fwd) = dnnx::AlgoPolicy::fixed("nope");
  expect_error(ErrorKind::InvalidArgument, {"'nope'", "valid ids"},
               [&] { dnnx::matmul_select(context, desc, Direction::fwd); });
}

}  // namespace
}  // namespace dnnx::test
