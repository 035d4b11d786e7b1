// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/reference/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::reference {

std::unique_ptr<detail::BatchNormBackend> make_batch_norm_backend() {
  return std::make_unique<detail::NoCandidates<BatchNormDesc, detail::BatchNormArgs>>();
}

}  // namespace dnnx::reference
