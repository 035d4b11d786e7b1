#include "backends/cudnn/launch_graph.hpp"

#include "backends/cudnn/check.hpp"

#include <algorithm>
#include <iostream>
#include <string>

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

thread_local int capture_pauses = 0;

}  // namespace

CapturePause::CapturePause() { ++capture_pauses; }
CapturePause::~CapturePause() { --capture_pauses; }
bool CapturePause::active() { return capture_pauses > 0; }

void LaunchGraph::run(const Settings& settings, cudaStream_t stream,
                      std::initializer_list<const void*> key, LaunchRef launch,
                      const ErrorContext& context) {
  if (!settings.graphs || disabled_ || inside_capture(stream)) {
    launch();
    return;
  }
  ++calls_;
  const auto found = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& slot) {
    return std::equal(key.begin(), key.end(), slot.key.begin(), slot.key.end());
  });
  // Note [no capture in a repeated timing run]: only an existing graph replays.
  if (CapturePause::active() && (found == slots_.end() || !found->exec)) {
    launch();
    return;
  }
  if (found == slots_.end()) {
    // A first sighting runs directly and takes a slot: a one-off call never pays for a capture.
    Slot* slot = nullptr;
    if (slots_.size() < slots) {
      slot = &slots_.emplace_back();
    } else {
      slot = &*std::min_element(slots_.begin(), slots_.end(),
                                [](const Slot& a, const Slot& b) { return a.used < b.used; });
      slot->exec.reset();
    }
    slot->key.assign(key.begin(), key.end());
    slot->used = calls_;
    launch();
    return;
  }
  found->used = calls_;
  if (!found->exec) {
    // The second call with these pointers: capture, and the capture's launch is this call's.
    std::string why;
    GraphExec exec = capture(stream, launch, why);
    if (!exec) {
      if (settings.verbose) {
        std::cerr << "dnnx: cudnn: " << context.op << " [" << context.implementation
                  << "]: capturing its launches into a CUDA graph failed (" << why
                  << "); the plan runs them directly from now on (Note [graph replay])\n";
      }
      disabled_ = true;
      slots_.clear();
      launch();
      return;
    }
    found->exec = std::move(exec);
    if (++captures_ >= captures_before_judging && replays_ < replays_per_capture * captures_) {
      // Note [graphs that do not pay]: this capture's launch is this call's; none after it.
      if (settings.verbose) {
        std::cerr << "dnnx: cudnn: " << context.op << " [" << context.implementation
                  << "]: " << captures_ << " CUDA graphs captured, replayed " << replays_
                  << " times: the plan runs its launches directly from now on (Note [graphs "
                     "that do not pay])\n";
      }
      disabled_ = true;
      DNNX_CUDNN_CHECK(cudaGraphLaunch(found->exec.get(), stream), context,
                       "replaying the captured plan");
      slots_.clear();
      return;
    }
  } else {
    ++replays_;
  }
  DNNX_CUDNN_CHECK(cudaGraphLaunch(found->exec.get(), stream), context,
                   "replaying the captured plan");
}

GraphExec LaunchGraph::capture(cudaStream_t stream, LaunchRef launch, std::string& why) {
  if (const cudaError_t began = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      began != cudaSuccess) {
    why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(began);
    cudaGetLastError();
    return {};
  }
  bool launched = true;
  try {
    launch();
  } catch (const Error& error) {
    launched = false;
    why = error.what();
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &raw);
  Graph graph(raw, "cudaGraph_t");
  if (!launched || ended != cudaSuccess || raw == nullptr) {
    if (launched) why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
    cudaGetLastError();
    return {};
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t made = cudaGraphInstantiate(&exec, graph.get(), 0); made != cudaSuccess) {
    why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
    cudaGetLastError();
    return {};
  }
  return GraphExec(exec, "cudaGraphExec_t");
}

}  // namespace dnnx::cudnn
