#pragma once
// What the GPU tests (tests/backends/cudnn_*_test.cpp, label gpu) share: skipping, with the reason,
// where the cudnn backend cannot run, and the background compiles stopped before exit.

#include <dnnx/context.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>

/// In a test body: GTEST_SKIP() with the reason when the cudnn backend is not available (no
/// usable GPU, no cuDNN), so that CI machines without a GPU report the test skipped, not passed.
#define DNNX_REQUIRE_GPU()                                                          \
  do {                                                                              \
    std::string dnnx_why_;                                                          \
    if (!::dnnx::backend_available(::dnnx::BackendKind::cudnn, &dnnx_why_))         \
      GTEST_SKIP() << "cudnn backend not available (no usable GPU): " << dnnx_why_; \
  } while (false)

namespace dnnx::test {

/// After the last test, before exit: the background compiles of runtime-compiled plans a search
/// left running are stopped and joined (dnnx::stop_background_work()), so that exit does not
/// destroy NVRTC's state under them.
class StopBackgroundWorkEnvironment final : public ::testing::Environment {
 public:
  void TearDown() override { ::dnnx::stop_background_work(); }
};
inline ::testing::Environment* const stop_background_work_after_the_tests =
    ::testing::AddGlobalTestEnvironment(new StopBackgroundWorkEnvironment);

/// A cudnn context with a private memory-only choice cache (tests must not write the user's
/// cache file).
inline Context gpu_test_context() {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

/// The layout whose dense strides are exactly `dense`'s. Tensor::layout() answers channels_first
/// for a tensor dense in both (a size-1 channel dim), whose channels_last strides still differ.
inline Layout exact_layout(const Tensor& dense) {
  return dense.strides() == dense_strides(dense.dims(), Layout::channels_last)
             ? Layout::channels_last
             : dense.layout().value();
}

/// A copy of dense host tensor `host` in `context`'s memory, with the same strides.
inline Tensor device_copy(const Tensor& host, Context& context) {
  Tensor device = Tensor::empty(host.dims(), host.dtype(), exact_layout(host), context.allocator());
  copy(host, device);
  return device;
}

/// A host copy of dense tensor `device`, with the same strides.
inline Tensor host_copy_of(const Tensor& device) {
  Tensor host = Tensor::empty(device.dims(), device.dtype(), exact_layout(device));
  copy(device, host);
  return host;
}

}  // namespace dnnx::test
