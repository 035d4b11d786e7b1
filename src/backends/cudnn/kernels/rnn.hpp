#pragma once
// The cudnn backend's kernels for the recurrent layer's dropout between layers (Note [rnn
// dropout], Note [cudnn rnn dropout] in src/backends/cudnn/rnn.cpp), on plain device pointers.
// The draws are core/philox.hpp's, the code the reference and cpu backends run. No cuDNN types.

#include "backends/cudnn/kernels/random.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::rnn {

using Element = random::Element;

/// Draws the keep bits of logical elements 0 .. count - 1 (Note [rnn dropout]): bit i % 32 of
/// 32-bit word i / 32 of `mask` is 1 when word i % 4 of Philox block offset + i / 4 of `seed` is
/// kept by dropout's rule with probability `p` of dropping; ceil(count / 32) words, bits past
/// count 0. One thread per word. Queues the work on `stream` and returns the launch status
/// (cudaSuccess for count <= 0, which launches nothing).
cudaError_t draw_masks(std::uint32_t* mask, std::int64_t count, float p, std::uint64_t seed,
                       std::uint64_t offset, cudaStream_t stream);

/// One layer boundary of T steps of N sequences of C features: for each element (t, n, c),
/// dst = src * (kept ? scale : 0) where kept is bit first + (t * N + n) * C + c of `mask`; the
/// element lies at (t * N + n) * C + c of src and dst, or (n * T + t) * C + c when batch_first.
/// src may be dst. Queues the work on `stream` and returns the launch status (cudaSuccess when
/// there is no element).
cudaError_t apply_mask(Element element, const void* src, void* dst, const std::uint32_t* mask,
                       std::int64_t first, std::int64_t T, std::int64_t N, std::int64_t C,
                       bool batch_first, float scale, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::rnn
