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

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {


AlgoInfo info_of(const BatchNormDesc&, Direction) {
  return direct_info("direct loops (f64 accumulation)", {"direct", "reference"});
}

std::vector<double> load(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_f32();
  return {values.begin(), values.end()};
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

class DirectPlan final : public DirectPlanBase<BatchNormDesc, detail::BatchNormArgs> {
 public:
  DirectPlan(const BatchNormDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction), view_(view_of(desc)) {}

  void execute(const detail::BatchNormArgs& args, detail::Workspace /*workspace*/) override {
    check(args.src, "src", desc_.dims, desc_.dtype);
    const Dims params = desc_.param_dims();
    auto param = [&](const Tensor* tensor, const char* role) {
      check(tensor, role, params, DType::f32);
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
      check(args.dst, "dst", desc_.dims, desc_.dtype);
      const std::vector<double> shift =
          desc_.affine ? param(args.shift, "shift") : std::vector<double>(k_count, 0.0);
      std::vector<double> y(x.size());
      for_each([&](std::size_t k, std::size_t i) {
        y[i] = (x[i] - mean[k]) * inv_std[k] * scale[k] + shift[k];
      });
      store(y, *args.dst);
      if (desc_.training) save_and_update(args, mean, var, inv_std);
      return;
    }

    check(args.diff_dst, "diff_dst", desc_.dims, desc_.dtype);
    check(args.diff_src, "diff_src", desc_.dims, desc_.dtype);
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
      check(args.diff_scale, "diff_scale", params, DType::f32);
      check(args.diff_shift, "diff_shift", params, DType::f32);
      store(sum_dy_xhat, *args.diff_scale);
      store(sum_dy, *args.diff_shift);
    }
  }

 private:
  // Direct callers (tests, tools) bypass the op layer: keep them from reading out of bounds.
  void check(const Tensor* tensor, const char* role, const Dims& dims, DType dtype) const {
    host_tensor(tensor, role, dims, dtype, context_);
  }

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
                       const std::vector<double>& var, const std::vector<double>& inv_std) const {
    const Dims params = desc_.param_dims();
    if (args.saved_mean != nullptr) {
      check(args.saved_mean, "saved_mean", params, DType::f32);
      store(mean, *args.saved_mean);
    }
    if (args.saved_inv_std != nullptr) {
      check(args.saved_inv_std, "saved_inv_std", params, DType::f32);
      store(inv_std, *args.saved_inv_std);
    }
    if (args.running_mean == nullptr) return;
    check(args.running_mean, "running_mean", params, DType::f32);
    check(args.running_var, "running_var", params, DType::f32);
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

  View view_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::batch_norm>> make_batch_norm_backend(const detail::OpBackends&) {
  return DirectBackend<BatchNormDesc, detail::BatchNormArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
