#pragma once
// Copies between a tensor and a padded or cropped twin: its channel-padded one (Note [channel
// padding] in src/backends/cudnn/conv_padded.cpp), its input padded after some spatial dims (Note
// [stacked folds] in src/backends/cudnn/conv_stacked.cpp); on plain device pointers. No cuDNN
// types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::channel_pad {

/// A dense row-major box of five axes (outermost first; leading axes of 1 for fewer), e.g.
/// 1 x 1 x N x C x (H*W) for a channels-first tensor or 1 x 1 x 1 x (N*H*W) x C for a
/// channels-last one.
struct Box {
  std::int64_t dims[5] = {1, 1, 1, 1, 1};
  std::int64_t count() const { return dims[0] * dims[1] * dims[2] * dims[3] * dims[4]; }
};

/// dst[i][j][k][l][m] = src[i][j][k][l][m] where the index lies inside `src_box`, else 0, for
/// every element of `dst_box` (each dst axis may be longer than src's: padding, or shorter:
/// slicing).
/// `element_bytes` is 2 (f16, bf16) or 4 (f32). Queues the work on `stream` and returns the launch
/// status (cudaErrorInvalidValue for another element size).
cudaError_t copy(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                 int element_bytes, cudaStream_t stream);

/// A box of a dense tensor of `dims` (memory order, as Box) whose first element is at `origin`.
struct Region {
  Box dims;
  std::int64_t origin[5] = {0, 0, 0, 0, 0};
};

/// The element types add_region() adds.
enum class Element { f32, f16, bf16 };

/// dst's region = src's region, both of `extents` (each within its tensor). `element_bytes` is 2
/// or 4. Returns the launch status (cudaErrorInvalidValue for another element size).
cudaError_t copy_region(const void* src, const Region& src_region, void* dst,
                        const Region& dst_region, const Box& extents, int element_bytes,
                        cudaStream_t stream);

/// dst's region += src's region, in f32 and rounded once to `element`.
cudaError_t add_region(const void* src, const Region& src_region, void* dst,
                       const Region& dst_region, const Box& extents, Element element,
                       cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::channel_pad
