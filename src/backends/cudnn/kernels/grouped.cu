// dnnx's grouped convolution kernel for small groups (kernels/grouped.hpp).
//
// Note [grouped strips]
// A grouped convolution of few channels per group (ResNeXt's 3x3 layers: 32 groups of 4, 8, 16
// or 32 channels) does A x 9 multiply-adds per output for A input channels per group, too few
// for the tensor cores' tiles, and cuDNN's engines run the groups of 4 at about a quarter of the
// memory rate (ResNeXt-50's l1.conv3x3 in f16: 0.082 ms for 102 MB; docs/benchmarks.md). dnnx's
// kernel does them on the f32 units: a thread owns one group's B output channels in a column
// strip of strips::strip_rows output rows, and loads each input row its windows reach once, as
// the group's A channels in packs of up to 16 bytes, adding it into every output row whose window
// holds it (the depthwise strips' scheme, Note [depthwise column strips] in depthwise.cu). The
// lanes of a warp take consecutive groups, so a warp's loads of a pixel's channels are contiguous.
// The weights are laid out in f32 by a first launch (grouped::weight_source(); bwd_data the
// kernel flipped and each group's in and out channels swapped: the correlation of diff_dst that
// is the gradient at stride 1) and every block copies all groups' weights into shared memory,
// where the lanes read consecutive 16-byte runs; the blocks walk the work in a grid-stride loop,
// so that few copies are made. Each output is written once and summed in a fixed order.

#include "backends/cudnn/kernels/common.cuh"
#include "backends/cudnn/kernels/grouped.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

namespace dnnx::cudnn::kernels {
namespace {

constexpr int block_threads = 256;
// About 8 blocks per SM of a large GPU; more work is grid-strided.
constexpr std::int64_t max_blocks = 1056;
// Every group's weights in shared memory (dynamic, above the 48 KiB default with the attribute).
constexpr std::size_t max_weight_bytes = 96 * 1024;
constexpr std::size_t default_shared_bytes = 48 * 1024;
constexpr int max_devices = 64;
// Bounds as the depthwise kernels' (Note [depthwise kernels]).
constexpr std::int64_t max_coordinate = std::int64_t{1} << 29;
constexpr std::int64_t max_sample = (std::int64_t{1} << 31) - 1;

constexpr int kernel_positions = grouped::taps * grouped::taps;

std::int64_t volume(const int* v) { return static_cast<std::int64_t>(v[0]) * v[1] * v[2]; }

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

std::int64_t items_of(const GroupedShape& shape, bool forward) {
  const strips::Span span = strips::span_of(shape, grouped::taps, forward);
  return shape.groups * span.o_d * span.strips * span.o_w;
}

std::size_t weight_bytes(const GroupedShape& shape) {
  return static_cast<std::size_t>(shape.groups * kernel_positions * shape.in_per_group *
                                  shape.out_per_group) *
         sizeof(float);
}

template <typename T>
struct Convert {
  __device__ __forceinline__ static float widen(T v) { return to_float(v); }
  __device__ __forceinline__ static T narrow(float v) { return from_float<T>(v); }
};

// grouped::weight_source(): the weights laid out in f32.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    lay_weights_kernel(const T* __restrict__ w, float* __restrict__ laid, std::int64_t count,
                       int groups, int a, int b, bool backward) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (i >= count) return;
  laid[i] = to_float(w[grouped::weight_source(i, groups, a, b, backward)]);
}

template <typename T, int A, int B, int P, int S, bool Backward>
__global__ void __launch_bounds__(block_threads)
    strips_kernel(grouped::Geo g, std::int64_t total, const T* __restrict__ a,
                  const float* __restrict__ laid, T* __restrict__ out) {
  extern __shared__ __align__(16) float weights[];
  const int count = g.groups * kernel_positions * A * B;
  for (int i = threadIdx.x; i < count; i += block_threads) weights[i] = laid[i];
  __syncthreads();
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * block_threads;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       index < total; index += step) {
    const std::int64_t n = index / g.items;
    const int item = static_cast<int>(index - n * g.items);
    grouped::strip<T, A, B, P, S, Backward, Convert<T>>(g, item, a + n * g.a_sample, weights,
                                                        out + n * g.o_sample);
  }
}

template <typename T, int C, int P, bool Forward>
cudaError_t launch_strips(const grouped::Geo& g, std::int64_t batch, int stride_h, const T* a,
                          const float* laid, T* out, cudaStream_t stream) {
  const int variant = !Forward ? 0 : stride_h == 1 ? 1 : 2;
  void (*kernel)(grouped::Geo, std::int64_t, const T*, const float*, T*) =
      variant == 0   ? strips_kernel<T, C, C, P, 1, true>
      : variant == 1 ? strips_kernel<T, C, C, P, 1, false>
                     : strips_kernel<T, C, C, P, 2, false>;
  const std::size_t bytes =
      static_cast<std::size_t>(g.groups) * kernel_positions * C * C * sizeof(float);
  if (bytes > default_shared_bytes) {
    // Once per kernel and device, to the most any shape takes: the first launch is a search's
    // or a program's first call, not one inside a caller's graph capture.
    static std::array<std::array<std::atomic<bool>, max_devices>, 3> raised{};
    int device = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status != cudaSuccess) return status;
    if (device < 0 || device >= max_devices) return cudaErrorInvalidDevice;
    std::atomic<bool>& done =
        raised[static_cast<std::size_t>(variant)][static_cast<std::size_t>(device)];
    if (!done.load(std::memory_order_acquire)) {
      status = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(max_weight_bytes));
      if (status != cudaSuccess) return status;
      done.store(true, std::memory_order_release);
    }
  }
  const std::int64_t total = static_cast<std::int64_t>(g.items) * batch;
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((total + block_threads - 1) / block_threads, 1, max_blocks));
  kernel<<<blocks, block_threads, bytes, stream>>>(g, total, a, laid, out);
  return cudaGetLastError();
}

// The weights laid out into `workspace`, then the strips with packs of P channels (16 bytes at
// most; one channel at a time when a tensor is not aligned to it).
template <bool Forward, typename T, int C>
cudaError_t launch_sized(const GroupedShape& shape, const void* a, const void* w, void* out,
                         void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) return cudaErrorInvalidValue;
  const grouped::Geo g = grouped::geo(shape, Forward);
  auto* laid = static_cast<float*>(workspace);
  const std::int64_t count = static_cast<std::int64_t>(g.groups) * kernel_positions * C * C;
  lay_weights_kernel<T>
      <<<static_cast<unsigned>((count + block_threads - 1) / block_threads), block_threads, 0,
         stream>>>(static_cast<const T*>(w), laid, count, g.groups, C, C, !Forward);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  constexpr int P = std::min<int>(C, static_cast<int>(16 / sizeof(T)));
  const T* in = static_cast<const T*>(a);
  T* dst = static_cast<T*>(out);
  if (aligned(a, P * sizeof(T)) && aligned(out, P * sizeof(T)))
    return launch_strips<T, C, P, Forward>(g, shape.batch, shape.stride[1], in, laid, dst, stream);
  return launch_strips<T, C, 1, Forward>(g, shape.batch, shape.stride[1], in, laid, dst, stream);
}

template <bool Forward, typename T>
cudaError_t launch_typed(const GroupedShape& shape, const void* a, const void* w, void* out,
                         void* workspace, cudaStream_t stream) {
  switch (shape.in_per_group) {
    case 4: return launch_sized<Forward, T, 4>(shape, a, w, out, workspace, stream);
    case 8: return launch_sized<Forward, T, 8>(shape, a, w, out, workspace, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <bool Forward>
cudaError_t launch(const GroupedShape& shape, const void* a, const void* w, void* out,
                   void* workspace, cudaStream_t stream) {
  if (grouped_unsupported(shape, Forward) != nullptr) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  switch (shape.type) {
    case GroupedType::f32: return launch_typed<Forward, float>(shape, a, w, out, workspace, stream);
    case GroupedType::f16:
      return launch_typed<Forward, __half>(shape, a, w, out, workspace, stream);
    case GroupedType::bf16:
      return launch_typed<Forward, __nv_bfloat16>(shape, a, w, out, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

grouped::Geo grouped::geo(const GroupedShape& shape, bool forward) {
  Geo g;
  static_cast<strips::Span&>(g) = strips::span_of(shape, taps, forward);
  g.groups = static_cast<int>(shape.groups);
  g.items = static_cast<int>(items_of(shape, forward));
  g.a_sample = shape.groups * (forward ? shape.in_per_group : shape.out_per_group) *
               volume(forward ? shape.input : shape.output);
  g.o_sample = shape.groups * (forward ? shape.out_per_group : shape.in_per_group) *
               volume(forward ? shape.output : shape.input);
  return g;
}

const char* grouped_unsupported(const GroupedShape& shape, bool forward) {
  if (shape.batch < 0) return "the shape has a negative batch";
  if (shape.groups < 2) return "the grouped kernel runs convolutions of 2 or more groups";
  if (shape.in_per_group != shape.out_per_group ||
      (shape.in_per_group != 4 && shape.in_per_group != 8))
    return "the grouped kernel runs groups of 4 or 8 channels, in and out alike";
  if (shape.kernel[0] != 1 || shape.kernel[1] != grouped::taps || shape.kernel[2] != grouped::taps)
    return "the grouped kernel runs 3x3 kernels (of depth 1 in 3-D) only";
  for (int i = 0; i < 3; ++i) {
    const std::int64_t reach = static_cast<std::int64_t>(shape.output[i]) * shape.stride[i];
    if (shape.input[i] < 1 || shape.output[i] < 1 || shape.stride[i] < 1 || shape.dilation[i] < 1 ||
        shape.pad_before[i] < 0)
      return "a spatial size, stride or dilation below 1, or a negative padding";
    if (shape.input[i] > max_coordinate || shape.pad_before[i] > max_coordinate ||
        reach > max_coordinate)
      return "spatial sizes, strides, paddings or kernel extents beyond 2^29";
  }
  if (shape.dilation[1] != 1 || shape.dilation[2] != 1)
    return "the grouped kernel runs kernels without dilation only";
  if (forward && shape.stride[1] > 2)
    return "the grouped kernel runs fwd at a stride of 1 or 2 along H only";
  if (!forward && (shape.stride[1] != 1 || shape.stride[2] != 1))
    return "the grouped kernel runs bwd_data at stride 1 along H and W only";
  const std::int64_t in_channels = shape.groups * shape.in_per_group;
  const std::int64_t out_channels = shape.groups * shape.out_per_group;
  if (in_channels * volume(shape.input) > max_sample ||
      out_channels * volume(shape.output) > max_sample)
    return "a sample of src or dst holds 2^31 elements or more";
  if (items_of(shape, forward) > max_sample) return "a sample needs 2^31 column strips or more";
  if (weight_bytes(shape) > max_weight_bytes)
    return "the grouped kernel keeps every group's weights in shared memory: at most 96 KiB "
           "(groups x 9 x 4 bytes x the channels per group squared)";
  return nullptr;
}

std::size_t grouped_workspace_bytes(const GroupedShape& shape) { return weight_bytes(shape); }

cudaError_t grouped_fwd(const GroupedShape& shape, const void* src, const void* weights, void* dst,
                        void* workspace, cudaStream_t stream) {
  return launch<true>(shape, src, weights, dst, workspace, stream);
}

cudaError_t grouped_bwd_data(const GroupedShape& shape, const void* diff_dst, const void* weights,
                             void* diff_src, void* workspace, cudaStream_t stream) {
  return launch<false>(shape, diff_dst, weights, diff_src, workspace, stream);
}

}  // namespace dnnx::cudnn::kernels
