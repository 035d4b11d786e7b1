// The cpu backend's reduction: oneDNN's reduction primitive forward (every implementation), and
// dnnx's loop both ways.
//
// Note [cpu reduce candidates]
// Forward:
//   onednn:<impl>      reduction (sum, mean, max, min, norm_lp_sum with p = 1 or 2 and eps = 0)
//                      from src to dst, one candidate per implementation oneDNN lists, ref:any
//                      last. oneDNN 3.2 has no reduction over no axis (dst = src): unavailable
//                      then, with oneDNN's message. For f16/bf16 without a native implementation
//                      other than ref:any, "onednn:<impl>:f32" converts src to f32 in the
//                      workspace and dst back (Note [f32 compute] in layer_common.hpp).
//   cpu:kernel:reduce  dnnx's loop: each dst element's group summed (or compared) in f64, in a
//                      fixed order, threads taking ranges of dst elements; no workspace.
// Backward: oneDNN has no reduction backward; cpu:kernel:reduce writes each group's gradient
// (Note [tied extrema] in core/reduce_args.hpp for max and min), threads taking ranges of groups.
// Every candidate is deterministic (Note [determinism] in conv_list.cpp).

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/loop_pool.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/reduce_args.hpp"
#include "core/softmax_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

constexpr const char* kernel_id = "cpu:kernel:reduce";

memory::desc dense_md(const Dims& dims, DType dtype, Layout layout) {
  const Dims strides = dense_strides(dims, layout);
  return memory::desc(memory::dims(dims.begin(), dims.end()), data_type_of(dtype),
                      memory::dims(strides.begin(), strides.end()));
}

dnnl::algorithm algorithm_of(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::sum: return dnnl::algorithm::reduction_sum;
    case ReduceKind::mean: return dnnl::algorithm::reduction_mean;
    case ReduceKind::max: return dnnl::algorithm::reduction_max;
    case ReduceKind::min: return dnnl::algorithm::reduction_min;
    case ReduceKind::norm1:
    case ReduceKind::norm2: return dnnl::algorithm::reduction_norm_lp_sum;
  }
  return dnnl::algorithm::reduction_sum;
}

float p_of(ReduceKind kind) { return kind == ReduceKind::norm2 ? 2.0f : 1.0f; }

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;  // null for the kernel or when unsupported
  std::shared_ptr<const F32Conversion> conversion;
  bool kernel = false;
};

dnnl::primitive_desc create_pd(const dnnl::engine& engine, const ReduceDesc& desc, DType dtype,
                               const ErrorContext& context, std::string& failure) {
  return create_or_unavailable(
      [&]() -> dnnl::primitive_desc {
        return dnnl::reduction::primitive_desc(
            engine, algorithm_of(desc.kind), dense_md(desc.src_dims, dtype, desc.layout),
            dense_md(desc.dst_dims, dtype, desc.layout), p_of(desc.kind), 0.0f, user_scratchpad());
      },
      "reduction", context, failure, Unavailable::unimplemented_or_invalid);
}

// Appends a candidate per implementation of `pd` (not yet listed); returns how many.
std::size_t append_implementations(std::vector<Candidate>& list, std::set<std::string>& seen,
                                   dnnl::primitive_desc& pd,
                                   const std::shared_ptr<const F32Conversion>& conversion,
                                   const ErrorContext& context) {
  std::size_t added = 0;
  do {
    const std::string impl = sanitize(pd.impl_info_str());
    Candidate candidate;
    candidate.info.id = detail::cat("onednn:", impl, conversion ? f32_compute_suffix : "");
    if (!seen.insert(candidate.info.id).second) continue;
    candidate.info.name = detail::cat(
        impl, " (reduction", conversion ? detail::cat(", ", f32_compute_name) : std::string(), ")");
    candidate.info.supported = true;
    candidate.info.deterministic = true;
    candidate.info.notes = {"reduction"};
    if (conversion) candidate.info.notes.emplace_back(f32_compute_note);
    if (impl.starts_with("ref")) {
      detail::mark_naive(candidate.info);
    } else if (const std::string_view isa = isa_of(impl, {"avx512", "avx2", "avx", "sse41"});
               !isa.empty()) {
      candidate.info.notes.emplace_back(isa);
    }
    candidate.pd = clone(pd, context);
    candidate.conversion = conversion;
    candidate.info.workspace_bytes =
        pd.scratchpad_desc().get_size() + (conversion ? conversion->bytes() : 0);
    list.push_back(std::move(candidate));
    ++added;
  } while (pd.next_impl());
  return added;
}

Candidate kernel_candidate() {
  Candidate candidate;
  candidate.kernel = true;
  candidate.info = kernel_info_of(kernel_id, "dnnx loop (f64 accumulation)");
  candidate.info.notes = {"kernel", "direct"};
  return candidate;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const ReduceDesc& desc,
                                       Direction direction, const std::string& isa) {
  std::vector<Candidate> list;
  if (direction != Direction::fwd) {
    list.push_back(kernel_candidate());
    order_supported_first(list);
    return list;
  }
  const ErrorContext context = detail::op_context(BackendKind::cpu, desc, direction);
  std::set<std::string> seen;
  std::string failure;
  std::size_t listed = 0;
  bool native_fast = false;
  if (dnnl::primitive_desc pd = create_pd(engine, desc, desc.dtype, context, failure)) {
    listed = append_implementations(list, seen, pd, nullptr, context);
    native_fast =
        std::any_of(list.begin(), list.end(), [](const Candidate& c) { return !c.info.naive; });
  }
  if (desc.dtype != DType::f32 && !native_fast) {
    std::string f32_failure;
    if (dnnl::primitive_desc pd = create_pd(engine, desc, DType::f32, context, f32_failure)) {
      const auto conversion = std::make_shared<const F32Conversion>(std::vector<ConvertedTensor>{
          {dense_md(desc.src_dims, desc.dtype, desc.layout), Access::read},
          {dense_md(desc.dst_dims, desc.dtype, desc.layout), Access::write}});
      listed += append_implementations(list, seen, pd, conversion, context);
    } else if (f32_failure != failure) {
      failure = detail::cat(failure, "; in f32 (", f32_compute_name, "): ", f32_failure);
    }
  }
  if (listed == 0) {
    Candidate unavailable;
    unavailable.info = unavailable_info(
        "reduction", std::string(),
        detail::cat("reduce ", to_string(desc.kind), ' ', to_string(desc.dtype), ' ',
                    to_string(desc.layout), " from ", desc.src_dims, " to ", desc.dst_dims),
        isa, failure);
    list.push_back(std::move(unavailable));
  }
  list.push_back(kernel_candidate());
  order_supported_first(list);
  return list;
}

// ---- cpu:kernel:reduce --------------------------------------------------------------------------

// Calls visit(offset) for the src offset of every element of dst element o's group, in
// row-major order over the reduced axes.
template <typename Visit>
void for_group(const detail::ReduceGeometry& g, std::int64_t o, Visit&& visit) {
  const std::int64_t base = detail::reduce_src_offset(g, o, 0);
  std::array<std::int64_t, 5> index{};
  std::int64_t offset = base;
  for (std::int64_t r = 0; r < g.count; ++r) {
    visit(offset);
    for (int m = g.reduced_rank - 1; m >= 0; --m) {  // odometer step
      const auto k = static_cast<std::size_t>(m);
      offset += g.reduced_strides[k];
      if (++index[k] < g.reduced_sizes[k]) break;
      offset -= g.reduced_strides[k] * g.reduced_sizes[k];
      index[k] = 0;
    }
  }
}

class KernelPlan final : public LayerPlan<detail::ReduceArgs> {
 public:
  KernelPlan(const ReduceDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        direction_(direction),
        geometry_(detail::reduce_geometry(desc)) {}

  void execute(const detail::ReduceArgs& args, detail::Workspace) override {
    if (direction_ == Direction::fwd) {
      check_dense(args.src, "src", desc_.src_dims);
      check_dense(args.dst, "dst", desc_.dst_dims);
      forward(static_cast<const std::byte*>(args.src->data()),
              static_cast<std::byte*>(args.dst->data()));
      return;
    }
    check_dense(args.diff_dst, "diff_dst", desc_.dst_dims);
    check_dense(args.diff_src, "diff_src", desc_.src_dims);
    const std::byte* src = nullptr;
    const std::byte* dst = nullptr;
    if (desc_.backward_reads_values()) {
      check_dense(args.src, "src", desc_.src_dims);
      check_dense(args.saved_dst, "dst", desc_.dst_dims);
      src = static_cast<const std::byte*>(args.src->data());
      dst = static_cast<const std::byte*>(args.saved_dst->data());
    }
    backward(src, dst, static_cast<const std::byte*>(args.diff_dst->data()),
             static_cast<std::byte*>(args.diff_src->data()));
  }

 private:
  void check_dense(const Tensor* tensor, const char* role, const Dims& dims) const {
    check_dense_on_cpu(tensor, role, dims, desc_.dtype, desc_.layout, context_);
  }
  float load(const std::byte* base, std::int64_t offset) const {
    return detail::load_f32(base + offset * static_cast<std::int64_t>(size_), desc_.dtype);
  }
  void store(std::byte* base, std::int64_t offset, double value) const {
    detail::store_f32(base + offset * static_cast<std::int64_t>(size_), desc_.dtype,
                      detail::round_once_f32(value, desc_.dtype));
  }

  void forward(const std::byte* src, std::byte* dst) const {
    const detail::ReduceGeometry& g = geometry_;
    const ReduceKind kind = desc_.kind;
    threads::run_ranges(g.outputs, g.outputs * g.count, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t o = first; o < last; ++o) {
        double acc = kind == ReduceKind::max   ? -std::numeric_limits<double>::infinity()
                     : kind == ReduceKind::min ? std::numeric_limits<double>::infinity()
                                               : 0.0;
        bool nan = false;
        for_group(g, o, [&](std::int64_t offset) {
          const double x = load(src, offset);
          switch (kind) {
            case ReduceKind::sum:
            case ReduceKind::mean: acc += x; break;
            case ReduceKind::norm1: acc += std::fabs(x); break;
            case ReduceKind::norm2: acc += x * x; break;
            case ReduceKind::max:
              nan = nan || std::isnan(x);
              acc = std::max(acc, x);
              break;
            case ReduceKind::min:
              nan = nan || std::isnan(x);
              acc = std::min(acc, x);
              break;
          }
        });
        if (kind == ReduceKind::mean) acc /= static_cast<double>(g.count);
        if (kind == ReduceKind::norm2) acc = std::sqrt(acc);
        if (nan) acc = std::numeric_limits<double>::quiet_NaN();
        store(dst, o, acc);
      }
    });
  }

  void backward(const std::byte* src, const std::byte* dst, const std::byte* diff_dst,
                std::byte* diff_src) const {
    const detail::ReduceGeometry& g = geometry_;
    const ReduceKind kind = desc_.kind;
    threads::run_ranges(
        g.outputs, g.outputs * g.count * 2, [&](std::int64_t first, std::int64_t last) {
          for (std::int64_t o = first; o < last; ++o) {
            const double dy = load(diff_dst, o);
            switch (kind) {
              case ReduceKind::sum:
              case ReduceKind::mean: {
                const double value =
                    kind == ReduceKind::mean ? dy / static_cast<double>(g.count) : dy;
                for_group(g, o, [&](std::int64_t offset) { store(diff_src, offset, value); });
                break;
              }
              case ReduceKind::max:
              case ReduceKind::min: {
                // Note [tied extrema]
                const float y = load(dst, o);
                std::int64_t ties = 0;
                for_group(g, o,
                          [&](std::int64_t offset) { ties += load(src, offset) == y ? 1 : 0; });
                const double share = ties > 0 ? dy / static_cast<double>(ties) : 0.0;
                for_group(g, o, [&](std::int64_t offset) {
                  store(diff_src, offset, load(src, offset) == y ? share : 0.0);
                });
                break;
              }
              case ReduceKind::norm1:
                for_group(g, o, [&](std::int64_t offset) {
                  const float x = load(src, offset);
                  store(diff_src, offset, x > 0 ? dy : x < 0 ? -dy : 0.0);
                });
                break;
              case ReduceKind::norm2: {
                const double y = load(dst, o);
                for_group(g, o, [&](std::int64_t offset) {
                  store(diff_src, offset, y == 0 ? 0.0 : load(src, offset) / y * dy);
                });
                break;
              }
            }
          }
        });
  }

  ReduceDesc desc_;
  Direction direction_;
  detail::ReduceGeometry geometry_;
  std::size_t size_ = size_of(desc_.dtype);
};

// ---- onednn:<impl> ------------------------------------------------------------------------------

// One reduction primitive on the caller's memory, or on f32 copies of it (Note [f32 compute]).
// Built once; execute() only rebinds pointers (Note [one stream] in runtime.hpp).
class Plan final : public LayerPlan<detail::ReduceArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const ReduceDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)) {
    const dnnl::engine& engine = runtime_->engine;
    const DType compute = candidate.conversion ? DType::f32 : desc.dtype;
    dnnl_call(context_, "building the primitive", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      step_ = make_step(candidate.pd, {}, engine);
      src_ = dnnl::memory(dense_md(desc.src_dims, compute, desc.layout), engine, DNNL_MEMORY_NONE);
      dst_ = dnnl::memory(dense_md(desc.dst_dims, compute, desc.layout), engine, DNNL_MEMORY_NONE);
      step_.args.push_back({DNNL_ARG_SRC, src_.get()});
      step_.args.push_back({DNNL_ARG_DST, dst_.get()});
    });
  }

  void execute(const detail::ReduceArgs& args, detail::Workspace workspace) override {
    void* src = data_of(args.src, "src");
    void* dst = data_of(args.dst, "dst");
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    if (conversions_) conversions_.use_copies(base, src, dst);
    bind(src_, src);
    bind(dst_, dst);
    run_step(step_, stream, base + conversions_.bytes(), context_);
    if (conversions_) conversions_.convert_out(base, stream, context_);
    wait(stream, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  F32Conversions conversions_;
  Step step_;
  dnnl::memory src_, dst_;
};

class OneDnnReduce final
    : public ListedLayerBackend<ReduceDesc, detail::ReduceArgs, Candidate, list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::ReduceArgs>> build(const ReduceDesc& desc,
                                                            Direction direction,
                                                            const Candidate& candidate) override {
    if (candidate.kernel) return std::make_shared<KernelPlan>(desc, direction, candidate);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reduce>> make_reduce_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnReduce>(std::move(runtime));
}

}  // namespace dnnx::onednn
