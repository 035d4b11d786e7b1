// One forward convolution through dnnx: a context, tensors, a selection policy, and a report of
// the algorithm that ran next to every candidate the backend offered.
//
//   conv_example            # auto backend (cudnn if a GPU is usable, else cpu, else reference)
//   DNNX_BACKEND=reference conv_example

#include <dnnx/dnnx.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iostream>
#include <vector>

int main() {
  try {
    // DNNX_BACKEND, DNNX_DEVICE, DNNX_TYPE and the tuning variables apply; unset, it is "auto".
    dnnx::Context context = dnnx::Context::from_env();
    // Time every forward candidate and keep the fastest, among those needing at most 64 MiB of
    // scratch memory (this replaces DNNX_CONV_FWD_ALGO and DNNX_WORKSPACE_LIMIT, if set).
    context.tune().fwd = dnnx::AlgoPolicy::exhaustive();
    context.tune().workspace_limit = std::size_t{64} << 20;
    std::cout << "context: " << context.describe() << "\n";

    // A ResNet-50 3x3 layer: src 1x64x56x56, weights 64x64x3x3, stride 1, pad 1.
    const dnnx::ConvDesc desc = dnnx::ConvDesc::from_shapes(
        {1, 64, 56, 56}, {64, 64, 3, 3}, /*stride=*/{1}, /*pad=*/{1}, /*dilation=*/{1},
        /*groups=*/1, context.dtype());
    // Inputs are written on the host and copied to wherever the context runs (a GPU for cudnn).
    // Products of 0.25 * 0.5 sum exactly in every dtype, so the result is known: an interior
    // output sums 64 channels x 3 x 3 taps of 0.125.
    auto filled = [&](const dnnx::Dims& dims, float value) {
      dnnx::Tensor host = dnnx::Tensor::empty(dims, desc.dtype, desc.layout);
      host.fill(value);
      dnnx::Tensor tensor = dnnx::Tensor::empty(dims, desc.dtype, desc.layout, context.allocator());
      dnnx::copy(host, tensor);
      return tensor;
    };
    const dnnx::Tensor src = filled(desc.src_dims(), 0.25F);
    const dnnx::Tensor weights = filled(desc.weights_dims(), 0.5F);
    dnnx::Tensor dst =
        dnnx::Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout, context.allocator());

    const auto choice = dnnx::conv_fwd(context, desc, src, weights, dst);
    std::cout << "conv " << desc << "\n"
              << "algorithm: " << choice->algo.id << " (" << choice->algo.name << "), "
              << choice->time_ms << " ms median, " << choice->candidates_timed
              << " candidates timed\n";

    dnnx::Tensor host_dst = dnnx::Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
    dnnx::copy(dst, host_dst);
    const std::vector<float> values = host_dst.to_f32();
    const std::int64_t width = desc.output_size(1);
    const float interior = values[static_cast<std::size_t>(28 * width + 28)];
    const float expected = 64 * 9 * 0.125F;
    std::cout << "dst[0, 0, 28, 28] = " << interior << " (expected " << expected << ")\n\n";

    std::cout << dnnx::format_algo_table(dnnx::conv_list(context, desc, dnnx::Direction::fwd));
    return std::fabs(interior - expected) <= 1e-3F * expected ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "conv_example: " << error.what() << "\n";
    return 1;
  }
}
