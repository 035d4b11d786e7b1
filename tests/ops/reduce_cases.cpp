#include "ops/reduce_cases.hpp"

#include <dnnx/context.hpp>

#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace dnnx::test {
namespace {

struct Pattern {
  const char* name;
  Dims src, dst;
};

const std::vector<Pattern>& reduce_patterns() {
  static const std::vector<Pattern> list = {
      {"all4d", Dims{2, 3, 5, 7}, Dims{1, 1, 1, 1}},
      {"none4d", Dims{2, 3, 5, 7}, Dims{2, 3, 5, 7}},
      {"spatial4d", Dims{2, 3, 5, 7}, Dims{2, 3, 1, 1}},
      {"batch4d", Dims{3, 4, 5, 2}, Dims{1, 4, 5, 2}},
      {"channel4d", Dims{4, 6, 3, 3}, Dims{4, 1, 3, 3}},
      {"mixed4d", Dims{2, 3, 5, 7}, Dims{1, 3, 1, 7}},
      {"all1d", Dims{37}, Dims{1}},
      {"rows2d", Dims{5, 33}, Dims{5, 1}},
      {"cols2d", Dims{5, 33}, Dims{1, 33}},
      {"odd3d", Dims{3, 5, 7}, Dims{1, 5, 1}},
      {"inner5d", Dims{2, 3, 2, 3, 4}, Dims{2, 1, 2, 1, 4}},
      {"unit4d", Dims{1, 6, 1, 5}, Dims{1, 1, 1, 5}},
      {"long2d", Dims{3, 5000}, Dims{3, 1}},
  };
  return list;
}

constexpr ReduceKind kinds[] = {ReduceKind::sum, ReduceKind::mean,  ReduceKind::max,
                                ReduceKind::min, ReduceKind::norm1, ReduceKind::norm2};

std::string suffix(DType dtype, Layout layout) {
  return "_" + std::string(to_string(dtype)) + "_" + std::string(to_string(layout));
}

}  // namespace

std::vector<ReduceCase> reduce_cases() {
  std::vector<ReduceCase> cases;
  std::size_t shift = 0;  // one more per pattern: each kind meets every dtype and layout
  for (const Pattern& pattern : reduce_patterns()) {
    std::size_t index = shift++;
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        ReduceDesc desc;
        desc.kind = kinds[index++ % std::size(kinds)];
        desc.src_dims = pattern.src;
        desc.dst_dims = pattern.dst;
        desc.dtype = dtype;
        desc.layout = layout;
        desc.validate();
        cases.push_back({std::string(pattern.name) + "_" + std::string(to_string(desc.kind)) +
                             suffix(dtype, layout),
                         desc});
      }
    }
  }
  return cases;
}

std::vector<ArgmaxCase> argmax_cases() {
  struct Shape {
    const char* name;
    Dims dims;
    int axis;
  };
  const Shape shapes[] = {{"classes2d", Dims{64, 10}, 1},  {"long2d", Dims{3, 1000}, 1},
                          {"rows2d", Dims{5, 7}, 0},       {"channel4d", Dims{2, 5, 3, 4}, 1},
                          {"last4d", Dims{2, 3, 4, 5}, 3}, {"depth5d", Dims{2, 3, 4, 5, 2}, 2},
                          {"line1d", Dims{37}, 0},         {"unit3d", Dims{4, 1, 3}, 1}};
  std::vector<ArgmaxCase> cases;
  std::size_t index = 0;
  for (const Shape& shape : shapes) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        ArgmaxDesc desc;
        desc.src_dims = shape.dims;
        desc.axis = shape.axis;
        desc.dtype = dtype;
        desc.index_dtype = index++ % 2 == 0 ? DType::i64 : DType::i32;
        desc.layout = layout;
        desc.validate();
        cases.push_back({std::string(shape.name) + "_" + std::string(to_string(desc.index_dtype)) +
                             suffix(dtype, layout),
                         desc});
      }
    }
  }
  return cases;
}

std::vector<AccuracyCase> accuracy_cases() {
  struct Shape {
    const char* name;
    Dims dims;
    std::int64_t top_k;
    std::int64_t ignore_index;
  };
  const Shape shapes[] = {
      {"top1", Dims{64, 10}, 1, -100},        {"top5", Dims{16, 100}, 5, -100},
      {"spatial", Dims{4, 5, 3, 3}, 2, -100}, {"long", Dims{3, 1000}, 1, -100},
      {"k_is_c", Dims{8, 3}, 3, -100},        {"vol", Dims{2, 4, 2, 2, 3}, 1, 0}};
  std::vector<AccuracyCase> cases;
  std::size_t index = 0;
  for (const Shape& shape : shapes) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        AccuracyDesc desc;
        desc.dims = shape.dims;
        desc.top_k = shape.top_k;
        desc.ignore_index = shape.ignore_index;
        desc.label_dtype = index % 2 == 0 ? DType::i64 : DType::i32;
        desc.count_dtype = index % 3 == 0 ? DType::f32 : DType::i64;
        desc.accumulate = index % 4 == 1;
        desc.dtype = dtype;
        desc.layout = layout;
        desc.validate();
        ++index;
        cases.push_back({std::string(shape.name) + "_" + std::string(to_string(desc.label_dtype)) +
                             "_" + std::string(to_string(desc.count_dtype)) +
                             (desc.accumulate ? "_acc" : "") + suffix(dtype, layout),
                         desc});
      }
    }
  }
  return cases;
}

Tensor tied_tensor(const Dims& dims, DType dtype, Layout layout, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> level(-4, 4);
  std::vector<float> values(static_cast<std::size_t>(dims.product()));
  for (float& v : values) v = static_cast<float>(level(rng)) * 0.25f;
  return tensor_from(dims, dtype, layout, values);
}

Tensor random_label_tensor(const Dims& dims, DType dtype, std::int64_t classes,
                           std::int64_t ignore_index, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
  Tensor labels = Tensor::empty(dims, dtype);
  auto* bytes = static_cast<unsigned char*>(labels.data());
  for (std::int64_t i = 0; i < labels.numel(); ++i) {
    const std::int64_t label = rng() % 5 == 0 ? ignore_index : pick(rng);
    if (dtype == DType::i32) {
      const auto narrow = static_cast<std::int32_t>(label);
      std::memcpy(bytes + i * 4, &narrow, 4);
    } else {
      std::memcpy(bytes + i * 8, &label, 8);
    }
  }
  return labels;
}

Tensor count_tensor(DType dtype, std::int64_t value) {
  Tensor count = Tensor::empty(Dims{1}, dtype);
  if (dtype == DType::i64) {
    std::memcpy(count.data(), &value, sizeof value);
  } else {
    const auto f = static_cast<float>(value);
    std::memcpy(count.data(), &f, sizeof f);
  }
  return count;
}

double count_value(const Tensor& count) {
  if (count.dtype() == DType::i64) {
    std::int64_t value = 0;
    std::memcpy(&value, count.data(), sizeof value);
    return static_cast<double>(value);
  }
  return count.to_f32()[0];
}

Tensor reference_reduce_fwd(const ReduceDesc& desc, const Tensor& src) {
  Context reference(BackendKind::reference);
  Tensor dst = nan_tensor(desc.dst_dims, desc.dtype, desc.layout);
  reduce_fwd(reference, desc, src, dst);
  return dst;
}

Tensor reference_reduce_bwd(const ReduceDesc& desc, const ReduceInputs& inputs) {
  Context reference(BackendKind::reference);
  Tensor diff_src = nan_tensor(desc.src_dims, desc.dtype, desc.layout);
  reduce_bwd(reference, desc, inputs.src, inputs.dst, inputs.diff_dst, diff_src);
  return diff_src;
}

ReduceInputs reduce_inputs(const ReduceDesc& desc, std::string_view name) {
  ReduceInputs inputs;
  const bool extremum = desc.kind == ReduceKind::max || desc.kind == ReduceKind::min;
  const std::string key(name);
  inputs.src = extremum ? tied_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from(key))
                        : random_tensor(desc.src_dims, desc.dtype, desc.layout, seed_from(key));
  inputs.diff_dst =
      random_tensor(desc.dst_dims, desc.dtype, desc.layout, seed_from(key + "diff_dst"));
  inputs.dst = reference_reduce_fwd(desc, inputs.src);
  return inputs;
}

// Note [reduce tolerances]
// Forward sum, mean, norm1: f32 accumulation of R terms in any order is within (R + 1) units of
// f32 roundoff of the sum of |terms| (the scale; divided by R for mean), and both the candidate's
// and the reference's results are rounded once to the dtype: 2 units of the dtype more. norm2: the
// sum of squares (positive terms) has relative error (R + 1) u32, halved by the square root, plus
// its rounding; the scale is the result. max, min: the result is one of the inputs: exact.
// Backward: diff_dst copied (sum, norm1: exact), or divided by R or the tie count, or x / y *
// dy (norm2): a few f32 roundings plus the two to the dtype, relative to the result.
::testing::AssertionResult reduce_close(const ReduceDesc& desc, Direction direction,
                                        const Tensor& actual, const Tensor& expected,
                                        const ReduceInputs& inputs, std::string_view context,
                                        double* worst) {
  const double u32 = std::ldexp(1.0, -24);
  const double u = desc.dtype == DType::f32 ? u32 : unit_roundoff(desc.dtype);
  const std::vector<float> got = actual.to_f32();
  ::testing::AssertionResult finite = all_finite(got, actual.dims(), "output", context);
  if (!finite) return finite;
  const std::vector<float> want = expected.to_f32();
  std::vector<float> scale(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) scale[i] = std::fabs(want[i]);
  double rel = 0;
  const auto count = static_cast<double>(desc.reduction_size());
  if (direction == Direction::fwd) {
    switch (desc.kind) {
      case ReduceKind::sum:
      case ReduceKind::mean:
      case ReduceKind::norm1: {
        ReduceDesc magnitude = desc;
        magnitude.dtype = DType::f32;
        magnitude.kind = desc.kind == ReduceKind::mean ? ReduceKind::mean : ReduceKind::sum;
        scale = reference_reduce_fwd(magnitude, abs_tensor(inputs.src, DType::f32, desc.layout))
                    .to_f32();
        rel = (count + 1) * u32 + 2 * u;
        break;
      }
      case ReduceKind::norm2: rel = (count + 1) * u32 / 2 + 2 * u32 + 2 * u; break;
      case ReduceKind::max:
      case ReduceKind::min: rel = 0; break;
    }
  } else {
    rel = 4 * u32 + 2 * u;
  }
  // abs: f16 results may round into its subnormals, spaced 2^-24.
  const Tolerance tolerance{rel, desc.dtype == DType::f16 ? std::ldexp(1.0, -24) : 0.0};
  return close_within_scale(got, want, scale, actual.dims(), tolerance, "output", context, worst);
}

}  // namespace dnnx::test
