#pragma once
// dnnx's tensor-core kernels for the forward, backward data and backward weights passes of
// convolutions with few input channels (cudnn:kernel:narrow:mma): groups 1, at most 8 input
// channels, 1/2/3 spatial dims, any kernel size, stride, per-side padding and dilation,
// channels_last, f16/bf16 storage with f32 accumulation. Plain pointers, sizes and a Queue; no
// cuDNN types. The work split: Note [narrow forward], Note [narrow backward data] and Note
// [narrow weight gradients] in narrow.cu.

#include "backends/cudnn/kernels/queue.hpp"
#include "backends/cudnn/kernels/spatial.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels {

/// The most input channels the kernels take.
inline constexpr int narrow_max_channels = 8;

/// Element type of every tensor.
enum class NarrowType : int { f16 = 1, bf16 = 2 };

/// One convolution in 3 spatial dims (SpatialDims: D, H, W). Tensors are dense and channels_last:
/// diff_src N, D, H, W, C; diff_dst N, out, K; weights K, KD, KH, KW, C.
struct NarrowShape : SpatialDims {
  std::int64_t batch = 1;
  int channels = 1;      ///< C: the input channels, the ones bwd_data produces
  int out_channels = 1;  ///< K: the channels of diff_dst, reduced over
  NarrowType type = NarrowType::f16;
};

/// Why the backward data kernel cannot run `shape` (a static string), or nullptr when it can: at
/// most 8 channels, spatial coordinates below 2^29, a stride product of at most 65535, kernel
/// volume x ceil(K / 32) below 2^26 and N x input positions within 2^31 blocks of 256.
const char* narrow_unsupported(const NarrowShape& shape);

/// Workspace bytes narrow_bwd_data needs: the weights rearranged into the tensor cores' operand
/// layout (Note [narrow weight fragments] in narrow.cu). A function of the shape only.
std::size_t narrow_bwd_data_workspace_bytes(const NarrowShape& shape);

/// diff_src = gradient w.r.t. src, queued on `queue`: a gather, each diff_src element written
/// once by one thread, its sum in a fixed order (deterministic, no atomics). `workspace` holds
/// narrow_bwd_data_workspace_bytes(shape) bytes, aligned to 16. Returns the launch status
/// (cudaErrorInvalidValue when the kernel cannot run the shape).
cudaError_t narrow_bwd_data(const NarrowShape& shape, const void* diff_dst, const void* weights,
                            void* diff_src, void* workspace, const Queue& queue);

/// Why the forward kernel cannot run `shape` (a static string), or nullptr when it can: at most 8
/// channels, spatial coordinates below 2^29, kernel volume x C of at most 192, the input rows
/// that 16 output positions read within its 8 KiB tile (kernel rows x (((16 - 1) x stride + (KW
/// - 1) x dilation + 1) x C + 7, rounded up to a multiple of 8) halves), K within 65535 blocks
/// of 64 and N x output rows within 2^40.
const char* narrow_fwd_unsupported(const NarrowShape& shape);

/// dst = the convolution of src with the weights, queued on `queue` (no workspace; each dst
/// element written once by one thread, its sum in a fixed order: deterministic, overwrite).
/// Returns the launch status (cudaErrorInvalidValue when the kernel cannot run the shape).
cudaError_t narrow_fwd(const NarrowShape& shape, const void* src, const void* weights, void* dst,
                       const Queue& queue);

/// Why the backward weights kernel cannot run `shape` (a static string), or nullptr when it can:
/// at most 8 channels, spatial coordinates below 2^29, kernel volume x C below 2^24, the input
/// rows that 16 output positions read within its 12 KiB tile (kernel rows x (((16 - 1) x stride
/// + (KW - 1) x dilation + 1) x C + 7, rounded up to a multiple of 8) halves, over the kernel
/// rows of a block's 128 columns), K within 65535 blocks of 64 and N x output rows within 2^40.
const char* narrow_bwd_weights_unsupported(const NarrowShape& shape);

/// Workspace bytes narrow_bwd_weights needs: f32 partial sums, K x kernel volume x C per split of
/// the positions (Note [narrow weight gradients] in narrow.cu; at most 256 MiB). A function of the
/// shape only.
std::size_t narrow_bwd_weights_workspace_bytes(const NarrowShape& shape);

/// diff_weights = gradient w.r.t. the weights, queued on `queue` (two launches: the products'
/// partial sums per split, then their fixed-order sum; deterministic, no atomics; overwrites
/// diff_weights). `workspace` holds narrow_bwd_weights_workspace_bytes(shape) bytes, aligned to
/// 16. Returns the launch status (cudaErrorInvalidValue when the kernel cannot run the shape).
cudaError_t narrow_bwd_weights(const NarrowShape& shape, const void* src, const void* diff_dst,
                               void* diff_weights, void* workspace, const Queue& queue);

}  // namespace dnnx::cudnn::kernels
