#pragma once
// Replays a plan's launches as a CUDA graph when it is called again on the same memory.
//
// Note [graph replay]
// cudnnBackendExecute costs 5-8 us of host time per call on an H100/H200 host, and a legacy
// cudnnConvolution* call 25-45 us, most of it cuDNN's own bookkeeping; the kernels of a small
// convolution take less. When a plan is called with the same pointers (tensors and workspace) as
// on its previous call - a layer on preallocated buffers, a timing loop - its launches are
// captured once into a CUDA graph on the backend's stream and replayed with cudaGraphLaunch,
// which skips that bookkeeping. A plan keeps graphs for its last few pointer sets (slots), as one
// plan serves every layer of a network with the same desc (ResNet-50 runs some convolution plans
// five times a step, each on its own tensors, and a caching allocator hands a layer the same
// memory step after step): each layer's pointers replay their own graph. Pointers seen once run
// directly and take a slot, evicting the least recently used; a capture that fails (an engine
// doing something graphs cannot hold) turns replay off for that plan. Switched off with
// DNNX_CUDNN_GRAPHS=0. Inside a capture of the caller's, the launches run directly (Note [inside a
// caller's capture] in launch_graph.cpp).
//
// Note [graphs that do not pay]
// A capture and its instantiation cost far more host time than one direct launch, so a graph pays
// only when it is replayed several times. Pointer sets that each come back once and then not
// again before the plan's slots have moved on (a caller's allocator that hands a layer one of many
// addresses from step to step) make every second sighting a capture that is never replayed. So a
// plan counts its captures and replays, and once it has captured captures_before_judging graphs
// replayed fewer than replays_per_capture times each on average, it runs its launches directly
// from then on, as after a failed capture. A plan on stable pointers stops capturing once its
// slots are filled and is never judged so.

// Note [no capture in a repeated timing run]
// The timing gate repeats a run whose queuing outlasted its timeout (Note [gated timing] in
// backend.cpp). Such a repeat is a plan's second call on the same memory, which used to capture
// its graph: for a plan that queues thousands of kernels per call the gate times out on every
// call, so an exhaustive search captured every such candidate on its first reading. On an H200,
// cuDNN's engine 1 on a depthwise 3x3 of 576 channels (f16 NHWC) queues 2880 kernels per call
// and instantiating their graph took 1.4-2.1 s of host time (4.8 s in f32; engine 4's 4032
// nodes, 46-63 ms): searches of MobileNetV2's depthwise layers took 4-11 s, nearly all of it in
// such captures (docs/benchmarks.md, "Search time"). So while the gate repeats a run
// (CapturePause), a plan's launches run directly unless a graph of theirs exists already: a new
// pointer set takes no slot, and no capture is made. A candidate too slow to be chosen is read on
// its first runs and never captured; one that is timed again captures on its next call.

#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/runtime.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dnnx::cudnn {

/// A callable borrowed for one call, without a copy: a plan's launch runs on every call, and a
/// std::function holding its captures would allocate each time.
class LaunchRef {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, LaunchRef>) LaunchRef(
      F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda at every call site
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object) { (*static_cast<std::remove_reference_t<F>*>(object))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void* object_;
  void (*call_)(void*);
};

/// While one lives on this thread, LaunchGraph::run makes no capture and takes no slot (Note [no
/// capture in a repeated timing run]); graphs captured before still replay.
class CapturePause {
 public:
  CapturePause();
  ~CapturePause();
  CapturePause(const CapturePause&) = delete;
  CapturePause& operator=(const CapturePause&) = delete;
  static bool active();
};

class LaunchGraph {
 public:
  /// Runs `launch` (which queues work on `stream`), directly or by replaying the graph captured
  /// from it for `key`: every pointer the launch bakes in (tensors, parameters, workspace).
  /// Replays only with settings.graphs; with settings.verbose a failed capture is reported once.
  /// Throws like `launch` does.
  void run(const Settings& settings, cudaStream_t stream, std::initializer_list<const void*> key,
           LaunchRef launch, const ErrorContext& context);

  /// Pointer sets a plan keeps graphs (or a first sighting) for.
  static constexpr std::size_t slots = 16;
  /// Captures after which a plan whose graphs were replayed fewer than replays_per_capture times
  /// each on average stops capturing (Note [graphs that do not pay]).
  static constexpr std::uint64_t captures_before_judging = 2 * slots;
  static constexpr std::uint64_t replays_per_capture = 4;

 private:
  struct Slot {
    std::vector<const void*> key;
    std::uint64_t used = 0;  // the call counter when last used
    GraphExec exec;          // null until the key's second call
  };
  /// The graph of `launch`, or null with `why` set.
  static GraphExec capture(cudaStream_t stream, LaunchRef launch, std::string& why);

  std::vector<Slot> slots_;
  std::uint64_t calls_ = 0;
  std::uint64_t captures_ = 0, replays_ = 0;
  bool disabled_ = false;  // a capture failed, or captures did not pay: run directly from now on
};

}  // namespace dnnx::cudnn
