#pragma once
// oneDNN failures -> dnnx::Error. oneDNN reports through dnnl_status_t (C API) or by throwing
// dnnl::error (C++ API); both end in raise_dnnl(), which picks the kind (OutOfMemory for
// dnnl_out_of_memory, BackendFailure otherwise) and records the status name and the candidate id.

#include <dnnx/error.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <string_view>
#include <utility>

namespace dnnx::onednn {

/// "dnnl_out_of_memory", "dnnl_unimplemented", ...
std::string status_name(dnnl_status_t status);

/// Throws the dnnx::Error for a failed oneDNN call: `what` says what was attempted, `context`
/// names op, implementation and repro; the status name is added to it.
/// `file` and `line` default to the caller's location (as dnnx::Error's do).
[[noreturn]] void raise_dnnl(dnnl_status_t status, std::string_view what, ErrorContext context,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE());

/// Runs `call` (C++ API code) and turns a dnnl::error it throws into a dnnx::Error.
template <typename Call>
decltype(auto) dnnl_call(const ErrorContext& context, std::string_view what, Call&& call,
                         const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  try {
    return std::forward<Call>(call)();
  } catch (const dnnl::error& error) {
    raise_dnnl(error.status, std::string(what) + ": " + error.what(), context, file, line);
  }
}

}  // namespace dnnx::onednn

/// Checks a dnnl_status_t returned by a C API call; on failure throws via raise_dnnl().
#define DNNX_DNNL_CHECK(expr, context, what)                            \
  do {                                                                  \
    const dnnl_status_t dnnx_dnnl_status_ = (expr);                     \
    if (dnnx_dnnl_status_ != dnnl_success)                              \
      ::dnnx::onednn::raise_dnnl(dnnx_dnnl_status_, (what), (context)); \
  } while (false)
