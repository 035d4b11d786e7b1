#pragma once
// The reference backend's convolution (internal to this folder).

#include "core/backend.hpp"

#include <memory>

namespace dnnx::reference {

/// The one-candidate ConvBackend ("reference:direct") of the reference backend.
std::unique_ptr<detail::ConvBackend> make_conv_backend();

}  // namespace dnnx::reference
