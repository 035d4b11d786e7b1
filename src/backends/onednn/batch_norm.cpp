// The cpu backend's batch normalization: every implementation oneDNN offers for the desc's
// primitive (batch_normalization forward / backward), plus dnnx's own loops.
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
// oneDNN's implementations in oneDNN's own order (its first is its heuristic choice), then dnnx's
// loops (cpu:kernel:bnorm: every dtype, layout and mode, no workspace), then oneDNN's ref:any.
// Implementations are asked for on the caller's plain layout only: the blocked layouts that
// oneDNN's jit kernels also read would cost a reorder of src and dst (and diff_dst, diff_src) per
// call, more than the whole memory-bound normalisation itself.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using detail::BatchNormArgs;
using Tag = memory::format_tag;
using BatchNormPlan = detail::OpPlan<BatchNormArgs>;

constexpr const char* kernel_id = "cpu:kernel:bnorm";
constexpr std::size_t buffer_alignment = 64;

std::size_t round_up(std::size_t bytes) {
  return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

ErrorContext context_of(const BatchNormDesc& desc, Direction direction,
                        std::string implementation) {
  ErrorContext context;
  context.op = detail::cat("bnorm ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "cpu";
  context.implementation = std::move(implementation);
  return context;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return detail::cat("oneDNN ", v->major, '.', v->minor, '.', v->patch);
}

// Ids travel through command lines and cache files: keep them to a safe alphabet.
std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == ':' || c == '+' || c == '.' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// ---- shapes (Note [batch-norm on oneDNN]) ---------------------------------------------------------

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

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// ---- candidates ---------------------------------------------------------------------------------

struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc pd;    // a oneDNN implementation (null for the kernel or unsupported)
  dnnl::primitive_desc hint;  // backward: the forward descriptor oneDNN keeps a pointer to
  std::size_t scratch_bytes = 0;
};

// Workspace regions of a oneDNN plan: the scratchpad at 0, then the statistics buffers a
// direction needs (Note [batch-norm on oneDNN]).
struct Regions {
  std::size_t mean = 0;  // training forward: batch mean when saved_mean is not given
  std::size_t var = 0;   // training: the variance oneDNN writes (fwd) or reads (bwd)
  std::size_t total = 0;
};

Regions regions_of(const BatchNormDesc& desc, Direction direction, std::size_t scratch) {
  const std::size_t stats = round_up(static_cast<std::size_t>(desc.statistics()) * sizeof(float));
  Regions r;
  std::size_t offset = round_up(scratch);
  if (!desc.training) {
    r.total = scratch;
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

void describe(AlgoInfo& info, const std::string& impl) {
  if (impl.starts_with("ref")) {
    info.notes.emplace_back("reference");
    info.families = {"none"};
  } else {
    info.notes.emplace_back(contains(impl, "jit") ? "jit" : "direct");
  }
  if (contains(impl, "nspc")) info.notes.emplace_back("nspc");
  if (contains(impl, "ncsp")) info.notes.emplace_back("ncsp");
  for (const char* isa : {"avx512", "avx2", "sse41"}) {
    if (contains(impl, isa)) {
      info.notes.emplace_back(isa);
      break;
    }
  }
}

AlgoInfo kernel_info(const BatchNormDesc& desc) {
  AlgoInfo info;
  info.id = kernel_id;
  info.name = "dnnx loops (f64 sums, per-statistic threads)";
  info.supported = true;
  // Each statistic is reduced by one thread in a fixed order, whatever the thread count.
  info.deterministic = true;
  info.notes = {"direct", "dnnx"};
  info.families = {"none"};
  return info;
}

// A snapshot of `pd` at its current implementation (next_impl() changes the object in place).
dnnl::primitive_desc clone(const dnnl::primitive_desc& pd, const ErrorContext& context) {
  dnnl_primitive_desc_t copy = nullptr;
  DNNX_DNNL_CHECK(dnnl_primitive_desc_clone(&copy, pd.get()), context,
                  "cloning a primitive descriptor");
  return dnnl::primitive_desc(copy);
}

// oneDNN's primitive descriptor for (desc, direction) at its first implementation, or null with
// `failure` set when it has none.
dnnl::primitive_desc create_pd(const dnnl::engine& engine, const BatchNormDesc& desc,
                               Direction direction, const ErrorContext& context,
                               dnnl::primitive_desc& hint, std::string& failure) {
  const memory::desc data = data_md(desc);
  const auto flags = flags_of(desc);
  const auto eps = static_cast<float>(desc.eps);
  const dnnl::primitive_attr attr = user_scratchpad();
  const auto unavailable = [&](const dnnl::error& error, const char* what) {
    if (error.status != dnnl_unimplemented)
      raise_dnnl(error.status, detail::cat("creating the ", what, ": ", error.what()), context);
    failure = error.what();
  };
  dnnl::batch_normalization_forward::primitive_desc fwd;
  try {
    // A backward descriptor takes a forward_training hint with the same flags.
    const auto prop = desc.training || direction != Direction::fwd
                          ? dnnl::prop_kind::forward_training
                          : dnnl::prop_kind::forward_inference;
    fwd = dnnl::batch_normalization_forward::primitive_desc(engine, prop, data, data, eps, flags,
                                                            attr);
  } catch (const dnnl::error& error) {
    unavailable(error, "forward primitive descriptor");
    return {};
  }
  if (direction == Direction::fwd) return fwd;
  hint = fwd;
  try {
    const auto prop =
        desc.affine ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
    return dnnl::batch_normalization_backward::primitive_desc(engine, prop, data, data, data, eps,
                                                              flags, fwd, attr);
  } catch (const dnnl::error& error) {
    unavailable(error, "backward primitive descriptor");
    return {};
  }
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const BatchNormDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, "");
  std::vector<Candidate> candidates;
  std::vector<Candidate> last;  // ref:any goes after the kernel (Note [batch-norm candidate order])
  std::set<std::string> seen;
  std::string failure;
  dnnl::primitive_desc hint;
  dnnl::primitive_desc pd = create_pd(engine, desc, direction, context, hint, failure);
  if (pd) {
    do {
      Candidate candidate;
      candidate.pd = clone(pd, context);
      candidate.hint = hint;
      const std::string impl = sanitize(pd.impl_info_str());
      AlgoInfo& info = candidate.info;
      info.id = "onednn:" + impl;
      info.name = impl;
      info.supported = true;
      info.deterministic = true;  // Note [determinism] (conv_list.cpp)
      describe(info, impl);
      candidate.scratch_bytes = pd.scratchpad_desc().get_size();
      info.workspace_bytes = regions_of(desc, direction, candidate.scratch_bytes).total;
      if (!seen.insert(info.id).second) continue;
      (impl.starts_with("ref") ? last : candidates).push_back(std::move(candidate));
    } while (pd.next_impl());
  }
  Candidate kernel;
  kernel.info = kernel_info(desc);
  candidates.push_back(std::move(kernel));
  for (Candidate& candidate : last) candidates.push_back(std::move(candidate));
  if (!pd) {
    Candidate unavailable;
    AlgoInfo& info = unavailable.info;
    info.id = "onednn:unavailable:bnorm";
    info.name = "oneDNN batch normalization (no implementation)";
    info.supported = false;
    info.reason = detail::cat(onednn_version(), " has no batch-normalization ",
                              to_string(direction), " implementation for ", to_string(desc.dtype),
                              ' ', to_string(desc.layout), " on cpu isa ", isa, ": ", failure);
    info.notes = {"onednn"};
    candidates.push_back(std::move(unavailable));
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
  return candidates;
}

// ---- what both plans share ----------------------------------------------------------------------

void check_data(const Tensor* tensor, const char* role, const BatchNormDesc& desc,
                const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr) {
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  }
  if (tensor->dims() != desc.dims || tensor->dtype() != desc.dtype ||
      !tensor->is_dense(desc.layout) || tensor->device() != Device::cpu()) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(role, " is ", describe(*tensor), " on ", to_string(tensor->device()),
                              "; this plan takes a dense ", to_string(desc.dtype), '[',
                              desc.dims.to_string(), ' ', to_string(desc.layout), "] on cpu"),
                  context);
  }
}

// The f32 values of a parameter tensor (null when absent), after checking its size.
template <typename T>
float* param_data(T* tensor, const char* role, const BatchNormDesc& desc,
                  const ErrorContext& context, bool required) {
  if (tensor == nullptr) {
    if (required)
      detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
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

// Which statistics a call uses, as raw f32 arrays of K values.
struct Stats {
  const float* scale = nullptr;  // null: 1
  const float* shift = nullptr;  // null: 0
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* saved_mean = nullptr;
  float* saved_inv_std = nullptr;
  float* diff_scale = nullptr;
  float* diff_shift = nullptr;
};

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

// What a training forward leaves besides dst (Note [batch-norm on oneDNN]): saved_mean,
// saved_inv_std and the running statistics of statistics [first, last), from their batch mean and
// biased variance (mean[k - first], var[k - first]).
void finish_training_fwd(const BatchNormDesc& desc, const Stats& s, const float* mean,
                         const float* var, std::int64_t first, std::int64_t last) {
  const auto count = static_cast<double>(desc.reduction_size());
  const double m = desc.momentum;
  for (std::int64_t k = first; k < last; ++k) {
    const double v = var[k - first];
    const float batch_mean = mean[k - first];
    if (s.saved_inv_std != nullptr)
      s.saved_inv_std[k] = static_cast<float>(1.0 / std::sqrt(v + desc.eps));
    if (s.saved_mean != nullptr) s.saved_mean[k] = batch_mean;
    if (s.running_mean != nullptr) {
      s.running_mean[k] = static_cast<float>((1 - m) * s.running_mean[k] + m * batch_mean);
      s.running_var[k] =
          static_cast<float>((1 - m) * s.running_var[k] + m * v * count / (count - 1));
    }
  }
}

// ---- oneDNN plans -------------------------------------------------------------------------------

// Runs one oneDNN implementation on the caller's memory. The primitive and its memory objects are
// made here, once; execute() rebinds data pointers (Note [one stream]).
class OneDnnPlan final : public BatchNormPlan {
 public:
  OneDnnPlan(std::shared_ptr<Runtime> runtime, const BatchNormDesc& desc, Direction direction,
             const Candidate& candidate)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        info_(candidate.info),
        context_(context_of(desc, direction, candidate.info.id)),
        hint_(candidate.hint),
        regions_(regions_of(desc, direction, candidate.scratch_bytes)) {
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitive", [&] {
      primitive_ = dnnl::primitive(candidate.pd.get());
      const memory::desc data = data_md(desc);
      const memory::desc stats = stat_md(desc);
      auto bind_arg = [&](int arg, const memory::desc& md) {
        memories_.push_back(dnnl::memory(md, engine, DNNL_MEMORY_NONE));
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

  const AlgoInfo& algo() const override { return info_; }

  void execute(const BatchNormArgs& args, detail::Workspace workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    check_data(args.src, "src", desc_, context_);
    check_data(fwd ? args.dst : args.diff_src, fwd ? "dst" : "diff_src", desc_, context_);
    if (!fwd) check_data(args.diff_dst, "diff_dst", desc_, context_);
    const Stats s = stats_of(args, desc_, direction_, context_);
    if (workspace.bytes < info_.workspace_bytes ||
        (info_.workspace_bytes > 0 && workspace.data == nullptr)) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("workspace has ", workspace.bytes, " bytes",
                                workspace.data == nullptr ? " (null)" : "",
                                "; this candidate needs ", info_.workspace_bytes),
                    context_);
    }
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
    bind(src_, args.src->data());
    bind(dst_, fwd ? args.dst->data() : args.diff_src->data());
    bind(mean_, mean);
    bind(var_, var);
    if (desc_.affine) bind(scale_, const_cast<float*>(s.scale));
    if (fwd) {
      if (desc_.affine) bind(shift_, const_cast<float*>(s.shift));
    } else {
      bind(diff_dst_, args.diff_dst->data());
      if (desc_.affine) {
        bind(diff_scale_, s.diff_scale);
        bind(diff_shift_, s.diff_shift);
      }
    }
    if (scratchpad_ != none) bind(scratchpad_, base);
    const dnnl_stream_t stream = runtime_->stream.get();
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream,
                                           static_cast<int>(args_.size()), args_.data()),
                    context_, "executing");
    DNNX_DNNL_CHECK(dnnl_stream_wait(stream), context_, "waiting for the stream");
    if (fwd && desc_.training) finish_training_fwd(desc_, s, mean, var, 0, k_count);
  }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  void bind(std::size_t index, void* data) const {
    DNNX_DNNL_CHECK(dnnl_memory_set_data_handle(memories_[index].get(), data), context_,
                    "binding a data pointer");
  }

  std::shared_ptr<Runtime> runtime_;
  BatchNormDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
  // oneDNN's backward primitive keeps a plain pointer to its forward hint: held here.
  dnnl::primitive_desc hint_;
  Regions regions_;
  dnnl::primitive primitive_;
  std::vector<dnnl::memory> memories_;
  std::vector<dnnl_exec_arg_t> args_;
  std::size_t src_ = none, dst_ = none, diff_dst_ = none, mean_ = none, var_ = none,
              scale_ = none, shift_ = none, diff_scale_ = none, diff_shift_ = none,
              scratchpad_ = none;
};

// ---- dnnx's loops -------------------------------------------------------------------------------
//
// Note [batch-norm loops]
// The data is walked in memory order, in one of two shapes: "planes" (spatial mode, channels
// first: statistic k owns N runs of S contiguous values) and "columns" (channels-last spatial
// mode and per-activation mode: an M x K row-major matrix whose column k is statistic k). Each
// thread owns a contiguous range of statistics and reduces each of them alone, in a fixed order,
// with f64 sums, so the bits do not depend on the thread count. Sums are taken in two passes
// (mean, then squared deviations). Values are read as f32 (f16 / bf16 widened on load) and
// outputs formed in f32 from per-statistic coefficients.

// Reads `count` elements of `dtype` at element offset `offset` of `base` as f32.
void load_row(const void* base, DType dtype, std::int64_t offset, std::int64_t count,
              float* out) {
  if (dtype == DType::f32) {
    std::memcpy(out, static_cast<const float*>(base) + offset,
                static_cast<std::size_t>(count) * sizeof(float));
    return;
  }
  const auto* p = static_cast<const std::uint16_t*>(base) + offset;
  if (dtype == DType::f16) {
    for (std::int64_t i = 0; i < count; ++i) out[i] = detail::half_to_float(p[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i) out[i] = detail::bf16_to_float(p[i]);
  }
}

void store_row(void* base, DType dtype, std::int64_t offset, std::int64_t count,
               const float* in) {
  if (dtype == DType::f32) {
    std::memcpy(static_cast<float*>(base) + offset, in,
                static_cast<std::size_t>(count) * sizeof(float));
    return;
  }
  auto* p = static_cast<std::uint16_t*>(base) + offset;
  if (dtype == DType::f16) {
    for (std::int64_t i = 0; i < count; ++i) p[i] = detail::float_to_half(in[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i) p[i] = detail::float_to_bf16(in[i]);
  }
}

// Runs body(first, last) over [0, count) statistics in contiguous ranges, one per thread when the
// work (`elements` values in all) is worth starting threads for.
void parallel_ranges(std::int64_t count, std::int64_t elements,
                     const std::function<void(std::int64_t, std::int64_t)>& body) {
  // Starting a thread costs tens of microseconds: below ~256K values one thread is faster.
  constexpr std::int64_t min_elements_per_thread = 1 << 18;
  const auto hardware =
      static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min(hardware, elements / min_elements_per_thread), 1, count);
  if (threads <= 1) {
    body(0, count);
    return;
  }
  std::vector<std::jthread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));
  for (std::int64_t t = 1; t < threads; ++t)
    workers.emplace_back(body, count * t / threads, count * (t + 1) / threads);
  body(0, count / threads);
}

class KernelPlan final : public BatchNormPlan {
 public:
  KernelPlan(const BatchNormDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        info_(kernel_info(desc)),
        context_(context_of(desc, direction, kernel_id)),
        planes_(desc.mode == BatchNormMode::spatial && desc.layout == Layout::channels_first) {
    k_ = desc.statistics();
    n_ = desc.dims[0];
    s_ = desc.reduction_size() / n_;  // spatial positions (planes); 1 in per-activation mode
    rows_ = desc.reduction_size();    // columns: M = N x S (channels last) or N
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const BatchNormArgs& args, detail::Workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    check_data(args.src, "src", desc_, context_);
    check_data(fwd ? args.dst : args.diff_src, fwd ? "dst" : "diff_src", desc_, context_);
    if (!fwd) check_data(args.diff_dst, "diff_dst", desc_, context_);
    const Stats s = stats_of(args, desc_, direction_, context_);
    const std::int64_t elements = desc_.reduction_size() * k_;
    parallel_ranges(k_, fwd ? elements * 3 : elements * 4,
                    [&](std::int64_t first, std::int64_t last) {
                      if (fwd) {
                        forward(args, s, first, last);
                      } else {
                        backward(args, s, first, last);
                      }
                    });
  }

 private:
  // Calls visit(k, row, count) for every run of values of statistics [first, last): planes give
  // one statistic's S values at a time, columns one row's values of the whole range.
  template <typename Visit>
  void for_each_run(std::int64_t first, std::int64_t last, Visit&& visit) const {
    if (planes_) {
      for (std::int64_t k = first; k < last; ++k)
        for (std::int64_t n = 0; n < n_; ++n) visit(k, (n * k_ + k) * s_, s_);
    } else {
      for (std::int64_t m = 0; m < rows_; ++m) visit(first, m * k_ + first, last - first);
    }
  }

  // Adds f(values) of every run into sums[k - first] (double), planes summing each run first.
  template <typename F>
  void accumulate(const void* data, std::int64_t first, std::int64_t last,
                  std::vector<float>& buffer, std::vector<double>& sums, F&& f) const {
    std::fill(sums.begin(), sums.end(), 0.0);
    for_each_run(first, last, [&](std::int64_t k, std::int64_t offset, std::int64_t count) {
      load_row(data, desc_.dtype, offset, count, buffer.data());
      if (planes_) {
        double sum = 0;
        for (std::int64_t i = 0; i < count; ++i) sum += f(k, i, buffer[i]);
        sums[static_cast<std::size_t>(k - first)] += sum;
      } else {
        for (std::int64_t i = 0; i < count; ++i)
          sums[static_cast<std::size_t>(i)] += f(first + i, offset + i, buffer[i]);
      }
    });
  }

  std::int64_t run_length(std::int64_t first, std::int64_t last) const {
    return planes_ ? s_ : last - first;
  }

  void forward(const BatchNormArgs& args, const Stats& s, std::int64_t first,
               std::int64_t last) const {
    const auto width = static_cast<std::size_t>(last - first);
    std::vector<float> buffer(static_cast<std::size_t>(run_length(first, last)));
    std::vector<double> sums(width);
    std::vector<float> mean(width), var(width);
    std::vector<float> a(width), b(width);  // y = x * a + b
    const void* x = args.src->data();
    if (desc_.training) {
      const auto count = static_cast<double>(desc_.reduction_size());
      accumulate(x, first, last, buffer, sums, [](std::int64_t, std::int64_t, float v) {
        return static_cast<double>(v);
      });
      std::vector<double> mean64(width);
      for (std::size_t j = 0; j < width; ++j) mean64[j] = sums[j] / count;
      accumulate(x, first, last, buffer, sums, [&](std::int64_t k, std::int64_t, float v) {
        const double d = v - mean64[static_cast<std::size_t>(k - first)];
        return d * d;
      });
      for (std::size_t j = 0; j < width; ++j) {
        mean[j] = static_cast<float>(mean64[j]);
        var[j] = static_cast<float>(sums[j] / count);
        const double inv_std = 1.0 / std::sqrt(sums[j] / count + desc_.eps);
        set_coefficients(s, first + static_cast<std::int64_t>(j), mean64[j], inv_std, a[j], b[j]);
      }
      finish_training_fwd(desc_, s, mean.data(), var.data(), first, last);
    } else {
      for (std::size_t j = 0; j < width; ++j) {
        const std::int64_t k = first + static_cast<std::int64_t>(j);
        const double inv_std = 1.0 / std::sqrt(static_cast<double>(s.running_var[k]) + desc_.eps);
        set_coefficients(s, k, s.running_mean[k], inv_std, a[j], b[j]);
      }
    }
    void* y = args.dst->data();
    for_each_run(first, last, [&](std::int64_t k, std::int64_t offset, std::int64_t count) {
      load_row(x, desc_.dtype, offset, count, buffer.data());
      if (planes_) {
        const float ak = a[static_cast<std::size_t>(k - first)];
        const float bk = b[static_cast<std::size_t>(k - first)];
        for (std::int64_t i = 0; i < count; ++i) buffer[i] = buffer[i] * ak + bk;
      } else {
        for (std::int64_t i = 0; i < count; ++i) buffer[i] = buffer[i] * a[i] + b[i];
      }
      store_row(y, desc_.dtype, offset, count, buffer.data());
    });
  }

  // y = (x - mean) * inv_std * scale + shift = x * a + b.
  void set_coefficients(const Stats& s, std::int64_t k, double mean, double inv_std, float& a,
                        float& b) const {
    const double scale = s.scale != nullptr ? s.scale[k] : 1.0;
    const double shift = s.shift != nullptr ? s.shift[k] : 0.0;
    a = static_cast<float>(scale * inv_std);
    b = static_cast<float>(shift - mean * scale * inv_std);
  }

  void backward(const BatchNormArgs& args, const Stats& s, std::int64_t first,
                std::int64_t last) const {
    const auto width = static_cast<std::size_t>(last - first);
    const std::int64_t run = run_length(first, last);
    std::vector<float> xs(static_cast<std::size_t>(run)), dys(static_cast<std::size_t>(run));
    std::vector<double> mean(width), inv_std(width), scale(width);
    for (std::size_t j = 0; j < width; ++j) {
      const std::int64_t k = first + static_cast<std::int64_t>(j);
      if (desc_.training) {
        mean[j] = s.saved_mean[k];
        inv_std[j] = s.saved_inv_std[k];
      } else {
        mean[j] = s.running_mean[k];
        inv_std[j] = 1.0 / std::sqrt(static_cast<double>(s.running_var[k]) + desc_.eps);
      }
      scale[j] = s.scale != nullptr ? s.scale[k] : 1.0;
    }
    // One pass for both sums: sum dy and sum dy * x_hat.
    std::vector<double> sum_dy(width, 0.0), sum_dy_xhat(width, 0.0);
    const void* x = args.src->data();
    const void* dy = args.diff_dst->data();
    for_each_run(first, last, [&](std::int64_t k, std::int64_t offset, std::int64_t count) {
      load_row(x, desc_.dtype, offset, count, xs.data());
      load_row(dy, desc_.dtype, offset, count, dys.data());
      if (planes_) {
        const auto j = static_cast<std::size_t>(k - first);
        double a = 0, b = 0;
        for (std::int64_t i = 0; i < count; ++i) {
          a += dys[i];
          b += dys[i] * (xs[i] - mean[j]);
        }
        sum_dy[j] += a;
        sum_dy_xhat[j] += b;
      } else {
        for (std::int64_t i = 0; i < count; ++i) {
          sum_dy[i] += dys[i];
          sum_dy_xhat[i] += dys[i] * (xs[i] - mean[i]);
        }
      }
    });
    // dx = a dy + b x + c (training) or a dy (inference), per statistic.
    const auto count = static_cast<double>(desc_.reduction_size());
    std::vector<float> ca(width), cb(width), cc(width);
    for (std::size_t j = 0; j < width; ++j) {
      const std::int64_t k = first + static_cast<std::int64_t>(j);
      sum_dy_xhat[j] *= inv_std[j];
      if (s.diff_scale != nullptr) s.diff_scale[k] = static_cast<float>(sum_dy_xhat[j]);
      if (s.diff_shift != nullptr) s.diff_shift[k] = static_cast<float>(sum_dy[j]);
      const double a = scale[j] * inv_std[j];
      ca[j] = static_cast<float>(a);
      if (desc_.training) {
        const double b = -a * inv_std[j] * sum_dy_xhat[j] / count;
        cb[j] = static_cast<float>(b);
        cc[j] = static_cast<float>(-a * sum_dy[j] / count - b * mean[j]);
      }
    }
    void* dx = args.diff_src->data();
    for_each_run(first, last, [&](std::int64_t k, std::int64_t offset, std::int64_t n) {
      load_row(x, desc_.dtype, offset, n, xs.data());
      load_row(dy, desc_.dtype, offset, n, dys.data());
      if (planes_) {
        const auto j = static_cast<std::size_t>(k - first);
        for (std::int64_t i = 0; i < n; ++i) xs[i] = ca[j] * dys[i] + cb[j] * xs[i] + cc[j];
      } else {
        for (std::int64_t i = 0; i < n; ++i) xs[i] = ca[i] * dys[i] + cb[i] * xs[i] + cc[i];
      }
      store_row(dx, desc_.dtype, offset, n, xs.data());
    });
  }

  BatchNormDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
  bool planes_;
  std::int64_t k_ = 0, n_ = 0, s_ = 0, rows_ = 0;
};

// ---- the backend --------------------------------------------------------------------------------

struct Key {
  BatchNormDesc desc;
  Direction direction = Direction::fwd;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& key) const {
    return key.desc.hash() * 3 + static_cast<std::size_t>(key.direction);
  }
};

class OneDnnBatchNorm final : public detail::BatchNormBackend {
 public:
  explicit OneDnnBatchNorm(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  std::vector<AlgoInfo> list(const BatchNormDesc& desc, Direction direction) override {
    desc.validate();
    std::lock_guard lock(mutex_);
    std::vector<AlgoInfo> infos;
    for (const Candidate& candidate : candidates_locked(desc, direction))
      infos.push_back(candidate.info);
    return infos;
  }

  std::shared_ptr<BatchNormPlan> plan(const BatchNormDesc& desc, Direction direction,
                                      const std::string& id) override {
    return plans_.get_or_build(desc, direction, id, [&]() -> std::shared_ptr<BatchNormPlan> {
      desc.validate();
      std::lock_guard lock(mutex_);
      const std::vector<Candidate>& candidates = candidates_locked(desc, direction);
      const auto found = std::find_if(candidates.begin(), candidates.end(),
                                      [&](const Candidate& c) { return c.info.id == id; });
      if (found == candidates.end()) {
        std::vector<std::string> ids;
        for (const Candidate& c : candidates) ids.push_back(c.info.id);
        detail::raise(ErrorKind::InvalidArgument,
                      detail::cat("algorithm id '", id, "' is not a cpu candidate for this bnorm ",
                                  to_string(direction), "; valid ids: ", detail::join(ids, ", ")),
                      context_of(desc, direction, id));
      }
      if (!found->info.supported) {
        detail::raise(ErrorKind::Unsupported, found->info.reason, context_of(desc, direction, id));
      }
      if (found->info.id == kernel_id) return std::make_shared<KernelPlan>(desc, direction);
      return std::make_shared<OneDnnPlan>(runtime_, desc, direction, *found);
    });
  }

 private:
  const std::vector<Candidate>& candidates_locked(const BatchNormDesc& desc, Direction direction) {
    const Key key{desc, direction};
    auto found = lists_.find(key);
    if (found == lists_.end()) {
      found = lists_.emplace(key, list_candidates(runtime_->engine, desc, direction, runtime_->isa))
                  .first;
    }
    return found->second;
  }

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards lists_
  std::unordered_map<Key, std::vector<Candidate>, KeyHash> lists_;
  detail::PlanCache<BatchNormDesc, BatchNormArgs> plans_;
};

}  // namespace

std::unique_ptr<detail::BatchNormBackend> make_batch_norm_backend(std::shared_ptr<Runtime> runtime) {
  return std::make_unique<OneDnnBatchNorm>(std::move(runtime));
}

}  // namespace dnnx::onednn
