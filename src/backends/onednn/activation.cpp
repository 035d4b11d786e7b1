// The cpu backend's activations: oneDNN's eltwise primitive, every implementation of every
// algorithm that computes the desc's kind, as candidates; plans bind the caller's memory.
//
// Note [eltwise candidates]
// Each kind maps to oneDNN algorithms (alpha and beta are oneDNN's parameters):
//   identity      linear (1, 0)
//   relu          relu (0); backward also relu_use_dst_for_bwd
//   clipped_relu  clip_v2 (0, ceiling), clip (0, ceiling); backward also clip_v2_use_dst_for_bwd
//   tanh          tanh; backward also tanh_use_dst_for_bwd
//   sigmoid       logistic; backward also logistic_use_dst_for_bwd
//   elu           elu (alpha); backward also elu_use_dst_for_bwd
//   swish         swish (1)
// and each algorithm's implementations (next_impl, oneDNN's order) are candidates with ids
// "onednn:<impl>:<algorithm>". Forward lists only the algorithms that differ in forward (the
// use_dst ones compute the same forward as their plain twin). Backward lists the use_dst
// algorithms first: they read dst, which in-place layers keep, and need no transcendental; the
// plain ones read src. Each is unsupported when desc.saved lacks the tensor it reads; the plain
// linear (identity) reads neither. clip's backward passes the gradient at x == ceiling, where
// PyTorch's hardtanh (and dnnx) gives 0: it is listed unsupported for backward, clip_v2 is the
// exact one. elu_use_dst_for_bwd needs alpha >= 0 (Note [backward from dst]). ref:any
// implementations come after every other, as in conv (Note [candidate order]); an algorithm with no
// implementation at all is one unsupported "onednn:unavailable:<algorithm>" candidate carrying
// oneDNN's message. oneDNN's eltwise runs in place (dst = src, diff_src = diff_dst) in every
// implementation; its CPU kernels split work statically, so every candidate is deterministic
// (Note [determinism] in conv_list.cpp), which the parity test checks bitwise.
//
// Note [cpu activation candidates]
// After oneDNN's implementations (and before its ref:any ones) come dnnx's own loops
// (activation_kernel.cpp, Note [cpu activation kernel]): cpu:kernel:act forward, and backward
// cpu:kernel:act:dst (the derivative from dst, Note [backward from dst]) and cpu:kernel:act:src,
// each unsupported when desc.saved lacks the tensor it reads (the identity reads neither). Every
// kind, dtype and layout, in place or not, no workspace, deterministic. They come after oneDNN's so
// that the heuristic's pick stays oneDNN's: the kernel beats oneDNN's best jit code on large relu
// tensors in f32 and bf16 (streaming stores, Note [streaming stores]; bits, Note [relu on 16-bit
// storage]), but below streaming_min_bytes its f32 loops gain nothing on oneDNN's, and oneDNN's
// forward is faster on the transcendental kinds such as tanh; exhaustive selection times both.
// Figures: docs/benchmarks.md, "Kernel design measurements" (CPU activation kernel vs oneDNN).
//
// Note [f32-compute activations]
// An f16/bf16 algorithm whose native implementations are all ref:any or missing (oneDNN 3.2
// without avx512_core_fp16 / avx512_core: none at all) also gets one f32-compute candidate (Note
// [f32 compute] in layer_common.hpp): "onednn:<impl>:<algorithm>:f32", oneDNN's first
// implementation other than ref:any of the f32 primitive, which converts src (forward) or the
// forward tensor read and diff_dst (backward) to f32 in the workspace and converts dst or diff_src
// back. One per algorithm, since dnnx's kernel already runs every case without conversions and
// without workspace; order_supported_first puts it after the kernel, so the heuristic picks the
// kernel where oneDNN has no native code.

#include "backends/onednn/activation_kernel.hpp"
#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/activation_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using dnnl::algorithm;


// Note [cpu activation candidates]
constexpr const char* kernel_fwd_id = "cpu:kernel:act";
constexpr const char* kernel_dst_id = "cpu:kernel:act:dst";
constexpr const char* kernel_src_id = "cpu:kernel:act:src";

// The caller's dense tensor: desc.dims with desc.layout's strides.
memory::desc user_md(const ActivationDesc& desc) {
  const Dims strides = dense_strides(desc.dims, desc.layout);
  return memory::desc(memory::dims(desc.dims.begin(), desc.dims.end()), data_type_of(desc.dtype),
                      memory::dims(strides.begin(), strides.end()));
}

// Which forward tensor a backward algorithm reads.
enum class Reads : std::uint8_t { src, dst, nothing };

struct Algorithm {
  algorithm kind;
  std::string_view name;
  float alpha = 0, beta = 0;
  Reads reads = Reads::src;
  std::string bwd_defect;  // why its backward must not be used, if it must not
};

Algorithm make(algorithm kind, std::string_view name, float alpha, float beta, Reads reads,
               std::string bwd_defect = {}) {
  return {kind, name, alpha, beta, reads, std::move(bwd_defect)};
}

// Note [eltwise candidates]: the algorithms of (desc, direction) in priority order.
std::vector<Algorithm> algorithms(const ActivationDesc& desc, Direction direction) {
  const bool bwd = direction != Direction::fwd;
  const auto ceiling = static_cast<float>(desc.ceiling);
  const auto alpha = static_cast<float>(desc.alpha);
  std::vector<Algorithm> list;
  switch (desc.kind) {
    case ActivationKind::identity:
      list.push_back(make(algorithm::eltwise_linear, "linear", 1.0f, 0.0f, Reads::nothing));
      break;
    case ActivationKind::relu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_relu_use_dst_for_bwd, "relu_use_dst_for_bwd", 0, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_relu, "relu", 0, 0, Reads::src));
      break;
    case ActivationKind::clipped_relu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_clip_v2_use_dst_for_bwd, "clip_v2_use_dst_for_bwd",
                            0, ceiling, Reads::dst));
      list.push_back(make(algorithm::eltwise_clip_v2, "clip_v2", 0, ceiling, Reads::src));
      list.push_back(
          make(algorithm::eltwise_clip, "clip", 0, ceiling, Reads::src,
               "oneDNN's clip passes the gradient at x == ceiling, where hardtanh's is 0 "
               "(clip_v2 is the exact one)"));
      break;
    case ActivationKind::tanh:
      if (bwd)
        list.push_back(make(algorithm::eltwise_tanh_use_dst_for_bwd, "tanh_use_dst_for_bwd", 0, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_tanh, "tanh", 0, 0, Reads::src));
      break;
    case ActivationKind::sigmoid:
      if (bwd)
        list.push_back(make(algorithm::eltwise_logistic_use_dst_for_bwd, "logistic_use_dst_for_bwd",
                            0, 0, Reads::dst));
      list.push_back(make(algorithm::eltwise_logistic, "logistic", 0, 0, Reads::src));
      break;
    case ActivationKind::elu:
      if (bwd)
        list.push_back(make(algorithm::eltwise_elu_use_dst_for_bwd, "elu_use_dst_for_bwd", alpha, 0,
                            Reads::dst));
      list.push_back(make(algorithm::eltwise_elu, "elu", alpha, 0, Reads::src));
      break;
    case ActivationKind::swish:
      list.push_back(make(algorithm::eltwise_swish, "swish", 1.0f, 0, Reads::src));
      break;
  }
  return list;
}

// Why dnnx rules `alg` out for (desc, direction) before asking oneDNN; empty if it does not.
std::string exclusion(const ActivationDesc& desc, Direction direction, const Algorithm& alg) {
  if (direction == Direction::fwd) return {};
  if (!alg.bwd_defect.empty()) return alg.bwd_defect;
  if (alg.reads == Reads::src && desc.saved == ActivationSaved::dst) {
    return detail::cat(alg.name, " reads src in backward, and desc.saved = dst");
  }
  if (alg.reads == Reads::dst) {
    if (desc.saved == ActivationSaved::src)
      return detail::cat(alg.name, " reads dst in backward, and desc.saved = src");
    if (desc.kind == ActivationKind::elu && desc.alpha < 0) {
      return detail::cat(
          "elu backward from dst needs alpha >= 0 (dst does not tell the branches "
          "apart otherwise), got alpha ",
          desc.alpha);
    }
  }
  return {};
}

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;    // the implementation (null if unsupported or dnnx's kernel)
  dnnl::primitive_desc hint;  // backward: the forward pd `pd` points to (must outlive it)
  Reads reads = Reads::src;
  bool kernel = false;  // dnnx's loops (Note [cpu activation candidates])
  // Note [f32-compute activations]: the conversions around `pd`, which then runs on f32 copies of
  // the tensors; null for native candidates.
  std::shared_ptr<const F32Conversion> conversion;
};

// The caller's tensors an f32-compute candidate converts, in the order its plan binds them
// (Plan::memories_): src, dst forward; the forward tensor read, diff_dst, diff_src backward.
std::vector<ConvertedTensor> converted_tensors(const ActivationDesc& desc, Direction direction) {
  const memory::desc md = user_md(desc);
  if (direction == Direction::fwd) return {{md, Access::read}, {md, Access::write}};
  return {{md, Access::read}, {md, Access::read}, {md, Access::write}};
}

// The eltwise primitive descriptors of `alg` on tensors `md`, at oneDNN's first implementation:
// the forward one (also the backward's hint) and the one of `direction`; null with `failure` set
// when oneDNN has none.
struct Eltwise {
  dnnl::primitive_desc hint, pd;
};

Eltwise create_eltwise(const dnnl::engine& engine, const memory::desc& md, const Algorithm& alg,
                       Direction direction, const ErrorContext& context, std::string& failure) {
  const dnnl::primitive_attr attr = user_scratchpad();
  // oneDNN reports some parameters it cannot run (e.g. elu_use_dst_for_bwd with alpha < 0) as
  // invalid arguments rather than unimplemented: both mean "no implementation" here.
  dnnl::eltwise_forward::primitive_desc hint = create_or_unavailable(
      [&] {
        return dnnl::eltwise_forward::primitive_desc(engine, dnnl::prop_kind::forward_training,
                                                     alg.kind, md, md, alg.alpha, alg.beta, attr);
      },
      detail::cat(alg.name, " forward primitive descriptor"), context, failure,
      Unavailable::unimplemented_or_invalid);
  Eltwise eltwise{hint, hint};
  if (hint && direction != Direction::fwd) {
    eltwise.pd = create_or_unavailable(
        [&] {
          return dnnl::primitive_desc(dnnl::eltwise_backward::primitive_desc(
              engine, alg.kind, md, md, md, alg.alpha, alg.beta, hint, attr));
        },
        detail::cat(alg.name, " backward primitive descriptor"), context, failure,
        Unavailable::unimplemented_or_invalid);
  }
  return eltwise;
}

// dnnx's loops for (desc, direction) (Note [cpu activation candidates]).
void add_kernel_candidates(const ActivationDesc& desc, Direction direction,
                           std::vector<Candidate>& list) {
  const std::string level(simd::to_string(simd::best_level()));
  auto make_kernel = [&](const char* id, Reads reads, std::string name) {
    Candidate candidate;
    candidate.kernel = true;
    candidate.reads = reads;
    candidate.info.id = id;
    candidate.info.name = std::move(name);
    candidate.info.deterministic = true;
    candidate.info.notes = {"dnnx", "direct", level};
    if (reads == Reads::dst) candidate.info.notes.emplace_back("use_dst");
    candidate.info.families = {"none"};
    return candidate;
  };
  if (direction == Direction::fwd) {
    Candidate candidate = make_kernel(kernel_fwd_id, Reads::src, "dnnx elementwise loop (f32)");
    candidate.info.supported = true;
    list.push_back(std::move(candidate));
    return;
  }
  for (const Reads reads : {Reads::dst, Reads::src}) {
    const bool from_dst = reads == Reads::dst;
    Candidate candidate =
        make_kernel(from_dst ? kernel_dst_id : kernel_src_id, reads,
                    from_dst ? "dnnx elementwise loop (f32, derivative from dst)"
                             : "dnnx elementwise loop (f32, derivative from src)");
    const ActivationSaved lacking = from_dst ? ActivationSaved::src : ActivationSaved::dst;
    std::string why;
    if (desc.kind != ActivationKind::identity && desc.saved == lacking) {
      why = detail::cat("the kernel reads ", from_dst ? "dst" : "src",
                        " in backward, and desc.saved = ", to_string(desc.saved));
    } else {
      act::backward_supported(desc, from_dst ? act::From::dst : act::From::src, &why);
    }
    candidate.info.reason = why;
    candidate.info.supported = why.empty();
    list.push_back(std::move(candidate));
  }
}

void describe(AlgoInfo& info, const std::string& impl, const Algorithm& alg, bool f32_compute) {
  info.name = detail::cat(impl, " (", alg.name,
                          f32_compute ? detail::cat(", ", f32_compute_name) : std::string(), ")");
  info.deterministic = true;
  if (f32_compute) info.notes.emplace_back(f32_compute_note);
  if (impl.starts_with("ref")) {
    detail::mark_naive(info);
  }
  if (const std::string_view isa = isa_of(impl, {"avx512", "avx2", "avx", "sse41"}); !isa.empty())
    info.notes.emplace_back(isa);
  if (alg.reads == Reads::dst) info.notes.emplace_back("use_dst");
}

// Appends a candidate per implementation of `eltwise` (at its first) of `alg`: every one for
// native candidates, the first other than ref:any for f32 compute (`conversion` set; Note
// [f32-compute activations]). `why` rules them out when not empty. Returns how many were
// appended; `fast` is set when one of them is not ref:any.
std::size_t append_implementations(std::vector<Candidate>& list, std::set<std::string>& seen,
                                   Eltwise& eltwise, const Algorithm& alg, const std::string& why,
                                   const std::shared_ptr<const F32Conversion>& conversion,
                                   Direction direction, const ErrorContext& context, bool& fast) {
  const std::size_t before = list.size();
  do {
    const std::string impl = sanitize(eltwise.pd.impl_info_str());
    const bool reference = impl.starts_with("ref");
    if (conversion && reference) continue;
    Candidate candidate;
    candidate.info.id =
        detail::cat("onednn:", impl, ":", alg.name, conversion ? f32_compute_suffix : "");
    if (!seen.insert(candidate.info.id).second) continue;
    describe(candidate.info, impl, alg, conversion != nullptr);
    candidate.reads = alg.reads;
    fast = fast || !reference;
    if (!why.empty()) {
      candidate.info.reason = why;
    } else {
      candidate.pd = clone(eltwise.pd, context);
      candidate.hint = direction == Direction::fwd ? dnnl::primitive_desc() : eltwise.hint;
      candidate.conversion = conversion;
      candidate.info.supported = true;
      candidate.info.workspace_bytes =
          eltwise.pd.scratchpad_desc().get_size() + (conversion ? conversion->bytes() : 0);
    }
    list.push_back(std::move(candidate));
    if (conversion) break;
  } while (eltwise.pd.next_impl());
  return list.size() - before;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const ActivationDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = detail::op_context(BackendKind::cpu, desc, direction);
  const memory::desc md = user_md(desc);
  std::vector<Candidate> list;
  std::set<std::string> seen;
  for (const Algorithm& alg : algorithms(desc, direction)) {
    // Implementations dnnx rules out are still listed, so that their ids do not depend on the desc.
    const std::string why = exclusion(desc, direction, alg);
    std::string failure;
    std::size_t listed = 0;
    bool native_fast = false;
    Eltwise native = create_eltwise(engine, md, alg, direction, context, failure);
    if (native.pd) {
      listed += append_implementations(list, seen, native, alg, why, nullptr, direction, context,
                                       native_fast);
    }
    // Note [f32-compute activations]
    if (desc.dtype != DType::f32 && !native_fast) {
      std::string f32_failure;
      Eltwise f32 = create_eltwise(engine, as_f32(md), alg, direction, context, f32_failure);
      bool f32_fast = false;
      if (f32.pd) {
        listed += append_implementations(
            list, seen, f32, alg, why,
            std::make_shared<const F32Conversion>(converted_tensors(desc, direction)), direction,
            context, f32_fast);
      } else if (f32_failure != failure) {
        failure = detail::cat(failure, "; in f32 (", f32_compute_name, "): ", f32_failure);
      }
    }
    if (listed > 0) continue;
    Candidate candidate;
    candidate.info = unsupported_info(
        detail::cat("onednn:unavailable:", alg.name),
        detail::cat(alg.name, " (no oneDNN implementation)"),
        !why.empty()
            ? why
            : detail::cat(onednn_version(), " has no ", alg.name, " implementation of act ",
                          to_string(direction), " for ", to_string(desc.dtype), ' ',
                          to_string(desc.layout), " on cpu isa ", isa, ": ", failure));
    candidate.info.notes = {std::string(alg.name)};
    list.push_back(std::move(candidate));
  }
  add_kernel_candidates(desc, direction, list);
  // Supported first; within them oneDNN's native code and dnnx's kernel, then f32 compute, then
  // ref:any (Notes [eltwise candidates], [f32-compute activations]).
  order_supported_first(list);
  return list;
}

// Runs one eltwise primitive on the caller's memory, or on f32 copies of it (Note [f32-compute
// activations]). Built once; execute() only rebinds pointers (Note [one stream] in runtime.hpp).
class Plan final : public LayerPlan<detail::ActivationArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const ActivationDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        direction_(direction),
        reads_(candidate.reads),
        hint_(candidate.hint) {
    const memory::desc md = candidate.conversion ? as_f32(user_md(desc)) : user_md(desc);
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitive", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      primitive_ = dnnl::primitive(candidate.pd.get());
      for (dnnl::memory& memory : memories_) memory = dnnl::memory(md, engine, DNNL_MEMORY_NONE);
      const memory::desc scratchpad = candidate.pd.scratchpad_desc();
      if (scratchpad.get_size() > 0)
        scratchpad_ = dnnl::memory(scratchpad, engine, DNNL_MEMORY_NONE);
    });
    if (direction_ == Direction::fwd) {
      args_ = {{DNNL_ARG_SRC, memories_[0].get()}, {DNNL_ARG_DST, memories_[1].get()}};
    } else {
      // linear's backward reads no data tensor, yet oneDNN wants one bound (Note [eltwise
      // candidates]): whichever is at hand is.
      const int data_arg = reads_ == Reads::dst ? DNNL_ARG_DST : DNNL_ARG_SRC;
      args_ = {{data_arg, memories_[0].get()},
               {DNNL_ARG_DIFF_DST, memories_[1].get()},
               {DNNL_ARG_DIFF_SRC, memories_[2].get()}};
    }
    if (scratchpad_) args_.push_back({DNNL_ARG_SCRATCHPAD, scratchpad_.get()});
  }

  void execute(const detail::ActivationArgs& args, detail::Workspace workspace) override {
    std::array<void*, 3> pointers{};
    if (direction_ == Direction::fwd) {
      pointers = {data_of(args.src, "src"), data_of(args.dst, "dst"), nullptr};
    } else {
      const Tensor* data = nullptr;
      switch (reads_) {
        case Reads::src: data = args.src; break;
        case Reads::dst: data = args.saved_dst; break;
        case Reads::nothing:
          data = args.src != nullptr         ? args.src
                 : args.saved_dst != nullptr ? args.saved_dst
                                             : args.diff_dst;
          break;
      }
      pointers = {data_of(data, reads_ == Reads::dst ? "dst" : "src"),
                  data_of(args.diff_dst, "diff_dst"), data_of(args.diff_src, "diff_src")};
    }
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    const std::size_t bound = direction_ == Direction::fwd ? 2 : 3;
    if (conversions_) {
      conversions_.convert_in(std::span(pointers.data(), bound), base);
      for (std::size_t i = 0; i < bound; ++i) pointers[i] = conversions_.copy(i, base);
    }
    for (std::size_t i = 0; i < bound; ++i) bind(memories_[i], pointers[i]);
    if (scratchpad_) bind(scratchpad_, base + conversions_.bytes());
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream, static_cast<int>(args_.size()),
                                           args_.data()),
                    context_, "executing");
    if (conversions_) conversions_.convert_out(base, stream, context_);
    wait(stream, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  Direction direction_;
  Reads reads_;
  // oneDNN's backward primitives keep a plain pointer to their forward hint: held, and destroyed
  // after the primitive.
  dnnl::primitive_desc hint_;
  F32Conversions conversions_;
  dnnl::primitive primitive_;
  std::array<dnnl::memory, 3> memories_;  // fwd: src, dst; bwd: src or dst, diff_dst, diff_src
  dnnl::memory scratchpad_;
  std::vector<dnnl_exec_arg_t> args_;
};

// dnnx's loops (Note [cpu activation candidates]): no oneDNN object, no lock.
class KernelPlan final : public LayerPlan<detail::ActivationArgs> {
 public:
  KernelPlan(const ActivationDesc& desc, Direction direction, const Candidate& candidate)
      : LayerPlan(candidate.info,
                  detail::op_context(BackendKind::cpu, desc, direction, candidate.info.id)),
        desc_(desc),
        direction_(direction),
        reads_(candidate.reads) {}

  void execute(const detail::ActivationArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace);
    const simd::Level level = simd::best_level();
    if (direction_ == Direction::fwd) {
      act::forward(desc_, level, data_of(args.src, "src"), data_of(args.dst, "dst"), desc_.numel());
      return;
    }
    // The identity's gradient reads neither forward tensor.
    const void* data = nullptr;
    if (desc_.kind != ActivationKind::identity) {
      data = reads_ == Reads::dst ? data_of(args.saved_dst, "dst") : data_of(args.src, "src");
    }
    act::backward(desc_, level, reads_ == Reads::dst ? act::From::dst : act::From::src, data,
                  data_of(args.diff_dst, "diff_dst"), data_of(args.diff_src, "diff_src"),
                  desc_.numel());
  }

 private:
  ActivationDesc desc_;
  Direction direction_;
  Reads reads_;
};

class OneDnnActivation final : public ListedLayerBackend<ActivationDesc, detail::ActivationArgs,
                                                         Candidate, list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::ActivationArgs>> build(
      const ActivationDesc& desc, Direction direction, const Candidate& candidate) override {
    if (candidate.kernel) return std::make_shared<KernelPlan>(desc, direction, candidate);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::activation>> make_activation_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnActivation>(std::move(runtime));
}

}  // namespace dnnx::onednn
