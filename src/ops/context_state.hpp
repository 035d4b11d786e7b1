#pragma once
// What Contexts share: one backend instance per (backend, device) in the process, its workspace,
// and the per-call fast paths in front of the choice cache (one per op).
//
// The one internal header that tests and benchmarks include to reach past the public API:
// detail::state_of(context) (declared in <dnnx/context.hpp>) gives a context's ContextState, whose
// backend() holds the op backends (Backend::op<OpKind>()), their candidate lists and plans, and
// whose workspace() is the scratch a plan runs with.

#include <dnnx/context.hpp>

#include "core/backend.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <typeindex>
#include <unordered_map>

namespace dnnx::detail {

/// A resolved call of some op: valid while the options and the choice cache it came from are
/// unchanged. `plan` is the op's OpPlan<Args>.
struct CallEntry {
  TuneOptions options;
  const ChoiceCache* cache = nullptr;
  std::uint64_t cache_generation = 0;
  std::shared_ptr<const Choice> choice;
  std::shared_ptr<void> plan;
  /// When the choice lists late plans: the earliest time the call asks again whether one is at
  /// hand (Note [late plans] in src/ops/dispatch.cpp).
  std::chrono::steady_clock::time_point late_check{};
};

class ContextState {
 public:
  explicit ContextState(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {}
  ~ContextState();
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;

  Backend& backend() { return *backend_; }

  /// Serialises execution on this backend instance: the workspace is shared by its calls.
  std::mutex& mutex() { return mutex_; }
  /// At least `bytes` of scratch on the backend's device for a call's plan; grows, shrinking only
  /// after a search (end_search()). Call with mutex() held; valid until the next call. Throws
  /// Error(OutOfMemory).
  Workspace workspace(std::size_t bytes);
  /// The same buffer for the timing runs of a search (Note [search workspace]).
  Workspace search_workspace(std::size_t bytes);
  /// After a search's timing runs: gives back what only the search needed.
  void end_search();

  /// Per-op state of type T (e.g. an op's fast-path map), created on first use. Call with
  /// mutex() held.
  template <typename T>
  T& slot() {
    if (last_slot_type_ == std::type_index(typeid(T))) return *static_cast<T*>(last_slot_);
    std::shared_ptr<void>& stored = slots_[std::type_index(typeid(T))];
    if (!stored) stored = std::make_shared<T>();
    last_slot_type_ = std::type_index(typeid(T));
    last_slot_ = stored.get();
    return *static_cast<T*>(last_slot_);
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::mutex mutex_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::size_t call_bytes_ = 0;  // the most a call's plan has asked of workspace()
  std::unordered_map<std::type_index, std::shared_ptr<void>> slots_;
  // Consecutive calls of one op skip the map lookup.
  std::type_index last_slot_type_ = std::type_index(typeid(void));
  void* last_slot_ = nullptr;
};

// Note [static destruction]
// Statics are destroyed in the reverse order of their construction, so a Tensor or Context held
// by a user's static (or by any static constructed before the library's own first use) would
// otherwise be destroyed after what it uses: a Storage would give its memory back to a destroyed
// allocator (a pure virtual call), a ContextState its workspace. So every process-wide object
// that others point at is created on first use with `new` and never destroyed: the host
// allocator (host_allocator()), every ContextState with its backend instance, allocator, oneDNN
// engine and stream, cuDNN handles and plans (shared_state()), the device-runtime registry
// (core/device.cpp), the cpu backend's loop threads (LoopPool) and the cudnn backend's probe
// (availability()). The process's end reclaims their memory, and leak checkers find them
// reachable through their static pointers. A cudnn backend's device memory and handles are left
// to the driver, as Note [process exit] explains.
// Every other function-local static of the library is trivially destructible (flags, counters,
// function pointers), with one exception: ChoiceCache::global()'s shared pointer, whose cache
// writes pending last-use times to its file when destroyed. Every Context shares ownership of its
// cache and no ContextState holds one, so that cache is destroyed after the last Context that
// uses it, whatever the order, and its destructor may use only itself and what cannot have been
// destroyed before it (no function-local statics with a destructor).

/// The process-wide state for (backend, device, stream); created on first use and never destroyed
/// (Note [static destruction]). `backend` is concrete; `stream` is a caller's CUDA stream or null
/// (the backend's own).
std::shared_ptr<ContextState> shared_state(BackendKind backend, int device, void* stream = nullptr);

}  // namespace dnnx::detail
