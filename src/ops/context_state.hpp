#pragma once
// What Contexts share: one backend instance per (backend, device) in the process, its workspace,
// and the per-call fast path in front of the choice cache.

#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>

#include "core/backend.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace dnnx::detail {

/// A resolved conv call: valid while the options and the choice cache it came from are unchanged.
struct ConvCallEntry {
  TuneOptions options;
  const ChoiceCache* cache = nullptr;
  std::uint64_t cache_generation = 0;
  std::shared_ptr<const Choice> choice;
  std::shared_ptr<ConvPlan> plan;
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
  /// At least `bytes` of scratch on the backend's device; grows, never shrinks. Call with mutex()
  /// held; valid until the next call. Throws Error(OutOfMemory).
  Workspace workspace(std::size_t bytes);

  /// The conv fast path (guarded by mutex()).
  std::unordered_map<ConvKey, ConvCallEntry, ConvKeyHash>& conv_calls() {
    return conv_calls_;
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::mutex mutex_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::unordered_map<ConvKey, ConvCallEntry, ConvKeyHash> conv_calls_;
};

/// The process-wide state for (backend, device); created on first use. `backend` is concrete.
std::shared_ptr<ContextState> shared_state(BackendKind backend, int device);

}  // namespace dnnx::detail
