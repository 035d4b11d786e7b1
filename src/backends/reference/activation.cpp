// Scaffolding (core/scaffold.hpp): replaced by this op's implementation.

#include "backends/reference/layers.hpp"
#include "core/scaffold.hpp"

namespace dnnx::reference {

std::unique_ptr<detail::ActivationBackend> make_activation_backend() {
  return std::make_unique<detail::NoCandidates<ActivationDesc, detail::ActivationArgs>>();
}

}  // namespace dnnx::reference
