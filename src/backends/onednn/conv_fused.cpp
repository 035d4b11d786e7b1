// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/onednn/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::onednn {

std::unique_ptr<detail::ConvFusedBackend> make_conv_fused_backend(std::shared_ptr<Runtime> runtime, detail::ConvBackend& conv) {
  return std::make_unique<detail::NoCandidates<ConvFusedDesc, detail::ConvFusedArgs>>();
}

}  // namespace dnnx::onednn
