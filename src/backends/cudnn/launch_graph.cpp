#include "backends/cudnn/launch_graph.hpp"

#include "backends/cudnn/check.hpp"

#include <algorithm>

namespace dnnx::cudnn {
namespace {

// Note [inside a caller's capture]
// A caller may capture dnnx's work into a CUDA graph of its own (torch.cuda.graph, a
// cudaStreamBeginCapture on the stream of Context::with_stream). Its capture then records the
// plan's launches as they are: a capture of our own cannot begin on a stream that is already
// capturing, and replaying our graph there would make the caller's graph depend on an executable
// graph that the next pointer change destroys. So while the stream captures, the launch runs
// directly and the replay state (key_, repeats_, exec_) stays as it was, for the calls after the
// capture. A stream whose status cannot be read (the legacy stream while another stream
// captures) is treated the same way.
bool inside_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

void LaunchGraph::run(bool enabled, cudaStream_t stream, std::initializer_list<const void*> key,
                      LaunchRef launch, const ErrorContext& context) {
  if (!enabled || disabled_ || inside_capture(stream)) {
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
