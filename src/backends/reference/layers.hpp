#pragma once
// Factories of this backend's op implementations (internal to this folder), one per op the op
// table (include/dnnx/op_table.hpp) marks as implemented by the reference backend; each is defined
// in <op>.cpp. `built` holds the ops built before it, in table order (the fused convolution runs
// the unfused candidates' convolution through the conv backend).

#include "core/backend.hpp"

#include <memory>

namespace dnnx::reference {

#define DNNX_REFERENCE_FACTORY(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(reference, std::unique_ptr<detail::OpTypes<OpKind::kind>::Interface>                \
                            make_##kind##_backend(const detail::OpBackends& built);)
DNNX_OP_TABLE(DNNX_REFERENCE_FACTORY)
#undef DNNX_REFERENCE_FACTORY

}  // namespace dnnx::reference
