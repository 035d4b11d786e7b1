#pragma once
// What the cudnn backend's layer ops share (pool.cpp, batch_norm.cpp, conv_fused.cpp) beyond
// core/layer_backend.hpp: the error context of a layer op on this backend, the pointer checks of a
// plan's execute(), legacy tensor descriptors of dense tensors of any rank (add.cpp, reduce.cpp),
// and the backend class on this backend's Runtime.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/layer_backend.hpp"
#include "core/op_backend.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::cudnn {

/// The data of a tensor a plan needs; throws InvalidArgument "<role> is null" when the tensor or
/// its data is null.
void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context);

/// The record of a deterministic candidate: supported with `workspace` bytes when `reason` is
/// empty, else unsupported for `reason` (and no workspace).
AlgoInfo candidate_info(const char* id, std::string name, std::string reason,
                        std::vector<std::string> notes, std::size_t workspace = 0);

/// `dims` of rank 1 to 5 as cuDNN's legacy calls take them, 4-D or 5-D with unit axes added:
/// rank 1 W -> 1x1x1xW, rank 2 N,C -> NxCx1x1, rank 3 N,C,W -> NxCx1xW; which keeps a dense
/// tensor's bytes in either layout.
Dims legacy_dims(const Dims& dims);

/// A legacy tensor descriptor of a dense tensor of `dims` (rank 1 to 5, at most INT_MAX elements)
/// in `layout` (rank 1 and 2 are row-major in either), through legacy_dims. Throws naming `role`
/// when cuDNN rejects it.
TensorDescriptor legacy_tensor_descriptor(const Dims& dims, DType dtype, Layout layout,
                                          const ErrorContext& context, const char* role);

/// A layer op's backend on one Runtime: the candidates of a (desc, direction) are listed once and
/// kept, plans are built once (ListedOpBackend); errors name backend "cudnn" and the op.
/// Subclasses construct it as RuntimeLayerBackend(BackendKind::cudnn, runtime) and give enumerate() and
/// build().
template <typename Desc, typename Args, typename Candidate>
using LayerBackend = detail::RuntimeLayerBackend<Desc, Args, Candidate, Runtime>;

}  // namespace dnnx::cudnn
