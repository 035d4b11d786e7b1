// The reference backend: host memory, host clock, and the direct-loop convolution.

#include <dnnx/version.hpp>

#include "backends/reference/layers.hpp"
#include "backends/reference/reference.hpp"
#include "core/strings.hpp"

#include <chrono>

namespace dnnx::reference {
namespace {

class ReferenceBackend final : public detail::Backend {
 public:
  ReferenceBackend()
      : ops_(make_ops()) {}

  BackendKind kind() const override { return BackendKind::reference; }
  std::string name() const override { return "reference"; }
  // Only dnnx's own code decides what the reference computes and how fast.
  std::string fingerprint() const override { return detail::cat("reference dnnx-", version()); }
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return host_allocator(); }

  // Synchronous: the work has finished when it returns.
  double time_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(stop - start).count();
  }

 protected:
  const detail::OpBackends& ops() const override { return ops_; }

 private:
  // Every op the op table marks as implemented by this backend, in table order.
  static detail::OpBackends make_ops() {
    detail::OpBackends ops;
#define DNNX_REFERENCE_MAKE(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(reference, ops.set<OpKind::kind>(make_##kind##_backend(ops));)
    DNNX_OP_TABLE(DNNX_REFERENCE_MAKE)
#undef DNNX_REFERENCE_MAKE
    return ops;
  }
  detail::OpBackends ops_;
};

}  // namespace

std::unique_ptr<detail::Backend> make_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace dnnx::reference
