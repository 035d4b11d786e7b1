#pragma once
// The epilogue pass of the cudnn backend's unfused conv_fused candidates ("unfused:<conv id>"):
// dst = act(conv_out + bias + residual_scale * residual) in one pass over dense device tensors,
// on plain pointers. No cuDNN types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::conv_fused {

/// Storage type of every tensor; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// One epilogue: dst and conv_out are N x C x spatial (channels_last false) or N x spatial x C
/// (channels_last true), dense; bias has C elements; residual has dst's dims and layout.
struct Shape {
  std::int64_t batch = 1;
  std::int64_t channels = 1;
  std::int64_t spatial = 1;  ///< output positions per image (D x H x W)
  bool channels_last = false;
  bool relu = false;            ///< max(x, 0) last (NaN stays NaN); otherwise the identity
  float residual_scale = 1.0f;  ///< applied to residual
  Element element = Element::f32;
};

/// dst = act(conv_out + bias[c] + residual_scale * residual), each element read and written by
/// one thread (so conv_out may be dst, and residual may be dst). `bias` and `residual` may be
/// null (not added). Queues the work on `stream` and returns the launch status.
cudaError_t epilogue(const Shape& shape, const void* conv_out, const void* bias,
                     const void* residual, void* dst, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::conv_fused
