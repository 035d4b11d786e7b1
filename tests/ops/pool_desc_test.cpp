// PoolDesc: output sizes (PyTorch's, ceil mode included), from_shapes, key / hash / equality,
// repro lines, the case table's names and inputs.

#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace dnnx::test {
namespace {

PoolDesc one_d(std::int64_t input, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
               bool ceil) {
  return PoolDesc::from_shapes({1, 1, input}, {kernel}, {stride}, {pad}, PoolMode::max, ceil);
}

// Output sizes printed by torch 1.13's F.max_pool1d(torch.zeros(1, 1, n), k, s, p, ceil_mode=c).
TEST(PoolDesc, OutputSizesArePyTorchs) {
  struct Row {
    std::int64_t input, kernel, stride, pad;
    bool ceil;
    std::int64_t expected;
  };
  for (const Row& row :
       std::vector<Row>{{112, 3, 2, 1, false, 56},
                        {112, 3, 2, 1, true, 57},
                        {5, 2, 2, 1, true, 3},  // last window would start in padding
                        {10, 4, 3, 0, true, 3},
                        {7, 3, 2, 0, true, 3},
                        {10, 3, 2, 0, true, 5},
                        {6, 2, 2, 1, true, 4},
                        {4, 4, 1, 2, false, 5},
                        {1, 1, 1, 0, true, 1},
                        {5, 3, 3, 1, true, 2}}) {
    const PoolDesc desc = one_d(row.input, row.kernel, row.stride, row.pad, row.ceil);
    EXPECT_EQ(desc.output_size(0), row.expected) << desc;
    EXPECT_EQ(desc.dst_dims(), (Dims{1, 1, row.expected})) << desc;
  }
}

// With a dilation: PyTorch's pooling_output_shape, (input + 2 pad - dilation (kernel - 1) - 1) /
// stride + 1, rounded up in ceil mode unless the last window would start in the back padding.
TEST(PoolDesc, DilatedOutputSizesArePyTorchs) {
  struct Row {
    std::int64_t input, kernel, stride, pad, dilation;
    bool ceil;
    std::int64_t expected, extent;
  };
  for (const Row& row : std::vector<Row>{{112, 3, 2, 1, 2, false, 55, 5},
                                         {112, 3, 2, 1, 2, true, 56, 5},
                                         {20, 3, 2, 2, 2, true, 11, 5},
                                         {11, 3, 1, 3, 3, false, 11, 7},
                                         {7, 2, 2, 1, 2, false, 4, 3},
                                         {6, 2, 2, 1, 2, true, 4, 3},
                                         {10, 4, 3, 0, 3, false, 1, 10},
                                         {5, 1, 1, 0, 9, false, 5, 1}}) {
    const PoolDesc desc = PoolDesc::from_shapes({1, 1, row.input}, {row.kernel}, {row.stride},
                                                {row.pad}, {row.dilation}, PoolMode::max, row.ceil);
    EXPECT_EQ(desc.output_size(0), row.expected) << desc;
    EXPECT_EQ(desc.effective_kernel(0), row.extent) << desc;
  }
  // The last of the 11 windows of (20, 3, 2, 2, 2, ceil) holds positions 18, 20 and 22; the
  // padded input is [-2, 22): one position past it.
  const PoolDesc ceil = PoolDesc::from_shapes({1, 1, 20}, {3}, {2}, {2}, {2}, PoolMode::max, true);
  EXPECT_EQ(ceil.overhang(0), 1);
}

TEST(PoolDesc, OverhangIsTheCeilModeReachPastThePaddedInput) {
  EXPECT_EQ(one_d(10, 3, 2, 0, true).overhang(0), 1);  // windows start 0,2,4,6,8: 8+3 = 11 > 10
  EXPECT_EQ(one_d(10, 3, 2, 0, false).overhang(0), 0);
  EXPECT_EQ(one_d(7, 3, 2, 0, true).overhang(0), 0);
  PoolDesc asym = one_d(10, 4, 3, 0, true);
  asym.pad_after = {1, 0, 0};  // 4 windows: starts 0,3,6,9; 9+4 = 13 > 11
  EXPECT_EQ(asym.output_size(0), 4);
  EXPECT_EQ(asym.overhang(0), 2);
}

TEST(PoolDesc, FromShapesSpreadsListsAndDefaultsTheStrideToTheKernel) {
  const PoolDesc desc = PoolDesc::from_shapes({2, 3, 8, 10, 12}, {2, 3, 4});
  EXPECT_EQ(desc.spatial_dims, 3);
  EXPECT_EQ(desc.batch, 2);
  EXPECT_EQ(desc.channels, 3);
  EXPECT_EQ(desc.stride, (std::array<std::int64_t, 3>{2, 3, 4}));
  EXPECT_EQ(desc.src_dims(), (Dims{2, 3, 8, 10, 12}));
  EXPECT_EQ(desc.dst_dims(), (Dims{2, 3, 4, 3, 3}));

  const PoolDesc spread =
      PoolDesc::from_shapes({1, 4, 9, 9}, {3}, {2}, {1}, PoolMode::avg_exclude_pad, true,
                            DType::bf16, Layout::channels_last);
  EXPECT_EQ(spread.kernel[1], 3);
  EXPECT_EQ(spread.stride[0], 2);
  EXPECT_EQ(spread.pad_after[1], 1);
  EXPECT_TRUE(spread.ceil_mode);
  EXPECT_EQ(spread.mode, PoolMode::avg_exclude_pad);
  EXPECT_EQ(spread.dtype, DType::bf16);
  EXPECT_EQ(spread.layout, Layout::channels_last);
}

TEST(PoolDesc, KeyHashAndEqualityCoverEveryField) {
  const PoolDesc base = PoolDesc::from_shapes({2, 3, 9, 9}, {3}, {2}, {1});
  std::vector<PoolDesc> variants(13, base);
  variants[0].batch = 3;
  variants[1].channels = 4;
  variants[2].input[1] = 10;
  variants[3].kernel[0] = 2;
  variants[4].stride[1] = 1;
  variants[5].pad_before[0] = 0;
  variants[6].pad_after[1] = 0;
  variants[7].ceil_mode = true;
  variants[8].mode = PoolMode::avg_include_pad;
  variants[9].dtype = DType::f16;
  variants[10].layout = Layout::channels_last;
  variants[11].indices = true;
  variants[12].dilation[1] = 2;
  std::set<std::string> keys{base.key()};
  for (const PoolDesc& variant : variants) {
    EXPECT_NE(variant, base);
    EXPECT_TRUE(keys.insert(variant.key()).second) << "duplicate key " << variant.key();
  }
  PoolDesc copy = base;
  EXPECT_EQ(copy, base);
  EXPECT_EQ(copy.hash(), base.hash());
  std::ostringstream printed;
  printed << base;
  EXPECT_EQ(printed.str(), base.key());
  EXPECT_EQ(base.key(), "pool2d max n=2 c=3 in=9,9 k=3,3 s=2,2 pb=1,1 pa=1,1 ceil=0 f32 nchw");
  // Descs without indices keep their keys (and cache files their entries).
  EXPECT_EQ(variants[11].key(), base.key() + " indices");
  EXPECT_NE(variants[11].hash(), base.hash());
  // Dense descs keep their keys too; a dilation shows before ceil.
  EXPECT_EQ(variants[12].key(),
            "pool2d max n=2 c=3 in=9,9 k=3,3 s=2,2 pb=1,1 pa=1,1 d=1,2 ceil=0 f32 nchw");
  EXPECT_NE(variants[12].hash(), base.hash());
  // Only the spatial dims' entries count.
  PoolDesc unused = base;
  unused.dilation[2] = 5;
  EXPECT_EQ(unused.key(), base.key());
  EXPECT_EQ(unused.hash(), base.hash());
}

TEST(PoolDesc, ReproIsTheCliLine) {
  PoolDesc desc = PoolDesc::from_shapes({2, 3, 9, 9}, {3}, {2}, {1}, PoolMode::avg_include_pad);
  EXPECT_EQ(desc.repro(Direction::fwd),
            "dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 1 --mode "
            "avg_include_pad --dtype f32 --layout nchw --direction fwd");
  desc.pad_after = {0, 1, 0};
  desc.ceil_mode = true;
  desc.layout = Layout::channels_last;
  EXPECT_EQ(desc.repro(Direction::bwd_data),
            "dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad-before 1 --pad-after "
            "0,1 --ceil --mode avg_include_pad --dtype f32 --layout nhwc --direction bwd");
  PoolDesc indices = PoolDesc::from_shapes({2, 3, 9, 9}, {3}, {2}, {1});
  indices.indices = true;
  EXPECT_EQ(indices.repro(Direction::bwd_data),
            "dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 1 --mode max --indices "
            "--dtype f32 --layout nchw --direction bwd");
  const PoolDesc dilated =
      PoolDesc::from_shapes({2, 3, 9, 9}, {3}, {2}, {1}, {2, 1}, PoolMode::max, /*ceil_mode=*/true);
  EXPECT_EQ(dilated.repro(Direction::fwd),
            "dnnx profile pool --input 2x3x9x9 --kernel 3 --stride 2 --pad 1 --dilation 2,1 --ceil "
            "--mode max --dtype f32 --layout nchw --direction fwd");
  // An invalid desc still prints (it is the context of the error that rejects it).
  PoolDesc bad = desc;
  bad.spatial_dims = 7;
  EXPECT_NE(bad.repro().find("spatial_dims=7"), std::string::npos);
}

TEST(PoolDesc, InputPlaneIsTheProductOfTheInputSizes) {
  EXPECT_EQ(PoolDesc::from_shapes({2, 3, 9, 7}, {3}).input_plane(), 63);
  EXPECT_EQ(PoolDesc::from_shapes({2, 3, 4, 5, 6}, {2}).input_plane(), 120);
  EXPECT_EQ(PoolDesc::from_shapes({2, 3, 17}, {2}).input_plane(), 17);
}

TEST(PoolDesc, ModeNames) {
  for (const PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad, PoolMode::avg_exclude_pad})
    EXPECT_EQ(parse_pool_mode(to_string(mode)), mode);
  EXPECT_EQ(parse_pool_mode("avg"), PoolMode::avg_include_pad);
  EXPECT_EQ(parse_pool_mode("AVG_EXCLUDE"), PoolMode::avg_exclude_pad);
}

TEST(PoolCases, NamesAreUniqueValidAndDescsValid) {
  std::set<std::string> names;
  for (const PoolCase& c : pool_edge_cases()) {
    EXPECT_TRUE(is_valid_pool_case_name(c.name)) << c.name;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_NO_THROW(c.desc.validate()) << c.name;
  }
  EXPECT_EQ(names.size(), pool_edge_shapes().size() * 24);
  for (const PoolCase& c : pool_benchmark_cases(64)) {
    EXPECT_EQ(c.desc.dst_dims(), (Dims{64, 64, 56, 56})) << c.name;
  }
}

TEST(PoolDesc, FromShapesTakesADilation) {
  const PoolDesc desc =
      PoolDesc::from_shapes({2, 3, 8, 10, 12}, {2}, {1}, {1}, {3, 2, 1}, PoolMode::avg_exclude_pad);
  EXPECT_EQ(desc.dilation, (std::array<std::int64_t, 3>{3, 2, 1}));
  EXPECT_EQ(desc.dst_dims(), (Dims{2, 3, 7, 10, 13}));
  EXPECT_EQ(PoolDesc::from_shapes({2, 3, 8}, {2}).dilation, (std::array<std::int64_t, 3>{1, 1, 1}));
  // A dilation larger than the input is fine while every window holds an input element
  // (positions -2 and 2 of the input 0..2, then 0 and 4).
  EXPECT_EQ(PoolDesc::from_shapes({1, 1, 3}, {2}, {2}, {2}, {4}, PoolMode::max).output_size(0), 2);
}

// The table covers what it promises: 1/2/3-D, ceil mode with and without overhang, the ceil
// start rule, per-side padding, batch 1, strides above and below the kernel, dilation in 1/2/3-D
// (with ceil mode, per-side padding and padding past half the kernel).
TEST(PoolCases, TableCoversTheEdges) {
  bool dims[4] = {}, dilated_dims[4] = {}, ceil_overhang = false, ceil_no_overhang = false,
       start_rule = false, asymmetric = false, batch1 = false, gaps = false, overlap = false,
       dilated_ceil = false, dilated_asymmetric = false, dilated_wide_pad = false;
  for (const PoolShape& shape : pool_edge_shapes()) {
    const PoolDesc& d = shape.desc;
    dims[d.spatial_dims] = true;
    batch1 |= d.batch == 1;
    asymmetric |= d.pad_before != d.pad_after;
    for (int i = 0; i < d.spatial_dims; ++i) {
      const auto s = static_cast<std::size_t>(i);
      gaps |= d.stride[s] > d.kernel[s];
      overlap |= d.stride[s] < d.kernel[s];
      if (d.dilation[s] > 1) {
        dilated_dims[d.spatial_dims] = true;
        dilated_ceil |= d.ceil_mode;
        dilated_asymmetric |= d.pad_before[s] != d.pad_after[s];
        dilated_wide_pad |= d.pad_before[s] > d.kernel[s] / 2;
      }
      if (!d.ceil_mode) continue;
      (d.overhang(i) > 0 ? ceil_overhang : ceil_no_overhang) = true;
      const std::int64_t rounded_up = (d.input[s] + d.pad_before[s] + d.pad_after[s] -
                                       d.effective_kernel(i) + d.stride[s] - 1) /
                                          d.stride[s] +
                                      1;
      start_rule |= d.output_size(i) < rounded_up;
    }
  }
  EXPECT_TRUE(dims[1] && dims[2] && dims[3]);
  EXPECT_TRUE(dilated_dims[1] && dilated_dims[2] && dilated_dims[3]);
  EXPECT_TRUE(dilated_ceil);
  EXPECT_TRUE(dilated_asymmetric);
  EXPECT_TRUE(dilated_wide_pad);
  EXPECT_TRUE(ceil_overhang);
  EXPECT_TRUE(ceil_no_overhang);
  EXPECT_TRUE(start_rule);
  EXPECT_TRUE(asymmetric);
  EXPECT_TRUE(batch1);
  EXPECT_TRUE(gaps);
  EXPECT_TRUE(overlap);
}

// Note [tie-free inputs]: no window of a max case holds two equal values.
TEST(PoolCases, MaxInputsAreTieFreeInEveryWindow) {
  for (const PoolCase& c : pool_edge_cases()) {
    if (c.desc.mode != PoolMode::max) continue;
    const PoolDesc& d = c.desc;
    const std::vector<float> values = pool_src(d, 7).to_f32();
    std::array<std::int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0},
        dil{1, 1, 1};
    const int missing = 3 - d.spatial_dims;
    for (int i = 0; i < d.spatial_dims; ++i) {
      const auto a = static_cast<std::size_t>(missing + i), b = static_cast<std::size_t>(i);
      in[a] = d.input[b], out[a] = d.output_size(i), k[a] = d.kernel[b], s[a] = d.stride[b];
      p[a] = d.pad_before[b], dil[a] = d.dilation[b];
    }
    const std::int64_t plane = in[0] * in[1] * in[2];
    for (std::int64_t q = 0; q < d.batch * d.channels; ++q) {
      for (std::int64_t od = 0; od < out[0]; ++od)
        for (std::int64_t oh = 0; oh < out[1]; ++oh)
          for (std::int64_t ow = 0; ow < out[2]; ++ow) {
            std::set<float> seen;
            std::int64_t count = 0;
            for (std::int64_t jz = 0; jz < k[0]; ++jz)
              for (std::int64_t jy = 0; jy < k[1]; ++jy)
                for (std::int64_t jx = 0; jx < k[2]; ++jx) {
                  const std::int64_t z = od * s[0] - p[0] + jz * dil[0];
                  const std::int64_t y = oh * s[1] - p[1] + jy * dil[1];
                  const std::int64_t x = ow * s[2] - p[2] + jx * dil[2];
                  if (z < 0 || y < 0 || x < 0 || z >= in[0] || y >= in[1] || x >= in[2]) continue;
                  ++count;
                  seen.insert(
                      values[static_cast<std::size_t>(q * plane + (z * in[1] + y) * in[2] + x)]);
                }
            ASSERT_GT(count, 0) << c.name;
            ASSERT_EQ(static_cast<std::int64_t>(seen.size()), count) << c.name;
          }
    }
  }
}

}  // namespace
}  // namespace dnnx::test
