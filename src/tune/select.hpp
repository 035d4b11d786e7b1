#pragma once
// The backend-independent selection engine: constraints, the four policies, timing, cache keys.
// Ops hand it the candidates a backend listed and a function that runs one of them; it never
// knows which op or backend it is choosing for.

#include <dnnx/algo.hpp>

#include "tune/energy.hpp"

#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::tune {

/// Runs `algo` once on the real tensors and returns the elapsed time in milliseconds, measured
/// the backend's way (host clock or device events on its stream). Throws dnnx::Error on failure.
using RunOnce = std::function<double(const AlgoInfo& algo)>;

/// One run on a slice of the problem: its time (ms, a lower bound of one full run) and the part of
/// the full problem the slice is (0 < fraction < 1, e.g. 2 of 16 samples: 0.125).
struct ProbeRun {
  double ms = 0;
  double fraction = 1;
};

/// Runs `algo` once on slice `level` of the same problem (e.g. part of the batch; level 0 the
/// smallest, each next level larger, every one smaller than the problem) and returns its
/// ProbeRun (Note [probing slow candidates]); nullopt when there is no such level or the
/// candidate cannot run that slice. Throws Skipped when the candidate should not run in this
/// search at all, not even in full: its slice cannot be run yet (Note [probing runtime-compiled
/// candidates] in backends/cudnn/conv.cpp). An empty ProbeOnce never probes.
using ProbeOnce = std::function<std::optional<ProbeRun>(const AlgoInfo& algo, int level)>;

/// Runs `algo` `runs` times back to back, timed together the backend's way, and returns the
/// milliseconds per run: what a caller running it repeatedly sees (Note [final round]). With
/// `held`, a backend that holds the device while work is queued holds it until all the runs are
/// queued (Backend::time_queued_ms, up to runs x detail::loop_queue_ms_per_call), so that the
/// reading is the device's time alone however long the queuing takes (Note [texture reads in long
/// loops] in select.cpp); otherwise the backend's time_ms. An empty RunLoop times the final round
/// with single runs.
using RunLoop = std::function<double(const AlgoInfo& algo, int runs, bool held)>;

/// Thrown by a RunOnce (or a ProbeOnce) when a candidate cannot be timed in this search although
/// nothing is wrong with it (its plan, or its plan for a probe's slice, was not ready within the
/// backend's compile budget): time_candidates() marks its row not_timed with the message, never
/// failed.
class Skipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The energy of the candidates, for the energy policies (Note [energy policies] in select.cpp).
struct EnergySource {
  EnergyOnce measure;  ///< empty: the backend reads no energy counter
  std::string meter;   ///< the counter's name, or why there is none
};

/// What a backend's timed runs measure (Backend::warm_timing()): `may_be_cold` - a candidate's
/// first run may include one-time costs (code generated or loaded on first use), so it is judged
/// loosely and followed by a warm run; `warm` - the backend's device clock leaves such costs out
/// of the reading, so the first timed run is already a fair sample (Note [warm first runs] in
/// select.cpp).
enum class FirstRun { may_be_cold, warm };

/// What is being selected for, for messages, verbose lines and the Choice record.
struct Request {
  std::string op;  ///< the op's name, to_string(OpKind): "conv", "pool", ...
  Direction direction = Direction::fwd;
  std::string desc;     ///< the desc printed
  std::string repro;    ///< CLI line reproducing the case
  std::string backend;  ///< "cpu", "cudnn", ...
  std::string key;      ///< the choice-cache key
  /// Host time the search spent before select() (listing, plan builds), ms: counted against
  /// TuneOptions::search_budget_ms.
  double spent_ms = 0;
  /// Probe every candidate once one has a time (Note [probing slow candidates]): the candidates
  /// are known to include slow ones (the settling of late plans, Note [late plans] in
  /// src/ops/dispatch.cpp).
  bool probe_at_once = false;
  /// The settling of late plans in a later process (Note [late plans] in src/ops/dispatch.cpp):
  /// once two candidates have started, no further one starts after this call has taken this many
  /// milliseconds of host time; those left are not_timed rows whose detail begins
  /// settling_budget_detail. 0: no such bound.
  double settling_budget_ms = 0;
  /// The settling of late plans under an energy policy: the kept choice's row as its search
  /// recorded it. When that holds its energy, the final contenders are measured only when a late
  /// plan is among them; otherwise the kept choice keeps the recorded energy (Note [energy
  /// policies] in src/tune/select.cpp).
  std::optional<ProfileRow> energy_kept{};
};

/// The beginning of the detail of a row that Request::settling_budget_ms left not_timed.
inline constexpr std::string_view settling_budget_detail = "left for a later process";

/// Why `algo` may not be chosen under `options`: unsupported, over the workspace limit, or not
/// deterministic when determinism is required. nullopt when it is admissible.
struct Exclusion {
  CandidateStatus status;
  std::string detail;
};
std::optional<Exclusion> exclusion(const AlgoInfo& algo, const TuneOptions& options);

/// Picks one candidate following options.policy(parse_op_kind(request.op), request.direction):
///   heuristic  - the first admissible candidate in priority (list) order; runs nothing;
///   family     - the first admissible candidate tagged with the family ("deterministic" = the
///                first deterministic one); runs nothing;
///   fixed      - the candidate with that id; unknown, unsupported or inadmissible ids throw,
///                naming the id, the reason and the valid ids;
///   exhaustive - time_candidates() with the benchmark limit, then (options.final_round) the
///                fastest few timed again in interleaved rounds, with `loop` when given (Note
///                [final round]); fastest median wins.
///   min_energy, energy_delay - as exhaustive, then the final contenders' energy per call
///                measured with `energy`; the least energy (energy x time) wins, the fastest
///                where `energy` cannot measure (Note [energy policies]).
/// No automatic policy (heuristic, family, exhaustive) picks a candidate noted "overflow_risk"
/// (Note [unsafe candidates]); exhaustive times it, and the timings list the choice first.
/// Throws Error(Unsupported) when no candidate is admissible (e.g. a workspace limit nothing
/// meets). Writes one line to stderr when options.verbose.
/// `finish`, when given, completes the choice before that line is written (the op layer adds
/// the search's time split, Choice::search, which the line then shows).
Choice select(const Request& request, const std::vector<AlgoInfo>& candidates,
              const TuneOptions& options, const RunOnce& run, const ProbeOnce& probe = {},
              FirstRun first_run = FirstRun::may_be_cold, const RunLoop& loop = {},
              const std::function<void(Choice&)>& finish = {}, const EnergySource& energy = {});

/// Times candidates in list order. The first run of each is timed: if it exceeds abandon_factor x
/// the best median so far the candidate is abandoned; otherwise it counts as the first warm-up,
/// and options.timing_runs timed runs follow (median and min kept), unless the first of them
/// already exceeds max(1, abandon_factor / 2) x the best median, which abandons the candidate
/// too (Note [abandoning slow candidates]). With FirstRun::warm the first run is the first
/// timed run instead, judged by that warm bound at once (Note [warm first runs]). Unless
/// options.time_naive,
/// candidates noted "reference" (naive fallbacks) are abandoned without running once another
/// candidate has been timed. Once a candidate has been abandoned (or, with `probe_at_once`, once
/// one has a time), `probe` (when given) runs each later candidate on a slice first and abandons
/// it when even that takes over 2x the best median (Note [probing slow candidates]); one whose
/// probe throws Skipped is not_timed; a candidate noted "heuristics_top" is abandoned on a slice
/// only beyond abandon_factor x the best and runs in full when its probe throws Skipped. With
/// FirstRun::warm, probing also starts once the best median is long, and with a final round a
/// long run's first sample is its only one (Note [long runs]). One that throws otherwise is
/// marked failed; inadmissible ones are marked with
/// their exclusion. With `apply_benchmark_limit`, at most options.benchmark_limit candidates are
/// run (counting only those that actually ran), and once one has been timed and `spent_ms` plus
/// this call's own time reaches options.search_budget_ms (when set), only candidates noted
/// "heuristics_top" start (Note [search budget]); the rest are not_timed. With `settling_budget_ms`
/// (Request::settling_budget_ms), once two candidates have started no further one starts after
/// this call has taken that long. Rows come back fastest first, then the rest in list order.
std::vector<ProfileRow> time_candidates(const std::vector<AlgoInfo>& candidates,
                                        const TuneOptions& options, const RunOnce& run,
                                        bool apply_benchmark_limit, const ProbeOnce& probe = {},
                                        FirstRun first_run = FirstRun::may_be_cold,
                                        double spent_ms = 0, bool probe_at_once = false,
                                        double settling_budget_ms = 0);

/// Sorts timed (ok) rows fastest first, the others after them in their order (stable).
void sort_fastest_first(std::span<ProfileRow> rows);

/// The row an exhaustive search chooses among `rows` (fastest first, as time_candidates() and the
/// final round leave them): the fastest timed one an automatic policy may pick (Note [unsafe
/// candidates]), unless it is noted "host_heavy" and the fastest such row without that note is
/// within options.host_tie of it (Note [host cost ties] in select.cpp); rows.end() when none.
std::vector<ProfileRow>::iterator chosen_row(std::vector<ProfileRow>& rows,
                                             const TuneOptions& options);

/// The choice-cache key: every input that can change the answer. `desc_key` is the op's canonical
/// desc text, `fingerprint` the backend's library versions / machine (Backend::fingerprint()).
std::string make_key(std::string_view op, std::string_view desc_key, Direction direction,
                     const TuneOptions& options, std::string_view fingerprint);

/// The verbose line for a decision ("dnnx: conv fwd ... -> id (1.23 ms, 7 timed, tuning 40 ms)").
std::string describe_decision(const Request& request, const Choice& choice, bool from_cache);

}  // namespace dnnx::tune
