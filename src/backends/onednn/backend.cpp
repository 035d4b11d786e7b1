// The cpu backend: one oneDNN CPU engine and stream, host memory, the host clock.

#include "backends/onednn/check.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "backends/onednn/onednn.hpp"
#include "backends/onednn/runtime.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_config.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

std::string library_version() {
  const dnnl_version_t* v = dnnl_version();
  return detail::cat("oneDNN ", v->major, '.', v->minor, '.', v->patch);
}

// The threads oneDNN's parallel regions use. The wheel is built on OpenMP (DNNL_CPU_RUNTIME),
// whose runtime libdnnl has loaded; asking that runtime directly avoids linking dnnx to an
// OpenMP library of its own, which could be a different one. 0 when the symbol is absent (a
// oneDNN built on another threading runtime).
int openmp_max_threads() {
  using Query = int (*)();
  auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return query != nullptr ? query() : 0;
}

constexpr const char* cpu_runtime_name() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  return "openmp";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_TBB
  return "tbb";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_SEQ
  return "sequential";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_THREADPOOL
  return "threadpool";
#else
  return "other";
#endif
}

std::string effective_isa() { return isa_name(dnnl::get_effective_cpu_isa()); }

class OneDnnBackend final : public detail::Backend {
 public:
  OneDnnBackend()
      : runtime_(make_runtime()),
        ops_(make_ops(runtime_)) {}

  BackendKind kind() const override { return BackendKind::cpu; }
  std::string name() const override { return "cpu"; }
  // The library version, the ISA it dispatches to and the thread count each change which
  // implementation is fastest (and, for the thread count, the exact bits; Note [determinism]).
  std::string fingerprint() const override {
    return detail::cat(library_version(), " isa=", runtime_->isa,
                       " threads=", openmp_max_threads());
  }
  std::vector<std::pair<std::string, std::string>> environment() const override {
    const dnnl_version_t* v = dnnl_version();
    return {{"onednn_version", detail::cat(v->major, '.', v->minor, '.', v->patch)},
            {"onednn_commit", v->hash},
            {"onednn_cpu_runtime", cpu_runtime_name()},
            {"cpu_isa", runtime_->isa},
            {"threads", std::to_string(openmp_max_threads())}};
  }
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return host_allocator(); }

  double time_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    synchronize();
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(stop - start).count();
  }

  void synchronize() override {
    std::lock_guard lock(runtime_->mutex);  // Note [one stream]
    ErrorContext context;
    context.backend = "cpu";
    DNNX_DNNL_CHECK(dnnl_stream_wait(runtime_->stream.get()), context, "waiting for the stream");
  }

 protected:
  const detail::OpBackends& ops() const override { return ops_; }

 private:
  // Every op the op table marks as implemented by this backend, in table order.
  static detail::OpBackends make_ops(const std::shared_ptr<Runtime>& runtime) {
    detail::OpBackends ops;
#define DNNX_ONEDNN_MAKE(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(cpu, ops.set<OpKind::kind>(make_##kind##_backend(runtime, ops));)
    DNNX_OP_TABLE(DNNX_ONEDNN_MAKE)
#undef DNNX_ONEDNN_MAKE
    return ops;
  }
  static std::shared_ptr<Runtime> make_runtime() {
    ErrorContext context;
    context.backend = "cpu";
    return dnnl_call(context, "creating the oneDNN cpu engine and stream", [] {
      auto runtime = std::make_shared<Runtime>();
      runtime->isa = effective_isa();
      return runtime;
    });
  }

  std::shared_ptr<Runtime> runtime_;
  detail::OpBackends ops_;
};

}  // namespace

bool available(std::string* why) {
  try {
    if (dnnl::engine::get_count(dnnl::engine::kind::cpu) == 0) {
      if (why != nullptr) *why = library_version() + " reports no cpu engine";
      return false;
    }
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return true;
  } catch (const dnnl::error& error) {
    if (why != nullptr) {
      *why = detail::cat(library_version(), " cannot create a cpu engine: ", error.what(), " (",
                         status_name(error.status), ")");
    }
    return false;
  }
}

std::string version() {
  return detail::cat(library_version(), " (cpu isa ", effective_isa(), ", ", openmp_max_threads(),
                     " threads)");
}

std::unique_ptr<detail::Backend> make_backend(int device) {
  if (device != 0) {
    ErrorContext context;
    context.backend = "cpu";
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("device must be 0 for the cpu backend (the host), got ", device),
                  std::move(context));
  }
  return std::make_unique<OneDnnBackend>();
}

}  // namespace dnnx::onednn
