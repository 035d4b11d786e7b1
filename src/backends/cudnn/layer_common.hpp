#pragma once
// What the cudnn backend's layer ops share (pool.cpp, batch_norm.cpp, conv_fused.cpp) beyond
// core/layer_backend.hpp: the error context of a layer op on this backend, the pointer checks of a
// plan's execute(), and the backend class on this backend's Runtime.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "backends/cudnn/runtime.hpp"
#include "core/layer_backend.hpp"
#include "core/op_backend.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace dnnx::cudnn {

/// The data of a tensor a plan needs; throws InvalidArgument "<role> is null" when the tensor or
/// its data is null.
void* data_of(const Tensor* tensor, const char* role, const ErrorContext& context);

/// A layer op's backend on one Runtime: the candidates of a (desc, direction) are listed once and
/// kept, plans are built once (ListedOpBackend); errors name backend "cudnn" and the op.
/// Subclasses construct it as RuntimeLayerBackend(BackendKind::cudnn, runtime) and give enumerate() and
/// build().
template <typename Desc, typename Args, typename Candidate>
using LayerBackend = detail::RuntimeLayerBackend<Desc, Args, Candidate, Runtime>;

}  // namespace dnnx::cudnn
