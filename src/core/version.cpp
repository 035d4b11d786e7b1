#include <dnnx/version.hpp>

namespace dnnx {

std::string_view version() { return DNNX_VERSION_STRING; }

}  // namespace dnnx
