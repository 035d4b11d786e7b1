#pragma once
// Factories of this backend's implementations of the ops other than convolution (internal to this
// folder); each is defined in <op>.cpp.

#include "backends/onednn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>

namespace dnnx::onednn {

std::unique_ptr<detail::PoolBackend> make_pool_backend(std::shared_ptr<Runtime> runtime);
std::unique_ptr<detail::ActivationBackend> make_activation_backend(std::shared_ptr<Runtime> runtime);
std::unique_ptr<detail::SoftmaxBackend> make_softmax_backend(std::shared_ptr<Runtime> runtime);
std::unique_ptr<detail::CrossEntropyBackend> make_cross_entropy_backend(std::shared_ptr<Runtime> runtime);
std::unique_ptr<detail::BatchNormBackend> make_batch_norm_backend(std::shared_ptr<Runtime> runtime);
std::unique_ptr<detail::AddBackend> make_add_backend(std::shared_ptr<Runtime> runtime);
/// Fused forward convolution; `conv` (this backend's, outliving the result) runs the unfused
/// candidates' convolution.
std::unique_ptr<detail::ConvFusedBackend> make_conv_fused_backend(std::shared_ptr<Runtime> runtime, detail::ConvBackend& conv);

}  // namespace dnnx::onednn
