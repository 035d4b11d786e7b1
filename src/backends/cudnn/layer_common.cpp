#include "backends/cudnn/layer_common.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

namespace dnnx::cudnn {

void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return tensor->data();
}

}  // namespace dnnx::cudnn
