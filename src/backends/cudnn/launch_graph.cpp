#include "backends/cudnn/launch_graph.hpp"

#include "backends/cudnn/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <chrono>
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

}  // namespace

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
  if (found == slots_.end()) {
    // A first sighting runs directly and takes a slot: a one-off call never pays for a capture.
    Slot* slot = nullptr;
    if (slots_.size() < slots) {
      slot = &slots_.emplace_back();
    } else {
      slot = &*std::min_element(slots_.begin(), slots_.end(),
                                [](const Slot& a, const Slot& b) { return a.used < b.used; });
      *slot = Slot{};
    }
    slot->key.assign(key.begin(), key.end());
    slot->used = calls_;
    run_direct(*slot, launch);
    return;
  }
  found->used = calls_;
  if (!found->exec) {
    // Note [graphs of many launches]: direct calls first, and the capture only after one that
    // took at most many_launches_ms of host time.
    if (found->direct < direct_calls || found->direct_ms > many_launches_ms) {
      run_direct(*found, launch);
      return;
    }
    // The capture's launch is this call's.
    std::string why;
    GraphExec exec = capture(stream, launch, why);
    if (!exec) {
      disable(settings, context, "capturing its launches into a CUDA graph failed: " + why);
      launch();
      return;
    }
    found->exec = std::move(exec);
    if (++captures_ >= captures_before_judging && replays_ < replays_per_capture * captures_) {
      // Note [graphs that do not pay]: this capture's launch is this call's; none after it.
      DNNX_CUDNN_CHECK(cudaGraphLaunch(found->exec.get(), stream), context,
                       "replaying the captured plan");
      disable(settings, context,
              detail::cat(captures_, " CUDA graphs captured, replayed ", replays_,
                          " times (Note [graphs that do not pay])"));
      return;
    }
  } else {
    ++replays_;
  }
  DNNX_CUDNN_CHECK(cudaGraphLaunch(found->exec.get(), stream), context,
                   "replaying the captured plan");
}

void LaunchGraph::run_direct(Slot& slot, LaunchRef launch) {
  const auto start = std::chrono::steady_clock::now();
  launch();
  slot.direct_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++slot.direct;
}

void LaunchGraph::disable(const Settings& settings, const ErrorContext& context,
                          const std::string& why) {
  if (settings.verbose) {
    std::cerr << "dnnx: cudnn: " << context.op << " [" << context.implementation << "]: " << why
              << "; the plan runs its launches directly from now on (Note [graph replay])\n";
  }
  disabled_ = true;
  slots_.clear();
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
  std::size_t nodes = 0;
  if (cudaGraphGetNodes(graph.get(), nullptr, &nodes) != cudaSuccess) {
    cudaGetLastError();
    nodes = 0;
  }
  if (nodes > max_nodes) {
    why = "its capture holds " + std::to_string(nodes) + " launches, more than " +
          std::to_string(max_nodes) + " (Note [graphs of many launches])";
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
