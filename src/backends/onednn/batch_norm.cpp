// The cpu backend's batch normalization: every implementation oneDNN offers for the desc's
// primitive (batch_normalization forward / backward), plus dnnx's own kernel.
//
// Note [batch-norm on oneDNN]
// oneDNN normalises per channel over N and the spatial positions (spatial mode). Per-activation
// mode is the same computation on src seen as an N x K matrix (K = C x spatial, format nc): one
// sample's values are contiguous in either layout, and the per-activation parameter tensors hold
// their values in the memory order of one sample (BatchNormDesc::param_dims), so K indexes both
// alike. oneDNN's primitive does not keep running statistics: a training forward writes the batch
// mean and (biased) variance, and the plan then applies PyTorch's update itself,
//   running_mean = (1 - m) running_mean + m mean,
//   running_var  = (1 - m) running_var  + m var n / (n - 1)      (n values per statistic),
// and stores saved_inv_std = 1 / sqrt(var + eps). The backward primitive takes a variance, which
// the plan recovers from saved_inv_std as 1 / inv_std^2 - eps (in f64; only var + eps enters the
// gradient, so this loses nothing that matters). Inference runs with use_global_stats on the
// running statistics; its backward with use_global_stats is the frozen-statistics gradient
// (oneDNN skips the terms of the batch statistics: ref_batch_normalization's
// calculate_diff_stats), which the parity tests check against the reference for every
// implementation.
//
// Note [batch-norm candidate order]
// oneDNN's jit implementations in oneDNN's own order, then dnnx's kernel (cpu:kernel:bnorm,
// batch_norm_kernel.cpp: every dtype, layout and mode, no workspace), then oneDNN's plain C++
// implementations (ncsp_bnorm, nspc_bnorm), then ref:any. On channels-first data oneDNN 3.2 offers
// no jit implementation, and its ncsp_bnorm is several times slower than the kernel; on
// channels-last data its bnorm_jit is faster than the kernel, and nspc_bnorm far slower than
// either (figures: docs/benchmarks.md, "Kernel design measurements", CPU batch-norm kernel vs
// oneDNN). Implementations are asked for on the caller's plain layout only: the blocked layouts
// oneDNN's jit kernels also read would cost a reorder of src and dst (and diff_dst, diff_src) per
// call, more than the memory-bound normalisation itself.
//
// Note [f32-compute batch norm]
// f16/bf16 data for which oneDNN has no native implementation other than ref:any (oneDNN 3.2
// without avx512_core_fp16 / avx512_core: none at all) also gets one f32-compute candidate (Note
// [f32 compute] in layer_common.hpp): "onednn:<impl>:f32", oneDNN's first implementation other
// than ref:any of the f32 primitive, which converts src (and diff_dst) to f32 in the workspace and
// converts dst or diff_src back; the statistics are f32 either way. One only, listed after the
// native plain C++ implementations and before ref:any: dnnx's kernel runs every case without the
// conversions, so it stays ahead.

#include "backends/onednn/batch_norm_kernel.hpp"
#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using bnorm::finish_training_fwd;
using bnorm::Stats;
using detail::BatchNormArgs;
using Tag = memory::format_tag;
using BatchNormPlan = detail::OpPlan<BatchNormArgs>;

constexpr const char* kernel_id = "cpu:kernel:bnorm";

ErrorContext context_of(const BatchNormDesc& desc, Direction direction,
                        std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(implementation));
}

// ---- shapes (Note [batch-norm on oneDNN])
// ---------------------------------------------------------

memory::desc data_md(const BatchNormDesc& desc) {
  const memory::data_type type = data_type_of(desc.dtype);
  if (desc.mode == BatchNormMode::per_activation) {
    return memory::desc({desc.dims[0], desc.statistics()}, type, Tag::nc);
  }
  memory::dims dims(desc.dims.begin(), desc.dims.end());
  const bool last = desc.layout == Layout::channels_last;
  switch (desc.dims.rank()) {
    case 2: return memory::desc(dims, type, Tag::nc);
    case 3: return memory::desc(dims, type, last ? Tag::nwc : Tag::ncw);
    case 4: return memory::desc(dims, type, last ? Tag::nhwc : Tag::nchw);
    default: return memory::desc(dims, type, last ? Tag::ndhwc : Tag::ncdhw);
  }
}

memory::desc stat_md(const BatchNormDesc& desc) {
  return memory::desc({desc.statistics()}, memory::data_type::f32, Tag::a);
}

dnnl::normalization_flags flags_of(const BatchNormDesc& desc) {
  using Flags = dnnl::normalization_flags;
  Flags flags = Flags::none;
  if (desc.affine) flags = flags | Flags::use_scale | Flags::use_shift;
  if (!desc.training) flags = flags | Flags::use_global_stats;
  return flags;
}

// ---- candidates ---------------------------------------------------------------------------------

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;    // a oneDNN implementation (null for the kernel or unsupported)
  dnnl::primitive_desc hint;  // backward: the forward descriptor oneDNN keeps a pointer to
  std::size_t scratch_bytes = 0;
  // Note [f32-compute batch norm]: the conversions around `pd`, which then runs on f32 copies of
  // the data tensors; null for native candidates.
  std::shared_ptr<const F32Conversion> conversion;
};

// The caller's data tensors an f32-compute candidate converts, in the order its plan binds them:
// src, dst forward; src, diff_dst, diff_src backward.
std::vector<ConvertedTensor> converted_tensors(const BatchNormDesc& desc, Direction direction) {
  const memory::desc data = data_md(desc);
  if (direction == Direction::fwd) return {{data, Access::read}, {data, Access::write}};
  return {{data, Access::read}, {data, Access::read}, {data, Access::write}};
}

// Workspace regions of a oneDNN plan: the f32 copies of an f32-compute candidate (`converted`
// bytes, Note [f32-compute batch norm]) at 0, then the scratchpad, then the statistics buffers a
// direction needs (Note [batch-norm on oneDNN]).
struct Regions {
  std::size_t scratchpad = 0;
  std::size_t mean = 0;  // training forward: batch mean when saved_mean is not given
  std::size_t var = 0;   // training: the variance oneDNN writes (fwd) or reads (bwd)
  std::size_t total = 0;
};

Regions regions_of(const BatchNormDesc& desc, Direction direction, std::size_t scratch,
                   std::size_t converted) {
  const std::size_t stats = round_up(static_cast<std::size_t>(desc.statistics()) * sizeof(float));
  Regions r;
  r.scratchpad = converted;
  std::size_t offset = converted + round_up(scratch);
  if (!desc.training) {
    r.total = converted + scratch;
    return r;
  }
  if (direction == Direction::fwd) {
    r.mean = offset;
    offset += stats;
  }
  r.var = offset;
  r.total = offset + stats;
  return r;
}

void describe(AlgoInfo& info, const std::string& impl, bool f32_compute) {
  info.name = f32_compute ? detail::cat(impl, " (", f32_compute_name, ")") : impl;
  if (f32_compute) info.notes.emplace_back(f32_compute_note);
  if (impl.starts_with("ref")) {
    detail::mark_naive(info);
  } else {
    info.notes.emplace_back(contains(impl, "jit") ? "jit" : "direct");
  }
  if (contains(impl, "nspc")) info.notes.emplace_back("nspc");
  if (contains(impl, "ncsp")) info.notes.emplace_back("ncsp");
  if (const std::string_view isa = isa_of(impl, {"avx512", "avx2", "sse41"}); !isa.empty())
    info.notes.emplace_back(isa);
}

AlgoInfo kernel_info(const BatchNormDesc& desc) {
  // Deterministic: the sums follow a fixed tree whatever the thread count (Note [batch-norm
  // loops]).
  AlgoInfo info = kernel_info_of(kernel_id, "dnnx kernel (f64 sums, fixed reduction tree)");
  info.notes = {"direct", "dnnx", std::string(simd::to_string(simd::best_level()))};
  info.families = {"none"};
  return info;
}

// oneDNN's primitive descriptor for (desc, direction) at its first implementation, or null with
// `failure` set when it has none.
dnnl::primitive_desc create_pd(const dnnl::engine& engine, const BatchNormDesc& desc,
                               const memory::desc& data, Direction direction,
                               const ErrorContext& context, dnnl::primitive_desc& hint,
                               std::string& failure) {
  const auto flags = flags_of(desc);
  const auto eps = static_cast<float>(desc.eps);
  const dnnl::primitive_attr attr = user_scratchpad();
  // A backward descriptor takes a forward_training hint with the same flags.
  const auto fwd_prop = desc.training || direction != Direction::fwd
                            ? dnnl::prop_kind::forward_training
                            : dnnl::prop_kind::forward_inference;
  dnnl::batch_normalization_forward::primitive_desc fwd = create_or_unavailable(
      [&] {
        return dnnl::batch_normalization_forward::primitive_desc(engine, fwd_prop, data, data, eps,
                                                                 flags, attr);
      },
      "forward primitive descriptor", context, failure);
  if (!fwd || direction == Direction::fwd) return fwd;
  hint = fwd;
  const auto bwd_prop = desc.affine ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
  return create_or_unavailable(
      [&] {
        return dnnl::primitive_desc(dnnl::batch_normalization_backward::primitive_desc(
            engine, bwd_prop, data, data, data, eps, flags, fwd, attr));
      },
      "backward primitive descriptor", context, failure);
}

// The candidate of the implementation `pd` is at: native, or f32 compute when `conversion` is set.
Candidate make_candidate(const BatchNormDesc& desc, Direction direction,
                         const dnnl::primitive_desc& pd, const dnnl::primitive_desc& hint,
                         const std::shared_ptr<const F32Conversion>& conversion,
                         const ErrorContext& context) {
  Candidate candidate;
  candidate.pd = clone(pd, context);
  candidate.hint = hint;
  candidate.conversion = conversion;
  const std::string impl = sanitize(pd.impl_info_str());
  AlgoInfo& info = candidate.info;
  info.id = detail::cat("onednn:", impl, conversion ? f32_compute_suffix : "");
  info.supported = true;
  info.deterministic = true;  // Note [determinism] (conv_list.cpp)
  describe(info, impl, conversion != nullptr);
  candidate.scratch_bytes = pd.scratchpad_desc().get_size();
  info.workspace_bytes =
      regions_of(desc, direction, candidate.scratch_bytes, conversion ? conversion->bytes() : 0)
          .total;
  return candidate;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const BatchNormDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, "");
  std::vector<Candidate> candidates;
  std::vector<Candidate> last;  // after the kernel (Note [batch-norm candidate order])
  std::set<std::string> seen;
  std::string failure;
  dnnl::primitive_desc hint;
  dnnl::primitive_desc pd =
      create_pd(engine, desc, data_md(desc), direction, context, hint, failure);
  bool native_fast = false;
  if (pd) {
    do {
      Candidate candidate = make_candidate(desc, direction, pd, hint, nullptr, context);
      if (!seen.insert(candidate.info.id).second) continue;
      native_fast = native_fast || !candidate.info.naive;
      (contains(candidate.info.id, "jit") ? candidates : last).push_back(std::move(candidate));
    } while (pd.next_impl());
  }
  Candidate kernel;
  kernel.info = kernel_info(desc);
  candidates.push_back(std::move(kernel));
  // Note [f32-compute batch norm]: oneDNN's first implementation in f32 other than ref:any.
  bool f32_listed = false;
  if (desc.dtype != DType::f32 && !native_fast) {
    std::string f32_failure;
    dnnl::primitive_desc f32_hint;
    dnnl::primitive_desc f32_pd =
        create_pd(engine, desc, as_f32(data_md(desc)), direction, context, f32_hint, f32_failure);
    if (f32_pd) {
      const auto shared = std::make_shared<const F32Conversion>(converted_tensors(desc, direction));
      do {
        if (sanitize(f32_pd.impl_info_str()).starts_with("ref")) continue;
        last.push_back(make_candidate(desc, direction, f32_pd, f32_hint, shared, context));
        f32_listed = true;
        break;
      } while (f32_pd.next_impl());
    } else if (f32_failure != failure) {
      failure = detail::cat(failure, "; in f32 (", f32_compute_name, "): ", f32_failure);
    }
  }
  // ref:any is last among oneDNN's own.
  std::stable_partition(last.begin(), last.end(),
                        [](const Candidate& candidate) { return !candidate.info.naive; });
  for (Candidate& candidate : last) candidates.push_back(std::move(candidate));
  if (!pd && !f32_listed) {
    Candidate unavailable;
    unavailable.info = unsupported_info(
        "onednn:unavailable:bnorm", "oneDNN batch normalization (no implementation)",
        detail::cat(onednn_version(), " has no batch-normalization ", to_string(direction),
                    " implementation for ", to_string(desc.dtype), ' ', to_string(desc.layout),
                    " on cpu isa ", isa, ": ", failure));
    unavailable.info.notes = {"onednn"};
    candidates.push_back(std::move(unavailable));
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
  return candidates;
}

// ---- what both plans share ----------------------------------------------------------------------

void check_data(const Tensor* tensor, const char* role, const BatchNormDesc& desc,
                const ErrorContext& context) {
  check_dense(tensor, role, desc.dims, desc.dtype, desc.layout, context);
}

// The f32 values of a parameter tensor (null when absent), after checking its size.
template <typename T>
float* param_data(T* tensor, const char* role, const BatchNormDesc& desc,
                  const ErrorContext& context, bool required) {
  if (tensor == nullptr) {
    if (required) detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
    return nullptr;
  }
  if (tensor->data() == nullptr || tensor->dtype() != DType::f32 ||
      tensor->numel() != desc.statistics() || tensor->device() != Device::cpu()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is ", describe(*tensor), "; this plan takes f32[",
                              desc.param_dims().to_string(), "] on cpu"),
                  context);
  }
  return static_cast<float*>(tensor->data());
}

Stats stats_of(const BatchNormArgs& args, const BatchNormDesc& desc, Direction direction,
               const ErrorContext& context) {
  Stats s;
  const bool fwd = direction == Direction::fwd;
  s.scale = param_data(args.scale, "scale", desc, context, desc.affine);
  if (fwd) s.shift = param_data(args.shift, "shift", desc, context, desc.affine);
  const bool running_required = !desc.training;
  s.running_mean = param_data(args.running_mean, "running_mean", desc, context, running_required);
  s.running_var = param_data(args.running_var, "running_var", desc, context,
                             running_required || s.running_mean != nullptr);
  const bool saved_required = desc.training && !fwd;
  s.saved_mean = param_data(args.saved_mean, "saved_mean", desc, context, saved_required);
  s.saved_inv_std = param_data(args.saved_inv_std, "saved_inv_std", desc, context, saved_required);
  if (!fwd) {
    s.diff_scale = param_data(args.diff_scale, "diff_scale", desc, context, desc.affine);
    s.diff_shift = param_data(args.diff_shift, "diff_shift", desc, context, desc.affine);
  }
  return s;
}

// ---- oneDNN plans -------------------------------------------------------------------------------

// Runs one oneDNN implementation on the caller's memory, or on f32 copies of its data tensors
// (Note [f32-compute batch norm]). The primitive and its memory objects are made here, once;
// execute() rebinds data pointers (Note [one stream]).
class OneDnnPlan final : public LayerPlan<BatchNormArgs> {
 public:
  OneDnnPlan(std::shared_ptr<Runtime> runtime, const BatchNormDesc& desc, Direction direction,
             const Candidate& candidate)
      : LayerPlan(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        hint_(candidate.hint),
        regions_(regions_of(desc, direction, candidate.scratch_bytes,
                            candidate.conversion ? candidate.conversion->bytes() : 0)) {
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitive", [&] {
      if (candidate.conversion) conversions_ = F32Conversions(candidate.conversion);
      primitive_ = dnnl::primitive(candidate.pd.get());
      const memory::desc data = candidate.conversion ? as_f32(data_md(desc)) : data_md(desc);
      const memory::desc stats = stat_md(desc);
      auto bind_arg = [&](int arg, const memory::desc& md) {
        memories_.emplace_back(dnnl::memory(md, engine, DNNL_MEMORY_NONE));
        args_.push_back({arg, memories_.back().get()});
        return memories_.size() - 1;
      };
      memories_.reserve(12);
      src_ = bind_arg(DNNL_ARG_SRC, data);
      mean_ = bind_arg(DNNL_ARG_MEAN, stats);
      var_ = bind_arg(DNNL_ARG_VARIANCE, stats);
      if (desc.affine) scale_ = bind_arg(DNNL_ARG_SCALE, stats);
      if (direction == Direction::fwd) {
        dst_ = bind_arg(DNNL_ARG_DST, data);
        if (desc.affine) shift_ = bind_arg(DNNL_ARG_SHIFT, stats);
      } else {
        diff_dst_ = bind_arg(DNNL_ARG_DIFF_DST, data);
        dst_ = bind_arg(DNNL_ARG_DIFF_SRC, data);
        if (desc.affine) {
          diff_scale_ = bind_arg(DNNL_ARG_DIFF_SCALE, stats);
          diff_shift_ = bind_arg(DNNL_ARG_DIFF_SHIFT, stats);
        }
      }
      if (candidate.scratch_bytes > 0)
        scratchpad_ = bind_arg(DNNL_ARG_SCRATCHPAD, candidate.pd.scratchpad_desc());
    });
  }

  void execute(const BatchNormArgs& args, detail::Workspace workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    check_data(args.src, "src", desc_, context_);
    check_data(fwd ? args.dst : args.diff_src, fwd ? "dst" : "diff_src", desc_, context_);
    if (!fwd) check_data(args.diff_dst, "diff_dst", desc_, context_);
    const Stats s = stats_of(args, desc_, direction_, context_);
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    auto* ws_mean = reinterpret_cast<float*>(base + regions_.mean);
    auto* ws_var = reinterpret_cast<float*>(base + regions_.var);
    const std::int64_t k_count = desc_.statistics();

    // The statistics oneDNN reads or writes.
    float* mean = nullptr;
    float* var = nullptr;
    if (!desc_.training) {
      mean = s.running_mean;
      var = s.running_var;
    } else if (fwd) {
      mean = s.saved_mean != nullptr ? s.saved_mean : ws_mean;
      var = ws_var;
    } else {
      mean = s.saved_mean;
      var = ws_var;
      for (std::int64_t k = 0; k < k_count; ++k) {
        const double inv_std = s.saved_inv_std[k];
        var[k] = static_cast<float>(1.0 / (inv_std * inv_std) - desc_.eps);
      }
    }

    std::lock_guard lock(runtime_->mutex);
    const dnnl_stream_t stream = runtime_->stream.get();
    // src, dst or diff_src, diff_dst (fwd: unused).
    std::array<void*, 3> data{args.src->data(), fwd ? args.dst->data() : args.diff_src->data(),
                              fwd ? nullptr : args.diff_dst->data()};
    if (conversions_) {
      // Note [f32-compute batch norm]: converted_tensors' order is src, dst / src, diff_dst,
      // diff_src.
      std::array<void*, 3> ordered{data[0], fwd ? data[1] : data[2], data[1]};
      conversions_.convert_in(std::span(ordered.data(), fwd ? 2 : 3), base);
      data[0] = conversions_.copy(0, base);
      data[1] = conversions_.copy(fwd ? 1 : 2, base);
      if (!fwd) data[2] = conversions_.copy(1, base);
    }
    bind(src_, data[0]);
    bind(dst_, data[1]);
    bind(mean_, mean);
    bind(var_, var);
    if (desc_.affine) bind(scale_, const_cast<float*>(s.scale));
    if (fwd) {
      if (desc_.affine) bind(shift_, const_cast<float*>(s.shift));
    } else {
      bind(diff_dst_, data[2]);
      if (desc_.affine) {
        bind(diff_scale_, s.diff_scale);
        bind(diff_shift_, s.diff_shift);
      }
    }
    if (scratchpad_ != none) bind(scratchpad_, base + regions_.scratchpad);
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream, static_cast<int>(args_.size()),
                                           args_.data()),
                    context_, "executing");
    if (conversions_) conversions_.convert_out(base, stream, context_);
    wait(stream, context_);
    if (fwd && desc_.training) finish_training_fwd(desc_, s, mean, var, 0, k_count);
  }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  void bind(std::size_t index, void* data) const { onednn::bind(memories_[index], data, context_); }

  std::shared_ptr<Runtime> runtime_;
  BatchNormDesc desc_;
  Direction direction_;
  // oneDNN's backward primitive keeps a plain pointer to its forward hint: held here.
  dnnl::primitive_desc hint_;
  Regions regions_;
  F32Conversions conversions_;
  dnnl::primitive primitive_;
  std::vector<dnnl::memory> memories_;
  std::vector<dnnl_exec_arg_t> args_;
  std::size_t src_ = none, dst_ = none, diff_dst_ = none, mean_ = none, var_ = none, scale_ = none,
              shift_ = none, diff_scale_ = none, diff_shift_ = none, scratchpad_ = none;
};

// ---- dnnx's kernel (batch_norm_kernel.cpp) ------------------------------------------------------

class KernelPlan final : public LayerPlan<BatchNormArgs> {
 public:
  KernelPlan(const BatchNormDesc& desc, Direction direction)
      : LayerPlan(kernel_info(desc), context_of(desc, direction, kernel_id)),
        desc_(desc),
        direction_(direction) {}

  void execute(const BatchNormArgs& args, detail::Workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    check_data(args.src, "src", desc_, context_);
    check_data(fwd ? args.dst : args.diff_src, fwd ? "dst" : "diff_src", desc_, context_);
    if (!fwd) check_data(args.diff_dst, "diff_dst", desc_, context_);
    const Stats s = stats_of(args, desc_, direction_, context_);
    if (fwd) {
      bnorm::forward(desc_, simd::best_level(), args.src->data(), args.dst->data(), s);
    } else {
      bnorm::backward(desc_, simd::best_level(), args.src->data(), args.diff_dst->data(),
                      args.diff_src->data(), s);
    }
  }

 private:
  BatchNormDesc desc_;
  Direction direction_;
};

// ---- the backend --------------------------------------------------------------------------------

class OneDnnBatchNorm final : public ListedLayerBackend<BatchNormDesc, BatchNormArgs, Candidate,
                                                        list_candidates, OneDnnPlan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<BatchNormArgs>> build(const BatchNormDesc& desc,
                                                       Direction direction,
                                                       const Candidate& candidate) override {
    if (candidate.info.id == kernel_id) return std::make_shared<KernelPlan>(desc, direction);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::batch_norm>> make_batch_norm_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnBatchNorm>(std::move(runtime));
}

}  // namespace dnnx::onednn
