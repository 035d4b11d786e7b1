#pragma once
// dnnx's own elementwise activations on the cpu, the cpu backend's cpu:kernel:act candidates
// (activation.cpp): every kind and dtype, any layout (elementwise over the dense buffer), in place
// or not, at either simd level (Note [simd levels]); Note [cpu activation kernel] in
// activation_kernel.cpp.

#include <dnnx/ops/activation.hpp>

#include "backends/onednn/layer_simd.hpp"

#include <cstdint>

namespace dnnx::onednn::act {

/// Which forward tensor a backward pass takes the derivative from.
enum class From : std::uint8_t {
  src,  ///< f'(x) from the forward input (every kind)
  dst,  ///< f'(x) as a function of y = f(x) (Note [backward from dst] in activation_desc.cpp)
};

/// Whether backward can take the derivative of `desc` from `from`; when not, `why` says so.
bool backward_supported(const ActivationDesc& desc, From from, std::string* why = nullptr);

/// dst[i] = f(src[i]) for the `count` elements of dense buffers of desc.dtype; `dst` may be `src`
/// (in place). Throws Internal if this CPU cannot run `level`.
void forward(const ActivationDesc& desc, simd::Level level, const void* src, void* dst,
             std::int64_t count);

/// diff_src[i] = diff_dst[i] f'(x_i), the derivative taken from `data` (the forward's src or dst,
/// as `from` says; not read for the identity); `diff_src` may be `diff_dst` (in place). Throws
/// Internal if this CPU cannot run `level` and Unsupported where backward_supported() is false.
void backward(const ActivationDesc& desc, simd::Level level, From from, const void* data,
              const void* diff_dst, void* diff_src, std::int64_t count);

}  // namespace dnnx::onednn::act
