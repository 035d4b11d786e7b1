#include "backends/cudnn/handles.hpp"

#include "core/strings.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dnnx::cudnn {
namespace {

std::atomic<bool> exiting{false};

// The owner of the handle `create(&raw)` makes, named `type` in messages; a failing status throws
// InvalidArgument or BackendFailure saying `what` was attempted, with `context`.
template <typename Owner, typename Raw, typename Create>
Owner created(Create&& create, const char* type, const std::string& what,
              const ErrorContext& context) {
  Raw raw = nullptr;
  DNNX_CUDNN_CHECK(create(&raw), context, what);
  return Owner(raw, type);
}

}  // namespace

bool process_exiting() noexcept { return exiting.load(std::memory_order_relaxed); }

void watch_process_exit() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { exiting.store(true); }); });
}

CudnnHandle make_cudnn_handle(cudaStream_t stream, const ErrorContext& context) {
  CudnnHandle handle =
      created<CudnnHandle, cudnnHandle_t>([](auto* raw) { return cudnnCreate(raw); },
                                          "cudnnHandle_t", "creating a cuDNN handle", context);
  DNNX_CUDNN_CHECK(cudnnSetStream(handle.get(), stream), context,
                   "binding the cuDNN handle to its stream");
  return handle;
}

TensorDescriptor make_tensor_descriptor(const ErrorContext& context) {
  return created<TensorDescriptor, cudnnTensorDescriptor_t>(
      [](auto* raw) { return cudnnCreateTensorDescriptor(raw); }, "cudnnTensorDescriptor_t",
      "creating a tensor descriptor", context);
}

FilterDescriptor make_filter_descriptor(const ErrorContext& context) {
  return created<FilterDescriptor, cudnnFilterDescriptor_t>(
      [](auto* raw) { return cudnnCreateFilterDescriptor(raw); }, "cudnnFilterDescriptor_t",
      "creating a filter descriptor", context);
}

ConvolutionDescriptor make_convolution_descriptor(const ErrorContext& context) {
  return created<ConvolutionDescriptor, cudnnConvolutionDescriptor_t>(
      [](auto* raw) { return cudnnCreateConvolutionDescriptor(raw); },
      "cudnnConvolutionDescriptor_t", "creating a convolution descriptor", context);
}

BackendDescriptor make_backend_descriptor(cudnnBackendDescriptorType_t type,
                                          const ErrorContext& context) {
  return created<BackendDescriptor, cudnnBackendDescriptor_t>(
      [type](auto* raw) { return cudnnBackendCreateDescriptor(type, raw); },
      "cudnnBackendDescriptor_t", "creating a graph-API descriptor", context);
}

Stream make_stream(const ErrorContext& context) {
  return created<Stream, cudaStream_t>(
      [](auto* raw) { return cudaStreamCreateWithFlags(raw, cudaStreamNonBlocking); },
      "cudaStream_t", "creating a CUDA stream", context);
}

Event make_event(const ErrorContext& context) {
  return created<Event, cudaEvent_t>([](auto* raw) { return cudaEventCreate(raw); }, "cudaEvent_t",
                                     "creating a CUDA event", context);
}

CublasHandle make_cublas_handle(const ErrorContext& context) {
  CublasHandle handle =
      created<CublasHandle, cublasHandle_t>([](auto* raw) { return cublasCreate(raw); },
                                            "cublasHandle_t", "creating a cuBLAS handle", context);
  cublasHandle_t raw = handle.get();
  DNNX_CUDNN_CHECK(cublasSetMathMode(raw, static_cast<cublasMath_t>(
                                              CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
                   context, "setting the cuBLAS math mode");
  DNNX_CUDNN_CHECK(cublasSetAtomicsMode(raw, CUBLAS_ATOMICS_NOT_ALLOWED), context,
                   "setting the cuBLAS atomics mode");
  return handle;
}

CublasLtHandle make_cublaslt_handle(const ErrorContext& context) {
  return created<CublasLtHandle, cublasLtHandle_t>([](auto* raw) { return cublasLtCreate(raw); },
                                                   "cublasLtHandle_t", "creating a cuBLASLt handle",
                                                   context);
}

MatmulDescriptor make_matmul_descriptor(cublasComputeType_t compute, cudaDataType_t scale,
                                        const ErrorContext& context) {
  return created<MatmulDescriptor, cublasLtMatmulDesc_t>(
      [&](auto* raw) { return cublasLtMatmulDescCreate(raw, compute, scale); },
      "cublasLtMatmulDesc_t", "creating a cuBLASLt matmul descriptor", context);
}

MatrixLayout make_matrix_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                                std::int64_t ld, const ErrorContext& context) {
  return created<MatrixLayout, cublasLtMatrixLayout_t>(
      [&](auto* raw) { return cublasLtMatrixLayoutCreate(raw, type, rows, cols, ld); },
      "cublasLtMatrixLayout_t",
      detail::cat("creating a cuBLASLt layout of ", rows, " x ", cols, ", ld ", ld), context);
}

MatmulPreference make_matmul_preference(const ErrorContext& context) {
  return created<MatmulPreference, cublasLtMatmulPreference_t>(
      [](auto* raw) { return cublasLtMatmulPreferenceCreate(raw); }, "cublasLtMatmulPreference_t",
      "creating a cuBLASLt preference", context);
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
