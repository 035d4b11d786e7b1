#pragma once
// The matrix multiply's kernels beside cuBLAS (src/backends/cudnn/matmul.cpp): the bias add and the
// bias gradient of the candidates whose GEMM has no fused epilogue, the last step of a GEMM that
// accumulated in f32 scratch, the activation passes of Note [matmul activation candidates], and
// the packing of a batch of matrices into one (for the convolution's gemm candidates).
// Plain pointers to dense row-major data; no cuBLAS types.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::matmul {

/// Storage type of every tensor; arithmetic is f32.
enum class Element : int { f32, f16, bf16 };

/// dst[r][j] = dst[r][j] + bias[j] for a `rows` x `n` dst, one rounding per element. Queues the
/// work on `stream` and returns the launch status.
cudaError_t add_bias(Element element, std::int64_t rows, std::int64_t n, const void* bias,
                     void* dst, cudaStream_t stream);

/// dst[r][g * cols + c] = src[g][r][c] for g < count, r < rows, c < cols: `count` row-major
/// rows x cols matrices set side by side in one row-major rows x (count * cols) matrix (Note
/// [packed gemm] in conv_gemm.cpp), each element copied bit for bit. src and dst must not overlap.
/// Queues the work on `stream` and returns the launch status (cudaSuccess without a launch when
/// there is nothing to copy).
cudaError_t side_by_side(Element element, std::int64_t count, std::int64_t rows, std::int64_t cols,
                         const void* src, void* dst, cudaStream_t stream);

/// Bytes of f32 scratch `bias_gradient` needs for (rows, n) on a device with `sm_count`
/// multiprocessors (0 when one pass suffices).
std::size_t bias_gradient_workspace(std::int64_t rows, std::int64_t n, int sm_count);

/// diff_bias[j] = sum over r of diff_dst[r][j] + beta * diff_bias[j] (diff_bias is not read when
/// beta is 0), summed in f32 in an order fixed by (rows, n, sm_count): bitwise reproducible.
/// `workspace` holds bias_gradient_workspace() bytes. Queues the work on `stream` and returns the
/// launch status.
cudaError_t bias_gradient(Element element, std::int64_t rows, std::int64_t n, const void* diff_dst,
                          float beta, void* diff_bias, void* workspace, int sm_count,
                          cudaStream_t stream);

/// out[i] = accumulator[i] + beta * out[i] for `count` elements (out is not read when beta is 0),
/// one rounding to the storage type. Queues the work on `stream` and returns the launch status.
cudaError_t store_accumulator(Element element, std::int64_t count, const float* accumulator,
                              float beta, void* out, cudaStream_t stream);

/// The activation of the passes below.
enum class Activation : int { relu, gelu_tanh };

/// In place over `count` elements of dst: dst = act(dst) (relu: max(x, 0), NaN kept; gelu_tanh:
/// the tanh approximation, in f32, rounded once). With a non-null `aux`, first the state of
/// Note [matmul aux] (src/core/matmul_args.hpp) of dst's values as pre: relu's mask words (bit
/// i % 32 of word i / 32 set when x > 0, every word of ceil(count / 32) written), or gelu's pre
/// (a copy of dst, same type). dst and aux may have any alignment of their type. Queues the work
/// on `stream` and returns the launch status.
cudaError_t activation_forward(Element element, Activation activation, std::int64_t count,
                               void* dst, void* aux, cudaStream_t stream);

/// dst[i] = gelu_tanh(pre[i]) for `count` elements (as above, in f32 rounded once); pre and dst
/// must not overlap, at any alignment of their type. Queues the work on `stream`.
cudaError_t gelu_forward_from(Element element, std::int64_t count, const void* pre, void* dst,
                              cudaStream_t stream);

/// diff_pre[i] = diff_dst[i] * act'(pre_i) for `count` elements, act' from `aux` (the state
/// above), in f32 rounded once. diff_pre must not overlap diff_dst or aux. Queues the work on
/// `stream` and returns the launch status.
cudaError_t activation_backward(Element element, Activation activation, std::int64_t count,
                                const void* diff_dst, const void* aux, void* diff_pre,
                                cudaStream_t stream);

/// Bytes of f32 scratch `activation_backward_bias` needs for (rows, n) on a device with
/// `sm_count` multiprocessors (0 when one chunk of rows suffices).
std::size_t activation_backward_bias_workspace(std::int64_t rows, std::int64_t n, int sm_count);

/// activation_backward over a rows x n diff_dst, and with it diff_bias[j] = sum over r of
/// diff_pre[r][j] (as stored, rounded to the type) + beta * diff_bias[j] (not read when beta is 0),
/// summed in f32 in an order fixed by (rows, n, sm_count): bitwise reproducible (Note [activation
/// derivative with the bias gradient]). `workspace` holds activation_backward_bias_workspace()
/// bytes. Queues the work on `stream` and returns the launch status.
cudaError_t activation_backward_bias(Element element, Activation activation, std::int64_t rows,
                                     std::int64_t n, const void* diff_dst, const void* aux,
                                     void* diff_pre, float beta, void* diff_bias, void* workspace,
                                     int sm_count, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::matmul
