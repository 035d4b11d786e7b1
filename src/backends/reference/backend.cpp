// The reference backend: host memory, host clock, and the direct-loop convolution.

#include <dnnx/version.hpp>

#include "backends/reference/conv.hpp"
#include "backends/reference/reference.hpp"
#include "core/strings.hpp"

#include <chrono>

namespace dnnx::reference {
namespace {

class ReferenceBackend final : public detail::Backend {
 public:
  ReferenceBackend() : conv_(make_conv_backend()) {}

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

  detail::ConvBackend& conv() override { return *conv_; }

 private:
  std::unique_ptr<detail::ConvBackend> conv_;
};

}  // namespace

std::unique_ptr<detail::Backend> make_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace dnnx::reference
