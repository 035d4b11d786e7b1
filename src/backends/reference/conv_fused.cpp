// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/reference/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::reference {

std::unique_ptr<detail::ConvFusedBackend> make_conv_fused_backend(detail::ConvBackend& conv) {
  return std::make_unique<detail::NoCandidates<ConvFusedDesc, detail::ConvFusedArgs>>();
}

}  // namespace dnnx::reference
