#pragma once
// Note [op dispatch]
// Every op call goes the same way, whatever the op: look the (desc, direction) up in the context's
// fast path (a desc not found there is validated: one found was validated on its first call);
// validate the tensors against the desc; on a miss consult the choice cache, else select through
// src/tune (listing, timing on the real tensors, or on scratch ones for a call that changes its
// inputs, storing the choice); build or fetch the plan; run it, falling back to the next
// admissible candidate when it fails at run time (Note [run-time fallback]). Dispatch<Op> is that
// path for one op; Op is a small traits struct in src/ops/<op>.cpp:
//
//   struct PoolOp {
//     using Desc = PoolDesc;
//     using Args = detail::PoolArgs;
//     static constexpr OpKind kind = OpKind::pool;  // its line of the op table
//     // Throws InvalidArgument naming the tensor role, the value and what is accepted. Called
//     // after desc.validate(); must check dtype, dims, density/layout, null data, device,
//     // aliasing.
//     static void check(const Context&, const Desc&, Direction, const Args&);
//     // Owns tensors holding valid random data for timing without user tensors.
//     struct Scratch { Args args(Direction); ... };
//     static Scratch scratch(const Context&, const Desc&, Direction);
//     // Optional (Note [probing slow candidates] in src/tune/select.cpp): the same op on a slice
//     // of the tensors (e.g. part of the batch) at a level (0 the smallest, each next larger, all
//     // smaller than the problem), null when the desc has no such slice; `fraction` is the part
//     // of the problem it is.
//     struct Slice { Desc desc; double fraction; Args args; ... };
//     static std::unique_ptr<Slice> slice(const Desc&, Direction, const Args&, int level);
//     // Optional (Note [timing stateful calls] in src/ops/batch_norm.cpp): true when running the
//     // call changes its inputs (running statistics), so selection times on Scratch instead.
//     static bool stateful(const Desc&, Direction, const Args&);
//     // Optional (Note [saved state]): the call's SavedState, or null.
//     static SavedState* saved_state(const Args&);
//     // Optional (Note [saved state]): the text a SavedState records of the desc and a backward
//     // compares (the desc's key() when absent; a field the backward may change is left out).
//     static std::string saved_state_key(const Desc&);
//     // Optional: the op's implementations, when they are not the backend's op<kind>() (tests
//     // drive Dispatch with ops of their own this way).
//     static OpBackend<Desc, Args>& backend(ContextState&);
//   };
//
// Desc must have validate(), key(), hash(), repro(Direction) and operator==.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/saved_state.hpp>

#include "core/backend.hpp"
#include "core/check.hpp"
#include "ops/context_state.hpp"
#include "tune/select.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dnnx::detail {

// ---- the op-independent part (dispatch.cpp)
// ------------------------------------------------------

/// "pool fwd [cpu]" style error context of one call.
ErrorContext op_error_context(const Context& context, OpKind op, Direction direction,
                              std::string repro);

/// How often a call whose choice lists late plans asks whether one is at hand (Note [late
/// plans] in dispatch.cpp).
inline constexpr std::chrono::milliseconds late_check_interval{100};

/// What selection may do with the candidates of one (desc, direction).
struct SelectHooks {
  std::function<std::vector<AlgoInfo>()> list;                   ///< the backend's candidates
  /// One candidate by id as `list` would describe it, or nullopt when it is not one, without
  /// listing the others where the backend can (Note [re-validating persisted choices]); empty
  /// function: `list` and look the id up.
  std::function<std::optional<AlgoInfo>(const std::string&)> describe;
  /// `describe` for a candidate that may be ruled out before its first full run, which the
  /// backend may describe without building its plan (Note [late plans]; empty function: use
  /// `describe`).
  std::function<std::optional<AlgoInfo>(const std::string&)> describe_unbuilt;
  /// Builds plans ahead; given when the search began (Note [compile budget]).
  std::function<void(const std::vector<std::string>&, std::chrono::steady_clock::time_point)>
      prepare;
  std::function<double(const AlgoInfo&)> run;                    ///< one timed run, ms
  tune::ProbeOnce probe;  ///< one timed run on a slice of a level (empty: the op has no slices)
  tune::RunLoop loop;     ///< runs back to back, timed together: ms per run
  /// After prepare(): the ids whose plans are still building (empty function: none ever are).
  std::function<std::vector<std::string>()> pending;
  /// Waits for a pending id's plan within the compile budget: empty, or why it is skipped.
  std::function<std::string(const std::string&)> await;
  /// After a selection that the choice cache's file keeps: the chosen id, whose plan the backend
  /// may save for other processes (empty function: nothing to do).
  std::function<void(const std::string&)> keep;
  /// After such a selection, for each id skipped while its plan was still building: whether the
  /// backend will save that plan for a later process (Note [late plans]; empty function: no).
  std::function<bool(const std::string&)> keep_late;
  /// Whether the plan of an id can be had without a costly build (Note [late plans]; empty
  /// function: yes).
  std::function<bool(const std::string&)> at_hand;
  /// `probe` for a selection among the given ids only: the backend builds probe plans for those
  /// alone, and nothing is listed (the settling of late plans; empty function: use `probe`).
  std::function<tune::ProbeOnce(std::vector<std::string>)> probe_among;
  /// A candidate set up once (its plan, workspace and state), and a function that runs it back
  /// to back, untimed, returning once the runs have finished: the energy loops (Note [energy per
  /// call] in tune/energy.cpp), which must run exactly that many (a timed loop's run may be
  /// repeated: Note [gated timing] in backends/cudnn/backend.cpp). Empty: no energy.
  std::function<std::function<void(long runs)>(const AlgoInfo&)> repeat;
};

/// A choice and how it was found.
struct Selected {
  std::shared_ptr<const Choice> choice;
  tune::Request request;
  bool from_cache = false;
};

/// The request (with its choice-cache key) for (desc, direction) under the context's options.
tune::Request make_request(Context& context, ContextState& state, OpKind op, Direction direction,
                           std::string desc_key, std::string repro);

/// Selects through the choice cache (re-validating entries read from the cache file). Called
/// with the state's mutex held.
Selected select_locked(Context& context, ContextState& state, tune::Request request,
                       const SelectHooks& hooks);
/// Selects without consulting the cache and stores the result. Called with the mutex held.
std::shared_ptr<const Choice> fresh_select_locked(Context& context, ContextState& state,
                                                  const tune::Request& request,
                                                  const SelectHooks& hooks);
/// Note [settling credit] (dispatch.cpp): whether this process leaves the late plans of the
/// choice `key` of `cache` to a later process (its settling credit was spent on them).
bool late_plans_deferred(const ChoiceCache& cache, const std::string& key);
/// Times every candidate (no benchmark limit) and returns the table. Mutex held.
ProfileResult profile_locked(Context& context, ContextState& state, const tune::Request& request,
                             const SelectHooks& hooks, std::chrono::steady_clock::time_point start);

/// Note [run-time fallback]: called while handling `error`, thrown by running `choice`. Unless
/// the error is OutOfMemory or BackendFailure and the policy is not fixed, rethrows it; otherwise
/// tries the other admissible candidates — the timed ones fastest first, then the backend's
/// list order — through `run_id`, which builds, runs and returns the AlgoInfo of the plan that
/// ran. The candidate that worked answers later calls (the cache entry is replaced). Returns the
/// choice that ran.
std::shared_ptr<const Choice> fall_back(
    Context& context, ContextState& state, OpKind op, Direction direction,
    std::shared_ptr<const Choice> choice, const Error& error,
    const std::function<std::vector<AlgoInfo>()>& list,
    const std::function<AlgoInfo(const std::string& id)>& run_id);

// Note [saved state]
// A forward may keep state for its backward in a SavedState the caller passes to both (a
// recurrent layer's reserve space, a dropout mask). Its size and layout belong to the candidate
// that writes it, so they are part of the candidate's listing (AlgoInfo::saved_state_bytes and
// saved_state_format), known before anything runs:
// - a forward (fwd or fwd_training) given a state fills it: before the chosen candidate runs, and
//   before each candidate a selection times, the state is sized for that candidate (its buffer
//   kept when large enough) and records the op, direction, desc key, candidate id and format;
// - a backward given a state checks first that a forward of the same op and desc filled it
//   (InvalidArgument otherwise), and selects only among candidates that read the state's format:
//   the others are listed unsupported for this call, the format is part of the choice-cache key,
//   and a layer-held choice of another format is refused.

/// Writes a SavedState's record (Note [saved state]).
struct SavedStateWriter {
  /// Sizes `state` for `producer` on `allocator`'s device (keeping its buffer when large enough
  /// and on that device) and records what filled it.
  static void fill(SavedState& state, Allocator& allocator, OpKind op, Direction direction,
                   std::string desc_key, const AlgoInfo& producer);
};
/// Throws InvalidArgument unless a forward of `op` on the desc with key `desc_key` filled
/// `state`, naming what did.
void check_saved_state(const SavedState& state, OpKind op, const std::string& desc_key);

/// Note [probing slow candidates] (src/tune/select.cpp): the batch sizes of the slices a search
/// probes a batched op on, smallest first (level 0): batch / (2 * 4^k) samples for k = K..0 while
/// that is at least one, e.g. 1, 4, 16 and 64 of 128; none for a batch under 16.
std::vector<std::int64_t> probe_batches(std::int64_t batch);
/// `candidates` with those reading another saved-state format than `state`'s marked unsupported,
/// saying why.
std::vector<AlgoInfo> restrict_to_saved_state(std::vector<AlgoInfo> candidates,
                                              const SavedState& state);
/// Throws InvalidArgument unless `algo` reads `state`'s format (a choice made for another).
void check_reads_saved_state(const AlgoInfo& algo, const SavedState& state);

/// A tensor on the context's device holding uniform random values in [low, high), a block of
/// them repeated over the tensor (Note [scratch data] in dispatch.cpp). Throws OutOfMemory when it
/// cannot be allocated.
Tensor random_tensor(const Context& context, const Dims& dims, DType dtype, Layout layout,
                     float low = -1.0f, float high = 1.0f, unsigned seed = 1234);

/// Whether the memory spans of two tensors overlap.
bool overlaps(const Tensor& a, const Tensor& b);

/// Checks one tensor of a call against what the desc expects: dtype, rank and dims, non-null
/// data, dense in `layout`, on the context's device. Throws InvalidArgument naming `role`, the
/// value received and what is expected ("dtype mix: ...", "layout mismatch: ...").
void check_operand(const Context& context, const char* role, const Tensor& tensor,
                   const Dims& expected, DType dtype, Layout layout);
/// Throws InvalidArgument when `out` overlaps `in` in memory: "<out_role> overlaps <in_role> in
/// memory; <op> cannot run in place (use separate buffers)".
void check_no_overlap(std::string_view op, const char* out_role, const Tensor& out,
                      const char* in_role, const Tensor& in);

// ---- the per-op part
// -----------------------------------------------------------------------------

template <typename Op>
class Dispatch {
 public:
  using Desc = typename Op::Desc;
  using Args = typename Op::Args;
  using Plan = OpPlan<Args>;

  /// Runs `f`; a dnnx::Error escaping it gains the op, repro and backend of this call.
  template <typename F>
  static auto with_context(const Context& context, const Desc& desc, Direction direction, F&& f) {
    try {
      return f();
    } catch (const Error& error) {
      throw error.with_context(
          op_error_context(context, Op::kind, direction, desc.repro(direction)));
    }
  }

  /// The whole call: fast path, else selection, then execution with fallback.
  static std::shared_ptr<const Choice> run(Context& context, const Desc& desc, Direction direction,
                                           const Args& args) {
    return with_context(context, desc, direction, [&] {
      op_info(Op::kind).check(direction);
      ContextState& state = state_of(context);
      std::lock_guard lock(state.mutex());
      Calls& calls = state.slot<Calls>();
      const SavedState* consumed = consumed_state(direction, args);
      const Key key{desc, direction, consumed != nullptr ? consumed->format() : std::string()};
      auto it = calls.find(key);
      // A desc equal to one that ran before was validated then (the map holds only those).
      if (it == calls.end()) desc.validate();
      Op::check(context, desc, direction, args);
      if (consumed != nullptr) check_saved_state(*consumed, Op::kind, state_key(desc));
      const ChoiceCache& cache = *context.choice_cache();
      const bool fresh = it != calls.end() && it->second.cache == &cache &&
                         it->second.cache_generation == cache.generation() &&
                         it->second.options == context.tune() &&
                         !late_plan_at_hand(state, desc, direction, it->second);
      if (!fresh) {
        // Timing runs on the call's own tensors, unless that would change their state (Note
        // [timing stateful calls]): then on scratch tensors, made only if a candidate is timed.
        LazyScratch scratch{context, desc, direction};
        const ArgsSource timing = [&]() -> const Args& {
          return stateful(desc, direction, args) ? scratch.args() : args;
        };
        Selected selected =
            select_locked(context, state, request(context, state, desc, direction, consumed),
                          hooks(state, desc, direction, timing, consumed));
        std::shared_ptr<Plan> plan =
            plan_for(context, state, desc, direction, timing, consumed, selected);
        it = calls
                 .insert_or_assign(key, CallEntry{context.tune(), &cache, cache.generation(),
                                                  selected.choice, plan})
                 .first;
      }
      CallEntry& entry = it->second;
      auto used = execute(context, state, desc, direction, args, entry.choice,
                          std::static_pointer_cast<Plan>(entry.plan));
      if (used != entry.choice) calls.erase(key);
      return used;
    });
  }

  /// Runs a choice a layer holds (Reuse::once), bypassing selection.
  static std::shared_ptr<const Choice> run_choice(Context& context, const Desc& desc,
                                                  Direction direction, const Args& args,
                                                  std::shared_ptr<const Choice> choice) {
    return with_context(context, desc, direction, [&] {
      op_info(Op::kind).check(direction);
      desc.validate();
      Op::check(context, desc, direction, args);
      const SavedState* consumed = consumed_state(direction, args);
      if (consumed != nullptr) check_saved_state(*consumed, Op::kind, state_key(desc));
      ContextState& state = state_of(context);
      std::lock_guard lock(state.mutex());
      auto plan = op_backend(state).plan(desc, direction, choice->algo.id);
      return execute(context, state, desc, direction, args, std::move(choice), std::move(plan));
    });
  }

  /// Every candidate, nothing run.
  static std::vector<AlgoInfo> list(Context& context, const Desc& desc, Direction direction) {
    return with_context(context, desc, direction, [&] {
      op_info(Op::kind).check(direction);
      desc.validate();
      ContextState& state = state_of(context);
      std::lock_guard lock(state.mutex());
      return op_backend(state).list(desc, direction);
    });
  }

  /// The choice the context's policy makes (timing on scratch tensors when it must).
  static std::shared_ptr<const Choice> select(Context& context, const Desc& desc,
                                              Direction direction) {
    return with_context(context, desc, direction, [&] {
      op_info(Op::kind).check(direction);
      desc.validate();
      ContextState& state = state_of(context);
      // Scratch tensors only when the answer is not cached and the policy times candidates.
      LazyScratch scratch{context, desc, direction};
      const ArgsSource lazy = [&]() -> const Args& { return scratch.args(); };
      std::lock_guard lock(state.mutex());
      return select_locked(context, state, request(context, state, desc, direction, nullptr),
                           hooks(state, desc, direction, lazy, nullptr))
          .choice;
    });
  }

  /// Times every candidate on scratch tensors.
  static ProfileResult profile(Context& context, const Desc& desc, Direction direction) {
    return with_context(context, desc, direction, [&] {
      op_info(Op::kind).check(direction);
      desc.validate();
      const auto start = std::chrono::steady_clock::now();
      ContextState& state = state_of(context);
      typename Op::Scratch scratch = scratch_checked(context, desc, direction);
      const Args args = scratch.args(direction);
      const ArgsSource source = [&args]() -> const Args& { return args; };
      std::lock_guard lock(state.mutex());
      return profile_locked(context, state, request(context, state, desc, direction, nullptr),
                            hooks(state, desc, direction, source, nullptr), start);
    });
  }

 private:
  // The op's implementations on the context's backend (Unsupported when it has none).
  static OpBackend<Desc, Args>& op_backend(ContextState& state) {
    if constexpr (requires { Op::backend(state); }) {
      return Op::backend(state);
    } else {
      return state.backend().template op<Op::kind>();
    }
  }

  // Note [saved state]: the state a call fills (a forward) or reads (a backward), or null.
  static SavedState* saved_state(const Args& args) {
    if constexpr (requires { Op::saved_state(args); }) {
      return Op::saved_state(args);
    } else {
      return nullptr;
    }
  }
  // The desc's part of a SavedState's record (Op::saved_state_key, optional: the whole key).
  static std::string state_key(const Desc& desc) {
    if constexpr (requires { Op::saved_state_key(desc); }) {
      return Op::saved_state_key(desc);
    } else {
      return desc.key();
    }
  }
  static bool fills(Direction direction) {
    return direction == Direction::fwd || direction == Direction::fwd_training;
  }
  static const SavedState* consumed_state(Direction direction, const Args& args) {
    return fills(direction) ? nullptr : saved_state(args);
  }
  // Sizes and records the state a forward `algo` is about to fill.
  static void fill_state(ContextState& state, const Desc& desc, Direction direction,
                         const Args& args, const AlgoInfo& algo) {
    if (!fills(direction)) return;
    if (SavedState* saved = saved_state(args)) {
      SavedStateWriter::fill(*saved, state.backend().allocator(), Op::kind, direction,
                             state_key(desc), algo);
    }
  }
  // The candidates a call may run: the backend's list, less those reading another saved-state
  // format than the call's.
  static std::vector<AlgoInfo> listing(ContextState& state, const Desc& desc, Direction direction,
                                       const SavedState* consumed) {
    std::vector<AlgoInfo> candidates = op_backend(state).list(desc, direction);
    if (consumed == nullptr) return candidates;
    return restrict_to_saved_state(std::move(candidates), *consumed);
  }

  // Candidate `id` as listing() would give it (Note [re-validating persisted choices]).
  static std::optional<AlgoInfo> described(ContextState& state, const Desc& desc,
                                           Direction direction, const SavedState* consumed,
                                           const std::string& id, bool unbuilt) {
    auto& backend = op_backend(state);
    std::optional<AlgoInfo> info = unbuilt ? backend.describe_unbuilt(desc, direction, id)
                                           : backend.describe_candidate(desc, direction, id);
    if (!info || consumed == nullptr) return info;
    return restrict_to_saved_state({std::move(*info)}, *consumed).front();
  }

  // Note [late plans] (dispatch.cpp): whether a choice's late plan has come to hand since the
  // call last asked, asking at most every late_check_interval (a plan not at hand costs the
  // backend a look, e.g. for a saved file).
  static bool late_plan_at_hand(ContextState& state, const Desc& desc, Direction direction,
                                CallEntry& entry) {
    if (entry.choice->late_plans.empty()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now < entry.late_check) return false;
    entry.late_check = now + late_check_interval;
    if (late_plans_deferred(*entry.cache, entry.choice->key)) return false;
    auto& backend = op_backend(state);
    return std::any_of(
        entry.choice->late_plans.begin(), entry.choice->late_plans.end(),
        [&](const std::string& id) { return backend.plan_at_hand(desc, direction, id); });
  }

  struct Key {
    Desc desc;
    Direction direction = Direction::fwd;
    std::string saved_format;  // the format of the state a backward reads
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const {
      return key.desc.hash() * 3 + static_cast<std::size_t>(key.direction);
    }
  };
  using Calls = std::unordered_map<Key, CallEntry, KeyHash>;
  // The tensors selection times on, made only when a selection actually times candidates.
  using ArgsSource = std::function<const Args&()>;

  // Scratch tensors for timing, made on the first request for them.
  class LazyScratch {
   public:
    LazyScratch(const Context& context, const Desc& desc, Direction direction)
        : context_(context), desc_(desc), direction_(direction) {}
    const Args& args() {
      if (!scratch_) {
        scratch_ =
            std::make_unique<typename Op::Scratch>(scratch_checked(context_, desc_, direction_));
        args_ = scratch_->args(direction_);
      }
      return args_;
    }

   private:
    const Context& context_;
    const Desc& desc_;
    Direction direction_;
    std::unique_ptr<typename Op::Scratch> scratch_;
    Args args_;
  };

  // Whether running the call changes the state of its own inputs (Op::stateful, optional).
  static bool stateful(const Desc& desc, Direction direction, const Args& args) {
    if constexpr (requires { Op::stateful(desc, direction, args); }) {
      return Op::stateful(desc, direction, args);
    } else {
      return false;
    }
  }

  static tune::Request request(Context& context, ContextState& state, const Desc& desc,
                               Direction direction, const SavedState* consumed) {
    std::string key = desc.key();
    if (consumed != nullptr) key += " | saved_state=" + consumed->format();
    return make_request(context, state, Op::kind, direction, std::move(key),
                        desc.repro(direction));
  }

  static SelectHooks hooks(ContextState& state, const Desc& desc, Direction direction,
                           const ArgsSource& args, const SavedState* consumed) {
    auto& backend = op_backend(state);
    // `algo`'s plan set up to run on the search's tensors, and a function that queues `runs` runs
    // of it back to back (fill_state done once for them).
    auto runner = [&state, &backend, &desc, direction, &args](const AlgoInfo& algo) {
      auto plan = backend.plan(desc, direction, algo.id);
      const Workspace workspace = state.search_workspace(plan->algo().workspace_bytes);
      const Args* a = &args();
      fill_state(state, desc, direction, *a, plan->algo());
      return [plan = std::move(plan), workspace, a](long runs) {
        for (long i = 0; i < runs; ++i) plan->execute(*a, workspace);
      };
    };
    // `runs` runs of `algo` back to back, timed together: ms per run; `held`: behind a gate held
    // until they are queued.
    tune::RunLoop loop = [&state, runner](const AlgoInfo& algo, int runs, bool held) {
      const auto queue = runner(algo);
      const auto work = [&] { queue(runs); };
      return (held ? state.backend().time_queued_ms(work, runs * detail::loop_queue_ms_per_call)
                   : state.backend().time_ms(work)) /
             runs;
    };
    SelectHooks hooks{
        [&state, &desc, direction, consumed] { return listing(state, desc, direction, consumed); },
        [&state, &desc, direction, consumed](const std::string& id) {
          return described(state, desc, direction, consumed, id, /*unbuilt=*/false);
        },
        [&state, &desc, direction, consumed](const std::string& id) {
          return described(state, desc, direction, consumed, id, /*unbuilt=*/true);
        },
        [&backend, &desc, direction](const std::vector<std::string>& ids,
                                     std::chrono::steady_clock::time_point search_start) {
          backend.prepare(desc, direction, ids, search_start);
        },
        [loop](const AlgoInfo& algo) { return loop(algo, 1, false); },
        {},
        loop,
        [&backend, &desc, direction] { return backend.pending_plans(desc, direction); },
        [&backend, &desc, direction](const std::string& id) {
          return backend.await_plan(desc, direction, id);
        },
        [&backend, &desc, direction](const std::string& id) {
          backend.keep_plan(desc, direction, id);
        },
        [&backend, &desc, direction](const std::string& id) {
          return backend.keep_late_plan(desc, direction, id);
        },
        [&backend, &desc, direction](const std::string& id) {
          return backend.plan_at_hand(desc, direction, id);
        },
        {},
        {}};  // probe_among and repeat (and probe, above): set below
    hooks.repeat = [&state, runner](const AlgoInfo& algo) -> std::function<void(long)> {
      return [&state, queue = runner(algo)](long runs) {
        queue(runs);
        state.backend().synchronize();
      };
    };
    if constexpr (requires { typename Op::Slice; }) {
      hooks.probe = probe_hook(state, desc, direction, args, std::nullopt);
      hooks.probe_among = [&state, &desc, direction, &args](std::vector<std::string> ids) {
        return probe_hook(state, desc, direction, args, std::move(ids));
      };
    }
    return hooks;
  }

  // Note [probing slow candidates] (tune/select.cpp): runs on a slice of each level, the probe
  // plans of `only` built ahead (or, without it, of every supported candidate listed). Each
  // level's slice is made on its first probe (from the timing tensors) and kept for the rest of
  // the selection.
  static tune::ProbeOnce probe_hook(
      ContextState& state, const Desc& desc, Direction direction, const ArgsSource& args,
      std::optional<std::vector<std::string>> only) requires requires {
    typename Op::Slice;
  }
  {
    auto& backend = op_backend(state);
    struct Level {
      bool tried = false;
      std::unique_ptr<typename Op::Slice> slice;
    };
    return [&state, &backend, &desc, direction, &args, only = std::move(only),
            levels = std::make_shared<std::vector<Level>>()](
               const AlgoInfo& algo, int level) -> std::optional<tune::ProbeRun> {
      if (level < 0) return std::nullopt;
      if (levels->size() <= static_cast<std::size_t>(level))
        levels->resize(static_cast<std::size_t>(level) + 1);
      Level& lazy = (*levels)[static_cast<std::size_t>(level)];
      if (!lazy.tried) {
        lazy.tried = true;
        lazy.slice = Op::slice(desc, direction, args(), level);
        if (lazy.slice) {
          std::vector<std::string> ids;
          if (only) {
            ids = *only;
          } else {
            for (const AlgoInfo& info : backend.list(desc, direction)) {
              if (info.supported) ids.push_back(info.id);
            }
          }
          backend.prepare_probes(lazy.slice->desc, direction, ids);
        }
      }
      if (!lazy.slice) return std::nullopt;
      const typename Op::Slice& slice = *lazy.slice;
      auto plan = backend.probe_plan(slice.desc, direction, algo.id);
      if (!plan) {
        std::string pending = backend.probe_pending(slice.desc, direction, algo.id);
        if (!pending.empty()) throw tune::Skipped(std::move(pending));
        return std::nullopt;
      }
      const Workspace workspace = state.search_workspace(plan->algo().workspace_bytes);
      return tune::ProbeRun{state.backend().time_ms([&] { plan->execute(slice.args, workspace); }),
                            slice.fraction};
    };
  }

  // Host-side allocation failures (staging vectors) surface as OutOfMemory like device ones.
  static typename Op::Scratch scratch_checked(const Context& context, const Desc& desc,
                                              Direction direction) {
    try {
      return Op::scratch(context, desc, direction);
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    raise(ErrorKind::OutOfMemory, "cannot allocate scratch tensors for timing");
  }

  // The plan of a selected choice. A cached choice that cannot be built here (a file entry whose
  // candidate this build does not have after all) is selected again rather than failing the call.
  static std::shared_ptr<Plan> plan_for(Context& context, ContextState& state, const Desc& desc,
                                        Direction direction, const ArgsSource& args,
                                        const SavedState* consumed, Selected& selected) {
    auto& backend = op_backend(state);
    try {
      return backend.plan(desc, direction, selected.choice->algo.id);
    } catch (const Error& error) {
      const bool rejected =
          error.kind() == ErrorKind::InvalidArgument || error.kind() == ErrorKind::Unsupported;
      if (!selected.from_cache || !rejected || selected.choice->policy.kind == PolicyKind::fixed)
        throw;
      if (context.tune().verbose) {
        std::fprintf(stderr, "dnnx: cached choice %s cannot be built here (%s); selecting again\n",
                     selected.choice->algo.id.c_str(), error.message().c_str());
      }
      selected.choice = fresh_select_locked(context, state, selected.request,
                                            hooks(state, desc, direction, args, consumed));
      selected.from_cache = false;
      return backend.plan(desc, direction, selected.choice->algo.id);
    }
  }

  static std::shared_ptr<const Choice> execute(Context& context, ContextState& state,
                                               const Desc& desc, Direction direction,
                                               const Args& args,
                                               std::shared_ptr<const Choice> choice,
                                               std::shared_ptr<Plan> plan) {
    // The common path builds nothing: the fallback's functions exist only once a run failed.
    const SavedState* consumed = consumed_state(direction, args);
    if (consumed != nullptr) check_reads_saved_state(plan->algo(), *consumed);
    try {
      fill_state(state, desc, direction, args, plan->algo());
      plan->execute(args, state.workspace(plan->algo().workspace_bytes));
      return choice;
    } catch (const Error& error) {
      auto& backend = op_backend(state);
      return fall_back(
          context, state, Op::kind, direction, std::move(choice), error,
          [&] { return listing(state, desc, direction, consumed); },
          [&](const std::string& id) {
            auto next = backend.plan(desc, direction, id);
            fill_state(state, desc, direction, args, next->algo());
            next->execute(args, state.workspace(next->algo().workspace_bytes));
            return next->algo();
          });
    }
  }
};

}  // namespace dnnx::detail
