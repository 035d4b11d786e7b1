#pragma once
// The per-element formulas of the optimizer and loss-scaling ops (include/dnnx/ops/optim.hpp),
// written once for every backend: the reference instantiates them on double, the cpu loops and the
// CUDA kernels (nvcc includes this header) on float. Plain arithmetic only: no dnnx types.
//
// Note [optimizer arithmetic order]
// The operations and their order follow torch.optim's single-tensor code (torch 1.13), one
// rounding per tensor operation there being one rounding per operation here in float:
// exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1) is m * beta1 + (1 - beta1) * g, the scalars
// 1 - beta1, lr / (1 - beta1^t), sqrt(1 - beta2^t) and 1 - lr * weight_decay are formed in double
// (Python floats) and then converted once, as torch converts a Python scalar for an f32 tensor.
// Results therefore agree with PyTorch's f32 CPU optimizers to a few ulps per step (not bitwise:
// the compiler may contract a multiply-add into an FMA).

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DNNX_OPTIM_HD __host__ __device__ __forceinline__
#else
#define DNNX_OPTIM_HD inline
#endif

namespace dnnx::detail::optim {

// The math functions on the host (std::) and on the device (CUDA's overloads).
#if defined(__CUDA_ARCH__)
DNNX_OPTIM_HD float root(float x) { return sqrtf(x); }
DNNX_OPTIM_HD double root(double x) { return sqrt(x); }
DNNX_OPTIM_HD double power(double x, double y) { return pow(x, y); }
DNNX_OPTIM_HD bool finite(float x) { return isfinite(x); }
#else
DNNX_OPTIM_HD float root(float x) { return std::sqrt(x); }
DNNX_OPTIM_HD double root(double x) { return std::sqrt(x); }
DNNX_OPTIM_HD double power(double x, double y) { return std::pow(x, y); }
DNNX_OPTIM_HD bool finite(float x) { return std::isfinite(x); }
#endif

/// The flags of an SGD step (the desc's).
struct SgdFlags {
  bool momentum = false;
  bool nesterov = false;
  bool maximize = false;
};

/// The scalars of one SGD call in the arithmetic type T.
template <typename T>
struct SgdScalars {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool weight_decay_nonzero;

  static SgdScalars make(double lr, double momentum, double dampening, double weight_decay) {
    return {static_cast<T>(lr), static_cast<T>(momentum), static_cast<T>(1.0 - dampening),
            static_cast<T>(weight_decay), weight_decay != 0.0};
  }
};

/// One element of an SGD step: returns the new parameter, updates *buf (when flags.momentum).
/// `first` is the step count's first step (the buffer takes the gradient).
template <typename T>
DNNX_OPTIM_HD T sgd_element(T p, T g, T* buf, bool first, SgdFlags flags, const SgdScalars<T>& s) {
  if (flags.maximize) g = -g;
  if (s.weight_decay_nonzero) g = g + s.weight_decay * p;
  if (flags.momentum) {
    const T b = first ? g : *buf * s.momentum + s.one_minus_dampening * g;
    *buf = b;
    g = flags.nesterov ? g + s.momentum * b : b;
  }
  return p - s.lr * g;
}

/// The flags of an Adam step.
struct AdamFlags {
  bool amsgrad = false;
  bool decoupled = false;
  bool maximize = false;
};

/// The scalars of one Adam call at step count `step` (after the increment), in T.
template <typename T>
struct AdamScalars {
  T beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, decay, neg_step_size,
      bias_correction2_sqrt;
  bool weight_decay_nonzero;

  DNNX_OPTIM_HD static AdamScalars make(double lr, double beta1, double beta2, double eps,
                                        double weight_decay, double step) {
    const double bias_correction1 = 1.0 - power(beta1, step);
    const double bias_correction2 = 1.0 - power(beta2, step);
    AdamScalars s;
    s.beta1 = static_cast<T>(beta1);
    s.beta2 = static_cast<T>(beta2);
    s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
    s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
    s.eps = static_cast<T>(eps);
    s.weight_decay = static_cast<T>(weight_decay);
    s.decay = static_cast<T>(1.0 - lr * weight_decay);
    s.neg_step_size = static_cast<T>(-(lr / bias_correction1));
    s.bias_correction2_sqrt = static_cast<T>(root(bias_correction2));
    s.weight_decay_nonzero = weight_decay != 0.0;
    return s;
  }
};

/// One element of an Adam step: returns the new parameter, updates *m and *v, and writes *v_max:
/// with amsgrad the running maximum, otherwise v itself (scratch the caller discards). Stored
/// unconditionally, so that a loop over elements has no branch around a store and vectorises.
template <typename T>
DNNX_OPTIM_HD T adam_element(T p, T g, T* m, T* v, T* v_max, AdamFlags flags,
                             const AdamScalars<T>& s) {
  if (flags.maximize) g = -g;
  if (flags.decoupled) {
    p = p * s.decay;
  } else if (s.weight_decay_nonzero) {
    g = g + s.weight_decay * p;
  }
  const T new_m = *m * s.beta1 + s.one_minus_beta1 * g;
  T new_v = *v * s.beta2 + s.one_minus_beta2 * (g * g);
  *m = new_m;
  *v = new_v;
  if (flags.amsgrad) new_v = *v_max > new_v ? *v_max : new_v;
  *v_max = new_v;
  const T denom = root(new_v) / s.bias_correction2_sqrt + s.eps;
  return p + s.neg_step_size * (new_m / denom);
}

/// torch's unscale of one gradient element (in float): the value times inv_scale, or unchanged
/// when inv_scale is 1.
template <typename T>
DNNX_OPTIM_HD T unscale_element(T g, T inv_scale) {
  return inv_scale == T(1) ? g : g * inv_scale;
}

/// GradScaler.unscale_'s inverse of a scale: (float)(1 / (double)scale).
DNNX_OPTIM_HD float inverse_scale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

/// torch._amp_update_scale_ on plain values.
DNNX_OPTIM_HD void update_scale(float* scale, std::int32_t* growth_tracker, float found_inf,
                                double growth_factor, double backoff_factor,
                                std::int32_t growth_interval) {
  if (found_inf != 0.0f) {
    *scale = static_cast<float>(*scale * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const std::int32_t successful = *growth_tracker + 1;
  if (successful == growth_interval) {
    const auto grown = static_cast<float>(*scale * growth_factor);
    if (finite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}

}  // namespace dnnx::detail::optim
