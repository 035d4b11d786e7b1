// The cpu backend's cross-entropy. Candidates, in priority order (Note [xent cpu candidates]):
//   cpu:fused                 one C++ pass per position group: log-sum-exp, then the NLL (fwd) or
//                             w * g * (softmax - onehot) (bwd), vectorized over the classes (rows)
//                             or over positions (channels_first spatial), parallel over blocks;
//   onednn:<impl>[:nhwc]+nll  oneDNN's log-softmax (fwd) or softmax (bwd), every implementation,
//                             into an f32 workspace, then the NLL / gradient in C++ over it.
//
// Note [xent cpu candidates]
// The fused candidate reads the logits twice per group (max, then sum of exponentials; a third
// time for the gradient) while they sit in L1, and writes nothing but the loss; the oneDNN
// candidates write and re-read an f32 copy of the whole tensor. So the fused candidate is the
// faster one on every shape measured (docs/ops/cross_entropy.md, "cpu (oneDNN 3.2 + dnnx C++)"),
// and it is the heuristic first choice; exhaustive selection times them all.
//
// Note [xent label scan]
// Every plan first walks the labels once: out-of-range labels raise InvalidArgument naming the
// lowest bad position before any output is written, and the sum of the weights of the positions
// not ignored (the mean's divisor) comes out of the same walk. It reads P labels against the
// P*C logits the pass proper reads.
//
// Note [xent blocks]
// Positions are cut into fixed blocks of `block_positions`; threads take contiguous ranges of
// blocks, and the mean / sum adds per-block f64 partial sums (held in the workspace) in block
// order. The result is therefore bitwise the same for every thread count. Threads are started
// only when each gets at least `min_elements_per_thread` logits (starting one costs tens of
// microseconds).

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "backends/onednn/simd.hpp"
#include "core/check.hpp"
#include "core/cross_entropy_args.hpp"
#include "core/dtype.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using simd::Bf16;
using simd::exp_nonpositive;
using simd::load;
using simd::store;

using Tag = memory::format_tag;

constexpr const char* fused_id = "cpu:fused";
constexpr std::int64_t block_positions = simd::column_block;

ErrorContext context_of(const CrossEntropyDesc& desc, Direction direction,
                        std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(implementation));
}

// Note [xent stats]: each position's maximum m and sum s of exp(x - m), kept apart rather than
// folded into lse = m + log s: with logits of magnitude 1e4, lse rounded to f32 is off by up to
// 5e-4, which exp(x - lse) would turn into a relative error of 5e-4 in every probability. The
// kernels compute nll = (m - x_y) + log s and softmax = exp(x - m) / s instead, whose f32
// rounding stays within a few ulps whatever the magnitude.

// m and s of rows p0..p1 (C contiguous classes each).
template <typename T>
[[gnu::always_inline]] inline void stats_rows_impl(const T* x, std::int64_t classes,
                                                   std::int64_t p0, std::int64_t p1, float* max,
                                                   float* sum) {
  for (std::int64_t p = p0; p < p1; ++p)
    simd::row_max_sum(x + p * classes, classes, max[p - p0], sum[p - p0]);
}

// The same for the positions i0..i1 of outer index o of a channels_first tensor: class c of
// position i at x[(o * classes + c) * inner + i]; vectorized over i.
template <typename T>
[[gnu::always_inline]] inline void stats_columns_impl(const T* x, std::int64_t classes,
                                                      std::int64_t inner, std::int64_t o,
                                                      std::int64_t i0, std::int64_t i1, float* max,
                                                      float* sum) {
  simd::column_max_sum(x + o * classes * inner + i0, classes, inner, i1 - i0, max, sum);
}

// dx = scale * exp(x - m) for rows p0..p1, scale = g / s (the label's element is fixed up by
// the caller).
template <typename T>
[[gnu::always_inline]] inline void grad_rows_impl(const T* x, T* dx, std::int64_t classes,
                                                  std::int64_t p0, std::int64_t p1,
                                                  const float* max, const float* scale) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const T* row = x + p * classes;
    T* out = dx + p * classes;
    const float m = max[p - p0];
    const float f = scale[p - p0];
    std::int64_t c = 0;
    for (; c + simd::lanes <= classes; c += simd::lanes)
      simd::store_vec(out + c, f * simd::exp_vec(simd::load_vec(row + c) - m));
    for (; c < classes; ++c) store(out, c, f * exp_nonpositive(load(row, c) - m));
  }
}

template <typename T>
[[gnu::always_inline]] inline void grad_columns_impl(const T* x, T* dx, std::int64_t classes,
                                                     std::int64_t inner, std::int64_t o,
                                                     std::int64_t i0, std::int64_t i1,
                                                     const float* max, const float* scale) {
  const std::int64_t n = i1 - i0;
  const std::int64_t offset = o * classes * inner + i0;
  for (std::int64_t c = 0; c < classes; ++c) {
    const T* column = x + offset + c * inner;
    T* out = dx + offset + c * inner;
    for (std::int64_t i = 0; i < n; ++i)
      store(out, i, scale[i] * exp_nonpositive(load(column, i) - max[i]));
  }
}

// One multiversioned entry point per (kernel, storage type) (Note [simd clones]).
// T is a type (a cast's argument), which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DNNX_XENT_KERNELS(T, suffix)                                                              \
  DNNX_SIMD_CLONES void stats_rows_##suffix(const void* x, std::int64_t classes, std::int64_t p0, \
                                            std::int64_t p1, float* max, float* sum) {            \
    stats_rows_impl(static_cast<const T*>(x), classes, p0, p1, max, sum);                         \
  }                                                                                               \
  DNNX_SIMD_CLONES void stats_columns_##suffix(                                                   \
      const void* x, std::int64_t classes, std::int64_t inner, std::int64_t o, std::int64_t i0,   \
      std::int64_t i1, float* max, float* sum) {                                                  \
    stats_columns_impl(static_cast<const T*>(x), classes, inner, o, i0, i1, max, sum);            \
  }                                                                                               \
  DNNX_SIMD_CLONES void grad_rows_##suffix(const void* x, void* dx, std::int64_t classes,         \
                                           std::int64_t p0, std::int64_t p1, const float* max,    \
                                           const float* scale) {                                  \
    grad_rows_impl(static_cast<const T*>(x), static_cast<T*>(dx), classes, p0, p1, max, scale);   \
  }                                                                                               \
  DNNX_SIMD_CLONES void grad_columns_##suffix(                                                    \
      const void* x, void* dx, std::int64_t classes, std::int64_t inner, std::int64_t o,          \
      std::int64_t i0, std::int64_t i1, const float* max, const float* scale) {                   \
    grad_columns_impl(static_cast<const T*>(x), static_cast<T*>(dx), classes, inner, o, i0, i1,   \
                      max, scale);                                                                \
  }

DNNX_XENT_KERNELS(float, f32)
DNNX_XENT_KERNELS(simd::F16, f16)
DNNX_XENT_KERNELS(Bf16, bf16)
#undef DNNX_XENT_KERNELS
// NOLINTEND(bugprone-macro-parentheses)

struct Kernels {
  void (*stats_rows)(const void*, std::int64_t, std::int64_t, std::int64_t, float*, float*);
  void (*stats_columns)(const void*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                        std::int64_t, float*, float*);
  void (*grad_rows)(const void*, void*, std::int64_t, std::int64_t, std::int64_t, const float*,
                    const float*);
  void (*grad_columns)(const void*, void*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, const float*, const float*);
};

Kernels kernels_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return {stats_rows_f16, stats_columns_f16, grad_rows_f16, grad_columns_f16};
    case DType::bf16:
      return {stats_rows_bf16, stats_columns_bf16, grad_rows_bf16, grad_columns_bf16};
    default: return {stats_rows_f32, stats_columns_f32, grad_rows_f32, grad_columns_f32};
  }
}

// ---- the pieces every plan shares --------------------------------------------------------------

// The positions [p0, p1) of one block as runs sharing an outer index: f(o, i0, i1, first p).
template <typename F>
void for_each_run(const detail::AxisGeometry& g, std::int64_t p0, std::int64_t p1, F&& f) {
  std::int64_t p = p0;
  while (p < p1) {
    const std::int64_t o = p / g.inner;
    const std::int64_t i0 = p % g.inner;
    const std::int64_t i1 = std::min(g.inner, i0 + (p1 - p));
    f(o, i0, i1, p);
    p += i1 - i0;
  }
}

// What Note [xent label scan] gathers: the labels, exactly, and the mean's divisor.
struct Labels {
  const void* data = nullptr;
  DType dtype = DType::i64;
  std::int64_t at(std::int64_t p) const {
    return dtype == DType::i32 ? static_cast<const std::int32_t*>(data)[p]
                               : static_cast<const std::int64_t*>(data)[p];
  }
};

double scan_labels(const CrossEntropyDesc& desc, const Labels& labels, const float* weights,
                   const ErrorContext& context) {
  const std::int64_t positions = desc.positions();
  const std::int64_t classes = desc.classes();
  double total_weight = 0;
  for (std::int64_t p = 0; p < positions; ++p) {
    const std::int64_t y = labels.at(p);
    if (y == desc.ignore_index) continue;
    if (y < 0 || y >= classes) {
      detail::raise(ErrorKind::InvalidArgument, detail::bad_label_message(desc, p, y), context);
    }
    total_weight += weights != nullptr ? weights[y] : 1.0;
  }
  return total_weight;
}

// Element (position p, class c) of a tensor of geometry g.
std::int64_t element(const detail::AxisGeometry& g, std::int64_t p, std::int64_t c) {
  return ((p / g.inner) * g.axis + c) * g.inner + p % g.inner;
}

// The per-position factor of the gradient: w * diff_loss[p] (none), w * diff_loss[0] (sum),
// w * diff_loss[0] / total_weight (mean; PyTorch's order, 0/0 is NaN); 0 where ignored.
struct GradScale {
  Reduction reduction;
  const void* diff_loss;
  DType dtype;
  double total_weight;
  float operator()(std::int64_t p, float w) const {
    switch (reduction) {
      case Reduction::none: return w * detail::load_f32(element_ptr(p), dtype);
      case Reduction::sum: return w * detail::load_f32(diff_loss, dtype);
      case Reduction::mean:
        return static_cast<float>(w * detail::load_f32(diff_loss, dtype) / total_weight);
    }
    return 0;
  }
  const void* element_ptr(std::int64_t p) const {
    return static_cast<const unsigned char*>(diff_loss) +
           static_cast<std::size_t>(p) * size_of(dtype);
  }
};

// The geometry, tensors and per-call values one execution works with.
struct Call {
  const CrossEntropyDesc* desc;
  detail::AxisGeometry g;  // of the logits in their layout
  const void* logits;
  Labels labels;
  const float* weights;  // null when not weighted
  double total_weight;
  double* partials;  // workspace: one f64 per block (sum / mean)
  std::int64_t blocks;

  float weight(std::int64_t y) const { return weights != nullptr ? weights[y] : 1.0f; }
};

// g[p - p0] for the positions p0..p1 of a backward pass: the scale of each position's gradient
// (0 where its label is ignore_index).
[[gnu::always_inline]] inline void gradient_scales(const Call& call, const GradScale& scale,
                                                   std::int64_t p0, std::int64_t p1, float* g) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t y = call.labels.at(p);
    g[p - p0] = y == call.desc->ignore_index ? 0.0f : scale(p, call.weight(y));
  }
}

// Finishes a forward pass from per-position losses already stored (none) or from the block
// partials (sum / mean).
void finish_loss(const Call& call, Tensor& loss) {
  if (call.desc->reduction == Reduction::none) return;
  double total = 0;
  for (std::int64_t b = 0; b < call.blocks; ++b) total += call.partials[b];
  const double value = call.desc->reduction == Reduction::mean ? total / call.total_weight : total;
  detail::store_f32(loss.data(), call.desc->dtype, static_cast<float>(value));
}

// Per position p of a block: records the loss -w * logp (none: stored; else added to the
// block's partial). `logp(p, y)` is the log-probability of class y at position p.
template <typename LogProb>
void nll_block(const Call& call, std::int64_t block, std::int64_t p0, std::int64_t p1, void* loss,
               LogProb&& logp) {
  double partial = 0;
  const DType dtype = call.desc->dtype;
  const std::size_t size = size_of(dtype);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t y = call.labels.at(p);
    float value = 0;
    if (y != call.desc->ignore_index) value = -call.weight(y) * logp(p, y);
    if (call.desc->reduction == Reduction::none) {
      detail::store_f32(static_cast<unsigned char*>(loss) + static_cast<std::size_t>(p) * size,
                        dtype, value);
    } else {
      partial += value;
    }
  }
  if (call.desc->reduction != Reduction::none) call.partials[block] = partial;
}

// ---- the fused candidate -----------------------------------------------------------------------

void fused_forward(const Call& call, const Kernels& kernels, Tensor& loss) {
  const std::int64_t positions = call.desc->positions();
  const std::int64_t classes = call.g.axis;
  const DType dtype = call.desc->dtype;
  simd::parallel_blocks(call.blocks, call.g.elements(), [&](std::int64_t b0, std::int64_t b1) {
    float max[block_positions];
    float sum[block_positions];
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t p0 = b * block_positions;
      const std::int64_t p1 = std::min(positions, p0 + block_positions);
      for_each_run(call.g, p0, p1,
                   [&](std::int64_t o, std::int64_t i0, std::int64_t i1, std::int64_t first) {
                     const std::int64_t k = first - p0;
                     if (call.g.inner == 1) {
                       kernels.stats_rows(call.logits, classes, first, first + (i1 - i0), max + k,
                                          sum + k);
                     } else {
                       kernels.stats_columns(call.logits, classes, call.g.inner, o, i0, i1, max + k,
                                             sum + k);
                     }
                   });
      // Note [xent stats]: log p_y = (x_y - m) - log s.
      nll_block(call, b, p0, p1, loss.data(), [&](std::int64_t p, std::int64_t y) {
        const float x =
            detail::load_f32(static_cast<const unsigned char*>(call.logits) +
                                 static_cast<std::size_t>(element(call.g, p, y)) * size_of(dtype),
                             dtype);
        return (x - max[p - p0]) - std::log(sum[p - p0]);
      });
    }
  });
  finish_loss(call, loss);
}

void fused_backward(const Call& call, const Kernels& kernels, const GradScale& scale,
                    Tensor& diff_logits) {
  const std::int64_t positions = call.desc->positions();
  const std::int64_t classes = call.g.axis;
  const DType dtype = call.desc->dtype;
  const std::size_t size = size_of(dtype);
  simd::parallel_blocks(call.blocks, call.g.elements(), [&](std::int64_t b0, std::int64_t b1) {
    float max[block_positions];
    float sum[block_positions];
    float g[block_positions];
    float factor[block_positions];
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t p0 = b * block_positions;
      const std::int64_t p1 = std::min(positions, p0 + block_positions);
      gradient_scales(call, scale, p0, p1, g);
      for_each_run(call.g, p0, p1,
                   [&](std::int64_t o, std::int64_t i0, std::int64_t i1, std::int64_t first) {
                     const std::int64_t k = first - p0;
                     const std::int64_t n = i1 - i0;
                     if (call.g.inner == 1) {
                       kernels.stats_rows(call.logits, classes, first, first + n, max + k, sum + k);
                     } else {
                       kernels.stats_columns(call.logits, classes, call.g.inner, o, i0, i1, max + k,
                                             sum + k);
                     }
                     for (std::int64_t j = k; j < k + n; ++j) factor[j] = g[j] / sum[j];
                     if (call.g.inner == 1) {
                       kernels.grad_rows(call.logits, diff_logits.data(), classes, first, first + n,
                                         max + k, factor + k);
                     } else {
                       kernels.grad_columns(call.logits, diff_logits.data(), classes, call.g.inner,
                                            o, i0, i1, max + k, factor + k);
                     }
                   });
      // The label's element: g * (softmax - 1).
      for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t y = call.labels.at(p);
        if (y == call.desc->ignore_index) continue;
        const auto offset = static_cast<std::size_t>(element(call.g, p, y)) * size;
        const float x =
            detail::load_f32(static_cast<const unsigned char*>(call.logits) + offset, dtype);
        const float softmax = std::exp(x - max[p - p0]) / sum[p - p0];
        detail::store_f32(static_cast<unsigned char*>(diff_logits.data()) + offset, dtype,
                          g[p - p0] * (softmax - 1.0f));
      }
    }
  });
}

// ---- candidates --------------------------------------------------------------------------------

struct Candidate {
  AlgoInfo info;
  bool fused = false;
  // oneDNN candidates:
  dnnl::primitive_desc softmax;           // logits (or their f32 nhwc copy) -> f32 probabilities
  dnnl::reorder::primitive_desc reorder;  // transposed: logits -> f32 nhwc copy (null: none)
  memory::desc user;                      // the logits as the caller holds them
  memory::desc probabilities;             // the f32 workspace copy (caller's layout, or nhwc)
  Layout probabilities_layout = Layout::channels_first;
  std::size_t scratch_bytes = 0;
};

std::size_t partials_bytes(const CrossEntropyDesc& desc) {
  if (desc.reduction == Reduction::none) return 0;
  const std::int64_t blocks = (desc.positions() + block_positions - 1) / block_positions;
  return static_cast<std::size_t>(blocks) * sizeof(double);
}

AlgoInfo fused_info(const CrossEntropyDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = fused_id;
  info.name = direction == Direction::fwd ? "fused log-sum-exp + NLL (C++ SIMD, one pass)"
                                          : "fused softmax - onehot (C++ SIMD, one pass)";
  info.supported = true;
  info.deterministic = true;  // Note [xent blocks]
  info.workspace_bytes = direction == Direction::fwd ? partials_bytes(desc) : 0;
  info.notes = {"fused", "accurate"};
  info.families = {"small"};
  return info;
}

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const CrossEntropyDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, {});
  std::vector<Candidate> candidates;
  Candidate fused;
  fused.fused = true;
  fused.info = fused_info(desc, direction);
  candidates.push_back(std::move(fused));

  const memory::dims dims(desc.dims.begin(), desc.dims.end());
  const int rank = desc.dims.rank();
  const memory::desc user(dims, data_type_of(desc.dtype), activation_tag(rank, desc.layout));
  const bool transposable =
      desc.layout == Layout::channels_first && rank > 2 && detail::spatial_size(desc.dims) > 1;
  struct Strategy {
    bool transposed;
    Layout layout;
  };
  std::vector<Strategy> strategies;
  if (transposable) strategies.push_back({true, Layout::channels_last});
  strategies.push_back({false, desc.layout});

  const dnnl::algorithm algorithm = direction == Direction::fwd ? dnnl::algorithm::softmax_log
                                                                : dnnl::algorithm::softmax_accurate;
  const dnnl::primitive_attr attr = user_scratchpad();
  std::set<std::string> seen;
  std::string failure;
  std::vector<Candidate> onednn;
  for (const Strategy& strategy : strategies) {
    const memory::desc probabilities(dims, memory::data_type::f32,
                                     activation_tag(rank, strategy.layout));
    dnnl::reorder::primitive_desc reorder;
    dnnl::softmax_forward::primitive_desc pd;
    try {
      if (strategy.transposed)
        reorder = dnnl::reorder::primitive_desc(engine, user, engine, probabilities, attr);
      // Transposed: the softmax runs in place on the f32 copy.
      pd = dnnl::softmax_forward::primitive_desc(
          engine, dnnl::prop_kind::forward_inference, algorithm,
          strategy.transposed ? probabilities : user, probabilities, 1, attr);
    } catch (const dnnl::error& error) {
      if (error.status != dnnl_unimplemented)
        raise_dnnl(error.status,
                   detail::cat("creating the softmax primitive descriptor: ", error.what()),
                   context);
      failure = error.what();
      continue;
    }
    do {
      const std::string impl = sanitize(pd.impl_info_str());
      Candidate candidate;
      AlgoInfo& info = candidate.info;
      info.id = detail::cat("onednn:", impl, strategy.transposed ? ":nhwc" : "", "+nll");
      if (impl.starts_with("ref") && strategy.transposed) continue;  // one ref candidate
      if (!seen.insert(info.id).second) continue;
      info.name = detail::cat(
          impl, direction == Direction::fwd ? " log-softmax" : " softmax",
          strategy.transposed ? " on an nhwc copy" : "",
          direction == Direction::fwd ? " + NLL (f32 workspace)" : " - onehot (f32 workspace)");
      info.supported = true;
      info.deterministic = true;  // Note [determinism] in conv_list.cpp, Note [xent blocks]
      info.notes = {"accurate"};
      if (impl.starts_with("ref")) {
        detail::mark_naive(info);
      } else {
        info.notes.emplace_back("jit");
        info.families = {"large"};
      }
      if (strategy.transposed) info.notes.emplace_back("nhwc");
      candidate.softmax = clone(pd, context);
      candidate.reorder = reorder;
      candidate.user = user;
      candidate.probabilities = probabilities;
      candidate.probabilities_layout = strategy.layout;
      std::size_t scratch = pd.scratchpad_desc().get_size();
      if (reorder) scratch = std::max(scratch, reorder.scratchpad_desc().get_size());
      candidate.scratch_bytes = scratch;
      info.workspace_bytes = round_up(scratch) + round_up(probabilities.get_size()) +
                             (direction == Direction::fwd ? partials_bytes(desc) : 0);
      onednn.push_back(std::move(candidate));
    } while (pd.next_impl());
  }
  std::stable_partition(onednn.begin(), onednn.end(),
                        [](const Candidate& c) { return !c.info.naive; });
  if (onednn.empty()) {
    Candidate unavailable;
    unavailable.info.id = "onednn:unavailable:softmax+nll";
    unavailable.info.name = "oneDNN softmax + NLL (no oneDNN implementation)";
    unavailable.info.reason =
        detail::cat(onednn_version(), " has no softmax implementation for ", to_string(desc.dtype),
                    ' ', to_string(desc.layout), " on cpu isa ", isa, ": ", failure);
    onednn.push_back(std::move(unavailable));
  }
  for (Candidate& candidate : onednn) candidates.push_back(std::move(candidate));
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].info.priority = static_cast<int>(i);
  return candidates;
}

// ---- plans -------------------------------------------------------------------------------------

class Plan final : public detail::OpPlan<detail::CrossEntropyArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const CrossEntropyDesc& desc, Direction direction,
       const Candidate& candidate)
      : runtime_(std::move(runtime)),
        info_(candidate.info),
        context_(context_of(desc, direction, candidate.info.id)),
        desc_(desc),
        direction_(direction),
        fused_(candidate.fused),
        kernels_(kernels_of(desc.dtype)),
        scratch_bytes_(candidate.scratch_bytes),
        probabilities_layout_(candidate.probabilities_layout) {
    if (fused_) return;
    const dnnl::engine& engine = runtime_->engine;
    probabilities_offset_ = round_up(candidate.scratch_bytes);
    partials_offset_ = probabilities_offset_ + round_up(candidate.probabilities.get_size());
    dnnl_call(context_, "building the primitives", [&] {
      logits_ = dnnl::memory(candidate.user, engine, DNNL_MEMORY_NONE);
      probabilities_ = dnnl::memory(candidate.probabilities, engine, DNNL_MEMORY_NONE);
      if (candidate.reorder) {
        add_step(candidate.reorder,
                 {{DNNL_ARG_FROM, logits_.get()}, {DNNL_ARG_TO, probabilities_.get()}});
        add_step(candidate.softmax,
                 {{DNNL_ARG_SRC, probabilities_.get()}, {DNNL_ARG_DST, probabilities_.get()}});
      } else {
        add_step(candidate.softmax,
                 {{DNNL_ARG_SRC, logits_.get()}, {DNNL_ARG_DST, probabilities_.get()}});
      }
    });
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::CrossEntropyArgs& args, detail::Workspace workspace) override {
    check_args(args, workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    Call call{&desc_,
              detail::axis_geometry(desc_),
              args.logits->data(),
              {args.labels->data(), desc_.label_dtype},
              desc_.weighted ? static_cast<const float*>(args.weights->data()) : nullptr,
              0.0,
              reinterpret_cast<double*>(base + (fused_ ? 0 : partials_offset_)),
              (desc_.positions() + block_positions - 1) / block_positions};
    call.total_weight = scan_labels(desc_, call.labels, call.weights, context_);
    GradScale scale{desc_.reduction, nullptr, desc_.dtype, call.total_weight};
    if (direction_ == Direction::bwd_data) scale.diff_loss = args.diff_loss->data();

    if (fused_) {
      if (direction_ == Direction::fwd) {
        fused_forward(call, kernels_, *args.loss);
      } else {
        fused_backward(call, kernels_, scale, *args.diff_logits);
      }
      return;
    }
    run_primitives(args.logits->data(), base);
    const auto* probabilities = reinterpret_cast<const float*>(base + probabilities_offset_);
    const detail::AxisGeometry pg = detail::axis_geometry(desc_.dims, false, probabilities_layout_);
    const std::int64_t positions = desc_.positions();
    if (direction_ == Direction::fwd) {
      simd::parallel_blocks(call.blocks, positions, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t p0 = b * block_positions;
          const std::int64_t p1 = std::min(positions, p0 + block_positions);
          nll_block(call, b, p0, p1, args.loss->data(), [&](std::int64_t p, std::int64_t y) {
            return probabilities[element(pg, p, y)];
          });
        }
      });
      finish_loss(call, *args.loss);
      return;
    }
    gradient_from_probabilities(call, scale, probabilities, pg, *args.diff_logits);
  }

 private:
  void add_step(const dnnl::primitive_desc_base& pd, std::vector<dnnl_exec_arg_t> args) {
    steps_.push_back(make_step(pd, std::move(args), runtime_->engine));
  }

  void bind(const dnnl::memory& memory, void* data) const { onednn::bind(memory, data, context_); }

  // Note [one stream] (runtime.hpp): the primitives run under the runtime's lock.
  void run_primitives(void* logits, std::byte* base) {
    std::lock_guard lock(runtime_->mutex);
    bind(logits_, logits);
    bind(probabilities_, base + probabilities_offset_);
    const dnnl_stream_t stream = runtime_->stream.get();
    for (Step& step : steps_) run_step(step, stream, base, context_);
    wait(stream, context_);
  }

  // diff_logits = g * (p - onehot), written in the order of the output's memory.
  void gradient_from_probabilities(const Call& call, const GradScale& scale,
                                   const float* probabilities, const detail::AxisGeometry& pg,
                                   Tensor& diff_logits) const {
    const detail::AxisGeometry& og = call.g;
    const std::int64_t positions = desc_.positions();
    const std::int64_t classes = og.axis;
    const DType dtype = desc_.dtype;
    const std::size_t size = size_of(dtype);
    auto* out = static_cast<unsigned char*>(diff_logits.data());
    simd::parallel_blocks(call.blocks, og.elements(), [&](std::int64_t b0, std::int64_t b1) {
      float g[block_positions];
      for (std::int64_t b = b0; b < b1; ++b) {
        const std::int64_t p0 = b * block_positions;
        const std::int64_t p1 = std::min(positions, p0 + block_positions);
        gradient_scales(call, scale, p0, p1, g);
        for_each_run(
            og, p0, p1, [&](std::int64_t o, std::int64_t i0, std::int64_t i1, std::int64_t first) {
              for (std::int64_t c = 0; c < classes; ++c) {
                for (std::int64_t i = i0; i < i1; ++i) {
                  const std::int64_t p = first + (i - i0);
                  const std::int64_t y = call.labels.at(p);
                  const float target = c == y ? 1.0f : 0.0f;
                  const float value = g[p - p0] * (probabilities[element(pg, p, c)] - target);
                  detail::store_f32(
                      out + static_cast<std::size_t>((o * classes + c) * og.inner + i) * size,
                      dtype, value);
                }
              }
            });
      }
    });
  }

  void check_args(const detail::CrossEntropyArgs& args, const detail::Workspace& workspace) const {
    check_tensor(args.logits, "logits", desc_.dims, desc_.dtype, desc_.layout);
    check_tensor(args.labels, "labels", desc_.labels_dims(), desc_.label_dtype,
                 Layout::channels_first);
    if (desc_.weighted)
      check_tensor(args.weights, "weights", desc_.weights_dims(), DType::f32,
                   Layout::channels_first);
    if (direction_ == Direction::fwd) {
      check_tensor(args.loss, "loss", desc_.loss_dims(), desc_.dtype, Layout::channels_first);
    } else {
      check_tensor(args.diff_loss, "diff_loss", desc_.loss_dims(), desc_.dtype,
                   Layout::channels_first);
      check_tensor(args.diff_logits, "diff_logits", desc_.dims, desc_.dtype, desc_.layout);
    }
    if (workspace.bytes < info_.workspace_bytes ||
        (info_.workspace_bytes > 0 && workspace.data == nullptr)) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("workspace has ", workspace.bytes, " bytes at ", workspace.data,
                                "; this candidate needs ", info_.workspace_bytes),
                    context_);
    }
  }

  void check_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                    Layout layout) const {
    check_dense_on_cpu(tensor, role, dims, dtype, layout, context_);
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  CrossEntropyDesc desc_;
  Direction direction_;
  bool fused_;
  Kernels kernels_;
  std::size_t scratch_bytes_;
  Layout probabilities_layout_;
  std::size_t probabilities_offset_ = 0;
  std::size_t partials_offset_ = 0;
  dnnl::memory logits_;
  dnnl::memory probabilities_;
  std::vector<Step> steps_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::cross_entropy>> make_cross_entropy_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<ListedLayerBackend<CrossEntropyDesc, detail::CrossEntropyArgs, Candidate,
                                             list_candidates, Plan>>(std::move(runtime));
}

}  // namespace dnnx::onednn
