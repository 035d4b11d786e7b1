#pragma once
// Replays a plan's launches as a CUDA graph when it is called again on the same memory.
//
// Note [graph replay]
// cudnnBackendExecute costs 5-8 us of host time per call on an H100/H200 host, and a legacy
// cudnnConvolution* call 25-45 us, most of it cuDNN's own bookkeeping; the kernels of a small
// convolution take less. When a plan is called with the same pointers (tensors and workspace) as
// on its previous call - a layer on preallocated buffers, a timing loop - its launches are
// captured once into a CUDA graph on the backend's stream and replayed with cudaGraphLaunch,
// which skips that bookkeeping. New pointers drop the graph and run directly; a capture that
// fails (an engine doing something graphs cannot hold) turns replay off for that plan. Switched
// off with DNNX_CUDNN_GRAPHS=0.

#include "backends/cudnn/handles.hpp"

#include <array>
#include <functional>

namespace dnnx::cudnn {

class LaunchGraph {
 public:
  using Key = std::array<const void*, 4>;  ///< the three tensors and the workspace

  /// Runs `launch` (which queues work on `stream`), directly or by replaying the graph captured
  /// from it for `key`. Throws like `launch` does.
  void run(bool enabled, cudaStream_t stream, const Key& key, const std::function<void()>& launch,
           const ErrorContext& context);

 private:
  bool capture(cudaStream_t stream, const std::function<void()>& launch);

  Key key_{};
  int repeats_ = 0;        // consecutive calls with key_
  bool disabled_ = false;  // a capture failed: run directly from now on
  GraphExec exec_;
};

}  // namespace dnnx::cudnn
