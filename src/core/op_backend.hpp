#pragma once
// The shape every op's backend interface takes (STYLE.md "define an op once"): a backend lists the
// candidates for (desc, direction) before anything runs, and hands out plans — descriptors and
// primitives built once, then executed many times. The op layer (src/ops/dispatch.hpp) drives any
// OpBackend through src/tune the same way, whatever the op.
//
// Note [directions of single-backward ops]
// Pooling, activations, softmax, cross-entropy, batch-norm and tensor add have one backward pass,
// the gradient w.r.t. their input. It is Direction::bwd_data, so TuneOptions::bwd_data (and
// DNNX_<OP>_BWD_ALGO) is its policy; Direction::bwd_weights is not a direction of these ops
// (batch-norm's diff_scale / diff_shift come out of the same backward pass).

#include <dnnx/algo.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dnnx::detail {

/// Scratch memory handed to an implementation for one call.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// A ready-to-run implementation of one (desc, direction, candidate).
template <typename Args>
class OpPlan {
 public:
  virtual ~OpPlan() = default;
  /// The candidate this plan runs (workspace_bytes is exact for this plan).
  virtual const AlgoInfo& algo() const = 0;
  /// Runs the computation on validated tensors. `workspace.bytes` >= algo().workspace_bytes.
  virtual void execute(const Args& args, Workspace workspace) = 0;
};

/// A backend's implementations of one op.
template <typename Desc, typename Args>
class OpBackend {
 public:
  virtual ~OpBackend() = default;
  /// Every candidate for (desc, direction) in priority order, supported or not (with the reason),
  /// without running anything. The first supported entry is the backend's heuristic choice.
  /// Ids are stable across processes for the same library versions and machine.
  virtual std::vector<AlgoInfo> list(const Desc& desc, Direction direction) = 0;
  /// The plan for candidate `id` (built on first request, then served from the backend's cache).
  /// Throws Error(Unsupported) naming the reason if `id` cannot run `desc`, Error(InvalidArgument)
  /// if `id` is not a candidate at all.
  virtual std::shared_ptr<OpPlan<Args>> plan(const Desc& desc, Direction direction,
                                             const std::string& id) = 0;
  /// Called before an exhaustive search with the ids it may run: a backend whose plans are costly
  /// to build can build them ahead, e.g. on several host threads. Failures are left for plan() to
  /// report. The default builds nothing.
  virtual void prepare(const Desc& desc, Direction direction,
                       const std::vector<std::string>& ids) {}
};

/// Plans of one op on one backend instance, keyed by (desc, direction, id); thread-safe. Building
/// happens outside the lock, so two threads asking for the same new plan may both build it (the
/// first stored wins); a plan is never built twice by one thread.
template <typename Desc, typename Args>
class PlanCache {
 public:
  using Plan = OpPlan<Args>;
  std::shared_ptr<Plan> get_or_build(const Desc& desc, Direction direction, const std::string& id,
                                     const std::function<std::shared_ptr<Plan>()>& build) {
    const std::string key = desc.key() + " | " + std::to_string(static_cast<int>(direction)) +
                            " | " + id;
    {
      std::lock_guard lock(mutex_);
      if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    }
    std::shared_ptr<Plan> plan = build();
    std::lock_guard lock(mutex_);
    return plans_.emplace(key, std::move(plan)).first->second;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    plans_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
};

}  // namespace dnnx::detail
