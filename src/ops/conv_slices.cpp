#include "ops/conv_slices.hpp"

#include "ops/dispatch.hpp"

#include <cstdint>
#include <numeric>
#include <optional>

namespace dnnx::detail {

// Note [conv probe slices]
// A probe runs a candidate on a slice of the problem whose time is a lower bound of the full
// run's (Note [probing slow candidates] in src/tune/select.cpp). The batch is the natural slice:
// the outermost dimension in both layouts, so its first samples are a dense prefix of every
// activation. A batch under 16 has no slice worth the probe (probe_batches), and U-Net's batch of
// 1 had none at all: every slow candidate got a full run. cuDNN's FFT candidates on its fp32 3x3
// layers of 128-256 channels at 138-140 pixels take 240-310 ms a run on an H200 (the best 0.36-
// 0.73 ms) and about 950 ms of host time each (they ask for 17-35 GB of workspace): two of them
// made most of the 1.8-2.1 s searches of those layers (docs/benchmarks.md, "Search time of long
// runs"). So a convolution of a smaller batch is sliced along its output's outermost spatial
// dim (depth in 3-D, height in 2-D, width in 1-D): the first O' of its O output rows, O' from
// probe_batches(O), with the input rows those read and the same padding, as long as that leaves
// at least one input row. Such a slice computes a part of the full problem's outputs from a part
// of its inputs, so the full run does at least its work; an FFT's transforms are over the smaller
// image, where a slice of the batch leaves the weights' transform whole. Its activations are dense
// tensors no larger than the full ones, viewed on the prefix of each buffer: with one sample in
// NHWC exactly the first rows, otherwise rows of other channels or samples, whose values a timing
// does not read.
// A convolution of 16 groups or more is sliced along its groups first: the first G' of its G
// groups (G' from probe_batches(G)), their input and output channels, the batch and the image
// whole. The depthwise layers of EfficientNet and MobileNetV2 in f16 spent their 1.6-2.2 s
// searches in probes on slices of the batch, the costliest cuDNN's engines 1, 3, 4 and 50 at
// 80-160 ms each; engines 1 and 4 queue thousands of kernels a call there, one per group or so,
// as many on any slice of the batch as on the whole (docs/benchmarks.md). A slice of the groups
// is as small a share of the work and of those kernels. Its channel counts stay multiples of 8
// where the full ones are (G' rounded up to a multiple of what keeps them so), so that the kernels
// that want aligned channels run the slice too. Its weights, like its activations, are the prefix
// of their buffers.
// A convolution of few groups has no small group slice: the first depthwise layer of MobileNetV2
// and EfficientNet-B0 (32 groups at 112x112, f16) is sliced at 8 of its groups at least, a quarter
// of the problem, where cuDNN's engines 22, 25, 34 and 67 took 95-156 ms a probe in bwd_weights
// (the best 0.09 ms in full): with group slices alone those searches went from 1.1 to 3 s (on an
// H200; docs/benchmarks.md, "Probe slices of few groups"). So where the smallest group
// slice is over 1/few_groups_share of the groups, it is sliced along the batch first: its first
// probe_batches(N) samples, then the whole batch, then the larger group slices. (Not for every
// grouped convolution: a smaller first slice adds levels that a fast candidate climbs before its
// full run.)
constexpr std::int64_t few_groups_share = 16;

std::vector<ConvSlice> conv_probe_slices(const ConvDesc& desc) {
  std::vector<ConvSlice> slices;
  const std::vector<std::int64_t> batches = probe_batches(desc.batch);
  if (desc.groups >= min_sliced_groups) {
    const std::int64_t in_per_group = desc.in_channels / desc.groups;
    const std::int64_t out_per_group = desc.out_channels / desc.groups;
    std::int64_t step = 1;  // G' is a multiple of it
    for (const auto& [per_group, channels] :
         {std::pair{in_per_group, desc.in_channels}, {out_per_group, desc.out_channels}}) {
      if (channels % 8 == 0) step = std::lcm(step, 8 / std::gcd<std::int64_t>(8, per_group));
    }
    auto add = [&](std::int64_t groups, std::int64_t batch) {
      ConvSlice& slice = slices.emplace_back();
      slice.desc = desc;
      slice.desc.groups = groups;
      slice.desc.in_channels = groups * in_per_group;
      slice.desc.out_channels = groups * out_per_group;
      slice.desc.batch = batch;
      slice.fraction = static_cast<double>(groups) / static_cast<double>(desc.groups) *
                       static_cast<double>(batch) / static_cast<double>(desc.batch);
    };
    std::vector<std::int64_t> group_counts;
    for (std::int64_t groups : probe_batches(desc.groups)) {
      groups = (groups + step - 1) / step * step;
      if (groups < desc.groups && (group_counts.empty() || groups > group_counts.back()))
        group_counts.push_back(groups);
    }
    if (!group_counts.empty()) {
      // Few groups: the smallest group slice is over the batch's slices first.
      if (group_counts.front() * few_groups_share > desc.groups) {
        for (const std::int64_t batch : batches) add(group_counts.front(), batch);
      }
      for (const std::int64_t groups : group_counts) add(groups, desc.batch);
      return slices;
    }
  }
  if (!batches.empty()) {
    for (const std::int64_t batch : batches) {
      ConvSlice& slice = slices.emplace_back();
      slice.desc = desc;
      slice.desc.batch = batch;
      slice.fraction = static_cast<double>(batch) / static_cast<double>(desc.batch);
    }
    return slices;
  }
  if (desc.spatial_dims < 1) return slices;
  const std::int64_t rows = desc.output_size(0);
  const std::int64_t reach = desc.dilation[0] * (desc.kernel[0] - 1) + 1;
  for (const std::int64_t kept : probe_batches(rows)) {
    // The padded input rows the first `kept` outputs read, less the padding on both sides.
    const std::int64_t input =
        (kept - 1) * desc.stride[0] + reach - desc.pad_before[0] - desc.pad_after[0];
    if (input < 1 || input >= desc.input[0]) continue;
    ConvSlice& slice = slices.emplace_back();
    slice.desc = desc;
    slice.desc.input[0] = input;
    slice.fraction = static_cast<double>(kept) / static_cast<double>(rows);
  }
  return slices;
}

}  // namespace dnnx::detail
