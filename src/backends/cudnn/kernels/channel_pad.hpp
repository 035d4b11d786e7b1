#pragma once
// Copies between a tensor and its channel-padded twin (Note [channel padding] in
// src/backends/cudnn/conv_padded.cpp), on plain device pointers. No cuDNN types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::channel_pad {

/// A dense row-major box of three axes (outermost first), e.g. N x C x (H*W) for a channels-first
/// tensor or 1 x (N*H*W) x C for a channels-last one.
struct Box {
  std::int64_t dims[3] = {1, 1, 1};
  std::int64_t count() const { return dims[0] * dims[1] * dims[2]; }
};

/// dst[i][j][k] = src[i][j][k] where the index lies inside `src_box`, else 0, for every element of
/// `dst_box` (each dst axis may be longer than src's: padding, or shorter: slicing).
/// `element_bytes` is 2 (f16, bf16) or 4 (f32). Queues the work on `stream` and returns the launch
/// status (cudaErrorInvalidValue for another element size).
cudaError_t copy(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                 int element_bytes, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::channel_pad
