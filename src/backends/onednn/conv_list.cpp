// The cpu backend's convolution candidates.
//
// Note [format strategies]
// oneDNN's fast kernels (jit, brgemm) read weights only in blocked layouts (e.g. OIhw16i16o), and
// most of them want particular activation layouts too: jit kernels blocked ones (nChw16c),
// brgemm kernels nhwc. The plain layouts the caller holds are read as they are only by gemm
// (im2col), ref and a few first-layer kernels. Each implementation is therefore tried with four
// sets of memory descriptors:
//   plain            every tensor in the caller's layout; nothing is copied;
//   blocked_weights  activations in the caller's layout, weights format_tag::any: the weights (or
//                    diff_weights) are reordered on every call, activations are not touched,
//                    which is what brgemm kernels want for channels_last;
//   blocked          every tensor format_tag::any: oneDNN's preferred layouts, with reorders from
//                    and to the caller's layout inside execute();
//   transposed       activations in the other plain layout (nchw <-> nhwc) and weights `any`:
//                    what lets a channels_first caller use the brgemm kernels.
// The suffix of a candidate id names the layouts the implementation actually chose, not the
// strategy that was asked for: "plain", "blocked_weights", "blocked", or "nchw"/"nhwc" when the
// activations are converted to that plain layout. An implementation that picks the caller's
// layouts under `any` is thus the plain candidate, and is listed once. The reorders run inside
// the candidate, so exhaustive timing weighs their cost against the faster kernel; their buffers
// and the scratchpads of every primitive are part of workspace_bytes (see Candidate).
//
// Note [candidate order]
// Priority 0 is oneDNN's own first implementation of convolution_direct under the strategy that
// usually wins for the caller's layout (see strategy_order), then the rest of that list, then
// the other strategies, each in oneDNN's order; winograd after direct, and convolution_auto only
// where it adds an implementation the other two do not list. For f16/bf16 the f32-compute
// candidates follow (Note [f32 compute convolution]): a native implementation reads and writes
// the dtype directly and skips the conversions, so where the CPU has one the heuristic should
// pick it. ref:any, last in each of oneDNN's
// lists, stays last: it is a scalar loop, slower than any jit kernel even with the conversions
// around it. An algorithm without any native implementation is one unsupported candidate
// ("onednn:unavailable:<algorithm>") carrying oneDNN's message, so that `dnnx algos` shows what
// is missing and why, even where f32-compute candidates run the desc.
//
// Note [one reference candidate]
// ref:any reads every layout with the same generic loops, so its blocked variants differ from
// the plain one only by the copies around it: listed, they would only make exhaustive tuning
// time the slowest candidate more than once. Only its plain variant stays (in_priority_order).
//
// Note [f32 compute convolution]
// oneDNN 3.x runs f16 only where the CPU has AVX512-FP16 and bf16 only from AVX-512 on (or with
// AVX2-VNNI-2: platform::has_data_type_support, which every implementation checks, ref:any
// included), so on other CPUs an f16/bf16 convolution has no oneDNN implementation at all. Each
// f16/bf16 desc therefore also lists f32-compute candidates: the f32 implementations, asked for
// under the format strategies with f32 descriptors. Their plans run, inside execute():
//   1. each input converted elementwise into an f32 copy in the caller's layout in the workspace
//      (convert(), Note [dtype conversions] in convert.cpp: oneDNN's own f16/bf16 reorders are
//      its reference loops on such CPUs, 30 times slower), then, when the implementation wants
//      another layout, reordered (an f32 oneDNN reorder, jit) into its buffer; the copies of the
//      reordered roles share one staging region, used one after the other;
//   2. the f32 convolution on the buffers;
//   3. the output reordered back into the caller's layout where needed and converted into the
//      caller's tensor, rounding once to the dtype.
// So timing and workspace_bytes include the conversions. The result is what a native
// implementation computes: products of f16/bf16 values summed in f32 and rounded once to the
// dtype (bwd_weights overwrites diff_weights; dnnx does not accumulate into it). These
// candidates say what they are, as those of the other ops do (Note [f32 compute] in
// layer_common.hpp): the id ends in ":f32" (f32_compute_suffix), the name says "f32 compute",
// the notes hold "f32_compute".
//   To keep the list (and the parity tests, which run every candidate) short, each f32
// implementation is listed once, under the first strategy in which it is supported: the
// conversions copy every tensor anyway, so a second layout of the same kernel rarely changes
// much. ref:any in f32 is listed only where no native ref:any is (its plain variant: the
// caller's layouts in f32): where one is, it runs the same loops without the copies.
// Known defects (Note [known oneDNN defects]) are those of the f32 implementation inside, and
// determinism is that of the f32 implementation (Note [determinism]): the conversions and
// reorders are elementwise. Every f32-compute candidate needs workspace for its copies, so on a CPU
// without native f16/bf16 kernels no candidate of such a desc runs without workspace.

// Note [determinism]
// oneDNN documents run-to-run bitwise reproducible results for most primitives in a fixed
// environment (same hardware, library, runtime, environment variables); the exceptions it names
// are implementations built on atomics, which only its GPU kernels use. Its CPU convolutions
// split work statically over the OpenMP threads and reduce per-thread partial sums in a fixed
// order, so results depend on the thread count but not on timing. The thread count is part of
// Backend::fingerprint() and therefore of every choice-cache key, and every candidate is listed
// as deterministic; onednn_conv_test runs each one twice and compares the bits.

#include "backends/onednn/conv_list.hpp"

#include "backends/onednn/check.hpp"
#include "backends/onednn/convert.hpp"
#include "backends/onednn/layer_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

namespace dnnx::onednn {
namespace {

using Shape = Role::Shape;

// The strategy that usually wins comes first (Note [candidate order]): brgemm kernels run
// channels_last activations in place, while channels_first activations are only read by gemm and
// ref, so blocking them pays for its reorders.
std::array<Strategy, 4> strategy_order(const ConvDesc& desc) {
  if (desc.layout == Layout::channels_last)
    return {Strategy::blocked_weights, Strategy::blocked, Strategy::transposed, Strategy::plain};
  return {Strategy::blocked, Strategy::transposed, Strategy::blocked_weights, Strategy::plain};
}

// A convolution primitive descriptor and, for the backward directions, the forward one it was
// created with (which must outlive it: oneDNN keeps a plain pointer to the hint).
struct ConvPd {
  dnnl::primitive_desc pd;
  dnnl::primitive_desc hint;
};

// The primitive descriptor of (direction, algorithm) on `mds`, positioned at oneDNN's first
// implementation; null with `failure` set when oneDNN has none. Other oneDNN errors throw.
ConvPd create_conv_pd(const dnnl::engine& engine, Direction direction, dnnl::algorithm algorithm,
                      const ConvGeometry& g, const StrategyMds& mds, const ErrorContext& context,
                      std::string& failure) {
  const dnnl::primitive_attr attr = user_scratchpad();
  dnnl::convolution_forward::primitive_desc hint;
  try {
    // forward_training: the same implementations as inference for convolution, and the only
    // kind a backward primitive descriptor accepts as its hint.
    hint = dnnl::convolution_forward::primitive_desc(
        engine, dnnl::prop_kind::forward_training, algorithm, mds.src, mds.weights, mds.dst,
        g.strides, g.dilates, g.padding_l, g.padding_r, attr);
  } catch (const dnnl::error& error) {
    if (error.status != dnnl_unimplemented)
      raise_dnnl(error.status,
                 detail::cat("creating the forward primitive descriptor: ", error.what()), context);
    failure = direction == Direction::fwd
                  ? std::string(error.what())
                  : detail::cat("no forward implementation to serve as the backward hint (",
                                error.what(), ")");
    return {};
  }
  if (direction == Direction::fwd) return {hint, {}};
  try {
    if (direction == Direction::bwd_data) {
      return {dnnl::convolution_backward_data::primitive_desc(
                  engine, algorithm, mds.src, mds.weights, mds.dst, g.strides, g.dilates,
                  g.padding_l, g.padding_r, hint, attr),
              hint};
    }
    return {dnnl::convolution_backward_weights::primitive_desc(
                engine, algorithm, mds.src, mds.weights, mds.dst, g.strides, g.dilates, g.padding_l,
                g.padding_r, hint, attr),
            hint};
  } catch (const dnnl::error& error) {
    if (error.status != dnnl_unimplemented)
      raise_dnnl(error.status,
                 detail::cat("creating the backward primitive descriptor: ", error.what()),
                 context);
    failure = error.what();
    return {};
  }
}

std::string layouts_phrase(const std::string& layouts) {
  if (layouts == "plain") return "caller's layouts";
  if (layouts == "blocked_weights") return "blocked weights";
  if (layouts == "blocked") return "blocked layouts";
  return layouts + " activations, blocked weights";
}

// Note [known oneDNN defects]
// Implementations that oneDNN offers but that compute wrong results for some descs. They stay in
// the list, unsupported, with the reason, so that nobody wonders where they went. Each was found
// by the parity tests (or a random sweep of every candidate against the reference) with oneDNN
// 3.2.0 and reduced to a conservative predicate with a sweep against ref:any; the predicates
// apply to every 3.x, since no release note says they were fixed.
//   jit_bf16:* backward weights: when the (dilated) kernel is longer than the input along a
//   spatial dim, part of diff_weights is wrong and depends on what the buffer held before (e.g.
//   input 1x12x1x1x8, kernel 4x1x5, pad 3,0,2; input 1x9x1x1, kernel 1x4, stride 3, pad 0,3).
//   The AMX kernels (brgconv_bwd_w:avx512_core_amx, jit:avx512_core_amx) do the same: on a
//   Sapphire Rapids host, bf16 input 1x9x1x1, kernel 6x3x1x4, groups 3, stride 2,3, pad 0,3 gave
//   ~1e-16 instead of 0 in the weights that see only padding. Not swept further: refused under
//   the same predicate.
//   jit_1x1:* backward weights on nhwc activations with a stride > 1 and fewer than 16 input
//   channels per group: the kernel's reduce-to-unit-stride copy writes past its scratchpad
//   (oneDNN issue #6035), which corrupts whatever follows it (here: the reorder buffers) and,
//   on AVX2, diff_weights itself.
//   jit:avx512_core backward weights, 3-D, stride along D > 1 and front padding along D larger
//   than that stride: diff_weights is garbage, and some shapes crash in reduce_diff_weights_3d
//   (e.g. input 1x1x3x4x6, kernel 5x1x2, stride 2,1,1, pad 3,0,0). H and W are not affected.
std::optional<std::string> known_defect(const std::string& impl, const ConvDesc& desc,
                                        Direction direction, bool activations_channels_last) {
  if (dnnl_version()->major != 3 || direction != Direction::bwd_weights) return std::nullopt;
  const auto n = static_cast<std::size_t>(desc.spatial_dims);
  if (impl.starts_with("jit_bf16:") || contains(impl, "_amx")) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t extent = (desc.kernel[i] - 1) * desc.dilation[i] + 1;
      if (extent > desc.input[i]) {
        return detail::cat(onednn_version(), " ", impl,
                           " computes wrong backward weights when the kernel is longer than the "
                           "input (known oneDNN defect; here spatial dim ",
                           i, ": kernel extent ", extent, " > input ", desc.input[i], ")");
      }
    }
  }
  if (impl.starts_with("jit_1x1:") && activations_channels_last) {
    const std::int64_t group_channels = desc.in_channels / desc.groups;
    const bool strided = std::any_of(desc.stride.begin(), desc.stride.begin() + desc.spatial_dims,
                                     [](std::int64_t stride) { return stride > 1; });
    if (strided && group_channels < 16) {
      return detail::cat(onednn_version(), " ", impl,
                         " writes past its scratchpad in backward weights on nhwc activations "
                         "with a stride > 1 and fewer than 16 input channels per group (known "
                         "oneDNN defect, oneDNN issue #6035; here ",
                         group_channels, " channels)");
    }
  }
  if (impl.starts_with("jit:avx512_core") && desc.spatial_dims == 3 && desc.stride[0] > 1 &&
      desc.pad_before[0] > desc.stride[0]) {
    return detail::cat(onednn_version(), " ", impl,
                       " computes wrong backward weights (and may crash) for 3-D convolutions "
                       "with a stride along D and a larger front padding along D (known oneDNN "
                       "defect; here stride ",
                       desc.stride[0], ", padding ", desc.pad_before[0], ")");
  }
  return std::nullopt;
}

// Turns the current implementation of `pd` into a candidate; unsupported, with the reason, when
// it is a known defect for `desc` or a reorder it needs has no implementation. `g` is the
// caller's geometry; `inner_g` the one the implementation was asked for (g itself, or its f32
// twin for an f32-compute candidate), against which its layouts are named.
Candidate make_candidate(const dnnl::engine& engine, const ConvPd& conv_pd,
                         dnnl::algorithm algorithm, const ConvDesc& desc, const ConvGeometry& g,
                         const ConvGeometry& inner_g, bool f32_compute, Direction direction,
                         const ErrorContext& context) {
  const dnnl::primitive_desc& pd = conv_pd.pd;
  Candidate candidate;
  candidate.conv = clone(pd, context);
  candidate.hint = conv_pd.hint;
  const std::string impl = sanitize(pd.impl_info_str());
  const auto& direction_roles = roles(direction);

  std::array<memory::desc, 3> by_shape;  // the inner descriptors as src, weights, dst
  for (std::size_t r = 0; r < 3; ++r) {
    candidate.inner[r] = pd.query_md(direction_roles[r].query);
    by_shape[static_cast<std::size_t>(direction_roles[r].shape)] = candidate.inner[r];
  }
  const std::string layouts = chosen_layouts(inner_g, by_shape[0], by_shape[1], by_shape[2]);
  // A resolved convolution_auto reports the algorithm it became.
  const dnnl::algorithm resolved =
      algorithm == dnnl::algorithm::convolution_auto ? pd.get_algorithm() : algorithm;

  candidate.origin = {detail::cat(impl, ':', algorithm_name(resolved)), layouts, f32_compute};
  AlgoInfo& info = candidate.info;
  info.id = detail::cat("onednn:", impl, ':', algorithm_name(resolved), ':', layouts,
                        f32_compute ? f32_compute_suffix : "");
  info.name = detail::cat(impl, " (", algorithm_name(resolved), ", ", layouts_phrase(layouts),
                          f32_compute ? detail::cat(", ", f32_compute_name) : "", ")");
  info.deterministic = true;  // Note [determinism]
  describe(info, impl, resolved, layouts, f32_compute);

  // Plain nhwc activations: the caller's, or converted to them.
  const bool activations_channels_last =
      layouts == "nhwc" ||
      (g.layout == Layout::channels_last && (layouts == "plain" || layouts == "blocked_weights"));
  if (auto defect = known_defect(impl, desc, direction, activations_channels_last)) {
    info.supported = false;
    info.reason = std::move(*defect);
    return candidate;
  }

  std::size_t scratch = pd.scratchpad_desc().get_size();
  bool reordered = false;
  std::size_t staging_bytes = 0;
  const dnnl::primitive_attr attr = user_scratchpad();
  for (std::size_t r = 0; r < 3; ++r) {
    const Role& role = direction_roles[r];
    // f32 compute: the reorder runs between the f32 copy in the caller's layout and inner.
    const memory::desc& user = user_md(f32_compute ? inner_g : g, role);
    if (same_layout(candidate.inner[r], user)) continue;
    const bool output = r == 2;
    try {
      candidate.reorders[r] =
          output ? dnnl::reorder::primitive_desc(engine, candidate.inner[r], engine, user, attr)
                 : dnnl::reorder::primitive_desc(engine, user, engine, candidate.inner[r], attr);
    } catch (const dnnl::error& error) {
      if (error.status != dnnl_unimplemented)
        raise_dnnl(error.status,
                   detail::cat("creating the ", role.name, " reorder: ", error.what()), context);
      info.supported = false;
      info.reason = detail::cat("oneDNN cannot reorder ", role.name, " between the caller's ",
                                "layout and the one ", impl, " uses: ", error.what());
      return candidate;
    }
    scratch = std::max(scratch, candidate.reorders[r].scratchpad_desc().get_size());
    reordered = true;
    if (f32_compute) staging_bytes = std::max(staging_bytes, user.get_size());
  }
  // Without buffers the workspace is exactly the convolution's scratchpad.
  std::size_t offset = reordered || f32_compute ? round_up(scratch) : scratch;
  for (std::size_t r = 0; r < 3; ++r) {
    if (!candidate.reorders[r] && !f32_compute) continue;
    candidate.buffer_offsets[r] = offset;
    offset += round_up(candidate.inner[r].get_size());
  }
  if (staging_bytes > 0) {
    candidate.staging_offset = offset;
    offset += round_up(staging_bytes);
  }
  candidate.scratch_bytes = scratch;
  info.workspace_bytes = offset;
  info.supported = true;
  return candidate;
}

}  // namespace

std::vector<FormatStrategy> format_strategies(const ConvDesc& desc) {
  std::vector<FormatStrategy> strategies;
  for (const Strategy strategy : strategy_order(desc)) strategies.push_back({strategy, false});
  if (desc.dtype != DType::f32) {
    for (const Strategy strategy : strategy_order(desc)) strategies.push_back({strategy, true});
  }
  return strategies;
}

StrategyMds strategy_mds(const ConvGeometry& g, Strategy strategy) {
  switch (strategy) {
    case Strategy::plain: return {g.src, g.weights, g.dst};
    case Strategy::blocked_weights: return {g.src, any_layout(g.weights), g.dst};
    case Strategy::blocked: return {any_layout(g.src), any_layout(g.weights), any_layout(g.dst)};
    case Strategy::transposed: return {g.src_transposed, any_layout(g.weights), g.dst_transposed};
  }
  return {g.src, g.weights, g.dst};
}

std::string chosen_layouts(const ConvGeometry& g, const memory::desc& src,
                           const memory::desc& weights, const memory::desc& dst) {
  const bool activations_user = same_layout(src, g.src) && same_layout(dst, g.dst);
  const bool activations_transposed =
      same_layout(src, g.src_transposed) && same_layout(dst, g.dst_transposed);
  if (activations_user) return same_layout(weights, g.weights) ? "plain" : "blocked_weights";
  if (activations_transposed) {
    return std::string(to_string(g.layout == Layout::channels_first ? Layout::channels_last
                                                                    : Layout::channels_first));
  }
  return "blocked";
}

std::string_view algorithm_name(dnnl::algorithm algorithm) {
  switch (algorithm) {
    case dnnl::algorithm::convolution_direct: return "direct";
    case dnnl::algorithm::convolution_winograd: return "winograd";
    case dnnl::algorithm::convolution_auto: return "auto";
    default: return "other";
  }
}

void describe(AlgoInfo& info, const std::string& impl, dnnl::algorithm algorithm,
              const std::string& layouts, bool f32_compute) {
  const bool winograd =
      algorithm == dnnl::algorithm::convolution_winograd || contains(impl, "wino");
  info.notes.emplace_back(winograd ? "winograd" : "direct");
  if (impl.starts_with("ref")) {
    detail::mark_naive(info);
  } else if (winograd) {
    info.families = {"winograd"};
  } else if (contains(impl, "gemm") && !contains(impl, "brg")) {
    // im2col + GEMM: the large column buffer is its scratchpad (Theano's "large").
    info.notes.emplace_back("gemm");
    info.families = {"large"};
  } else {
    if (contains(impl, "brg")) info.notes.emplace_back("brgemm");
    info.families = {"small"};
  }
  if (const std::string_view isa = isa_of(impl, {"amx", "avx512", "avx2", "sse41"}); !isa.empty())
    info.notes.emplace_back(isa);
  if (contains(impl, "1x1")) info.notes.emplace_back("1x1");
  if (contains(impl, "dw")) info.notes.emplace_back("depthwise");
  // "blocked", "blocked_weights", "nchw" or "nhwc": which tensors are reordered per call.
  if (layouts != "plain") info.notes.push_back(layouts);
  if (f32_compute) info.notes.emplace_back(f32_compute_note);
}

const std::array<Role, 3>& roles(Direction direction) {
  using dnnl::query;
  static const std::array<Role, 3> fwd = {{
      {DNNL_ARG_SRC, query::src_md, "src", Shape::src},
      {DNNL_ARG_WEIGHTS, query::weights_md, "weights", Shape::weights},
      {DNNL_ARG_DST, query::dst_md, "dst", Shape::dst},
  }};
  static const std::array<Role, 3> bwd_data = {{
      {DNNL_ARG_DIFF_DST, query::diff_dst_md, "diff_dst", Shape::dst},
      {DNNL_ARG_WEIGHTS, query::weights_md, "weights", Shape::weights},
      {DNNL_ARG_DIFF_SRC, query::diff_src_md, "diff_src", Shape::src},
  }};
  static const std::array<Role, 3> bwd_weights = {{
      {DNNL_ARG_SRC, query::src_md, "src", Shape::src},
      {DNNL_ARG_DIFF_DST, query::diff_dst_md, "diff_dst", Shape::dst},
      {DNNL_ARG_DIFF_WEIGHTS, query::diff_weights_md, "diff_weights", Shape::weights},
  }};
  switch (direction) {
    case Direction::fwd: return fwd;
    case Direction::bwd_data: return bwd_data;
    case Direction::bwd_weights: return bwd_weights;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return fwd;
}

const memory::desc& user_md(const ConvGeometry& geometry, const Role& role) {
  switch (role.shape) {
    case Shape::src: return geometry.src;
    case Shape::weights: return geometry.weights;
    case Shape::dst: return geometry.dst;
  }
  return geometry.src;
}

void run_plan_steps(std::vector<PlanStep>& steps, dnnl_stream_t stream, std::byte* workspace,
                    std::span<void* const> tensors, const ErrorContext& context) {
  for (PlanStep& step : steps) {
    if (Step* primitive = std::get_if<Step>(&step)) {
      run_step(*primitive, stream, workspace, context);
      continue;
    }
    const Conversion& c = std::get<Conversion>(step);
    wait(stream, context);  // what the primitives before it wrote, or read from its target
    void* copy = workspace + c.offset;
    if (c.into_f32) {
      convert(tensors[c.tensor], c.dtype, copy, DType::f32, c.count, c.scale);
    } else {
      convert(copy, DType::f32, tensors[c.tensor], c.dtype, c.count, c.scale);
    }
  }
}

CandidateList list_conv_candidates(const dnnl::engine& engine, const ConvDesc& desc,
                                   Direction direction, const std::string& isa) {
  ErrorContext context;
  context.op = detail::cat("conv ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "cpu";

  const ConvGeometry geometry = conv_geometry(desc);
  // Note [f32 compute convolution]: the same convolution on f32 tensors.
  ConvDesc f32_desc = desc;
  f32_desc.dtype = DType::f32;
  const ConvGeometry f32_geometry = conv_geometry(f32_desc);

  std::vector<Candidate> found_candidates;
  std::set<std::string> seen;
  std::vector<Candidate> missing;

  constexpr dnnl::algorithm algorithms[] = {dnnl::algorithm::convolution_direct,
                                            dnnl::algorithm::convolution_winograd,
                                            dnnl::algorithm::convolution_auto};
  for (const dnnl::algorithm algorithm : algorithms) {
    bool found = false;
    bool f32_found = false;
    std::string failure;  // the native strategies' (the f32 ones' is not reported)
    std::string f32_failure;
    for (const FormatStrategy strategy : format_strategies(desc)) {
      const ConvGeometry& inner = strategy.f32_compute ? f32_geometry : geometry;
      ConvPd conv_pd =
          create_conv_pd(engine, direction, algorithm, inner, strategy_mds(inner, strategy.layouts),
                         context, strategy.f32_compute ? f32_failure : failure);
      if (!conv_pd.pd) continue;
      (strategy.f32_compute ? f32_found : found) = true;
      do {
        Candidate candidate = make_candidate(engine, conv_pd, algorithm, desc, geometry, inner,
                                             strategy.f32_compute, direction, context);
        if (!seen.insert(candidate.info.id).second) continue;
        found_candidates.push_back(std::move(candidate));
      } while (conv_pd.pd.next_impl());
    }
    if (found || algorithm == dnnl::algorithm::convolution_auto) continue;
    Candidate unavailable;
    AlgoInfo& info = unavailable.info;
    info.id = detail::cat("onednn:unavailable:", algorithm_name(algorithm));
    info.name = detail::cat(algorithm_name(algorithm), " (no oneDNN implementation)");
    info.supported = false;
    info.reason =
        detail::cat(onednn_version(), " has no ", algorithm_name(algorithm),
                    " implementation of conv ", to_string(direction), " for ",
                    to_string(desc.dtype), ' ', to_string(desc.layout), " on cpu isa ", isa, ": ",
                    failure, f32_found ? " (its f32-compute candidates run it on f32 copies)" : "");
    info.notes.emplace_back(algorithm_name(algorithm));
    if (algorithm == dnnl::algorithm::convolution_winograd) info.families = {"winograd"};
    missing.push_back(std::move(unavailable));
  }

  CandidateList list;
  list.candidates = in_priority_order(std::move(found_candidates), {});
  for (Candidate& candidate : missing) list.candidates.push_back(std::move(candidate));
  for (std::size_t i = 0; i < list.candidates.size(); ++i)
    list.candidates[i].info.priority = static_cast<int>(i);
  return list;
}

}  // namespace dnnx::onednn
