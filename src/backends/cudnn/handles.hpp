#pragma once
// RAII for every CUDA, cuDNN and cuBLAS object the backend owns (STYLE.md): one move-only template,
// Handle<T, Destroy>, and a creating factory per kind. Objects are created in the factories
// (throwing dnnx::Error on failure) and destroyed exactly once; destructors never throw, they log.

#include "backends/cudnn/check.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace dnnx::cudnn {

// Note [process exit]
// The CUDA runtime and cuDNN tear themselves down in exit handlers of their own. The backend
// instances are never destroyed (Note [static destruction]), but other owners of CUDA and cuDNN
// objects may be destroyed after that teardown: a tensor or context in a user's static, a runtime,
// allocator or plan that a test or tool owns. Destroying a descriptor or freeing memory then
// corrupts the heap or hangs. The first runtime registers an exit handler once CUDA and cuDNN are
// up, so it runs before their teardown; from then on handles and the allocator leave their objects
// to the operating system.

/// True once the process has started exiting (Note [process exit]).
bool process_exiting() noexcept;
/// Registers the exit handler (once; call after CUDA and cuDNN are initialized).
void watch_process_exit();

/// Owns one object of pointer-like type T, released with `Destroy` (a cudnnDestroy* /
/// cudaXxxDestroy function returning a status). Move-only; a moved-from handle is empty.
template <typename T, auto Destroy>
class Handle {
 public:
  Handle() = default;
  /// Takes ownership of `value` (null: empty).
  explicit Handle(T value, const char* what) noexcept : value_(value), what_(what) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : value_(std::exchange(other.value_, T{})), what_(other.what_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      value_ = std::exchange(other.value_, T{});
      what_ = other.what_;
    }
    return *this;
  }

  T get() const noexcept { return value_; }
  explicit operator bool() const noexcept { return value_ != T{}; }
  /// Destroys the object now (logs a failure; never throws).
  void reset() noexcept {
    if (value_ != T{} && !process_exiting()) log_destroy_failure(Destroy(value_), what_);
    value_ = T{};
  }

 private:
  T value_{};
  const char* what_ = "object";
};

using CudnnHandle = Handle<cudnnHandle_t, cudnnDestroy>;
using TensorDescriptor = Handle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Handle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Handle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using BackendDescriptor = Handle<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor>;
using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;
using Graph = Handle<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Handle<cudaGraphExec_t, cudaGraphExecDestroy>;
using PinnedHost = Handle<void*, cudaFreeHost>;
using CublasHandle = Handle<cublasHandle_t, cublasDestroy>;
using CublasLtHandle = Handle<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDescriptor = Handle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = Handle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using MatmulPreference = Handle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

/// Pinned host memory mapped into the current device's address space: the host reads and writes
/// it with plain (volatile) loads and stores, kernels through `device`.
struct MappedHost {
  PinnedHost host;
  void* device = nullptr;
};

/// A cuDNN handle bound to `stream` (on the current device).
CudnnHandle make_cudnn_handle(cudaStream_t stream, const ErrorContext& context);
TensorDescriptor make_tensor_descriptor(const ErrorContext& context);
FilterDescriptor make_filter_descriptor(const ErrorContext& context);
ConvolutionDescriptor make_convolution_descriptor(const ErrorContext& context);
/// A graph-API descriptor of `type` (not finalized).
BackendDescriptor make_backend_descriptor(cudnnBackendDescriptorType_t type,
                                          const ErrorContext& context);
/// A non-blocking stream on the current device: it never waits for the legacy default stream.
Stream make_stream(const ErrorContext& context);
/// An event that records timing.
Event make_event(const ErrorContext& context);
/// A cuBLAS handle (on the current device) that never reduces in a type narrower than the compute
/// type (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) and never uses atomics.
CublasHandle make_cublas_handle(const ErrorContext& context);
/// A cuBLASLt handle (on the current device).
CublasLtHandle make_cublaslt_handle(const ErrorContext& context);
/// A cuBLASLt matmul descriptor computing in `compute` with scale (alpha, beta) type `scale`.
MatmulDescriptor make_matmul_descriptor(cublasComputeType_t compute, cudaDataType_t scale,
                                        const ErrorContext& context);
/// A column-major cuBLASLt matrix layout of `rows` x `cols` with leading dimension `ld`.
MatrixLayout make_matrix_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                                std::int64_t ld, const ErrorContext& context);
/// A cuBLASLt heuristic-search preference with every attribute at its default.
MatmulPreference make_matmul_preference(const ErrorContext& context);
/// `bytes` of zeroed mapped pinned host memory; `what` names it in messages.
MappedHost make_mapped_host(std::size_t bytes, const char* what, const ErrorContext& context);

}  // namespace dnnx::cudnn
