// The reference backend: host memory, host clock, and the direct-loop convolution.

#include <dnnx/version.hpp>

#include "backends/reference/conv.hpp"
#include "backends/reference/layers.hpp"
#include "backends/reference/reference.hpp"
#include "core/strings.hpp"

#include <chrono>

namespace dnnx::reference {
namespace {

class ReferenceBackend final : public detail::Backend {
 public:
  ReferenceBackend()
      : conv_(make_conv_backend()),
        pool_(make_pool_backend()),
        activation_(make_activation_backend()),
        softmax_(make_softmax_backend()),
        cross_entropy_(make_cross_entropy_backend()),
        batch_norm_(make_batch_norm_backend()),
        add_(make_add_backend()),
        conv_fused_(make_conv_fused_backend(*conv_)) {}

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
  detail::PoolBackend& pool() override { return *pool_; }
  detail::ActivationBackend& activation() override { return *activation_; }
  detail::SoftmaxBackend& softmax() override { return *softmax_; }
  detail::CrossEntropyBackend& cross_entropy() override { return *cross_entropy_; }
  detail::BatchNormBackend& batch_norm() override { return *batch_norm_; }
  detail::AddBackend& add() override { return *add_; }
  detail::ConvFusedBackend& conv_fused() override { return *conv_fused_; }

 private:
  std::unique_ptr<detail::ConvBackend> conv_;
  std::unique_ptr<detail::PoolBackend> pool_;
  std::unique_ptr<detail::ActivationBackend> activation_;
  std::unique_ptr<detail::SoftmaxBackend> softmax_;
  std::unique_ptr<detail::CrossEntropyBackend> cross_entropy_;
  std::unique_ptr<detail::BatchNormBackend> batch_norm_;
  std::unique_ptr<detail::AddBackend> add_;
  std::unique_ptr<detail::ConvFusedBackend> conv_fused_;
};

}  // namespace

std::unique_ptr<detail::Backend> make_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace dnnx::reference
