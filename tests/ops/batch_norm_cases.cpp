// The batch-norm case table and the helpers every batch-norm test shares.
//
// Note [batch-norm tolerances]
// Every output is compared as |actual - expected| <= rel * scale + abs, with a per-element scale
// that bounds the magnitude of what was rounded to form it (the reference is exact to f64 and
// rounds once):
//   dst:           |x_hat * scale| + |shift| + |scale|; the last term covers the error of the
//                  statistics, which enters every element of a channel;
//   diff_src:      |a| (|dy| + mean|dy| + |x_hat| mean|dy x_hat|) with a = scale * inv_std in
//                  training (the three terms of the gradient before they cancel), |a dy| in
//                  inference;
//   diff_scale:    sum |dy x_hat|;  diff_shift: sum |dy|;
//   saved_mean:    mean |x|;  saved_inv_std: inv_std * E[x^2] / (var + eps), the sensitivity of
//                  1 / sqrt(var + eps) to an error of E[x^2] in a one-pass variance;
//   running_mean:  (1 - m) |running_mean| + m mean|x|;
//   running_var:   (1 - m) |running_var| + m E[x^2] n / (n - 1).
// `data` bounds dst and diff_src, which are stored in the desc's dtype: f32 2e-5 (a few f32
// roundings of the coefficients and of x * a + b); f16 2e-3 and bf16 1.6e-2, two units in the
// last place (2^-10 and 2^-7), since an implementation rounds its f32 result to the dtype while
// the reference rounds the exact one, so the two may land one unit apart. `stats` bounds the f32
// statistics and sums, 1e-4 for every dtype (f16/bf16 inputs are exact in f32): sums of up to a
// few thousand values in f32 accumulate a few 1e-6 relative error in the worst order. Absolute
// slack 1e-6 covers values that round to (near) zero.

#include "ops/batch_norm_cases.hpp"

#include <dnnx/error.hpp>

#include "support/random.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx::test {
namespace {

// Logical [N, K, S] view (Note [statistics view] in src/backends/reference/batch_norm.cpp).
struct View {
  std::int64_t n = 0, k = 0, s = 0;
};

View view_of(const BatchNormDesc& desc) {
  return {desc.dims[0], desc.statistics(), desc.reduction_size() / desc.dims[0]};
}

template <typename Body>
void for_each(const View& v, Body&& body) {
  std::size_t i = 0;
  for (std::int64_t n = 0; n < v.n; ++n)
    for (std::int64_t k = 0; k < v.k; ++k)
      for (std::int64_t s = 0; s < v.s; ++s, ++i) body(static_cast<std::size_t>(k), i);
}

std::vector<double> as_double(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_f32();
  return {values.begin(), values.end()};
}

std::vector<float> as_float(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}

Layout param_layout(const BatchNormDesc& desc) {
  return desc.param_dims().rank() == 1 ? Layout::channels_first : desc.layout;
}

Tensor to_context(const Tensor& host, Context& context) {
  if (context.device() == Device::cpu()) {
    Tensor copy_of = Tensor::empty(host.dims(), host.dtype(), host.layout().value());
    copy(host, copy_of);
    return copy_of;
  }
  Tensor device =
      Tensor::empty(host.dims(), host.dtype(), host.layout().value(), context.allocator());
  copy(host, device);
  return device;
}

Tensor to_host(const Tensor& tensor) {
  Tensor host = Tensor::empty(tensor.dims(), tensor.dtype(), tensor.layout().value());
  copy(tensor, host);
  return host;
}

Tensor nan_like(const Dims& dims, DType dtype, Layout layout, Context& context) {
  return to_context(nan_tensor(dims, dtype, layout), context);
}

// Per-statistic facts of the inputs the scales need, in f64.
struct Moments {
  std::vector<double> mean, var, mean_abs, mean_square;  // biased var
};

Moments moments_of(const BatchNormDesc& desc, const std::vector<double>& x) {
  const View v = view_of(desc);
  const auto k = static_cast<std::size_t>(v.k);
  const auto count = static_cast<double>(v.n * v.s);
  Moments m{std::vector<double>(k), std::vector<double>(k), std::vector<double>(k),
            std::vector<double>(k)};
  for_each(v, [&](std::size_t c, std::size_t i) {
    m.mean[c] += x[i];
    m.mean_abs[c] += std::abs(x[i]);
    m.mean_square[c] += x[i] * x[i];
  });
  for (std::size_t c = 0; c < k; ++c) {
    m.mean[c] /= count;
    m.mean_abs[c] /= count;
    m.mean_square[c] /= count;
  }
  for_each(v, [&](std::size_t c, std::size_t i) {
    const double d = x[i] - m.mean[c];
    m.var[c] += d * d;
  });
  for (double& value : m.var) value /= count;
  return m;
}

// The statistics a call normalises with: the batch's (training) or the running ones.
void used_statistics(const BatchNormDesc& desc, const BatchNormInputs& in, const Moments& m,
                     std::vector<double>& mean, std::vector<double>& inv_std) {
  const std::size_t k = m.mean.size();
  mean.resize(k);
  inv_std.resize(k);
  const std::vector<double> rm = as_double(in.running_mean), rv = as_double(in.running_var);
  for (std::size_t c = 0; c < k; ++c) {
    mean[c] = desc.training ? m.mean[c] : rm[c];
    inv_std[c] = 1.0 / std::sqrt((desc.training ? m.var[c] : rv[c]) + desc.eps);
  }
}

std::vector<double> ones_or(const BatchNormDesc& desc, const Tensor& scale) {
  if (desc.affine) return as_double(scale);
  return std::vector<double>(static_cast<std::size_t>(desc.statistics()), 1.0);
}

// Collects the failures of several outputs into one result.
class Verdict {
 public:
  void check(const ::testing::AssertionResult& result) {
    if (result) return;
    ok_ = false;
    message_ << result.message() << '\n';
  }
  ::testing::AssertionResult result() const {
    if (ok_) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << message_.str();
  }

 private:
  bool ok_ = true;
  std::ostringstream message_;
};

void compare(Verdict& verdict, const char* what, const Tensor& expected, const Tensor& actual,
             const std::vector<double>& scale, const Tolerance& tolerance, std::string_view context,
             double* worst) {
  ::testing::AssertionResult finite = all_finite(actual, what, context);
  if (!finite) {
    verdict.check(finite);
    return;
  }
  double ratio = 0;
  verdict.check(close_within_scale(actual.to_f32(), expected.to_f32(), as_float(scale),
                                   actual.dims(), tolerance, what, context, &ratio));
  if (worst != nullptr) *worst = std::max(*worst, ratio);
}

}  // namespace

void PrintTo(const BatchNormCase& param, std::ostream* out) {
  *out << param.name << " (" << param.desc << ")";
}

std::string batch_norm_case_name(const BatchNormDesc& desc) {
  std::ostringstream out;
  out << desc.dims.to_string() << '_' << to_string(desc.mode) << '_'
      << (desc.training ? "train" : "infer") << (desc.affine ? "_affine_" : "_plain_")
      << to_string(desc.dtype) << '_' << to_string(desc.layout);
  return out.str();
}

std::vector<BatchNormCase> batch_norm_cases() {
  struct Shape {
    Dims dims;
    BatchNormMode mode;
    bool every_variant;  // all 24 (dtype, layout, training, affine); else a rotating 4
  };
  using M = BatchNormMode;
  const std::vector<Shape> shapes = {
      {{8, 10}, M::per_activation, true},   // BatchNorm1d on N x F
      {{4, 6, 11}, M::spatial, true},       // 1-D spatial, odd length
      {{4, 5, 7, 9}, M::spatial, true},     // 2-D, odd sizes
      {{2, 3, 4, 5, 3}, M::spatial, true},  // 3-D
      {{3, 4, 3, 2}, M::per_activation, true},
      {{1, 3, 5, 4}, M::spatial, false},      // batch 1
      {{2, 16, 4, 4}, M::spatial, false},     // vector-friendly channels
      {{8, 10}, M::spatial, false},           // rank 2 spatial (the same as per-activation)
      {{3, 4, 5}, M::per_activation, false},  // 1-D per-activation
      {{2, 2, 3, 2, 2}, M::per_activation, false},
      {{1, 1, 1, 2}, M::spatial, false},      // two values per statistic: the least training takes
      {{5, 1, 1, 1}, M::spatial, false},      // one channel, no spatial extent
      {{1, 7}, M::per_activation, false},     // batch 1: inference only
      {{2, 1, 3}, M::per_activation, false},  // two values per statistic
      {{6, 33, 5, 3}, M::spatial, false},     // channels not a multiple of any vector width
      {{8, 32, 32, 32}, M::spatial, false},   // large enough for the cpu kernel's threads
  };
  constexpr DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  constexpr Layout layouts[] = {Layout::channels_first, Layout::channels_last};
  std::vector<BatchNormCase> cases;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    for (int variant = 0; variant < 24; ++variant) {
      if (!shapes[s].every_variant && variant % 6 != static_cast<int>(s % 6)) continue;
      BatchNormDesc desc;
      desc.dims = shapes[s].dims;
      desc.mode = shapes[s].mode;
      desc.dtype = dtypes[variant % 3];
      desc.layout = layouts[(variant / 3) % 2];
      desc.training = (variant / 6) % 2 == 0;
      desc.affine = (variant / 12) % 2 == 0;
      desc.eps = variant % 2 == 0 ? 1e-5 : 1e-3;
      desc.momentum = variant % 4 < 2 ? 0.1 : 0.3;
      try {
        desc.validate();
      } catch (const Error&) {
        continue;  // training on one value per statistic: the errors test covers it
      }
      cases.push_back({batch_norm_case_name(desc), desc});
    }
  }
  return cases;
}

Tensor batch_norm_param(const BatchNormDesc& desc, const std::vector<float>& values) {
  return tensor_from(desc.param_dims(), DType::f32, param_layout(desc), values);
}

BatchNormInputs batch_norm_inputs(const BatchNormDesc& desc, std::uint64_t seed) {
  const auto count = static_cast<std::size_t>(desc.dims.product());
  const auto stats = static_cast<std::size_t>(desc.statistics());
  BatchNormInputs in;
  in.src = tensor_from(desc.dims, desc.dtype, desc.layout, random_uniform(count, seed, -1, 3));
  in.diff_dst = tensor_from(desc.dims, desc.dtype, desc.layout, random_uniform(count, seed + 1));
  in.scale = batch_norm_param(desc, random_uniform(stats, seed + 2, 0.5f, 1.5f));
  in.shift = batch_norm_param(desc, random_uniform(stats, seed + 3));
  in.running_mean = batch_norm_param(desc, random_uniform(stats, seed + 4, -0.5f, 0.5f));
  in.running_var = batch_norm_param(desc, random_uniform(stats, seed + 5, 0.5f, 1.5f));
  return in;
}

BatchNormFwdResult run_batch_norm_fwd(Context& context, const BatchNormDesc& desc,
                                      const BatchNormInputs& in) {
  const Dims params = desc.param_dims();
  const Layout layout = param_layout(desc);
  const Tensor src = to_context(in.src, context);
  Tensor dst = nan_like(desc.dims, desc.dtype, desc.layout, context);
  const Tensor scale = to_context(in.scale, context);
  const Tensor shift = to_context(in.shift, context);
  Tensor running_mean = to_context(in.running_mean, context);
  Tensor running_var = to_context(in.running_var, context);
  Tensor saved_mean = nan_like(params, DType::f32, layout, context);
  Tensor saved_inv_std = nan_like(params, DType::f32, layout, context);
  BatchNormTensors tensors;
  if (desc.affine) {
    tensors.scale = &scale;
    tensors.shift = &shift;
  }
  tensors.running_mean = &running_mean;
  tensors.running_var = &running_var;
  if (desc.training) {
    tensors.saved_mean = &saved_mean;
    tensors.saved_inv_std = &saved_inv_std;
  }
  BatchNormFwdResult result;
  result.choice = batch_norm_fwd(context, desc, src, dst, tensors);
  result.dst = to_host(dst);
  result.running_mean = to_host(running_mean);
  result.running_var = to_host(running_var);
  if (desc.training) {
    result.saved_mean = to_host(saved_mean);
    result.saved_inv_std = to_host(saved_inv_std);
  }
  return result;
}

BatchNormBwdResult run_batch_norm_bwd(Context& context, const BatchNormDesc& desc,
                                      const BatchNormInputs& in, const Tensor& saved_mean_host,
                                      const Tensor& saved_inv_std_host) {
  const Dims params = desc.param_dims();
  const Layout layout = param_layout(desc);
  const Tensor src = to_context(in.src, context);
  const Tensor diff_dst = to_context(in.diff_dst, context);
  Tensor diff_src = nan_like(desc.dims, desc.dtype, desc.layout, context);
  const Tensor scale = to_context(in.scale, context);
  Tensor running_mean = to_context(in.running_mean, context);
  Tensor running_var = to_context(in.running_var, context);
  Tensor saved_mean, saved_inv_std;
  Tensor diff_scale = nan_like(params, DType::f32, layout, context);
  Tensor diff_shift = nan_like(params, DType::f32, layout, context);
  BatchNormTensors tensors;
  if (desc.affine) tensors.scale = &scale;
  if (desc.training) {
    saved_mean = to_context(saved_mean_host, context);
    saved_inv_std = to_context(saved_inv_std_host, context);
    tensors.saved_mean = &saved_mean;
    tensors.saved_inv_std = &saved_inv_std;
  } else {
    tensors.running_mean = &running_mean;
    tensors.running_var = &running_var;
  }
  BatchNormBwdResult result;
  result.choice =
      batch_norm_bwd(context, desc, src, diff_dst, tensors, diff_src,
                     desc.affine ? &diff_scale : nullptr, desc.affine ? &diff_shift : nullptr);
  result.diff_src = to_host(diff_src);
  if (desc.affine) {
    result.diff_scale = to_host(diff_scale);
    result.diff_shift = to_host(diff_shift);
  }
  return result;
}

BatchNormTolerance batch_norm_tolerance(DType dtype) {
  // Note [batch-norm tolerances]
  const Tolerance stats{1e-4, 1e-6};
  switch (dtype) {
    case DType::f16: return {{2e-3, 1e-6}, stats};
    case DType::bf16: return {{1.6e-2, 1e-6}, stats};
    default: return {{2e-5, 1e-6}, stats};
  }
}

::testing::AssertionResult compare_batch_norm_fwd(const BatchNormDesc& desc,
                                                  const BatchNormInputs& in,
                                                  const BatchNormFwdResult& expected,
                                                  const BatchNormFwdResult& actual,
                                                  std::string_view context, double* worst) {
  const BatchNormTolerance tolerance = batch_norm_tolerance(desc.dtype);
  const View v = view_of(desc);
  const std::vector<double> x = as_double(in.src);
  const Moments m = moments_of(desc, x);
  std::vector<double> mean, inv_std;
  used_statistics(desc, in, m, mean, inv_std);
  const std::vector<double> scale = ones_or(desc, in.scale);
  const std::vector<double> shift =
      desc.affine ? as_double(in.shift) : std::vector<double>(scale.size(), 0.0);

  std::vector<double> dst_scale(x.size());
  for_each(v, [&](std::size_t k, std::size_t i) {
    dst_scale[i] = std::abs((x[i] - mean[k]) * inv_std[k] * scale[k]) + std::abs(shift[k]) +
                   std::abs(scale[k]);
  });
  Verdict verdict;
  compare(verdict, "dst", expected.dst, actual.dst, dst_scale, tolerance.data, context, worst);

  const std::vector<double> rm = as_double(in.running_mean), rv = as_double(in.running_var);
  const std::size_t k_count = rm.size();
  const double momentum = desc.training ? desc.momentum : 0.0;
  const auto n = static_cast<double>(desc.reduction_size());
  std::vector<double> rm_scale(k_count), rv_scale(k_count);
  for (std::size_t k = 0; k < k_count; ++k) {
    rm_scale[k] = (1 - momentum) * std::abs(rm[k]) + momentum * m.mean_abs[k];
    rv_scale[k] = (1 - momentum) * std::abs(rv[k]) +
                  (desc.training ? momentum * m.mean_square[k] * n / (n - 1) : 0.0);
  }
  compare(verdict, "running_mean", expected.running_mean, actual.running_mean, rm_scale,
          tolerance.stats, context, worst);
  compare(verdict, "running_var", expected.running_var, actual.running_var, rv_scale,
          tolerance.stats, context, worst);
  if (desc.training) {
    std::vector<double> inv_std_scale(k_count);
    for (std::size_t k = 0; k < k_count; ++k)
      inv_std_scale[k] = inv_std[k] * m.mean_square[k] / (m.var[k] + desc.eps);
    compare(verdict, "saved_mean", expected.saved_mean, actual.saved_mean, m.mean_abs,
            tolerance.stats, context, worst);
    compare(verdict, "saved_inv_std", expected.saved_inv_std, actual.saved_inv_std, inv_std_scale,
            tolerance.stats, context, worst);
  }
  return verdict.result();
}

::testing::AssertionResult compare_batch_norm_bwd(
    const BatchNormDesc& desc, const BatchNormInputs& in, const Tensor& saved_mean,
    const Tensor& saved_inv_std, const BatchNormBwdResult& expected,
    const BatchNormBwdResult& actual, std::string_view context, double* worst) {
  const BatchNormTolerance tolerance = batch_norm_tolerance(desc.dtype);
  const View v = view_of(desc);
  const std::vector<double> x = as_double(in.src);
  const std::vector<double> dy = as_double(in.diff_dst);
  const std::vector<double> scale = ones_or(desc, in.scale);
  const std::size_t k_count = scale.size();
  std::vector<double> mean, inv_std;
  if (desc.training) {
    mean = as_double(saved_mean);
    inv_std = as_double(saved_inv_std);
  } else {
    used_statistics(desc, in, moments_of(desc, x), mean, inv_std);
  }
  std::vector<double> sum_abs_dy(k_count), sum_abs_dy_xhat(k_count);
  for_each(v, [&](std::size_t k, std::size_t i) {
    sum_abs_dy[k] += std::abs(dy[i]);
    sum_abs_dy_xhat[k] += std::abs(dy[i] * (x[i] - mean[k]) * inv_std[k]);
  });
  const auto n = static_cast<double>(desc.reduction_size());
  std::vector<double> dx_scale(x.size());
  for_each(v, [&](std::size_t k, std::size_t i) {
    const double a = std::abs(scale[k] * inv_std[k]);
    if (!desc.training) {
      dx_scale[i] = a * std::abs(dy[i]);
      return;
    }
    const double x_hat = std::abs((x[i] - mean[k]) * inv_std[k]);
    dx_scale[i] = a * (std::abs(dy[i]) + sum_abs_dy[k] / n + x_hat * sum_abs_dy_xhat[k] / n);
  });
  Verdict verdict;
  compare(verdict, "diff_src", expected.diff_src, actual.diff_src, dx_scale, tolerance.data,
          context, worst);
  if (desc.affine) {
    compare(verdict, "diff_scale", expected.diff_scale, actual.diff_scale, sum_abs_dy_xhat,
            tolerance.stats, context, worst);
    compare(verdict, "diff_shift", expected.diff_shift, actual.diff_shift, sum_abs_dy,
            tolerance.stats, context, worst);
  }
  return verdict.result();
}

::testing::AssertionResult bitwise_equal_fwd(const BatchNormFwdResult& first,
                                             const BatchNormFwdResult& second,
                                             std::string_view context) {
  Verdict verdict;
  verdict.check(bitwise_equal(first.dst, second.dst, "dst", context));
  verdict.check(bitwise_equal(first.running_mean, second.running_mean, "running_mean", context));
  verdict.check(bitwise_equal(first.running_var, second.running_var, "running_var", context));
  if (!first.saved_mean.is_null()) {
    verdict.check(bitwise_equal(first.saved_mean, second.saved_mean, "saved_mean", context));
    verdict.check(
        bitwise_equal(first.saved_inv_std, second.saved_inv_std, "saved_inv_std", context));
  }
  return verdict.result();
}

::testing::AssertionResult bitwise_equal_bwd(const BatchNormBwdResult& first,
                                             const BatchNormBwdResult& second,
                                             std::string_view context) {
  Verdict verdict;
  verdict.check(bitwise_equal(first.diff_src, second.diff_src, "diff_src", context));
  if (!first.diff_scale.is_null()) {
    verdict.check(bitwise_equal(first.diff_scale, second.diff_scale, "diff_scale", context));
    verdict.check(bitwise_equal(first.diff_shift, second.diff_shift, "diff_shift", context));
  }
  return verdict.result();
}

std::string batch_norm_context(const BatchNormDesc& desc, Direction direction,
                               std::string_view candidate) {
  std::ostringstream out;
  out << "bnorm " << (direction == Direction::fwd ? "fwd" : "bwd") << " [" << candidate << "] "
      << desc << "\n  repro: " << desc.repro(direction);
  return out.str();
}

Context batch_norm_context_with(BackendKind backend, Direction direction, const std::string& id) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  if (!id.empty()) context.tune().policy(OpKind::batch_norm, direction) = AlgoPolicy::fixed(id);
  return context;
}

}  // namespace dnnx::test
