#pragma once
/// \file
/// Matrix multiply, batched and strided-batched, with transposes, a bias and an activation
/// epilogue (relu, gelu): a linear layer's forward (dst = act(src W^T + bias)), its forward for
/// training (which keeps what the activation's derivative needs in a SavedState) and both its
/// backward passes, as BLAS's GEMM and cuBLASLt's cublasLtMatmul with its epilogues compute them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// The function a matmul applies to its result (its epilogue).
enum class MatmulActivation : std::uint8_t {
  none,       ///< the identity
  relu,       ///< max(x, 0)
  gelu_tanh,  ///< 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): the tanh approximation of
              ///< GELU, cuBLASLt's CUBLASLT_EPILOGUE_GELU and torch's F.gelu(approximate='tanh')
};
/// "none", "relu", "gelu_tanh".
std::string_view to_string(MatmulActivation activation);
/// Parses the names above (and "gelu" for gelu_tanh); throws InvalidArgument listing them.
MatmulActivation parse_matmul_activation(std::string_view text);

/// What a matrix multiply computes. Plain data: comparable, hashable, printable; it is the cache
/// key, the error context and the test-case name.
///
///   fwd:         dst    = alpha * op(a) op(b) + beta * dst (+ bias on every row)
///   bwd_data:    diff_a = alpha * diff_dst op(b)^T + beta * diff_a   (stored as a is: the
///                transpose of that product when transpose_a; summed over the batch when
///                broadcast_a)
///   bwd_weights: diff_b = alpha * op(a)^T diff_dst + beta * diff_b   (stored as b is; summed over
///                the batch when broadcast_b), and with `bias` also
///                diff_bias = sum of diff_dst over the batch and the rows + beta * diff_bias
///
/// op(a) is m x k, op(b) is k x n and dst m x n, in every one of `batch` products. Tensors are
/// dense and row-major: a is {m, k} ({k, m} when transpose_a), b is {k, n} ({n, k} when
/// transpose_b), dst {m, n}, each with a leading batch dim when batch > 1 — except a when
/// broadcast_a and b when broadcast_b, which one a (one b) serves every product with (at most one
/// of the two: PyTorch's torch.matmul of a matrix and a batch); bias is {n}. A linear layer of `in`
/// inputs and `out` outputs on `rows` samples is m = rows, k = in, n = out, transpose_b (PyTorch's
/// weight is out x in).
///
/// Accumulation is f32 (f64 on the reference backend) for every dtype. beta scales the previous
/// contents of the direction's output (0: the output is not read, so it may hold anything, NaN
/// included: the BLAS convention); beta = 1 accumulates gradients.
///
/// With an activation (Note [matmul activation] in docs/ops/matmul.md), pre = alpha * op(a) op(b)
/// + beta * dst + bias is the epilogue's input and
///   fwd:          dst = act(pre) (inference: nothing kept)
///   fwd_training: dst = act(pre), and the SavedState keeps what act' needs: a bit per element
///                 of dst (pre > 0) for relu, pre itself (in dtype) for gelu_tanh
///   bwd_data:     diff_a = alpha * (diff_dst * act'(pre)) op(b)^T + beta * diff_a
///   bwd_weights:  diff_b = alpha * op(a)^T (diff_dst * act'(pre)) + beta * diff_b, and
///                 diff_bias = sum of diff_dst * act'(pre) + beta * diff_bias
/// where the backward passes read act'(pre) from the SavedState a fwd_training of the same desc
/// filled; beta may differ between the forward and the backward (the state's record leaves it
/// out): a layer runs its forward with beta 0 and accumulates gradients with beta 1. The
/// gradient w.r.t. dst's previous contents (beta != 0 in the forward) is not computed.
struct MatmulDesc {
  std::int64_t batch = 1;     ///< independent products (>= 1)
  std::int64_t m = 1;         ///< rows of op(a) and dst
  std::int64_t n = 1;         ///< columns of op(b) and dst
  std::int64_t k = 1;         ///< columns of op(a), rows of op(b)
  bool transpose_a = false;   ///< a is stored k x m
  bool transpose_b = false;   ///< b is stored n x k (a linear layer's weight)
  bool broadcast_b = false;   ///< one b (no batch dim) for every product
  bool broadcast_a = false;   ///< one a (no batch dim) for every product
  bool bias = false;          ///< fwd adds bias[j] to dst's column j; bwd_weights gives diff_bias
  float alpha = 1.0f;         ///< scale of the product (finite)
  float beta = 0.0f;          ///< scale of the output's previous contents (finite)
  DType dtype = DType::f32;   ///< of every tensor (f32, f16, bf16)
  /// The epilogue's function; fwd_training needs one other than none.
  MatmulActivation activation = MatmulActivation::none;

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

/// dst = act(alpha * op(a) op(b) + beta * dst + bias), `bias` (a {n} tensor) on every row when
/// desc.bias (pass an empty Tensor() otherwise). dst must not overlap a, b or bias. Returns the
/// choice that ran.
std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, const Tensor& bias, Tensor& dst);
/// dst = alpha * op(a) op(b) + beta * dst for a desc without bias.
std::shared_ptr<const Choice> matmul_fwd(Context& context, const MatmulDesc& desc, const Tensor& a,
                                         const Tensor& b, Tensor& dst);
/// The forward for training of a desc with an activation: dst as matmul_fwd computes it, and
/// `state` filled with what the activation's derivative needs (see MatmulDesc), for
/// matmul_bwd_data and matmul_bwd_weights. Returns the choice that ran.
std::shared_ptr<const Choice> matmul_fwd_training(Context& context, const MatmulDesc& desc,
                                                  const Tensor& a, const Tensor& b,
                                                  const Tensor& bias, Tensor& dst,
                                                  SavedState& state);
/// diff_a = alpha * diff_dst op(b)^T + beta * diff_a, the gradient w.r.t. a (a linear layer's
/// input), for a desc without activation. diff_a must not overlap diff_dst or b. Returns the
/// choice that ran.
std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a);
/// matmul_bwd_data through the activation: diff_dst * act'(pre) in place of diff_dst, act'(pre)
/// from the `state` a matmul_fwd_training of the desc (beta aside) filled.
std::shared_ptr<const Choice> matmul_bwd_data(Context& context, const MatmulDesc& desc,
                                              const Tensor& diff_dst, const Tensor& b,
                                              Tensor& diff_a, const SavedState& state);
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
/// matmul_bwd_weights through the activation: diff_dst * act'(pre) in place of diff_dst (for
/// diff_b and diff_bias), act'(pre) from the `state` a matmul_fwd_training of the desc (beta
/// aside) filled. Pass an empty Tensor() as diff_bias for a desc without bias.
std::shared_ptr<const Choice> matmul_bwd_weights(Context& context, const MatmulDesc& desc,
                                                 const Tensor& a, const Tensor& diff_dst,
                                                 Tensor& diff_b, Tensor& diff_bias,
                                                 const SavedState& state);

/// Every candidate of the context's backend for (desc, direction), nothing run; priority order,
/// the first supported one is the heuristic pick.
std::vector<AlgoInfo> matmul_list(Context& context, const MatmulDesc& desc, Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> matmul_select(Context& context, const MatmulDesc& desc,
                                            Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult matmul_profile(Context& context, const MatmulDesc& desc, Direction direction);

}  // namespace dnnx
