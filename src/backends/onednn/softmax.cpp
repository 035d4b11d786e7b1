// The cpu backend's softmax: every implementation oneDNN offers for softmax_accurate (softmax) or
// softmax_log (log-softmax), under each memory strategy that makes a difference, as candidates;
// plans that run them on the caller's memory.
//
// Note [softmax strategies]
// oneDNN's jit softmax needs the normalized axis dense (innermost) or channel-blocked; for an
// axis with a stride (channel mode on nchw activations with spatial dims) it offers only ref:any,
// a scalar loop. Each implementation is therefore tried with two sets of memory descriptors:
//   plain       the caller's tensors as they are (instance mode: N x C*D*H*W, which is the same
//               bytes in both layouts; channel mode: the activation layout, axis 1);
//   transposed  channel mode on channels_first with spatial dims only: every tensor is reordered
//               to channels_last in the workspace, the softmax runs there in place, and the
//               output is reordered back (id suffix ":nhwc").
// Candidates whose implementation picks the same layouts are listed once; ref:any is listed once
// (plain) and last, as for convolution (Note [one reference candidate] in conv_list.cpp). oneDNN
// has no softmax without the max subtraction, so the cpu backend has no "fast" candidate.
// Determinism: Note [determinism] in conv_list.cpp applies (static work split, fixed order).
//
// Note [cpu softmax kernel]
// cpu:kernel is dnnx's own C++ softmax (simd.hpp): groups read as rows (inner 1) or,
// for channel mode on nchw, as columns vectorized over 64 positions at a time, so it needs no
// copies and no workspace in any layout. It is the backend's zero-workspace candidate (oneDNN's
// ref:any asks for a scratchpad on nchw), and runs in place. Its place in the list follows the
// measurements in docs/ops/softmax.md: first for nchw channel mode with spatial dims (where
// oneDNN's jit needs the nhwc copies), after oneDNN's jit implementations otherwise.
//
// Note [log-softmax shift]
// Log-softmax is computed as (x - max) - log(sum), never as x - (max + log(sum)): the folded
// shift max + log(sum) is rounded to the ulp of the maximum (2^-10 near 1e4, 2^-7 near 1e5), so
// every output would be off by up to half that, however small the output (log-softmax of {1e4,
// 1e4 + 1, 1e4 + 2, 1e4 + 3} would come out -0.4404297 instead of -0.4401897). x - max is exact
// when x and max are within a factor 2 of each other (Sterbenz) and otherwise rounded relative to
// itself, with |x - max| <= |y|; log(sum) carries the sum's relative error as an absolute one. The
// result is then within a few ulps of max(1, |y|) whatever the logits' magnitude. Every kernel of
// dnnx keeps the two apart: cpu:kernel's rows and columns here, the cross-entropy kernels (Note
// [xent stats] in cross_entropy.cpp), and the cudnn backend's CUDA kernels. oneDNN 3.2's
// softmax_log stores x - max and subtracts log(sum) afterwards (its jit code's polynomial exp and
// log are good to a few tens of ulps, measured without any dependence on the logits' magnitude);
// cuDNN's CUDNN_SOFTMAX_LOG folds the shift and is not offered for the forward pass (Note [cuDNN
// log-softmax] in backends/cudnn/softmax.cpp). The parity tests hold every candidate to Note
// [large-logit tolerance] (tests/ops/softmax_cases.cpp) on logits clustered near +-1e4 and +-1e5.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "backends/onednn/simd.hpp"
#include "core/check.hpp"
#include "core/softmax_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using Tag = memory::format_tag;

ErrorContext context_of(const SoftmaxDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(implementation));
}

// The caller's tensors as oneDNN sees them (Note [softmax strategies]); axis 1 in every case.
memory::desc user_md(const SoftmaxDesc& desc) {
  const memory::data_type type = data_type_of(desc.dtype);
  if (desc.mode == SoftmaxMode::instance)
    return memory::desc({desc.dims[0], desc.axis_size()}, type, Tag::ab);
  const memory::dims dims(desc.dims.begin(), desc.dims.end());
  return memory::desc(dims, type, activation_tag(desc.dims.rank(), desc.layout));
}

bool transposable(const SoftmaxDesc& desc) {
  return desc.mode == SoftmaxMode::channel && desc.layout == Layout::channels_first &&
         desc.dims.rank() > 2 && detail::spatial_size(desc.dims) > 1;
}

memory::desc transposed_md(const SoftmaxDesc& desc) {
  const memory::dims dims(desc.dims.begin(), desc.dims.end());
  return memory::desc(dims, data_type_of(desc.dtype),
                      activation_tag(desc.dims.rank(), Layout::channels_last));
}

// ---- cpu:kernel (Note [cpu softmax kernel]) ---------------------------------------------------

constexpr const char* kernel_id = "cpu:kernel";

// An f32 softmax row: maximum, then exp(x - max) stored while summed, then scaled by 1 / sum.
[[gnu::always_inline]] inline void forward_row_f32(const float* in, float* out, std::int64_t axis) {
  using simd::Vec;
  constexpr int lanes = simd::lanes;
  Vec m = simd::splat(-std::numeric_limits<float>::infinity());
  std::int64_t a = 0;
  for (; a + lanes <= axis; a += lanes) {
    const Vec v = simd::load_vec(in + a);
    m = m < v ? v : m;
  }
  float max = simd::max_lanes(m);
  for (; a < axis; ++a) max = max < in[a] ? in[a] : max;
  Vec s = simd::splat(0.0f);
  a = 0;
  for (; a + lanes <= axis; a += lanes) {
    const Vec e = simd::exp_vec(simd::load_vec(in + a) - max);
    simd::store_vec(out + a, e);
    s += e;
  }
  float sum = simd::sum_lanes(s);
  for (; a < axis; ++a) {
    const float e = simd::exp_nonpositive(in[a] - max);
    out[a] = e;
    sum += e;
  }
  const float inverse = 1.0f / sum;
  a = 0;
  for (; a + lanes <= axis; a += lanes) simd::store_vec(out + a, simd::load_vec(out + a) * inverse);
  for (; a < axis; ++a) out[a] *= inverse;
}

template <typename T>
[[gnu::always_inline]] inline void forward_rows_impl(const T* x, T* y, std::int64_t axis,
                                                     std::int64_t r0, std::int64_t r1, bool log) {
  constexpr int lanes = simd::lanes;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* in = x + r * axis;
    T* out = y + r * axis;
    if constexpr (std::is_same_v<T, float>) {
      // f32 output holds exp(x - max) exactly as computed: one exp per element instead of two.
      if (!log) {
        forward_row_f32(in, out, axis);
        continue;
      }
    }
    float max = 0, sum = 0;
    simd::row_max_sum(in, axis, max, sum);
    std::int64_t a = 0;
    if (log) {
      // Note [log-softmax shift]: (x - max) - log(sum), never x - (max + log(sum)).
      const float log_sum = std::log(sum);
      for (; a + lanes <= axis; a += lanes)
        simd::store_vec(out + a, (simd::load_vec(in + a) - max) - log_sum);
      for (; a < axis; ++a) simd::store(out, a, (simd::load(in, a) - max) - log_sum);
    } else {
      for (; a + lanes <= axis; a += lanes)
        simd::store_vec(out + a, simd::exp_vec(simd::load_vec(in + a) - max) / sum);
      for (; a < axis; ++a)
        simd::store(out, a, simd::exp_nonpositive(simd::load(in, a) - max) / sum);
    }
  }
}

template <typename T>
[[gnu::always_inline]] inline void forward_columns_impl(const T* x, T* y, std::int64_t axis,
                                                        std::int64_t inner, std::int64_t o,
                                                        std::int64_t i0, std::int64_t i1,
                                                        bool log) {
  float max[simd::column_block];
  float sum[simd::column_block];
  const std::int64_t n = i1 - i0;
  const std::int64_t first = o * axis * inner + i0;
  simd::column_max_sum(x + first, axis, inner, n, max, sum);
  if (log) {
    // Note [log-softmax shift]: sum[i] becomes log(sum[i]), max[i] stays apart.
    for (std::int64_t i = 0; i < n; ++i) sum[i] = std::log(sum[i]);
  }
  for (std::int64_t a = 0; a < axis; ++a) {
    const T* in = x + first + a * inner;
    T* out = y + first + a * inner;
    if (log) {
      for (std::int64_t i = 0; i < n; ++i)
        simd::store(out, i, (simd::load(in, i) - max[i]) - sum[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i)
        simd::store(out, i, simd::exp_nonpositive(simd::load(in, i) - max[i]) / sum[i]);
    }
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy), y <= 0.
template <typename T>
[[gnu::always_inline]] inline void backward_rows_impl(const T* y, const T* dy, T* dx,
                                                      std::int64_t axis, std::int64_t r0,
                                                      std::int64_t r1, bool log) {
  using simd::Vec;
  constexpr int lanes = simd::lanes;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* yr = y + r * axis;
    const T* dyr = dy + r * axis;
    T* dxr = dx + r * axis;
    Vec partial = simd::splat(0.0f);
    std::int64_t a = 0;
    for (; a + lanes <= axis; a += lanes) {
      const Vec g = simd::load_vec(dyr + a);
      partial += log ? g : g * simd::load_vec(yr + a);
    }
    float sum = simd::sum_lanes(partial);
    for (; a < axis; ++a) sum += log ? simd::load(dyr, a) : simd::load(dyr, a) * simd::load(yr, a);
    a = 0;
    for (; a + lanes <= axis; a += lanes) {
      const Vec v = simd::load_vec(yr + a);
      const Vec g = simd::load_vec(dyr + a);
      simd::store_vec(dxr + a, log ? g - simd::exp_vec(v) * sum : v * (g - sum));
    }
    for (; a < axis; ++a) {
      const float v = simd::load(yr, a);
      const float g = simd::load(dyr, a);
      simd::store(dxr, a, log ? g - simd::exp_nonpositive(v) * sum : v * (g - sum));
    }
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_columns_impl(const T* y, const T* dy, T* dx,
                                                         std::int64_t axis, std::int64_t inner,
                                                         std::int64_t o, std::int64_t i0,
                                                         std::int64_t i1, bool log) {
  float sum[simd::column_block];
  const std::int64_t n = i1 - i0;
  const std::int64_t first = o * axis * inner + i0;
  for (std::int64_t i = 0; i < n; ++i) sum[i] = 0;
  for (std::int64_t a = 0; a < axis; ++a) {
    const T* yc = y + first + a * inner;
    const T* dyc = dy + first + a * inner;
    for (std::int64_t i = 0; i < n; ++i)
      sum[i] += log ? simd::load(dyc, i) : simd::load(dyc, i) * simd::load(yc, i);
  }
  for (std::int64_t a = 0; a < axis; ++a) {
    const T* yc = y + first + a * inner;
    const T* dyc = dy + first + a * inner;
    T* dxc = dx + first + a * inner;
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = simd::load(yc, i);
      const float g = simd::load(dyc, i);
      simd::store(dxc, i, log ? g - simd::exp_nonpositive(v) * sum[i] : v * (g - sum[i]));
    }
  }
}

// T is a type (a cast's argument), which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DNNX_SOFTMAX_KERNELS(T, suffix)                                                          \
  DNNX_SIMD_CLONES void forward_rows_##suffix(const void* x, void* y, std::int64_t axis,         \
                                              std::int64_t r0, std::int64_t r1, bool log) {      \
    forward_rows_impl(static_cast<const T*>(x), static_cast<T*>(y), axis, r0, r1, log);          \
  }                                                                                              \
  DNNX_SIMD_CLONES void forward_columns_##suffix(const void* x, void* y, std::int64_t axis,      \
                                                 std::int64_t inner, std::int64_t o,             \
                                                 std::int64_t i0, std::int64_t i1, bool log) {   \
    forward_columns_impl(static_cast<const T*>(x), static_cast<T*>(y), axis, inner, o, i0, i1,   \
                         log);                                                                   \
  }                                                                                              \
  DNNX_SIMD_CLONES void backward_rows_##suffix(const void* y, const void* dy, void* dx,          \
                                               std::int64_t axis, std::int64_t r0,               \
                                               std::int64_t r1, bool log) {                      \
    backward_rows_impl(static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), \
                       axis, r0, r1, log);                                                       \
  }                                                                                              \
  DNNX_SIMD_CLONES void backward_columns_##suffix(                                               \
      const void* y, const void* dy, void* dx, std::int64_t axis, std::int64_t inner,            \
      std::int64_t o, std::int64_t i0, std::int64_t i1, bool log) {                              \
    backward_columns_impl(static_cast<const T*>(y), static_cast<const T*>(dy),                   \
                          static_cast<T*>(dx), axis, inner, o, i0, i1, log);                     \
  }

DNNX_SOFTMAX_KERNELS(float, f32)
DNNX_SOFTMAX_KERNELS(simd::F16, f16)
DNNX_SOFTMAX_KERNELS(simd::Bf16, bf16)
#undef DNNX_SOFTMAX_KERNELS
// NOLINTEND(bugprone-macro-parentheses)

struct Kernels {
  void (*forward_rows)(const void*, void*, std::int64_t, std::int64_t, std::int64_t, bool);
  void (*forward_columns)(const void*, void*, std::int64_t, std::int64_t, std::int64_t,
                          std::int64_t, std::int64_t, bool);
  void (*backward_rows)(const void*, const void*, void*, std::int64_t, std::int64_t, std::int64_t,
                        bool);
  void (*backward_columns)(const void*, const void*, void*, std::int64_t, std::int64_t,
                           std::int64_t, std::int64_t, std::int64_t, bool);
};

Kernels kernels_of(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return {forward_rows_f16, forward_columns_f16, backward_rows_f16, backward_columns_f16};
    case DType::bf16:
      return {forward_rows_bf16, forward_columns_bf16, backward_rows_bf16, backward_columns_bf16};
    default:
      return {forward_rows_f32, forward_columns_f32, backward_rows_f32, backward_columns_f32};
  }
}

AlgoInfo kernel_info(const SoftmaxDesc& desc) {
  AlgoInfo info =
      kernel_info_of(kernel_id, "dnnx C++ SIMD (max-subtracted; rows, or columns on nchw)");
  info.workspace_bytes = 0;
  info.notes = {"kernel", desc.log ? "log" : "accurate"};
  info.families = {"small"};
  return info;
}

// Whether cpu:kernel leads the list (Note [cpu softmax kernel]).
bool kernel_first(const SoftmaxDesc& desc) {
  return desc.mode == SoftmaxMode::channel && desc.layout == Layout::channels_first &&
         detail::spatial_size(desc.dims) > 1;
}

// One tensor of a direction: fwd src -> dst; bwd dst, diff_dst -> diff_src.
struct Role {
  int arg;
  const char* name;
};
constexpr std::array<Role, 2> fwd_roles{{{DNNL_ARG_SRC, "src"}, {DNNL_ARG_DST, "dst"}}};
constexpr std::array<Role, 3> bwd_roles{
    {{DNNL_ARG_DST, "dst"}, {DNNL_ARG_DIFF_DST, "diff_dst"}, {DNNL_ARG_DIFF_SRC, "diff_src"}}};

struct Candidate {
  AlgoInfo info;
  bool kernel = false;           // cpu:kernel (no oneDNN object)
  dnnl::primitive_desc softmax;  // null if unsupported
  dnnl::primitive_desc hint;     // bwd: the forward pd, which must outlive `softmax`
  bool transposed = false;
  memory::desc user;
  memory::desc inner;
  dnnl::reorder::primitive_desc to_inner;  // transposed: user -> inner reorder
  dnnl::reorder::primitive_desc to_user;   // transposed: inner -> user reorder
  std::size_t scratch_bytes = 0;
};

// The softmax primitive descriptor on `md` (positioned at oneDNN's first implementation), or
// null with `failure` set when oneDNN has none.
struct SoftmaxPd {
  dnnl::primitive_desc pd;
  dnnl::primitive_desc hint;
};
SoftmaxPd create_pd(const dnnl::engine& engine, const SoftmaxDesc& desc, Direction direction,
                    const memory::desc& md, const ErrorContext& context, std::string& failure) {
  const dnnl::algorithm algorithm =
      desc.log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  const dnnl::primitive_attr attr = user_scratchpad();
  return create_or_unavailable(
      [&]() -> SoftmaxPd {
        const dnnl::softmax_forward::primitive_desc hint(engine, dnnl::prop_kind::forward_training,
                                                         algorithm, md, md, 1, attr);
        if (direction == Direction::fwd) return {hint, {}};
        return {
            dnnl::softmax_backward::primitive_desc(engine, algorithm, md, md, md, 1, hint, attr),
            hint};
      },
      "softmax primitive descriptor", context, failure);
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const SoftmaxDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, {});
  const memory::desc user = user_md(desc);
  struct Strategy {
    bool transposed;
    memory::desc inner;
  };
  std::vector<Strategy> strategies;
  // The jit implementations come with the transposed strategy where the plain one has only ref.
  if (transposable(desc)) strategies.push_back({true, transposed_md(desc)});
  strategies.push_back({false, user});

  std::vector<Candidate> candidates;
  std::set<std::string> seen;
  std::string failure;
  for (const Strategy& strategy : strategies) {
    SoftmaxPd softmax = create_pd(engine, desc, direction, strategy.inner, context, failure);
    if (!softmax.pd) continue;
    do {
      const std::string impl = sanitize(softmax.pd.impl_info_str());
      Candidate candidate;
      candidate.transposed = strategy.transposed;
      candidate.user = user;
      candidate.inner = strategy.inner;
      AlgoInfo& info = candidate.info;
      info.id = detail::cat("onednn:", impl, strategy.transposed ? ":nhwc" : "");
      // Note [softmax strategies]: one ref candidate, the plain one.
      if (impl.starts_with("ref") && strategy.transposed) continue;
      if (!seen.insert(info.id).second) continue;
      info.name = detail::cat(impl, desc.log ? " (log-softmax" : " (softmax, max-subtracted",
                              strategy.transposed ? ", via nhwc copies)" : ")");
      info.deterministic = true;
      info.notes = {desc.log ? "log" : "accurate"};
      if (impl.starts_with("ref")) {
        detail::mark_naive(info);
      } else {
        info.notes.emplace_back("jit");
        info.families = {"small"};
      }
      if (strategy.transposed) info.notes.emplace_back("nhwc");
      candidate.softmax = clone(softmax.pd, context);
      candidate.hint = softmax.hint;
      std::size_t scratch = softmax.pd.scratchpad_desc().get_size();
      std::size_t buffers = 0;
      if (strategy.transposed) {
        try {
          const dnnl::primitive_attr attr = user_scratchpad();
          candidate.to_inner =
              dnnl::reorder::primitive_desc(engine, user, engine, strategy.inner, attr);
          candidate.to_user =
              dnnl::reorder::primitive_desc(engine, strategy.inner, engine, user, attr);
        } catch (const dnnl::error& error) {
          if (error.status != dnnl_unimplemented)
            raise_dnnl(error.status, detail::cat("creating the nhwc reorders: ", error.what()),
                       context);
          info.supported = false;
          info.reason = detail::cat("oneDNN cannot reorder between nchw and nhwc: ", error.what());
          candidates.push_back(std::move(candidate));
          continue;
        }
        scratch = std::max({scratch, candidate.to_inner.scratchpad_desc().get_size(),
                            candidate.to_user.scratchpad_desc().get_size()});
        // fwd: one buffer (the softmax runs in place on it); bwd: dst and diff_dst (diff_src in
        // place over diff_dst).
        buffers = direction == Direction::fwd ? 1 : 2;
      }
      candidate.scratch_bytes = scratch;
      info.workspace_bytes =
          buffers == 0 ? scratch : round_up(scratch) + buffers * round_up(user.get_size());
      info.supported = true;
      candidates.push_back(std::move(candidate));
    } while (softmax.pd.next_impl());
  }
  std::stable_partition(candidates.begin(), candidates.end(),
                        [](const Candidate& c) { return !c.info.naive; });
  const bool none = candidates.empty();
  Candidate kernel;
  kernel.kernel = true;
  kernel.info = kernel_info(desc);
  const auto before = kernel_first(desc)
                          ? candidates.begin()
                          : std::find_if(candidates.begin(), candidates.end(),
                                         [](const Candidate& c) { return c.info.naive; });
  candidates.insert(before, std::move(kernel));
  if (none) {
    Candidate unavailable;
    unavailable.info.id = "onednn:unavailable:softmax";
    unavailable.info.name = "softmax (no oneDNN implementation)";
    unavailable.info.reason = detail::cat(
        onednn_version(), " has no softmax ", to_string(direction), " implementation for ",
        to_string(desc.dtype), ' ', to_string(desc.layout), " on cpu isa ", isa, ": ", failure);
    candidates.push_back(std::move(unavailable));
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
  return candidates;
}

// Runs one candidate. Every primitive and memory object is made here, once; execute() only
// rebinds data pointers (Note [one stream] in runtime.hpp).
class Plan final : public detail::OpPlan<detail::SoftmaxArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const SoftmaxDesc& desc, Direction direction,
       const Candidate& candidate)
      : runtime_(std::move(runtime)),
        info_(candidate.info),
        context_(context_of(desc, direction, candidate.info.id)),
        desc_(desc),
        direction_(direction),
        hint_(candidate.hint) {
    const dnnl::engine& engine = runtime_->engine;
    const std::size_t inputs = direction == Direction::fwd ? 1 : 2;
    dnnl_call(context_, "building the primitives", [&] {
      for (std::size_t r = 0; r <= inputs; ++r)
        user_[r] = dnnl::memory(candidate.user, engine, DNNL_MEMORY_NONE);
      const int output_arg = direction == Direction::fwd ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC;
      if (!candidate.transposed) {
        std::vector<dnnl_exec_arg_t> args;
        const auto& roles = direction == Direction::fwd ? std::span<const Role>(fwd_roles)
                                                        : std::span<const Role>(bwd_roles);
        for (std::size_t r = 0; r < roles.size(); ++r)
          args.push_back({roles[r].arg, user_[r].get()});
        add_step(candidate.softmax, std::move(args));
        return;
      }
      const std::size_t buffer_bytes = round_up(candidate.user.get_size());
      for (std::size_t b = 0; b < inputs; ++b) {
        buffers_[b] = dnnl::memory(candidate.inner, engine, DNNL_MEMORY_NONE);
        offsets_[b] = round_up(candidate.scratch_bytes) + b * buffer_bytes;
        add_step(candidate.to_inner,
                 {{DNNL_ARG_FROM, user_[b].get()}, {DNNL_ARG_TO, buffers_[b].get()}});
      }
      // The softmax writes over its last input's buffer (oneDNN supports both in place).
      if (direction == Direction::fwd) {
        add_step(candidate.softmax,
                 {{DNNL_ARG_SRC, buffers_[0].get()}, {DNNL_ARG_DST, buffers_[0].get()}});
      } else {
        add_step(candidate.softmax, {{DNNL_ARG_DST, buffers_[0].get()},
                                     {DNNL_ARG_DIFF_DST, buffers_[1].get()},
                                     {output_arg, buffers_[1].get()}});
      }
      add_step(candidate.to_user,
               {{DNNL_ARG_FROM, buffers_[inputs - 1].get()}, {DNNL_ARG_TO, user_[inputs].get()}});
    });
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::SoftmaxArgs& args, detail::Workspace workspace) override {
    std::array<const Tensor*, 3> tensors{};
    std::array<const char*, 3> names{};
    std::size_t count = 0;
    if (direction_ == Direction::fwd) {
      tensors = {args.src, args.dst, nullptr}, names = {"src", "dst", nullptr}, count = 2;
    } else {
      tensors = {args.saved_dst, args.diff_dst, args.diff_src};
      names = {"dst", "diff_dst", "diff_src"}, count = 3;
    }
    for (std::size_t r = 0; r < count; ++r) check_tensor(tensors[r], names[r]);
    if (workspace.bytes < info_.workspace_bytes ||
        (info_.workspace_bytes > 0 && workspace.data == nullptr)) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("workspace has ", workspace.bytes, " bytes at ", workspace.data,
                                "; this candidate needs ", info_.workspace_bytes),
                    context_);
    }
    auto* base = static_cast<std::byte*>(workspace.data);
    std::lock_guard lock(runtime_->mutex);
    for (std::size_t r = 0; r < count; ++r) bind(user_[r], tensors[r]->data());
    for (std::size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b]) bind(buffers_[b], base + offsets_[b]);
    const dnnl_stream_t stream = runtime_->stream.get();
    // Every step's scratchpad starts at workspace offset 0: the steps run one after the other.
    for (Step& step : steps_) run_step(step, stream, base, context_);
    wait(stream, context_);
  }

 private:
  void add_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args) {
    steps_.push_back(make_step(pd, std::move(args), runtime_->engine));
  }

  void check_tensor(const Tensor* tensor, const char* role) const {
    check_dense_on_cpu(tensor, role, desc_.dims, desc_.dtype, desc_.layout, context_);
  }

  void bind(const dnnl::memory& memory, void* data) const { onednn::bind(memory, data, context_); }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  SoftmaxDesc desc_;
  Direction direction_;
  dnnl::primitive_desc hint_;            // destroyed after the primitives that point to it
  std::array<dnnl::memory, 3> user_;     // bound to the caller's tensors, in role order
  std::array<dnnl::memory, 2> buffers_;  // transposed copies in the workspace (null: none)
  std::array<std::size_t, 2> offsets_{};
  std::vector<Step> steps_;
};

// Runs cpu:kernel: groups in blocks of rows (inner 1) or of 64 columns, over the threads when
// the tensor is large (simd::parallel_blocks). In place is safe: each group is read completely
// before its outputs are written, element by element in the same order.
class KernelPlan final : public detail::OpPlan<detail::SoftmaxArgs> {
 public:
  KernelPlan(const SoftmaxDesc& desc, Direction direction)
      : info_(kernel_info(desc)),
        context_(context_of(desc, direction, kernel_id)),
        desc_(desc),
        direction_(direction),
        geometry_(detail::axis_geometry(desc)),
        kernels_(kernels_of(desc.dtype)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::SoftmaxArgs& args, detail::Workspace) override {
    const bool fwd = direction_ == Direction::fwd;
    const Tensor* first = fwd ? args.src : args.saved_dst;
    const Tensor* output = fwd ? args.dst : args.diff_src;
    check(first, fwd ? "src" : "dst");
    if (!fwd) check(args.diff_dst, "diff_dst");
    check(output, fwd ? "dst" : "diff_src");
    const void* a = first->data();
    const void* b = fwd ? nullptr : args.diff_dst->data();
    void* out = output->data();
    const detail::AxisGeometry& g = geometry_;
    const bool log = desc_.log;
    constexpr std::int64_t block = simd::column_block;
    if (g.inner == 1) {
      simd::parallel_blocks((g.outer + block - 1) / block, g.elements(),
                            [&](std::int64_t b0, std::int64_t b1) {
                              const std::int64_t r0 = b0 * block;
                              const std::int64_t r1 = std::min(g.outer, b1 * block);
                              if (fwd) {
                                kernels_.forward_rows(a, out, g.axis, r0, r1, log);
                              } else {
                                kernels_.backward_rows(a, b, out, g.axis, r0, r1, log);
                              }
                            });
      return;
    }
    const std::int64_t per_outer = (g.inner + block - 1) / block;
    simd::parallel_blocks(g.outer * per_outer, g.elements(), [&](std::int64_t u0, std::int64_t u1) {
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t o = u / per_outer;
        const std::int64_t i0 = (u % per_outer) * block;
        const std::int64_t i1 = std::min(g.inner, i0 + block);
        if (fwd) {
          kernels_.forward_columns(a, out, g.axis, g.inner, o, i0, i1, log);
        } else {
          kernels_.backward_columns(a, b, out, g.axis, g.inner, o, i0, i1, log);
        }
      }
    });
  }

 private:
  void check(const Tensor* tensor, const char* role) const {
    check_dense_on_cpu(tensor, role, desc_.dims, desc_.dtype, desc_.layout, context_);
  }

  AlgoInfo info_;
  ErrorContext context_;
  SoftmaxDesc desc_;
  Direction direction_;
  detail::AxisGeometry geometry_;
  Kernels kernels_;
};

// The candidate lists and plans of one backend instance (ListedOpBackend keeps both).
class OneDnnSoftmax final : public ListedLayerBackend<SoftmaxDesc, detail::SoftmaxArgs, Candidate,
                                                      list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::SoftmaxArgs>> build(const SoftmaxDesc& desc,
                                                             Direction direction,
                                                             const Candidate& candidate) override {
    if (candidate.kernel) return std::make_shared<KernelPlan>(desc, direction);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::softmax>> make_softmax_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnSoftmax>(std::move(runtime));
}

}  // namespace dnnx::onednn
