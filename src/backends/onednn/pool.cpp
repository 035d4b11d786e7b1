// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/onednn/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::onednn {

std::unique_ptr<detail::PoolBackend> make_pool_backend(std::shared_ptr<Runtime> runtime) {
  return std::make_unique<detail::NoCandidates<PoolDesc, detail::PoolArgs>>();
}

}  // namespace dnnx::onednn
