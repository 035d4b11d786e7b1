// The cpu backend's pooling: every oneDNN implementation of pooling_forward / pooling_backward
// (next_impl) on the caller's layout, as candidates, and plans that run them on the caller's
// memory.
//
// Note [oneDNN pooling semantics]
// oneDNN sizes dst by (input + padding_l + padding_r - effective kernel) / stride + 1 and takes
// dst's dims from the caller, checking they agree; its dilation counts the elements skipped
// between window positions (0: dense), dnnx's the distance between them (1: dense). dnnx passes its
// own output size (PoolDesc::output_size, ceil mode included) and, when that needs it, a padding_r
// larger than pad_after that reaches the ceil-mode overhang: the smallest padding_r that makes
// oneDNN's formula give the output size. The padding is implicit in both libraries, so for max
// (padding never wins) and the exclude-pad average (padding never counted) the extra padding
// changes nothing. oneDNN's include-pad average divides every window by the whole kernel volume,
// while PyTorch counts the padding but not the overhang past input + pad_after: the two agree
// exactly when no window overhangs, and otherwise the oneDNN candidates are listed unsupported with
// that reason (never run to give another answer). Dilated windows: oneDNN's exclude-pad average
// counts the window's positions inside the input, its include-pad one the whole kernel, as dnnx
// (pool_parity_test checks both).
//
// Note [max backward workspace]
// oneDNN's max backward reads the argmax positions its forward_training pass wrote into a
// workspace. The user's backward call carries src and dst but no such workspace, so a max
// backward plan first runs the forward (training) implementation its backward primitive
// descriptor was created with, on the caller's src, into its own dst and workspace buffers, and
// then the backward. Both buffers live in the call's workspace and are counted in
// workspace_bytes, after the scratchpad region: [0, scratch) scratchpads of both primitives (they
// run one after the other), then dst, then oneDNN's workspace. The average modes' backward reads
// diff_dst only and runs alone.
//
// Note [cpu pool loops]
// cpu:kernel:pool is dnnx's own loops on this backend: every desc (so the cpu backend always has
// a candidate, including the include-pad overhang oneDNN cannot express), no workspace (the
// zero-workspace candidate selection must always find), f32 accumulation. The forward pass owns
// one output position (all channels) per item; the backward pass gathers, one input position
// per item, rescanning the windows it lies in for max (Note [pool kernel backward] in
// kernels/pool.cu describes the same scheme on the GPU). Items are split into contiguous ranges
// over threads and every element is written by exactly one item, so the bits do not depend on
// the thread count. It comes after oneDNN's implementations and before ref:any.
//
// Determinism: as for convolution (Note [determinism] in conv_list.cpp), oneDNN's CPU pooling
// splits work statically over the OpenMP threads; every candidate is listed deterministic and
// pool_parity_test runs each twice and compares the bits.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/loop_pool.hpp"
#include "backends/onednn/memory.hpp"
#include "backends/onednn/simd.hpp"
#include "core/check.hpp"
#include "core/dtype.hpp"
#include "core/pool_args.hpp"
#include "core/strings.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using Tag = memory::format_tag;

constexpr const char* kernel_id = "cpu:kernel:pool";

constexpr Tag activation_tags[2][3] = {{Tag::ncw, Tag::nchw, Tag::ncdhw},
                                       {Tag::nwc, Tag::nhwc, Tag::ndhwc}};
ErrorContext context_of(const PoolDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(implementation));
}

dnnl::algorithm algorithm_of(PoolMode mode) {
  switch (mode) {
    case PoolMode::max: return dnnl::algorithm::pooling_max;
    case PoolMode::avg_include_pad: return dnnl::algorithm::pooling_avg_include_padding;
    case PoolMode::avg_exclude_pad: return dnnl::algorithm::pooling_avg_exclude_padding;
  }
  return dnnl::algorithm::pooling_max;
}

// The desc in oneDNN's terms (Note [oneDNN pooling semantics]).
struct Geometry {
  memory::desc src, dst;
  memory::dims strides, kernel, dilation, padding_l, padding_r;
  std::string semantic_mismatch;  // why oneDNN would compute something else (empty: it agrees)
};

Geometry geometry_of(const PoolDesc& desc) {
  const auto n = static_cast<std::size_t>(desc.spatial_dims);
  const std::size_t l = desc.layout == Layout::channels_first ? 0 : 1;
  const memory::data_type type = data_type_of(desc.dtype);
  Geometry g;
  memory::dims src{desc.batch, desc.channels};
  memory::dims dst{desc.batch, desc.channels};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t out = desc.output_size(static_cast<int>(i));
    src.push_back(desc.input[i]);
    dst.push_back(out);
    g.strides.push_back(desc.stride[i]);
    g.kernel.push_back(desc.kernel[i]);
    // oneDNN counts the elements skipped between window positions: 0 is dense.
    g.dilation.push_back(desc.dilation[i] - 1);
    g.padding_l.push_back(desc.pad_before[i]);
    // The smallest right padding oneDNN's floor formula turns into `out` windows; never below
    // pad_after (which floor mode needs as it is).
    const std::int64_t needed = (out - 1) * desc.stride[i] +
                                desc.effective_kernel(static_cast<int>(i)) - desc.input[i] -
                                desc.pad_before[i];
    g.padding_r.push_back(std::max(needed, desc.pad_after[i]));
    const std::int64_t overhang = desc.overhang(static_cast<int>(i));
    if (overhang > 0 && desc.mode == PoolMode::avg_include_pad && g.semantic_mismatch.empty()) {
      static constexpr const char* axes[3][3] = {{"W", "", ""}, {"H", "W", ""}, {"D", "H", "W"}};
      g.semantic_mismatch = detail::cat(
          "oneDNN's avg_include_padding divides every window by the whole kernel, while dnnx "
          "(PyTorch) leaves out the ceil-mode overhang past the padded input; here the last "
          "window along ",
          axes[n - 1][i], " overhangs by ", overhang, " (Note [oneDNN pooling semantics])");
    }
  }
  g.src = memory::desc(src, type, activation_tags[l][n - 1]);
  g.dst = memory::desc(dst, type, activation_tags[l][n - 1]);
  return g;
}

// One candidate: its record and, when supported, the primitive descriptors a plan builds from.
struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc fwd;  // fwd: the implementation; bwd: the forward it was created with
  dnnl::primitive_desc bwd;  // bwd only
  bool recompute = false;    // bwd max: run `fwd` first (Note [max backward workspace])
  std::size_t dst_offset = 0;
  std::size_t workspace_offset = 0;
};

void describe(AlgoInfo& info, const std::string& impl) {
  if (impl.starts_with("ref")) {
    detail::mark_naive(info);
  } else {
    info.notes.emplace_back(contains(impl, "jit") ? "jit" : "simple");
    info.families = {"small"};
  }
  if (const std::string_view isa = isa_of(impl, {"avx512", "avx2", "avx", "sse41"}); !isa.empty())
    info.notes.emplace_back(isa);
}

dnnl::pooling_forward::primitive_desc forward_pd(const dnnl::engine& engine, dnnl::prop_kind prop,
                                                 const PoolDesc& desc, const Geometry& g) {
  return dnnl::pooling_forward::primitive_desc(engine, prop, algorithm_of(desc.mode), g.src, g.dst,
                                               g.strides, g.kernel, g.dilation, g.padding_l,
                                               g.padding_r, user_scratchpad());
}

// ---- cpu:kernel:pool (Note [cpu pool loops]) ------------------------------------------------

AlgoInfo kernel_info() {
  AlgoInfo info;
  info.id = kernel_id;
  info.name = "dnnx loops (f32 accumulation, gather backward)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"kernel", "direct"};
  info.families = {"none"};
  return info;
}

// Runs body(first, last) over [0, count) items in contiguous ranges, one per thread when the work
// (`work` element visits in all) is worth starting threads for.
void parallel_ranges(std::int64_t count, double work,
                     const std::function<void(std::int64_t, std::int64_t)>& body) {
  // Starting a thread costs tens of microseconds: below ~256K visits one thread is faster.
  constexpr double min_work_per_thread = 1 << 18;
  const auto hardware = static_cast<std::int64_t>(detail::hardware_threads());
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(hardware, static_cast<std::int64_t>(work / min_work_per_thread)), 1,
      count);
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

// Runs body(n, position) for every position of a `plane` of every image n < batch, the images'
// planes one after the other in contiguous ranges as parallel_ranges splits them.
template <typename Body>
void parallel_positions(std::int64_t batch, std::int64_t plane, double work, Body&& body) {
  parallel_ranges(batch * plane, work, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t item = first; item < last; ++item) body(item / plane, item % plane);
  });
}

// One pooling as 3-D (D, H, W; missing leading dims of size 1) with element strides per layout.
struct LoopGeometry : detail::PoolWindows3d {
  std::int64_t batch = 0, channels = 0;
  bool channels_last = false;
  PoolMode mode = PoolMode::max;
  DType dtype = DType::f32;

  explicit LoopGeometry(const PoolDesc& desc)
      : detail::PoolWindows3d(desc),
        batch(desc.batch),
        channels(desc.channels),
        channels_last(desc.layout == Layout::channels_last),
        mode(desc.mode),
        dtype(desc.dtype) {}
  // Element offset of (n, c = 0, position) and the stride between channels, in a tensor whose
  // spatial sizes are `sizes`.
  std::int64_t base(const std::array<std::int64_t, 3>& sizes, std::int64_t n,
                    std::int64_t position) const {
    const std::int64_t plane = sizes[0] * sizes[1] * sizes[2];
    return channels_last ? (n * plane + position) * channels : n * channels * plane + position;
  }
  std::int64_t channel_step(const std::array<std::int64_t, 3>& sizes) const {
    return channels_last ? 1 : sizes[0] * sizes[1] * sizes[2];
  }
};

// Output o's window along (3-D) dim `dim`: its input elements begin, begin + step, ... below end.
using LoopSpan = detail::PoolSpan;

LoopSpan loop_window(const LoopGeometry& g, int dim, std::int64_t o) {
  const auto d = static_cast<std::size_t>(dim);
  return detail::pool_span(o * g.stride[d] - g.pad_before[d], g.kernel[d], g.dilation[d], g.in[d],
                           g.pad_after[d]);
}

float loop_divisor(const LoopGeometry& g, const std::array<LoopSpan, 3>& w) {
  float count = 1;
  for (const LoopSpan& s : w)
    count *= static_cast<float>(g.mode == PoolMode::avg_include_pad ? s.padded : s.count());
  return count;
}

// Element i of a buffer of storage type Storage, as f32 (loads and stores the loops inline).
template <DType Storage>
struct Element {
  static float load(const std::byte* base, std::int64_t i) {
    if constexpr (Storage == DType::f32) {
      float value;
      std::memcpy(&value, base + i * 4, 4);
      return value;
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, base + i * 2, 2);
      return Storage == DType::f16 ? detail::half_to_float(bits) : detail::bf16_to_float(bits);
    }
  }
  static void store(std::byte* base, std::int64_t i, float value) {
    if constexpr (Storage == DType::f32) {
      std::memcpy(base + i * 4, &value, 4);
    } else {
      const std::uint16_t bits =
          Storage == DType::f16 ? detail::float_to_half(value) : detail::float_to_bf16(value);
      std::memcpy(base + i * 2, &bits, 2);
    }
  }
};

// Channels are processed in chunks small enough for per-channel state on the stack.
constexpr std::int64_t channel_chunk = 64;

// Per channel of [c0, c0 + count): the window-local index (row-major over the kernel's
// positions, padding ones included) of the window's first maximum (a NaN winning, as in PyTorch).
template <DType Storage>
void loop_argmax(const LoopGeometry& g, const std::byte* src, std::int64_t n, std::int64_t c0,
                 std::int64_t count, const std::array<LoopSpan, 3>& w, std::int64_t* at) {
  const std::int64_t step = g.channel_step(g.in);
  float best[channel_chunk];
  // The window-local indices of the first input element along each dim.
  std::array<std::int64_t, 3> j0{};
  for (std::size_t k = 0; k < 3; ++k) j0[k] = (w[k].begin - w[k].start) / w[k].step;
  const std::int64_t first = (j0[0] * g.kernel[1] + j0[1]) * g.kernel[2] + j0[2];
  for (std::int64_t c = 0; c < count; ++c) {
    best[c] = -std::numeric_limits<float>::infinity();
    at[c] = first;
  }
  for (std::int64_t d = w[0].begin, jd = j0[0]; d < w[0].end; d += w[0].step, ++jd) {
    for (std::int64_t h = w[1].begin, jh = j0[1]; h < w[1].end; h += w[1].step, ++jh) {
      for (std::int64_t x = w[2].begin, jx = j0[2]; x < w[2].end; x += w[2].step, ++jx) {
        const std::int64_t local = (jd * g.kernel[1] + jh) * g.kernel[2] + jx;
        const std::int64_t at_c0 = g.base(g.in, n, (d * g.in[1] + h) * g.in[2] + x) + c0 * step;
        for (std::int64_t c = 0; c < count; ++c) {
          const float value = Element<Storage>::load(src, at_c0 + c * step);
          if (value > best[c] || std::isnan(value)) {
            best[c] = value;
            at[c] = local;
          }
        }
      }
    }
  }
}

template <DType Storage>
void loops_fwd(const LoopGeometry& g, const std::byte* src, std::byte* dst) {
  const std::size_t element = size_of(g.dtype);
  const std::int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const std::int64_t in_step = g.channel_step(g.in);
  const std::int64_t out_step = g.channel_step(g.out);
  const auto window = static_cast<double>(g.kernel[0] * g.kernel[1] * g.kernel[2]);
  parallel_positions(
      g.batch, out_plane, static_cast<double>(g.batch * out_plane * g.channels) * window,
      [&](std::int64_t n, std::int64_t position) {
        std::int64_t at[channel_chunk];
        float sum[channel_chunk];
        const std::array<LoopSpan, 3> w{loop_window(g, 0, position / (g.out[1] * g.out[2])),
                                        loop_window(g, 1, position / g.out[2] % g.out[1]),
                                        loop_window(g, 2, position % g.out[2])};
        const std::int64_t out_base = g.base(g.out, n, position);
        for (std::int64_t c0 = 0; c0 < g.channels; c0 += channel_chunk) {
          const std::int64_t count = std::min(channel_chunk, g.channels - c0);
          if (g.mode == PoolMode::max) {
            loop_argmax<Storage>(g, src, n, c0, count, w, at);
            for (std::int64_t c = 0; c < count; ++c) {
              const std::int64_t local = at[c];
              const std::int64_t x = local % g.kernel[2] * w[2].step + w[2].start;
              const std::int64_t h = local / g.kernel[2] % g.kernel[1] * w[1].step + w[1].start;
              const std::int64_t d = local / (g.kernel[1] * g.kernel[2]) * w[0].step + w[0].start;
              const std::int64_t from =
                  g.base(g.in, n, (d * g.in[1] + h) * g.in[2] + x) + (c0 + c) * in_step;
              std::memcpy(dst + static_cast<std::size_t>(out_base + (c0 + c) * out_step) * element,
                          src + static_cast<std::size_t>(from) * element, element);
            }
            continue;
          }
          for (std::int64_t c = 0; c < count; ++c) sum[c] = 0.0f;
          for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step) {
            for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step) {
              for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step) {
                const std::int64_t at_c0 =
                    g.base(g.in, n, (d * g.in[1] + h) * g.in[2] + x) + c0 * in_step;
                for (std::int64_t c = 0; c < count; ++c) {
                  sum[c] += Element<Storage>::load(src, at_c0 + c * in_step);
                }
              }
            }
          }
          const float divisor = loop_divisor(g, w);
          for (std::int64_t c = 0; c < count; ++c) {
            Element<Storage>::store(dst, out_base + (c0 + c) * out_step, sum[c] / divisor);
          }
        }
      });
}

template <DType Storage>
void loops_bwd(const LoopGeometry& g, const std::byte* src, const std::byte* diff_dst,
               std::byte* diff_src) {
  const std::int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const std::int64_t in_step = g.channel_step(g.in);
  const std::int64_t out_step = g.channel_step(g.out);
  const auto window = static_cast<double>(g.kernel[0] * g.kernel[1] * g.kernel[2]);
  parallel_positions(
      g.batch, in_plane,
      static_cast<double>(g.batch * in_plane * g.channels) *
          (g.mode == PoolMode::max ? window * 2 : 2.0),
      [&](std::int64_t n, std::int64_t position) {
        std::int64_t at[channel_chunk];
        float sum[channel_chunk];
        const std::array<std::int64_t, 3> i{position / (g.in[1] * g.in[2]),
                                            position / g.in[2] % g.in[1], position % g.in[2]};
        // The outputs whose windows hold i, per dim: o in [lo, hi] whose window starts a
        // multiple of the dilation before i (the others are skipped below).
        std::array<std::int64_t, 3> lo{}, hi{};
        for (std::size_t k = 0; k < 3; ++k) {
          const std::int64_t shifted = i[k] + g.pad_before[k];
          lo[k] = shifted < g.extent[k] ? 0 : (shifted - g.extent[k]) / g.stride[k] + 1;
          hi[k] = std::min(g.out[k] - 1, shifted / g.stride[k]);
        }
        // Whether output o's window along dim k holds i.
        const auto holds = [&](std::size_t k, std::int64_t o) {
          return (i[k] + g.pad_before[k] - o * g.stride[k]) % g.dilation[k] == 0;
        };
        const std::int64_t in_base = g.base(g.in, n, position);
        for (std::int64_t c0 = 0; c0 < g.channels; c0 += channel_chunk) {
          const std::int64_t count = std::min(channel_chunk, g.channels - c0);
          for (std::int64_t c = 0; c < count; ++c) sum[c] = 0.0f;
          for (std::int64_t od = lo[0]; od <= hi[0]; ++od) {
            if (!holds(0, od)) continue;
            for (std::int64_t oh = lo[1]; oh <= hi[1]; ++oh) {
              if (!holds(1, oh)) continue;
              for (std::int64_t ow = lo[2]; ow <= hi[2]; ++ow) {
                if (!holds(2, ow)) continue;
                const std::array<LoopSpan, 3> w{loop_window(g, 0, od), loop_window(g, 1, oh),
                                                loop_window(g, 2, ow)};
                const std::int64_t grad_c0 =
                    g.base(g.out, n, (od * g.out[1] + oh) * g.out[2] + ow) + c0 * out_step;
                if (g.mode != PoolMode::max) {
                  const float divisor = loop_divisor(g, w);
                  for (std::int64_t c = 0; c < count; ++c) {
                    sum[c] += Element<Storage>::load(diff_dst, grad_c0 + c * out_step) / divisor;
                  }
                  continue;
                }
                const std::int64_t local = ((i[0] - w[0].start) / w[0].step * g.kernel[1] +
                                            (i[1] - w[1].start) / w[1].step) *
                                               g.kernel[2] +
                                           (i[2] - w[2].start) / w[2].step;
                loop_argmax<Storage>(g, src, n, c0, count, w, at);
                for (std::int64_t c = 0; c < count; ++c) {
                  if (at[c] != local) continue;
                  sum[c] += Element<Storage>::load(diff_dst, grad_c0 + c * out_step);
                }
              }
            }
          }
          for (std::int64_t c = 0; c < count; ++c) {
            Element<Storage>::store(diff_src, in_base + (c0 + c) * in_step, sum[c]);
          }
        }
      });
}

// The tensors of a call without indices, dense in the desc's dtype and layout: src, then dst
// (fwd) or diff_dst and diff_src (bwd_data).
void check_src_dst_args(const PoolDesc& desc, Direction direction, const detail::PoolArgs& args,
                        const ErrorContext& context) {
  const auto check = [&](const Tensor* tensor, const char* role, const Dims& dims) {
    check_dense(tensor, role, dims, desc.dtype, desc.layout, context);
  };
  check(args.src, "src", desc.src_dims());
  if (direction == Direction::fwd) {
    check(args.dst, "dst", desc.dst_dims());
  } else {
    check(args.diff_dst, "diff_dst", desc.dst_dims());
    check(args.diff_src, "diff_src", desc.src_dims());
  }
}

class KernelPlan final : public LayerPlan<detail::PoolArgs> {
 public:
  KernelPlan(const PoolDesc& desc, Direction direction)
      : LayerPlan(kernel_info(), context_of(desc, direction, kernel_id)),
        desc_(desc),
        direction_(direction),
        geometry_(desc) {}

  void execute(const detail::PoolArgs& args, detail::Workspace /*workspace*/) override {
    check_src_dst_args(desc_, direction_, args, context_);
    switch (desc_.dtype) {
      case DType::f32: return run<DType::f32>(args);
      case DType::f16: return run<DType::f16>(args);
      case DType::bf16: return run<DType::bf16>(args);
      case DType::i32:
      case DType::i64: break;
    }
    detail::raise(ErrorKind::Internal, "pooling loops on an integer dtype", context_);
  }

 private:
  template <DType Storage>
  void run(const detail::PoolArgs& args) const {
    const auto* src = static_cast<const std::byte*>(args.src->data());
    if (direction_ == Direction::fwd) {
      loops_fwd<Storage>(geometry_, src, static_cast<std::byte*>(args.dst->data()));
      return;
    }
    loops_bwd<Storage>(geometry_, src, static_cast<const std::byte*>(args.diff_dst->data()),
                       static_cast<std::byte*>(args.diff_src->data()));
  }

  PoolDesc desc_;
  Direction direction_;
  LoopGeometry geometry_;
};

// ---- cpu:kernel:max_indices (Note [cpu max-pool indices]) ----------------------------------
//
// Note [cpu max-pool indices]
// dnnx's max pooling with PyTorch's argmax indices (desc.indices), both directions, every dtype,
// layout and spatial rank; also offered for max without indices (forward: the same scan without
// storing indices; backward: the forward's scan into the workspace, then the backward below).
//   Forward: every window is scanned in PyTorch's order with its rule (`v > best || isnan(v)`,
//   starting from the window's first input element), in f32, which holds every f16/bf16 value
//   exactly. channels_first vectorizes along W: the input rows of an output row's windows are
//   copied to f32 with -inf padding around them (padding never wins), so every output of the row
//   is a lane of a group of adjacent outputs (a vector register: 16 on AVX-512) whose windows are
//   unclipped along W, each window position one load (contiguous for stride 1, two loads and an
//   even-lane shuffle for stride 2, lane by lane otherwise); four groups are updated side by side
//   (independent dependency chains), and the next output row's input rows are prefetched.
//   channels_last vectorizes over a register of channels of one output (other channels are
//   scanned one by one). Lane indices are int32: planes near 2^31 elements are scanned one
//   output at a time. The kernels exist once per ISA (Note [per-ISA pool kernels]).
//   Backward: a scatter, as PyTorch's, but without zeroing diff_src first. The outermost spatial
//   dim (D, H or W for 3-, 2-, 1-D) is walked in output order; the windows of one outer output
//   cover input slices [begin, end) along it (a slice is everything inside it: H x W for 3-D, a
//   row for 2-D, one element for 1-D), and both bounds only grow. f32 slices are zeroed in
//   diff_src when the windows first reach them (so they are in cache for the scatter); f16/bf16
//   accumulate in an f32 buffer of those slices, which leave for diff_src, converted, once the
//   windows have passed them. Slices no window reaches are written as zeros. Each diff_dst element
//   is added at its index in output order, so every sum has a fixed order (the GPU gather's, Note
//   [pool kernel backward]), and a work item owns whole diff_src planes (channels_first) or a block
//   of 16 channels of one image (channels_last): the bits do not depend on the thread count. Index
//   check: every index is checked against its own window before it is used (Note [cpu pool
//   index check]); the lowest bad position raises InvalidArgument after the pass
//   (detail::bad_pool_index_message), as the reference does. Dilated windows: a window's
//   positions are `dilation` apart in every loop above (the forward's lanes load at x * dilation,
//   its padded rows cover the effective kernel), and the slices of an outer output are those of
//   its window's extent inside the input, gaps included (its first and last input element can
//   move back from one output to the next; the extent's bounds cannot). Threads: contiguous
//   ranges of work items on OpenMP's threads, as the batch-norm and activation kernels
//   (threads::run_ranges, Note [loop threads] in loop_pool.hpp); forward items are output rows,
//   or output positions for channels_last.
//
// Note [cpu pool index check]
// The backward adds each diff_dst element at its index only if the index names a position of
// its output's window, as the reference checks. The scatter already holds, relative to the
// current outer output's slices, the offset `at = index - first slice * slice size`; one unsigned
// comparison, at < slices held x slice size, rejects every index outside the plane and every one
// outside the window's extent along the outermost dim. The rest must cost next to nothing: the
// scatter is a handful of instructions per index (one output per index in channels_first), and
// any arithmetic per index shows (the index's coordinates by a division per index, even as a
// multiplication by a fixed-point reciprocal, doubles the time of ResNet-50's max-pool backward:
// docs/benchmarks.md, "CPU max-pool index check").
//   - Windows inside the input (along the outermost dim: starting at or past 0, so the slices
//     held start at the window's first position; along the others: wholly inside) use a table
//     of the window's positions, IndexGeometry::positions: one byte per offset from the
//     window's first position, 1 where the offset is a position (inside the window's extent
//     along every dim and, dilated, on the dilation's grid). Indexed from the slices held
//     through a pointer moved back by the window's first position along H and W, one load and
//     one test per index. The offsets cover the window's extent along the outermost dim times a
//     slice (kept up to 4 MiB), plus a slice of zeros in front for the pointer's move.
//   - Windows that reach into the padding along an inner dim, or start in it along the outermost
//     (the first and last outputs of a row: few), check the index's coordinates exactly:
//     WholeCheck (1-D dense: the comparison above is the window), ColumnCheck / RowColumnCheck
//     (dense windows of planes below 2^31 elements: the coordinates by a multiplication by a
//     fixed-point reciprocal and a shift, Divider), GridCheck (dilated windows, larger planes,
//     no table: integer divisions).
// An index that fails is noted (the lowest position of the pass wins) and skipped.

constexpr const char* max_indices_id = "cpu:kernel:max_indices";

AlgoInfo max_indices_info(const PoolDesc& desc, Direction direction) {
  AlgoInfo info;
  info.id = max_indices_id;
  info.name = "dnnx max pooling with argmax indices (SIMD scan; scatter backward)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"kernel", "direct", "indices"};
  info.families = {"none"};
  if (!desc.indices && direction != Direction::fwd) {
    // The forward's indices for the backward, in the workspace (Note [cpu max-pool indices]).
    const std::size_t index_bytes = desc.input_plane() < (std::int64_t{1} << 31) ? 4 : 8;
    info.workspace_bytes = static_cast<std::size_t>(desc.dst_dims().product()) * index_bytes;
    info.notes.emplace_back("recomputes_forward");
  }
  return info;
}

// Unsigned division of numerators below 2^31 by a divisor d fixed at construction, as a
// multiplication and a shift (Note [cpu pool index check]): n / d = (n * multiplier) >> shift with
// shift = 31 + ceil(log2 d) and multiplier = ceil(2^shift / d). The multiplier exceeds 2^shift / d
// by e / d, e = multiplier * d - 2^shift < d, so n * multiplier / 2^shift exceeds n / d by
// n e / (d 2^shift) < 2^31 / 2^shift <= 1 / d: never past the next integer. The multiplier is at
// most 2^32, the product below 2^63.
struct Divider {
  std::uint64_t multiplier = 1;
  int shift = 0;

  explicit Divider(std::uint64_t divisor = 1) {
    int log = 0;
    while ((std::uint64_t{1} << log) < divisor) ++log;
    shift = 31 + log;
    multiplier = ((std::uint64_t{1} << shift) + divisor - 1) / divisor;
  }
  /// n / divisor, for n < 2^31.
  [[gnu::always_inline]] std::uint64_t divide(std::uint64_t n) const {
    return (n * multiplier) >> shift;
  }
};

// One max pooling in the kernels' terms: the 3-D view of LoopGeometry (leading dims of size 1),
// and the split of the spatial dims into the outermost one (`outer`) and the rest.
struct IndexGeometry {
  LoopGeometry loops;
  int outer = 0;               // the outermost spatial dim, in the 3-D view
  std::int64_t in_slice = 1;   // input elements of a slice (product of the dims after outer)
  std::int64_t out_slice = 1;  // output elements of a slice
  std::int64_t in_plane = 1;   // input elements of a plane
  std::int64_t out_plane = 1;  // output elements of a plane
  bool narrow = true;          // int32 lane indices (planes below about 2^31 elements)
  // Note [cpu pool index check]: whether a dilation along the desc's dims is not 1; whether
  // the exact check may divide by reciprocals (dense windows, planes below 2^31 elements), of
  // the slice size and of W; the table of window positions.
  bool dilated = false;
  bool reciprocal = false;
  Divider per_slice, per_row;
  // After a slice of zeros, per offset x from a window's first position below the window's
  // extent along the outermost dim x slice size: 1 if x is one of its positions (empty: more
  // than 4 MiB).
  std::vector<std::uint8_t> positions;

  explicit IndexGeometry(const PoolDesc& desc) : loops(desc), outer(3 - desc.spatial_dims) {
    for (int k = outer + 1; k < 3; ++k) {
      in_slice *= loops.in[static_cast<std::size_t>(k)];
      out_slice *= loops.out[static_cast<std::size_t>(k)];
    }
    in_plane = in_slice * loops.in[static_cast<std::size_t>(outer)];
    out_plane = out_slice * loops.out[static_cast<std::size_t>(outer)];
    // Lane indices stay below 2^31 also in the lanes past a row's last output (16 outputs of
    // stride and window extent beyond it).
    narrow = in_plane + 16 * (loops.stride[2] + loops.extent[2]) < (std::int64_t{1} << 31);
    for (std::size_t k = 0; k < 3; ++k) dilated = dilated || loops.dilation[k] != 1;
    reciprocal = !dilated && in_plane < (std::int64_t{1} << 31);
    if (reciprocal) {
      per_slice = Divider(static_cast<std::uint64_t>(in_slice));
      per_row = Divider(static_cast<std::uint64_t>(loops.in[2]));
    }
    const std::int64_t span = loops.extent[static_cast<std::size_t>(outer)] * in_slice;
    if (span <= (std::int64_t{1} << 22)) {
      // The slice of zeros in front: the kernels index the table from a window's first position
      // along H and W (less than a slice) back.
      positions.assign(static_cast<std::size_t>(in_slice + span), 0);
      for (std::int64_t x = 0; x < span; ++x) {
        const std::int64_t at[3] = {x / in_slice, x % in_slice / loops.in[2], x % loops.in[2]};
        bool position = at[0] % loops.dilation[static_cast<std::size_t>(outer)] == 0;
        for (int d = outer + 1; d < 3; ++d) {
          const auto s = static_cast<std::size_t>(d);
          const std::int64_t offset = at[d];
          position = position && offset < loops.extent[s] && offset % loops.dilation[s] == 0;
        }
        positions[static_cast<std::size_t>(in_slice + x)] = position ? 1 : 0;
      }
    }
  }
};

// Elements a backward work item owns per position in channels_last (Note [cpu max-pool indices]).
constexpr std::int64_t index_channel_block = 16;

// The lowest bad index of a pass: its element in dst's logical order (-1: none) and value.
struct BadIndex {
  std::int64_t element = -1;
  std::int64_t value = 0;
  void note(std::int64_t at, std::int64_t index) {
    if (element < 0 || at < element) {
      element = at;
      value = index;
    }
  }
};

// The same, merged from every thread of a pass.
struct SharedBadIndex {
  std::mutex mutex;
  BadIndex bad;
  void merge(const BadIndex& found) {
    if (found.element < 0) return;
    std::lock_guard lock(mutex);
    bad.note(found.element, found.value);
  }
};

// One output's window, scanned one element at a time under PyTorch's rule: returns the flat
// index of the maximum in the plane and sets `best`. `plane` points at the (n, c) plane's first
// element, `step` is the distance between positions (channels for channels_last).
template <typename T>
[[gnu::always_inline]] inline std::int64_t scan_window(const LoopGeometry& g, const T* plane,
                                                       std::int64_t step,
                                                       const std::array<LoopSpan, 3>& w,
                                                       float& best) {
  best = -std::numeric_limits<float>::infinity();
  std::int64_t at = (w[0].begin * g.in[1] + w[1].begin) * g.in[2] + w[2].begin;
  for (std::int64_t d = w[0].begin; d < w[0].end; d += w[0].step) {
    for (std::int64_t h = w[1].begin; h < w[1].end; h += w[1].step) {
      for (std::int64_t x = w[2].begin; x < w[2].end; x += w[2].step) {
        const std::int64_t position = (d * g.in[1] + h) * g.in[2] + x;
        const float value = simd::load(plane, position * step);
        if (value > best || std::isnan(value)) {
          best = value;
          at = position;
        }
      }
    }
  }
  return at;
}

// The kernels once per ISA (Note [per-ISA pool kernels] in pool_indices_kernels.hpp).
#define DNNX_POOL_ISA \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,fma")))
#define DNNX_POOL_LANES 16
namespace avx512 {
#include "backends/onednn/pool_indices_kernels.hpp"  // NOLINT(bugprone-suspicious-include)
}  // namespace avx512
#undef DNNX_POOL_ISA
#undef DNNX_POOL_LANES
#define DNNX_POOL_ISA __attribute__((target("avx2,fma")))
#define DNNX_POOL_LANES 8
namespace avx2 {
#include "backends/onednn/pool_indices_kernels.hpp"  // NOLINT(bugprone-suspicious-include)
}  // namespace avx2
#undef DNNX_POOL_ISA
#undef DNNX_POOL_LANES
#define DNNX_POOL_ISA
#define DNNX_POOL_LANES 4
namespace baseline {
#include "backends/onednn/pool_indices_kernels.hpp"  // NOLINT(bugprone-suspicious-include)
}  // namespace baseline
#undef DNNX_POOL_ISA
#undef DNNX_POOL_LANES

// The copy of the kernels for the running CPU: the widest it supports, or a narrower one that
// DNNX_POOL_KERNEL_ISA (avx2, baseline) asks for, which is how the tests run every copy on one
// machine.
struct IndexKernels {
  decltype(&baseline::max_fwd) fwd;
  decltype(&baseline::max_bwd) bwd;
};

const IndexKernels& index_kernels() {
  static const IndexKernels kernels = [] {
    __builtin_cpu_init();
    const char* forced = std::getenv("DNNX_POOL_KERNEL_ISA");
    const std::string_view cap = forced != nullptr ? forced : "";
    const bool avx2 =
        cap != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2 && cap != "avx2" && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
      return IndexKernels{avx512::max_fwd, avx512::max_bwd};
    if (avx2) return IndexKernels{avx2::max_fwd, avx2::max_bwd};
    return IndexKernels{baseline::max_fwd, baseline::max_bwd};
  }();
  return kernels;
}

class MaxIndicesPlan final : public LayerPlan<detail::PoolArgs> {
 public:
  MaxIndicesPlan(const PoolDesc& desc, Direction direction)
      : LayerPlan(max_indices_info(desc, direction), context_of(desc, direction, max_indices_id)),
        desc_(desc),
        direction_(direction),
        geometry_(desc),
        workspace_index_(desc.input_plane() < (std::int64_t{1} << 31) ? DType::i32 : DType::i64) {}

  void execute(const detail::PoolArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace);
    if (direction_ == Direction::fwd) {
      check(args.src, "src", desc_.src_dims(), desc_.dtype);
      check(args.dst, "dst", desc_.dst_dims(), desc_.dtype);
      const DType index_dtype = desc_.indices ? index_dtype_of(args.indices) : workspace_index_;
      void* indices = nullptr;
      if (desc_.indices) {
        check(args.indices, "indices", desc_.dst_dims(), index_dtype);
        indices = args.indices->data();
      }
      forward(index_dtype, args.src->data(), args.dst->data(), indices);
      return;
    }
    check(args.diff_dst, "diff_dst", desc_.dst_dims(), desc_.dtype);
    check(args.diff_src, "diff_src", desc_.src_dims(), desc_.dtype);
    if (desc_.indices) {
      const DType index_dtype = index_dtype_of(args.indices_in);
      check(args.indices_in, "indices", desc_.dst_dims(), index_dtype);
      backward(index_dtype, args.diff_dst->data(), args.indices_in->data(), args.diff_src->data());
      return;
    }
    // Max without indices: the forward's argmax into the workspace first.
    check(args.src, "src", desc_.src_dims(), desc_.dtype);
    forward(workspace_index_, args.src->data(), nullptr, workspace.data);
    backward(workspace_index_, args.diff_dst->data(), workspace.data, args.diff_src->data());
  }

 private:
  DType index_dtype_of(const Tensor* indices) const {
    return indices != nullptr && indices->dtype() == DType::i32 ? DType::i32 : DType::i64;
  }

  void check(const Tensor* tensor, const char* role, const Dims& dims, DType dtype) const {
    check_dense(tensor, role, dims, dtype, desc_.layout, context_);
  }

  void forward(DType index_dtype, const void* src, void* dst, void* indices) const {
    const IndexKernels& kernels = index_kernels();
    const LoopGeometry& g = geometry_.loops;
    const std::int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
    const std::int64_t outputs = g.batch * g.channels * geometry_.out_plane;
    // Work items: output positions (channels_last) or output rows of a plane (channels_first).
    const std::int64_t items = g.channels_last ? g.batch * geometry_.out_plane
                                               : g.batch * g.channels * g.out[0] * g.out[1];
    threads::run_ranges(items, outputs * window, [&](std::int64_t i0, std::int64_t i1) {
      kernels.fwd(geometry_, desc_.dtype, index_dtype, src, dst, indices, i0, i1);
    });
  }

  void backward(DType index_dtype, const void* diff_dst, const void* indices,
                void* diff_src) const {
    const IndexKernels& kernels = index_kernels();
    const LoopGeometry& g = geometry_.loops;
    const std::int64_t items =
        g.channels_last ? g.batch * ((g.channels + index_channel_block - 1) / index_channel_block)
                        : g.batch * g.channels;
    SharedBadIndex shared;
    threads::run_ranges(items, g.batch * g.channels * geometry_.in_plane,
                        [&](std::int64_t i0, std::int64_t i1) {
                          kernels.bwd(geometry_, desc_.dtype, index_dtype, diff_dst, indices,
                                      diff_src, i0, i1, shared);
                        });
    if (shared.bad.element >= 0) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::bad_pool_index_message(desc_, shared.bad.element, shared.bad.value),
                    context_);
    }
  }

  PoolDesc desc_;
  Direction direction_;
  IndexGeometry geometry_;
  DType workspace_index_;  // the index type of the workspace (max without indices)
};

std::vector<Candidate> list_candidates(const dnnl::engine& engine, const PoolDesc& desc,
                                       Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction, "");
  const Geometry g = geometry_of(desc);
  std::vector<Candidate> list;
  std::set<std::string> seen;
  std::string failure;

  // forward_inference needs no workspace; backward needs a forward_training hint.
  const dnnl::prop_kind prop = direction == Direction::fwd ? dnnl::prop_kind::forward_inference
                                                           : dnnl::prop_kind::forward_training;
  dnnl::pooling_forward::primitive_desc fwd =
      create_or_unavailable([&] { return forward_pd(engine, prop, desc, g); },
                            "forward primitive descriptor", context, failure);
  dnnl::pooling_backward::primitive_desc bwd;
  if (fwd && direction != Direction::fwd) {
    bwd = create_or_unavailable(
        [&] {
          return dnnl::pooling_backward::primitive_desc(
              engine, algorithm_of(desc.mode), g.src, g.dst, g.strides, g.kernel, g.dilation,
              g.padding_l, g.padding_r, fwd, user_scratchpad());
        },
        "backward primitive descriptor", context, failure);
  }
  dnnl::primitive_desc walker =
      direction == Direction::fwd ? dnnl::primitive_desc(fwd) : dnnl::primitive_desc(bwd);
  if (!walker) {
    Candidate unavailable;
    AlgoInfo& info = unavailable.info;
    info.id = "onednn:unavailable:pooling";
    info.name = "pooling (no oneDNN implementation)";
    info.reason = detail::cat(onednn_version(), " has no ", to_string(desc.mode), " pooling ",
                              direction == Direction::fwd ? "fwd" : "bwd", " implementation for ",
                              to_string(desc.dtype), ' ', to_string(desc.layout), " on cpu isa ",
                              isa, ": ", failure);
    list.push_back(std::move(unavailable));
  }
  // The very object the backward descriptors were created with: oneDNN keeps a plain pointer to
  // it (and `walker` is the backward one, so `fwd` stays at its first implementation).
  const dnnl::primitive_desc hint = direction == Direction::fwd ? dnnl::primitive_desc() : fwd;
  // `continue` moves on to oneDNN's next implementation.
  if (walker) {
    do {
      Candidate candidate;
      const std::string impl = sanitize(walker.impl_info_str());
      AlgoInfo& info = candidate.info;
      info.id = detail::cat("onednn:", impl);
      info.name = detail::cat(impl, " (", to_string(desc.mode), ")");
      info.deterministic = true;
      describe(info, impl);
      if (!seen.insert(info.id).second) continue;
      if (desc.indices) {
        info.reason = detail::cat(
            "oneDNN's max-pooling workspace holds implementation-defined window offsets, not "
            "PyTorch's flat plane indices, and its backward reads only that workspace; the "
            "indices desc runs on ",
            max_indices_id);
        list.push_back(std::move(candidate));
        continue;
      }
      if (!g.semantic_mismatch.empty()) {
        info.reason = g.semantic_mismatch;
        list.push_back(std::move(candidate));
        continue;
      }
      std::size_t scratch = walker.scratchpad_desc().get_size();
      if (direction == Direction::fwd) {
        candidate.fwd = clone(walker, context);
        info.workspace_bytes = scratch;
      } else {
        candidate.bwd = clone(walker, context);
        candidate.fwd = hint;
        candidate.recompute = desc.mode == PoolMode::max;
        if (candidate.recompute) {
          scratch = std::max(scratch, hint.scratchpad_desc().get_size());
          candidate.dst_offset = round_up(scratch);
          candidate.workspace_offset = candidate.dst_offset + round_up(g.dst.get_size());
          info.workspace_bytes = candidate.workspace_offset + hint.workspace_desc().get_size();
          info.notes.emplace_back("recomputes_forward");
        } else {
          info.workspace_bytes = scratch;
        }
      }
      info.supported = true;
      list.push_back(std::move(candidate));
    } while (walker.next_impl());
  }

  // ref:any, last in oneDNN's list, stays last, after dnnx's loops (Note [cpu pool loops]);
  // supported candidates before unsupported ones.
  std::stable_partition(list.begin(), list.end(), [](const Candidate& c) { return !c.info.naive; });
  const auto ref =
      std::find_if(list.begin(), list.end(), [](const Candidate& c) { return c.info.naive; });
  Candidate loops;
  loops.info = kernel_info();
  if (desc.indices) {
    loops.info.supported = false;
    loops.info.reason = detail::cat(
        "dnnx's generic loops neither write nor read argmax indices (their max backward rescans "
        "the windows); the indices desc runs on ",
        max_indices_id);
  }
  const auto loops_at = list.insert(ref, std::move(loops));
  // Note [cpu max-pool indices]: max only; first where it is the only kernel reading indices or
  // the fastest measured (backward), after oneDNN's jit forward otherwise.
  if (desc.mode == PoolMode::max) {
    Candidate max_indices;
    max_indices.info = max_indices_info(desc, direction);
    if (desc.indices || direction != Direction::fwd) {
      list.insert(list.begin(), std::move(max_indices));
    } else {
      list.insert(loops_at, std::move(max_indices));
    }
  }
  std::stable_partition(list.begin(), list.end(),
                        [](const Candidate& c) { return c.info.supported; });
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

// Runs one candidate on the caller's memory. Primitives and memory objects are made once;
// execute() only rebinds data pointers under the runtime's mutex (Note [one stream]).
class Plan final : public LayerPlan<detail::PoolArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const PoolDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        recompute_(candidate.recompute),
        dst_offset_(candidate.dst_offset),
        workspace_offset_(candidate.workspace_offset),
        hint_(candidate.fwd) {
    const Geometry g = geometry_of(desc);
    const dnnl::engine& engine = runtime_->engine;
    dnnl_call(context_, "building the primitives", [&] {
      src_ = dnnl::memory(g.src, engine, DNNL_MEMORY_NONE);
      dst_ = dnnl::memory(g.dst, engine, DNNL_MEMORY_NONE);
      if (direction_ == Direction::fwd) {
        add_step(candidate.fwd, {{DNNL_ARG_SRC, src_.get()}, {DNNL_ARG_DST, dst_.get()}});
        return;
      }
      diff_dst_ = dnnl::memory(g.dst, engine, DNNL_MEMORY_NONE);
      diff_src_ = dnnl::memory(g.src, engine, DNNL_MEMORY_NONE);
      std::vector<dnnl_exec_arg_t> bwd_args{{DNNL_ARG_DIFF_DST, diff_dst_.get()},
                                            {DNNL_ARG_DIFF_SRC, diff_src_.get()}};
      if (recompute_) {
        workspace_ = dnnl::memory(candidate.fwd.workspace_desc(), engine, DNNL_MEMORY_NONE);
        add_step(candidate.fwd, {{DNNL_ARG_SRC, src_.get()},
                                 {DNNL_ARG_DST, dst_.get()},
                                 {DNNL_ARG_WORKSPACE, workspace_.get()}});
        bwd_args.push_back({DNNL_ARG_WORKSPACE, workspace_.get()});
      }
      add_step(candidate.bwd, std::move(bwd_args));
    });
  }

  void execute(const detail::PoolArgs& args, detail::Workspace workspace) override {
    check_src_dst_args(desc_, direction_, args, context_);
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);

    std::lock_guard lock(runtime_->mutex);
    bind(src_, args.src->data());
    if (direction_ == Direction::fwd) {
      bind(dst_, args.dst->data());
    } else {
      bind(diff_dst_, args.diff_dst->data());
      bind(diff_src_, args.diff_src->data());
      if (recompute_) {
        bind(dst_, base + dst_offset_);
        bind(workspace_, base + workspace_offset_);
      }
    }
    const dnnl_stream_t stream = runtime_->stream.get();
    // Every step's scratchpad starts at the workspace: the steps run one after the other.
    for (Step& step : steps_) run_step(step, stream, base, context_);
    wait(stream, context_);
  }

 private:
  void add_step(const dnnl::primitive_desc& pd, std::vector<dnnl_exec_arg_t> args) {
    steps_.push_back(make_step(pd, std::move(args), runtime_->engine));
  }

  std::shared_ptr<Runtime> runtime_;
  PoolDesc desc_;
  Direction direction_;
  bool recompute_;
  std::size_t dst_offset_;
  std::size_t workspace_offset_;
  // The backward primitive keeps a plain pointer to its forward hint: held for the plan's life.
  dnnl::primitive_desc hint_;
  dnnl::memory src_, dst_, diff_dst_, diff_src_, workspace_;
  std::vector<Step> steps_;
};

class OneDnnPool final
    : public ListedLayerBackend<PoolDesc, detail::PoolArgs, Candidate, list_candidates, Plan> {
 public:
  using ListedLayerBackend::ListedLayerBackend;

 protected:
  std::shared_ptr<detail::OpPlan<detail::PoolArgs>> build(const PoolDesc& desc, Direction direction,
                                                          const Candidate& candidate) override {
    if (candidate.info.id == kernel_id) return std::make_shared<KernelPlan>(desc, direction);
    if (candidate.info.id == max_indices_id)
      return std::make_shared<MaxIndicesPlan>(desc, direction);
    return ListedLayerBackend::build(desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::pool>> make_pool_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<OneDnnPool>(std::move(runtime));
}

}  // namespace dnnx::onednn
