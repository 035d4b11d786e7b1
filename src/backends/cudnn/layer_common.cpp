#include "backends/cudnn/layer_common.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <utility>

namespace dnnx::cudnn {

void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->data() == nullptr)
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return tensor->data();
}

AlgoInfo candidate_info(const char* id, std::string name, std::string reason,
                        std::vector<std::string> notes, std::size_t workspace) {
  AlgoInfo info;
  info.id = id;
  info.name = std::move(name);
  info.reason = std::move(reason);
  info.supported = info.reason.empty();
  info.workspace_bytes = info.supported ? workspace : 0;
  info.deterministic = true;
  info.notes = std::move(notes);
  return info;
}

Dims legacy_dims(const Dims& dims) {
  switch (dims.rank()) {
    case 1: return Dims{1, 1, 1, dims[0]};
    case 2: return Dims{dims[0], dims[1], 1, 1};
    case 3: return Dims{dims[0], dims[1], 1, dims[2]};
    default: return dims;
  }
}

TensorDescriptor legacy_tensor_descriptor(const Dims& dims, DType dtype, Layout layout,
                                          const ErrorContext& context, const char* role) {
  // Rank 1 and 2 tensors are row-major in either layout, which is what channels_first lifts to.
  const Layout effective = dims.rank() <= 2 ? Layout::channels_first : layout;
  const Dims shape = legacy_dims(dims);
  const Dims strides = dense_strides(shape, effective);
  std::array<int, 5> sizes{}, steps{};
  for (int i = 0; i < shape.rank(); ++i) {
    sizes[static_cast<std::size_t>(i)] = static_cast<int>(shape[i]);
    steps[static_cast<std::size_t>(i)] = static_cast<int>(strides[i]);
  }
  TensorDescriptor tensor = make_tensor_descriptor(context);
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(tensor.get(), data_type(dtype), shape.rank(),
                                              sizes.data(), steps.data()),
                   context, detail::cat("describing ", role));
  return tensor;
}

}  // namespace dnnx::cudnn
