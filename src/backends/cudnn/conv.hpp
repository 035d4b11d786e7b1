#pragma once
// The cudnn backend's convolution: candidate lists (legacy algorithms and graph-API engines) and
// plans, both cached per backend instance.

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>

namespace dnnx::cudnn {

std::unique_ptr<detail::ConvBackend> make_conv_backend(std::shared_ptr<Runtime> runtime);

}  // namespace dnnx::cudnn
