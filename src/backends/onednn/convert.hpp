#pragma once
// Elementwise conversions between f32, f16 and bf16 for the cpu backend's f32-compute candidates
// (Note [f32 compute convolution] in conv_list.cpp). No oneDNN type: the tests call it directly.

#include <dnnx/tensor.hpp>

#include <cstdint>

namespace dnnx::onednn {

/// How convert() converts f16 (Note [dtype conversions] in convert.cpp).
enum class ConvertLevel : std::uint8_t {
  scalar,  ///< detail::half_to_float / float_to_half, any x86-64
  f16c,    ///< F16C's vcvtph2ps / vcvtps2ph, 8 values at a time
};

/// The fastest level this CPU runs.
ConvertLevel best_convert_level();

/// Converts `count` contiguous values of `from_type` at `from` into `to_type` at `to`, each of
/// f32, f16 or bf16, multiplied by `scale` in f32 on the way (exact when it is 1), rounding to
/// nearest even (Note [dtype conversions] in convert.cpp). Large counts are split over the
/// backend's threads (Note [loop threads]); the result does not depend on how.
void convert(const void* from, DType from_type, void* to, DType to_type, std::int64_t count,
             float scale = 1.0f, ConvertLevel level = best_convert_level());

}  // namespace dnnx::onednn
