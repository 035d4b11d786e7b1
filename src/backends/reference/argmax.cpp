// The reference argmax and accuracy count: one candidate each, "reference:direct". Both walk the
// logits in logical (row-major) order; accuracy ranks each label as Note [label rank]
// (core/argmax_args.hpp) says, counting in an exact integer.

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/argmax_args.hpp"
#include "core/check.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

AlgoInfo argmax_info(const ArgmaxDesc&, Direction) {
  return direct_info("direct loop", {"reference"});
}

AlgoInfo accuracy_info(const AccuracyDesc&, Direction) {
  return direct_info("direct loop (one pass per position, no sort)", {"reference"});
}

class ArgmaxPlan final : public DirectPlanBase<ArgmaxDesc, detail::ArgmaxArgs> {
 public:
  ArgmaxPlan(const ArgmaxDesc& desc, Direction direction)
      : DirectPlanBase(argmax_info(desc, direction), desc, direction) {}

  void execute(const detail::ArgmaxArgs& args, detail::Workspace) override {
    const std::vector<float> src =
        host_tensor(args.src, "src", desc_.src_dims, desc_.dtype, context_).to_f32();
    Tensor& dst = host_tensor(args.dst, "dst", desc_.dst_dims(), desc_.index_dtype, context_);
    // Logical order: the channels_first geometry.
    ArgmaxDesc logical = desc_;
    logical.layout = Layout::channels_first;
    const detail::AxisGeometry g = detail::axis_geometry(logical);
    std::vector<std::int64_t> out(static_cast<std::size_t>(g.groups()));
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t i = 0; i < g.inner; ++i) {
        const std::int64_t base = o * g.axis * g.inner + i;
        std::int64_t best = 0;
        for (std::int64_t a = 1; a < g.axis; ++a) {
          const float x = src[static_cast<std::size_t>(base + a * g.inner)];
          if (detail::ranks_above(x, src[static_cast<std::size_t>(base + best * g.inner)]))
            best = a;
        }
        out[static_cast<std::size_t>(o * g.inner + i)] = best;
      }
    }
    write_indices(out, dst);
  }
};

class AccuracyPlan final : public DirectPlanBase<AccuracyDesc, detail::AccuracyArgs> {
 public:
  AccuracyPlan(const AccuracyDesc& desc, Direction direction)
      : DirectPlanBase(accuracy_info(desc, direction), desc, direction) {}

  void execute(const detail::AccuracyArgs& args, detail::Workspace) override {
    const std::vector<float> x =
        host_tensor(args.logits, "logits", desc_.dims, desc_.dtype, context_).to_f32();
    const std::vector<std::int64_t> labels = read_indices(
        host_tensor(args.labels, "labels", desc_.labels_dims(), desc_.label_dtype, context_));
    Tensor& count = host_tensor(args.count, "count", Dims{1}, desc_.count_dtype, context_);
    AccuracyDesc logical = desc_;
    logical.layout = Layout::channels_first;
    const detail::AxisGeometry g = detail::axis_geometry(logical);
    std::int64_t correct = 0;
    for (std::size_t p = 0; p < labels.size(); ++p) {
      const std::int64_t y = labels[p];
      if (y == desc_.ignore_index) continue;
      if (y < 0 || y >= g.axis) {
        detail::raise(ErrorKind::InvalidArgument,
                      detail::bad_accuracy_label_message(desc_, static_cast<std::int64_t>(p), y),
                      context_);
      }
      const auto position = static_cast<std::int64_t>(p);
      const std::int64_t o = position / g.inner;
      const std::int64_t base = o * g.axis * g.inner + (position - o * g.inner);
      const float label_logit = x[static_cast<std::size_t>(base + y * g.inner)];
      std::int64_t rank = 0;
      for (std::int64_t c = 0; c < g.axis; ++c) {
        const float v = x[static_cast<std::size_t>(base + c * g.inner)];
        if (detail::ranks_above(v, label_logit) || (c < y && detail::ties_with(v, label_logit)))
          ++rank;
      }
      if (rank < desc_.top_k) ++correct;
    }
    if (desc_.count_dtype == DType::i64) {
      const std::int64_t previous = desc_.accumulate ? read_indices(count)[0] : 0;
      write_indices({previous + correct}, count);
    } else {
      const double previous = desc_.accumulate ? count.to_f32()[0] : 0.0;
      store({previous + static_cast<double>(correct)}, count);
    }
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::argmax>> make_argmax_backend(
    const detail::OpBackends&) {
  return DirectBackend<ArgmaxDesc, detail::ArgmaxArgs>::of<ArgmaxPlan>(argmax_info);
}

std::unique_ptr<detail::OpBackendOf<OpKind::accuracy>> make_accuracy_backend(
    const detail::OpBackends&) {
  return DirectBackend<AccuracyDesc, detail::AccuracyArgs>::of<AccuracyPlan>(accuracy_info);
}

}  // namespace dnnx::reference
