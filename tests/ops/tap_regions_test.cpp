// Note [tap regions] (src/core/tap_regions.hpp): the regions of each split, their smaller
// convolutions mapped back to the whole one, make exactly the whole convolution's products that
// read real input. Every direction sums over the same (output, tap, input) triples, so matching
// those triples checks fwd, bwd_data and bwd_weights at once.

#include "core/tap_regions.hpp"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace dnnx {
namespace {

using detail::TapRegion;
using detail::TapSplit;
using Triple = std::tuple<std::array<std::int64_t, 3>, std::array<std::int64_t, 3>,
                          std::array<std::int64_t, 3>>;  // output, tap, input positions

// The spatial (output, tap, input) triples of desc whose input is real, every one of them, with
// `shift` added to each part (a region's offsets in the whole convolution).
void products(const ConvDesc& desc, const Triple& shift, std::map<Triple, int>& out) {
  const int dims = desc.spatial_dims;
  std::array<std::int64_t, 3> o{}, t{};
  auto next = [&](std::array<std::int64_t, 3>& at, auto limit) {
    for (int d = dims - 1; d >= 0; --d) {
      const auto s = static_cast<std::size_t>(d);
      if (++at[s] < limit(d)) return true;
      at[s] = 0;
    }
    return false;
  };
  do {
    t = {};
    do {
      Triple triple;
      bool real = true;
      for (int d = 0; d < dims; ++d) {
        const auto s = static_cast<std::size_t>(d);
        const std::int64_t i = o[s] * desc.stride[s] + t[s] * desc.dilation[s] - desc.pad_before[s];
        real &= i >= 0 && i < desc.input[s];
        std::get<0>(triple)[s] = o[s] + std::get<0>(shift)[s];
        std::get<1>(triple)[s] = t[s] + std::get<1>(shift)[s];
        std::get<2>(triple)[s] = i + std::get<2>(shift)[s];
      }
      if (real) ++out[triple];
    } while (next(t, [&](int d) { return desc.kernel[static_cast<std::size_t>(d)]; }));
  } while (next(o, [&](int d) { return desc.output_size(d); }));
}

ConvDesc conv(std::vector<std::int64_t> input, std::vector<std::int64_t> kernel,
              std::vector<std::int64_t> stride, std::vector<std::int64_t> pad,
              std::vector<std::int64_t> dilation) {
  std::vector<std::int64_t> src{2, 3}, weights{4, 3};
  src.insert(src.end(), input.begin(), input.end());
  weights.insert(weights.end(), kernel.begin(), kernel.end());
  return ConvDesc::from_shapes(Dims(std::span<const std::int64_t>(src)),
                               Dims(std::span<const std::int64_t>(weights)), stride, pad, dilation);
}

void expect_regions_make_the_whole(const ConvDesc& desc, const std::string& name) {
  std::map<Triple, int> whole;
  products(desc, {}, whole);
  for (TapSplit split : {TapSplit::boxes, TapSplit::rows}) {
    SCOPED_TRACE(name + " " + std::string(detail::to_string(split)));
    const detail::TapRegions regions = detail::tap_regions(desc, split);
    std::map<Triple, int> pieces;
    std::int64_t outputs = 0;
    for (const TapRegion& r : regions.regions) {
      const ConvDesc sub = detail::tap_region_desc(desc, r);
      ASSERT_NO_THROW(sub.validate());
      Triple shift;
      std::int64_t box = 1;
      for (int d = 0; d < desc.spatial_dims; ++d) {
        const auto s = static_cast<std::size_t>(d);
        ASSERT_EQ(sub.output_size(d), r.dims[s].out_end - r.dims[s].out_begin) << "dim " << d;
        std::get<0>(shift)[s] = r.dims[s].out_begin;
        std::get<1>(shift)[s] = r.dims[s].tap_first;
        std::get<2>(shift)[s] = r.dims[s].in_begin;
        box *= r.dims[s].out_end - r.dims[s].out_begin;
      }
      outputs += box;
      products(sub, shift, pieces);
    }
    // Each real product exactly once (a repeated one would be counted twice in every direction).
    EXPECT_EQ(pieces, whole);
    std::int64_t all = 1;
    for (int d = 0; d < desc.spatial_dims; ++d) all *= desc.output_size(d);
    EXPECT_EQ(regions.uncovered_outputs, outputs != all);
    EXPECT_LE(outputs, all);  // the boxes do not overlap: their products are each once above
  }
  // The share of real products, counted.
  std::int64_t total = 1;
  for (int d = 0; d < desc.spatial_dims; ++d)
    total *= desc.output_size(d) * desc.kernel[static_cast<std::size_t>(d)];
  EXPECT_NEAR(detail::valid_tap_fraction(desc),
              static_cast<double>(whole.size()) / static_cast<double>(total), 1e-12)
      << name;
}

TEST(TapRegions, TheRegionsOfEachSplitMakeTheWholeConvolutionsRealProducts) {
  expect_regions_make_the_whole(conv({13, 11}, {3, 3}, {1}, {4}, {4}), "3x3 d4 p4");
  expect_regions_make_the_whole(conv({9, 9}, {3, 3}, {1}, {6}, {6}), "3x3 d6 p6 on 9x9");
  expect_regions_make_the_whole(conv({10, 7}, {3, 2}, {2, 1}, {3, 1}, {2, 3}), "strided");
  expect_regions_make_the_whole(conv({8, 6}, {5, 3}, {3, 2}, {7, 5}, {1, 2}),
                                "padding beyond the kernel's reach");
  expect_regions_make_the_whole(conv({6, 5, 7}, {3, 3, 3}, {1}, {2}, {2}), "3-D");
  expect_regions_make_the_whole(conv({17}, {4}, {1}, {3}, {3}), "1-D");
  ConvDesc asymmetric = conv({12, 9}, {3, 3}, {1}, {0}, {3});
  asymmetric.pad_before = {6, 4, 0};  // causal along the first dim
  asymmetric.pad_after = {0, 2, 0};
  expect_regions_make_the_whole(asymmetric, "asymmetric");
}

TEST(TapRegions, DeepLabsAsppLayersReadRealInputWithTheirShareOfTaps) {
  // Note [tap regions]: 65x65, 3x3, dilation and padding 12 / 24 / 36.
  const std::array<double, 3> expected{0.77, 0.57, 0.40};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::int64_t d = 12 * static_cast<std::int64_t>(i + 1);
    const ConvDesc desc = conv({65, 65}, {3, 3}, {1}, {d}, {d});
    EXPECT_NEAR(detail::valid_tap_fraction(desc), expected[i], 0.005) << "dilation " << d;
    const detail::TapRegions boxes = detail::tap_regions(desc, TapSplit::boxes);
    EXPECT_EQ(boxes.regions.size(), 9u);
    EXPECT_FALSE(boxes.uncovered_outputs);
    EXPECT_EQ(detail::tap_regions(desc, TapSplit::rows).regions.size(), 3u);
  }
  // A dense 3x3 of padding 1 splits too, but reads real input with almost every product.
  const ConvDesc dense = conv({56, 56}, {3, 3}, {1}, {1}, {1});
  EXPECT_GT(detail::valid_tap_fraction(dense), 0.95);
  EXPECT_EQ(detail::tap_regions(dense, TapSplit::boxes).regions.size(), 9u);
  // A 1x1 without padding is one region.
  EXPECT_EQ(
      detail::tap_regions(conv({8, 8}, {1, 1}, {1}, {0}, {1}), TapSplit::boxes).regions.size(), 1u);
}

}  // namespace
}  // namespace dnnx
