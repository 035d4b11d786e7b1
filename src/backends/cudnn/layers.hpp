#pragma once
// Factories of this backend's op implementations (internal to this folder), one per op the op
// table (include/dnnx/op_table.hpp) marks as implemented by the cudnn backend; each is defined in
// <op>.cpp. Every op shares the backend instance's `runtime`; `built` holds the ops built before
// it, in table order (the fused convolution runs the unfused candidates' convolution through the
// conv backend).

#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>

namespace dnnx::cudnn {

#define DNNX_CUDNN_FACTORY(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(cudnn, std::unique_ptr<detail::OpTypes<OpKind::kind>::Interface>                \
                      make_##kind##_backend(std::shared_ptr<Runtime> runtime,               \
                                            const detail::OpBackends& built);)
DNNX_OP_TABLE(DNNX_CUDNN_FACTORY)
#undef DNNX_CUDNN_FACTORY

}  // namespace dnnx::cudnn
