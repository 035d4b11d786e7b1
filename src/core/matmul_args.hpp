#pragma once
// The tensors of one matrix-multiply call (Note [op dispatch]); the op layer has validated them
// against the desc: dims, dtype, density, device, no overlap of an output with anything else.

#include <dnnx/ops/matmul.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dnnx::detail {

// Note [matmul aux]
// What a matmul's fwd_training keeps for the backward of its activation, the same layout on every
// backend and from every candidate (so that any backward candidate reads any forward's state):
//   relu       "dnnx:matmul_relu_mask": bit i % 32 of 32-bit word i / 32 is 1 when pre > 0 for
//              dst's element i (logical row-major index over batch x m x n); relu'(pre) is that
//              bit. relu(pre) > 0 exactly when pre > 0, so the mask can be taken from dst.
//   gelu_tanh  "dnnx:matmul_gelu_pre": pre itself, in the desc's dtype, laid out as dst.
// cuBLASLt's own relu aux (CUBLASLT_EPILOGUE_RELU_AUX) is an opaque bit-mask with a leading
// dimension of a multiple of 128 bits, so the cudnn backend does not use it; its GELU aux is
// pre in the output type with a leading dimension of a multiple of 8 elements: the gelu layout
// above when n % 8 == 0 (src/backends/cudnn/matmul.cpp).

/// The saved-state format of a desc's activation (Note [matmul aux]); empty for none.
inline const char* matmul_aux_format(const MatmulDesc& desc) {
  switch (desc.activation) {
    case MatmulActivation::relu: return "dnnx:matmul_relu_mask";
    case MatmulActivation::gelu_tanh: return "dnnx:matmul_gelu_pre";
    case MatmulActivation::none: break;
  }
  return "";
}
/// Bytes of that state: whole 32-bit words of mask bits, or dst's elements in dtype.
inline std::size_t matmul_aux_bytes(const MatmulDesc& desc) {
  const auto count = static_cast<std::size_t>(desc.batch * desc.m * desc.n);
  switch (desc.activation) {
    case MatmulActivation::relu: return (count + 31) / 32 * 4;
    case MatmulActivation::gelu_tanh: return count * size_of(desc.dtype);
    case MatmulActivation::none: break;
  }
  return 0;
}

/// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in T (f64 on the reference
/// backend, f32 on the cpu backend; the cudnn kernels have their own device copy).
template <typename T>
T gelu_tanh(T x) {
  const T inner = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}
/// d gelu_tanh / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2), t the
/// tanh above.
template <typename T>
T gelu_tanh_grad(T x) {
  const T c = T(0.7978845608028654);
  const T t = std::tanh(c * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3 * 0.044715) * x * x);
}

/// Which tensors are set depends on the direction (bias and diff_bias only when desc.bias; state
/// only with an activation):
///   fwd:          a, b, bias          -> dst
///   fwd_training: a, b, bias          -> dst, state (filled)
///   bwd_data:     diff_dst, b, state  -> diff_a
///   bwd_weights:  a, diff_dst, state  -> diff_b, diff_bias
/// An output is read first unless desc.beta is 0.
struct MatmulArgs {
  const Tensor* a = nullptr;         ///< fwd, bwd_weights (a_dims)
  const Tensor* b = nullptr;         ///< fwd, bwd_data (b_dims)
  const Tensor* bias = nullptr;      ///< fwd with desc.bias (bias_dims)
  const Tensor* diff_dst = nullptr;  ///< bwd_data, bwd_weights (dst_dims)
  Tensor* dst = nullptr;             ///< fwd (dst_dims)
  Tensor* diff_a = nullptr;          ///< bwd_data (a_dims)
  Tensor* diff_b = nullptr;          ///< bwd_weights (b_dims)
  Tensor* diff_bias = nullptr;       ///< bwd_weights with desc.bias (bias_dims)
  /// fwd_training: filled (sized by the dispatcher for the candidate that runs); backward: read
  /// only (the public calls take it const). Null without an activation.
  SavedState* state = nullptr;

  /// The arguments of `direction` from tensors named by their shapes: `a` is diff_a for
  /// bwd_data, `b` diff_b and `bias` diff_bias for bwd_weights, `dst` diff_dst for both
  /// backwards (scratch tensors and benchmarks that run every direction on one set). `bias` is
  /// used only when `with_bias`.
  static MatmulArgs by_shape(Direction direction, bool with_bias, Tensor& a, Tensor& b,
                             Tensor& bias, Tensor& dst) {
    MatmulArgs args;
    switch (direction) {
      case Direction::fwd:
      case Direction::fwd_training:
        args.a = &a, args.b = &b, args.dst = &dst;
        if (with_bias) args.bias = &bias;
        break;
      case Direction::bwd_data: args.diff_dst = &dst, args.b = &b, args.diff_a = &a; break;
      case Direction::bwd_weights:
        args.a = &a, args.diff_dst = &dst, args.diff_b = &b;
        if (with_bias) args.diff_bias = &bias;
        break;
    }
    return args;
  }
};

}  // namespace dnnx::detail
