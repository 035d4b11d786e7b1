#pragma once
// The tensors of one matrix-multiply call (Note [op dispatch]); the op layer has validated them
// against the desc: dims, dtype, density, device, no overlap of an output with anything else.

#include <dnnx/ops/matmul.hpp>
#include <dnnx/tensor.hpp>

namespace dnnx::detail {

/// Which tensors are set depends on the direction (bias and diff_bias only when desc.bias):
///   fwd:         a, b, bias          -> dst
///   bwd_data:    diff_dst, b         -> diff_a
///   bwd_weights: a, diff_dst         -> diff_b, diff_bias
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

  /// The arguments of `direction` from tensors named by their shapes: `a` is diff_a for
  /// bwd_data, `b` diff_b and `bias` diff_bias for bwd_weights, `dst` diff_dst for both
  /// backwards (scratch tensors and benchmarks that run every direction on one set). `bias` is
  /// used only when `with_bias`.
  static MatmulArgs by_shape(Direction direction, bool with_bias, Tensor& a, Tensor& b,
                             Tensor& bias, Tensor& dst) {
    MatmulArgs args;
    switch (direction) {
      case Direction::fwd:
        args.a = &a, args.b = &b, args.dst = &dst;
        if (with_bias) args.bias = &bias;
        break;
      case Direction::bwd_data: args.diff_dst = &dst, args.b = &b, args.diff_a = &a; break;
      case Direction::bwd_weights:
        args.a = &a, args.diff_dst = &dst, args.diff_b = &b;
        if (with_bias) args.diff_bias = &bias;
        break;
      case Direction::fwd_training: break;  // not a matmul direction
    }
    return args;
  }
};

}  // namespace dnnx::detail
