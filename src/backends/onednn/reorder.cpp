// The cpu backend's reorder, two candidates (Note [cpu reorder candidates]):
//   cpu:kernel:reorder     dnnx's threaded loops, every case;
//   onednn:<impl>:reorder  oneDNN's reorder primitive, named by the implementation oneDNN picks (a
//                          reorder primitive descriptor has no next_impl(), so it is one
//                          candidate), or one unsupported "onednn:unavailable:reorder" with
//                          oneDNN's message (oneDNN 3.2 has no f16 <-> bf16 reorder).
//
// Note [cpu reorder candidates]
// dnnx's loops convert every value through f32 (core/dtype.hpp's load_f32 / store_f32, rounding
// to nearest even), compute alpha * src + beta * dst in f32 and store once: elementwise when
// src and dst share their memory order, else per image the transpose of its C x S (or S x C)
// matrix in 32 x 32 tiles, images and tile rows split over threads. A conversion with beta = 0
// in one memory order - nn's convert - is convert() itself (F16C, Note [dtype conversions] in
// convert.cpp), and then the loop goes first: oneDNN 3.2 converts f16/bf16 on CPUs without
// native support with its reference reorder, tens of times slower. Otherwise oneDNN's reorder
// (jit transposes) goes first where it has one.
//
// Note [oneDNN reorder scales]
// dst = alpha * src + beta * dst is the reorder with a runtime scale alpha on its source (mask 0,
// one f32 value the plan holds) and, when beta != 0, a sum post-op of scale beta. oneDNN computes
// in f32 and rounds once to dst's data type. With beta = 0 there is no post-op and dst is only
// written, so NaN in it does not matter. Reorders do not accumulate across elements: the result is
// deterministic (the parity test checks it bitwise).

#include "backends/onednn/check.hpp"
#include "backends/onednn/convert.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "backends/onednn/simd.hpp"
#include "core/dtype.hpp"
#include "core/reorder_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using memory = dnnl::memory;

constexpr std::string_view formulation = "reorder";
constexpr const char* kernel_id = "cpu:kernel:reorder";

memory::desc dense_md(const Dims& dims, DType dtype, Layout layout) {
  const Dims strides = dense_strides(dims, layout);
  return memory::desc(memory::dims(dims.begin(), dims.end()), data_type_of(dtype),
                      memory::dims(strides.begin(), strides.end()));
}

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc_base pd;  // null if unsupported or dnnx's loop
  bool kernel = false;           // cpu:kernel:reorder
};

// Note [cpu reorder candidates]: whether the plain conversion loop is the whole reorder.
bool is_conversion(const ReorderDesc& desc) { return desc.same_order() && desc.beta == 0; }

Candidate kernel_candidate(const ReorderDesc& desc) {
  Candidate candidate;
  candidate.info = kernel_info_of(kernel_id, is_conversion(desc)
                                                 ? "dnnx conversion loop (threaded, F16C)"
                                                 : "dnnx reorder loop (threaded, f32 arithmetic)");
  candidate.info.notes = {"kernel"};
  candidate.kernel = true;
  return candidate;
}

// Note [oneDNN reorder scales]
dnnl::primitive_attr reorder_attr(const ReorderDesc& desc) {
  dnnl::primitive_attr attr = user_scratchpad();
  if (desc.alpha != 1) attr.set_scales_mask(DNNL_ARG_SRC, 0);
  if (desc.beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(desc.beta);
    attr.set_post_ops(ops);
  }
  return attr;
}

// The oneDNN candidate of `desc`: its reorder primitive, or why oneDNN has none.
Candidate onednn_candidate(const dnnl::engine& engine, const ReorderDesc& desc, Direction direction,
                           const std::string& isa) {
  const ErrorContext context = detail::op_context(BackendKind::cpu, desc, direction);
  std::string failure;
  dnnl::reorder::primitive_desc pd = create_or_unavailable(
      [&] {
        return dnnl::reorder::primitive_desc(
            engine, dense_md(desc.dims, desc.src_dtype, desc.src_layout), engine,
            dense_md(desc.dims, desc.dst_dtype, desc.dst_layout), reorder_attr(desc));
      },
      "reorder primitive descriptor", context, failure, Unavailable::unimplemented_or_invalid);
  Candidate candidate;
  if (!pd) {
    candidate.info = unavailable_info(
        formulation, {},
        detail::cat("reorder ", to_string(desc.src_dtype), ' ', to_string(desc.src_layout), " -> ",
                    to_string(desc.dst_dtype), ' ', to_string(desc.dst_layout)),
        isa, failure);
    return candidate;
  }
  const std::string impl = sanitize(pd.impl_info_str());
  candidate.info.id = detail::cat("onednn:", impl, ":", formulation);
  candidate.info.name = detail::cat(impl, " (oneDNN reorder)");
  candidate.info.supported = true;
  candidate.info.deterministic = true;
  candidate.info.notes = {std::string(formulation)};
  if (impl.starts_with("ref")) detail::mark_naive(candidate.info);
  candidate.info.workspace_bytes = pd.scratchpad_desc().get_size();
  candidate.pd = pd;
  return candidate;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const ReorderDesc& desc,
                                       Direction direction, const std::string& isa) {
  // Note [cpu reorder candidates]: the order.
  std::vector<Candidate> list;
  list.push_back(onednn_candidate(engine, desc, direction, isa));
  list.push_back(kernel_candidate(desc));
  if (is_conversion(desc) || !list.front().info.supported) std::swap(list[0], list[1]);
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

// dnnx's loops (cpu:kernel:reorder, Note [cpu reorder candidates]).
class KernelPlan final : public LayerPlan<detail::ReorderArgs> {
 public:
  KernelPlan(const ReorderDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc) {
    if (desc.same_order()) return;
    // Different orders need rank >= 3 with C > 1 and a spatial extent > 1.
    std::int64_t spatial = 1;
    for (int i = 2; i < desc.dims.rank(); ++i) spatial *= desc.dims[i];
    const bool from_first = desc.src_layout == Layout::channels_first;
    batch_ = desc.dims[0];
    rows_ = from_first ? desc.dims[1] : spatial;
    cols_ = from_first ? spatial : desc.dims[1];
  }

  void execute(const detail::ReorderArgs& args, detail::Workspace) override {
    check_dense_on_cpu(args.src, "src", desc_.dims, desc_.src_dtype, desc_.src_layout, context_);
    check_dense_on_cpu(args.dst, "dst", desc_.dims, desc_.dst_dtype, desc_.dst_layout, context_);
    const std::int64_t count = desc_.dims.product();
    if (count == 0) return;
    const auto* src = static_cast<const std::byte*>(data_of(args.src, "src"));
    auto* dst = static_cast<std::byte*>(data_of(args.dst, "dst"));
    if (is_conversion(desc_)) {
      convert(src, desc_.src_dtype, dst, desc_.dst_dtype, count, desc_.alpha);
      return;
    }
    const std::size_t src_size = size_of(desc_.src_dtype);
    const std::size_t dst_size = size_of(desc_.dst_dtype);
    // dst element `to` from src element `from` (offsets in elements).
    const auto move = [&](std::int64_t from, std::int64_t to) {
      float value = desc_.alpha * detail::load_f32(src + static_cast<std::size_t>(from) * src_size,
                                                   desc_.src_dtype);
      std::byte* out = dst + static_cast<std::size_t>(to) * dst_size;
      if (desc_.beta != 0) value += desc_.beta * detail::load_f32(out, desc_.dst_dtype);
      detail::store_f32(out, desc_.dst_dtype, value);
    };
    if (desc_.same_order()) {
      constexpr std::int64_t block = 4096;
      simd::parallel_blocks((count + block - 1) / block, count,
                            [&](std::int64_t first, std::int64_t end) {
                              const std::int64_t stop = std::min(count, end * block);
                              for (std::int64_t i = first * block; i < stop; ++i) move(i, i);
                            });
      return;
    }
    // Per image, the transpose of its rows_ x cols_ matrix in tiles; a block is one image's row
    // of tiles.
    constexpr std::int64_t tile = 32;
    const std::int64_t tile_rows = (rows_ + tile - 1) / tile;
    const std::int64_t matrix = rows_ * cols_;
    simd::parallel_blocks(batch_ * tile_rows, count, [&](std::int64_t first, std::int64_t end) {
      for (std::int64_t block = first; block < end; ++block) {
        const std::int64_t image = block / tile_rows;
        const std::int64_t row0 = (block % tile_rows) * tile;
        const std::int64_t row_end = std::min(rows_, row0 + tile);
        const std::int64_t base = image * matrix;
        for (std::int64_t col0 = 0; col0 < cols_; col0 += tile) {
          const std::int64_t col_end = std::min(cols_, col0 + tile);
          for (std::int64_t c = col0; c < col_end; ++c)
            for (std::int64_t r = row0; r < row_end; ++r)
              move(base + r * cols_ + c, base + c * rows_ + r);
        }
      }
    });
  }

 private:
  ReorderDesc desc_;
  std::int64_t batch_ = 1, rows_ = 1, cols_ = 1;  // the transpose, when the orders differ
};

// The reorder primitive, built once; execute() only rebinds pointers (Note [one stream] in
// runtime.hpp).
class Plan final : public LayerPlan<detail::ReorderArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const ReorderDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        alpha_(desc.alpha) {
    DNNX_ASSERT(candidate.pd, "reorder plan of an unsupported candidate");
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the reorder primitive", [&] {
      step_ = make_step(candidate.pd, {}, engine);
      src_ = memory(candidate.pd.src_desc(), engine, DNNL_MEMORY_NONE);
      dst_ = memory(candidate.pd.dst_desc(), engine, DNNL_MEMORY_NONE);
      step_.args.push_back({DNNL_ARG_FROM, src_.get()});
      step_.args.push_back({DNNL_ARG_TO, dst_.get()});
      if (desc.alpha != 1) {
        scale_ = memory(memory::desc({1}, memory::data_type::f32, {1}), engine, &alpha_);
        step_.args.push_back({DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, scale_.get()});
      }
    });
  }

  void execute(const detail::ReorderArgs& args, detail::Workspace workspace) override {
    check_dense_on_cpu(args.src, "src", desc_.dims, desc_.src_dtype, desc_.src_layout, context_);
    check_dense_on_cpu(args.dst, "dst", desc_.dims, desc_.dst_dtype, desc_.dst_layout, context_);
    check_workspace(workspace);
    if (desc_.dims.product() == 0) return;
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    bind(src_, data_of(args.src, "src"));
    bind(dst_, data_of(args.dst, "dst"));
    run_step(step_, stream, workspace.data, context_);
    wait(stream, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ReorderDesc desc_;
  float alpha_;  // the runtime scale's value (Note [oneDNN reorder scales])
  Step step_;
  memory src_, dst_, scale_;
};

class OneDnnReorder final : public ListedLayerBackend<ReorderDesc, detail::ReorderArgs, Candidate,
                                                      list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::ReorderArgs>> build(const ReorderDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    if (candidate.kernel) return std::make_shared<KernelPlan>(desc, direction, candidate);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::reorder>> make_reorder_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnReorder>(std::move(runtime));
}

}  // namespace dnnx::onednn
