#pragma once
// Note [tap regions]
// Along one spatial dim, output position o of a convolution reads input o*stride + t*dilation -
// pad_before with tap t, and only the taps for which that lands inside the input read real data:
// one contiguous range of taps, which changes only at a few output positions (at most two per
// tap). So the output splits into segments on each of which the valid taps are one fixed range,
// and on a product of such segments (a box) the convolution is a smaller one: the kernel cut to
// those taps, on the crop of the input they read, with no padding, writing that box of the
// output. Where most tap-pixel products read padding (a 3x3 of dilation 36 on a 65x65 image, as
// in DeepLabV3's ASPP, reads real input with 40% of them) the boxes together do much less
// arithmetic than the whole convolution. tap_regions() makes the boxes of two splits:
//   boxes  every spatial dim split into its segments (at most (2k-1)^dims boxes of a kernel of
//          k taps per dim);
//   rows   the first spatial dim only, the others whole, with all their taps and their padding
//          (fewer, larger convolutions).
// The boxes partition the output; an output position no tap reaches (padding wider than the
// kernel's reach) is in no box and is zero. In the backward directions each box adds its part:
// its input crop's gradient (crops overlap) and its taps' weight gradient.

#include <dnnx/ops/conv.hpp>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dnnx::detail {

enum class TapSplit { boxes, rows };

/// "boxes", "rows".
std::string_view to_string(TapSplit split);

/// One segment of one spatial dim: outputs [out_begin, out_end) read taps [tap_first,
/// tap_first + tap_count) from inputs [in_begin, in_end); pad_before / pad_after are the smaller
/// convolution's along this dim (0 where the dim is split, the convolution's own where it is
/// kept whole).
struct TapSegment {
  std::int64_t out_begin = 0, out_end = 0;
  std::int64_t tap_first = 0, tap_count = 0;
  std::int64_t in_begin = 0, in_end = 0;
  std::int64_t pad_before = 0, pad_after = 0;
};

/// The segments of spatial dim `dim` of `desc` on which one range of taps is valid, in output
/// order; outputs no tap reaches are in none.
std::vector<TapSegment> tap_segments(const ConvDesc& desc, int dim);

/// One box: a segment per spatial dim (desc.spatial_dims of them).
struct TapRegion {
  std::array<TapSegment, 3> dims{};
};

/// The regions of `split` (Note [tap regions]), in row-major order of their segments, and
/// whether some output position is in none of them.
struct TapRegions {
  std::vector<TapRegion> regions;
  bool uncovered_outputs = false;
};
TapRegions tap_regions(const ConvDesc& desc, TapSplit split);

/// The smaller convolution of `region`: desc's batch, channels, groups, stride, dtype and layout,
/// the crop as input, the cut kernel, the region's padding, and dilation 1 along a dim of one tap.
ConvDesc tap_region_desc(const ConvDesc& desc, const TapRegion& region);

/// The share of desc's tap-pixel products (per sample and channel pair) that read real input,
/// in (0, 1].
double valid_tap_fraction(const ConvDesc& desc);

}  // namespace dnnx::detail
