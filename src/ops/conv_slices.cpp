#include "ops/conv_slices.hpp"

#include "ops/dispatch.hpp"

#include <cstdint>
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
std::vector<ConvSlice> conv_probe_slices(const ConvDesc& desc) {
  std::vector<ConvSlice> slices;
  const std::vector<std::int64_t> batches = probe_batches(desc.batch);
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
