#pragma once
// What the GPU tests (tests/backends/cudnn_*_test.cpp, label gpu) share: skipping, with the reason,
// where the cudnn backend cannot run.

#include <dnnx/context.hpp>

#include <gtest/gtest.h>

#include <string>

/// In a test body: GTEST_SKIP() with the reason when the cudnn backend is not available (no
/// usable GPU, no cuDNN), so that CI machines without a GPU report the test skipped, not passed.
#define DNNX_REQUIRE_GPU()                                                          \
  do {                                                                              \
    std::string dnnx_why_;                                                          \
    if (!::dnnx::backend_available(::dnnx::BackendKind::cudnn, &dnnx_why_))         \
      GTEST_SKIP() << "cudnn backend not available (no usable GPU): " << dnnx_why_; \
  } while (false)
