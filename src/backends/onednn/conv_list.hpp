#pragma once
// The candidates of the cpu backend's convolution: every implementation oneDNN offers for a
// (desc, direction), under every memory-format strategy that makes a difference. This is the one
// place that names them and fixes their order (STYLE.md: no self-registration).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/onednn/memory.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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

/// One candidate: its public record and, when supported, what a plan needs to build it.
struct Candidate {
  AlgoInfo info;
  dnnl::primitive_desc conv;  ///< the implementation (null if unsupported)
  /// Backward: the forward primitive descriptor `conv` was created with. oneDNN keeps a plain
  /// pointer to it, so it must live as long as `conv` does.
  dnnl::primitive_desc hint;
  std::array<memory::desc, 3> inner;                  ///< per role: the descriptor the conv uses
  std::array<dnnl::primitive_desc_base, 3> reorders;  ///< per role: user <-> inner (null: none)
  std::array<std::size_t, 3> buffer_offsets{};        ///< per reordered role: workspace offset
  std::size_t scratch_bytes = 0;                      ///< scratchpad region at workspace offset 0
};

/// Every candidate of one (desc, direction), in priority order.
struct CandidateList {
  std::vector<Candidate> candidates;
  /// The candidate with `id`, or null.
  const Candidate* find(const std::string& id) const;
  /// "id1, id2, ..." for error messages.
  std::string ids() const;
};

/// Enumerates the candidates (creates primitive descriptors, compiles nothing). Throws only for
/// failures other than "oneDNN has no implementation", which become unsupported candidates.
CandidateList list_conv_candidates(const dnnl::engine& engine, const ConvDesc& desc,
                                   Direction direction, const std::string& isa);

}  // namespace dnnx::onednn
