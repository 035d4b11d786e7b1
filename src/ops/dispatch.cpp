// The op-independent half of Note [op dispatch]: choice-cache lookups with re-validation, fresh
// selections, profiles, run-time fallback and scratch tensors.

#include "ops/dispatch.hpp"

#include <dnnx/version.hpp>

#include "core/strings.hpp"
#include "tune/cache_file.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <span>

namespace dnnx::detail {
namespace {

// The facts persisted with a choice: who measured it, on what.
std::string environment_json(const Backend& backend) {
  std::vector<std::pair<std::string, std::string>> facts{{"backend", backend.name()},
                                                         {"fingerprint", backend.fingerprint()},
                                                         {"dnnx", std::string(version())}};
  for (auto& fact : backend.environment()) facts.push_back(std::move(fact));
  std::string text = "{";
  for (std::size_t i = 0; i < facts.size(); ++i) {
    if (i > 0) text += ",";
    text += json_quote(facts[i].first) + ":" + json_quote(facts[i].second);
  }
  return text + "}";
}

// Note [re-validating persisted choices]
// A choice read from the cache file was made by another process: maybe under other limits, maybe
// by a build whose candidates differ although its version string does not, maybe edited by hand.
// Before it is reported or used, the backend's current description of its id must be supported,
// admissible under this call's constraints and one an automatic policy may pick; the recorded
// description is never trusted. A valid choice is stored back with the current description and
// from_file cleared, so later lookups in this process skip the check, and the file is not
// rewritten; an invalid one is selected again, and the new choice replaces the file entry.
// The check asks for the one id first (SelectHooks::describe, OpBackend::describe_candidate): a
// backend whose listing is costly describes it without listing the others (cuDNN convolutions:
// a listing takes 5-180 ms per layer and direction, and a ResNet-50 training step has about 160;
// the single description parses the id back into its config and builds that plan, which the
// call then runs, or loads it from the plan store: Note [saved plans]). So a second process
// with the cache file pays one plan per key and nothing for the candidates it does not run. Only
// when that description is missing or not admissible is the full listing made, and the listing
// decides exactly as when no description exists: the id looked up there, and if it is not valid
// there either, a fresh selection from that same listing. A description that throws counts as
// missing. Backends with cheap listings (reference, cpu, and cudnn ops other than the
// convolution) keep the default describe_candidate(), which lists and looks the id up; an
// invalid entry then lists twice (the description, the re-check), the second time from the
// backend's kept listing where it keeps one (ListedOpBackend).
std::optional<AlgoInfo> find_listed(const std::vector<AlgoInfo>& listed, const std::string& id) {
  const auto it = std::find_if(listed.begin(), listed.end(),
                               [&](const AlgoInfo& algo) { return algo.id == id; });
  if (it == listed.end()) return std::nullopt;
  return *it;
}

std::optional<std::string> invalid_here(const std::optional<AlgoInfo>& current,
                                        const TuneOptions& options) {
  if (!current) return std::string("it is not a candidate here");
  if (auto why = tune::exclusion(*current, options)) return why->detail;
  if (current->overflow_risk) return std::string("no automatic policy may pick it (overflow_risk)");
  return std::nullopt;
}

// Note [run-time fallback]: a candidate can pass selection and still fail when it runs (the
// workspace allocation runs out of memory, the library rejects a rare configuration). The call
// then moves on to the next admissible candidate in the order the policy ranks them (timings for
// exhaustive, priority otherwise); fixed ids never fall back. The zero-workspace candidate every
// backend lists keeps this from running dry.
std::vector<AlgoInfo> fallback_order(const TuneOptions& options, const Choice& failed,
                                     const std::vector<AlgoInfo>& listed) {
  std::vector<AlgoInfo> order;
  // Never onto a candidate no automatic policy would pick.
  auto safe = [](const AlgoInfo& algo) { return !algo.overflow_risk; };
  for (const ProfileRow& row : failed.timings) {
    if (row.status == CandidateStatus::ok && safe(row.algo)) order.push_back(row.algo);
  }
  for (const AlgoInfo& algo : listed) {
    if (!tune::exclusion(algo, options) && safe(algo)) order.push_back(algo);
  }
  std::vector<AlgoInfo> unique;
  for (AlgoInfo& algo : order) {
    const bool seen = algo.id == failed.algo.id ||
                      std::any_of(unique.begin(), unique.end(),
                                  [&](const AlgoInfo& a) { return a.id == algo.id; });
    if (!seen) unique.push_back(std::move(algo));
  }
  return unique;
}

bool recoverable(const Error& error) {
  return error.kind() == ErrorKind::OutOfMemory || error.kind() == ErrorKind::BackendFailure;
}

}  // namespace

ErrorContext op_error_context(const Context& context, OpKind op, Direction direction,
                              std::string repro) {
  return layer_context(to_string(context.backend()), to_string(op), direction, std::move(repro),
                       {});
}

tune::Request make_request(Context& context, ContextState& state, OpKind op, Direction direction,
                           std::string desc_key, std::string repro) {
  // The dnnx version is part of the key because candidate ids may change between versions.
  std::string key =
      tune::make_key(to_string(op), desc_key, direction, context.tune(),
                     state.backend().fingerprint() + " dnnx-" + std::string(version()));
  return {std::string(to_string(op)),
          direction,
          std::move(desc_key),
          std::move(repro),
          std::string(to_string(context.backend())),
          std::move(key)};
}

namespace {
tune::FirstRun first_run(const Backend& backend) {
  return backend.warm_timing() ? tune::FirstRun::warm : tune::FirstRun::may_be_cold;
}

// The energy of candidates for the energy policies and `profile --energy` (Note [energy
// policies] in tune/select.cpp): a meter of the options' window and repeats on the backend's
// counter, measuring a candidate on the hooks' untimed runs (the idle baseline once per source,
// or a fresh one of the process's: Note [energy per call] in tune/energy.cpp).
// Without a counter, the source says why, and so does stderr once per process.
tune::EnergySource energy_source(Backend& backend, const TuneOptions& options,
                                 const SelectHooks& hooks) {
  std::string why;
  std::shared_ptr<EnergyCounter> counter = backend.energy_counter(why);
  if (counter != nullptr && !hooks.repeat) {
    counter.reset();
    why = "this op runs no loop of runs";
  }
  if (counter == nullptr) {
    warn_once(cat("energy is not measured: ", why));
    return {{}, why};
  }
  auto meter = std::make_shared<tune::EnergyMeter>(
      counter, options.energy_window_ms, options.energy_repeats, tune::MeterClock::steady(),
      &tune::IdleBaselines::process());
  auto repeat = hooks.repeat;
  return {[meter, repeat](const AlgoInfo& algo, double call_ms) {
            return meter->measure(repeat(algo), call_ms);
          },
          counter->name()};
}

bool reads_energy(const TuneOptions& options, const tune::Request& request) {
  const PolicyKind kind = options.policy(parse_op_kind(request.op), request.direction).kind;
  return kind == PolicyKind::min_energy || kind == PolicyKind::energy_delay;
}
}  // namespace

namespace {

bool has(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

double ms_between(std::chrono::steady_clock::time_point start,
                  std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Note [compile budget]
// A backend may leave some plans building on other threads when prepare() returns (the cudnn
// convolution's runtime-compiled engines: Note [runtime-compiled engines] in
// backends/cudnn/conv_engine.cpp), so that their compiles overlap the timing of every other
// candidate. A search therefore times the candidates whose plans are ready first, in their
// order, and the pending ones last, each after await_plan(): the backend waits for that plan at
// most until its compile budget runs out and otherwise says why it is skipped, which becomes the
// row's not_timed reason (tune::Skipped). The time spent waiting counts as build time.
// The budget counts from the search's start, its listing included (prepare() is given it): a
// search's time is measured so, and counted from prepare() the searches that waited for a
// compile ended the budget plus their listing (13-250 ms) after they began. On an H200, 55-60 of
// the 90-96 fp16 layer-directions of MobileNetV2 and EfficientNet-B0 did, each at 1.05-1.1 s,
// most in a probe waiting for a runtime-compiled slice plan (Note [probing runtime-compiled
// candidates] in backends/cudnn/conv.cpp); docs/benchmarks.md, "Probe slices of few groups, and
// the compile budget from the search's start".
struct Prepared {
  std::vector<AlgoInfo> candidates;  // the pending ones moved last
  std::vector<std::string> pending;
  double build_ms = 0;
};

Prepared prepare_search(const TuneOptions& options, std::vector<AlgoInfo> candidates,
                        const SelectHooks& hooks,
                        std::chrono::steady_clock::time_point list_start) {
  Prepared prepared;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  for (const AlgoInfo& algo : candidates) {
    if (!tune::exclusion(algo, options)) ids.push_back(algo.id);
  }
  hooks.prepare(ids, list_start);
  if (hooks.pending) prepared.pending = hooks.pending();
  prepared.build_ms = ms_between(start, std::chrono::steady_clock::now());
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](const AlgoInfo& algo) { return !has(prepared.pending, algo.id); });
  prepared.candidates = std::move(candidates);
  return prepared;
}

// The probe hook of a selection: `probe`, which adds the ids whose probe skipped them (Note
// [probing slow candidates] in tune/select.cpp) to `skipped`. Where no late plan would time them
// later (`may_skip` false: a cache without a file keeps no late plans), a skip becomes no probe,
// and the full run decides.
tune::ProbeOnce recording_skips(const tune::ProbeOnce& probe, std::vector<std::string>& skipped,
                                bool may_skip) {
  if (!probe) return probe;
  return [&probe, &skipped, may_skip](const AlgoInfo& algo,
                                      int level) -> std::optional<tune::ProbeRun> {
    try {
      return probe(algo, level);
    } catch (const tune::Skipped&) {
      if (!may_skip) return std::nullopt;
      skipped.push_back(algo.id);
      throw;
    }
  };
}

// The run hook of a search: a pending candidate's first run waits for its plan (Note [compile
// budget]); `wait_ms` adds up the waits, `skipped` collects the ids skipped.
tune::RunOnce budgeted_run(const SelectHooks& hooks, const std::vector<std::string>& pending,
                           double& wait_ms, std::vector<std::string>& skipped) {
  if (pending.empty() || !hooks.await) return hooks.run;
  auto awaited = std::make_shared<std::vector<std::string>>();
  return [&hooks, &pending, &wait_ms, &skipped, awaited](const AlgoInfo& algo) {
    if (has(pending, algo.id) && !has(*awaited, algo.id)) {
      const auto start = std::chrono::steady_clock::now();
      const std::string why = hooks.await(algo.id);
      wait_ms += ms_between(start, std::chrono::steady_clock::now());
      if (!why.empty()) {
        skipped.push_back(algo.id);
        throw tune::Skipped(why);
      }
      awaited->push_back(algo.id);
    }
    return hooks.run(algo);
  };
}

// Note [late plans]
// A search skips a runtime-compiled candidate whose plan is still compiling when the compile
// budget runs out (Note [compile budget]); the compile goes on in the background. Some shapes have
// no fast candidate but such a plan (in f16, the depthwise bwd_weights of odd sizes, where cuDNN's
// engine 16 compiles in about 1.6 s), and a choice kept in the cache file is never searched
// again, so the skip would last. So when the choice goes to the file, the backend saves each
// skipped plan once its build finishes (OpBackend::keep_late_plan; a build that finishes while
// the process exits is not saved: Note [background builds at exit] in
// backends/cudnn/conv_compile.cpp), and the choice lists those ids in late_plans. A later process
// that reads the choice from the file re-validates it as usual, then times the listed candidates
// whose plans it can have without a costly build (OpBackend::plan_at_hand: the saved plan loads)
// against it: a small exhaustive search under the same options and rules, whose winner becomes the
// choice. The entry goes back to the file without the ids it timed, with the new timings merged
// into the old table, so each id is settled once; an id whose plan is not at hand (never saved,
// or unreadable) is dropped from it. A later process spends on settling at most
// TuneOptions::late_plan_share (4%) of the searches that the choices it read from the file record
// (Choice::tuning_ms, each search's wall time), pooled over those choices (Note [settling
// credit]); the late plans that do not fit stay listed for the next process.
// The process that made the choice does the same once a late plan comes to hand: a call whose
// choice lists late plans asks the backend at most every late_check_interval
// (Dispatch::late_plan_at_hand), and when one is at hand, selection times those at hand against
// the choice and keeps the others listed, still compiling (`pending`), so that a long run
// switches to a faster late plan about when its compile ends rather than at its next start.
// With `pending` an id not at hand stays listed; without, it is dropped. Returns `kept` itself
// when nothing was at hand and nothing dropped, or when the process's settling credit is spent.
// A search also skips a runtime-compiled candidate whose probe could not run because its plan for
// the probe's slice was still compiling (tune::Skipped from the probe: Note [probing
// runtime-compiled candidates] in backends/cudnn/conv.cpp); it is a late plan like the others.
// No search has bounded a late plan's run, so the settling probes each late plan against the kept
// choice's time (Request::probe_at_once: the kept choice, first, runs in full without a probe),
// and describes it without building its full plan (OpBackend::describe_unbuilt), which its first
// full run builds: most late plans lose to the kept choice on their probe, and the cudnn
// backend's load of a saved runtime-compiled plan took 1-24 ms each on an H200
// (docs/benchmarks.md, "The second process"). It builds probe plans for those candidates alone
// (a search's probes list every candidate and build all their probe plans: in a later process
// that alone took a median of 127 ms per layer-direction on DeepLabV3's shapes on an H200). With
// `pending`, one whose probe cannot run yet stays listed. A later process has the slice plan of
// a skipped runtime-compiled candidate only if the process that skipped it saved it (the cudnn
// backend saves it to the plan store once built); without one the late plan's full run decides.

// Note [settling credit]
// Each late plan cost a later process 26-59 ms on an H200 (its saved slice plan, the first run of
// its kernels, the kept choice's runs beside it: docs/benchmarks.md, "The second process"). A
// bound per choice, its share of the choice's own search with the first late plan always
// timed, let a search of about a second pay one late plan over its 4% every time: the second
// process of DeepLabV3's f16 shapes settled 81 late plans of 49 choices in 7.1% of their search.
// So the share is pooled per cache object (a process's view of its file): every choice the
// process reads from the file credits late_plan_share of its recorded search, whether or not it
// lists late plans, and a settling starts only while the credit is positive, runs the kept
// choice and at least one late plan, starts a further one only while it has taken less than the
// credit, and debits the wall time it took (its descriptions, probe plans, runs and energy
// measurements). The process's settling time is then at most the share of its choices' searches
// plus the one settling that overran, and a choice that comes when the credit is spent keeps its
// late plans listed for a later process, which pays for them from its own credit. Those the
// process leaves listed (unsettled for want of credit, or left by the settling's bound) are
// deferred for the rest of the process: the settling of the late plans of a process's own
// searches as their compiles finish (`pending`, outside the credit) does not take them up on a
// later call, as it would since their saved plans are at hand. A choice that records no search
// credits min_settling_budget_ms, so that alone it still settles one late plan a process.
constexpr double min_settling_budget_ms = 1e-3;

// The process's settling credit and deferred choices per cache object (Note [settling credit]);
// never destroyed, since a call may come at exit.
struct SettlingLedgers {
  struct Ledger {
    double credit_ms = 0;
    std::set<std::string> deferred;  // keys whose late plans wait for a later process
  };
  std::mutex mutex;
  std::map<std::weak_ptr<ChoiceCache>, Ledger, std::owner_less<>> of;

  static SettlingLedgers& process() {
    static auto* ledgers = new SettlingLedgers;
    return *ledgers;
  }
  // The ledger of `cache`, the mutex held; ledgers of destroyed caches are dropped.
  Ledger& of_locked(const std::shared_ptr<ChoiceCache>& cache) {
    std::erase_if(of, [](const auto& entry) { return entry.first.expired(); });
    return of[cache];
  }
};

// Adds `ms` (a credit, or a settling's time as a negative amount) to the settling credit of
// `cache` and returns the balance.
double add_settling_credit(const std::shared_ptr<ChoiceCache>& cache, double ms) {
  SettlingLedgers& ledgers = SettlingLedgers::process();
  std::lock_guard lock(ledgers.mutex);
  return ledgers.of_locked(cache).credit_ms += ms;
}

// This process leaves the late plans of `key` to a later process.
void defer_late_plans(const std::shared_ptr<ChoiceCache>& cache, const std::string& key) {
  SettlingLedgers& ledgers = SettlingLedgers::process();
  std::lock_guard lock(ledgers.mutex);
  ledgers.of_locked(cache).deferred.insert(key);
}

std::shared_ptr<const Choice> settle_late_plans(Context& context, ContextState& state,
                                                const tune::Request& request,
                                                const SelectHooks& hooks,
                                                std::shared_ptr<const Choice> kept, bool pending) {
  const TuneOptions& options = context.tune();
  const auto start = std::chrono::steady_clock::now();
  DNNX_CHECK_ARG(
      options.late_plan_share >= 0 && options.late_plan_share <= TuneOptions::max_late_plan_share,
      "late_plan_share must be a fraction from 0 to ", TuneOptions::max_late_plan_share, ", got ",
      options.late_plan_share);
  // Note [settling credit]: a later process settles while its credit lasts; when it is spent the
  // list stays as it is, not even looked at.
  const bool credited = !pending && options.late_plan_share > 0;
  const double credit_ms = credited ? add_settling_credit(context.choice_cache(), 0.0) : 0.0;
  if (credited && credit_ms <= 0) {
    if (options.verbose) {
      std::cerr << "dnnx: " << request.op << ' ' << to_string(request.direction) << ' '
                << request.desc << ": late plans left for a later process (this process's "
                << "settling credit is spent: " << credit_ms << " ms)\n";
    }
    defer_late_plans(context.choice_cache(), request.key);
    return kept;
  }
  std::vector<AlgoInfo> candidates{kept->algo};
  std::vector<std::string> dropped;
  std::vector<std::string> still_late;
  for (const std::string& id : kept->late_plans) {
    const bool at_hand = !hooks.at_hand || hooks.at_hand(id);
    if (!at_hand && pending) {
      still_late.push_back(id);
      continue;
    }
    std::optional<AlgoInfo> current;
    if (at_hand) {
      try {
        current = hooks.describe_unbuilt ? hooks.describe_unbuilt(id)
                  : hooks.describe       ? hooks.describe(id)
                                         : find_listed(hooks.list(), id);
      } catch (const Error&) {
        // Not at hand after all: dropped below.
      }
    }
    if (current && !invalid_here(current, options) && current->id != kept->algo.id)
      candidates.push_back(std::move(*current));
    else
      dropped.push_back(id);
  }
  // What this settling took, out of the process's credit.
  auto debit = [&] {
    if (credited)
      add_settling_credit(context.choice_cache(),
                          -ms_between(start, std::chrono::steady_clock::now()));
  };
  if (candidates.size() == 1 && dropped.empty()) {
    debit();
    return kept;
  }
  auto settled = std::make_shared<Choice>(*kept);
  settled->late_plans = std::move(still_late);
  if (options.verbose && !dropped.empty()) {
    std::cerr << "dnnx: " << request.op << ' ' << to_string(request.direction) << ' '
              << request.desc
              << ": late plans not at hand, dropped: " << detail::join(dropped, ", ") << '\n';
  }
  if (candidates.size() > 1) {
    Backend& backend = state.backend();
    const double settling_budget_ms = credited ? credit_ms : 0.0;
    try {
      // Late plans are candidates no search has bounded (Note [probing slow candidates]): every
      // one is probed first, with probe plans for these candidates alone.
      tune::Request settling = request;
      settling.probe_at_once = true;
      settling.settling_budget_ms = settling_budget_ms;
      const bool energy = reads_energy(options, request);
      if (energy) {
        const auto recorded =
            std::find_if(kept->timings.begin(), kept->timings.end(),
                         [&](const ProfileRow& row) { return row.algo.id == kept->algo.id; });
        if (recorded != kept->timings.end()) settling.energy_kept = *recorded;
      }
      std::vector<std::string> ids;
      for (const AlgoInfo& algo : candidates) ids.push_back(algo.id);
      const tune::ProbeOnce probe = hooks.probe_among ? hooks.probe_among(ids) : hooks.probe;
      std::vector<std::string> probe_skipped;
      Choice timed = tune::select(
          settling, candidates, options, hooks.run, recording_skips(probe, probe_skipped, pending),
          first_run(backend), hooks.loop, {},
          energy ? energy_source(backend, options, hooks) : tune::EnergySource{});
      // A late plan its probe could not run yet stays listed while the process goes on; one the
      // settling's share left stays listed for the next process.
      if (pending) {
        settled->late_plans.insert(settled->late_plans.end(), probe_skipped.begin(),
                                   probe_skipped.end());
      }
      std::vector<std::string> left;
      std::erase_if(timed.timings, [&](const ProfileRow& row) {
        if (row.status != CandidateStatus::not_timed ||
            !row.detail.starts_with(tune::settling_budget_detail))
          return false;
        left.push_back(row.algo.id);
        return true;
      });
      settled->late_plans.insert(settled->late_plans.end(), left.begin(), left.end());
      if (options.verbose && !left.empty()) {
        std::cerr << "dnnx: " << request.op << ' ' << to_string(request.direction) << ' '
                  << request.desc << ": late plans left for a later process (the settling's "
                  << settling_budget_ms << " ms spent): " << detail::join(left, ", ") << '\n';
      }
      if (timed.candidates_timed > 0) backend.after_timing();
      state.end_search();  // Note [search workspace]
      // The new rows replace those of the same ids; the chosen row stays first, the rest
      // fastest first.
      std::vector<ProfileRow> rows = timed.timings;
      for (const ProfileRow& row : kept->timings) {
        if (std::none_of(rows.begin(), rows.end(),
                         [&](const ProfileRow& r) { return r.algo.id == row.algo.id; }))
          rows.push_back(row);
      }
      tune::sort_fastest_first(std::span(rows).subspan(1));
      settled->algo = timed.algo;
      settled->time_ms = timed.time_ms;
      settled->timings = std::move(rows);
      settled->runner_up = timed.runner_up;
      settled->runner_up_ms = timed.runner_up_ms;
      settled->energy_j = timed.energy_j;
      settled->energy_meter = timed.energy_meter;
      settled->energy_fastest = timed.energy_fastest;
      settled->tuning_ms += timed.tuning_ms;
      settled->search.time_ms += timed.tuning_ms;
      settled->search.full_runs += timed.search.full_runs;
      settled->search.full_run_ms += timed.search.full_run_ms;
      settled->search.probes += timed.search.probes;
      settled->search.probe_ms += timed.search.probe_ms;
      settled->search.final_ms += timed.search.final_ms;
      settled->candidates_timed += static_cast<int>(candidates.size() - left.size()) - 1;
    } catch (const Error& error) {
      state.end_search();
      if (options.verbose) {
        std::cerr << "dnnx: " << request.op << ' ' << to_string(request.direction) << ' '
                  << request.desc << ": timing the late plans failed (" << error.message()
                  << "); keeping " << kept->algo.id << '\n';
      }
    }
  }
  debit();
  if (credited && !settled->late_plans.empty())
    defer_late_plans(context.choice_cache(), request.key);
  settled->from_file = false;
  // Newer than the entry it replaces even within the same second: per key, the cache file keeps
  // the newer measurement (Note [journal] in src/tune/cache_file.cpp).
  settled->measured_at = std::max(kept->measured_at + 1, tune::now_seconds());
  context.choice_cache()->insert(request.key, settled);
  return settled;
}

}  // namespace

bool late_plans_deferred(const ChoiceCache& cache, const std::string& key) {
  SettlingLedgers& ledgers = SettlingLedgers::process();
  std::lock_guard lock(ledgers.mutex);
  for (const auto& [owner, ledger] : ledgers.of) {
    if (const auto alive = owner.lock(); alive.get() == &cache)
      return ledger.deferred.contains(key);
  }
  return false;
}

std::shared_ptr<const Choice> fresh_select_locked(Context& context, ContextState& state,
                                                  const tune::Request& request,
                                                  const SelectHooks& hooks) {
  Backend& backend = state.backend();
  const TuneOptions& options = context.tune();
  const auto list_start = std::chrono::steady_clock::now();
  std::vector<AlgoInfo> candidates = hooks.list();
  SearchTimes search;
  search.list_ms = ms_between(list_start, std::chrono::steady_clock::now());
  std::vector<std::string> pending;
  if (timed_policy(options.policy(parse_op_kind(request.op), request.direction).kind)) {
    Prepared prepared = prepare_search(options, std::move(candidates), hooks, list_start);
    candidates = std::move(prepared.candidates);
    pending = std::move(prepared.pending);
    search.build_ms = prepared.build_ms;
  }
  double wait_ms = 0;
  std::vector<std::string> skipped;
  const tune::RunOnce run = budgeted_run(hooks, pending, wait_ms, skipped);
  // Exhaustive: the time split, and tuning_ms made the whole search, listing and building ahead
  // included (select's verbose line shows both).
  auto finish = [&](Choice& made) {
    if (!timed_policy(made.policy.kind)) return;
    // select() filled the split of the timing (SearchTimes::full_runs ...); this adds the rest.
    made.search.list_ms = search.list_ms;
    made.search.build_ms = search.build_ms + wait_ms;
    made.search.time_ms = std::max(0.0, made.tuning_ms - wait_ms);
    made.search.plans_skipped = static_cast<int>(skipped.size());
    made.tuning_ms = made.search.list_ms + made.search.build_ms + made.search.time_ms;
  };
  tune::Request timed = request;
  timed.spent_ms = search.list_ms + search.build_ms;  // Note [search budget] in tune/select.cpp
  const bool keeps_late = context.choice_cache()->file_options().mode == CacheMode::readwrite &&
                          static_cast<bool>(hooks.keep_late);
  auto choice = std::make_shared<Choice>(tune::select(
      timed, candidates, options, run, recording_skips(hooks.probe, skipped, keeps_late),
      first_run(backend), hooks.loop, finish,
      reads_energy(options, request) ? energy_source(backend, options, hooks)
                                     : tune::EnergySource{}));
  if (choice->candidates_timed > 0) backend.after_timing();
  state.end_search();  // Note [search workspace]
  // Note [saved plans]: a choice the cache file keeps may have its plan kept too, and the plans
  // still compiling when the search skipped them (Note [late plans]).
  if (context.choice_cache()->file_options().mode == CacheMode::readwrite) {
    // Saving is an optimization for later processes; it never fails the call.
    auto cannot_save = [](const std::string& id, const Error& error) {
      std::cerr << "dnnx: could not save the plan of " << id << ": " << error.message() << '\n';
    };
    if (hooks.keep) {
      try {
        hooks.keep(choice->algo.id);
      } catch (const Error& error) {
        cannot_save(choice->algo.id, error);
      }
    }
    if (hooks.keep_late) {
      for (const std::string& id : skipped) {
        try {
          if (hooks.keep_late(id)) choice->late_plans.push_back(id);
        } catch (const Error& error) {
          cannot_save(id, error);
        }
      }
    }
  }
  choice->backend = backend.name();
  choice->fingerprint = backend.fingerprint();
  choice->environment = environment_json(backend);
  choice->measured_at = tune::now_seconds();
  context.choice_cache()->insert(request.key, choice);
  return choice;
}

Selected select_locked(Context& context, ContextState& state, tune::Request request,
                       const SelectHooks& hooks) {
  Backend& backend = state.backend();
  const TuneOptions& options = context.tune();
  ChoiceCache& cache = *context.choice_cache();
  Selected selected{nullptr, std::move(request)};
  const tune::Request& req = selected.request;
  if (auto cached = cache.find(req.key)) {
    if (!cached->from_file) {
      if (options.verbose) std::cerr << tune::describe_decision(req, *cached, true) << '\n';
      selected.choice = std::move(cached);
      selected.from_cache = true;
      // Note [late plans], this process's own (Note [settling credit]: not those it defers).
      if (!selected.choice->late_plans.empty() && !late_plans_deferred(cache, req.key)) {
        selected.choice = settle_late_plans(context, state, req, hooks, selected.choice,
                                            /*pending=*/true);
      }
      return selected;
    }
    // Note [re-validating persisted choices]
    auto accept = [&](AlgoInfo current) {
      auto validated = std::make_shared<Choice>(*cached);
      validated->algo = std::move(current);
      validated->from_file = false;
      cache.insert(req.key, validated);
      // Note [settling credit]: every choice read from the file credits its share (a share out
      // of range is refused where a settling reads it).
      if (options.late_plan_share > 0) {
        add_settling_credit(
            context.choice_cache(),
            std::max(options.late_plan_share * cached->tuning_ms, min_settling_budget_ms));
      }
      if (options.verbose) std::cerr << tune::describe_decision(req, *validated, true) << '\n';
      selected.choice = std::move(validated);
      selected.from_cache = true;
      if (!selected.choice->late_plans.empty())  // Note [late plans]
        selected.choice = settle_late_plans(context, state, req, hooks, selected.choice,
                                            /*pending=*/false);
      return selected;
    };
    if (hooks.describe) {
      std::optional<AlgoInfo> described;
      try {
        described = hooks.describe(cached->algo.id);
      } catch (const Error& error) {
        if (options.verbose) {
          std::cerr << "dnnx: cannot describe cached choice " << cached->algo.id << " alone ("
                    << error.message() << "); listing the candidates\n";
        }
      }
      if (described && !invalid_here(described, options)) return accept(std::move(*described));
    }
    const std::vector<AlgoInfo> listed = hooks.list();
    std::optional<AlgoInfo> current = find_listed(listed, cached->algo.id);
    const auto why = invalid_here(current, options);
    if (!why) return accept(std::move(*current));
    if (options.verbose) {
      std::cerr << "dnnx: cached choice " << cached->algo.id << " for " << req.desc
                << " is not valid here (" << *why << "); selecting again\n";
    }
    SelectHooks relist = hooks;
    relist.list = [&listed] { return listed; };
    selected.choice = fresh_select_locked(context, state, req, relist);
    return selected;
  } else if (options.verbose) {
    if (const std::size_t foreign = cache.foreign_entries(backend.name(), backend.fingerprint())) {
      std::cerr << "dnnx: tune cache holds " << foreign << " choices for " << backend.name()
                << " measured on another device kind or library version; ignored\n";
    }
  }
  selected.choice = fresh_select_locked(context, state, req, hooks);
  return selected;
}

ProfileResult profile_locked(Context& context, ContextState& state, const tune::Request& request,
                             const SelectHooks& hooks,
                             std::chrono::steady_clock::time_point start) {
  ProfileResult result;
  result.op = request.op;
  result.direction = request.direction;
  result.desc = request.desc;
  result.repro = request.repro;
  result.backend = state.backend().name();
  // No final round follows a profile, so every timed candidate gets all its runs (Note [warm
  // first runs] in src/tune/select.cpp).
  TuneOptions options = context.tune();
  options.final_round = false;
  // Plans are built ahead as for an exhaustive search, under the same compile budget (Note
  // [compile budget]).
  const auto list_start = std::chrono::steady_clock::now();
  std::vector<AlgoInfo> listed = hooks.list();
  result.search.list_ms = ms_between(list_start, std::chrono::steady_clock::now());
  Prepared prepared = prepare_search(options, std::move(listed), hooks, list_start);
  double wait_ms = 0;
  std::vector<std::string> skipped;
  const tune::RunOnce run = budgeted_run(hooks, prepared.pending, wait_ms, skipped);
  const auto time_start = std::chrono::steady_clock::now();
  result.rows = tune::time_candidates(prepared.candidates, options, run,
                                      /*apply_benchmark_limit=*/false, hooks.probe,
                                      first_run(state.backend()));
  result.search.build_ms = prepared.build_ms + wait_ms;
  result.search.plans_skipped = static_cast<int>(skipped.size());
  result.search.time_ms =
      std::max(0.0, ms_between(time_start, std::chrono::steady_clock::now()) - wait_ms);
  // `profile --energy`: every timed candidate's energy per call (Note [energy per call]).
  if (options.profile_energy) {
    const tune::EnergySource energy = energy_source(state.backend(), options, hooks);
    result.energy_meter = energy.meter;
    for (ProfileRow& row : result.rows) {
      if (!energy.measure || row.status != CandidateStatus::ok) continue;
      try {
        tune::record_energy(row, energy.measure(row.algo, row.median_ms));
      } catch (const Error& error) {
        row.detail += (row.detail.empty() ? "" : "; ") + std::string("energy not measured: ") +
                      error.message();
      }
    }
  }
  if (std::any_of(result.rows.begin(), result.rows.end(),
                  [](const ProfileRow& row) { return row.runs > 0; }))
    state.backend().after_timing();
  state.end_search();  // Note [search workspace]
  // The row the search would choose (Note [host cost ties] in src/tune/select.cpp); the table
  // stays fastest first.
  if (const auto chosen = tune::chosen_row(result.rows, options); chosen != result.rows.end())
    result.chosen = chosen->algo.id;
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::shared_ptr<const Choice> fall_back(
    Context& context, ContextState& state, OpKind op, Direction direction,
    std::shared_ptr<const Choice> choice, const Error& error,
    const std::function<std::vector<AlgoInfo>()>& list,
    const std::function<AlgoInfo(const std::string& id)>& run_id) {
  if (!recoverable(error) || choice->policy.kind == PolicyKind::fixed) throw;
  std::string failures = choice->algo.id + ": " + error.message();
  for (const AlgoInfo& next : fallback_order(context.tune(), *choice, list())) {
    try {
      auto fallback = std::make_shared<Choice>(*choice);
      fallback->algo = run_id(next.id);
      fallback->time_ms = std::numeric_limits<double>::quiet_NaN();
      if (context.tune().verbose) {
        std::cerr << "dnnx: " << to_string(op) << " " << to_string(direction) << " "
                  << choice->algo.id << " failed at run time (" << error.message()
                  << "); fell back to " << next.id << '\n';
      }
      // Later calls go straight to the candidate that worked.
      if (!choice->key.empty()) context.choice_cache()->insert(choice->key, fallback);
      return fallback;
    } catch (const Error& next_error) {
      if (!recoverable(next_error)) throw;
      failures += "; " + next.id + ": " + next_error.message();
    }
  }
  throw Error(error.kind(), "every admissible candidate failed at run time: " + failures,
              error.context());
}

// Note [scratch data]
// Timing on uninitialised memory can hit denormals or NaNs and mislead a search, so scratch
// tensors hold uniform random values. Drawing one per element costs about 10 ns: most of a second
// for the 64 M elements of a ResNet-50 layer at batch 64, paid by every search on scratch tensors
// (select, profile, `dnnx tune`). So one block of scratch_block values is drawn, stored in the
// dtype, and repeated over the tensor by doubling copies; the block length is a prime, so the
// pattern does not line up with any dim. The speed of the candidates does not depend on which
// finite values they see.
constexpr std::int64_t scratch_block = 65521;

void SavedStateWriter::fill(SavedState& state, Allocator& allocator, OpKind op,
                            Direction direction, std::string desc_key, const AlgoInfo& producer) {
  const std::size_t bytes = producer.saved_state_bytes;
  const bool reusable = state.storage_ != nullptr && state.storage_->bytes() >= bytes &&
                        state.storage_->device() == allocator.device();
  if (bytes == 0) {
    state.storage_.reset();
  } else if (!reusable) {
    // The old buffer goes first, so that replacing it never needs both at once.
    state.storage_.reset();
    state.storage_ = std::make_shared<Storage>(allocator, bytes);
  }
  state.op_ = op;
  state.direction_ = direction;
  state.desc_ = std::move(desc_key);
  state.producer_ = producer.id;
  state.format_ = producer.saved_state_format;
  state.bytes_ = bytes;
}

std::vector<std::int64_t> probe_batches(std::int64_t batch) {
  constexpr std::int64_t min_sliced_batch = 16;
  constexpr std::int64_t step = 4;
  std::vector<std::int64_t> batches;
  if (batch < min_sliced_batch) return batches;
  for (std::int64_t n = batch / 2; n >= 1; n /= step) batches.push_back(n);
  std::reverse(batches.begin(), batches.end());
  return batches;
}

void check_saved_state(const SavedState& state, OpKind op, const std::string& desc_key) {
  DNNX_CHECK_ARG(!state.empty(),
                 "saved_state is empty: no forward has filled it; run the forward with the same "
                 "SavedState first");
  DNNX_CHECK_ARG(state.op() == op, "saved_state was filled by a ", to_string(state.op()),
                 " forward, not a ", to_string(op), " one");
  DNNX_CHECK_ARG(state.desc() == desc_key, "saved_state was filled by a forward of another ",
                 to_string(op), " (", state.desc(), "); this call's desc is ", desc_key);
}

std::vector<AlgoInfo> restrict_to_saved_state(std::vector<AlgoInfo> candidates,
                                              const SavedState& state) {
  for (AlgoInfo& algo : candidates) {
    if (!algo.supported || algo.saved_state_format == state.format()) continue;
    algo.supported = false;
    algo.reason = cat("reads saved state of format '", algo.saved_state_format,
                      "'; the forward's candidate ", state.producer(), " wrote '", state.format(),
                      "'");
  }
  return candidates;
}

void check_reads_saved_state(const AlgoInfo& algo, const SavedState& state) {
  DNNX_CHECK_ARG(algo.saved_state_format == state.format(), "candidate ", algo.id,
                 " reads saved state of format '", algo.saved_state_format,
                 "', but the forward's candidate ", state.producer(), " wrote '", state.format(),
                 "'");
}

Tensor random_tensor(const Context& context, const Dims& dims, DType dtype, Layout layout,
                     float low, float high, unsigned seed) {
  Allocator& allocator = context.allocator();
  Tensor tensor = Tensor::empty(dims, dtype, layout, allocator);
  const bool on_host = allocator.device().kind == Device::Kind::cpu;
  // Device tensors are filled through a host tensor.
  Tensor staging = on_host ? Tensor() : Tensor::empty(dims, dtype, layout);
  Tensor& fill = on_host ? tensor : staging;
  const std::int64_t count = fill.numel();
  if (count == 0) return tensor;
  const std::int64_t block = std::min(count, scratch_block);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<std::size_t>(block));
  for (float& v : values) v = uniform(rng);
  Tensor head = Tensor::view(fill.data(), Dims{block}, dtype);
  head.copy_from_f32(values);
  // The tensor is dense, so its elements are its bytes in order.
  auto* bytes = static_cast<std::byte*>(fill.data());
  const std::size_t total = static_cast<std::size_t>(count) * size_of(dtype);
  std::size_t filled = static_cast<std::size_t>(block) * size_of(dtype);
  while (filled < total) {
    const std::size_t chunk = std::min(filled, total - filled);
    std::memcpy(bytes + filled, bytes, chunk);
    filled += chunk;
  }
  if (!on_host) copy(staging, tensor);
  return tensor;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* a0 = static_cast<const char*>(a.data());
  const char* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.span_bytes() && b0 < a0 + a.span_bytes();
}

void check_operand(const Context& context, const char* role, const Tensor& tensor,
                   const Dims& expected, DType dtype, Layout layout) {
  DNNX_CHECK_ARG(tensor.dtype() == dtype, "dtype mix: ", role, " is ", to_string(tensor.dtype()),
                 " but the desc's dtype is ", to_string(dtype));
  DNNX_CHECK_ARG(tensor.rank() == expected.rank(), role, " has rank ", tensor.rank(), " (dims ",
                 tensor.dims(), ") but the desc expects rank ", expected.rank(), " (dims ",
                 expected, ")");
  DNNX_CHECK_ARG(tensor.dims() == expected, role, " dims ", tensor.dims(),
                 " do not match the desc, which expects ", expected);
  DNNX_CHECK_ARG(tensor.data() != nullptr, role, " has null data");
  DNNX_CHECK_ARG(tensor.is_dense(layout), "layout mismatch: ", role, " strides ", tensor.strides(),
                 " are not dense ", to_string(layout), " (expected strides ",
                 dense_strides(expected, layout), ")");
  DNNX_CHECK_ARG(tensor.device() == context.device(), role, " is on ", to_string(tensor.device()),
                 " but the context runs on ", to_string(context.device()));
}

void check_no_overlap(std::string_view op, const char* out_role, const Tensor& out,
                      const char* in_role, const Tensor& in) {
  DNNX_CHECK_ARG(!overlaps(out, in), out_role, " overlaps ", in_role, " in memory; ", op,
                 " cannot run in place (use separate buffers)");
}

}  // namespace dnnx::detail
