#include <dnnx/error.hpp>

#include "core/check.hpp"

#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

namespace dnnx {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "InvalidArgument";
    case ErrorKind::Unsupported: return "Unsupported";
    case ErrorKind::OutOfMemory: return "OutOfMemory";
    case ErrorKind::BackendFailure: return "BackendFailure";
    case ErrorKind::Internal: return "Internal";
  }
  return "Unknown";
}

Error::Error(ErrorKind kind, std::string message, ErrorContext context, const char* file, int line)
    : Error(Located{}, kind, std::move(message), std::move(context),
            std::filesystem::path(file).filename().string() + ":" + std::to_string(line)) {}

Error::Error(Located, ErrorKind kind, std::string message, ErrorContext context, std::string where)
    : std::runtime_error(format(kind, message, context)),
      kind_(kind),
      message_(std::move(message)),
      context_(std::move(context)),
      where_(std::move(where)) {}

Error Error::with_context(const ErrorContext& extra) const {
  ErrorContext merged = context_;
  auto fill = [](std::string& field, const std::string& value) {
    if (field.empty()) field = value;
  };
  fill(merged.op, extra.op);
  fill(merged.repro, extra.repro);
  fill(merged.backend, extra.backend);
  fill(merged.implementation, extra.implementation);
  fill(merged.status, extra.status);
  return Error(Located{}, kind_, message_, std::move(merged), where_);
}

std::string Error::format(ErrorKind kind, const std::string& message, const ErrorContext& context) {
  std::string text;
  if (!context.op.empty()) text += context.op + " ";
  if (!context.implementation.empty()) {
    text += "[" + context.implementation + "] ";
  } else if (!context.backend.empty()) {
    text += "[" + context.backend + "] ";
  }
  text += std::string(to_string(kind)) + ": " + message;
  if (!context.status.empty()) text += " (" + context.status + ")";
  if (!context.repro.empty()) text += " | " + context.repro;
  return text;
}

namespace detail {

// Never destroyed (Note [static destruction] in src/ops/context_state.hpp): a cache held by a user
// static warns from its destructor, after this function's statics would be gone.
void warn_once(const std::string& message) {
  static auto* const mutex = new std::mutex;
  static auto* const said = new std::set<std::string>;
  std::lock_guard lock(*mutex);
  if (said->insert(message).second) std::cerr << "dnnx: " << message << '\n';
}

void raise(ErrorKind kind, std::string message, ErrorContext context, const char* file, int line) {
  throw Error(kind, std::move(message), std::move(context), file, line);
}

}  // namespace detail
}  // namespace dnnx
