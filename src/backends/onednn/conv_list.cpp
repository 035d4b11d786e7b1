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
// where it adds an implementation the other two do not list. ref:any, last in each of oneDNN's
// lists, stays last. An algorithm without any implementation is one unsupported candidate
// ("onednn:unavailable:<algorithm>") carrying oneDNN's message, so that `dnnx algos` shows what
// is missing and why.
//
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

// Which memory descriptors an implementation is asked to run on (Note [format strategies]).
enum class Strategy : std::uint8_t {
  plain,            // every tensor in the caller's layout: no copies
  blocked_weights,  // activations in the caller's layout, weights in oneDNN's preferred one
  blocked,          // activations and weights in oneDNN's preferred layouts
  transposed,       // activations in the other plain layout (nchw <-> nhwc), weights preferred
};

constexpr std::size_t buffer_alignment = 64;

std::size_t round_up(std::size_t bytes) {
  return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

std::string_view algorithm_name(dnnl::algorithm algorithm) {
  switch (algorithm) {
    case dnnl::algorithm::convolution_direct: return "direct";
    case dnnl::algorithm::convolution_winograd: return "winograd";
    case dnnl::algorithm::convolution_auto: return "auto";
    default: return "other";
  }
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

// The strategy that usually wins comes first (Note [candidate order]): brgemm kernels run
// channels_last activations in place, while channels_first activations are only read by gemm and
// ref, so blocking them pays for its reorders.
std::array<Strategy, 4> strategy_order(const ConvDesc& desc) {
  if (desc.layout == Layout::channels_last)
    return {Strategy::blocked_weights, Strategy::blocked, Strategy::transposed, Strategy::plain};
  return {Strategy::blocked, Strategy::transposed, Strategy::blocked_weights, Strategy::plain};
}

struct StrategyMds {
  memory::desc src, weights, dst;
};

StrategyMds strategy_mds(const ConvGeometry& g, Strategy strategy) {
  switch (strategy) {
    case Strategy::plain: return {g.src, g.weights, g.dst};
    case Strategy::blocked_weights: return {g.src, any_layout(g.weights), g.dst};
    case Strategy::blocked: return {any_layout(g.src), any_layout(g.weights), any_layout(g.dst)};
    case Strategy::transposed: return {g.src_transposed, any_layout(g.weights), g.dst_transposed};
  }
  return {g.src, g.weights, g.dst};
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
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

// A snapshot of `pd` at its current implementation (next_impl() changes the object in place).
dnnl::primitive_desc clone(const dnnl::primitive_desc& pd, const ErrorContext& context) {
  dnnl_primitive_desc_t copy = nullptr;
  DNNX_DNNL_CHECK(dnnl_primitive_desc_clone(&copy, pd.get()), context,
                  "cloning a primitive descriptor");
  return dnnl::primitive_desc(copy);
}

void describe(AlgoInfo& info, const std::string& impl, dnnl::algorithm algorithm,
              const std::string& layouts) {
  const bool winograd =
      algorithm == dnnl::algorithm::convolution_winograd || contains(impl, "wino");
  info.notes.emplace_back(winograd ? "winograd" : "direct");
  if (impl.starts_with("ref")) {
    info.notes.emplace_back("reference");
    info.families = {"none"};
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
  if (contains(impl, "amx")) {
    info.notes.emplace_back("amx");
  } else if (contains(impl, "avx512")) {
    info.notes.emplace_back("avx512");
  } else if (contains(impl, "avx2")) {
    info.notes.emplace_back("avx2");
  } else if (contains(impl, "sse41")) {
    info.notes.emplace_back("sse41");
  }
  if (contains(impl, "1x1")) info.notes.emplace_back("1x1");
  if (contains(impl, "dw")) info.notes.emplace_back("depthwise");
  // "blocked", "blocked_weights", "nchw" or "nhwc": which tensors are reordered per call.
  if (layouts != "plain") info.notes.push_back(layouts);
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
  if (impl.starts_with("jit_bf16:")) {
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
// it is a known defect for `desc` or a reorder it needs has no implementation.
Candidate make_candidate(const dnnl::engine& engine, const ConvPd& conv_pd,
                         dnnl::algorithm algorithm, const ConvDesc& desc, const ConvGeometry& g,
                         Direction direction, const ErrorContext& context) {
  const dnnl::primitive_desc& pd = conv_pd.pd;
  Candidate candidate;
  candidate.conv = clone(pd, context);
  candidate.hint = conv_pd.hint;
  const std::string impl = sanitize(pd.impl_info_str());
  const auto& direction_roles = roles(direction);

  // Which layouts the implementation chose, by tensor kind (Note [format strategies]).
  bool activations_user = true;
  bool activations_transposed = true;
  bool weights_user = true;
  for (std::size_t r = 0; r < 3; ++r) {
    const Role& role = direction_roles[r];
    candidate.inner[r] = pd.query_md(role.query);
    const memory::desc& user = user_md(g, role);
    if (role.shape == Shape::weights) {
      weights_user = same_layout(candidate.inner[r], user);
      continue;
    }
    const memory::desc& transposed = role.shape == Shape::src ? g.src_transposed : g.dst_transposed;
    if (!same_layout(candidate.inner[r], user)) activations_user = false;
    if (!same_layout(candidate.inner[r], transposed)) activations_transposed = false;
  }
  const Layout other =
      g.layout == Layout::channels_first ? Layout::channels_last : Layout::channels_first;
  const std::string layouts = activations_user ? (weights_user ? "plain" : "blocked_weights")
                              : activations_transposed ? std::string(to_string(other))
                                                       : "blocked";
  // A resolved convolution_auto reports the algorithm it became.
  const dnnl::algorithm resolved =
      algorithm == dnnl::algorithm::convolution_auto ? pd.get_algorithm() : algorithm;

  AlgoInfo& info = candidate.info;
  info.id = detail::cat("onednn:", impl, ':', algorithm_name(resolved), ':', layouts);
  info.name = detail::cat(impl, " (", algorithm_name(resolved), ", ", layouts_phrase(layouts), ")");
  info.deterministic = true;  // Note [determinism]
  describe(info, impl, resolved, layouts);

  // Plain nhwc activations: the caller's, or converted to them.
  const bool activations_channels_last =
      (activations_user && g.layout == Layout::channels_last) ||
      (!activations_user && activations_transposed && other == Layout::channels_last);
  if (auto defect = known_defect(impl, desc, direction, activations_channels_last)) {
    info.supported = false;
    info.reason = std::move(*defect);
    return candidate;
  }

  std::size_t scratch = pd.scratchpad_desc().get_size();
  bool reordered = false;
  const dnnl::primitive_attr attr = user_scratchpad();
  for (std::size_t r = 0; r < 3; ++r) {
    const Role& role = direction_roles[r];
    const memory::desc& user = user_md(g, role);
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
  }
  // Without reorders the workspace is exactly the convolution's scratchpad.
  std::size_t offset = reordered ? round_up(scratch) : scratch;
  for (std::size_t r = 0; r < 3; ++r) {
    if (!candidate.reorders[r]) continue;
    candidate.buffer_offsets[r] = offset;
    offset += round_up(candidate.inner[r].get_size());
  }
  candidate.scratch_bytes = scratch;
  info.workspace_bytes = offset;
  info.supported = true;
  return candidate;
}

}  // namespace

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

const Candidate* CandidateList::find(const std::string& id) const {
  for (const Candidate& candidate : candidates)
    if (candidate.info.id == id) return &candidate;
  return nullptr;
}

std::string CandidateList::ids() const {
  std::vector<std::string> names;
  names.reserve(candidates.size());
  for (const Candidate& candidate : candidates) names.push_back(candidate.info.id);
  return detail::join(names, ", ");
}

CandidateList list_conv_candidates(const dnnl::engine& engine, const ConvDesc& desc,
                                   Direction direction, const std::string& isa) {
  ErrorContext context;
  context.op = detail::cat("conv ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "cpu";

  const ConvGeometry geometry = conv_geometry(desc);
  CandidateList list;
  std::set<std::string> seen;
  std::vector<Candidate> missing;

  constexpr dnnl::algorithm algorithms[] = {dnnl::algorithm::convolution_direct,
                                            dnnl::algorithm::convolution_winograd,
                                            dnnl::algorithm::convolution_auto};
  for (const dnnl::algorithm algorithm : algorithms) {
    bool found = false;
    std::string failure;
    for (const Strategy strategy : strategy_order(desc)) {
      ConvPd conv_pd = create_conv_pd(engine, direction, algorithm, geometry,
                                      strategy_mds(geometry, strategy), context, failure);
      if (!conv_pd.pd) continue;
      found = true;
      do {
        Candidate candidate =
            make_candidate(engine, conv_pd, algorithm, desc, geometry, direction, context);
        if (seen.insert(candidate.info.id).second) list.candidates.push_back(std::move(candidate));
      } while (conv_pd.pd.next_impl());
    }
    if (found || algorithm == dnnl::algorithm::convolution_auto) continue;
    Candidate unavailable;
    AlgoInfo& info = unavailable.info;
    info.id = detail::cat("onednn:unavailable:", algorithm_name(algorithm));
    info.name = detail::cat(algorithm_name(algorithm), " (no oneDNN implementation)");
    info.supported = false;
    info.reason = detail::cat(onednn_version(), " has no ", algorithm_name(algorithm),
                              " implementation of conv ", to_string(direction), " for ",
                              to_string(desc.dtype), ' ', to_string(desc.layout), " on cpu isa ",
                              isa, ": ", failure);
    info.notes.emplace_back(algorithm_name(algorithm));
    if (algorithm == dnnl::algorithm::convolution_winograd) info.families = {"winograd"};
    missing.push_back(std::move(unavailable));
  }
  // Note [one reference candidate]
  // ref:any reads every layout with the same generic loops, so its blocked variants differ from
  // the plain one only by the copies around it: listed, they would only make exhaustive tuning
  // time the slowest candidate more than once.
  const auto is_plain_ref = [](const Candidate& candidate) {
    return candidate.info.supported && candidate.info.id.starts_with("onednn:ref:") &&
           candidate.info.id.ends_with(":plain");
  };
  if (std::any_of(list.candidates.begin(), list.candidates.end(), is_plain_ref)) {
    std::erase_if(list.candidates, [&](const Candidate& candidate) {
      return candidate.info.id.starts_with("onednn:ref:") && !is_plain_ref(candidate);
    });
  }
  // oneDNN lists ref:any last in every list; keep it last across the strategies too.
  std::stable_partition(
      list.candidates.begin(), list.candidates.end(),
      [](const Candidate& candidate) { return !candidate.info.id.starts_with("onednn:ref:"); });
  for (Candidate& candidate : missing) list.candidates.push_back(std::move(candidate));
  for (std::size_t i = 0; i < list.candidates.size(); ++i)
    list.candidates[i].info.priority = static_cast<int>(i);
  return list;
}

}  // namespace dnnx::onednn
