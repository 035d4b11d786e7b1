// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/reference/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::reference {

std::unique_ptr<detail::PoolBackend> make_pool_backend() {
  return std::make_unique<detail::NoCandidates<PoolDesc, detail::PoolArgs>>();
}

}  // namespace dnnx::reference
