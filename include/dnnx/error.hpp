#pragma once
/// \file
/// The one error type of dnnx. Every failure, whatever its backend, surfaces as a dnnx::Error.

#include <stdexcept>
#include <string>
#include <string_view>

namespace dnnx {

/// What went wrong, coarse enough to act on (Python maps these to exception classes).
enum class ErrorKind {
  InvalidArgument,  ///< the caller passed something no backend could accept (ValueError)
  Unsupported,      ///< valid, but this backend/implementation cannot do it (NotImplementedError)
  OutOfMemory,      ///< host or device allocation failed (MemoryError)
  BackendFailure,   ///< oneDNN / cuDNN / CUDA reported a failure (RuntimeError)
  Internal,         ///< a dnnx bug (RuntimeError)
};

/// Stable lower-case name of an error kind, e.g. "InvalidArgument".
std::string_view to_string(ErrorKind kind);

/// Where an error happened, in the user's terms. Empty fields are simply not printed.
struct ErrorContext {
  std::string op;              ///< "conv fwd", "conv bwd_data", ...
  std::string repro;           ///< the `dnnx` CLI line that reproduces the case
  std::string backend;         ///< "reference", "cpu", "cudnn"
  std::string implementation;  ///< candidate id, e.g. "onednn:jit:avx512_core"
  std::string status;          ///< backend status name, e.g. "CUDNN_STATUS_NOT_SUPPORTED"
};

/// The exception type thrown by every dnnx function.
/// what() reads: `<op> [<implementation or backend>] <Kind>: <message> (<status>) | <repro>`.
class Error : public std::runtime_error {
 public:
  /// `file` and `line` default to the caller's location (GCC and Clang builtins, which unlike
  /// std::source_location also work with Clang 14 on libstdc++ 12).
  Error(ErrorKind kind, std::string message, ErrorContext context = {},
        const char* file = __builtin_FILE(), int line = __builtin_LINE());

  /// The coarse category.
  ErrorKind kind() const noexcept { return kind_; }
  /// The message alone, without the context decorations.
  const std::string& message() const noexcept { return message_; }
  /// Op, repro, backend, implementation and status.
  const ErrorContext& context() const noexcept { return context_; }
  /// The source location that raised the error ("file:line").
  const std::string& where() const noexcept { return where_; }

  /// Returns a copy with every empty field of `context` filled from `extra` (used when an error
  /// crosses a layer that knows more about the call, e.g. the op layer adds the repro line).
  Error with_context(const ErrorContext& extra) const;

 private:
  struct Located {};
  Error(Located, ErrorKind kind, std::string message, ErrorContext context, std::string where);
  static std::string format(ErrorKind kind, const std::string& message,
                            const ErrorContext& context);

  ErrorKind kind_;
  std::string message_;
  ErrorContext context_;
  std::string where_;
};

}  // namespace dnnx
