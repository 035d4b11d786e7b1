#include "backends/cudnn/launch_graph.hpp"

#include "backends/cudnn/check.hpp"

#include <algorithm>

namespace dnnx::cudnn {

void LaunchGraph::run(bool enabled, cudaStream_t stream, std::initializer_list<const void*> key,
                      LaunchRef launch, const ErrorContext& context) {
  if (!enabled || disabled_) {
    launch();
    return;
  }
  if (!std::equal(key.begin(), key.end(), key_.begin(), key_.end())) {
    key_.assign(key.begin(), key.end());
    repeats_ = 0;
    exec_.reset();
  }
  // Capture on the second call with the same pointers: a one-off call never pays for it.
  if (!exec_ && ++repeats_ >= 2 && !capture(stream, launch)) disabled_ = true;
  if (!exec_) {
    launch();
    return;
  }
  DNNX_CUDNN_CHECK(cudaGraphLaunch(exec_.get(), stream), context, "replaying the captured plan");
}

bool LaunchGraph::capture(cudaStream_t stream, LaunchRef launch) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool launched = true;
  try {
    launch();
  } catch (const Error&) {
    launched = false;
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &raw);
  Graph graph(raw, "cudaGraph_t");
  if (!launched || ended != cudaSuccess || raw == nullptr) {
    cudaGetLastError();
    return false;
  }
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiate(&exec, graph.get(), 0) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  exec_ = GraphExec(exec, "cudaGraphExec_t");
  return true;
}

}  // namespace dnnx::cudnn
