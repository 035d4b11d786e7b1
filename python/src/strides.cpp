// normalised_strides (bindings.hpp): shared by the array arguments of dnnx._dnnx and the PyTorch
// tensors of dnnx._torch_ext.

#include "bindings.hpp"

namespace dnnx::python {

Dims normalised_strides(const Dims& dims, const Dims& strides) {
  if (dims.rank() == 0) return strides;
  for (Layout layout : {Layout::channels_first, Layout::channels_last}) {
    Dims dense;
    try {
      dense = dense_strides(dims, layout);
    } catch (const Error&) {
      return strides;  // too large: Tensor::view names the problem
    }
    bool matches = true;
    for (int i = 0; i < dims.rank(); ++i)
      matches = matches && (dims[i] == 1 || dims[i] == 0 || strides[i] == dense[i]);
    if (matches) return dense;
  }
  return strides;
}

}  // namespace dnnx::python
