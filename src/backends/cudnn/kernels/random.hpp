#pragma once
// The cudnn backend's own seeded kernels (candidates "cudnn:kernel:fill" and
// "cudnn:kernel:dropout") and the pattern fill behind Tensor::zeros / Tensor::fill on a device,
// on plain device pointers. The draws are core/philox.hpp's, the same code as the reference and
// cpu backends (Note [counter-based random numbers]). No cuDNN types.

#include "core/philox.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::random {

/// Storage type of the tensors; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// Fills the `count` elements of a dense tensor laid out as `geometry` with `params`' values
/// drawn from Philox blocks offset, offset + 1, ... of `seed` (one thread per block of four
/// elements). Queues the work on `stream` and returns the launch status (cudaSuccess for
/// count 0, which launches nothing).
cudaError_t fill(Element element, void* dst, const detail::random::Geometry& geometry,
                 std::int64_t count, const detail::random::DrawParams& params, std::uint64_t seed,
                 std::uint64_t offset, cudaStream_t stream);

/// Training forward: draws the keep mask of the `count` elements (Note [dropout mask]) into
/// `mask` (ceil(count / 32) 32-bit words, bit i % 32 of word i / 32 for logical index i) and
/// writes dst = src * (kept ? scale : 0). One thread per mask word. src and dst are dense tensors
/// laid out as `geometry`. Queues the work on `stream` and returns the launch status.
cudaError_t dropout_forward(Element element, const void* src, void* dst, std::uint32_t* mask,
                            const detail::random::Geometry& geometry, std::int64_t count, float p,
                            float scale, std::uint64_t seed, std::uint64_t offset,
                            cudaStream_t stream);

/// Backward: diff_src = diff_dst * (kept ? scale : 0), the mask as dropout_forward wrote it.
cudaError_t dropout_backward(Element element, const void* diff_dst, void* diff_src,
                             const std::uint32_t* mask, const detail::random::Geometry& geometry,
                             std::int64_t count, float scale, cudaStream_t stream);

/// Writes `pattern` (its low `element_bytes` bytes: 1, 2, 4 or 8) into each of `count`
/// consecutive elements at `dst` (aligned to `element_bytes`). Queues the work on `stream` and
/// returns the launch status (cudaErrorInvalidValue for another element size).
cudaError_t fill_pattern(void* dst, std::size_t count, std::size_t element_bytes,
                         std::uint64_t pattern, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::random
