// The cpu backend's reorder, two candidates, the supported ones first (order_supported_first):
//   cpu:kernel:reorder     dnnx's threaded conversion loop (convert(), Note [dtype conversions] in
//                          convert.cpp) for the reorders that are one: src and dst in the same
//                          memory order and beta = 0, dst = alpha * src (nn's convert to f16/bf16
//                          and back). It moves no element across another, so other reorders are
//                          unsupported with that reason;
//   onednn:<impl>:reorder  oneDNN's reorder primitive, named by the implementation oneDNN picks (a
//                          reorder primitive descriptor has no next_impl(), so it is one
//                          candidate), or one unsupported "onednn:unavailable:reorder" with
//                          oneDNN's message.
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
#include "core/reorder_args.hpp"
#include "core/strings.hpp"

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

// Why dnnx's conversion loop cannot run `desc` (empty when it can).
std::string kernel_reason(const ReorderDesc& desc) {
  if (!desc.same_order()) {
    return detail::cat("dnnx's conversion loop keeps every element in place; ",
                       to_string(desc.src_layout), " -> ", to_string(desc.dst_layout), " of ",
                       desc.dims, " moves them (oneDNN's reorder transposes)");
  }
  if (desc.beta != 0) {
    return "dnnx's conversion loop writes dst = alpha * src; beta != 0 reads dst too (oneDNN's "
           "reorder adds it)";
  }
  return {};
}

Candidate kernel_candidate(const ReorderDesc& desc) {
  Candidate candidate;
  const std::string reason = kernel_reason(desc);
  if (reason.empty()) {
    candidate.info = kernel_info_of(kernel_id, "dnnx conversion loop (threaded)");
  } else {
    candidate.info = unsupported_info(kernel_id, "dnnx conversion loop (threaded)", reason);
  }
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
  // Where it runs, the conversion loop goes first: oneDNN 3.2 converts f16/bf16 on CPUs without
  // native support with its reference reorder (Note [dtype conversions]).
  std::vector<Candidate> list;
  list.push_back(kernel_candidate(desc));
  list.push_back(onednn_candidate(engine, desc, direction, isa));
  order_supported_first(list);
  return list;
}

// dnnx's conversion loop (cpu:kernel:reorder): the same memory order, beta = 0.
class KernelPlan final : public LayerPlan<detail::ReorderArgs> {
 public:
  KernelPlan(const ReorderDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc) {
    if (const std::string reason = kernel_reason(desc); !reason.empty())
      detail::raise(ErrorKind::Unsupported, reason, context_);
  }

  void execute(const detail::ReorderArgs& args, detail::Workspace) override {
    check_dense_on_cpu(args.src, "src", desc_.dims, desc_.src_dtype, desc_.src_layout, context_);
    check_dense_on_cpu(args.dst, "dst", desc_.dims, desc_.dst_dtype, desc_.dst_layout, context_);
    const std::int64_t count = desc_.dims.product();
    if (count == 0) return;
    convert(data_of(args.src, "src"), desc_.src_dtype, data_of(args.dst, "dst"), desc_.dst_dtype,
            count, desc_.alpha);
  }

 private:
  ReorderDesc desc_;
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
