#pragma once
/// \file
/// dnnx's own version.

#include <string_view>

namespace dnnx {

/// Semantic version of this build, e.g. "0.1.0".
std::string_view version();

}  // namespace dnnx
