#pragma once
// The cpu backend's ConvBackend (internal to this folder).

#include "backends/onednn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>

namespace dnnx::onednn {

/// The conv implementations of one backend instance: candidate lists and plans are built once per
/// (desc, direction[, id]) and cached; they run on `runtime`'s engine and stream.
std::unique_ptr<detail::ConvBackend> make_conv_backend(std::shared_ptr<Runtime> runtime);

}  // namespace dnnx::onednn
