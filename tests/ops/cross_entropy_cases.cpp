#include "ops/cross_entropy_cases.hpp"

#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace dnnx::test {
namespace {

// Logical-order index of class c at position p (N, C, spatial...).
std::int64_t logical(const CrossEntropyDesc& desc, std::int64_t p, std::int64_t c) {
  const std::int64_t s = desc.positions() / desc.dims[0];
  return ((p / s) * desc.classes() + c) * s + p % s;
}

std::string reduction_name(Reduction reduction) { return std::string(to_string(reduction)); }

}  // namespace

float XentCase::largest() const { return clustered_largest(magnitude, centers); }

bool XentCase::clustered_large() const { return has_large_center(centers); }

std::vector<XentCase> xent_cases() {
  std::vector<XentCase> cases;
  auto add = [&](const std::string& tag, const Dims& dims, Reduction reduction, bool weighted,
                 DType label_dtype, Layout layout, std::int64_t ignore_index = -100,
                 float magnitude = 4, double ignored = 0.125, std::vector<float> centers = {0.0f}) {
    XentCase c;
    c.desc.dims = dims;
    c.desc.reduction = reduction;
    c.desc.weighted = weighted;
    c.desc.label_dtype = label_dtype;
    c.desc.layout = layout;
    c.desc.ignore_index = ignore_index;
    c.magnitude = magnitude;
    c.centers = std::move(centers);
    c.ignored = ignored;
    c.name = dims.to_string() + "_" + reduction_name(reduction) + (weighted ? "_w" : "") + "_" +
             std::string(to_string(label_dtype)) + "_" + std::string(to_string(layout)) +
             (tag.empty() ? "" : "_" + tag);
    cases.push_back(c);
  };
  for (const Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
    add("", Dims{64, 1000}, reduction, false, DType::i64, Layout::channels_first);
    add("", Dims{3, 17}, reduction, true, DType::i32, Layout::channels_first);
  }
  add("", Dims{1, 10}, Reduction::mean, false, DType::i64, Layout::channels_first);
  add("", Dims{5, 1}, Reduction::mean, true, DType::i64, Layout::channels_first);
  add("", Dims{4, 2049}, Reduction::sum, true, DType::i64, Layout::channels_first);
  // More positions than the GPU's gradient warps add the mean's total up for themselves (Note
  // [xent warp total] in backends/cudnn/kernels/cross_entropy.cu).
  add("", Dims{600, 40}, Reduction::mean, true, DType::i32, Layout::channels_first);
  add("ignore_class0", Dims{6, 5}, Reduction::mean, true, DType::i64, Layout::channels_first, 0);
  add("ignore_255", Dims{6, 5}, Reduction::none, false, DType::i32, Layout::channels_first, 255);
  add("all_ignored", Dims{3, 4}, Reduction::mean, false, DType::i64, Layout::channels_first, -100,
      4, 1.0);
  add("all_ignored", Dims{3, 4}, Reduction::sum, true, DType::i64, Layout::channels_first, -100, 4,
      1.0);
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    add("", Dims{2, 5, 9}, Reduction::mean, true, DType::i64, layout);
    add("", Dims{2, 3, 7, 5}, Reduction::none, false, DType::i32, layout);
    add("", Dims{2, 3, 7, 5}, Reduction::sum, true, DType::i64, layout, 1);
    add("", Dims{1, 21, 8, 8}, Reduction::mean, true, DType::i64, layout, 255);
    add("", Dims{2, 4, 3, 5, 6}, Reduction::mean, false, DType::i32, layout);
    add("", Dims{2, 4, 3, 5, 6}, Reduction::none, true, DType::i64, layout);
  }
  // Logits of magnitude 1e4: exp overflows without the max subtraction.
  add("large", Dims{8, 100}, Reduction::mean, true, DType::i64, Layout::channels_first, -100, 1e4f);
  add("large", Dims{2, 3, 7, 5}, Reduction::none, false, DType::i64, Layout::channels_last, -100,
      1e4f);
  add("large", Dims{2, 6, 4, 4}, Reduction::mean, false, DType::i32, Layout::channels_first, -100,
      1e4f);
  // Two positions: a sum of losses up to 2e4 each stays within f16's range (65504).
  add("large", Dims{1, 6, 1, 2}, Reduction::sum, false, DType::i64, Layout::channels_first, -100,
      1e4f, 0);
  // Logits clustered near large centers (Note [large-logit rows] in softmax_cases.cpp): log p of
  // order 1 next to logits of 1e4 or 1e5, through the rows, the columns (nchw with positions) and
  // the GPU's block kernel (C above 2048).
  const std::vector<float> near1e4{1e4f};
  const std::vector<float> mixed1e4{1e4f, -1e4f, 0.0f, 2.5e3f};
  const std::vector<float> mixed1e5{1e5f, -1e5f, 30.0f, -3e4f};
  add("near1e4", Dims{8, 37}, Reduction::none, false, DType::i64, Layout::channels_first, -100, 4,
      0.125, near1e4);
  add("spread1e4", Dims{8, 37}, Reduction::none, true, DType::i64, Layout::channels_first, -100, 48,
      0.125, near1e4);
  add("near1e4", Dims{8, 37}, Reduction::mean, true, DType::i32, Layout::channels_first, -100, 4,
      0.125, near1e4);
  add("near1e5", Dims{2, 21, 6, 11}, Reduction::none, false, DType::i64, Layout::channels_first,
      -100, 4, 0.125, {1e5f});
  add("nearneg1e5", Dims{2, 21, 6, 11}, Reduction::sum, false, DType::i64, Layout::channels_last,
      -100, 4, 0.125, {-1e5f});
  add("mixed1e4", Dims{2, 21, 6, 11}, Reduction::none, true, DType::i32, Layout::channels_last,
      -100, 4, 0.125, mixed1e4);
  add("mixed1e4", Dims{2, 21, 6, 11}, Reduction::none, false, DType::i64, Layout::channels_first,
      -100, 4, 0.125, mixed1e4);
  add("mixed1e5", Dims{3, 2100}, Reduction::none, false, DType::i64, Layout::channels_first, -100,
      4, 0, mixed1e5);
  return cases;
}

bool representable(const XentCase& c, DType dtype) {
  // The largest finite f16 is 65504; f32 and bf16 reach 3.4e38.
  return dtype != DType::f16 || c.largest() <= 65504.0f;
}

CrossEntropyDesc with_dtype(CrossEntropyDesc desc, DType dtype) {
  desc.dtype = dtype;
  return desc;
}

Tensor labels_tensor(const Dims& dims, DType label_dtype, const std::vector<std::int64_t>& values) {
  Tensor tensor = Tensor::empty(dims, label_dtype);
  auto* bytes = static_cast<unsigned char*>(tensor.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (label_dtype == DType::i32) {
      const auto narrow = static_cast<std::int32_t>(values[i]);
      std::memcpy(bytes + i * 4, &narrow, 4);
    } else {
      std::memcpy(bytes + i * 8, &values[i], 8);
    }
  }
  return tensor;
}

std::vector<std::int64_t> labels_of(const Tensor& labels) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(labels.numel()));
  const auto* bytes = static_cast<const unsigned char*>(labels.data());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (labels.dtype() == DType::i32) {
      std::int32_t v;
      std::memcpy(&v, bytes + i * 4, 4);
      out[i] = v;
    } else {
      std::memcpy(&out[i], bytes + i * 8, 8);
    }
  }
  return out;
}

XentInputs xent_inputs(const XentCase& c, const CrossEntropyDesc& desc) {
  XentInputs inputs;
  const auto count = static_cast<std::size_t>(desc.dims.product());
  const std::vector<float> logits = clustered_uniform(
      count, seed_from(c.name + "/logits"), seed_from(c.name + "/centers"), c.magnitude, c.centers);
  inputs.logits = tensor_from(desc.dims, desc.dtype, desc.layout, logits);
  const auto positions = static_cast<std::size_t>(desc.positions());
  const std::vector<float> pick = random_uniform(positions, seed_from(c.name + "/labels"));
  const std::vector<float> ignore = random_uniform(positions, seed_from(c.name + "/ignore"), 0, 1);
  std::vector<std::int64_t> labels(positions);
  for (std::size_t p = 0; p < positions; ++p) {
    const auto label =
        static_cast<std::int64_t>((pick[p] + 1.0f) / 2.0f * static_cast<float>(desc.classes()));
    labels[p] = ignore[p] < c.ignored ? desc.ignore_index
                                      : std::clamp<std::int64_t>(label, 0, desc.classes() - 1);
  }
  inputs.labels = labels_tensor(desc.labels_dims(), desc.label_dtype, labels);
  if (desc.weighted) {
    inputs.weights = tensor_from(desc.weights_dims(), DType::f32, Layout::channels_first,
                                 random_uniform(static_cast<std::size_t>(desc.classes()),
                                                seed_from(c.name + "/weights"), 0.25f, 2.0f));
  }
  inputs.diff_loss =
      tensor_from(desc.loss_dims(), desc.dtype, Layout::channels_first,
                  random_uniform(static_cast<std::size_t>(desc.loss_dims().product()),
                                 seed_from(c.name + "/diff_loss"), 0.5f, 1.5f));
  return inputs;
}

XentRun run_xent(Context& context, const CrossEntropyDesc& desc, Direction direction,
                 const XentInputs& inputs) {
  XentRun run;
  if (direction == Direction::fwd) {
    run.output = nan_tensor(desc.loss_dims(), desc.dtype, Layout::channels_first);
    run.choice = cross_entropy_fwd(context, desc, inputs.logits, inputs.labels,
                                   inputs.weights_or_null(), run.output);
  } else {
    run.output = nan_tensor(desc.dims, desc.dtype, desc.layout);
    run.choice = cross_entropy_bwd(context, desc, inputs.logits, inputs.labels,
                                   inputs.weights_or_null(), inputs.diff_loss, run.output);
  }
  return run;
}

namespace {

struct PositionTerms {
  std::vector<double> lse;     // log-sum-exp per position
  std::vector<double> weight;  // w[y] (0 when ignored)
  double total_weight = 0;
};

PositionTerms terms(const CrossEntropyDesc& desc, const XentInputs& inputs) {
  const std::vector<float> x = inputs.logits.to_f32();
  const std::vector<std::int64_t> y = labels_of(inputs.labels);
  const std::vector<float> w = desc.weighted ? inputs.weights.to_f32() : std::vector<float>();
  PositionTerms t;
  t.lse.resize(y.size());
  t.weight.resize(y.size());
  for (std::size_t p = 0; p < y.size(); ++p) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < desc.classes(); ++c)
      max = std::max(
          max, static_cast<double>(
                   x[static_cast<std::size_t>(logical(desc, static_cast<std::int64_t>(p), c))]));
    double sum = 0;
    for (std::int64_t c = 0; c < desc.classes(); ++c)
      sum += std::exp(x[static_cast<std::size_t>(logical(desc, static_cast<std::int64_t>(p), c))] -
                      max);
    t.lse[p] = max + std::log(sum);
    if (y[p] != desc.ignore_index) {
      t.weight[p] = desc.weighted ? w[static_cast<std::size_t>(y[p])] : 1.0;
      t.total_weight += t.weight[p];
    }
  }
  return t;
}

}  // namespace

std::vector<float> xent_forward_scale(const CrossEntropyDesc& desc, const XentInputs& inputs) {
  const std::vector<float> x = inputs.logits.to_f32();
  const std::vector<std::int64_t> y = labels_of(inputs.labels);
  const PositionTerms t = terms(desc, inputs);
  std::vector<double> per(y.size(), 0.0);
  double total = 0;
  for (std::size_t p = 0; p < y.size(); ++p) {
    if (y[p] == desc.ignore_index) continue;
    const double xy =
        x[static_cast<std::size_t>(logical(desc, static_cast<std::int64_t>(p), y[p]))];
    per[p] = t.weight[p] * (std::abs(t.lse[p]) + std::abs(xy));
    total += per[p];
  }
  if (desc.reduction == Reduction::none) return std::vector<float>(per.begin(), per.end());
  const double value = desc.reduction == Reduction::mean ? total / t.total_weight : total;
  return {static_cast<float>(value)};
}

std::vector<float> xent_backward_scale(const CrossEntropyDesc& desc, const XentInputs& inputs) {
  const std::vector<float> x = inputs.logits.to_f32();
  const std::vector<std::int64_t> y = labels_of(inputs.labels);
  const std::vector<float> dl = inputs.diff_loss.to_f32();
  const PositionTerms t = terms(desc, inputs);
  std::vector<float> scale(x.size(), 0.0f);
  for (std::size_t p = 0; p < y.size(); ++p) {
    if (y[p] == desc.ignore_index) continue;
    double g = 0;
    switch (desc.reduction) {
      case Reduction::none: g = t.weight[p] * dl[p]; break;
      case Reduction::sum: g = t.weight[p] * dl[0]; break;
      case Reduction::mean: g = t.weight[p] * dl[0] / t.total_weight; break;
    }
    for (std::int64_t c = 0; c < desc.classes(); ++c) {
      const auto k = static_cast<std::size_t>(logical(desc, static_cast<std::int64_t>(p), c));
      const double prob = std::exp(x[k] - t.lse[p]);
      scale[k] = static_cast<float>(std::abs(g) * (prob + (c == y[p] ? 1.0 : 0.0)));
    }
  }
  return scale;
}

// Note [xent tolerances]
// Candidates compute in f32 (sums over positions in f32 or f64): the log-sum-exp within a few
// ulps of its terms, then one rounding to the dtype of the loss or gradient. Relative to the
// scales above: f32 2e-5; f16 / bf16 add four units of their rounding. The absolute slack covers
// probabilities below f32's normal range (exp approximations differ there).
Tolerance xent_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16: return {4 * 0.00048828125 + 2e-5, 1e-7};
    case DType::bf16: return {4 * 0.00390625 + 2e-5, 1e-30};
    default: return {2e-5, 1e-30};
  }
}

// Note [xent large-logit tolerance]
// The loss of a position is -w log p_y with log p_y = (x_y - m) - log(s) (Note [xent stats] in
// src/backends/onednn/cross_entropy.cpp): as for log-softmax (Note [large-logit tolerance] in
// softmax_cases.cpp) its f32 error is a few ulps of w max(1, |log p_y|) whatever the logits'
// magnitude, xent_large_logit_ulps() of them (8 for dnnx's kernels and oneDNN's reference, 64
// for oneDNN's jit polynomials). Sum and mean add the positions' errors, plus the rounding of the
// sum (P ulps of the sum of |w log p|, P positions, which covers f32 partial sums) and of the
// division by the weight total (one more ulp). f16 / bf16 add four units of their rounding of
// |loss|. A log p_y from a shift rounded to the maximum's ulp is thousands of ulps away.
double xent_large_logit_ulps(const AlgoInfo& algo) {
  const bool polynomial =
      std::find(algo.notes.begin(), algo.notes.end(), "jit") != algo.notes.end();
  return polynomial ? 64 : 8;
}

XentBound xent_forward_bound(const XentCase& c, const CrossEntropyDesc& desc,
                             const XentInputs& inputs, const AlgoInfo& algo) {
  if (!c.clustered_large()) return {xent_forward_scale(desc, inputs), xent_tolerance(desc.dtype)};
  const std::vector<float> x = inputs.logits.to_f32();
  const std::vector<std::int64_t> y = labels_of(inputs.labels);
  const PositionTerms t = terms(desc, inputs);
  const double ulp = 0x1p-23;
  const double units = xent_large_logit_ulps(algo) * ulp;
  const double dtype_units = desc.dtype == DType::f16    ? 4 * 0x1p-11
                             : desc.dtype == DType::bf16 ? 4 * 0x1p-8
                                                         : 0.0;
  std::vector<double> error(y.size(), 0.0);
  std::vector<double> loss(y.size(), 0.0);
  for (std::size_t p = 0; p < y.size(); ++p) {
    if (y[p] == desc.ignore_index) continue;
    const double xy =
        x[static_cast<std::size_t>(logical(desc, static_cast<std::int64_t>(p), y[p]))];
    const double log_p = std::abs(xy - t.lse[p]);
    error[p] = t.weight[p] * units * std::max(1.0, log_p);
    loss[p] = t.weight[p] * log_p;
  }
  XentBound bound;
  bound.tolerance = {1.0, xent_tolerance(desc.dtype).abs};
  if (desc.reduction == Reduction::none) {
    for (std::size_t p = 0; p < y.size(); ++p)
      bound.scale.push_back(static_cast<float>(error[p] + dtype_units * loss[p]));
    return bound;
  }
  double total_error = 0;
  double total_loss = 0;
  for (std::size_t p = 0; p < y.size(); ++p) {
    total_error += error[p];
    total_loss += loss[p];
  }
  total_error += static_cast<double>(y.size()) * ulp * total_loss;
  if (desc.reduction == Reduction::mean) {
    // An all-ignored batch's mean is NaN, compared as such by xent_close().
    const double divisor = t.total_weight > 0 ? t.total_weight : 1.0;
    total_error = total_error / divisor + ulp * total_loss / divisor;
    total_loss /= divisor;
  }
  bound.scale.push_back(static_cast<float>(total_error + dtype_units * total_loss));
  return bound;
}

std::string xent_context(const CrossEntropyDesc& desc, Direction direction,
                         const std::string& candidate) {
  std::ostringstream out;
  out << "xent " << to_string(direction) << " [" << candidate << "] " << desc << " | "
      << desc.repro(direction);
  return out.str();
}

Context xent_context_for(BackendKind backend, Direction direction, const AlgoPolicy& policy) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune().policy(OpKind::cross_entropy, direction) = policy;
  return context;
}

::testing::AssertionResult xent_close(const Tensor& actual, const std::vector<float>& expected,
                                      const std::vector<float>& scale, const Dims& dims,
                                      const Tolerance& tolerance, const std::string& where) {
  const std::vector<float> got = actual.to_f32();
  std::vector<float> finite_got, finite_expected, finite_scale;
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (std::isnan(expected[k])) {
      if (!std::isnan(got[k])) {
        return ::testing::AssertionFailure()
               << "element " << index_string(dims, static_cast<std::int64_t>(k)) << " is " << got[k]
               << ", expected NaN (0/0 of an all-ignored mean) | " << where;
      }
      continue;
    }
    finite_got.push_back(got[k]);
    finite_expected.push_back(expected[k]);
    finite_scale.push_back(scale[k]);
  }
  const Dims flat{static_cast<std::int64_t>(finite_got.size())};
  if (finite_got.empty()) return ::testing::AssertionSuccess();
  auto finite = all_finite(finite_got, flat, "output", where);
  if (!finite) return finite;
  return close_within_scale(finite_got, finite_expected, finite_scale, flat, tolerance, "output",
                            where);
}

}  // namespace dnnx::test
