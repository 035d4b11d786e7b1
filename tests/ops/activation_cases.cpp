#include "ops/activation_cases.hpp"

#include <dnnx/context.hpp>
#include <dnnx/error.hpp>

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
  Dims dims;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> list = {
      {"1d17", Dims{17}},                    // rank 1: a plain vector
      {"2d3x5", Dims{3, 5}},                 // rank 2: N x C
      {"3d2x3x7", Dims{2, 3, 7}},            // 1-D spatial, odd width
      {"4d1x3x5x7", Dims{1, 3, 5, 7}},       // batch 1, odd sizes
      {"4d2x16x9x11", Dims{2, 16, 9, 11}},   // enough elements for vector loops and threads
      {"5d2x3x2x3x4", Dims{2, 3, 2, 3, 4}},  // 3-D spatial
  };
  return list;
}

struct Variant {
  const char* name;
  ActivationKind kind;
  double alpha = 1.0;
  double ceiling = 6.0;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> list = {
      {"identity", ActivationKind::identity},
      {"relu", ActivationKind::relu},
      {"clipped_relu_c0p5", ActivationKind::clipped_relu, 1.0, 0.5},
      {"clipped_relu_c6", ActivationKind::clipped_relu, 1.0, 6.0},
      {"tanh", ActivationKind::tanh},
      {"sigmoid", ActivationKind::sigmoid},
      {"elu", ActivationKind::elu, 1.0},
      {"elu_a0p5", ActivationKind::elu, 0.5},
      {"elu_aneg0p5", ActivationKind::elu, -0.5},  // backward from dst is impossible
      {"swish", ActivationKind::swish},
  };
  return list;
}

}  // namespace

std::vector<ActivationCase> activation_cases() {
  std::vector<ActivationCase> cases;
  std::size_t index = 0;
  for (const Variant& variant : variants()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        const Shape& shape = shapes()[index++ % shapes().size()];
        ActivationDesc desc;
        desc.kind = variant.kind;
        desc.alpha = variant.alpha;
        desc.ceiling = variant.ceiling;
        desc.dims = shape.dims;
        desc.dtype = dtype;
        desc.layout = layout;
        desc.validate();
        cases.push_back({std::string(variant.name) + "_" + shape.name + "_" +
                             std::string(to_string(dtype)) + "_" + std::string(to_string(layout)),
                         desc});
      }
    }
  }
  return cases;
}

Tensor activation_src(const ActivationDesc& desc, std::uint64_t seed) {
  std::vector<float> values =
      random_uniform(static_cast<std::size_t>(desc.numel()), seed, -3.0f, 3.0f);
  const auto ceiling = static_cast<float>(desc.ceiling);
  for (std::size_t i = 0; i < values.size(); ++i) {
    // The kinks, where each kind's derivative is a convention (PyTorch's).
    if (i % 13 == 3) values[i] = 0.0f;
    if (i % 13 == 9) values[i] = -0.0f;
    if (desc.kind == ActivationKind::clipped_relu) {
      if (i % 13 == 5) values[i] = ceiling;
      if (i % 13 == 6) values[i] = ceiling * (1.0f + 0x1p-6f);
      if (i % 13 == 7) values[i] = ceiling * (1.0f - 0x1p-6f);
      if (i % 13 == 11) values[i] = ceiling * 0.5f;
    }
  }
  return tensor_from(desc.dims, desc.dtype, desc.layout, values);
}

Tensor reference_activation_fwd(const ActivationDesc& desc, const Tensor& src) {
  Context reference(BackendKind::reference);
  Tensor dst = nan_tensor(desc.dims, desc.dtype, desc.layout);
  activation_fwd(reference, desc, src, dst);
  return dst;
}

Tensor reference_activation_bwd(const ActivationDesc& desc, const Tensor& src, const Tensor& dst,
                                const Tensor& diff_dst) {
  Context reference(BackendKind::reference);
  Tensor diff_src = nan_tensor(desc.dims, desc.dtype, desc.layout);
  activation_bwd(reference, desc, desc.saved != ActivationSaved::dst ? &src : nullptr,
                 desc.saved != ActivationSaved::src ? &dst : nullptr, diff_dst, diff_src);
  return diff_src;
}

// Note [activation tolerances]
// Candidates compute in f32 and round once to the storage dtype; the reference computes in f64
// and rounds once. Forward: oneDNN's vectorised exp/tanh approximations and the cancellation in
// exp(x) - 1 (elu near 0, computed as expm1 by the reference) cost a few f32 ulps of the output
// and, near 0, a few ulps of 1 (times alpha); then the rounding to f16/bf16 differs by at most an
// ulp of the dtype: rel = 16 ulps (f32) or 2 ulps (f16, bf16) of the output, abs = 4 f32 ulps of
// 1, times m = max(1, |alpha|). Backward: a candidate may take the derivative from dst while the
// reference takes it from src (desc.saved keeps both): 1 - y^2, y (1 - y) and y + alpha then
// inherit dst's rounding, up to an ulp of 1 in the dtype, times |diff_dst|: abs = 4 units of
// roundoff of the dtype (f32: 16, for the approximations) times m |diff_dst|.
::testing::AssertionResult activation_close(const ActivationDesc& desc, Direction direction,
                                            const Tensor& actual, const Tensor& expected,
                                            const Tensor* diff_dst, std::string_view context,
                                            double* worst) {
  const std::vector<float> got = actual.to_f32();
  const std::vector<float> want = expected.to_f32();
  const double u = unit_roundoff(desc.dtype);
  const double rel = desc.dtype == DType::f32 ? 32 * u : 4 * u;
  const double m = desc.kind == ActivationKind::elu ? std::max(1.0, std::fabs(desc.alpha)) : 1.0;
  double abs = 4 * std::ldexp(1.0, -24) * m;
  std::vector<float> weight(got.size(), 1.0f);
  if (direction != Direction::fwd) {
    abs = (desc.dtype == DType::f32 ? 16 : 4) * u * m;
    weight = diff_dst->to_f32();
    for (float& w : weight) w = std::fabs(w);
  }
  // close_within_scale's bound is rel * scale + abs0: fold the abs term into the scale.
  std::vector<float> scale(got.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    scale[i] = static_cast<float>(std::fabs(want[i]) + abs / rel * weight[i]);
  // abs0: f16 outputs may round into its subnormals, spaced 2^-24.
  const Tolerance tolerance{rel, desc.dtype == DType::f16 ? std::ldexp(1.0, -24) : 0.0};
  ::testing::AssertionResult finite = all_finite(got, actual.dims(), "output", context);
  if (!finite) return finite;
  return close_within_scale(got, want, scale, actual.dims(), tolerance, "output", context, worst);
}

std::string activation_context(const ActivationDesc& desc, Direction direction,
                               std::string_view candidate) {
  std::ostringstream out;
  out << "act " << to_string(direction) << " [" << candidate << "] " << desc
      << "\n  repro: " << desc.repro(direction);
  return out.str();
}

Tensor clone(const Tensor& tensor) {
  Tensor copy = Tensor::empty(tensor.dims(), tensor.dtype(), tensor.layout().value());
  copy.copy_from_f32(tensor.to_f32());
  return copy;
}

}  // namespace dnnx::test
