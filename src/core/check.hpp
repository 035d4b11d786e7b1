#pragma once
// Throwing helpers for argument checks: one place that builds dnnx::Error with a location.

#include <dnnx/error.hpp>

#include "core/strings.hpp"

#include <string>

namespace dnnx::detail {

/// Throws Error(kind, message, context) at the caller's location.
[[noreturn]] void raise(ErrorKind kind, std::string message, ErrorContext context = {},
                        const char* file = __builtin_FILE(), int line = __builtin_LINE());

}  // namespace dnnx::detail

/// Throws InvalidArgument with the streamed message when `cond` is false.
#define DNNX_CHECK_ARG(cond, ...)                                                     \
  do {                                                                                \
    if (!(cond))                                                                      \
      ::dnnx::detail::raise(::dnnx::ErrorKind::InvalidArgument,                       \
                            ::dnnx::detail::cat(__VA_ARGS__));                        \
  } while (false)

/// Throws Internal when an invariant dnnx itself maintains is broken.
#define DNNX_ASSERT(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond))                                                                      \
      ::dnnx::detail::raise(::dnnx::ErrorKind::Internal,                              \
                            ::dnnx::detail::cat("internal check failed: " #cond " ",  \
                                                ##__VA_ARGS__));                      \
  } while (false)
