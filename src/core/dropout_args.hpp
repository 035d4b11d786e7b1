#pragma once
// The tensors of one dropout call (Note [op dispatch]); the op layer has validated them against
// the desc: dims, dtype, density in desc.layout, device, no overlap, and the SavedState (a
// training forward has one; a backward's was filled by a training forward of the same desc).

#include <dnnx/ops/dropout.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include "core/fill_args.hpp"
#include "core/strings.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dnnx::detail {

/// Which members are set depends on the direction:
///   fwd:          src -> dst
///   fwd_training: src -> dst, state (filled), seed and offset (the generator's blocks)
///   bwd_data:     diff_dst, state (read) -> diff_src
struct DropoutArgs {
  const Tensor* src = nullptr;       ///< fwd, fwd_training
  Tensor* dst = nullptr;             ///< fwd, fwd_training
  const Tensor* diff_dst = nullptr;  ///< bwd_data
  Tensor* diff_src = nullptr;        ///< bwd_data
  /// fwd_training: filled (sized by the dispatcher for the candidate that runs); bwd_data: read
  /// only (the public call takes it const).
  SavedState* state = nullptr;
  std::uint64_t seed = 0;    ///< fwd_training: the generator's seed
  std::uint64_t offset = 0;  ///< fwd_training: the first Philox block of the call
};

/// The saved-state format of dnnx's own candidates (Note [dropout mask] in dropout_desc.cpp):
/// bit i % 32 of 32-bit word i / 32 is 1 when element i (logical row-major index) is kept.
inline constexpr const char* mask_bits_format = "dnnx:mask_bits";
/// Bytes of that mask for `count` elements: whole 32-bit words.
inline std::size_t mask_bits_bytes(std::int64_t count) {
  return static_cast<std::size_t>((count + 31) / 32) * 4;
}

/// Why `state` cannot hold the mask of `count` elements in `format` (at least `bytes` bytes) on
/// `device` (missing, another format, too small, elsewhere); empty when it can. Plans check it
/// before touching the buffer: a caller below the op layer (a profile of a backward on scratch
/// tensors) may hand them any state.
inline std::string mask_state_problem(const SavedState* state, std::string_view format,
                                      std::size_t bytes, Device device) {
  if (state == nullptr) return "the call has no SavedState";
  if (state->format() != format) {
    return cat("the SavedState holds format '", state->format(), "' (from '", state->producer(),
               "'), not '", format, "'");
  }
  if (state->bytes() < bytes) {
    return cat("the SavedState holds ", state->bytes(), " bytes; the mask needs ", bytes);
  }
  if (bytes > 0 && (state->data() == nullptr || state->device() != device)) {
    return cat("the SavedState's buffer is not on ", to_string(device));
  }
  return {};
}

}  // namespace dnnx::detail
