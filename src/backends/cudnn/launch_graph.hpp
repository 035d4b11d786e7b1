#pragma once
// Replays a plan's launches as a CUDA graph when it is called again on the same memory.
//
// Note [graph replay]
// cudnnBackendExecute costs 5-8 us of host time per call on an H100/H200 host, and a legacy
// cudnnConvolution* call 25-45 us, most of it cuDNN's own bookkeeping; the kernels of a small
// convolution take less. When a plan is called again with the same pointers (tensors and
// workspace) - a layer on preallocated buffers, a timing loop - its launches are captured once
// (on the third call: Note [graphs of many launches]) into a CUDA graph on the backend's stream
// and replayed with cudaGraphLaunch,
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
// addresses from step to step) make every third sighting a capture that is never replayed. So a
// plan counts its captures and replays, and once it has captured captures_before_judging graphs
// replayed fewer than replays_per_capture times each on average, it runs its launches directly
// from then on, as after a failed capture. A plan on stable pointers stops capturing once its
// slots are filled and is never judged so.
//
// Note [graphs of many launches]
// Some of cuDNN's engines queue thousands of kernels per call: on an H200, engine 1 on a
// depthwise 3x3 of 576 channels (f16 NHWC, batch 1 to 128) captured 2880 nodes, and
// cudaGraphInstantiate took 1.4-2.1 s (4.8 s in f32), after a capture of 80-300 ms; engine 4's
// 4032 nodes took 46-63 ms. An exhaustive search runs such a candidate a second time as soon as
// the timing gate retries its first run (Note [gated timing] in backend.cpp), which made single
// candidates cost seconds of host time and searches of MobileNetV2's depthwise layers 4-11 s
// (docs/benchmarks.md, "Search time"). So a key is captured on its third call at the earliest,
// and only when the direct call before took at most many_launches_ms of host time (over a
// hundred times a graph-API engine's 5-8 us, twenty times a legacy call's): a plan of many
// launches keeps running them directly, each call measured again, so that one slow call (the
// host busy elsewhere) only puts the capture off. A capture of more than max_nodes nodes is not
// instantiated, and turns replay off for the plan, as a failed capture does.

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
  /// Direct calls of a key before its capture, the host time of a direct call above which the
  /// next call does not capture either, and the most nodes a graph is instantiated with (Note
  /// [graphs of many launches]).
  static constexpr int direct_calls = 2;
  static constexpr double many_launches_ms = 1.0;
  static constexpr std::size_t max_nodes = 256;

 private:
  struct Slot {
    std::vector<const void*> key;
    std::uint64_t used = 0;  // the call counter when last used
    int direct = 0;          // direct calls made with this key so far
    double direct_ms = 0;    // host time of the last of them
    GraphExec exec;          // null until the key's capture
  };
  /// Runs `launch` directly for `slot` and records its host time.
  static void run_direct(Slot& slot, LaunchRef launch);
  /// Turns replay off for this plan (verbose: says why).
  void disable(const Settings& settings, const ErrorContext& context, const std::string& why);
  /// The graph of `launch`, or null with `why` set.
  static GraphExec capture(cudaStream_t stream, LaunchRef launch, std::string& why);

  std::vector<Slot> slots_;
  std::uint64_t calls_ = 0;
  std::uint64_t captures_ = 0, replays_ = 0;
  bool disabled_ = false;  // a capture failed, or captures did not pay: run directly from now on
};

}  // namespace dnnx::cudnn
