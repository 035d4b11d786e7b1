#pragma once
// Where dnnx's own convolution kernels (kernels/depthwise.hpp, kernels/grouped.hpp,
// kernels/narrow.hpp) queue their launches.

#include <cuda_runtime_api.h>

namespace dnnx::cudnn::kernels {

/// A stream, and whether the kernels queued on it may begin while the stream's previous kernel
/// finishes (programmatic stream serialization, compute capability 9.0 and later: Note
/// [dependent launches] in common.cuh). Either way every kernel waits for the grids before it
/// to complete before it touches memory, so the results are the same.
struct Queue {
  cudaStream_t stream = nullptr;
  bool dependent = false;
};

}  // namespace dnnx::cudnn::kernels
