// The reference softmax: plain loops in f64, the oracle every other backend is tested against.
// Inputs are read in logical order (Tensor::to_f32 walks any strides), so one set of loops serves
// every layout and dtype, and dst may be src (the input is copied before anything is written).
// Results are rounded once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/softmax_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo direct_info() {
  return reference::direct_info("direct loops (f64, max-subtracted)",
                                {"direct", "reference", "accurate"});
}

ErrorContext context_of(const SoftmaxDesc& desc, Direction direction) {
  return detail::op_context(BackendKind::reference, desc, direction, direct_id);
}

void check_tensor(const Tensor* tensor, const char* role, const SoftmaxDesc& desc,
                  const ErrorContext& context) {
  check_cpu_tensor(tensor, role, desc.dims, desc.dtype, context);
}

// Visits every group of the logical order: f(first element offset, stride between elements).
template <typename F>
void for_each_group(const detail::AxisGeometry& g, F&& f) {
  for (std::int64_t o = 0; o < g.outer; ++o) {
    for (std::int64_t i = 0; i < g.inner; ++i) f(o * g.axis * g.inner + i, g.inner);
  }
}

class Plan final : public detail::OpPlan<detail::SoftmaxArgs> {
 public:
  Plan(const SoftmaxDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        info_(direct_info()),
        context_(context_of(desc, direction)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::SoftmaxArgs& args, detail::Workspace) override {
    if (direction_ == Direction::fwd) {
      check_tensor(args.src, "src", desc_, context_);
      check_tensor(args.dst, "dst", desc_, context_);
      forward(*args.src, *args.dst);
    } else {
      check_tensor(args.saved_dst, "dst", desc_, context_);
      check_tensor(args.diff_dst, "diff_dst", desc_, context_);
      check_tensor(args.diff_src, "diff_src", desc_, context_);
      backward(*args.saved_dst, *args.diff_dst, *args.diff_src);
    }
  }

 private:
  void forward(const Tensor& src, Tensor& dst) const {
    const std::vector<float> x = src.to_f32();
    std::vector<double> y(x.size());
    for_each_group(detail::axis_geometry(desc_, true), [&](std::int64_t first, std::int64_t step) {
      const std::int64_t n = desc_.axis_size();
      double max = -std::numeric_limits<double>::infinity();
      for (std::int64_t a = 0; a < n; ++a)
        max = std::max(max, static_cast<double>(x[static_cast<std::size_t>(first + a * step)]));
      double sum = 0;
      for (std::int64_t a = 0; a < n; ++a)
        sum += std::exp(x[static_cast<std::size_t>(first + a * step)] - max);
      const double log_sum = std::log(sum);
      for (std::int64_t a = 0; a < n; ++a) {
        const auto k = static_cast<std::size_t>(first + a * step);
        const double shifted = x[k] - max;
        y[k] = desc_.log ? shifted - log_sum : std::exp(shifted) / sum;
      }
    });
    detail::store_rounded(y, dst);
  }

  void backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) const {
    const std::vector<float> y = dst.to_f32();
    const std::vector<float> dy = diff_dst.to_f32();
    std::vector<double> dx(y.size());
    for_each_group(detail::axis_geometry(desc_, true), [&](std::int64_t first, std::int64_t step) {
      const std::int64_t n = desc_.axis_size();
      double sum = 0;  // log: sum(dy); softmax: sum(dy * y)
      for (std::int64_t a = 0; a < n; ++a) {
        const auto k = static_cast<std::size_t>(first + a * step);
        sum += desc_.log ? static_cast<double>(dy[k])
                         : static_cast<double>(dy[k]) * static_cast<double>(y[k]);
      }
      for (std::int64_t a = 0; a < n; ++a) {
        const auto k = static_cast<std::size_t>(first + a * step);
        dx[k] = desc_.log ? dy[k] - std::exp(static_cast<double>(y[k])) * sum
                          : static_cast<double>(y[k]) * (dy[k] - sum);
      }
    });
    detail::store_rounded(dx, diff_src);
  }

  SoftmaxDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::softmax>> make_softmax_backend(const detail::OpBackends&) {
  return DirectBackend<SoftmaxDesc, detail::SoftmaxArgs>::of<Plan>(
      [](const SoftmaxDesc&, Direction) { return direct_info(); });
}

}  // namespace dnnx::reference
