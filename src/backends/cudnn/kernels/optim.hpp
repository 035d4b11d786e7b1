#pragma once
// The optimizer and loss-scaling kernels of the cudnn backend (src/backends/cudnn/optim.cpp):
// multi-tensor (one launch for every tensor of a call) and per-tensor (one launch per tensor)
// forms of the same element code (core/optim_math.hpp). Plain device pointers; no cuDNN types.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::optim {

/// Storage type of parameters and gradients; master weights, state and arithmetic are f32.
enum class Element : int { f32, f16, bf16 };

/// The device pointers of one tensor of a call; null where the call has no such list.
struct TensorRef {
  void* param = nullptr;       ///< sgd, adam: the parameter; unscale: the gradient (updated)
  const void* grad = nullptr;  ///< sgd, adam
  float* master = nullptr;     ///< f32 master copy
  float* state[3] = {};        ///< sgd: {momentum buffer}; adam: {exp_avg, exp_avg_sq, max}
  std::int64_t numel = 0;
};

/// How the tensors of a call are launched.
enum class Launch : int {
  multi_tensor,  ///< one launch for all tensors, their table in the kernel's parameters
  per_tensor,    ///< one launch per tensor
};

/// Most non-empty tensors one multi-tensor launch takes (the table in its parameters: CUDA 12.1's
/// 32 KB kernel-parameter limit).
constexpr int max_tensors = 384;

/// The device scalars of a step (Note [optimizer step count]).
struct StepScalars {
  float* step = nullptr;              ///< incremented unless found_inf is set
  const float* grad_scale = nullptr;  ///< divides every gradient when not null
  const float* found_inf = nullptr;   ///< skips the step when not null and nonzero
};

struct SgdCall {
  Element element = Element::f32;
  bool momentum = false, nesterov = false, maximize = false;
  double lr = 0, momentum_value = 0, dampening = 0, weight_decay = 0;
  StepScalars scalars;
};

struct AdamCall {
  Element element = Element::f32;
  bool amsgrad = false, decoupled = false, maximize = false;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  StepScalars scalars;
};

struct UnscaleCall {
  Element element = Element::f32;
  bool reset_found_inf = false;
  bool from_scale = false;
  float* found_inf = nullptr;
  const float* inv_scale = nullptr;
};

/// One SGD step over `count` tensors: the step count's update, then the update of every element.
/// Queues the work on `stream` and returns the first failed launch's status. A multi-tensor
/// launch needs at most max_tensors tensors with elements.
cudaError_t sgd(const SgdCall& call, const TensorRef* tensors, int count, Launch launch,
                cudaStream_t stream);
/// One Adam step (as sgd).
cudaError_t adam(const AdamCall& call, const TensorRef* tensors, int count, Launch launch,
                 cudaStream_t stream);
/// torch's non-finite check and unscale over `count` gradients (TensorRef::param).
cudaError_t unscale(const UnscaleCall& call, const TensorRef* tensors, int count, Launch launch,
                    cudaStream_t stream);
/// torch._amp_update_scale_ on device scalars (one thread).
cudaError_t update_scale(float* scale, std::int32_t* growth_tracker, const float* found_inf,
                         double growth_factor, double backoff_factor, std::int32_t growth_interval,
                         cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::optim
