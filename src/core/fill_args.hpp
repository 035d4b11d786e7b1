#pragma once
// The arguments of one fill call (Note [op dispatch]): the op layer has validated dst against the
// desc (dims, dtype, density in desc.layout, device) and derived the distribution's f32 parameters
// and the generator's block range once, so every backend draws the same bits.

#include <dnnx/ops/fill.hpp>
#include <dnnx/tensor.hpp>

#include "core/philox.hpp"

#include <cstdint>
#include <cstring>

namespace dnnx::detail {

/// fwd: writes dst.
struct FillArgs {
  Tensor* dst = nullptr;
  random::DrawParams params;  ///< the distribution in f32 (draw_params)
  std::uint64_t seed = 0;     ///< the generator's seed
  std::uint64_t offset = 0;   ///< the first Philox block of the call
};

/// The f32 parameters every backend draws `distribution` with: for trunc_normal, PyTorch's
/// formulation (a uniform on [2 Phi(alpha) - 1, 2 Phi(beta) - 1), its erfinv scaled by std sqrt(2)
/// and shifted by mean, clamped to [a, b]), with Phi computed here in double. `params` must have
/// passed FillParams::validate.
random::DrawParams draw_params(Distribution distribution, const FillParams& params);

/// The memory order of a dense tensor of `dims` in `layout` (rank 1 to 5).
random::Geometry geometry_of(const Dims& dims, Layout layout);

/// Stores `value` as element `offset` of a dense host buffer of `dtype` (f32, f16, bf16), f16 and
/// bf16 rounded to nearest even by the shared code of philox.hpp (Note [bit-identical draws]).
inline void store_drawn(void* base, std::int64_t offset, DType dtype, float value) {
  if (dtype == DType::f32) {
    std::memcpy(static_cast<float*>(base) + offset, &value, sizeof value);
    return;
  }
  const std::uint16_t bits =
      dtype == DType::f16 ? random::to_half_bits(value) : random::to_bf16_bits(value);
  std::memcpy(static_cast<std::uint16_t*>(base) + offset, &bits, sizeof bits);
}

}  // namespace dnnx::detail
