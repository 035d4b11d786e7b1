#pragma once
// A kernel that holds a stream until the host opens a gate (Note [gated timing] in
// src/backends/cudnn/backend.cpp). No cuDNN types.

#include <cuda_runtime_api.h>

namespace dnnx::cudnn::kernels::gate {

/// Lives in mapped pinned host memory: the host writes `open`, the kernel writes `timed_out`.
struct Gate {
  int open = 0;
  int timed_out = 0;
};

/// Queues on `stream` a one-thread kernel that returns once `gate->open` is non-zero, or after
/// `timeout_ns` nanoseconds of waiting, when it sets `gate->timed_out` to 1 first. `gate` is the
/// device address of mapped pinned host memory. Returns the launch status.
cudaError_t hold(Gate* gate, long long timeout_ns, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::gate
