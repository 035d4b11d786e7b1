// The smaller convolutions a search probes a candidate on (Note [probing slow candidates] in
// src/tune/select.cpp): slices of the groups, of the batch, or of the output's rows where the batch
// is too small to slice.
#pragma once

#include <dnnx/ops/conv.hpp>

#include <cstdint>
#include <vector>

namespace dnnx::detail {

/// One slice of a convolution: its desc and the share of the full problem's output it computes.
struct ConvSlice {
  ConvDesc desc;
  double fraction = 1;
};

/// Groups from which a convolution is probed on slices of its groups (Note [conv probe slices]).
inline constexpr std::int64_t min_sliced_groups = 16;

/// Note [conv probe slices]: the slices of `desc` a search probes on, smallest first (level 0).
/// With min_sliced_groups groups or more, the first probe_batches(groups) groups (rounded up to
/// keep channel counts that are multiples of 8 so), the smallest of them first over slices of
/// the batch where it is over a sixteenth of the groups; otherwise with a batch of 16 or more, the
/// first probe_batches(batch) samples; otherwise, where the output's outermost spatial dim has
/// 16 rows or more, the first probe_batches(rows) rows of it with the input rows they read; none
/// for a smaller convolution.
std::vector<ConvSlice> conv_probe_slices(const ConvDesc& desc);

}  // namespace dnnx::detail
