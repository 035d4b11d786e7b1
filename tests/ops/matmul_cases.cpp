#include "ops/matmul_cases.hpp"

#include <dnnx/context.hpp>

#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dnnx::test {
namespace {

struct Shape {
  const char* name;
  std::int64_t batch, m, n, k;
  bool transpose_a, transpose_b, broadcast_b, bias;
  float alpha, beta;
  MatmulActivation activation = MatmulActivation::none;
  bool broadcast_a = false;
};

constexpr MatmulActivation none = MatmulActivation::none;

constexpr MatmulActivation relu = MatmulActivation::relu;
constexpr MatmulActivation gelu = MatmulActivation::gelu_tanh;

// Sizes 1, odd sizes, the linear layer (b transposed, bias), each transpose, batched with and
// without a shared b (a shared a last); scales covering beta 0 (not read), 1 (accumulation) and
// neither.
constexpr Shape shapes[] = {
    {"linear_1x1x1", 1, 1, 1, 1, false, true, false, true, 1.0f, 0.0f},
    {"linear_13x7x29", 1, 13, 7, 29, false, true, false, true, 1.0f, 0.0f},
    {"linear_64x96x80_acc", 1, 64, 96, 80, false, true, false, true, 1.0f, 1.0f},
    {"linear_8x10x3_nobias", 1, 8, 10, 3, false, true, false, false, 1.0f, 0.0f},
    {"nn_7x5x13", 1, 7, 5, 13, false, false, false, false, 1.0f, 0.0f},
    {"tn_7x5x13_scaled", 1, 7, 5, 13, true, false, false, false, 0.5f, -0.25f},
    {"tt_5x17x9_bias_scaled", 1, 5, 17, 9, true, true, false, true, -2.0f, 0.5f},
    {"batch3_17x9x33", 3, 17, 9, 33, false, false, false, false, 1.0f, 0.0f},
    {"batch2_tn_6x11x4", 2, 6, 11, 4, true, false, false, false, 1.0f, 1.0f},
    {"batch4_shared_nt_6x10x8_bias", 4, 6, 10, 8, false, true, true, true, 1.0f, 0.0f},
    {"batch3_shared_tn_5x7x9", 3, 5, 7, 9, true, false, true, false, 0.75f, 0.0f},
    {"batch2_shared_tt_3x4x5_acc", 2, 3, 4, 5, true, true, true, true, 1.0f, 1.0f},
    // Epilogues: the linear layer (n a multiple of 8 or not), scaled, accumulating (beta 1 in
    // the forward adds dst before the activation, in the backward accumulates the gradients),
    // batched with a shared b.
    {"linear_13x7x29_relu", 1, 13, 7, 29, false, true, false, true, 1.0f, 0.0f, relu},
    {"linear_16x24x40_gelu", 1, 16, 24, 40, false, true, false, true, 1.0f, 0.0f, gelu},
    {"nn_9x11x6_relu_scaled", 1, 9, 11, 6, false, false, false, false, 0.5f, 0.0f, relu},
    {"tn_6x8x5_gelu_acc", 1, 6, 8, 5, true, false, false, true, 1.0f, 1.0f, gelu},
    {"batch3_shared_nt_5x16x7_gelu", 3, 5, 16, 7, false, true, true, true, 1.0f, 0.0f, gelu},
    {"batch2_tt_4x9x3_relu_acc", 2, 4, 9, 3, true, true, false, true, -1.0f, 1.0f, relu},
    // Rows enough for the GPU's pass that also sums the bias gradient to split them into chunks
    // (Note [activation derivative with the bias gradient]): 16-byte groups (n % 8 == 0) and not.
    {"linear_300x40x24_gelu_acc", 1, 300, 40, 24, false, true, false, true, 1.0f, 1.0f, gelu},
    {"linear_257x13x5_relu", 1, 257, 13, 5, false, true, false, true, 1.0f, 0.0f, relu},
    // A shared by the batch (torch.matmul of a matrix and a batch): each transpose of a and b,
    // accumulating, with a bias, through an activation; its gradient sums over the batch.
    {"batch3_shareda_nn_6x5x7", 3, 6, 5, 7, false, false, false, false, 1.0f, 0.0f, none, true},
    {"batch4_shareda_tn_5x9x4_acc", 4, 5, 9, 4, true, false, false, false, 0.5f, 1.0f, none, true},
    {"batch2_shareda_nt_7x6x3_bias", 2, 7, 6, 3, false, true, false, true, 1.0f, 0.0f, none, true},
    {"batch3_shareda_tt_4x16x6_gelu", 3, 4, 16, 6, true, true, false, true, 1.0f, 0.0f, gelu, true},
};

MatmulDesc desc_of(const Shape& s, DType dtype) {
  MatmulDesc d;
  d.batch = s.batch, d.m = s.m, d.n = s.n, d.k = s.k;
  d.transpose_a = s.transpose_a, d.transpose_b = s.transpose_b, d.broadcast_b = s.broadcast_b;
  d.broadcast_a = s.broadcast_a;
  d.bias = s.bias, d.alpha = s.alpha, d.beta = s.beta, d.dtype = dtype;
  d.activation = s.activation;
  d.validate();
  return d;
}

const Layout rows = Layout::channels_first;

Tensor copy_of(const Tensor& tensor) {
  Tensor copy = Tensor::empty(tensor.dims(), tensor.dtype(), rows);
  copy.copy_from_f32(tensor.to_f32());
  return copy;
}

// A random tensor, or NaN when beta = 0 (an output that must not be read).
Tensor initial(const MatmulDesc& desc, const Dims& dims, std::string_view seed) {
  return desc.beta == 0 ? nan_tensor(dims, desc.dtype, rows)
                        : random_tensor(dims, desc.dtype, rows, seed_from(seed));
}

}  // namespace

std::vector<MatmulCase> matmul_cases() {
  std::vector<MatmulCase> cases;
  for (const Shape& shape : shapes) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      cases.push_back({std::string(shape.name) + "_" + std::string(to_string(dtype)),
                       desc_of(shape, dtype)});
    }
  }
  return cases;
}

MatmulInputs matmul_inputs(const MatmulDesc& desc, std::string_view seed) {
  const std::string s(seed);
  MatmulInputs in;
  in.a = random_tensor(desc.a_dims(), desc.dtype, rows, seed_from(s + "a"));
  in.b = random_tensor(desc.b_dims(), desc.dtype, rows, seed_from(s + "b"));
  if (desc.bias) in.bias = random_tensor(desc.bias_dims(), desc.dtype, rows, seed_from(s + "bias"));
  in.diff_dst = random_tensor(desc.dst_dims(), desc.dtype, rows, seed_from(s + "dy"));
  in.dst0 = initial(desc, desc.dst_dims(), s + "dst0");
  in.diff_a0 = initial(desc, desc.a_dims(), s + "da0");
  in.diff_b0 = initial(desc, desc.b_dims(), s + "db0");
  if (desc.bias) in.diff_bias0 = initial(desc, desc.bias_dims(), s + "dbias0");
  if (desc.activation != MatmulActivation::none) {
    Context reference(BackendKind::reference);
    Tensor dst = copy_of(in.dst0);
    matmul_fwd_training(reference, desc, in.a, in.b, in.bias, dst, in.state);
  }
  return in;
}

MatmulOutputs matmul_outputs(const MatmulDesc& desc, Direction direction,
                             const MatmulInputs& inputs) {
  MatmulOutputs out;
  switch (direction) {
    case Direction::fwd:
    case Direction::fwd_training: out.tensors.emplace_back("dst", copy_of(inputs.dst0)); break;
    case Direction::bwd_data: out.tensors.emplace_back("diff_a", copy_of(inputs.diff_a0)); break;
    case Direction::bwd_weights:
      out.tensors.emplace_back("diff_b", copy_of(inputs.diff_b0));
      if (desc.bias) out.tensors.emplace_back("diff_bias", copy_of(inputs.diff_bias0));
      break;
  }
  return out;
}

std::shared_ptr<const Choice> run_matmul(Context& context, const MatmulDesc& desc,
                                         Direction direction, const MatmulInputs& inputs,
                                         MatmulOutputs& outputs) {
  const bool activation = desc.activation != MatmulActivation::none;
  switch (direction) {
    case Direction::fwd:
      return matmul_fwd(context, desc, inputs.a, inputs.b, inputs.bias, outputs.tensors[0].second);
    case Direction::fwd_training: {
      SavedState state;
      auto choice = matmul_fwd_training(context, desc, inputs.a, inputs.b, inputs.bias,
                                        outputs.tensors[0].second, state);
      if (desc.activation == MatmulActivation::gelu_tanh) {
        Tensor pre = Tensor::view(state.data(), desc.dst_dims(), desc.dtype, rows, state.device());
        outputs.tensors.emplace_back("pre", copy_of(pre));
      }
      return choice;
    }
    case Direction::bwd_data:
      if (activation) {
        return matmul_bwd_data(context, desc, inputs.diff_dst, inputs.b, outputs.tensors[0].second,
                               inputs.state);
      }
      return matmul_bwd_data(context, desc, inputs.diff_dst, inputs.b, outputs.tensors[0].second);
    case Direction::bwd_weights: {
      Tensor no_bias;
      Tensor& diff_bias = desc.bias ? outputs.tensors[1].second : no_bias;
      if (activation) {
        return matmul_bwd_weights(context, desc, inputs.a, inputs.diff_dst,
                                  outputs.tensors[0].second, diff_bias, inputs.state);
      }
      return matmul_bwd_weights(context, desc, inputs.a, inputs.diff_dst,
                                outputs.tensors[0].second, diff_bias);
    }
  }
  return nullptr;
}

// Note [matmul tolerances]
// The reference sums in f64 and rounds once. A candidate sums k products (exact in f32 for f16
// and bf16 inputs, within one f32 rounding for f32 ones) in f32, in any order, then rounds once
// to the dtype: per element at most (k + 2) u32 times the sum of the magnitudes of its terms
// (|alpha| sum |a||b|, plus |beta| |old| and |bias|), plus one rounding of the dtype (u). That
// magnitude is itself computed by the reference on |inputs|; the bias gradient is the same with
// the rows summed as its k. The factor 2 covers the post-op order (scale, bias, sum) and the
// f32-compute candidates' conversions, which are exact on the way in. An activation's slope is at
// most 1.13 (gelu_tanh; relu 1) and a candidate may round pre (forward) or diff_dst * act'(pre)
// (backward) to the dtype before the rest: the bound of the same desc without the activation,
// magnitudes from the reference on |inputs|, times 3.
::testing::AssertionResult matmul_close(const MatmulDesc& desc, Direction direction,
                                        const MatmulOutputs& actual,
                                        const MatmulOutputs& expected, const MatmulInputs& inputs,
                                        std::string_view context, double* worst) {
  const double u32 = std::ldexp(1.0, -24);
  const double u = unit_roundoff(desc.dtype);
  MatmulDesc magnitude = desc;
  magnitude.alpha = std::fabs(desc.alpha);
  magnitude.beta = std::fabs(desc.beta);
  magnitude.dtype = DType::f32;
  magnitude.activation = MatmulActivation::none;
  const Direction scale_direction =
      direction == Direction::fwd_training ? Direction::fwd : direction;
  const auto abs = [](const Tensor& t) { return abs_tensor(t, DType::f32, rows); };
  MatmulInputs abs_in;
  abs_in.a = abs(inputs.a);
  abs_in.b = abs(inputs.b);
  abs_in.diff_dst = abs(inputs.diff_dst);
  if (desc.bias) abs_in.bias = abs(inputs.bias);
  // With beta = 0 the old contents (NaN) are not part of the result.
  const auto old = [&](const Tensor& t) {
    return desc.beta == 0 ? Tensor::zeros(t.dims(), DType::f32, rows) : abs(t);
  };
  abs_in.dst0 = old(inputs.dst0);
  abs_in.diff_a0 = old(inputs.diff_a0);
  abs_in.diff_b0 = old(inputs.diff_b0);
  if (desc.bias) abs_in.diff_bias0 = old(inputs.diff_bias0);
  MatmulOutputs scale = matmul_outputs(magnitude, scale_direction, abs_in);
  Context reference(BackendKind::reference);
  run_matmul(reference, magnitude, scale_direction, abs_in, scale);

  const std::int64_t rows_summed = desc.batch * desc.m;
  for (std::size_t i = 0; i < actual.tensors.size(); ++i) {
    const auto& [name, tensor] = actual.tensors[i];
    const std::vector<float> got = tensor.to_f32();
    ::testing::AssertionResult finite = all_finite(got, tensor.dims(), name, context);
    if (!finite) return finite;
    std::int64_t terms = desc.k;
    if (direction == Direction::bwd_data) terms = desc.broadcast_a ? desc.batch * desc.n : desc.n;
    if (direction == Direction::bwd_weights)
      terms = desc.broadcast_b || name == "diff_bias" ? rows_summed : desc.m;
    const double rel =
        (desc.activation == MatmulActivation::none ? 2.0 : 6.0) *
        (static_cast<double>(terms + 2) * u32 + (desc.dtype == DType::f32 ? 0.0 : u));
    // abs: f16 results may round into its subnormals, spaced 2^-24.
    const Tolerance tolerance{rel, desc.dtype == DType::f16 ? std::ldexp(1.0, -24) : 0.0};
    // "pre" (fwd_training with gelu) has dst's bound.
    const Tensor& bound = scale.tensors[std::min(i, scale.tensors.size() - 1)].second;
    ::testing::AssertionResult ok =
        close_within_scale(got, expected.tensors[i].second.to_f32(), bound.to_f32(), tensor.dims(),
                           tolerance, name, context, worst);
    if (!ok) return ok;
  }
  return ::testing::AssertionSuccess();
}

std::string matmul_context(const MatmulDesc& desc, Direction direction,
                           std::string_view candidate) {
  std::ostringstream out;
  out << "matmul " << to_string(direction) << " [" << candidate << "] " << desc
      << "\n  repro: " << desc.repro(direction);
  return out.str();
}

}  // namespace dnnx::test
