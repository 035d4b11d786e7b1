// Note [conv probe slices] (src/ops/conv_slices.cpp): the smaller convolutions a search probes a
// candidate on, smallest first: slices of the groups (16 or more; few of them over slices of the
// batch first), of the batch, or of the output's outermost spatial dim for a batch under 16.

#include "ops/conv_slices.hpp"

#include "ops/dispatch.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace {

using dnnx::ConvDesc;
using dnnx::Layout;
using dnnx::detail::conv_probe_slices;
using dnnx::detail::ConvSlice;

std::int64_t elements(const dnnx::Dims& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

// Every slice is a convolution of the same kind whose activations fit in the full ones' buffers
// (a dense prefix view), whose fraction is its share of the output, larger than the one before,
// and whose fields other than the sliced one are the full desc's.
void expect_slices_of(const ConvDesc& desc, const std::vector<ConvSlice>& slices) {
  double before = 0;
  for (const ConvSlice& slice : slices) {
    SCOPED_TRACE(slice.desc.key());
    EXPECT_NO_THROW(slice.desc.validate());
    EXPECT_LE(elements(slice.desc.src_dims()), elements(desc.src_dims()));
    EXPECT_LE(elements(slice.desc.dst_dims()), elements(desc.dst_dims()));
    // The weights keep their shape, or are a prefix of theirs where the groups are sliced.
    if (slice.desc.groups == desc.groups) {
      EXPECT_EQ(slice.desc.weights_dims(), desc.weights_dims());
    } else {
      EXPECT_LT(elements(slice.desc.weights_dims()), elements(desc.weights_dims()));
    }
    EXPECT_DOUBLE_EQ(slice.fraction, static_cast<double>(elements(slice.desc.dst_dims())) /
                                         static_cast<double>(elements(desc.dst_dims())));
    EXPECT_GT(slice.fraction, before);
    EXPECT_LE(slice.fraction, 0.5);
    before = slice.fraction;
    ConvDesc same = slice.desc;
    same.batch = desc.batch;
    same.input[0] = desc.input[0];
    same.groups = desc.groups;
    same.in_channels = desc.in_channels;
    same.out_channels = desc.out_channels;
    EXPECT_EQ(same.key(), desc.key());
  }
}

TEST(ConvProbeSlices, BatchesOfSixteenOrMoreSliceTheBatch) {
  const ConvDesc desc = ConvDesc::from_shapes({32, 64, 56, 56}, {64, 64, 3, 3}, {1}, {1});
  const std::vector<ConvSlice> slices = conv_probe_slices(desc);
  ASSERT_EQ(slices.size(), 3U);
  const std::vector<std::int64_t> expected = dnnx::detail::probe_batches(32);
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].desc.batch, expected[i]);
    EXPECT_EQ(slices[i].desc.input, desc.input);
  }
  expect_slices_of(desc, slices);
}

// EfficientNet-B0's s6.dw5 (5x5 depthwise, 1152 channels at 7x7, batch 128): the first 8, 16,
// 40, 144 and 576 groups (probe_batches(1152) = 2, 9, 36, 144, 576, rounded up to multiples of
// 8), the batch and the image whole.
TEST(ConvProbeSlices, ManyGroupsSliceTheGroups) {
  const ConvDesc desc = ConvDesc::from_shapes({128, 1152, 7, 7}, {1152, 1, 5, 5}, {1}, {2}, {1},
                                              1152, dnnx::DType::f16, Layout::channels_last);
  const std::vector<ConvSlice> slices = conv_probe_slices(desc);
  const std::vector<std::int64_t> groups{8, 16, 40, 144, 576};
  ASSERT_EQ(slices.size(), groups.size());
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].desc.groups, groups[i]);
    EXPECT_EQ(slices[i].desc.in_channels, groups[i]);
    EXPECT_EQ(slices[i].desc.out_channels, groups[i]);
    EXPECT_EQ(slices[i].desc.batch, 128);
    EXPECT_EQ(slices[i].desc.input, desc.input);
    EXPECT_DOUBLE_EQ(slices[i].fraction, static_cast<double>(groups[i]) / 1152.0);
  }
  expect_slices_of(desc, slices);
}

// The channel counts of a group slice stay multiples of 8 where the full ones are: 4 channels a
// group (a ResNeXt 3x3: 32 groups) slice by 2 groups; a channel multiplier of 2 (32 groups, 64
// outputs) by 4 groups for its outputs and 8 for its inputs; odd counts (97 depthwise channels)
// as probe_batches gives them. Under 16 groups the batch is sliced.
TEST(ConvProbeSlices, GroupSlicesKeepChannelsAligned) {
  const ConvDesc resnext =
      ConvDesc::from_shapes({64, 128, 56, 56}, {128, 4, 3, 3}, {1}, {1}, {1}, 32);
  std::vector<ConvSlice> slices = conv_probe_slices(resnext);
  ASSERT_EQ(slices.size(), 3U);  // probe_batches(32) = 1, 4, 16; 2 groups are a sixteenth
  EXPECT_EQ(slices[0].desc.groups, 2);
  EXPECT_EQ(slices[1].desc.groups, 4);
  EXPECT_EQ(slices[2].desc.groups, 16);
  for (const ConvSlice& slice : slices) {
    EXPECT_EQ(slice.desc.in_channels % 8, 0);
    EXPECT_EQ(slice.desc.batch, 64);
  }
  expect_slices_of(resnext, slices);

  // 1, 4, 16 rounded up to 8, 8, 16; 8 of 32 groups are over a sixteenth, so the 8 groups are
  // over probe_batches(16) = 2, 8 samples first, then the whole batch.
  const ConvDesc multiplier =
      ConvDesc::from_shapes({16, 32, 28, 28}, {64, 1, 3, 3}, {1}, {1}, {1}, 32);
  slices = conv_probe_slices(multiplier);
  const std::vector<std::pair<std::int64_t, std::int64_t>> groups_batch{
      {8, 2}, {8, 8}, {8, 16}, {16, 16}};
  ASSERT_EQ(slices.size(), groups_batch.size());
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].desc.groups, groups_batch[i].first);
    EXPECT_EQ(slices[i].desc.batch, groups_batch[i].second);
    EXPECT_EQ(slices[i].desc.out_channels, 2 * groups_batch[i].first);
  }
  expect_slices_of(multiplier, slices);

  const ConvDesc odd = ConvDesc::from_shapes({32, 97, 20, 20}, {97, 1, 3, 3}, {1}, {1}, {1}, 97);
  slices = conv_probe_slices(odd);
  ASSERT_EQ(slices.size(), 3U);  // probe_batches(97) = 3, 12, 48
  EXPECT_EQ(slices[0].desc.groups, 3);
  EXPECT_EQ(slices[2].desc.groups, 48);
  expect_slices_of(odd, slices);

  const ConvDesc few = ConvDesc::from_shapes({32, 64, 28, 28}, {64, 8, 3, 3}, {1}, {1}, {1}, 8);
  slices = conv_probe_slices(few);
  ASSERT_EQ(slices.size(), 3U);
  for (const ConvSlice& slice : slices) EXPECT_EQ(slice.desc.groups, 8);
  EXPECT_EQ(slices[0].desc.batch, 1);
  expect_slices_of(few, slices);
}

// The first depthwise layer of MobileNetV2 and EfficientNet-B0 (32 channels at 112x112, batch
// 128): its smallest group slice (8 groups) is a quarter of the problem, so it is first sliced
// along the batch (probe_batches(128) = 1, 4, 16, 64 samples), down to 1/512 of the problem.
TEST(ConvProbeSlices, FewGroupsSliceTheBatchOfTheSmallestGroupSlice) {
  const ConvDesc desc = ConvDesc::from_shapes({128, 32, 112, 112}, {32, 1, 3, 3}, {1}, {1}, {1}, 32,
                                              dnnx::DType::f16, Layout::channels_last);
  const std::vector<ConvSlice> slices = conv_probe_slices(desc);
  const std::vector<std::pair<std::int64_t, std::int64_t>> groups_batch{
      {8, 1}, {8, 4}, {8, 16}, {8, 64}, {8, 128}, {16, 128}};
  ASSERT_EQ(slices.size(), groups_batch.size());
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].desc.groups, groups_batch[i].first);
    EXPECT_EQ(slices[i].desc.in_channels, groups_batch[i].first);
    EXPECT_EQ(slices[i].desc.batch, groups_batch[i].second);
    EXPECT_EQ(slices[i].desc.input, desc.input);
  }
  EXPECT_DOUBLE_EQ(slices.front().fraction, 1.0 / 512);
  expect_slices_of(desc, slices);
}

// U-Net's e3.conv2 (batch 1, 138x138, no padding: 136 output rows): the first 1, 4, 17 and 68
// output rows, from 3, 6, 19 and 70 input rows.
TEST(ConvProbeSlices, SmallBatchesSliceTheOutputRows) {
  const ConvDesc desc = ConvDesc::from_shapes({1, 256, 138, 138}, {256, 256, 3, 3});
  const std::vector<ConvSlice> slices = conv_probe_slices(desc);
  ASSERT_EQ(slices.size(), 4U);
  const std::vector<std::int64_t> rows{1, 4, 17, 68}, inputs{3, 6, 19, 70};
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].desc.batch, 1);
    EXPECT_EQ(slices[i].desc.output_size(0), rows[i]);
    EXPECT_EQ(slices[i].desc.input[0], inputs[i]);
    EXPECT_EQ(slices[i].desc.input[1], 138);
  }
  expect_slices_of(desc, slices);
}

// Padding, stride and dilation keep their values: the slice reads the padding the full problem's
// first rows read (and as much after its last rows).
TEST(ConvProbeSlices, PaddingStrideAndDilationAreKept) {
  ConvDesc desc = ConvDesc::from_shapes({8, 32, 65, 65}, {32, 32, 3, 3}, {2}, {12}, {12}, 1,
                                        dnnx::DType::f32, Layout::channels_last);
  const std::int64_t rows = desc.output_size(0);  // (65 + 24 - 25) / 2 + 1 = 33
  ASSERT_EQ(rows, 33);
  std::vector<ConvSlice> slices = conv_probe_slices(desc);
  ASSERT_EQ(slices.size(), 3U);  // 1, 4 and 16 of 33 rows
  EXPECT_EQ(slices[0].desc.output_size(0), 1);
  EXPECT_EQ(slices[0].desc.input[0], 25 - 24);
  EXPECT_EQ(slices[1].desc.output_size(0), 4);
  EXPECT_EQ(slices[1].desc.input[0], 3 * 2 + 25 - 24);
  EXPECT_EQ(slices[2].desc.output_size(0), 16);
  for (const ConvSlice& slice : slices) {
    EXPECT_EQ(slice.desc.pad_before, desc.pad_before);
    EXPECT_EQ(slice.desc.pad_after, desc.pad_after);
    EXPECT_EQ(slice.desc.stride, desc.stride);
    EXPECT_EQ(slice.desc.dilation, desc.dilation);
    EXPECT_EQ(slice.desc.layout, Layout::channels_last);
  }
  expect_slices_of(desc, slices);

  // Asymmetric padding.
  desc.pad_after[0] = 3;
  slices = conv_probe_slices(desc);
  ASSERT_FALSE(slices.empty());
  for (const ConvSlice& slice : slices) EXPECT_EQ(slice.desc.pad_after[0], 3);
  expect_slices_of(desc, slices);
}

// A slice whose output rows need less input than its padding supplies has no input row left: it
// is not made (a dilated kernel padded beyond its reach).
TEST(ConvProbeSlices, NoSliceWithoutAnInputRow) {
  const ConvDesc desc = ConvDesc::from_shapes({1, 8, 20, 20}, {8, 8, 3, 3}, {1}, {30});
  ASSERT_EQ(desc.output_size(0), 78);  // 20 + 60 - 2
  const std::vector<ConvSlice> slices = conv_probe_slices(desc);
  // 2, 9 and 39 output rows read 4, 11 and 41 padded rows, fewer than the 60 of padding.
  EXPECT_TRUE(slices.empty());
}

// 3-D slices the depth, 1-D the width; an output of fewer than 16 rows is not sliced.
TEST(ConvProbeSlices, OutermostSpatialDimAndSmallOutputs) {
  const ConvDesc video = ConvDesc::from_shapes({2, 64, 16, 56, 56}, {128, 64, 3, 3, 3}, {1}, {1});
  const std::vector<ConvSlice> depth = conv_probe_slices(video);
  ASSERT_EQ(depth.size(), 2U);  // 2 and 8 of 16 frames
  EXPECT_EQ(depth[0].desc.input[0], 2);
  EXPECT_EQ(depth[0].desc.input[1], 56);
  EXPECT_EQ(depth[1].desc.output_size(0), 8);
  expect_slices_of(video, depth);

  const ConvDesc wave = ConvDesc::from_shapes({4, 16, 1000}, {16, 16, 5}, {1}, {2});
  const std::vector<ConvSlice> width = conv_probe_slices(wave);
  ASSERT_EQ(width.size(), 5U);  // 1, 7, 31, 125 and 500 of 1000
  EXPECT_EQ(width.back().desc.output_size(0), 500);
  expect_slices_of(wave, width);

  EXPECT_TRUE(
      conv_probe_slices(ConvDesc::from_shapes({1, 8, 15, 64}, {8, 8, 3, 3}, {1}, {1})).empty());
  EXPECT_TRUE(conv_probe_slices(ConvDesc::from_shapes({1, 8, 7, 7}, {8, 8, 1, 1})).empty());
}

}  // namespace
