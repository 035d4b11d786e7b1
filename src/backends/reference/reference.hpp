#pragma once
// Factory of the reference backend: plain loops, f64 accumulation, every dtype and layout.

#include "core/backend.hpp"

#include <memory>

namespace dnnx::reference {

/// A host backend whose conv has exactly one candidate, "reference:direct".
std::unique_ptr<detail::Backend> make_backend();

}  // namespace dnnx::reference
