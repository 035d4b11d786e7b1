#include "backends/cudnn/runtime.hpp"

#include "backends/cudnn/kernels/random.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

namespace dnnx::cudnn {

std::string cudnn_version_text(std::size_t version) {
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  return detail::cat(version / 10000, '.', version / 100 % 100, '.', version % 100);
}

const char* to_string(KnobSearch search) {
  switch (search) {
    case KnobSearch::off: return "off";
    case KnobSearch::top: return "top";
    case KnobSearch::all: return "all";
  }
  return "?";
}

const char* to_string(ListedFor where) {
  switch (where) {
    case ListedFor::off: return "off";
    case ListedFor::f32: return "f32";
    case ListedFor::on: return "on";
  }
  return "?";
}

bool listed_for(ListedFor setting, DType dtype) {
  return setting == ListedFor::on || (setting == ListedFor::f32 && dtype == DType::f32);
}

std::string not_listed_reason(ListedFor setting, ListedFor fallback, std::string_view variable,
                              std::string_view note, DType dtype) {
  if (listed_for(setting, dtype)) return {};
  const char* which = setting == fallback ? ", the default" : "";
  if (setting == ListedFor::f32) {
    return detail::cat("listed for fp32 convolutions only (", variable, "=f32", which, "); ",
                       variable, "=on lists them for every dtype (Note [", note, "])");
  }
  return detail::cat("off (", variable, "=off", which, "); ", variable,
                     "=f32 lists them for fp32 convolutions, =on for every dtype (Note [", note,
                     "])");
}

const char* to_string(TapCandidates where) {
  switch (where) {
    case TapCandidates::off: return "off";
    case TapCandidates::f32: return "f32";
    case TapCandidates::sparse: return "sparse";
    case TapCandidates::on: return "on";
  }
  return "?";
}

std::string cublas_version_text(std::size_t version) {
  // cuBLAS encodes major * 10000 + minor * 100 + patch.
  return detail::cat(version / 10000, '.', version / 100 % 100, '.', version % 100);
}

std::string cuda_version_text(int version) {
  return detail::cat(version / 1000, '.', version % 1000 / 10);
}

void make_current(int device, const ErrorContext& context) {
  int current = -1;
  DNNX_CUDNN_CHECK(cudaGetDevice(&current), context, "querying the current CUDA device");
  if (current != device) {
    DNNX_CUDNN_CHECK(cudaSetDevice(device), context, detail::cat("selecting CUDA device ", device));
  }
}

namespace {

DeviceFacts query_facts(int device, const ErrorContext& context) {
  DeviceFacts facts;
  cudaDeviceProp properties{};
  DNNX_CUDNN_CHECK(cudaGetDeviceProperties(&properties, device), context,
                   detail::cat("reading the properties of CUDA device ", device));
  facts.name = properties.name;
  facts.major = properties.major;
  facts.minor = properties.minor;
  facts.sm_count = properties.multiProcessorCount;
  facts.memory_bytes = properties.totalGlobalMem;
  facts.l2_bytes =
      properties.l2CacheSize > 0 ? static_cast<std::size_t>(properties.l2CacheSize) : 0;
  DNNX_CUDNN_CHECK(cudaDriverGetVersion(&facts.driver_version), context,
                   "reading the CUDA driver version");
  DNNX_CUDNN_CHECK(cudaRuntimeGetVersion(&facts.runtime_version), context,
                   "reading the CUDA runtime version");
  facts.cudnn_version = cudnnGetVersion();
  facts.cublaslt_version = cublasLtGetVersion();
  return facts;
}

}  // namespace

Runtime::Runtime(int device, Settings settings, cudaStream_t external)
    : device_(device), settings_(settings) {
  const ErrorContext ctx = context();
  cudnn::make_current(device_, ctx);
  facts_ = query_facts(device_, ctx);
  if (external == nullptr) {
    stream_ = make_stream(ctx);
    stream_raw_ = stream_.get();
  } else {
    stream_raw_ = external;
  }
  handle_ = make_cudnn_handle(stream_raw_, ctx);
  watch_process_exit();
  allocator_ = std::make_unique<CachingAllocator>(device_, [this] {
    if (cudaStreamSynchronize(stream_raw_) != cudaSuccess) cudaGetLastError();
  });
  detail::register_device_runtime(Device::cuda(device_), *this);
  registered_ = true;
}

Runtime::~Runtime() {
  if (registered_) detail::unregister_device_runtime(Device::cuda(device_), *this);
  if (process_exiting()) return;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device_) cudaSetDevice(device_);
}

cublasLtHandle_t Runtime::blas_lt() { return created_once(blas_lt_, make_cublaslt_handle); }

cublasHandle_t Runtime::blas() { return created_once(blas_, make_cublas_handle); }

// Note [build handles' streams]
// Binding a handle to a stream (cudnnSetStream) records an event on that stream. A build handle
// bound to stream() did so from a background thread while the main thread could be capturing a
// CUDA graph on stream() (Note [graph replay]): an operation from another thread entering that
// capture, racing the main thread's own. cudnn_conv_describe_test died now and then with SIGSEGV
// in cuEventRecord under cudnnSetStream, called from a build thread's first build_handle; that
// race is the likely cause, not a proven one (docs/testing.md has the runs). A build handle only
// builds plans (a call executes them with handle(), on stream()), so each has a stream of its
// own, which nothing else uses.
cudnnHandle_t Runtime::build_handle(std::size_t slot) {
  std::lock_guard lock(build_handles_mutex_);
  if (build_handles_.size() <= slot) build_handles_.resize(slot + 1);
  std::unique_ptr<BuildHandle>& built = build_handles_[slot];
  if (!built) {
    make_current();
    const ErrorContext ctx = context();
    Stream stream = make_stream(ctx);
    CudnnHandle handle = make_cudnn_handle(stream.get(), ctx);
    built = std::make_unique<BuildHandle>(BuildHandle{std::move(stream), std::move(handle)});
  }
  return built->handle.get();
}

void Runtime::make_current() const { cudnn::make_current(device_, context()); }

ErrorContext Runtime::context(std::string implementation) const {
  ErrorContext ctx;
  ctx.backend = "cudnn";
  ctx.implementation = std::move(implementation);
  return ctx;
}

void Runtime::memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  const ErrorContext ctx = context();
  make_current();
  cudaMemcpyKind direction = cudaMemcpyDeviceToDevice;
  switch (kind) {
    case CopyKind::host_to_device: direction = cudaMemcpyHostToDevice; break;
    case CopyKind::device_to_host: direction = cudaMemcpyDeviceToHost; break;
    case CopyKind::device_to_device: direction = cudaMemcpyDeviceToDevice; break;
  }
  DNNX_CUDNN_CHECK(cudaMemcpyAsync(dst, src, bytes, direction, stream_raw_), ctx,
                   detail::cat("copying ", bytes, " bytes"));
  // Pageable host memory may still be read after cudaMemcpyAsync returns: wait, as promised.
  DNNX_CUDNN_CHECK(cudaStreamSynchronize(stream_raw_), ctx, "waiting for a copy");
}

void Runtime::fill(void* dst, std::size_t count, std::size_t element_bytes, std::uint64_t pattern) {
  const ErrorContext ctx = context();
  make_current();
  const cudaError_t status =
      pattern == 0 ? cudaMemsetAsync(dst, 0, count * element_bytes, stream_raw_)
                   : kernels::random::fill_pattern(dst, count, element_bytes, pattern, stream_raw_);
  DNNX_CUDNN_CHECK(status, ctx,
                   detail::cat("filling ", count, " elements of ", element_bytes, " bytes"));
  // Tensors may be used next on another stream (Context::with_stream): wait, as copy() does.
  DNNX_CUDNN_CHECK(cudaStreamSynchronize(stream_raw_), ctx, "waiting for a fill");
}

void Runtime::synchronize_device() {
  make_current();
  DNNX_CUDNN_CHECK(cudaDeviceSynchronize(), context(), "waiting for the device");
}

void Runtime::synchronize() {
  make_current();
  DNNX_CUDNN_CHECK(cudaStreamSynchronize(stream_raw_), context(), "waiting for the stream");
}

}  // namespace dnnx::cudnn
