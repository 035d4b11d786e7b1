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
// oneDNN's jit implementations in oneDNN's own order, then dnnx's loops (cpu:kernel:bnorm: every
// dtype, layout and mode, no workspace), then oneDNN's plain C++ implementations (ncsp_bnorm,
// nspc_bnorm), then ref:any. On channels-first data oneDNN 3.2 offers no jit implementation, and
// its ncsp_bnorm took 11.6 / 9.5 ms (fwd / bwd) on 8x256x56x56 f32 where the loops took 3.1 /
// 3.5 ms (2 Sapphire Rapids cores); on channels-last data its bnorm_jit took 2.2 / 3.0 ms, the
// loops 13 / 25 ms, nspc_bnorm 42 / 49 ms. Implementations are asked for on the caller's plain
// layout only: the blocked layouts oneDNN's jit kernels also read would cost a reorder of src and
// dst (and diff_dst, diff_src) per call, more than the memory-bound normalisation itself.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using detail::BatchNormArgs;
using Tag = memory::format_tag;
using BatchNormPlan = detail::OpPlan<BatchNormArgs>;

constexpr const char* op_text = "bnorm";  // the op in messages
constexpr const char* kernel_id = "cpu:kernel:bnorm";

ErrorContext context_of(const BatchNormDesc& desc, Direction direction,
                        std::string implementation) {
  return layer_context(op_text, direction, desc.repro(direction), std::move(implementation));
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
  if (const std::string_view isa = isa_of(impl, {"avx512", "avx2", "sse41"}); !isa.empty())
    info.notes.emplace_back(isa);
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

// oneDNN's primitive descriptor for (desc, direction) at its first implementation, or null with
// `failure` set when it has none.
dnnl::primitive_desc create_pd(const dnnl::engine& engine, const BatchNormDesc& desc,
                               Direction direction, const ErrorContext& context,
                               dnnl::primitive_desc& hint, std::string& failure) {
  const memory::desc data = data_md(desc);
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

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const BatchNormDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, "");
  std::vector<Candidate> candidates;
  std::vector<Candidate> last;  // after the kernel (Note [batch-norm candidate order])
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
      (contains(impl, "jit") ? candidates : last).push_back(std::move(candidate));
    } while (pd.next_impl());
  }
  Candidate kernel;
  kernel.info = kernel_info(desc);
  candidates.push_back(std::move(kernel));
  // ref:any is last among oneDNN's own.
  std::stable_partition(last.begin(), last.end(), [](const Candidate& candidate) {
    return !candidate.info.id.starts_with("onednn:ref");
  });
  for (Candidate& candidate : last) candidates.push_back(std::move(candidate));
  if (!pd) {
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
class OneDnnPlan final : public LayerPlan<BatchNormArgs> {
 public:
  OneDnnPlan(std::shared_ptr<Runtime> runtime, const BatchNormDesc& desc, Direction direction,
             const Candidate& candidate)
      : LayerPlan(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        hint_(candidate.hint),
        regions_(regions_of(desc, direction, candidate.scratch_bytes)) {
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitive", [&] {
      primitive_ = dnnl::primitive(candidate.pd.get());
      const memory::desc data = data_md(desc);
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
    DNNX_DNNL_CHECK(dnnl_primitive_execute(primitive_.get(), stream, static_cast<int>(args_.size()),
                                           args_.data()),
                    context_, "executing");
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
  dnnl::primitive primitive_;
  std::vector<dnnl::memory> memories_;
  std::vector<dnnl_exec_arg_t> args_;
  std::size_t src_ = none, dst_ = none, diff_dst_ = none, mean_ = none, var_ = none, scale_ = none,
              shift_ = none, diff_scale_ = none, diff_shift_ = none, scratchpad_ = none;
};

// ---- dnnx's loops -------------------------------------------------------------------------------
//
// Note [batch-norm loops]
// The data is walked in memory order, in one of two shapes: "planes" (spatial mode, channels
// first: statistic k owns N runs of S contiguous values) and "columns" (channels-last spatial
// mode and per-activation mode: an M x K row-major matrix whose column k is statistic k). Each
// thread owns a contiguous range of statistics and reduces each of them alone, in a fixed order,
// so the bits do not depend on the thread count.
//   Statistics are one pass of shifted sums: with p the statistic's first value, sum (x - p) and
//   sum (x - p)^2 in f64 give mean = p + s1 / n and var = s2 / n - (s1 / n)^2 without the
//   cancellation of raw sums of squares (Chan, Golub & LeVeque, "Algorithms for computing the
//   sample variance", 1983). Planes keep eight f64 partial sums per statistic (independent
//   chains the compiler turns into vector adds; one chain would cost an add latency per value)
//   and normalise a statistic's values right after summing them, while they are still in cache.
//   Columns sum a row's range of statistics element-wise, which vectorises as it is.
//   Outputs are y = x a + b (forward) and dx = a dy + b x + c (backward) with per-statistic f32
//   coefficients formed in f64.

struct F16 {
  std::uint16_t bits;
};
struct BF16 {
  std::uint16_t bits;
};

inline float widen(float v) { return v; }
inline float widen(F16 v) { return detail::half_to_float(v.bits); }
inline float widen(BF16 v) { return detail::bf16_to_float(v.bits); }
template <typename T>
T narrow(float v);
template <>
inline float narrow<float>(float v) {
  return v;
}
template <>
inline F16 narrow<F16>(float v) {
  return {detail::float_to_half(v)};
}
template <>
inline BF16 narrow<BF16>(float v) {
  return {detail::float_to_bf16(v)};
}

// Note [loop threads]
// The loops run on a pool of threads started once per process (a thread start costs tens of
// microseconds, as much as a whole small normalisation), as many as oneDNN's OpenMP runtime uses
// (omp_get_max_threads, which OMP_NUM_THREADS sets and Backend::fingerprint() records), else the
// hardware's. A call splits its statistics into one contiguous range per thread; the caller runs
// the first range and waits for the others. Calls from several threads take turns.
class LoopPool {
 public:
  static LoopPool& instance() {
    // Never destroyed: its threads may still wait for work when the process exits.
    static auto* pool = new LoopPool(thread_count());
    return *pool;
  }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(t) for t in [0, tasks) (tasks <= threads()), task 0 on the caller.
  void run(int tasks, const std::function<void(int)>& body) {
    std::lock_guard turn(turn_);
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      tasks_ = tasks;
      pending_ = tasks - 1;
      ++generation_;
    }
    wake_.notify_all();
    body(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
  }

 private:
  explicit LoopPool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }

  static int thread_count() {
    using Query = int (*)();
    auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    const int omp = query != nullptr ? query() : 0;
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::clamp(omp > 0 ? omp : hardware, 1, 256);
  }

  void work(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= tasks_) continue;
      const std::function<void(int)>* body = body_;
      lock.unlock();
      (*body)(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex turn_;   // one call at a time
  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_, done_;
  const std::function<void(int)>* body_ = nullptr;
  int tasks_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::thread> workers_;
};

// Runs body(first, last) over [0, count) statistics in contiguous ranges, one per pool thread
// when the work (`elements` values in all) is worth waking threads for.
void parallel_ranges(std::int64_t count, std::int64_t elements,
                     const std::function<void(std::int64_t, std::int64_t)>& body) {
  // Waking a thread costs a few microseconds: below ~64K values one thread is faster.
  constexpr std::int64_t min_elements_per_thread = 1 << 16;
  if (elements < 2 * min_elements_per_thread || count < 2) {
    body(0, count);
    return;
  }
  LoopPool& pool = LoopPool::instance();
  const std::int64_t tasks = std::clamp<std::int64_t>(
      std::min<std::int64_t>(pool.threads(), elements / min_elements_per_thread), 1, count);
  if (tasks <= 1) {
    body(0, count);
    return;
  }
  pool.run(static_cast<int>(tasks),
           [&](int t) { body(count * t / tasks, count * (t + 1) / tasks); });
}

constexpr int lanes = 8;

// Eight-lane f64 sums of f(i) over [0, count), added up in a fixed order.
struct LaneSums {
  double a[lanes] = {};
  double b[lanes] = {};
  void total(double& sum_a, double& sum_b) const {
    for (int j = 0; j < lanes; ++j) {
      sum_a += a[j];
      sum_b += b[j];
    }
  }
};

// The shape of one call (Note [batch-norm loops]).
struct LoopShape {
  bool planes = false;
  std::int64_t n = 0;     // planes: runs per statistic (N)
  std::int64_t s = 0;     // planes: run length (spatial positions)
  std::int64_t rows = 0;  // columns: M
  std::int64_t k = 0;     // statistics
  double count = 0;       // values per statistic
};

// The statistics and coefficients of one statistic (Note [batch-norm on oneDNN] for the saved
// and running ones).
struct Coefficients {
  float a = 0, b = 0, c = 0;
};

template <typename T>
class Loops {
 public:
  Loops(const BatchNormDesc& desc, const LoopShape& shape, const Stats& stats)
      : desc_(desc), shape_(shape), stats_(stats) {}

  void forward(const T* x, T* y, std::int64_t first, std::int64_t last) const {
    if (shape_.planes) {
      for (std::int64_t k = first; k < last; ++k) {
        double mean = 0, var = 0;
        if (desc_.training) {
          LaneSums sums;
          const double pivot = widen(x[k * shape_.s]);
          for (std::int64_t n = 0; n < shape_.n; ++n) {
            const T* run = x + (n * shape_.k + k) * shape_.s;
            add_shifted(run, shape_.s, pivot, sums);
          }
          moments(sums, pivot, mean, var);
          finish(k, mean, var);
        }
        const Coefficients f = forward_coefficients(k, mean, var);
        for (std::int64_t n = 0; n < shape_.n; ++n) {
          const std::int64_t offset = (n * shape_.k + k) * shape_.s;
          for (std::int64_t i = 0; i < shape_.s; ++i)
            y[offset + i] = narrow<T>(widen(x[offset + i]) * f.a + f.b);
        }
      }
      return;
    }
    const auto width = static_cast<std::size_t>(last - first);
    std::vector<Coefficients> f(width);
    if (desc_.training) {
      std::vector<double> pivot(width), s1(width, 0.0), s2(width, 0.0);
      for (std::size_t j = 0; j < width; ++j)
        pivot[j] = widen(x[first + static_cast<std::int64_t>(j)]);
      for (std::int64_t m = 0; m < shape_.rows; ++m) {
        const T* row = x + m * shape_.k + first;
        for (std::size_t j = 0; j < width; ++j) {
          const double d = static_cast<double>(widen(row[j])) - pivot[j];
          s1[j] += d;
          s2[j] += d * d;
        }
      }
      for (std::size_t j = 0; j < width; ++j) {
        const std::int64_t k = first + static_cast<std::int64_t>(j);
        const double shifted = s1[j] / shape_.count;
        const double mean = pivot[j] + shifted;
        const double var = std::max(0.0, s2[j] / shape_.count - shifted * shifted);
        finish(k, mean, var);
        f[j] = forward_coefficients(k, mean, var);
      }
    } else {
      for (std::size_t j = 0; j < width; ++j)
        f[j] = forward_coefficients(first + static_cast<std::int64_t>(j), 0, 0);
    }
    for (std::int64_t m = 0; m < shape_.rows; ++m) {
      const T* in = x + m * shape_.k + first;
      T* out = y + m * shape_.k + first;
      for (std::size_t j = 0; j < width; ++j) out[j] = narrow<T>(widen(in[j]) * f[j].a + f[j].b);
    }
  }

  void backward(const T* x, const T* dy, T* dx, std::int64_t first, std::int64_t last) const {
    if (shape_.planes) {
      for (std::int64_t k = first; k < last; ++k) {
        const double mean = used_mean(k);
        LaneSums sums;  // a: sum dy, b: sum dy (x - mean)
        for (std::int64_t n = 0; n < shape_.n; ++n) {
          const std::int64_t offset = (n * shape_.k + k) * shape_.s;
          add_gradient_sums(x + offset, dy + offset, shape_.s, mean, sums);
        }
        double sum_dy = 0, sum_dy_x = 0;
        sums.total(sum_dy, sum_dy_x);
        const Coefficients f = backward_coefficients(k, mean, sum_dy, sum_dy_x);
        for (std::int64_t n = 0; n < shape_.n; ++n) {
          const std::int64_t offset = (n * shape_.k + k) * shape_.s;
          for (std::int64_t i = 0; i < shape_.s; ++i) {
            dx[offset + i] =
                narrow<T>(f.a * widen(dy[offset + i]) + f.b * widen(x[offset + i]) + f.c);
          }
        }
      }
      return;
    }
    const auto width = static_cast<std::size_t>(last - first);
    std::vector<double> mean(width), sum_dy(width, 0.0), sum_dy_x(width, 0.0);
    for (std::size_t j = 0; j < width; ++j)
      mean[j] = used_mean(first + static_cast<std::int64_t>(j));
    for (std::int64_t m = 0; m < shape_.rows; ++m) {
      const T* x_row = x + m * shape_.k + first;
      const T* dy_row = dy + m * shape_.k + first;
      for (std::size_t j = 0; j < width; ++j) {
        const double g = widen(dy_row[j]);
        sum_dy[j] += g;
        sum_dy_x[j] += g * (static_cast<double>(widen(x_row[j])) - mean[j]);
      }
    }
    std::vector<Coefficients> f(width);
    for (std::size_t j = 0; j < width; ++j) {
      f[j] = backward_coefficients(first + static_cast<std::int64_t>(j), mean[j], sum_dy[j],
                                   sum_dy_x[j]);
    }
    for (std::int64_t m = 0; m < shape_.rows; ++m) {
      const std::int64_t offset = m * shape_.k + first;
      for (std::size_t j = 0; j < width; ++j) {
        const auto i = offset + static_cast<std::int64_t>(j);
        dx[i] = narrow<T>(f[j].a * widen(dy[i]) + f[j].b * widen(x[i]) + f[j].c);
      }
    }
  }

 private:
  static void add_shifted(const T* run, std::int64_t count, double pivot, LaneSums& sums) {
    std::int64_t i = 0;
    for (; i + lanes <= count; i += lanes) {
      for (int j = 0; j < lanes; ++j) {
        const double d = static_cast<double>(widen(run[i + j])) - pivot;
        sums.a[j] += d;
        sums.b[j] += d * d;
      }
    }
    for (int j = 0; i < count; ++i, ++j) {
      const double d = static_cast<double>(widen(run[i])) - pivot;
      sums.a[j] += d;
      sums.b[j] += d * d;
    }
  }

  static void add_gradient_sums(const T* x, const T* dy, std::int64_t count, double mean,
                                LaneSums& sums) {
    std::int64_t i = 0;
    for (; i + lanes <= count; i += lanes) {
      for (int j = 0; j < lanes; ++j) {
        const double g = widen(dy[i + j]);
        sums.a[j] += g;
        sums.b[j] += g * (static_cast<double>(widen(x[i + j])) - mean);
      }
    }
    for (int j = 0; i < count; ++i, ++j) {
      const double g = widen(dy[i]);
      sums.a[j] += g;
      sums.b[j] += g * (static_cast<double>(widen(x[i])) - mean);
    }
  }

  void moments(const LaneSums& sums, double pivot, double& mean, double& var) const {
    double s1 = 0, s2 = 0;
    sums.total(s1, s2);
    const double shifted = s1 / shape_.count;
    mean = pivot + shifted;
    var = std::max(0.0, s2 / shape_.count - shifted * shifted);
  }

  // Saved and running statistics of statistic k after a training forward.
  void finish(std::int64_t k, double mean, double var) const {
    const auto mean32 = static_cast<float>(mean);
    const auto var32 = static_cast<float>(var);
    finish_training_fwd(desc_, stats_, &mean32, &var32, k, k + 1);
  }

  double inv_std(std::int64_t k, double var) const {
    if (!desc_.training) var = stats_.running_var[k];
    return 1.0 / std::sqrt(var + desc_.eps);
  }

  double used_mean(std::int64_t k) const {
    return desc_.training ? stats_.saved_mean[k] : stats_.running_mean[k];
  }

  // y = (x - mean) inv_std scale + shift = x a + b; inference reads the running statistics.
  Coefficients forward_coefficients(std::int64_t k, double mean, double var) const {
    if (!desc_.training) mean = stats_.running_mean[k];
    const double scale = stats_.scale != nullptr ? stats_.scale[k] : 1.0;
    const double shift = stats_.shift != nullptr ? stats_.shift[k] : 0.0;
    const double a = scale * inv_std(k, var);
    return {static_cast<float>(a), static_cast<float>(shift - mean * a), 0.0f};
  }

  // Writes diff_scale / diff_shift of statistic k and returns dx = a dy + b x + c.
  Coefficients backward_coefficients(std::int64_t k, double mean, double sum_dy,
                                     double sum_dy_x) const {
    const double inv =
        desc_.training ? static_cast<double>(stats_.saved_inv_std[k]) : inv_std(k, 0);
    const double sum_dy_xhat = sum_dy_x * inv;
    if (stats_.diff_scale != nullptr) stats_.diff_scale[k] = static_cast<float>(sum_dy_xhat);
    if (stats_.diff_shift != nullptr) stats_.diff_shift[k] = static_cast<float>(sum_dy);
    const double scale = stats_.scale != nullptr ? stats_.scale[k] : 1.0;
    const double a = scale * inv;
    if (!desc_.training) return {static_cast<float>(a), 0.0f, 0.0f};
    // The batch statistics' terms: -a (sum dy + x_hat sum dy x_hat) / n.
    const double b = -a * inv * sum_dy_xhat / shape_.count;
    return {static_cast<float>(a), static_cast<float>(b),
            static_cast<float>(-a * sum_dy / shape_.count - b * mean)};
  }

  const BatchNormDesc& desc_;
  LoopShape shape_;
  const Stats& stats_;
};

class KernelPlan final : public LayerPlan<BatchNormArgs> {
 public:
  KernelPlan(const BatchNormDesc& desc, Direction direction)
      : LayerPlan(kernel_info(desc), context_of(desc, direction, kernel_id)),
        desc_(desc),
        direction_(direction) {
    shape_.planes = desc.mode == BatchNormMode::spatial && desc.layout == Layout::channels_first;
    shape_.k = desc.statistics();
    shape_.n = desc.dims[0];
    shape_.s = desc.reduction_size() / shape_.n;
    shape_.rows = desc.reduction_size();
    shape_.count = static_cast<double>(desc.reduction_size());
  }

  void execute(const BatchNormArgs& args, detail::Workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    check_data(args.src, "src", desc_, context_);
    check_data(fwd ? args.dst : args.diff_src, fwd ? "dst" : "diff_src", desc_, context_);
    if (!fwd) check_data(args.diff_dst, "diff_dst", desc_, context_);
    const Stats s = stats_of(args, desc_, direction_, context_);
    switch (desc_.dtype) {
      case DType::f16: return run<F16>(args, s);
      case DType::bf16: return run<BF16>(args, s);
      default: return run<float>(args, s);
    }
  }

 private:
  template <typename T>
  void run(const BatchNormArgs& args, const Stats& s) const {
    const Loops<T> loops(desc_, shape_, s);
    const auto* x = static_cast<const T*>(args.src->data());
    const std::int64_t elements = desc_.reduction_size() * shape_.k;
    if (direction_ == Direction::fwd) {
      auto* y = static_cast<T*>(args.dst->data());
      parallel_ranges(shape_.k, elements * 3, [&](std::int64_t first, std::int64_t last) {
        loops.forward(x, y, first, last);
      });
      return;
    }
    const auto* dy = static_cast<const T*>(args.diff_dst->data());
    auto* dx = static_cast<T*>(args.diff_src->data());
    parallel_ranges(shape_.k, elements * 4, [&](std::int64_t first, std::int64_t last) {
      loops.backward(x, dy, dx, first, last);
    });
  }

  BatchNormDesc desc_;
  Direction direction_;
  LoopShape shape_;
};

// ---- the backend --------------------------------------------------------------------------------

class OneDnnBatchNorm final : public LayerBackend<BatchNormDesc, BatchNormArgs, Candidate> {
 public:
  explicit OneDnnBatchNorm(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend("cpu", op_text, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const BatchNormDesc& desc, Direction direction) override {
    return list_candidates(runtime_->engine, desc, direction, runtime_->isa);
  }
  std::shared_ptr<BatchNormPlan> build(const BatchNormDesc& desc, Direction direction,
                                       const Candidate& candidate) override {
    if (candidate.info.id == kernel_id) return std::make_shared<KernelPlan>(desc, direction);
    return std::make_shared<OneDnnPlan>(runtime_, desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::BatchNormBackend> make_batch_norm_backend(
    std::shared_ptr<Runtime> runtime) {
  return std::make_unique<OneDnnBatchNorm>(std::move(runtime));
}

}  // namespace dnnx::onednn
