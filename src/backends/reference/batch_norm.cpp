// The reference batch normalization: plain loops with f64 accumulation, the oracle every other
// backend is tested against. Clarity comes first.
//
// Note [statistics view]
// Both modes are one computation on a logical [N, K, S] view of src: K statistics, each over the
// N x S values (n, k, s) at (n * K + k) * S + s in logical row-major order. Spatial mode has K = C
// and S = the spatial positions; per-activation mode has K = C x spatial and S = 1, and its
// parameter tensors {1, C, spatial...} hold statistic k at logical index k. The tensors are read
// through their own strides into dense logical-order arrays (Tensor::to_f32), so one set of loops
// serves every layout and dtype.
//
// Note [rounding once] (conv.cpp) applies to every output: results are formed in f64 and rounded
// once to the storage dtype (through f32 rounded to odd for f16/bf16).

#include "backends/reference/layers.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dnnx::reference {
namespace {

constexpr const char* direct_id = "reference:direct";

AlgoInfo direct_info() {
  AlgoInfo info;
  info.id = direct_id;
  info.name = "direct loops (f64 accumulation)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"direct", "reference"};
  info.families = {"none"};
  return info;
}

ErrorContext context_of(const BatchNormDesc& desc, Direction direction) {
  ErrorContext context;
  context.op = detail::cat("bnorm ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "reference";
  context.implementation = direct_id;
  return context;
}

// f64 -> f32 rounded to odd (Note [rounding once] in conv.cpp).
float to_f32_round_to_odd(double value) {
  const auto nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || !std::isfinite(value)) return nearest;
  float truncated = nearest;
  if (std::abs(static_cast<double>(nearest)) > std::abs(value))
    truncated = std::nextafter(nearest, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(truncated) | 1u);
}

// Writes f64 values (logical order) into `tensor`, each rounded once to its dtype.
void store(const std::vector<double>& values, Tensor& tensor) {
  std::vector<float> narrowed(values.size());
  const bool direct = tensor.dtype() == DType::f32;
  for (std::size_t i = 0; i < values.size(); ++i)
    narrowed[i] = direct ? static_cast<float>(values[i]) : to_f32_round_to_odd(values[i]);
  tensor.copy_from_f32(narrowed);
}

std::vector<double> load(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_f32();
  return {values.begin(), values.end()};
}

// Direct callers (tests, tools) bypass the op layer: keep them from reading out of bounds.
void check_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                  const ErrorContext& context) {
  if (tensor == nullptr || tensor->is_null()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is missing (null); expected a ", to_string(dtype),
                              " tensor of dims ", dims),
                  context);
  }
  if (tensor->dims() != dims || tensor->dtype() != dtype || tensor->device() != Device::cpu()) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                    "; expected ", to_string(dtype), '[', dims.to_string(), "] in host memory"),
        context);
  }
}

// The [N, K, S] sizes of Note [statistics view].
struct View {
  std::int64_t n = 0, k = 0, s = 0;
  std::int64_t count() const { return n * s; }  // values behind each statistic
};

View view_of(const BatchNormDesc& desc) {
  View v;
  v.n = desc.dims[0];
  v.k = desc.statistics();
  v.s = desc.reduction_size() / v.n;
  return v;
}

class DirectPlan final : public detail::OpPlan<detail::BatchNormArgs> {
 public:
  DirectPlan(const BatchNormDesc& desc, Direction direction)
      : desc_(desc), direction_(direction), view_(view_of(desc)), info_(direct_info()) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::BatchNormArgs& args, detail::Workspace /*workspace*/) override {
    const ErrorContext context = context_of(desc_, direction_);
    check_tensor(args.src, "src", desc_.dims, desc_.dtype, context);
    const Dims params = desc_.param_dims();
    auto param = [&](const Tensor* tensor, const char* role) {
      check_tensor(tensor, role, params, DType::f32, context);
      return load(*tensor);
    };
    const std::vector<double> x = load(*args.src);
    const auto k_count = static_cast<std::size_t>(view_.k);
    const std::vector<double> scale =
        desc_.affine ? param(args.scale, "scale") : std::vector<double>(k_count, 1.0);

    // The statistics the normalisation uses: the batch's (training) or the running ones.
    std::vector<double> mean(k_count), inv_std(k_count), var(k_count);
    if (!desc_.training) {
      const std::vector<double> running_mean = param(args.running_mean, "running_mean");
      const std::vector<double> running_var = param(args.running_var, "running_var");
      for (std::size_t k = 0; k < k_count; ++k) {
        mean[k] = running_mean[k];
        inv_std[k] = 1.0 / std::sqrt(running_var[k] + desc_.eps);
      }
    } else if (direction_ == Direction::fwd) {
      batch_statistics(x, mean, var);
      for (std::size_t k = 0; k < k_count; ++k) inv_std[k] = 1.0 / std::sqrt(var[k] + desc_.eps);
    } else {
      mean = param(args.saved_mean, "saved_mean");
      inv_std = param(args.saved_inv_std, "saved_inv_std");
    }

    if (direction_ == Direction::fwd) {
      check_tensor(args.dst, "dst", desc_.dims, desc_.dtype, context);
      const std::vector<double> shift =
          desc_.affine ? param(args.shift, "shift") : std::vector<double>(k_count, 0.0);
      std::vector<double> y(x.size());
      for_each([&](std::size_t k, std::size_t i) {
        y[i] = (x[i] - mean[k]) * inv_std[k] * scale[k] + shift[k];
      });
      store(y, *args.dst);
      if (desc_.training) save_and_update(args, mean, var, inv_std, context);
      return;
    }

    check_tensor(args.diff_dst, "diff_dst", desc_.dims, desc_.dtype, context);
    check_tensor(args.diff_src, "diff_src", desc_.dims, desc_.dtype, context);
    const std::vector<double> dy = load(*args.diff_dst);
    // diff_shift = sum dy, diff_scale = sum dy * x_hat, with x_hat = (x - mean) * inv_std.
    std::vector<double> sum_dy(k_count, 0.0), sum_dy_xhat(k_count, 0.0);
    for_each([&](std::size_t k, std::size_t i) {
      sum_dy[k] += dy[i];
      sum_dy_xhat[k] += dy[i] * (x[i] - mean[k]) * inv_std[k];
    });
    std::vector<double> dx(x.size());
    const auto count = static_cast<double>(view_.count());
    if (desc_.training) {
      // The batch statistics depend on every x: the gradient of (x - mean(x)) / std(x).
      for_each([&](std::size_t k, std::size_t i) {
        const double x_hat = (x[i] - mean[k]) * inv_std[k];
        dx[i] =
            scale[k] * inv_std[k] * (dy[i] - sum_dy[k] / count - x_hat * sum_dy_xhat[k] / count);
      });
    } else {
      // Frozen statistics: an affine map of x.
      for_each([&](std::size_t k, std::size_t i) { dx[i] = dy[i] * scale[k] * inv_std[k]; });
    }
    store(dx, *args.diff_src);
    if (desc_.affine) {
      check_tensor(args.diff_scale, "diff_scale", params, DType::f32, context);
      check_tensor(args.diff_shift, "diff_shift", params, DType::f32, context);
      store(sum_dy_xhat, *args.diff_scale);
      store(sum_dy, *args.diff_shift);
    }
  }

 private:
  // Calls body(k, i) for every element i (logical index) and its statistic k, in index order.
  template <typename Body>
  void for_each(Body&& body) const {
    std::size_t i = 0;
    for (std::int64_t n = 0; n < view_.n; ++n) {
      for (std::int64_t k = 0; k < view_.k; ++k) {
        for (std::int64_t s = 0; s < view_.s; ++s, ++i) body(static_cast<std::size_t>(k), i);
      }
    }
  }

  // Mean and biased variance of each statistic, in two passes (no cancellation).
  void batch_statistics(const std::vector<double>& x, std::vector<double>& mean,
                        std::vector<double>& var) const {
    const auto count = static_cast<double>(view_.count());
    std::fill(mean.begin(), mean.end(), 0.0);
    std::fill(var.begin(), var.end(), 0.0);
    for_each([&](std::size_t k, std::size_t i) { mean[k] += x[i]; });
    for (double& m : mean) m /= count;
    for_each([&](std::size_t k, std::size_t i) {
      const double d = x[i] - mean[k];
      var[k] += d * d;
    });
    for (double& v : var) v /= count;
  }

  // The saved statistics and PyTorch's running update (unbiased variance), as a training forward
  // leaves them.
  void save_and_update(const detail::BatchNormArgs& args, const std::vector<double>& mean,
                       const std::vector<double>& var, const std::vector<double>& inv_std,
                       const ErrorContext& context) const {
    const Dims params = desc_.param_dims();
    if (args.saved_mean != nullptr) {
      check_tensor(args.saved_mean, "saved_mean", params, DType::f32, context);
      store(mean, *args.saved_mean);
    }
    if (args.saved_inv_std != nullptr) {
      check_tensor(args.saved_inv_std, "saved_inv_std", params, DType::f32, context);
      store(inv_std, *args.saved_inv_std);
    }
    if (args.running_mean == nullptr) return;
    check_tensor(args.running_mean, "running_mean", params, DType::f32, context);
    check_tensor(args.running_var, "running_var", params, DType::f32, context);
    const auto count = static_cast<double>(view_.count());
    const double m = desc_.momentum;
    std::vector<double> running_mean = load(*args.running_mean);
    std::vector<double> running_var = load(*args.running_var);
    for (std::size_t k = 0; k < running_mean.size(); ++k) {
      running_mean[k] = (1 - m) * running_mean[k] + m * mean[k];
      running_var[k] = (1 - m) * running_var[k] + m * var[k] * count / (count - 1);
    }
    store(running_mean, *args.running_mean);
    store(running_var, *args.running_var);
  }

  BatchNormDesc desc_;
  Direction direction_;
  View view_;
  AlgoInfo info_;
};

class DirectBatchNorm final : public detail::BatchNormBackend {
 public:
  std::vector<AlgoInfo> list(const BatchNormDesc& desc, Direction /*direction*/) override {
    AlgoInfo info = direct_info();
    // The loops run every valid desc; an invalid one is the only thing they cannot run.
    try {
      desc.validate();
    } catch (const Error& error) {
      info.supported = false;
      info.reason = error.message();
    }
    return {info};
  }

  // A plan holds nothing but the desc: every call gets its own.
  std::shared_ptr<detail::OpPlan<detail::BatchNormArgs>> plan(const BatchNormDesc& desc,
                                                              Direction direction,
                                                              const std::string& id) override {
    if (id != direct_id) {
      detail::raise(
          ErrorKind::InvalidArgument,
          detail::cat("algorithm id '", id,
                      "' is not a candidate of the reference backend; valid ids: ", direct_id),
          context_of(desc, direction));
    }
    try {
      desc.validate();
    } catch (const Error& error) {
      throw error.with_context(context_of(desc, direction));
    }
    return std::make_shared<DirectPlan>(desc, direction);
  }
};

}  // namespace

std::unique_ptr<detail::BatchNormBackend> make_batch_norm_backend() {
  return std::make_unique<DirectBatchNorm>();
}

}  // namespace dnnx::reference
