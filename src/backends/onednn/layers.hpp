#pragma once
// Factories of this backend's op implementations (internal to this folder), one per op the op
// table (include/dnnx/op_table.hpp) marks as implemented by the cpu backend; each is defined in
// <op>.cpp. Every op shares the backend instance's `runtime`; `built` holds the ops built before
// it, in table order (the fused convolution runs the unfused candidates' convolution through the
// conv backend).

#include "backends/onednn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>

namespace dnnx::onednn {

#define DNNX_ONEDNN_FACTORY(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(cpu, std::unique_ptr<detail::OpTypes<OpKind::kind>::Interface>                \
                      make_##kind##_backend(std::shared_ptr<Runtime> runtime,               \
                                            const detail::OpBackends& built);)
DNNX_OP_TABLE(DNNX_ONEDNN_FACTORY)
#undef DNNX_ONEDNN_FACTORY

}  // namespace dnnx::onednn
