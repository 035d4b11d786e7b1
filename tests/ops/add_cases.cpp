#include "ops/add_cases.hpp"

#include <dnnx/context.hpp>

#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"

#include <cmath>
#include <sstream>

namespace dnnx::test {
namespace {

struct Pattern {
  const char* name;
  Dims src, dst;
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> list = {
      {"full4d", Dims{2, 3, 5, 7}, Dims{2, 3, 5, 7}},
      {"bias4d", Dims{1, 3, 1, 1}, Dims{2, 3, 5, 7}},
      {"bias4d_batch1", Dims{1, 6, 1, 1}, Dims{1, 6, 4, 3}},
      {"bias4d_large", Dims{1, 16, 1, 1}, Dims{2, 16, 9, 11}},
      {"chw4d", Dims{1, 3, 5, 7}, Dims{2, 3, 5, 7}},
      {"hw4d", Dims{1, 1, 5, 7}, Dims{2, 3, 5, 7}},
      {"scalar4d", Dims{1, 1, 1, 1}, Dims{2, 3, 5, 7}},
      {"batch4d", Dims{2, 1, 1, 1}, Dims{2, 3, 5, 7}},
      {"mixed4d", Dims{2, 1, 1, 7}, Dims{2, 3, 5, 7}},
      {"scalar1d", Dims{1}, Dims{17}},
      {"rows2d", Dims{5, 1}, Dims{5, 8}},
      {"cols2d", Dims{1, 8}, Dims{5, 8}},
      {"bias3d", Dims{1, 4, 1}, Dims{3, 4, 9}},
      {"bias5d", Dims{1, 3, 1, 1, 1}, Dims{2, 3, 2, 3, 4}},
      {"mixed5d", Dims{1, 3, 1, 1, 4}, Dims{2, 3, 2, 3, 4}},
  };
  return list;
}

struct Scales {
  const char* name;
  float alpha, beta;
};

constexpr Scales scales[] = {
    {"a1_b1", 1.0f, 1.0f}, {"a0p5_bneg2", 0.5f, -2.0f}, {"a2_b0", 2.0f, 0.0f}};

}  // namespace

std::vector<AddCase> add_cases() {
  std::vector<AddCase> cases;
  std::size_t index = 0;
  for (const Pattern& pattern : patterns()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        const Scales& s = scales[index++ % std::size(scales)];
        AddCase c{std::string(pattern.name) + "_" + s.name + "_" + std::string(to_string(dtype)) +
                      "_" + std::string(to_string(layout)),
                  AddDesc::from_dims(pattern.src, pattern.dst, s.alpha, s.beta, dtype, layout)};
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

Tensor reference_add_fwd(const AddDesc& desc, const Tensor& src, const Tensor& dst) {
  Context reference(BackendKind::reference);
  Tensor out = Tensor::empty(desc.dst_dims, desc.dtype, desc.layout);
  out.copy_from_f32(dst.to_f32());
  add_fwd(reference, desc, src, out);
  return out;
}

Tensor reference_add_bwd(const AddDesc& desc, const Tensor& diff_dst) {
  Context reference(BackendKind::reference);
  Tensor diff_src = nan_tensor(desc.src_dims, desc.dtype, desc.layout);
  add_bwd(reference, desc, diff_dst, diff_src);
  return diff_src;
}

// Note [add tolerances]
// Forward, alpha * s + beta * d: a candidate computing in f32 rounds the two products and the sum
// (at most 3 f32 units of roundoff of |alpha s| + |beta d|), then once more to f16/bf16 (one unit
// of the dtype): rel = 4 units (f32) or 2 units of the dtype plus 4 of f32. Backward, alpha times
// a sum of R terms: f32 accumulation in any order is within (R + 1) units of roundoff of the sum
// of |terms| (the scale), plus the final rounding to the dtype.
::testing::AssertionResult add_close(const AddDesc& desc, Direction direction, const Tensor& actual,
                                     const Tensor& expected, const Tensor& src, const Tensor& dst,
                                     const Tensor& diff_dst, std::string_view context,
                                     double* worst) {
  const double u32 = std::ldexp(1.0, -24);
  const double u = unit_roundoff(desc.dtype);
  AddDesc magnitude = desc;
  magnitude.alpha = std::fabs(desc.alpha);
  magnitude.beta = std::fabs(desc.beta);
  const Layout layout = desc.layout;
  Tensor scale;
  double rel = 0;
  if (direction == Direction::fwd) {
    magnitude.dtype = DType::f32;
    scale = reference_add_fwd(magnitude, abs_tensor(src, DType::f32, layout),
                              abs_tensor(dst, DType::f32, layout));
    rel = desc.dtype == DType::f32 ? 4 * u32 : 2 * u + 4 * u32;
  } else {
    magnitude.dtype = DType::f32;
    scale = reference_add_bwd(magnitude, abs_tensor(diff_dst, DType::f32, layout));
    rel = static_cast<double>(desc.reduction_size() + 1) * u32 + (desc.dtype == DType::f32 ? 0 : u);
  }
  const std::vector<float> got = actual.to_f32();
  ::testing::AssertionResult finite = all_finite(got, actual.dims(), "output", context);
  if (!finite) return finite;
  // abs0: f16 results may round into its subnormals, spaced 2^-24.
  const Tolerance tolerance{rel, desc.dtype == DType::f16 ? std::ldexp(1.0, -24) : 0.0};
  return close_within_scale(got, expected.to_f32(), scale.to_f32(), actual.dims(), tolerance,
                            "output", context, worst);
}

std::string add_context(const AddDesc& desc, Direction direction, std::string_view candidate) {
  std::ostringstream out;
  out << "add " << to_string(direction) << " [" << candidate << "] " << desc
      << "\n  repro: " << desc.repro(direction);
  return out.str();
}

}  // namespace dnnx::test
