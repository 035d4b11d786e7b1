#pragma once
// Softmax / log-softmax CUDA kernels of the cudnn backend (candidate cudnn:kernel:softmax):
// plain pointers, sizes and a stream; no cuDNN or dnnx type.
//
// The tensor is `outer` x `axis` x `inner` (element (o, a, i) at (o * axis + a) * inner + i);
// each of the outer * inner groups of `axis` elements is normalized on its own.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels {

/// Storage type of the floating-point tensors (compute is f32).
enum class Element : std::uint8_t { f32, f16, bf16 };

/// The groups of one softmax.
struct SoftmaxShape {
  std::int64_t outer = 1;
  std::int64_t axis = 1;
  std::int64_t inner = 1;
};

/// dst = softmax(src) or log-softmax (max-subtracted). dst may be src (in place). Returns the
/// launch status.
cudaError_t softmax_forward(Element element, bool log, const void* src, void* dst,
                            const SoftmaxShape& shape, cudaStream_t stream);

/// diff_src from the forward's output dst and diff_dst: softmax: dst * (diff_dst - sum(diff_dst *
/// dst)); log-softmax: diff_dst - exp(dst) * sum(diff_dst). Returns the launch status.
cudaError_t softmax_backward(Element element, bool log, const void* dst, const void* diff_dst,
                             void* diff_src, const SoftmaxShape& shape, cudaStream_t stream);

/// Loads the kernels `shape` would launch (CUDA loads modules lazily, on first launch), so that
/// the first timed run shows the kernel, not the loading. Returns the first failure.
cudaError_t softmax_prime(Element element, bool log, const SoftmaxShape& shape);

}  // namespace dnnx::cudnn::kernels
