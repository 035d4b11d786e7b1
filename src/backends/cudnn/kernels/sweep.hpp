#pragma once
// Kernels that empty the L2 cache: read a block of device memory larger than L2, so that L2 holds
// only that block's lines, then invalidate those lines (Note [cache after timing] in
// src/backends/cudnn/backend.cpp). No cuDNN types.

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dnnx::cudnn::kernels::sweep {

/// Queues on `stream` a read of `bytes` bytes at `block` (128-byte aligned; the values are never
/// used, so the memory need not be initialised), then the invalidation of the block's L2 lines
/// (sm_80 and later). The block's contents are undefined afterwards. Returns the launch status.
cudaError_t empty_l2(const void* block, std::size_t bytes, int sm_count, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::sweep
