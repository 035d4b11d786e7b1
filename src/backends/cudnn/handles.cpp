#include "backends/cudnn/handles.hpp"

#include "core/strings.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dnnx::cudnn {
namespace {

std::atomic<bool> exiting{false};

}  // namespace

bool process_exiting() noexcept { return exiting.load(std::memory_order_relaxed); }

void watch_process_exit() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { exiting.store(true); }); });
}

CudnnHandle make_cudnn_handle(cudaStream_t stream, const ErrorContext& context) {
  cudnnHandle_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreate(&raw), context, "creating a cuDNN handle");
  CudnnHandle handle(raw, "cudnnHandle_t");
  DNNX_CUDNN_CHECK(cudnnSetStream(raw, stream), context, "binding the cuDNN handle to its stream");
  return handle;
}

TensorDescriptor make_tensor_descriptor(const ErrorContext& context) {
  cudnnTensorDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateTensorDescriptor(&raw), context, "creating a tensor descriptor");
  return TensorDescriptor(raw, "cudnnTensorDescriptor_t");
}

FilterDescriptor make_filter_descriptor(const ErrorContext& context) {
  cudnnFilterDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateFilterDescriptor(&raw), context, "creating a filter descriptor");
  return FilterDescriptor(raw, "cudnnFilterDescriptor_t");
}

ConvolutionDescriptor make_convolution_descriptor(const ErrorContext& context) {
  cudnnConvolutionDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&raw), context,
                   "creating a convolution descriptor");
  return ConvolutionDescriptor(raw, "cudnnConvolutionDescriptor_t");
}

BackendDescriptor make_backend_descriptor(cudnnBackendDescriptorType_t type,
                                          const ErrorContext& context) {
  cudnnBackendDescriptor_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &raw), context,
                   "creating a graph-API descriptor");
  return BackendDescriptor(raw, "cudnnBackendDescriptor_t");
}

Stream make_stream(const ErrorContext& context) {
  cudaStream_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking), context,
                   "creating a CUDA stream");
  return Stream(raw, "cudaStream_t");
}

Event make_event(const ErrorContext& context) {
  cudaEvent_t raw = nullptr;
  DNNX_CUDNN_CHECK(cudaEventCreate(&raw), context, "creating a CUDA event");
  return Event(raw, "cudaEvent_t");
}

CublasHandle make_cublas_handle(const ErrorContext& context) {
  cublasHandle_t raw = nullptr;
  DNNX_CUBLAS_CHECK(cublasCreate(&raw), context, "creating a cuBLAS handle");
  CublasHandle handle(raw, "cublasHandle_t");
  DNNX_CUBLAS_CHECK(cublasSetMathMode(raw, static_cast<cublasMath_t>(
                                               CUBLAS_DEFAULT_MATH |
                                               CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
                    context, "setting the cuBLAS math mode");
  DNNX_CUBLAS_CHECK(cublasSetAtomicsMode(raw, CUBLAS_ATOMICS_NOT_ALLOWED), context,
                    "setting the cuBLAS atomics mode");
  return handle;
}

CublasLtHandle make_cublaslt_handle(const ErrorContext& context) {
  cublasLtHandle_t raw = nullptr;
  DNNX_CUBLAS_CHECK(cublasLtCreate(&raw), context, "creating a cuBLASLt handle");
  return CublasLtHandle(raw, "cublasLtHandle_t");
}

MatmulDescriptor make_matmul_descriptor(cublasComputeType_t compute, cudaDataType_t scale,
                                        const ErrorContext& context) {
  cublasLtMatmulDesc_t raw = nullptr;
  DNNX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw, compute, scale), context,
                    "creating a cuBLASLt matmul descriptor");
  return MatmulDescriptor(raw, "cublasLtMatmulDesc_t");
}

MatrixLayout make_matrix_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                                std::int64_t ld, const ErrorContext& context) {
  cublasLtMatrixLayout_t raw = nullptr;
  DNNX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, ld), context,
                    detail::cat("creating a cuBLASLt layout of ", rows, " x ", cols, ", ld ", ld));
  return MatrixLayout(raw, "cublasLtMatrixLayout_t");
}

MatmulPreference make_matmul_preference(const ErrorContext& context) {
  cublasLtMatmulPreference_t raw = nullptr;
  DNNX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw), context,
                    "creating a cuBLASLt preference");
  return MatmulPreference(raw, "cublasLtMatmulPreference_t");
}

MappedHost make_mapped_host(std::size_t bytes, const char* what, const ErrorContext& context) {
  void* raw = nullptr;
  DNNX_CUDNN_CHECK(cudaHostAlloc(&raw, bytes, cudaHostAllocMapped), context,
                   detail::cat("allocating the ", what, " (mapped pinned memory)"));
  MappedHost mapped{PinnedHost(raw, what), nullptr};
  std::memset(raw, 0, bytes);
  DNNX_CUDNN_CHECK(cudaHostGetDevicePointer(&mapped.device, raw, 0), context,
                   detail::cat("mapping the ", what, " into the device's address space"));
  return mapped;
}

}  // namespace dnnx::cudnn
