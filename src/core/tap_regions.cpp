#include "core/tap_regions.hpp"

#include "core/check.hpp"

#include <algorithm>
#include <set>

namespace dnnx::detail {
namespace {

// Floor and ceiling of a / b for b > 0, any sign of a.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// The dim whole: every output, every tap, the convolution's own padding.
TapSegment whole(const ConvDesc& desc, int dim) {
  const auto d = static_cast<std::size_t>(dim);
  TapSegment s;
  s.out_end = desc.output_size(dim);
  s.tap_count = desc.kernel[d];
  s.in_end = desc.input[d];
  s.pad_before = desc.pad_before[d];
  s.pad_after = desc.pad_after[d];
  return s;
}

}  // namespace

std::string_view to_string(TapSplit split) { return split == TapSplit::boxes ? "boxes" : "rows"; }

std::vector<TapSegment> tap_segments(const ConvDesc& desc, int dim) {
  const auto d = static_cast<std::size_t>(dim);
  const std::int64_t size = desc.input[d], taps = desc.kernel[d], stride = desc.stride[d],
                     dilation = desc.dilation[d], pad = desc.pad_before[d];
  const std::int64_t out = desc.output_size(dim);
  // Tap t reads real input at outputs [first_out(t), end_out(t)).
  auto first_out = [&](std::int64_t t) {
    return std::clamp<std::int64_t>(ceil_div(pad - t * dilation, stride), 0, out);
  };
  auto end_out = [&](std::int64_t t) {
    return std::clamp<std::int64_t>(floor_div(size - 1 + pad - t * dilation, stride) + 1, 0, out);
  };
  std::set<std::int64_t> cuts{0, out};
  for (std::int64_t t = 0; t < taps; ++t) {
    cuts.insert(first_out(t));
    cuts.insert(end_out(t));
  }
  std::vector<TapSegment> segments;
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    const std::int64_t begin = *it, end = *std::next(it);
    if (begin >= end) continue;
    std::int64_t first = -1, last = -1;
    for (std::int64_t t = 0; t < taps; ++t) {
      if (first_out(t) <= begin && begin < end_out(t)) {
        if (first < 0) first = t;
        last = t;
      }
    }
    if (first < 0) continue;  // no tap reaches these outputs
    TapSegment s;
    s.out_begin = begin;
    s.out_end = end;
    s.tap_first = first;
    s.tap_count = last - first + 1;
    s.in_begin = begin * stride + first * dilation - pad;
    s.in_end = (end - 1) * stride + last * dilation - pad + 1;
    DNNX_ASSERT(s.in_begin >= 0 && s.in_end <= size && s.in_begin < s.in_end);
    segments.push_back(s);
  }
  return segments;
}

TapRegions tap_regions(const ConvDesc& desc, TapSplit split) {
  std::array<std::vector<TapSegment>, 3> per_dim;
  TapRegions out;
  for (int dim = 0; dim < desc.spatial_dims; ++dim) {
    auto& segments = per_dim[static_cast<std::size_t>(dim)];
    if (dim == 0 || split == TapSplit::boxes) {
      segments = tap_segments(desc, dim);
      std::int64_t covered = 0;
      for (const TapSegment& s : segments) covered += s.out_end - s.out_begin;
      if (covered != desc.output_size(dim)) out.uncovered_outputs = true;
    } else {
      segments = {whole(desc, dim)};
    }
    if (segments.empty()) return out;  // no output is reached at all
  }
  // Every combination, the last dim fastest.
  std::array<std::size_t, 3> at{};
  while (true) {
    TapRegion region;
    for (int dim = 0; dim < desc.spatial_dims; ++dim) {
      const auto d = static_cast<std::size_t>(dim);
      region.dims[d] = per_dim[d][at[d]];
    }
    out.regions.push_back(region);
    int dim = desc.spatial_dims - 1;
    for (; dim >= 0; --dim) {
      const auto d = static_cast<std::size_t>(dim);
      if (++at[d] < per_dim[d].size()) break;
      at[d] = 0;
    }
    if (dim < 0) break;
  }
  return out;
}

ConvDesc tap_region_desc(const ConvDesc& desc, const TapRegion& region) {
  ConvDesc sub = desc;
  for (int dim = 0; dim < desc.spatial_dims; ++dim) {
    const auto d = static_cast<std::size_t>(dim);
    const TapSegment& s = region.dims[d];
    sub.input[d] = s.in_end - s.in_begin;
    sub.kernel[d] = s.tap_count;
    sub.pad_before[d] = s.pad_before;
    sub.pad_after[d] = s.pad_after;
    if (s.tap_count == 1) sub.dilation[d] = 1;
  }
  return sub;
}

double valid_tap_fraction(const ConvDesc& desc) {
  double fraction = 1;
  for (int dim = 0; dim < desc.spatial_dims; ++dim) {
    const std::int64_t out = desc.output_size(dim);
    const std::int64_t taps = desc.kernel[static_cast<std::size_t>(dim)];
    std::int64_t valid = 0;
    for (const TapSegment& s : tap_segments(desc, dim))
      valid += (s.out_end - s.out_begin) * s.tap_count;
    fraction *= static_cast<double>(valid) / static_cast<double>(out * taps);
  }
  return fraction;
}

}  // namespace dnnx::detail
