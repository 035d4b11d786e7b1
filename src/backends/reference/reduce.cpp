// The reference reduction: one candidate, "reference:direct". Every src element, in logical
// row-major order, is mapped to the dst element it reduces into; sums are in f64 and each result
// is rounded once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/check.hpp"
#include "core/reduce_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo info_of(const ReduceDesc&, Direction) {
  return direct_info("direct loop (f64)", {"reference"});
}

class DirectPlan final : public DirectPlanBase<ReduceDesc, detail::ReduceArgs> {
 public:
  DirectPlan(const ReduceDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction),
        map_(collapsed_index_map(desc.src_dims, desc.dst_dims)) {}

  void execute(const detail::ReduceArgs& args, detail::Workspace) override {
    const auto outputs = static_cast<std::size_t>(desc_.dst_dims.product());
    const double count = static_cast<double>(desc_.reduction_size());
    if (direction_ == Direction::fwd) {
      const std::vector<float> src =
          host_tensor(args.src, "src", desc_.src_dims, desc_.dtype, context_).to_f32();
      Tensor& dst = host_tensor(args.dst, "dst", desc_.dst_dims, desc_.dtype, context_);
      store(forward(src, outputs, count), dst);
      return;
    }
    const std::vector<float> diff_dst =
        host_tensor(args.diff_dst, "diff_dst", desc_.dst_dims, desc_.dtype, context_).to_f32();
    Tensor& diff_src =
        host_tensor(args.diff_src, "diff_src", desc_.src_dims, desc_.dtype, context_);
    std::vector<double> out(map_.size());
    if (!desc_.backward_reads_values()) {
      const double scale = desc_.kind == ReduceKind::mean ? 1.0 / count : 1.0;
      for (std::size_t i = 0; i < map_.size(); ++i)
        out[i] = diff_dst[static_cast<std::size_t>(map_[i])] * scale;
      store(out, diff_src);
      return;
    }
    const std::vector<float> src =
        host_tensor(args.src, "src", desc_.src_dims, desc_.dtype, context_).to_f32();
    const std::vector<float> dst =
        host_tensor(args.saved_dst, "dst", desc_.dst_dims, desc_.dtype, context_).to_f32();
    if (desc_.kind == ReduceKind::max || desc_.kind == ReduceKind::min) {
      // Note [tied extrema]: the gradient is split evenly among the elements equal to dst.
      std::vector<std::int64_t> ties(outputs, 0);
      for (std::size_t i = 0; i < map_.size(); ++i) {
        const auto o = static_cast<std::size_t>(map_[i]);
        if (src[i] == dst[o]) ++ties[o];
      }
      for (std::size_t i = 0; i < map_.size(); ++i) {
        const auto o = static_cast<std::size_t>(map_[i]);
        out[i] = src[i] == dst[o] ? diff_dst[o] / static_cast<double>(ties[o]) : 0.0;
      }
    } else if (desc_.kind == ReduceKind::norm1) {
      for (std::size_t i = 0; i < map_.size(); ++i) {
        const auto o = static_cast<std::size_t>(map_[i]);
        const double sign = src[i] > 0 ? 1.0 : src[i] < 0 ? -1.0 : 0.0;
        out[i] = sign * diff_dst[o];
      }
    } else {  // norm2
      for (std::size_t i = 0; i < map_.size(); ++i) {
        const auto o = static_cast<std::size_t>(map_[i]);
        out[i] = dst[o] == 0 ? 0.0 : static_cast<double>(src[i]) / dst[o] * diff_dst[o];
      }
    }
    store(out, diff_src);
  }

 private:
  std::vector<double> forward(const std::vector<float>& src, std::size_t outputs,
                              double count) const {
    const ReduceKind kind = desc_.kind;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> acc(outputs, 0.0);
    if (kind == ReduceKind::max) acc.assign(outputs, -std::numeric_limits<double>::infinity());
    if (kind == ReduceKind::min) acc.assign(outputs, std::numeric_limits<double>::infinity());
    for (std::size_t i = 0; i < map_.size(); ++i) {
      double& a = acc[static_cast<std::size_t>(map_[i])];
      const double x = src[i];
      switch (kind) {
        case ReduceKind::sum:
        case ReduceKind::mean: a += x; break;
        case ReduceKind::norm1: a += std::fabs(x); break;
        case ReduceKind::norm2: a += x * x; break;
        // NaN wins, as torch.amax / amin.
        case ReduceKind::max: a = std::isnan(x) || std::isnan(a) ? nan : std::max(a, x); break;
        case ReduceKind::min: a = std::isnan(x) || std::isnan(a) ? nan : std::min(a, x); break;
      }
    }
    if (kind == ReduceKind::mean) {
      for (double& a : acc) a /= count;
    } else if (kind == ReduceKind::norm2) {
      for (double& a : acc) a = std::sqrt(a);
    }
    return acc;
  }

  std::vector<std::int64_t> map_;  // src element -> dst element
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reduce>> make_reduce_backend(
    const detail::OpBackends&) {
  return DirectBackend<ReduceDesc, detail::ReduceArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
