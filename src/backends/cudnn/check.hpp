#pragma once
// CUDA, cuDNN and cuBLAS failures -> dnnx::Error. DNNX_CUDNN_CHECK takes a cudnnStatus_t or a
// cudaError_t, DNNX_CUBLAS_CHECK a cublasStatus_t (cuBLAS and cuBLASLt share it); raise_status()
// records the status name (cudnnGetErrorString / cudaGetErrorName / cublasGetStatusName), cuDNN's
// last error message, the candidate id from the context, and picks the kind: OutOfMemory for
// allocation failures, BackendFailure otherwise.

#include <dnnx/error.hpp>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>
#include <string_view>

namespace dnnx::cudnn {

/// "CUDNN_STATUS_NOT_SUPPORTED", ...
std::string status_name(cudnnStatus_t status);
/// "cudaErrorMemoryAllocation", ...
std::string status_name(cudaError_t status);
/// "CUBLAS_STATUS_NOT_SUPPORTED", ...
std::string status_name(cublasStatus_t status);

inline bool failed(cudnnStatus_t status) { return status != CUDNN_STATUS_SUCCESS; }
inline bool failed(cudaError_t status) { return status != cudaSuccess; }
inline bool failed(cublasStatus_t status) { return status != CUBLAS_STATUS_SUCCESS; }
/// Whether `status` reports that memory ran out.
bool out_of_memory(cudnnStatus_t status);
bool out_of_memory(cudaError_t status);
bool out_of_memory(cublasStatus_t status);

/// cuDNN's own explanation of its last failure on this thread ("" when it has none).
std::string last_cudnn_message();

/// Throws the dnnx::Error for a failed call: `what` says what was attempted; the status name goes
/// into the context. `file` and `line` default to the caller's location.
[[noreturn]] void raise_status(cudnnStatus_t status, std::string_view what, ErrorContext context,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE());
[[noreturn]] void raise_status(cudaError_t status, std::string_view what, ErrorContext context,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE());
[[noreturn]] void raise_status(cublasStatus_t status, std::string_view what, ErrorContext context,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE());

/// Destructors never throw (STYLE.md): they report a failed destroy call on stderr. A CUDA runtime
/// that is already shutting down (process exit) is not reported.
void log_destroy_failure(cudnnStatus_t status, const char* what) noexcept;
void log_destroy_failure(cudaError_t status, const char* what) noexcept;
void log_destroy_failure(cublasStatus_t status, const char* what) noexcept;

}  // namespace dnnx::cudnn

/// Checks a cudnnStatus_t, cudaError_t or cublasStatus_t (cuBLAS and cuBLASLt); on failure throws
/// via raise_status() with `context` (an ErrorContext naming op, implementation and repro) and
/// `what` (the attempted action).
#define DNNX_CUDNN_CHECK(expr, context, what)                             \
  do {                                                                    \
    const auto dnnx_cudnn_status_ = (expr);                               \
    if (::dnnx::cudnn::failed(dnnx_cudnn_status_))                        \
      ::dnnx::cudnn::raise_status(dnnx_cudnn_status_, (what), (context)); \
  } while (false)
