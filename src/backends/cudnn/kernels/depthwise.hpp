#pragma once
// dnnx's own depthwise convolution kernels (cudnn:kernel:depthwise:*): groups == in_channels, a
// channel multiplier M = out_channels / groups >= 1, 1/2/3 spatial dims, any kernel size, stride,
// per-side padding and dilation, channels_first or channels_last, f32/f16/bf16 storage with f32
// accumulation, every direction. Plain pointers, sizes and a Queue; no cuDNN types. The layouts
// and the work split: Note [depthwise kernels] in depthwise.cu.

#include "backends/cudnn/kernels/queue.hpp"
#include "backends/cudnn/kernels/spatial.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels {

/// Element type of every tensor (f32 accumulation for all three).
enum class DepthwiseType : int { f32 = 0, f16 = 1, bf16 = 2 };

/// The kernel variants; each is a candidate of its own (Note [depthwise variants] in depthwise.cu).
enum class DepthwiseVariant : int {
  /// Every depthwise desc: runtime kernel sizes, one element (channel) per thread.
  direct = 0,
  /// 2-D kernels of 3x3, 5x5 or 7x7 positions (3-D ones of depth 1 too), their loops unrolled
  /// at compile time.
  unrolled = 1,
  /// channels_last, multiplier 1. fwd and bwd_data: even channel counts, packs of 2-8 channels
  /// per thread (up to 16 bytes per access), 3x3, 5x5 and 7x7 kernels unrolled. bwd_weights: 2-D
  /// 3x3, 5x5 and 7x7 kernels, any channel count, packs of 4, 2 or 1 channels walking segments
  /// of output rows.
  channel_packs = 2,
  /// channels_first, fwd and bwd_data: 2-D kernels of 3x3, 5x5 or 7x7 positions (3-D ones of
  /// depth 1 too) without dilation; fwd with a stride of 1 or 2 along H (any along W), bwd_data
  /// with a stride of 1 along H and W. A thread computes a column strip of output rows, reusing
  /// each row it loads for every output row whose window holds it.
  strips = 3,
};

/// The direction a variant runs, for depthwise_unsupported().
enum class DepthwiseDirection : int { fwd = 0, bwd_data = 1, bwd_weights = 2 };

/// One depthwise convolution in 3 spatial dims (SpatialDims: D, H, W). Output channel o reads input
/// channel o / multiplier. Tensors are dense: src N, C, D, H, W (channels_last: N, D, H, W, C); dst
/// N, O, out (channels_last: N, out, O) with O = C * multiplier; weights O x kernel volume in
/// either layout (O, 1, KD, KH, KW and O, KD, KH, KW, 1 are the same bytes).
struct DepthwiseShape : SpatialDims {
  std::int64_t batch = 1;
  std::int64_t channels = 1;    ///< C = groups
  std::int64_t multiplier = 1;  ///< M
  bool channels_last = false;
  DepthwiseType type = DepthwiseType::f32;
};

/// Why `variant` cannot run `shape` in `direction` (a static string), or nullptr when it can.
/// Every variant needs each sample's src and dst below 2^31 elements and spatial coordinates below
/// 2^29; the others' domains are in DepthwiseVariant.
const char* depthwise_unsupported(const DepthwiseShape& shape, DepthwiseVariant variant,
                                  DepthwiseDirection direction);

/// Workspace bytes depthwise_bwd_weights needs (f32 partial sums of its split reduction; 0 when
/// the reduction is not split). A function of the shape and variant only.
std::size_t depthwise_bwd_weights_workspace_bytes(const DepthwiseShape& shape,
                                                  DepthwiseVariant variant);

/// Workspace bytes depthwise_fwd and depthwise_bwd_data need (channel_packs: the weights
/// transposed, Note [depthwise weight taps] in depthwise.cu; 0 for the other variants).
std::size_t depthwise_weight_taps_bytes(const DepthwiseShape& shape, DepthwiseVariant variant);

/// dst = conv(src, weights), queued on `queue`; `workspace` holds
/// depthwise_weight_taps_bytes(shape, variant) bytes, aligned to 16. Returns the launch status
/// (cudaErrorInvalidValue when the variant cannot run the shape).
cudaError_t depthwise_fwd(const DepthwiseShape& shape, DepthwiseVariant variant, const void* src,
                          const void* weights, void* dst, void* workspace, const Queue& queue);

/// diff_src = gradient w.r.t. src, queued on `queue`: a gather, each diff_src element written
/// once, summing its windows in a fixed order (deterministic, no atomics). `workspace` as for
/// depthwise_fwd.
cudaError_t depthwise_bwd_data(const DepthwiseShape& shape, DepthwiseVariant variant,
                               const void* diff_dst, const void* weights, void* diff_src,
                               void* workspace, const Queue& queue);

/// diff_weights = gradient w.r.t. the weights (overwritten), queued on `queue`: per weight, a
/// reduction over N and the output positions in a fixed order (block reductions, then a second
/// pass over the splits' partial sums in `workspace`); deterministic, no atomics. `workspace`
/// holds depthwise_bwd_weights_workspace_bytes(shape, variant) bytes.
cudaError_t depthwise_bwd_weights(const DepthwiseShape& shape, DepthwiseVariant variant,
                                  const void* src, const void* diff_dst, void* diff_weights,
                                  void* workspace, const Queue& queue);

}  // namespace dnnx::cudnn::kernels
