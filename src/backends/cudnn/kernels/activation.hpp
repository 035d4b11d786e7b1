#pragma once
// The cudnn backend's own activation kernels (candidates "cudnn:kernel:act..."): every activation
// kind forward and backward, in place or not, on plain device pointers. No cuDNN types; the host
// code of the backend translates its desc into these parameters.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dnnx::cudnn::kernels::activation {

/// Storage type of every tensor of the call; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// The function, in the order of dnnx::ActivationKind.
enum class Function : int { identity, relu, clipped_relu, tanh, sigmoid, elu, swish };

/// What the kernels compute.
struct Params {
  Function function = Function::relu;
  Element element = Element::f32;
  float alpha = 1.0f;    ///< elu: scale of the negative branch
  float ceiling = 6.0f;  ///< clipped relu: the upper clip
};

/// Which forward tensor the backward pass reads.
enum class Saved : int { src, dst };

/// Whether `function` has a derivative as a function of dst (Note [backward from dst]); elu only
/// with alpha >= 0.
bool backward_from_dst(const Params& params);

/// dst[i] = f(src[i]) for i in [0, count). dst may equal src (in place); no other overlap. Queues
/// the work on `stream` and returns the launch status.
cudaError_t forward(const Params& params, const void* src, void* dst, std::int64_t count,
                    cudaStream_t stream);

/// diff_src[i] = diff_dst[i] * f'(x_i), f' computed from `saved` (the forward src or dst, as
/// `which` says). diff_src may equal diff_dst (in place); no other overlap. Queues the work on
/// `stream` and returns the launch status.
cudaError_t backward(const Params& params, Saved which, const void* saved, const void* diff_dst,
                     void* diff_src, std::int64_t count, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::activation
