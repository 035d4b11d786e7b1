// The cpu backend's convolution: candidate lists (conv_list.cpp) and plans, both cached per
// backend instance, and plans that run a oneDNN convolution, with its reorders, on the caller's
// memory.

#include "backends/onednn/layers.hpp"

#include "backends/onednn/check.hpp"
#include "backends/onednn/conv_bias.hpp"
#include "backends/onednn/conv_list.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/memory.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

ErrorContext context_of(const ConvDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(implementation));
}

Dims role_dims(const ConvDesc& desc, Role::Shape shape) {
  switch (shape) {
    case Role::Shape::src: return desc.src_dims();
    case Role::Shape::weights: return desc.weights_dims();
    case Role::Shape::dst: return desc.dst_dims();
  }
  return {};
}

// Note [first execution]
// oneDNN's gemm-based convolutions (x64:gemm:jit) generate their GEMM kernels on their first
// execution in a process, not when the primitive is created: on ResNet-50's 1x1 layers that first
// call takes 35-63 ms against 2.5-3.4 ms afterwards. Exhaustive selection abandons a candidate
// whose first run is already far slower than the best (Note [abandoning slow candidates]), so that
// one-off cost would drop what is often the fastest candidate. A gemm plan therefore runs its
// steps once when it is built, on zeroed buffers of its own: plans are built before the timed
// run (and before a call's run), so the code generation is never timed.

// Runs one candidate: optional reorders of the inputs into the workspace, the convolution, an
// optional reorder of the output back; for an f32-compute candidate the conversions around them
// (Note [f32 compute convolution] in conv_list.cpp). Every primitive and memory object is made
// here, once; execute() only rebinds data pointers (Note [one stream]).
class Plan final : public detail::ConvPlan {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
       const Candidate& candidate)
      : runtime_(std::move(runtime)),
        info_(candidate.info),
        context_(context_of(desc, direction, candidate.info.id)),
        direction_(direction),
        layout_(desc.layout),
        dtype_(desc.dtype),
        hint_(candidate.hint) {
    const auto& direction_roles = roles(direction);
    const ConvGeometry geometry = conv_geometry(desc);
    ConvDesc f32_desc = desc;
    f32_desc.dtype = DType::f32;
    const ConvGeometry f32_geometry = conv_geometry(f32_desc);
    const bool f32_compute = candidate.origin.f32_compute;
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitives", [&] {
      for (std::size_t r = 0; r < 3; ++r) {
        const Role& role = direction_roles[r];
        dims_[r] = role_dims(desc, role.shape);
        offsets_[r] = candidate.buffer_offsets[r];
        if (f32_compute) {
          // The caller's tensor is only converted (by the host), never read by a primitive.
          buffers_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
          if (candidate.reorders[r]) {
            user_[r] = dnnl::memory(user_md(f32_geometry, role), engine, DNNL_MEMORY_NONE);
            offsets_user_[r] = candidate.staging_offset;
          }
        } else if (candidate.reorders[r]) {
          user_[r] = dnnl::memory(user_md(geometry, role), engine, DNNL_MEMORY_NONE);
          buffers_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
        } else {
          // Same bytes as the caller's layout (same_layout), described as the conv expects.
          user_[r] = dnnl::memory(candidate.inner[r], engine, DNNL_MEMORY_NONE);
        }
      }
      // The f32 copy of role r in the caller's layout: the staging region or its buffer.
      const auto conversion = [&](std::size_t r, bool into_f32) {
        return Conversion{r, candidate.reorders[r] ? candidate.staging_offset : offsets_[r],
                          dims_[r].product(), dtype_, into_f32};
      };
      for (std::size_t r = 0; r < 2; ++r) {
        if (f32_compute) steps_.emplace_back(conversion(r, true));
        if (!candidate.reorders[r]) continue;
        add_step(candidate.reorders[r],
                 {{DNNL_ARG_FROM, user_[r].get()}, {DNNL_ARG_TO, buffers_[r].get()}});
      }
      std::vector<dnnl_exec_arg_t> conv_args;
      for (std::size_t r = 0; r < 3; ++r) {
        const dnnl::memory& memory = buffers_[r] ? buffers_[r] : user_[r];
        conv_args.push_back({direction_roles[r].arg, memory.get()});
      }
      add_step(candidate.conv, std::move(conv_args));
      if (candidate.reorders[2]) {
        add_step(candidate.reorders[2],
                 {{DNNL_ARG_FROM, buffers_[2].get()}, {DNNL_ARG_TO, user_[2].get()}});
      }
      if (f32_compute) steps_.emplace_back(conversion(2, false));
    });
    if (info_.has_note("gemm")) prime();
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const std::array<const Tensor*, 3> tensors = bound_tensors(args);
    const auto& direction_roles = roles(direction_);
    for (std::size_t r = 0; r < 3; ++r) check_tensor(tensors[r], direction_roles[r], dims_[r]);
    check_workspace(workspace, info_.workspace_bytes, context_);
    std::array<void*, 3> data{};
    for (std::size_t r = 0; r < 3; ++r) data[r] = tensors[r]->data();
    std::lock_guard lock(runtime_->mutex);
    run(static_cast<std::byte*>(workspace.data), data);
  }

 private:
  // Binds the memory objects (the caller's tensors at `data`, the buffers in the workspace at
  // `base`) and runs every step.
  void run(std::byte* base, const std::array<void*, 3>& data) {
    for (std::size_t r = 0; r < 3; ++r) {
      if (user_[r]) bind(user_[r], offsets_user_[r] ? base + *offsets_user_[r] : data[r]);
      if (buffers_[r]) bind(buffers_[r], base + offsets_[r]);
    }
    const dnnl_stream_t stream = runtime_->stream.get();
    run_plan_steps(steps_, stream, base, data, context_);
    wait(stream, context_);
  }

  // Note [first execution]: one run on zeroed buffers of the plan's own, freed afterwards; the
  // memory objects are rebound to the caller's pointers by every execute().
  void prime() {
    std::size_t bytes = round_up(info_.workspace_bytes);
    std::array<std::size_t, 3> sizes{};
    for (std::size_t r = 0; r < 3; ++r) {
      sizes[r] = round_up(static_cast<std::size_t>(dims_[r].product()) * size_of(dtype_));
      bytes += sizes[r];
    }
    std::vector<std::byte> scratch(bytes + buffer_alignment);
    auto* cursor = reinterpret_cast<std::byte*>(
        (reinterpret_cast<std::uintptr_t>(scratch.data()) + buffer_alignment - 1) &
        ~std::uintptr_t{buffer_alignment - 1});
    std::byte* base = cursor;
    cursor += round_up(info_.workspace_bytes);
    std::array<void*, 3> data{};
    for (std::size_t r = 0; r < 3; ++r) {
      data[r] = cursor;
      cursor += sizes[r];
    }
    std::lock_guard lock(runtime_->mutex);  // Note [one stream]
    run(base, data);
  }

  // A member, so that a std::byte* argument does not find std::bind by argument-dependent lookup.
  void bind(const dnnl::memory& memory, void* data) const { onednn::bind(memory, data, context_); }

  void add_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args) {
    steps_.emplace_back(make_step(pd, std::move(args), runtime_->engine));
  }

  std::array<const Tensor*, 3> bound_tensors(const detail::ConvArgs& args) const {
    switch (direction_) {
      case Direction::fwd: return {args.src, args.weights, args.dst};
      case Direction::bwd_data: return {args.diff_dst, args.weights, args.diff_src};
      case Direction::bwd_weights: return {args.src, args.diff_dst, args.diff_weights};
      case Direction::fwd_training: break;  // not a convolution direction
    }
    return {};
  }

  void check_tensor(const Tensor* tensor, const Role& role, const Dims& dims) const {
    check_dense_on_cpu(tensor, role.name, dims, dtype_, layout_, context_);
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  Layout layout_;
  DType dtype_;
  // oneDNN's backward primitives keep a plain pointer to their forward hint: held (and destroyed
  // after the primitives) so that a plan stays valid after the backend and its candidate lists.
  dnnl::primitive_desc hint_;
  std::array<Dims, 3> dims_;
  // The caller's tensors as the primitives read them (null: not read by a primitive), or for an
  // f32-compute candidate the f32 copy in the workspace a reorder reads or writes.
  std::array<dnnl::memory, 3> user_;
  std::array<std::optional<std::size_t>, 3> offsets_user_;  // where such a copy lies
  std::array<dnnl::memory, 3> buffers_;  // the convolution's tensors in the workspace (null: none)
  std::array<std::size_t, 3> offsets_{};
  std::vector<PlanStep> steps_;
};

// Candidate lists and plans are ListedOpBackend's (kept per (desc, direction) and per id).
class OneDnnConv final
    : public detail::ListedOpBackend<ConvDesc, detail::ConvArgs, Candidate, detail::ConvBackend> {
 public:
  explicit OneDnnConv(std::shared_ptr<Runtime> runtime)
      : ListedOpBackend(BackendKind::cpu), runtime_(std::move(runtime)), bias_(runtime_) {}

  void bias_fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) override {
    bias_.fwd(desc, bias, dst);
  }

  void bias_bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) override {
    bias_.bwd(desc, diff_dst, diff_bias);
  }

 private:
  std::vector<Candidate> enumerate(const ConvDesc& desc, Direction direction) override {
    return list_conv_candidates(runtime_->engine, desc, direction, runtime_->isa).candidates;
  }
  std::shared_ptr<detail::ConvPlan> build(const ConvDesc& desc, Direction direction,
                                          const Candidate& candidate) override {
    return std::make_shared<Plan>(runtime_, desc, direction, candidate);
  }

  std::shared_ptr<Runtime> runtime_;
  ConvBias bias_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv>> make_conv_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnConv>(std::move(runtime));
}

}  // namespace dnnx::onednn
