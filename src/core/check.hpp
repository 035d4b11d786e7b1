#pragma once
// Throwing helpers for argument checks: one place that builds dnnx::Error with a location, and the
// checked 64-bit arithmetic that every size, stride and element count of the core goes through.

#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "core/strings.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dnnx::detail {

/// Says `message` on stderr ("dnnx: <message>") once per process, however many callers run into
/// it.
void warn_once(const std::string& message);

/// Throws Error(kind, message, context) at the caller's location.
[[noreturn]] void raise(ErrorKind kind, std::string message, ErrorContext context = {},
                        const char* file = __builtin_FILE(), int line = __builtin_LINE());

// Note [size limits]
// Sizes are bounded so that every derived quantity (kernel extents, padded sizes, element counts,
// byte counts, strides, spans) fits in 64 bits; beyond these no machine has the memory anyway:
// - one entry of a desc (a batch, a channel count, a spatial size, a kernel size, a stride, a
//   padding, a dilation) is at most max_dim_size = 2^31, so that sums and products of two or three
//   of them cannot overflow;
// - a tensor holds at most max_elements = 2^60 elements, so that its byte count (at most 8 bytes
//   per element) fits in a signed 64-bit integer too.
// Signed overflow is undefined behaviour, and a wrapped value would pass the checks after it (a
// negative element count is "small"), so every product, sum or difference of sizes that is not
// already bounded by the rules above goes through checked_mul / checked_add / checked_sub, and an
// overflow is an InvalidArgument that names the argument and its value.

/// Largest entry of a desc: batch, channels, spatial, kernel, stride, padding, dilation
/// (Note [size limits]).
inline constexpr std::int64_t max_dim_size = std::int64_t{1} << 31;
/// Largest element count of a tensor or a view's span (Note [size limits]).
inline constexpr std::int64_t max_elements = std::int64_t{1} << 60;

/// a * b, or nullopt when the product does not fit in 64 bits.
[[nodiscard]] inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// a + b, or nullopt when the sum does not fit in 64 bits.
[[nodiscard]] inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

/// a - b, or nullopt when the difference does not fit in 64 bits.
[[nodiscard]] inline std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) return std::nullopt;
  return difference;
}

/// The element count of a tensor of `dims`. Throws InvalidArgument naming `what` and `dims` when
/// an entry is negative ("<what> <dims> have a negative size -4 at position 1") or the product of
/// the entries, sizes of 0 counted as 1, exceeds max_elements: that product bounds the tensor's
/// dense strides as well as its element count. Zero sizes are accepted (the count is then 0).
inline std::int64_t checked_count(const Dims& dims, std::string_view what) {
  std::int64_t bound = 1;
  std::int64_t count = 1;
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] < 0) {
      raise(ErrorKind::InvalidArgument, cat(what, " ", dims, " have a negative size ", dims[i],
                                            " at position ", i, "; sizes must be >= 0"));
    }
    const auto next = checked_mul(bound, dims[i] == 0 ? 1 : dims[i]);
    if (!next || *next > max_elements) {
      raise(ErrorKind::InvalidArgument,
            cat(what, " ", dims,
                " have more elements than can be addressed: the product of the entries (sizes of "
                "0 counted as 1) must be at most 2^60"));
    }
    bound = *next;
    count = dims[i] == 0 ? 0 : count;
  }
  return count == 0 ? 0 : bound;
}

/// Throws InvalidArgument "workspace has <bytes> bytes[ (null)]; this candidate needs <needed>"
/// unless a plan's workspace of `bytes` bytes at `data` can hold `needed` bytes (a null one only
/// when nothing is needed).
inline void check_workspace_bytes(std::size_t bytes, const void* data, std::size_t needed,
                                  const ErrorContext& context) {
  if (bytes < needed || (needed > 0 && data == nullptr)) {
    raise(ErrorKind::InvalidArgument,
          cat("workspace has ", bytes, " bytes", data == nullptr ? " (null)" : "",
              "; this candidate needs ", needed),
          context);
  }
}

// Note [shapes of an unvalidated desc]
// A desc is plain data that a caller may fill in wrongly and never validate. Its shape accessors
// (ConvDesc::dst_dims(), output_size(), PoolDesc::dst_dims(), ...) must not then return
// negative or wrapped sizes, nor divide by zero: each checks the fields it computes from, and when
// one is out of range it runs validate(), which throws InvalidArgument naming the first bad field
// and its value. A valid desc pays only those range checks, not a full validation per call.

/// Note [shapes of an unvalidated desc]: when `in_range` is false, runs desc.validate(), which
/// throws naming the bad field; should validate() accept the desc, throws Internal naming
/// `accessor`, whose range checks then disagree with validate().
template <typename Desc>
void validate_unless(bool in_range, const Desc& desc, std::string_view accessor) {
  if (in_range) return;
  desc.validate();
  raise(ErrorKind::Internal,
        cat(accessor, " found a field out of range that validate() accepts: ", desc));
}

}  // namespace dnnx::detail

/// Throws InvalidArgument with the streamed message when `cond` is false.
#define DNNX_CHECK_ARG(cond, ...)                                                                  \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::dnnx::detail::raise(::dnnx::ErrorKind::InvalidArgument, ::dnnx::detail::cat(__VA_ARGS__)); \
  } while (false)

/// Throws Internal when an invariant dnnx itself maintains is broken.
#define DNNX_ASSERT(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond))                                                                    \
      ::dnnx::detail::raise(                                                        \
          ::dnnx::ErrorKind::Internal,                                              \
          ::dnnx::detail::cat("internal check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (false)
