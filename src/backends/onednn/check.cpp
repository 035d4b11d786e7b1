#include "backends/onednn/check.hpp"

#include "core/check.hpp"

#include <oneapi/dnnl/dnnl_debug.h>

namespace dnnx::onednn {

std::string status_name(dnnl_status_t status) {
  const char* text = dnnl_status2str(status);
  return std::string("dnnl_") + (text != nullptr ? text : "unknown_status");
}

void raise_dnnl(dnnl_status_t status, std::string_view what, ErrorContext context, const char* file,
                int line) {
  context.status = status_name(status);
  if (context.backend.empty()) context.backend = "cpu";
  const ErrorKind kind =
      status == dnnl_out_of_memory ? ErrorKind::OutOfMemory : ErrorKind::BackendFailure;
  detail::raise(kind, std::string(what), std::move(context), file, line);
}

}  // namespace dnnx::onednn
