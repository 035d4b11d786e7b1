#pragma once
// The candidates of the cpu backend's convolution: every implementation oneDNN offers for a
// (desc, direction), under every memory-format strategy that makes a difference. This is the one
// place that names them and fixes their order (STYLE.md: no self-registration).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/memory.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dnnx::onednn {

/// One tensor of a direction. Roles 0 and 1 are read, role 2 is written.
struct Role {
  int arg;            ///< DNNL_ARG_*
  dnnl::query query;  ///< how the conv primitive descriptor reports its memory descriptor
  const char* name;   ///< "src", "diff_dst", ...
  enum class Shape : std::uint8_t { src, weights, dst } shape;  ///< which user descriptor it has
};
/// fwd: src, weights -> dst; bwd_data: diff_dst, weights -> diff_src;
/// bwd_weights: src, diff_dst -> diff_weights.
const std::array<Role, 3>& roles(Direction direction);
/// The user's memory descriptor of `role` (from the geometry).
const memory::desc& user_md(const ConvGeometry& geometry, const Role& role);

/// Which memory descriptors an implementation is asked to run on (Note [format strategies] in
/// conv_list.cpp).
enum class Strategy : std::uint8_t {
  plain,            ///< every tensor in the caller's layout: no copies
  blocked_weights,  ///< activations in the caller's layout, weights in oneDNN's preferred one
  blocked,          ///< activations and weights in oneDNN's preferred layouts
  transposed,       ///< activations in the other plain layout (nchw <-> nhwc), weights preferred
};

/// One set of memory descriptors to try: a Strategy in the caller's data type, or in f32 around
/// an f16/bf16 convolution (Note [f32 compute convolution] in conv_list.cpp).
struct FormatStrategy {
  Strategy layouts = Strategy::plain;
  bool f32_compute = false;
};

/// The strategies to try for `desc`, in priority order (Note [candidate order]): those in the
/// caller's data type, then for f16/bf16 the same layouts in f32.
std::vector<FormatStrategy> format_strategies(const ConvDesc& desc);

/// The descriptors of `strategy` for the convolution of `geometry`.
struct StrategyMds {
  memory::desc src, weights, dst;
};
StrategyMds strategy_mds(const ConvGeometry& geometry, Strategy strategy);

/// The id part naming the layouts an implementation chose, compared with the caller's in
/// `geometry` (which must have the data type of the chosen descriptors): "plain",
/// "blocked_weights", "blocked", or "nchw"/"nhwc" when the activations are in the caller's other
/// plain layout. `src` and `dst` are the descriptors of the tensors of those shapes (diff_src,
/// diff_dst in the backward directions).
std::string chosen_layouts(const ConvGeometry& geometry, const memory::desc& src,
                           const memory::desc& weights, const memory::desc& dst);

/// "direct", "winograd", "auto".
std::string_view algorithm_name(dnnl::algorithm algorithm);

/// Fills the notes and families of a candidate from oneDNN's implementation name, the algorithm,
/// the chosen layouts and whether it computes in f32 on copies (appended to info.notes).
void describe(AlgoInfo& info, const std::string& impl, dnnl::algorithm algorithm,
              const std::string& layouts, bool f32_compute);

/// Where a listed candidate comes from, beyond its record: what ordering the list needs.
struct CandidateOrigin {
  std::string implementation;  ///< oneDNN's implementation and algorithm: "<impl>:<algorithm>"
  std::string layouts;         ///< chosen_layouts()
  bool f32_compute = false;    ///< Note [f32 compute convolution]
  bool ref() const { return implementation.starts_with("ref:"); }
};

/// The convolution candidates found for one desc (native and f32-compute, each group in the
/// order found) in priority order (Note [candidate order] in conv_list.cpp): native candidates
/// other than ref:any, the f32-compute ones (one per implementation), `before_ref`, then ref:any
/// (its plain variant; in f32 only where no native one is supported). `C` has an AlgoInfo `info`
/// and a CandidateOrigin `origin`; priorities are left to the caller.
template <typename C>
std::vector<C> in_priority_order(std::vector<C> found, std::vector<C> before_ref) {
  std::vector<C> native, f32;
  for (C& c : found) (c.origin.f32_compute ? f32 : native).push_back(std::move(c));
  // Note [one reference candidate]: only the plain variant of ref:any, where it is supported.
  for (std::vector<C>* group : {&native, &f32}) {
    const auto plain_ref = [](const C& c) {
      return c.info.supported && c.origin.ref() && c.origin.layouts == "plain";
    };
    if (std::any_of(group->begin(), group->end(), plain_ref))
      std::erase_if(*group, [&](const C& c) { return c.origin.ref() && !plain_ref(c); });
  }
  // Note [f32 compute convolution]: one per implementation, the first supported in the order
  // found (or the first when none is); no f32 ref:any where a native one runs.
  std::vector<C> f32_kept;
  for (C& c : f32) {
    const auto first = std::find_if(f32_kept.begin(), f32_kept.end(), [&](const C& kept) {
      return kept.origin.implementation == c.origin.implementation;
    });
    if (first == f32_kept.end()) {
      f32_kept.push_back(std::move(c));
    } else if (!first->info.supported && c.info.supported) {
      *first = std::move(c);
    }
  }
  if (std::any_of(native.begin(), native.end(),
                  [](const C& c) { return c.origin.ref() && c.info.supported; }))
    std::erase_if(f32_kept, [](const C& c) { return c.origin.ref(); });
  std::vector<C> list;
  for (const bool ref : {false, true}) {
    for (std::vector<C>* group : {&native, &f32_kept}) {
      for (C& c : *group)
        if (c.origin.ref() == ref) list.push_back(std::move(c));
    }
    if (!ref)
      for (C& c : before_ref) list.push_back(std::move(c));
  }
  return list;
}

/// One candidate: its public record and, when supported, what a plan needs to build it.
struct Candidate {
  AlgoInfo info;
  CandidateOrigin origin;
  dnnl::primitive_desc conv;  ///< the implementation (null if unsupported)
  /// Backward: the forward primitive descriptor `conv` was created with. oneDNN keeps a plain
  /// pointer to it, so it must live as long as `conv` does.
  dnnl::primitive_desc hint;
  std::array<memory::desc, 3> inner;  ///< per role: the descriptor the conv uses
  /// Per role: the reorder between the caller's tensor and inner (null: none), or for an
  /// f32-compute candidate between the role's f32 copy in the caller's layout (at
  /// staging_offset) and inner (null: the role's buffer is that copy).
  std::array<dnnl::primitive_desc_base, 3> reorders;
  /// Per role with a buffer in the workspace (a reordered one; every role of an f32-compute
  /// candidate): its offset.
  std::array<std::size_t, 3> buffer_offsets{};
  /// f32 compute: the region that holds, for one role with a reorder after the other, its f32
  /// copy in the caller's layout (Note [f32 compute convolution]).
  std::size_t staging_offset = 0;
  std::size_t scratch_bytes = 0;  ///< scratchpad region at workspace offset 0
};

/// One elementwise conversion of an f32-compute plan (Note [f32 compute convolution]): between a
/// caller's tensor, bound per call, and its f32 copy in the caller's layout in the workspace.
struct Conversion {
  std::size_t tensor = 0;    ///< which of the call's tensor pointers it reads or writes
  std::size_t offset = 0;    ///< of the f32 copy in the workspace
  std::int64_t count = 0;    ///< values
  DType dtype = DType::f32;  ///< of the caller's tensor
  bool into_f32 = true;      ///< the caller's tensor -> the copy (else the copy -> the tensor)
  float scale = 1;           ///< applied on the way into f32 (the fused convolution's residual)
};

/// A step of a convolution plan: a oneDNN primitive or a conversion.
using PlanStep = std::variant<Step, Conversion>;

/// Runs `steps` in order: primitives on `stream` with their scratchpads at `workspace`,
/// conversions between tensors[tensor] and workspace + offset on the host's threads, after
/// waiting for the stream. Does not wait at the end.
void run_plan_steps(std::vector<PlanStep>& steps, dnnl_stream_t stream, std::byte* workspace,
                    std::span<void* const> tensors, const ErrorContext& context);

/// Every candidate of one (desc, direction), in priority order.
struct CandidateList {
  std::vector<Candidate> candidates;
};

/// Enumerates the candidates (creates primitive descriptors, compiles nothing). Throws only for
/// failures other than "oneDNN has no implementation", which become unsupported candidates.
/// f16/bf16 descs also list f32-compute candidates (Note [f32 compute convolution]).
CandidateList list_conv_candidates(const dnnl::engine& engine, const ConvDesc& desc,
                                   Direction direction, const std::string& isa);

}  // namespace dnnx::onednn
