// Cross-entropy kernels: fused log-sum-exp + NLL (forward), fused softmax - onehot (backward),
// and the gradient half that follows cuDNN's softmax. log p_y is (x_y - m) - log s, never
// x_y - (m + log s) (Note [log-softmax shift] in backends/onednn/softmax.cpp).
//
// Note [xent kernel shapes]
// Positions are handed out like softmax groups (Note [softmax kernel shapes] in softmax.cu):
//   warp    inner 1, classes <= 2048: one warp per position, a running (max, sum of exp) over
//           the lane's classes in one coalesced read; 4 positions per 128-thread block;
//   block   inner 1, more classes: one 512-thread block per position;
//   column  inner > 1: one thread per position, adjacent threads on adjacent positions; also
//           positions of at most 8 contiguous classes.
// The backward pass reads the position's logits a second time (from L1/L2) to write
// w * g * (exp(x - m) / s - onehot).
//
// Note [xent last block]
// Sums over positions (mean / sum losses, the mean's weight total) are made without float
// atomics: every block writes its f64 partial to the workspace, and the last block to finish
// (an atomic counter in the plan's XentRecord) adds the partials in block order. The grid
// depends on the shape only, so results are bitwise reproducible. The same last block turns the
// lowest bad label position (atomicMin into the record) into the host-visible XentReport and
// resets the record for the next launch. A launch of one block skips the partials and the counter:
// its own sums are the totals, the same values the protocol would add up.

#include "backends/cudnn/kernels/cross_entropy.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int warp_positions_per_block = 4;
constexpr int block_threads = 512;
constexpr int column_threads = 256;
constexpr int reduce_threads = 256;
constexpr std::int64_t warp_max_classes = 2048;
// Enough blocks to fill any current GPU several times; more positions are grid-strided.
constexpr std::int64_t max_blocks = 4096;
constexpr unsigned long long no_position = ~0ull;

__device__ __forceinline__ std::int64_t positions_of(const XentParams& params) {
  return params.outer * params.inner;
}

// The block's sum of `v` (every thread of the block takes part), valid in thread 0. Fixed order.
__device__ double block_sum(double v) {
  __shared__ double sums[1024 / warp_size];
  const int lane = threadIdx.x % warp_size;
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / warp_size;
  const int warps = (blockDim.x * blockDim.y + warp_size - 1) / warp_size;
  v = warp_sum(v);
  if (lane == 0) sums[warp] = v;
  __syncthreads();
  double total = 0;
  if (warp == 0) {
    total = lane < warps ? sums[lane] : 0.0;
    total = warp_sum(total);
  }
  __syncthreads();
  return total;
}

template <typename L>
__device__ __forceinline__ std::int64_t label_at(const L* labels, std::int64_t p) {
  return static_cast<std::int64_t>(labels[p]);
}

// Whether label y of position p is usable; records p when it is out of range.
__device__ __forceinline__ bool check_label(std::int64_t y, std::int64_t p,
                                            const XentParams& params, XentRecord* record) {
  if (y == params.ignore_index || (y >= 0 && y < params.classes)) return true;
  atomicMin(&record->bad_position, static_cast<unsigned long long>(p));
  __threadfence();  // visible before this block reports itself done (Note [xent last block])
  return false;
}

__device__ __forceinline__ std::int64_t element(const XentParams& params, std::int64_t p,
                                                std::int64_t c) {
  return ((p / params.inner) * params.classes + c) * params.inner + p % params.inner;
}

struct Partial {
  double loss;
  double weight;
};

// Note [xent last block]: every thread of every block calls this once, at the end of the
// kernel, with the block's sums in thread 0. The last block stores the reduced loss (when
// `loss` is set) or the weight total (when `total_weight` is set), publishes a bad label, and
// resets the record.
template <typename T, typename L>
__device__ void finish(const XentParams& params, Partial partial, Partial* partials, T* loss,
                       double* total_weight, const L* labels, XentRecord* record,
                       XentReport* report) {
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y;
  // The totals, in thread 0.
  auto store = [&](const Partial& sums) {
    if (loss != nullptr) {
      const double value = params.reduce == Reduce::mean ? sums.loss / sums.weight : sums.loss;
      *loss = from_float<T>(static_cast<float>(value));
    }
    if (total_weight != nullptr) *total_weight = sums.weight;
  };
  if (gridDim.x == 1) {
    // The only block: its sums are the totals, and no other block's work to wait for (its own
    // threads' label records were fenced before they reached this barrier).
    __syncthreads();
    if (thread == 0 && partials != nullptr) store(partial);
  } else {
    __shared__ bool last;
    if (thread == 0) {
      if (partials != nullptr) partials[blockIdx.x] = partial;
      __threadfence();
      const unsigned done = atomicAdd(&record->blocks_done, 1u);
      last = done == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (partials != nullptr) {
      Partial mine{0.0, 0.0};
      for (unsigned b = thread; b < gridDim.x; b += threads) {
        mine.loss += __ldcg(&partials[b].loss);
        mine.weight += __ldcg(&partials[b].weight);
      }
      const Partial sums{block_sum(mine.loss), block_sum(mine.weight)};
      if (thread == 0) store(sums);
    }
  }
  if (thread == 0) {
    const unsigned long long bad = atomicAdd(&record->bad_position, 0ull);
    if (bad != no_position) {
      report->value = static_cast<long long>(labels[bad]);
      __threadfence_system();
      report->position = static_cast<long long>(bad);
      __threadfence_system();
      record->bad_position = no_position;
    }
    record->blocks_done = 0;
    __threadfence();
  }
}

// Note [xent loads in flight]
// A thread's running (max, sum) over its share of a row is a chain of dependent steps. With one
// load per step, each load would go out only when the step before it was done: a warp over 1000
// classes would wait for 32 memory round trips in turn. So loads go out `loads_in_flight` at a
// time, ahead of the steps that take them, in the same order as one load per step: the results
// do not depend on it. The last, partial batch goes out the same way, its loads past the end
// predicated off: left to a loop of single loads, they would be round trips in turn again. (On a
// 64 x 1000 batch this took a tenth off the forward's time; most of the rest is elsewhere:
// docs/benchmarks.md, GPU layers.)
constexpr int loads_in_flight = 16;

// visit(i, in[i] as f32) for i = begin, begin + step, ... below end, in that order, the loads
// going out `loads_in_flight` at a time ahead of the calls that take them (Note [xent loads in
// flight]). Each batch is loaded before any of its calls, so a call may write in[i].
template <typename T, typename Visit>
__device__ __forceinline__ void visit_in_order(const T* in, std::int64_t begin, std::int64_t end,
                                               std::int64_t step, Visit&& visit) {
  for (std::int64_t i = begin; i < end; i += loads_in_flight * step) {
    float v[loads_in_flight];
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      if (i + u * step < end) v[u] = to_float(in[i + u * step]);
    }
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      if (i + u * step < end) visit(i + u * step, v[u]);
    }
  }
}

// The running (max, sum) of base[i] for i = begin, begin + step, ... below end.
template <typename T>
__device__ __forceinline__ Running running_over(const T* base, std::int64_t begin, std::int64_t end,
                                                std::int64_t step) {
  Running r;
  visit_in_order(base, begin, end, step, [&](std::int64_t, float x) { r.add(x); });
  return r;
}

// out[i] = f(i, in[i]) for i = begin, begin + step, ... below end; out may be in.
template <typename T, typename F>
__device__ __forceinline__ void map_over(const T* in, T* out, std::int64_t begin, std::int64_t end,
                                         std::int64_t step, F&& f) {
  visit_in_order(in, begin, end, step,
                 [&](std::int64_t i, float x) { out[i] = from_float<T>(f(i, x)); });
}

// ---- forward -------------------------------------------------------------------------------

// The loss of position p: (w * nll, w); (0, 0) when ignored; (NaN, 0) for a bad label.
// `log_probability(y)` is log p_y: (x_y - m) - log s from a Running (Note [xent stats] in
// backends/onednn/cross_entropy.cpp: m and s kept apart stay accurate for logits of any
// magnitude).
template <typename LogProbability>
__device__ __forceinline__ Partial position_loss(const XentParams& params, std::int64_t y, bool ok,
                                                 const float* weights,
                                                 LogProbability&& log_probability) {
  if (!ok) return {static_cast<double>(NAN), 0.0};
  if (y == params.ignore_index) return {0.0, 0.0};
  const float w = weights != nullptr ? weights[y] : 1.0f;
  return {-static_cast<double>(w) * static_cast<double>(log_probability(y)),
          static_cast<double>(w)};
}

template <typename T>
__device__ __forceinline__ void store_or_add(const XentParams& params, std::int64_t p,
                                             Partial value, T* loss, Partial& partial) {
  if (params.reduce == Reduce::none) {
    loss[p] = from_float<T>(static_cast<float>(value.loss));
  } else {
    partial.loss += value.loss;
    partial.weight += value.weight;
  }
}

// Position p's loss from its row's running (max, sum) and its label y, the logit of class c
// being logit(c): the label checked, the loss stored (none) or added to `partial`.
template <typename T, typename Logit>
__device__ __forceinline__ void add_position_loss(const XentParams& params, std::int64_t p,
                                                  const Running& r, std::int64_t y,
                                                  const float* weights, T* loss, XentRecord* record,
                                                  Partial& partial, Logit&& logit) {
  const bool ok = check_label(y, p, params, record);
  const Partial value = position_loss(
      params, y, ok, weights, [&](std::int64_t c) { return (logit(c) - r.max) - logf(r.sum); });
  store_or_add<T>(params, p, value, loss, partial);
}

// The end of every forward kernel: the block's sums of `partial`, then finish().
template <typename T, typename L>
__device__ __forceinline__ void finish_forward(const XentParams& params, Partial partial,
                                               Partial* partials, T* loss, const L* labels,
                                               XentRecord* record, XentReport* report) {
  partial.loss = block_sum(partial.loss);
  partial.weight = block_sum(partial.weight);
  finish<T, L>(params, partial, params.reduce == Reduce::none ? nullptr : partials, loss, nullptr,
               labels, record, report);
}

template <typename T, typename L>
__global__ void __launch_bounds__(warp_size* warp_positions_per_block)
    forward_warp(XentParams params, const T* logits, const L* labels, const float* weights, T* loss,
                 Partial* partials, XentRecord* record, XentReport* report) {
  const int lane = threadIdx.x;
  const std::int64_t positions = positions_of(params);
  Partial partial{0.0, 0.0};
  for (std::int64_t p = blockIdx.x * std::int64_t{warp_positions_per_block} + threadIdx.y;
       p < positions; p += std::int64_t{gridDim.x} * warp_positions_per_block) {
    const T* row = logits + p * params.classes;
    // The label is read with the row, and its logit kept by the lane that visits it, so that the
    // loss does not wait for two more round trips after the row's statistics.
    const std::int64_t y = label_at(labels, p);
    float label_logit = 0.0f;
    Running r;
    visit_in_order(row, lane, params.classes, warp_size, [&](std::int64_t c, float x) {
      r.add(x);
      if (c == y) label_logit = x;
    });
    r = warp_merge(r);
    const int holder = y >= 0 && y < params.classes ? static_cast<int>(y % warp_size) : 0;
    label_logit = __shfl_sync(0xffffffffu, label_logit, holder);
    if (lane == 0) {
      add_position_loss<T>(params, p, r, y, weights, loss, record, partial,
                           [&](std::int64_t) { return label_logit; });
    }
  }
  finish_forward<T, L>(params, partial, partials, loss, labels, record, report);
}

template <typename T, typename L>
__global__ void __launch_bounds__(block_threads)
    forward_block(XentParams params, const T* logits, const L* labels, const float* weights,
                  T* loss, Partial* partials, XentRecord* record, XentReport* report) {
  const std::int64_t positions = positions_of(params);
  Partial partial{0.0, 0.0};
  for (std::int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    const T* row = logits + p * params.classes;
    const std::int64_t y = label_at(labels, p);  // read with the row, not after it
    const Running r =
        block_merge<block_threads>(running_over(row, threadIdx.x, params.classes, blockDim.x));
    if (threadIdx.x == 0) {
      add_position_loss<T>(params, p, r, y, weights, loss, record, partial,
                           [&](std::int64_t c) { return to_float(row[c]); });
    }
  }
  finish_forward<T, L>(params, partial, partials, loss, labels, record, report);
}

template <typename T, typename L>
__global__ void __launch_bounds__(column_threads)
    forward_column(XentParams params, const T* logits, const L* labels, const float* weights,
                   T* loss, Partial* partials, XentRecord* record, XentReport* report) {
  const std::int64_t positions = positions_of(params);
  Partial partial{0.0, 0.0};
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t first = element(params, p, 0);
    const std::int64_t y = label_at(labels, p);  // read with the row, not after it
    const Running r = running_over(logits + first, 0, params.classes * params.inner, params.inner);
    add_position_loss<T>(params, p, r, y, weights, loss, record, partial, [&](std::int64_t c) {
      return to_float(logits[first + c * params.inner]);
    });
  }
  finish_forward<T, L>(params, partial, partials, loss, labels, record, report);
}

// ---- backward ------------------------------------------------------------------------------

// The mean's divisor: the sum of w[y] over the positions not ignored, into *total.
template <typename L>
__global__ void __launch_bounds__(reduce_threads)
    weight_total(XentParams params, const L* labels, const float* weights, Partial* partials,
                 double* total, XentRecord* record, XentReport* report) {
  const std::int64_t positions = positions_of(params);
  Partial partial{0.0, 0.0};
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t y = label_at(labels, p);
    if (check_label(y, p, params, record) && y != params.ignore_index)
      partial.weight += weights != nullptr ? weights[y] : 1.0f;
  }
  partial.weight = block_sum(partial.weight);
  finish<float, L>(params, partial, partials, nullptr, total, labels, record, report);
}

// Note [xent warp total]
// The mean's gradient divides by the total weight of the positions not ignored, a sum over every
// label: weight_total's launch before the gradient's, with its own last-block protocol (Note
// [xent last block]). For a batch of at most warp_total_max positions in the warp shape, each
// warp of the gradient kernel adds the labels up itself instead, before its first row, its
// lanes' loads going out together: one launch instead of two, for one round trip (two with class
// weights) in each warp. The sum runs in the same order in every warp (lane-strided,
// then the warp's shuffle tree), so every warp divides by the same value, and the labels are still
// checked where each position's gradient is made.
constexpr std::int64_t warp_total_max = 16 * warp_size;

template <typename L>
__device__ double warp_weight_total(const XentParams& params, const L* labels,
                                    const float* weights) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t positions = positions_of(params);
  std::int64_t y[warp_total_max / warp_size];
#pragma unroll
  for (int u = 0; u < warp_total_max / warp_size; ++u) {
    const std::int64_t p = lane + std::int64_t{u} * warp_size;
    y[u] = p < positions ? label_at(labels, p) : params.ignore_index;
  }
  double total = 0.0;
#pragma unroll
  for (int u = 0; u < warp_total_max / warp_size; ++u) {
    if (y[u] != params.ignore_index && y[u] >= 0 && y[u] < params.classes)
      total += weights != nullptr ? weights[y[u]] : 1.0f;
  }
  return warp_sum(total);
}

// The mean's divisor, read once per thread (0 for the other reductions, which do not use it).
__device__ __forceinline__ double divisor_of(const XentParams& params, const double* total) {
  return params.reduce == Reduce::mean ? *total : 0.0;
}

// The gradient factor of position p: w * g (PyTorch's order for the mean: w * g / total); 0
// when ignored, NaN for a bad label.
template <typename T>
__device__ __forceinline__ float grad_scale(const XentParams& params, std::int64_t p,
                                            std::int64_t y, bool ok, const float* weights,
                                            const T* diff_loss, double total) {
  if (!ok) return NAN;
  if (y == params.ignore_index) return 0.0f;
  const float w = weights != nullptr ? weights[y] : 1.0f;
  switch (params.reduce) {
    case Reduce::none: return w * to_float(diff_loss[p]);
    case Reduce::sum: return w * to_float(diff_loss[0]);
    case Reduce::mean:
      return static_cast<float>(static_cast<double>(w) * to_float(diff_loss[0]) / total);
  }
  return 0.0f;
}

// g * (softmax - onehot) with softmax = exp(x - m) / s (Note [xent stats]).
__device__ __forceinline__ float gradient(float x, const Running& r, float g, bool target) {
  return g * (expf(x - r.max) / r.sum - (target ? 1.0f : 0.0f));
}

template <typename T, typename L>
__global__ void __launch_bounds__(warp_size* warp_positions_per_block)
    backward_warp(XentParams params, const T* logits, const L* labels, const float* weights,
                  const T* diff_loss, T* diff_logits, const double* total, XentRecord* record,
                  XentReport* report) {
  const int lane = threadIdx.x;
  const std::int64_t positions = positions_of(params);
  // No total given: the warp adds it up (Note [xent warp total]).
  const double divisor = params.reduce == Reduce::mean && total == nullptr
                             ? warp_weight_total(params, labels, weights)
                             : divisor_of(params, total);
  for (std::int64_t p = blockIdx.x * std::int64_t{warp_positions_per_block} + threadIdx.y;
       p < positions; p += std::int64_t{gridDim.x} * warp_positions_per_block) {
    const T* row = logits + p * params.classes;
    T* out = diff_logits + p * params.classes;
    const std::int64_t y = label_at(labels, p);  // read with the row, not after it
    const Running r = warp_merge(running_over(row, lane, params.classes, warp_size));
    const bool ok = lane == 0 ? check_label(y, p, params, record)
                              : (y == params.ignore_index || (y >= 0 && y < params.classes));
    const float g = grad_scale(params, p, y, ok, weights, diff_loss, divisor);
    map_over(row, out, lane, params.classes, warp_size,
             [&](std::int64_t c, float x) { return gradient(x, r, g, c == y); });
  }
  finish<T, L>(params, Partial{0.0, 0.0}, nullptr, nullptr, nullptr, labels, record, report);
}

template <typename T, typename L>
__global__ void __launch_bounds__(block_threads)
    backward_block(XentParams params, const T* logits, const L* labels, const float* weights,
                   const T* diff_loss, T* diff_logits, const double* total, XentRecord* record,
                   XentReport* report) {
  const std::int64_t positions = positions_of(params);
  const double divisor = divisor_of(params, total);
  for (std::int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    const T* row = logits + p * params.classes;
    T* out = diff_logits + p * params.classes;
    const Running r =
        block_merge<block_threads>(running_over(row, threadIdx.x, params.classes, blockDim.x));
    const std::int64_t y = label_at(labels, p);
    const bool ok = threadIdx.x == 0 ? check_label(y, p, params, record)
                                     : (y == params.ignore_index || (y >= 0 && y < params.classes));
    const float g = grad_scale(params, p, y, ok, weights, diff_loss, divisor);
    map_over(row, out, threadIdx.x, params.classes, blockDim.x,
             [&](std::int64_t c, float x) { return gradient(x, r, g, c == y); });
  }
  finish<T, L>(params, Partial{0.0, 0.0}, nullptr, nullptr, nullptr, labels, record, report);
}

template <typename T, typename L>
__global__ void __launch_bounds__(column_threads)
    backward_column(XentParams params, const T* logits, const L* labels, const float* weights,
                    const T* diff_loss, T* diff_logits, const double* total, XentRecord* record,
                    XentReport* report) {
  const std::int64_t positions = positions_of(params);
  const double divisor = divisor_of(params, total);
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t first = element(params, p, 0);
    const Running r = running_over(logits + first, 0, params.classes * params.inner, params.inner);
    const std::int64_t y = label_at(labels, p);
    const bool ok = check_label(y, p, params, record);
    const float g = grad_scale(params, p, y, ok, weights, diff_loss, divisor);
    // The label's offset from `first`, compared instead of dividing every offset by inner.
    const std::int64_t target = y >= 0 && y < params.classes ? y * params.inner : -1;
    map_over(logits + first, diff_logits + first, 0, params.classes * params.inner, params.inner,
             [&](std::int64_t k, float x) { return gradient(x, r, g, k == target); });
  }
  finish<T, L>(params, Partial{0.0, 0.0}, nullptr, nullptr, nullptr, labels, record, report);
}

// In place over probabilities: one thread per element.
template <typename T, typename L>
__global__ void __launch_bounds__(reduce_threads)
    backward_probabilities(XentParams params, const L* labels, const float* weights,
                           const T* diff_loss, T* diff_logits, const double* total,
                           XentRecord* record, XentReport* report) {
  const std::int64_t elements = positions_of(params) * params.classes;
  const double divisor = divisor_of(params, total);
  for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < elements;
       k += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = k % params.inner;
    const std::int64_t c = (k / params.inner) % params.classes;
    const std::int64_t o = k / (params.inner * params.classes);
    const std::int64_t p = o * params.inner + i;
    const std::int64_t y = label_at(labels, p);
    // Each bad position is recorded once, by its class-0 element.
    const bool ok = c == 0 ? check_label(y, p, params, record)
                           : (y == params.ignore_index || (y >= 0 && y < params.classes));
    const float g = grad_scale(params, p, y, ok, weights, diff_loss, divisor);
    diff_logits[k] = from_float<T>(g * (to_float(diff_logits[k]) - (c == y ? 1.0f : 0.0f)));
  }
  finish<T, L>(params, Partial{0.0, 0.0}, nullptr, nullptr, nullptr, labels, record, report);
}

// ---- launch configuration ------------------------------------------------------------------

enum class Shape { warp, block, column };

// Positions of at most `thread_max_classes` contiguous classes go one per thread (the column
// kernel with inner 1): a warp per position would leave most of its lanes idle.
constexpr std::int64_t thread_max_classes = 8;

Shape shape_of(const XentParams& params) {
  if (params.inner > 1 || params.classes <= thread_max_classes) return Shape::column;
  return params.classes <= warp_max_classes ? Shape::warp : Shape::block;
}

unsigned blocks_for(std::int64_t work, std::int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((work + per_block - 1) / per_block, 1, max_blocks));
}

struct Launch {
  unsigned grid;
  dim3 block;
};

Launch fused_launch(const XentParams& params) {
  const std::int64_t positions = params.positions();
  switch (shape_of(params)) {
    case Shape::warp:
      return {blocks_for(positions, warp_positions_per_block),
              dim3(warp_size, warp_positions_per_block)};
    case Shape::block: return {blocks_for(positions, 1), dim3(block_threads)};
    case Shape::column: return {blocks_for(positions, column_threads), dim3(column_threads)};
  }
  return {1, dim3(1)};
}

Launch reduce_launch(std::int64_t work) {
  return {blocks_for(work, reduce_threads), dim3(reduce_threads)};
}

template <typename F>
cudaError_t dispatch(const XentParams& params, F&& f) {
  auto by_label = [&](auto element) -> cudaError_t {
    using T = decltype(element);
    if (params.label == LabelType::i32) return f(T{}, std::int32_t{});
    return f(T{}, std::int64_t{});
  };
  switch (params.element) {
    case Element::f32: return by_label(float{});
    case Element::f16: return by_label(__half{});
    case Element::bf16: return by_label(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

// Whether backward_warp adds the mean's total up itself (Note [xent warp total]).
bool warp_adds_total(const XentParams& params) {
  return shape_of(params) == Shape::warp && params.positions() <= warp_total_max;
}

std::size_t partials_bytes(unsigned grid) { return std::size_t{grid} * sizeof(Partial); }

}  // namespace

cudaError_t xent_record_init(XentRecord* record, cudaStream_t stream) {
  return init_bad_value_record(record, stream);
}

std::size_t xent_fused_forward_workspace(const XentParams& params) {
  return params.reduce == Reduce::none ? 0 : partials_bytes(fused_launch(params).grid);
}

// Mean: the weight total (f64) at offset 0, then the weight kernel's partials. The fused
// backward of a batch whose warps add the total up themselves does not use it, but the same
// workspace serves the backward from probabilities, which always launches weight_total.
std::size_t xent_backward_workspace(const XentParams& params) {
  if (params.reduce != Reduce::mean) return 0;
  return sizeof(double) + partials_bytes(reduce_launch(params.positions()).grid);
}

cudaError_t xent_fused_forward(const XentParams& params, const void* logits, const void* labels,
                               const float* weights, void* loss, void* workspace,
                               XentRecord* record, XentReport* report, cudaStream_t stream) {
  if (params.positions() == 0) return cudaSuccess;
  const Launch launch = fused_launch(params);
  auto* partials = static_cast<Partial*>(workspace);
  return dispatch(params, [&](auto t, auto l) {
    using T = decltype(t);
    using L = decltype(l);
    const auto* x = static_cast<const T*>(logits);
    const auto* y = static_cast<const L*>(labels);
    auto* out = static_cast<T*>(loss);
    switch (shape_of(params)) {
      case Shape::warp:
        forward_warp<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, out,
                                                                     partials, record, report);
        break;
      case Shape::block:
        forward_block<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, out,
                                                                      partials, record, report);
        break;
      case Shape::column:
        forward_column<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, out,
                                                                       partials, record, report);
        break;
    }
    return cudaGetLastError();
  });
}

namespace {

// Reduce::mean: the weight total into the workspace's first f64; returns its device address.
template <typename L>
cudaError_t launch_weight_total(const XentParams& params, const void* labels, const float* weights,
                                void* workspace, XentRecord* record, XentReport* report,
                                cudaStream_t stream, double** total) {
  *total = static_cast<double*>(workspace);
  const Launch launch = reduce_launch(params.positions());
  auto* partials = reinterpret_cast<Partial*>(static_cast<char*>(workspace) + sizeof(double));
  weight_total<L><<<launch.grid, launch.block, 0, stream>>>(
      params, static_cast<const L*>(labels), weights, partials, *total, record, report);
  return cudaGetLastError();
}

}  // namespace

cudaError_t xent_fused_backward(const XentParams& params, const void* logits, const void* labels,
                                const float* weights, const void* diff_loss, void* diff_logits,
                                void* workspace, XentRecord* record, XentReport* report,
                                cudaStream_t stream) {
  if (params.positions() == 0) return cudaSuccess;
  const Launch launch = fused_launch(params);
  return dispatch(params, [&](auto t, auto l) {
    using T = decltype(t);
    using L = decltype(l);
    double* total = nullptr;
    if (params.reduce == Reduce::mean && !warp_adds_total(params)) {
      const cudaError_t status = launch_weight_total<L>(params, labels, weights, workspace, record,
                                                        report, stream, &total);
      if (status != cudaSuccess) return status;
    }
    const auto* x = static_cast<const T*>(logits);
    const auto* y = static_cast<const L*>(labels);
    const auto* dl = static_cast<const T*>(diff_loss);
    auto* dx = static_cast<T*>(diff_logits);
    switch (shape_of(params)) {
      case Shape::warp:
        backward_warp<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, dl, dx,
                                                                      total, record, report);
        break;
      case Shape::block:
        backward_block<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, dl,
                                                                       dx, total, record, report);
        break;
      case Shape::column:
        backward_column<T, L><<<launch.grid, launch.block, 0, stream>>>(params, x, y, weights, dl,
                                                                        dx, total, record, report);
        break;
    }
    return cudaGetLastError();
  });
}

cudaError_t xent_backward_from_probabilities(const XentParams& params, const void* labels,
                                             const float* weights, const void* diff_loss,
                                             void* diff_logits, void* workspace, XentRecord* record,
                                             XentReport* report, cudaStream_t stream) {
  if (params.positions() == 0) return cudaSuccess;
  const Launch launch = reduce_launch(params.positions() * params.classes);
  return dispatch(params, [&](auto t, auto l) {
    using T = decltype(t);
    using L = decltype(l);
    double* total = nullptr;
    if (params.reduce == Reduce::mean) {
      const cudaError_t status = launch_weight_total<L>(params, labels, weights, workspace, record,
                                                        report, stream, &total);
      if (status != cudaSuccess) return status;
    }
    backward_probabilities<T, L><<<launch.grid, launch.block, 0, stream>>>(
        params, static_cast<const L*>(labels), weights, static_cast<const T*>(diff_loss),
        static_cast<T*>(diff_logits), total, record, report);
    return cudaGetLastError();
  });
}

cudaError_t xent_prime(const XentParams& params) {
  return dispatch(params, [&](auto t, auto l) {
    using T = decltype(t);
    using L = decltype(l);
    const void* kernels[] = {
        reinterpret_cast<const void*>(&forward_warp<T, L>),
        reinterpret_cast<const void*>(&forward_block<T, L>),
        reinterpret_cast<const void*>(&forward_column<T, L>),
        reinterpret_cast<const void*>(&weight_total<L>),
        reinterpret_cast<const void*>(&backward_warp<T, L>),
        reinterpret_cast<const void*>(&backward_block<T, L>),
        reinterpret_cast<const void*>(&backward_column<T, L>),
        reinterpret_cast<const void*>(&backward_probabilities<T, L>),
    };
    for (const void* kernel : kernels) {
      cudaFuncAttributes attributes{};
      const cudaError_t status = cudaFuncGetAttributes(&attributes, kernel);
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  });
}

}  // namespace dnnx::cudnn::kernels
