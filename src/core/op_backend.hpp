#pragma once
// The shape every op's backend interface takes (STYLE.md "define an op once"): a backend lists the
// candidates for (desc, direction) before anything runs, and hands out plans — descriptors and
// primitives built once, then executed many times. The op layer (src/ops/dispatch.hpp) drives any
// OpBackend through src/tune the same way, whatever the op.
//
// Note [directions of single-backward ops]
// An op with one backward pass, the gradient w.r.t. its input (the op table's `fwd_bwd` set),
// runs it as Direction::bwd_data, spelled "bwd" in the CLI and in DNNX_ALGO_<OP>_BWD;
// Direction::bwd_weights is not one of its directions (batch-norm's diff_scale / diff_shift come
// out of the same backward pass).

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>

#include "core/strings.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dnnx {
#define DNNX_DECLARE_DESC(kind, Type, ...) struct Type##Desc;
DNNX_OP_TABLE(DNNX_DECLARE_DESC)
#undef DNNX_DECLARE_DESC
}  // namespace dnnx

namespace dnnx::detail {

/// The op whose desc is `Desc`, from the op table: OpOf<PoolDesc>::kind is OpKind::pool.
template <typename Desc>
struct OpOf;
#define DNNX_OP_OF(kind_, Type, ...)                  \
  template <>                                         \
  struct OpOf<Type##Desc> {                           \
    static constexpr OpKind kind = OpKind::kind_;     \
  };
DNNX_OP_TABLE(DNNX_OP_OF)
#undef DNNX_OP_OF

/// The context of errors about one op call: op "<op> <direction>" (e.g. "pool bwd_data", as the
/// dispatcher names it), the desc's repro line, `backend` ("cpu", "cudnn", "reference") and
/// `implementation` (a candidate id, or empty).
inline ErrorContext layer_context(std::string_view backend, std::string_view op,
                                  Direction direction, std::string repro,
                                  std::string implementation) {
  ErrorContext context;
  context.op = cat(op, ' ', to_string(direction));
  context.repro = std::move(repro);
  context.backend = std::string(backend);
  context.implementation = std::move(implementation);
  return context;
}

/// layer_context for (desc, direction) on `backend`, the op named by the op table.
template <typename Desc>
ErrorContext op_context(BackendKind backend, const Desc& desc, Direction direction,
                        std::string implementation = {}) {
  return layer_context(to_string(backend), op_info(OpOf<Desc>::kind).name, direction,
                       desc.repro(direction), std::move(implementation));
}

/// Marks `info` a naive candidate (AlgoInfo::naive): a plain reference loop, noted "reference" and
/// in Theano's family "none".
inline void mark_naive(AlgoInfo& info) {
  info.naive = true;
  if (!info.has_note("reference")) info.notes.emplace_back("reference");
  info.families = {"none"};
}

/// Marks `info` correct only for a limited input range (AlgoInfo::overflow_risk), noted
/// "overflow_risk".
inline void mark_overflow_risk(AlgoInfo& info) {
  info.overflow_risk = true;
  info.notes.emplace_back("overflow_risk");
}

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

/// What every op's backend is, whatever its Desc and Args (Backend keeps them in one table).
class OpBackendBase {
 public:
  virtual ~OpBackendBase() = default;
};

/// A backend's implementations of one op.
template <typename Desc, typename Args>
class OpBackend : public OpBackendBase {
 public:
  /// Every candidate for (desc, direction) in priority order, supported or not (with the reason),
  /// without running anything. The first supported entry is the backend's heuristic choice.
  /// Ids are stable across processes for the same library versions and machine.
  virtual std::vector<AlgoInfo> list(const Desc& desc, Direction direction) = 0;
  /// Candidate `id` of (desc, direction) alone, as list() describes it in every field selection
  /// reads (supported or why not, workspace, determinism, overflow_risk, saved-state format), or
  /// nullopt when `id` is not one of list()'s ids (Note [re-validating persisted choices] in
  /// src/ops/dispatch.cpp). Where the backend's candidates are costly to list, an override
  /// describes the one id without listing the others, and may build its plan on the way (then
  /// the workspace is the plan's, exact); only what says where the id stands among the others
  /// (priority, the origin in its name, notes such as "heuristics_top") may differ from the
  /// listing's. A candidate the backend can run but whose listing would leave it out (a cap on
  /// generated variants) may be described as supported. The default lists and looks `id` up.
  virtual std::optional<AlgoInfo> describe_candidate(const Desc& desc, Direction direction,
                                                     const std::string& id) {
    for (AlgoInfo& info : list(desc, direction)) {
      if (info.id == id) return std::move(info);
    }
    return std::nullopt;
  }
  /// describe_candidate() for a selection that may rule `id` out before its first full run (the
  /// settling of late plans: Note [late plans] in src/ops/dispatch.cpp). A backend whose plans
  /// are costly to load may describe it without building its plan (the workspace then as its
  /// listing gives it), provided plan() can still build it for (desc, direction) without a
  /// listing. The default: describe_candidate().
  virtual std::optional<AlgoInfo> describe_unbuilt(const Desc& desc, Direction direction,
                                                   const std::string& id) {
    return describe_candidate(desc, direction, id);
  }
  /// The plan for candidate `id` (built on first request, then served from the backend's cache).
  /// Throws Error(Unsupported) naming the reason if `id` cannot run `desc`, Error(InvalidArgument)
  /// if `id` is not a candidate at all.
  virtual std::shared_ptr<OpPlan<Args>> plan(const Desc& desc, Direction direction,
                                             const std::string& id) = 0;
  /// Called before an exhaustive search with the ids it may run: a backend whose plans are costly
  /// to build can build them ahead, e.g. on several host threads. `search_start` is when the
  /// search began (before its listing), from which a backend's compile budget counts. Failures
  /// are left for plan() to report. The default builds nothing.
  virtual void prepare(const Desc& desc, Direction direction, const std::vector<std::string>& ids,
                       std::chrono::steady_clock::time_point search_start) {}
  /// The ids whose plans the last prepare() of (desc, direction) left building on other threads
  /// (a backend whose plans may take seconds to compile, under a compile budget): the search
  /// times every other candidate first and then asks await_plan() for these. The default: none.
  virtual std::vector<std::string> pending_plans(const Desc& desc, Direction direction) {
    return {};
  }
  /// Waits for the plan of `id` (one pending_plans() named) at most until the search's compile
  /// budget runs out: empty when the plan is ready, else why the search skips it.
  virtual std::string await_plan(const Desc& desc, Direction direction, const std::string& id) {
    return {};
  }
  /// Called after a selection whose choice goes to the persistent choice cache, with the chosen
  /// id: a backend whose plans are costly to build may save that plan for other processes
  /// (Note [saved plans] in src/tune/plan_store.hpp). The default keeps nothing.
  virtual void keep_plan(const Desc& desc, Direction direction, const std::string& id) {}
  /// Called after such a selection with each id the search skipped because await_plan() found
  /// its plan still building: whether the backend saves that plan once it is built (or has
  /// already), so that a later process can time it (Note [late plans] in src/ops/dispatch.cpp).
  /// The default saves nothing.
  virtual bool keep_late_plan(const Desc& desc, Direction direction, const std::string& id) {
    return false;
  }
  /// Whether the plan of `id` can be had without a costly build: built already, or saved by an
  /// earlier process (Note [late plans]). The default: plans are cheap, always.
  virtual bool plan_at_hand(const Desc& desc, Direction direction, const std::string& id) {
    return true;
  }
  /// A plan of `id`, a candidate listed for another desc of the op, for the smaller `desc` a
  /// search probes with (Note [probing slow candidates] in src/tune/select.cpp); null when it
  /// cannot run `desc`. A backend whose listing is costly may build it without listing `desc`
  /// (the plan then only serves probes). The default goes through plan().
  virtual std::shared_ptr<OpPlan<Args>> probe_plan(const Desc& desc, Direction direction,
                                                   const std::string& id) {
    try {
      return plan(desc, direction, id);
    } catch (const Error&) {
      return nullptr;
    }
  }
  /// Called when probe_plan() gave no plan for `id` on a probe's `desc`: why the search should
  /// skip `id` rather than run it in full, or empty (the full run decides). A backend says so
  /// when that plan is still being built past its compile budget and the full run may be very
  /// slow (Note [probing runtime-compiled candidates] in backends/cudnn/conv.cpp); the search
  /// then keeps `id` as a late plan (Note [late plans] in src/ops/dispatch.cpp). The default:
  /// empty.
  virtual std::string probe_pending(const Desc& desc, Direction direction, const std::string& id) {
    return {};
  }
  /// Called once when a search starts probing on `desc`, with the ids it may probe: a backend
  /// whose plans are costly to build can build their probe plans ahead. The default builds
  /// nothing.
  virtual void prepare_probes(const Desc& desc, Direction direction,
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
    const std::string key =
        desc.key() + " | " + std::to_string(static_cast<int>(direction)) + " | " + id;
    {
      std::lock_guard lock(mutex_);
      if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    }
    std::shared_ptr<Plan> plan = build();
    std::lock_guard lock(mutex_);
    return plans_.emplace(key, std::move(plan)).first->second;
  }
  /// The plan of (desc, direction, id) if one was built; null otherwise.
  std::shared_ptr<Plan> find(const Desc& desc, Direction direction, const std::string& id) {
    const std::string key =
        desc.key() + " | " + std::to_string(static_cast<int>(direction)) + " | " + id;
    std::lock_guard lock(mutex_);
    const auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    plans_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
};

/// The one base of op backends whose candidates for a (desc, direction) are worked out once, as
/// `Candidate`s (anything with an `AlgoInfo info` member plus what building its plan needs), and
/// kept. The op comes from the op table (OpOf<Desc>): list() and plan() refuse a direction the
/// op does not have before anything else (InvalidArgument, as OpInfo::check words it), then list()
/// returns the candidates' infos and plan(id) finds the candidate, rejects an id that is not one
/// (InvalidArgument listing the valid ids) or an unsupported one (Unsupported with its reason), and
/// builds its plan once (PlanCache). Errors carry op_context(backend, ...). Thread-safe.
/// `Interface` is the op's backend interface when it is more than OpBackend<Desc, Args>
/// (convolution's ConvBackend, whose bias calls the subclass gives).
template <typename Desc, typename Args, typename Candidate,
          typename Interface = OpBackend<Desc, Args>>
class ListedOpBackend : public Interface {
 public:
  explicit ListedOpBackend(BackendKind backend) : backend_(backend) {}

  std::vector<AlgoInfo> list(const Desc& desc, Direction direction) override {
    check_direction(desc, direction);
    desc.validate();
    std::lock_guard lock(mutex_);
    std::vector<AlgoInfo> infos;
    for (const Candidate& candidate : candidates_locked(desc, direction))
      infos.push_back(candidate.info);
    return infos;
  }

  std::shared_ptr<OpPlan<Args>> plan(const Desc& desc, Direction direction,
                                     const std::string& id) override {
    check_direction(desc, direction);
    desc.validate();
    return plans_.get_or_build(desc, direction, id, [&] {
      Candidate candidate;
      {
        std::lock_guard lock(mutex_);
        const std::vector<Candidate>& candidates = candidates_locked(desc, direction);
        const auto found = std::find_if(candidates.begin(), candidates.end(),
                                        [&](const Candidate& c) { return c.info.id == id; });
        if (found == candidates.end()) {
          std::string valid;
          for (const Candidate& c : candidates) {
            if (!c.info.supported) continue;
            valid += (valid.empty() ? "" : ", ") + c.info.id;
          }
          throw Error(ErrorKind::InvalidArgument,
                      "algorithm id '" + id + "' is not a candidate for this " +
                          std::string(op().name) + " " +
                          std::string(to_string(direction)) +
                          "; valid ids: " + (valid.empty() ? "(none)" : valid),
                      error_context(desc, direction, id));
        }
        if (!found->info.supported)
          throw Error(ErrorKind::Unsupported, found->info.reason,
                      error_context(desc, direction, id));
        candidate = *found;
      }
      return build(desc, direction, candidate);
    });
  }

 protected:
  /// The op's line of the op table.
  static const OpInfo& op() { return op_info(OpOf<Desc>::kind); }
  /// The backend this instance belongs to.
  BackendKind backend_kind() const { return backend_; }
  /// Every candidate of (desc, direction) in priority order; called once per key.
  virtual std::vector<Candidate> enumerate(const Desc& desc, Direction direction) = 0;
  /// The plan of a supported candidate.
  virtual std::shared_ptr<OpPlan<Args>> build(const Desc& desc, Direction direction,
                                              const Candidate& candidate) = 0;
  /// The context of errors about (desc, direction, id): backend, implementation, repro.
  ErrorContext error_context(const Desc& desc, Direction direction, const std::string& id) const {
    return op_context(backend_, desc, direction, id);
  }
  /// The candidates of (desc, direction), enumerated on first use, for an op backend's own calls
  /// beside list() and plan() (e.g. building plans ahead of a search). Named apart from what a
  /// subclass calls its own listing functions, which a member of the same name would hide (and
  /// calling this from enumerate() would deadlock on the lock it holds). A list never changes once
  /// made and is kept as long as the backend, so the reference stays valid after the lock is
  /// released. Not for enumerate(), which runs with the lock held: candidates_locked() there.
  const std::vector<Candidate>& listed_candidates(const Desc& desc, Direction direction) {
    std::lock_guard lock(mutex_);
    return candidates_locked(desc, direction);
  }
  /// listed_candidates() for enumerate() alone, which runs with the lock held: the list of one
  /// desc may take in another's (the cudnn convolution's channel-padded candidates wrap those of the
  /// padded desc). `desc` must not be the desc being enumerated.
  const std::vector<Candidate>& candidates_locked(const Desc& desc, Direction direction) {
    const std::string key = list_key(desc, direction);
    auto found = lists_.find(key);
    if (found == lists_.end()) found = lists_.emplace(key, enumerate(desc, direction)).first;
    return found->second;
  }
  /// The plan cache plan() serves from: an op backend that builds plans ahead (prepare()) files
  /// them here, and a plan made of another candidate's plan (a wrapper) finds or builds that one
  /// here.
  PlanCache<Desc, Args>& plans() { return plans_; }
  /// Whether the candidates of (desc, direction) have been enumerated (a describe_candidate()
  /// override answers from them when they have: the lookup costs nothing then).
  bool is_listed(const Desc& desc, Direction direction) {
    std::lock_guard lock(mutex_);
    return lists_.count(list_key(desc, direction)) != 0;
  }
  /// Throws InvalidArgument (with the op's context) when the op has no `direction`.
  void check_direction(const Desc& desc, Direction direction) const {
    try {
      op().check(direction);
    } catch (const Error& error) {
      throw error.with_context(op_context(backend_, desc, Direction::fwd));
    }
  }

 private:
  static std::string list_key(const Desc& desc, Direction direction) {
    return desc.key() + " | " + std::string(to_string(direction));
  }

  BackendKind backend_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<Candidate>> lists_;
  PlanCache<Desc, Args> plans_;
};

}  // namespace dnnx::detail
