#include "backends/cudnn/check.hpp"

#include "core/check.hpp"

#include <array>
#include <iostream>

namespace dnnx::cudnn {

std::string status_name(cudnnStatus_t status) {
  const char* text = cudnnGetErrorString(status);
  return text != nullptr ? text : "CUDNN_STATUS_" + std::to_string(static_cast<int>(status));
}

std::string status_name(cudaError_t status) {
  const char* text = cudaGetErrorName(status);
  return text != nullptr ? text : "cudaError_" + std::to_string(static_cast<int>(status));
}

std::string status_name(cublasStatus_t status) {
  const char* text = cublasGetStatusName(status);
  return text != nullptr ? text : "CUBLAS_STATUS_" + std::to_string(static_cast<int>(status));
}

bool out_of_memory(cudnnStatus_t status) {
  return status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
         status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}

bool out_of_memory(cudaError_t status) { return status == cudaErrorMemoryAllocation; }

bool out_of_memory(cublasStatus_t status) { return status == CUBLAS_STATUS_ALLOC_FAILED; }

std::string last_cudnn_message() {
  std::array<char, 1024> buffer{};
  cudnnGetLastErrorString(buffer.data(), buffer.size());
  buffer.back() = '\0';
  return buffer.data();
}

void raise_status(cudnnStatus_t status, std::string_view what, ErrorContext context,
                  const char* file, int line) {
  context.status = status_name(status);
  if (context.backend.empty()) context.backend = "cudnn";
  std::string message(what);
  // cuDNN 9 explains most rejections ("CUDNN_STATUS_NOT_SUPPORTED; Reason: ..."): keep it.
  if (const std::string detail = last_cudnn_message(); !detail.empty()) message += ": " + detail;
  detail::raise(out_of_memory(status) ? ErrorKind::OutOfMemory : ErrorKind::BackendFailure,
                std::move(message), std::move(context), file, line);
}

void raise_status(cudaError_t status, std::string_view what, ErrorContext context, const char* file,
                  int line) {
  // A failed runtime call leaves a sticky "last error" for non-fatal errors: clear it so the next
  // unrelated check does not report it again.
  cudaGetLastError();
  context.status = status_name(status);
  if (context.backend.empty()) context.backend = "cudnn";
  const char* text = cudaGetErrorString(status);
  std::string message(what);
  if (text != nullptr) message += detail::cat(" (", text, ")");
  detail::raise(out_of_memory(status) ? ErrorKind::OutOfMemory : ErrorKind::BackendFailure,
                std::move(message), std::move(context), file, line);
}

void raise_status(cublasStatus_t status, std::string_view what, ErrorContext context,
                  const char* file, int line) {
  context.status = status_name(status);
  if (context.backend.empty()) context.backend = "cudnn";
  std::string message(what);
  if (const char* text = cublasGetStatusString(status); text != nullptr)
    message += detail::cat(" (", text, ")");
  detail::raise(out_of_memory(status) ? ErrorKind::OutOfMemory : ErrorKind::BackendFailure,
                std::move(message), std::move(context), file, line);
}

namespace {

// The line of a failed destroy call; never throws (it runs in destructors).
template <typename Status>
void log_failed_destroy(Status status, const char* what) noexcept {
  try {
    std::cerr << "dnnx: cudnn backend: destroying " << what << " failed: " << status_name(status)
              << '\n';
  } catch (...) {
  }
}

}  // namespace

void log_destroy_failure(cudnnStatus_t status, const char* what) noexcept {
  if (status != CUDNN_STATUS_SUCCESS) log_failed_destroy(status, what);
}

void log_destroy_failure(cudaError_t status, const char* what) noexcept {
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) log_failed_destroy(status, what);
}

void log_destroy_failure(cublasStatus_t status, const char* what) noexcept {
  if (status != CUBLAS_STATUS_SUCCESS) log_failed_destroy(status, what);
}

}  // namespace dnnx::cudnn
