#pragma once
/// \file
/// Matrix multiply, batched and strided-batched, with transposes and a bias: a linear layer's
/// forward (dst = src W^T + bias) and both its backward passes, as BLAS's GEMM and cuBLASLt's
/// cublasLtMatmul compute them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {

/// What a matrix multiply computes. Plain data: comparable, hashable, printable; it is the cache
/// key, the error context and the test-case name.
///
///   fwd:         dst    = alpha * op(a) op(b) + beta * dst (+ bias on every row)
///   bwd_data:    diff_a = alpha * diff_dst op(b)^T + beta * diff_a   (stored as a is: the
///                transpose of that product when transpose_a)
///   bwd_weights: diff_b = alpha * op(a)^T diff_dst + beta * diff_b   (stored as b is; summed over
///                the batch when broadcast_b), and with `bias` also
///                diff_bias = sum of diff_dst over the batch and the rows + beta * diff_bias
///
/// op(a) is m x k, op(b) is k x n and dst m x n, in every one of `batch` products. Tensors are
/// dense and row-major: a is {m, k} ({k, m} when transpose_a), b is {k, n} ({n, k} when
/// transpose_b), dst {m, n}, each with a leading batch dim when batch > 1 — except b when
/// broadcast_b, which one b serves every product with; bias is {n}. A linear layer of `in` inputs
/// and `out` outputs on `rows` samples is m = rows, k = in, n = out, transpose_b (PyTorch's weight
/// is out x in).
///
/// Accumulation is f32 (f64 on the reference backend) for every dtype. beta scales the previous
/// contents of the direction's output (0: the output is not read, so it may hold anything, NaN
/// included: the BLAS convention); beta = 1 accumulates gradients.
struct MatmulDesc {
  std::int64_t batch = 1;     ///< independent products (>= 1)
  std::int64_t m = 1;         ///< rows of op(a) and dst
  std::int64_t n = 1;         ///< columns of op(b) and dst
  std::int64_t k = 1;         ///< columns of op(a), rows of op(b)
  bool transpose_a = false;   ///< a is stored k x m
  bool transpose_b = false;   ///< b is stored n x k (a linear layer's weight)
  bool broadcast_b = false;   ///< one b (no batch dim) for every product
  bool bias = false;          ///< fwd adds bias[j] to dst's column j; bwd_weights gives diff_bias
  float alpha = 1.0f;         ///< scale of the product (finite)
  float beta = 0.0f;          ///< scale of the output's previous contents (finite)
  DType dtype = DType::f32;   ///< of every tensor (f32, f16, bf16)

  /// A linear layer: dst {rows, out} = src {rows, in} weight^T {in, out} (+ bias {out}).
  static MatmulDesc linear(std::int64_t rows, std::int64_t in, std::int64_t out, bool bias = true,
                           DType dtype = DType::f32);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;

  /// Dims of a, b, dst and bias as the tensors must have them (see above). These check the
  /// fields they use: InvalidArgument naming them when out of range.
  Dims a_dims() const;
  Dims b_dims() const;
  Dims dst_dims() const;
  Dims bias_dims() const;
  /// Floating-point operations of one call, 2 per multiply-add: 2 * batch * m * n * k, the same
  /// in every direction (the bias terms are not counted).
  double flops() const;

  /// The `dnnx` CLI line reproducing this case, e.g. `dnnx profile matmul --batch 1 --m 64 --n 1000
  /// --k 2048 --transpose-b --bias --alpha 1 --beta 0 --dtype f16 --direction fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const MatmulDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const MatmulDesc& desc);

/// dst = alpha * op(a) op(b) + beta * dst, plus `bias` (a {n} tensor) on every row when
/// desc.bias (pass an empty Tensor() otherwise). dst must not overlap a, b or bias. Returns the
/// choice that ran.
std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, const Tensor& bias, Tensor& dst);
/// dst = alpha * op(a) op(b) + beta * dst for a desc without bias.
std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, Tensor& dst);
/// diff_a = alpha * diff_dst op(b)^T + beta * diff_a, the gradient w.r.t. a (a linear layer's
/// input). diff_a must not overlap diff_dst or b. Returns the choice that ran.
std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a);
/// diff_b = alpha * op(a)^T diff_dst + beta * diff_b, the gradient w.r.t. b (a linear layer's
/// weight), and diff_bias = sum(diff_dst) + beta * diff_bias when desc.bias (pass an empty
/// Tensor() otherwise). Outputs must not overlap inputs or each other. Returns the choice that ran.
std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b, Tensor& diff_bias);
/// matmul_bwd_weights for a desc without bias.
std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b);

/// Every candidate of the context's backend for (desc, direction), nothing run; priority order,
/// the first supported one is the heuristic pick.
std::vector<AlgoInfo> matmul_list(Context& context, const MatmulDesc& desc, Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> matmul_select(Context& context, const MatmulDesc& desc,
                                            Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult matmul_profile(Context& context, const MatmulDesc& desc, Direction direction);

}  // namespace dnnx
