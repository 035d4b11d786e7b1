#pragma once
// Factory of the cpu backend (oneDNN 3.x). The only header of this folder the op layer includes;
// it names no oneDNN type.

#include "core/backend.hpp"

#include <memory>
#include <string>

namespace dnnx::onednn {

/// True when oneDNN can create a CPU engine here; otherwise `why` gets the reason.
bool available(std::string* why);
/// "oneDNN 3.2.0 (cpu isa avx512_core_amx, 2 threads)".
std::string version();
/// The cpu backend on the host (device index must be 0).
std::unique_ptr<detail::Backend> make_backend(int device);

}  // namespace dnnx::onednn
