// The reference cross-entropy: plain loops in f64, the oracle every other backend is tested
// against. Logits are read in logical order (N, C, spatial...) whatever their layout; the
// log-sum-exp subtracts the maximum, so logits of any magnitude are exact up to f64 rounding.
// Labels are all checked before anything is written, and the lowest bad position is reported.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/cross_entropy_args.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo direct_info() {
  return reference::direct_info("direct loops (f64 log-sum-exp + NLL)", {"direct", "reference"});
}

ErrorContext context_of(const CrossEntropyDesc& desc, Direction direction) {
  return detail::op_context(BackendKind::reference, desc, direction, direct_id);
}

class Plan final : public detail::OpPlan<detail::CrossEntropyArgs> {
 public:
  Plan(const CrossEntropyDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        info_(direct_info()),
        context_(context_of(desc, direction)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::CrossEntropyArgs& args, detail::Workspace) override {
    check_cpu_tensor(args.logits, "logits", desc_.dims, desc_.dtype, context_);
    check_cpu_tensor(args.labels, "labels", desc_.labels_dims(), desc_.label_dtype, context_);
    if (desc_.weighted) {
      check_cpu_tensor(args.weights, "weights", desc_.weights_dims(), DType::f32, context_);
    }
    const std::vector<float> x = args.logits->to_f32();
    const std::vector<std::int64_t> y = read_indices(*args.labels);
    const std::int64_t classes = desc_.classes();
    for (std::size_t p = 0; p < y.size(); ++p) {
      if (!detail::label_ok(y[p], classes, desc_.ignore_index)) {
        detail::raise(ErrorKind::InvalidArgument,
                      detail::bad_label_message(desc_, static_cast<std::int64_t>(p), y[p]),
                      context_);
      }
    }
    // Per position: its class weight (0 when ignored).
    std::vector<double> w(y.size(), 0.0);
    const std::vector<float> class_weights =
        desc_.weighted ? args.weights->to_f32() : std::vector<float>();
    for (std::size_t p = 0; p < y.size(); ++p) {
      if (y[p] == desc_.ignore_index) continue;
      w[p] = desc_.weighted ? class_weights[static_cast<std::size_t>(y[p])] : 1.0;
    }
    if (direction_ == Direction::fwd) {
      check_cpu_tensor(args.loss, "loss", desc_.loss_dims(), desc_.dtype, context_);
      forward(x, y, w, *args.loss);
    } else {
      check_cpu_tensor(args.diff_loss, "diff_loss", desc_.loss_dims(), desc_.dtype, context_);
      check_cpu_tensor(args.diff_logits, "diff_logits", desc_.dims, desc_.dtype, context_);
      backward(x, y, w, args.diff_loss->to_f32(), *args.diff_logits);
    }
  }

 private:
  // log(sum_c exp(x_c)) of position p, max-subtracted.
  double log_sum_exp(const std::vector<float>& x, const detail::AxisGeometry& g,
                     std::int64_t p) const {
    const std::int64_t first = (p / g.inner) * g.axis * g.inner + p % g.inner;
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < g.axis; ++c)
      max = std::max(max, static_cast<double>(x[static_cast<std::size_t>(first + c * g.inner)]));
    double sum = 0;
    for (std::int64_t c = 0; c < g.axis; ++c)
      sum += std::exp(x[static_cast<std::size_t>(first + c * g.inner)] - max);
    return max + std::log(sum);
  }

  void forward(const std::vector<float>& x, const std::vector<std::int64_t>& y,
               const std::vector<double>& w, Tensor& loss) const {
    const detail::AxisGeometry g = detail::axis_geometry(desc_, true);
    std::vector<double> per_position(y.size(), 0.0);
    double total = 0, total_weight = 0;
    for (std::size_t p = 0; p < y.size(); ++p) {
      if (y[p] == desc_.ignore_index) continue;
      const auto position = static_cast<std::int64_t>(p);
      const std::int64_t first = (position / g.inner) * g.axis * g.inner + position % g.inner;
      const double nll =
          log_sum_exp(x, g, position) - x[static_cast<std::size_t>(first + y[p] * g.inner)];
      per_position[p] = w[p] * nll;
      total += per_position[p];
      total_weight += w[p];
    }
    switch (desc_.reduction) {
      case Reduction::none: detail::store_rounded(per_position, loss); break;
      case Reduction::sum: detail::store_rounded({total}, loss); break;
      case Reduction::mean: detail::store_rounded({total / total_weight}, loss); break;
    }
  }

  void backward(const std::vector<float>& x, const std::vector<std::int64_t>& y,
                const std::vector<double>& w, const std::vector<float>& diff_loss,
                Tensor& diff_logits) const {
    const detail::AxisGeometry g = detail::axis_geometry(desc_, true);
    double total_weight = 0;
    for (double v : w) total_weight += v;
    std::vector<double> dx(x.size(), 0.0);
    for (std::size_t p = 0; p < y.size(); ++p) {
      if (y[p] == desc_.ignore_index) continue;
      const auto position = static_cast<std::int64_t>(p);
      // PyTorch's order: -w * grad / total_weight (0/0 is NaN when every weight is zero).
      double scale = 0;
      switch (desc_.reduction) {
        case Reduction::none: scale = w[p] * diff_loss[p]; break;
        case Reduction::sum: scale = w[p] * diff_loss[0]; break;
        case Reduction::mean: scale = w[p] * diff_loss[0] / total_weight; break;
      }
      const double lse = log_sum_exp(x, g, position);
      const std::int64_t first = (position / g.inner) * g.axis * g.inner + position % g.inner;
      for (std::int64_t c = 0; c < g.axis; ++c) {
        const auto k = static_cast<std::size_t>(first + c * g.inner);
        const double softmax = std::exp(x[k] - lse);
        dx[k] = scale * (softmax - (c == y[p] ? 1.0 : 0.0));
      }
    }
    detail::store_rounded(dx, diff_logits);
  }

  CrossEntropyDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::cross_entropy>> make_cross_entropy_backend(const detail::OpBackends&) {
  return DirectBackend<CrossEntropyDesc, detail::CrossEntropyArgs>::of<Plan>(
      [](const CrossEntropyDesc&, Direction) { return direct_info(); });
}

}  // namespace dnnx::reference
