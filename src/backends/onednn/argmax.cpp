// The cpu backend's argmax and accuracy count: oneDNN has neither (its reduction gives no
// indices), so each has one candidate, a dnnx loop over the lines of the logits in memory
// (core/argmax_args.hpp), threads taking ranges of lines: "cpu:kernel:argmax" and
// "cpu:kernel:accuracy". Accuracy ranks each label as Note [label rank] says and counts in an
// exact integer; a bad label raises InvalidArgument naming the lowest bad position.

#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/loop_pool.hpp"
#include "core/argmax_args.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace dnnx::onednn {
namespace {

constexpr const char* argmax_id = "cpu:kernel:argmax";
constexpr const char* accuracy_id = "cpu:kernel:accuracy";

struct Candidate {
  AlgoInfo info;
};

// One element of a dense tensor of `dtype` at element offset `offset`, in f32.
float load_at(const std::byte* base, std::int64_t offset, DType dtype) {
  return detail::load_f32(base + offset * static_cast<std::int64_t>(size_of(dtype)), dtype);
}

void store_index(std::byte* base, std::int64_t offset, DType dtype, std::int64_t value) {
  if (dtype == DType::i32) {
    const auto narrow = static_cast<std::int32_t>(value);
    std::memcpy(base + offset * 4, &narrow, sizeof narrow);
  } else {
    std::memcpy(base + offset * 8, &value, sizeof value);
  }
}

template <typename Desc>
std::vector<Candidate> list_kernel(const char* id, const char* name, const Desc&) {
  Candidate candidate{kernel_info_of(id, name)};
  candidate.info.notes = {"kernel", "direct"};
  candidate.info.priority = 0;
  return {std::move(candidate)};
}

std::vector<Candidate> list_argmax(const dnnl::engine&, const ArgmaxDesc& desc, Direction,
                                   const std::string&) {
  return list_kernel(argmax_id, "dnnx loop over the lines", desc);
}

std::vector<Candidate> list_accuracy(const dnnl::engine&, const AccuracyDesc& desc, Direction,
                                     const std::string&) {
  return list_kernel(accuracy_id, "dnnx loop (one pass per position, no sort)", desc);
}

class ArgmaxPlan final : public LayerPlan<detail::ArgmaxArgs> {
 public:
  ArgmaxPlan(std::shared_ptr<Runtime>, const ArgmaxDesc& desc, Direction direction,
             const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        geometry_(detail::axis_geometry(desc)) {}

  void execute(const detail::ArgmaxArgs& args, detail::Workspace) override {
    check_dense_on_cpu(args.src, "src", desc_.src_dims, desc_.dtype, desc_.layout, context_);
    check_dense_on_cpu(args.dst, "dst", desc_.dst_dims(), desc_.index_dtype, desc_.layout,
                       context_);
    const auto* src = static_cast<const std::byte*>(args.src->data());
    auto* dst = static_cast<std::byte*>(args.dst->data());
    const detail::AxisGeometry g = geometry_;
    threads::run_ranges(g.groups(), g.elements(), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t line = first; line < last; ++line) {
        const std::int64_t o = line / g.inner;
        const std::int64_t base = o * g.axis * g.inner + (line - o * g.inner);
        std::int64_t best = 0;
        float best_value = load_at(src, base, desc_.dtype);
        for (std::int64_t a = 1; a < g.axis; ++a) {
          const float x = load_at(src, base + a * g.inner, desc_.dtype);
          if (detail::ranks_above(x, best_value)) {
            best = a;
            best_value = x;
          }
        }
        store_index(dst, line, desc_.index_dtype, best);
      }
    });
  }

 private:
  ArgmaxDesc desc_;
  detail::AxisGeometry geometry_;
};

class AccuracyPlan final : public LayerPlan<detail::AccuracyArgs> {
 public:
  AccuracyPlan(std::shared_ptr<Runtime>, const AccuracyDesc& desc, Direction direction,
               const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        geometry_(detail::axis_geometry(desc)) {}

  void execute(const detail::AccuracyArgs& args, detail::Workspace) override {
    check_dense_on_cpu(args.logits, "logits", desc_.dims, desc_.dtype, desc_.layout, context_);
    check_dense_on_cpu(args.labels, "labels", desc_.labels_dims(), desc_.label_dtype,
                       Layout::channels_first, context_);
    check_dense_on_cpu(args.count, "count", Dims{1}, desc_.count_dtype, Layout::channels_first,
                       context_);
    const auto* x = static_cast<const std::byte*>(args.logits->data());
    const auto* labels = static_cast<const std::byte*>(args.labels->data());
    const std::size_t label_size = size_of(desc_.label_dtype);
    const detail::AxisGeometry g = geometry_;
    std::atomic<std::int64_t> correct{0};
    std::atomic<std::int64_t> first_bad{g.groups()};
    threads::run_ranges(g.groups(), g.elements(), [&](std::int64_t first, std::int64_t last) {
      std::int64_t local = 0;
      for (std::int64_t p = first; p < last; ++p) {
        const std::int64_t y = detail::load_index(labels + static_cast<std::size_t>(p) * label_size,
                                                  desc_.label_dtype);
        if (y == desc_.ignore_index) continue;
        if (y < 0 || y >= g.axis) {
          std::int64_t seen = first_bad.load();
          while (p < seen && !first_bad.compare_exchange_weak(seen, p)) {
          }
          continue;
        }
        const std::int64_t o = p / g.inner;
        const std::int64_t base = o * g.axis * g.inner + (p - o * g.inner);
        const float label_logit = load_at(x, base + y * g.inner, desc_.dtype);
        std::int64_t rank = 0;
        for (std::int64_t c = 0; c < g.axis && rank < desc_.top_k; ++c) {
          const float v = load_at(x, base + c * g.inner, desc_.dtype);
          if (detail::ranks_above(v, label_logit) || (c < y && detail::ties_with(v, label_logit)))
            ++rank;
        }
        if (rank < desc_.top_k) ++local;
      }
      correct += local;
    });
    if (const std::int64_t p = first_bad.load(); p < g.groups()) {
      const std::int64_t y =
          detail::load_index(labels + static_cast<std::size_t>(p) * label_size, desc_.label_dtype);
      detail::raise(ErrorKind::InvalidArgument, detail::bad_accuracy_label_message(desc_, p, y),
                    context_);
    }
    void* out = args.count->data();
    if (desc_.count_dtype == DType::i64) {
      std::int64_t total = correct.load();
      if (desc_.accumulate) total += detail::load_index(out, DType::i64);
      std::memcpy(out, &total, sizeof total);
    } else {
      const float previous = desc_.accumulate ? detail::load_f32(out, DType::f32) : 0.0f;
      detail::store_f32(out, DType::f32, previous + static_cast<float>(correct.load()));
    }
  }

 private:
  AccuracyDesc desc_;
  detail::AxisGeometry geometry_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::argmax>> make_argmax_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<
      ListedLayerBackend<ArgmaxDesc, detail::ArgmaxArgs, Candidate, list_argmax, ArgmaxPlan>>(
      std::move(runtime));
}

std::unique_ptr<detail::OpBackendOf<OpKind::accuracy>> make_accuracy_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<ListedLayerBackend<AccuracyDesc, detail::AccuracyArgs, Candidate,
                                             list_accuracy, AccuracyPlan>>(std::move(runtime));
}

}  // namespace dnnx::onednn
