#include "tune/select.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::tune {
namespace {

ErrorContext context_of(const Request& request, std::string implementation = {}) {
  return {request.op + " " + std::string(to_string(request.direction)),
          request.repro,
          request.backend,
          std::move(implementation),
          {}};
}

std::string supported_ids(const std::vector<AlgoInfo>& candidates) {
  std::vector<std::string> ids;
  for (const AlgoInfo& algo : candidates) {
    if (algo.supported) ids.push_back(algo.id);
  }
  return ids.empty() ? std::string("(none)") : detail::join(ids, ", ");
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Note [unsafe candidates]: a candidate marked overflow_risk (e.g. a cuDNN mode that takes exp(x)
// without subtracting the maximum, inf above ~88) is correct only for inputs the caller knows to
// be bounded. It is listed, profiled and runs when named by id (fixed:<id>), but no automatic
// policy picks it: the heuristic skips it and exhaustive selection times it without choosing it.
bool unsafe(const AlgoInfo& algo) { return algo.overflow_risk; }

// A timed row an automatic policy may pick.
bool pickable(const ProfileRow& row) {
  return row.status == CandidateStatus::ok && !unsafe(row.algo);
}

// Note [host cost ties]
// A caller pays a candidate's host time on every call. Where a backend's launches run directly
// rather than from a captured graph (a framework's allocator handing a layer new memory every
// step, so that no graph replays: Note [graph replay] in backends/cudnn/launch_graph.hpp), a
// training step can spend more host time than GPU time, and then a candidate that costs several
// times the others' host time per call slows the step by more than its kernel saves. cuDNN's legacy
// convolution calls are such (25-45 us of host time on an H100/H200 host, against 5-8 us for
// cudnnBackendExecute), and an exhaustive search often ranks one of them first by a margin within
// the spread of repeated runs (docs/benchmarks.md, "GPU convolution vs PyTorch"). A backend notes
// such candidates "host_heavy" (the cudnn backend: its legacy calls, and the engine configs that
// read through textures, which run without graph replay: Note [texture reads in long loops]); the
// search (and a profile's `chosen`) then takes the fastest candidate without that note when it is
// within TuneOptions::host_tie (2% by default; 0 turns the rule off) of the fastest one. A
// search's timings put the chosen row first, as they do past an unsafe one; a profile's table
// stays fastest first.
bool host_heavy(const AlgoInfo& algo) { return algo.has_note("host_heavy"); }

bool in_family(const AlgoInfo& algo, const std::string& family) {
  if (family == "deterministic") return algo.deterministic;
  return std::find(algo.families.begin(), algo.families.end(), family) != algo.families.end();
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The first admissible candidate matching `accept`, or null.
template <typename Accept>
const AlgoInfo* find_admissible(const std::vector<AlgoInfo>& candidates, const TuneOptions& options,
                                Accept accept) {
  for (const AlgoInfo& algo : candidates) {
    if (accept(algo) && !exclusion(algo, options)) return &algo;
  }
  return nullptr;
}

// What the heuristic policy runs: the first admissible candidate an automatic policy may pick.
bool heuristic_may_pick(const AlgoInfo& algo) { return !unsafe(algo); }

// The first admissible candidate matching `accept`, or an Unsupported error that says what
// excluded each candidate, so a user sees e.g. that a workspace limit of 0 ruled out everything.
template <typename Accept>
const AlgoInfo& first_admissible(const Request& request, const std::vector<AlgoInfo>& candidates,
                                 const TuneOptions& options, Accept accept,
                                 std::string_view wanted) {
  if (const AlgoInfo* found = find_admissible(candidates, options, accept)) return *found;
  std::vector<std::string> excluded;
  for (const AlgoInfo& algo : candidates) {
    if (!accept(algo)) continue;
    if (auto why = exclusion(algo, options)) excluded.push_back(algo.id + ": " + why->detail);
  }
  detail::raise(
      ErrorKind::Unsupported,
      detail::cat("no ", wanted, " candidate meets the constraints",
                  excluded.empty() ? std::string() : " (" + detail::join(excluded, "; ") + ")"),
      context_of(request));
}

}  // namespace

void sort_fastest_first(std::span<ProfileRow> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    const bool a_ok = a.status == CandidateStatus::ok;
    const bool b_ok = b.status == CandidateStatus::ok;
    if (a_ok != b_ok) return a_ok;
    return a_ok && a.median_ms < b.median_ms;
  });
}

std::optional<Exclusion> exclusion(const AlgoInfo& algo, const TuneOptions& options) {
  if (!algo.supported) return Exclusion{CandidateStatus::unsupported, algo.reason};
  const auto limit = options.effective_workspace_limit();
  if (limit && algo.workspace_bytes > *limit) {
    return Exclusion{
        CandidateStatus::over_workspace_limit,
        detail::cat("needs ", algo.workspace_bytes, " B of workspace, limit is ", *limit, " B")};
  }
  if (options.deterministic && !algo.deterministic) {
    return Exclusion{CandidateStatus::not_deterministic,
                     "not deterministic and deterministic mode is on"};
  }
  return std::nullopt;
}

// Note [probing slow candidates]
// Abandoning a candidate after its first run bounds its cost to one run, but that run can be long:
// for ResNet-50's first layer in f16 on an H100 the non-tensor-core engines and legacy algorithms
// take 100-250 ms per run against 0.17 ms for the best, and the hundred or so of them made the
// exhaustive search of one layer-direction take 2-4 s. A run on a slice of the problem (the first
// samples of the batch, or for a convolution of a small batch the first rows of its output: Note
// [conv probe slices] in src/ops/conv_slices.cpp; backends run the same candidate on the smaller
// desc) costs a fraction of that and is a lower bound of the full run, since the full problem
// contains the slice's work; so when the slice alone already takes more than probe_factor (2, or
// abandon_factor if smaller) x the best median, the candidate cannot win and is abandoned without a
// full run. The bound is sound, so this factor can be tighter than abandon_factor, which judges a
// cold first run: a slice is timed warm (the cudnn backend's clock starts once the run is queued,
// Note [gated timing]; the cpu backend runs oneDNN's gemm plans once when it builds them). Probing
// is not free (a plan for the smaller desc and an extra short run per candidate), so it starts only
// once a candidate has been abandoned, i.e. once this (desc, direction) has shown that it has
// candidates worth skipping; searches without slow candidates never probe. A slice the candidate
// cannot run (nullopt or an error) leaves the decision to the full run. A candidate noted
// "heuristics_top" (a library's own top picks, which an exhaustive search promises to time) is
// ruled out by its slice only beyond abandon_factor (4) x the best, the bound a cold full run is
// judged by. A probe may also throw Skipped: the candidate cannot be probed yet and should not run
// in full either (the cudnn backend's runtime-compiled candidates whose slice plan is still
// compiling when the compile budget runs out: Note [probing runtime-compiled candidates] in
// backends/cudnn/conv.cpp); its row is not_timed with the reason, and the op layer keeps it as a
// late plan (Note [late plans] in src/ops/dispatch.cpp). Late plans are candidates no search has
// bounded, so their settling probes from the start (Request::probe_at_once), every candidate once
// one has a time: the kept choice, listed first, runs in full, and each late plan is probed
// against it.
//
// A run's time need not grow with the batch in proportion: on an H200, cuDNN's legacy
// bwd_weights algo_0 and algo_1 for DeepLabV3's dilated ASPP layer (dilation 12, f16) take 2-6 ms
// at a batch of 1-4 and 4.3 s at 16, so their eighth-of-the-batch slice (3 ms, within 2x the best
// 1.5 ms) passed and six full runs made a 27 s search. So a slice that passes but whose time,
// scaled to the whole problem (ms / fraction), is over escalate_factor x the best is followed by
// the next larger slice (the op's next level), judged by the same sound bound; only a candidate
// that passes every slice gets its full run. A candidate whose scaled slice is within
// escalate_factor goes to the full run at once: it may be a contender, and larger slices would
// cost it most of a full run again.
//
// Level 0 is the op's smallest slice and each level a few times larger (convolution: one or a
// few samples, then 4x more each level up to half the batch; output rows the same way), so that a
// slow candidate costs about the first slice over the bound, a few times the best median, however
// slow it is in full. With an eighth of the batch as the first slice, a dozen of cuDNN's
// tensor-core engines took 8.5-9 ms per probe on EfficientNet-B0's 5x5 depthwise forward of 480
// channels (batch 128, f16) against 0.043 ms for the best on the whole problem (docs/benchmarks.md,
// "Search time").
constexpr double probe_factor = 2.0;
constexpr double escalate_factor = 4.0;
constexpr int max_probe_levels = 8;  // a bound on the loop whatever an op's slices do

// Note [warm first runs]
// A backend whose time_ms() reads a device clock that starts only once the run is queued, so
// that one-time host costs (a module loading, a graph capture) stay out of it (the cudnn
// backend, Note [gated timing] in backends/cudnn/backend.cpp), gives a fair sample from a
// candidate's very first run. Then that run is judged at once by the warm bound (max(1,
// abandon_factor / 2) x the best median: 2 by default) instead of the loose cold bound followed by
// a warm run, and it is the first timed run. With a final round, a candidate whose first sample
// is over screen_band x the best is not sampled further: the final round re-times the fastest
// few within final_band, and for the rest one precise sample ranks well enough. On ResNet-50's
// first layer in f16 (bwd_data: 249 candidates, ~110 of them within 4x of the best) this removes
// about half of the runs a search makes (docs/benchmarks.md, "Exhaustive search study"). Backends
// timing on a host clock (cpu, reference) keep the cold/warm pair and every sample: their runs are
// noisier, and a first run may include generating code.
constexpr double screen_band = 1.25;

// Note [long runs]
// On a device clock (FirstRun::warm) one run of a few milliseconds is a precise sample: the
// clock's resolution and a launch's jitter are microseconds, and such a kernel streams the whole
// L2 many times, so whatever cache state the previous run left is a fraction of a percent of it.
// The fp32 layers beyond ResNet-50 are that long: C3D's conv2a bwd_weights (batch 30) takes
// 26-43 ms per run for its best candidates and DeepLabV3's dilated ASPP layers 13-19 ms, and their
// searches took 4.2 s on an H200, in the first pass's three samples per candidate, the final
// round's twice-per-turn runs, and one full run of cuDNN's engine 0 (0.55-1.1 s; it had no probe
// then) (docs/benchmarks.md, "Search time of long runs"). So with a device clock, once a sample is
// at least long_run_ms:
// - the first pass takes that one sample of the candidate (as for one screened out: the final
//   round re-times the contenders);
// - probing starts (Note [probing slow candidates]): once the best median is that long, a probe's
//   slice plan and short run cost less than one full run of a slow candidate;
// - the final round, when its sample is that long (the best contender's run, or the loop of runs
//   a final_loop_ms of that length or more makes of it: Note [final round]), times each
//   contender once per turn with no untimed run before it, in half of timing_runs turns
//   (rounded up).
// A host clock (cpu, reference) keeps every sample: its runs are noisier and its caches (a
// last-level cache of hundreds of MB) can hold what a millisecond run touches.
constexpr double long_run_ms = 2.0;

// Note [pruning variants]
// A candidate may declare a seed (AlgoInfo::variant_of): the same kernel with other knobs, as the
// cudnn backend's knob variants are of an engine's first config (Note [knob search] in
// backends/cudnn/conv_engine.cpp), listed after the seed. A variant changes tile shapes, split-k,
// stages or the like of one kernel family, so it rarely beats its seed by much: the knob search's
// wins on ResNet-50 were 5-14% over the best of cuDNN's own configs (docs/benchmarks.md, "cuDNN
// knob search modes"). So a variant is not run when its seed was timed and its median is over
// variant_factor x the best median so far, nor when the seed was abandoned (too slow) or failed;
// its row is abandoned, naming the seed and the numbers. The default, 2, is the warm abandon bound
// and the final round's band (Note [final round]): a seed that could not be a contender itself
// does not get its variants explored. It matters because a variant's first run can cost far more
// than its time on the device: on an H200, EfficientNet-B0's depthwise layer spent 5 s of a 5 s
// search on the first run of one variant of an FFT engine whose seed was 20x slower than the best
// (docs/benchmarks.md, "Exhaustive search study"). A seed that was not timed (excluded by the
// constraints, over the benchmark limit, its plan not ready in time, not listed, or listed after
// the variant) says nothing of the variant, which then runs as any other candidate. variant_factor
// 0 turns the rule off; infinity prunes only the variants of abandoned or failed seeds. Profiles
// apply it as they apply abandon_factor, so that the row chosen is the one the search would choose.

// Note [search budget]
// An exhaustive search's time is mostly one-time costs of the candidates it runs, not their
// runs: on an H200, EfficientNet-B0's fp16 depthwise layers of 672-1152 channels spent 1.6-2.1 s
// of 1.8-2.2 s searches in 150-190 probes on slices whose kernels took microseconds, and
// DeepLabV3's layer-4 bwd_weights 4.3 s timing 124 candidates of 0.2-0.4 ms each
// (docs/benchmarks.md, "GPU convolution beyond ResNet-50"). A budget (search_budget_ms) caps
// that: once the search's host time, its listing and plan builds included (Request::spent_ms),
// reaches it, no new candidate starts except those the backend's own heuristics rank first
// (notes "heuristics_top": Note [heuristics' top configs] in backends/cudnn/conv_engine.cpp),
// which an exhaustive search always runs, so that a budget never leaves it below what those
// picks reach; and until one candidate has a time, candidates keep starting (a search whose
// listing alone took the budget still chooses). The others become not_timed rows naming the
// budget, and the final round re-times the contenders found as usual. The budget is checked
// between candidates: a search overruns it by the candidate it is timing, the heuristics' picks
// listed later, and the final round. What is timed within it follows the list order (each
// backend lists its likeliest candidates first: Note [cudnn candidate order] in
// backends/cudnn/conv.cpp), and the choice may differ from an unbounded search's, which is why
// the budget is part of the choice-cache key. Profiles time every candidate and ignore it, as
// they ignore benchmark_limit. 0, the default, is no budget.

// The same bounds as the CLI's --runs / --warmup (docs/cli.md): a search of 2^31 runs per
// candidate would never end, and its timing table would not fit in memory.
namespace {
void check_run_counts(const TuneOptions& options) {
  DNNX_CHECK_ARG(options.timing_runs >= 1 && options.timing_runs <= 1000,
                 "timing_runs must be in [1, 1000], got ", options.timing_runs);
  DNNX_CHECK_ARG(options.warmup_runs >= 0 && options.warmup_runs <= 1000,
                 "warmup_runs must be in [0, 1000], got ", options.warmup_runs);
}

void check_host_tie(const TuneOptions& options) {
  DNNX_CHECK_ARG(options.host_tie >= 0 && options.host_tie <= TuneOptions::max_host_tie,
                 "host_tie must be a fraction from 0 (off) to ", TuneOptions::max_host_tie,
                 ", got ", options.host_tie);
}

void check_final_contenders(const TuneOptions& options) {
  DNNX_CHECK_ARG(options.final_contenders >= 0 &&
                     options.final_contenders <= TuneOptions::max_final_contenders,
                 "final_contenders must be from 0 (the default count) to ",
                 TuneOptions::max_final_contenders, ", got ", options.final_contenders);
}

void check_search_budget(const TuneOptions& options) {
  DNNX_CHECK_ARG(options.search_budget_ms >= 0 &&
                     options.search_budget_ms <= TuneOptions::max_search_budget_ms,
                 "search_budget_ms must be milliseconds from 0 (no budget) to ",
                 TuneOptions::max_search_budget_ms, ", got ", options.search_budget_ms);
}

bool heuristics_top(const AlgoInfo& algo) { return algo.has_note("heuristics_top"); }

// Note [scout candidates]
// A search judges each candidate against the best median found before it (abandoning, probing,
// pruning variants), so a fast candidate timed late leaves the slow ones before it their full
// runs and their escalating probes. A backend may list a likely fast candidate late for another
// reason: the cudnn backend lists its folds after every other candidate so that the heuristic
// pick stays the convolution's own (Note [fold candidates] in backends/cudnn/conv_folds.cpp), and
// on an H200 the fp32 search of R(2+1)D-18's l1.spatial bwd_weights spent 2 s of 2.37 on full
// runs and probes judged against a best of 13.7 ms before its folds, the fastest at 4.6 ms, came
// (docs/benchmarks.md, the fp32 suite table). Such a candidate carries the note "scout": the first
// pass times the scouts right after the first admissible candidate (usually the heuristic pick,
// which stays the first timed), then the others in their order. The listing, and so the
// heuristic policy, keep the backend's order.
bool scout(const AlgoInfo& algo) { return algo.has_note("scout"); }

// The order time_candidates() visits `candidates` in (Note [scout candidates]).
std::vector<const AlgoInfo*> visiting_order(const std::vector<AlgoInfo>& candidates,
                                            const TuneOptions& options) {
  std::vector<const AlgoInfo*> order;
  order.reserve(candidates.size());
  const auto first = std::find_if(candidates.begin(), candidates.end(), [&](const AlgoInfo& algo) {
    return !exclusion(algo, options).has_value();
  });
  for (auto it = candidates.begin(); it != candidates.end(); ++it) {
    if (scout(*it) && it > first) continue;
    order.push_back(&*it);
    if (it == first) {
      for (auto later = std::next(first); later != candidates.end(); ++later)
        if (scout(*later)) order.push_back(&*later);
    }
  }
  return order;
}

void check_variant_factor(const TuneOptions& options) {
  const double factor = options.variant_factor;
  DNNX_CHECK_ARG(factor == 0 || factor >= 1,
                 "variant_factor must be 0 (off) or >= 1 (infinity allowed), got ", factor);
}

// Why `algo`, a variant of a candidate among `timed` (the rows made so far), is not run; nullopt
// when it runs (Note [pruning variants]).
std::optional<std::string> pruned_variant(const AlgoInfo& algo, std::span<const ProfileRow> timed,
                                          double best, double factor) {
  if (algo.variant_of.empty() || factor == 0) return std::nullopt;
  const auto seed = std::find_if(timed.begin(), timed.end(), [&](const ProfileRow& row) {
    return row.algo.id == algo.variant_of;
  });
  if (seed == timed.end()) return std::nullopt;
  switch (seed->status) {
    case CandidateStatus::abandoned:
      return detail::cat("variant of ", algo.variant_of, ", which was abandoned (", seed->detail,
                         "); not run (variant_factor)");
    case CandidateStatus::failed:
      return detail::cat("variant of ", algo.variant_of,
                         ", which failed; not run (variant_factor)");
    case CandidateStatus::ok:
      if (seed->median_ms > factor * best) {
        return detail::cat("variant of ", algo.variant_of, ", whose median ", seed->median_ms,
                           " ms > variant_factor ", factor, " x best ", best, " ms; not run");
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}
}  // namespace

std::vector<ProfileRow> time_candidates(const std::vector<AlgoInfo>& candidates,
                                        const TuneOptions& options, const RunOnce& run,
                                        bool apply_benchmark_limit, const ProbeOnce& probe,
                                        FirstRun first_run, double spent_ms, bool probe_at_once,
                                        double settling_budget_ms) {
  const auto start = std::chrono::steady_clock::now();
  auto is_naive = [&options](const AlgoInfo& algo) { return !options.time_naive && algo.naive; };
  check_run_counts(options);
  DNNX_CHECK_ARG(options.benchmark_limit >= 0, "benchmark_limit must be >= 0, got ",
                 options.benchmark_limit);
  DNNX_CHECK_ARG(options.abandon_factor > 1.0, "abandon_factor must be > 1, got ",
                 options.abandon_factor);
  check_variant_factor(options);
  check_host_tie(options);
  check_search_budget(options);
  check_final_contenders(options);
  // Note [search budget]: the host time spent so far, listing and plan builds included.
  const bool budgeted = apply_benchmark_limit && options.search_budget_ms > 0;
  auto search_ms = [&] { return spent_ms + elapsed_ms(start); };
  std::vector<ProfileRow> rows;
  rows.reserve(candidates.size());
  double best = std::numeric_limits<double>::infinity();
  int ran = 0;
  int started = 0;  // candidates past the budgets below
  bool probing = probe_at_once && probe;
  const bool warm_first = first_run == FirstRun::warm;  // Note [warm first runs]
  for (const AlgoInfo* candidate : visiting_order(candidates, options)) {
    const AlgoInfo& algo = *candidate;
    ProfileRow& row = rows.emplace_back();
    row.algo = algo;
    if (auto why = exclusion(algo, options)) {
      row.status = why->status;
      row.detail = why->detail;
      continue;
    }
    if (apply_benchmark_limit && options.benchmark_limit > 0 && ran >= options.benchmark_limit) {
      row.status = CandidateStatus::not_timed;
      row.detail = detail::cat("benchmark_limit ", options.benchmark_limit, " reached");
      continue;
    }
    if (budgeted && std::isfinite(best) && !heuristics_top(algo)) {
      if (const double ms = search_ms(); ms >= options.search_budget_ms) {
        row.status = CandidateStatus::not_timed;
        row.detail = detail::cat("search_budget_ms ", options.search_budget_ms, " spent (", ms,
                                 " ms into the search)");
        continue;
      }
    }
    if (settling_budget_ms > 0 && started >= 2) {
      if (const double ms = elapsed_ms(start); ms >= settling_budget_ms) {
        row.status = CandidateStatus::not_timed;
        row.detail = detail::cat(settling_budget_detail, " (the settling took ", ms, " of its ",
                                 settling_budget_ms, " ms)");
        continue;
      }
    }
    ++started;
    // Note [abandoning slow candidates]: naive fallbacks (oneDNN's ref:any, plain loops) can be
    // 1000x slower than the best — minutes per run on a ResNet layer. They exist so that a call
    // can always run, not to win; once a real candidate has been timed they are not run at all
    // (fixed:<id> runs them; time_naive times them). Any other candidate's first run is timed
    // and, if it is already abandon_factor x slower than the best, it is not run again. That run
    // may be cold (a CPU kernel generated on first use), so the factor is loose; the next run is
    // warm, and one over half of abandon_factor (2 by default, at least 1) x the best is not run
    // again either: with the default it could not even be a final-round contender (final_band,
    // also 2). A huge abandon_factor (time everything) turns both off. Where the backend's first
    // timed run is already warm, the warm bound judges it at once (Note [warm first runs]).
    if (is_naive(algo) && std::isfinite(best)) {
      row.status = CandidateStatus::abandoned;
      row.detail =
          "naive reference implementation, not run once a faster candidate was timed "
          "(set time_naive / --time-naive to time it)";
      continue;
    }
    // Note [pruning variants]: the rows before this one are the candidates visited before it.
    if (auto why = pruned_variant(algo, std::span<const ProfileRow>(rows).first(rows.size() - 1),
                                  best, options.variant_factor)) {
      row.status = CandidateStatus::abandoned;
      row.detail = std::move(*why);
      continue;
    }
    // Note [long runs]: once the best is long, a probe costs less than a slow full run.
    if (probe && warm_first && std::isfinite(best) && best >= long_run_ms) probing = true;
    // Note [probing slow candidates]; a candidate noted "heuristics_top" (the library's own top
    // picks: Note [heuristics' top configs] in backends/cudnn/conv_engine.cpp) is ruled out only
    // beyond abandon_factor, and one that cannot be probed yet gets its full run. Before any
    // candidate has a time no slice can rule one out: the settling of late plans probes from its
    // first candidate, the kept choice, which goes to its full run without a probe.
    if (probing && std::isfinite(best)) {
      const bool top = heuristics_top(algo);
      const double factor =
          top ? options.abandon_factor : std::min(probe_factor, options.abandon_factor);
      std::optional<ProbeRun> slice;
      bool skipped = false;
      for (int level = 0; level < max_probe_levels; ++level) {
        try {
          slice = probe(algo, level);
        } catch (const Skipped& why) {
          if (top) {
            slice.reset();
            break;
          }
          row.status = CandidateStatus::not_timed;
          row.detail = why.what();
          skipped = true;
          break;
        } catch (const std::exception&) {
          slice.reset();  // the full run below decides (and reports the error if it fails too)
        }
        if (!slice || slice->ms > factor * best) break;
        if (slice->ms / slice->fraction <= escalate_factor * best) break;
      }
      if (skipped) continue;
      if (slice && slice->ms > factor * best) {
        row.status = CandidateStatus::abandoned;
        row.detail = detail::cat("a run on a slice of the problem (", slice->fraction,
                                 " of it) took ", slice->ms, " ms > ", factor, " x best ", best,
                                 " ms; the full run cannot be faster");
        continue;
      }
    }
    ++ran;
    try {
      // A row abandoned after `runs` runs, the last taking `ms`.
      auto abandon = [&row](double ms, int runs, std::string why) {
        row.status = CandidateStatus::abandoned;
        row.detail = std::move(why);
        row.median_ms = row.min_ms = ms;
        row.runs = runs;
      };
      const double warm_factor = std::max(1.0, options.abandon_factor / 2);
      const double first = run(algo);
      const double first_factor = warm_first ? warm_factor : options.abandon_factor;
      if (first > first_factor * best) {
        abandon(first, 1,
                detail::cat("first run ", first, warm_first ? " ms (warm) > " : " ms > ",
                            first_factor, " x best ", best, " ms"));
        if (probe) probing = true;
        continue;
      }
      // The first run served as the first warm-up (and, read warm, is the first sample too).
      for (int i = 1; i < options.warmup_runs; ++i) run(algo);
      std::vector<double> times;
      times.reserve(static_cast<std::size_t>(options.timing_runs));
      if (warm_first || options.warmup_runs == 0) times.push_back(first);
      if (!warm_first) {
        // Note [abandoning slow candidates], warm: the first run after the cold one.
        const double warm = run(algo);
        if (warm > warm_factor * best) {
          abandon(warm, 2,
                  detail::cat("first run ", first, " ms, then a warm run ", warm, " ms > ",
                              warm_factor, " x best ", best, " ms"));
          continue;
        }
        times.push_back(warm);
      }
      // Note [warm first runs], Note [long runs]: one sample ranks it.
      const bool one_sample = warm_first && options.final_round &&
                              (times.front() > screen_band * best || times.front() >= long_run_ms);
      const int wanted = one_sample ? 1 : options.timing_runs;
      while (static_cast<int>(times.size()) < wanted) times.push_back(run(algo));
      row.status = CandidateStatus::ok;
      row.median_ms = median(times);
      row.min_ms = *std::min_element(times.begin(), times.end());
      row.runs = static_cast<int>(times.size());
      // Only a candidate an automatic policy may pick sets the bar for abandoning others.
      if (!unsafe(algo)) best = std::min(best, row.median_ms);
    } catch (const Skipped& skipped) {
      --ran;  // it did not run: the benchmark limit counts runs
      row.status = CandidateStatus::not_timed;
      row.detail = skipped.what();
    } catch (const Error& error) {
      row.status = CandidateStatus::failed;
      row.detail = error.what();
    } catch (const std::exception& error) {
      row.status = CandidateStatus::failed;
      row.detail = error.what();
    }
  }
  sort_fastest_first(rows);
  return rows;
}

// Note [final round]
// Candidates are timed one after the other, so a machine whose speed changes during the search
// (a shared virtual machine whose vCPUs lose their cores for seconds, a GPU changing clocks) can
// make a slower candidate look faster simply because it was timed in a quieter moment: on the
// 2-vCPU benchmark machine exhaustive selection sometimes kept a convolution 1.6x slower than the
// one it had timed first. So the contenders, the fastest few (at most final_contenders) whose
// medians are within final_band of the best, are timed again in rounds that run each of them once
// in turn (timing_runs rounds; fewer for long runs, Note [long runs]), and the median of those
// interleaved runs decides and is what the table reports: every contender sees the same conditions.
// A contender that fails now is dropped. Since the final round measures the contenders, the first
// pass needs fewer runs to find them: half of timing_runs, rounded up (3 of the default 5), which
// shortens every search. In each turn a contender runs twice and only the second run is timed: run
// right after another candidate, a run finds the caches as that one left them, not as a call of its
// own would (on the 2-vCPU machine, whose 260 MB L3 holds a 26 MB activation, relu's
// streaming-store kernel timed after oneDNN's eltwise took 1.2 ms against 0.8 back to back, and
// lost to it).
//
// Where the backend can time a loop (RunLoop), the timed part of a turn is a loop of runs back to
// back, enough of them to last final_loop_ms (below): a network calls a layer
// after other work is already queued, so the run's launch and ramp-up overlap the previous
// kernel's tail, while a single run between two events pays them in full, and how much they cost
// differs between candidates. On an H100, ResNet-50's 56x56 64->256 1x1 forward in f16 had two
// engines whose single runs ranked one way and whose back-to-back runs (0.0530 against 0.0515 ms)
// the other, so single runs would keep the one slower in the benchmark's loop and in a network
// (docs/benchmarks.md, "GPU convolution vs PyTorch"). Kernels over final_loop_ms run once per
// turn: for them the difference is a few microseconds in a run. On a host clock a loop measures
// what single runs do, averaged.
// The loop's length is TuneOptions::final_loop_ms (0.5 by default; DNNX_FINAL_LOOP_MS). A
// contender under min_loop_run_ms counts as that long when the runs are counted, so the default
// gives at most final_loop_max (32) runs. A backend may hold a loop's runs behind one gate while
// they are queued (the cudnn backend: Note [gated timing] in backends/cudnn/backend.cpp), and its
// gate gives up after a fraction of a millisecond, about what 32 queued graph replays take; so a
// longer loop (a final_loop_ms raised to tens of milliseconds, for the clocks a long run of one
// kernel settles to under the board's power limit) is timed as consecutive loops of at most
// final_loop_max runs, each a reading, their runs weighted together. Between two of them the GPU
// idles while the host reads the one and queues the next (tens of microseconds), a small part of
// loops of a millisecond or more.
//
// The candidate the heuristic policy would run (the backend's first admissible one) joins the
// contenders when its first-pass median is within the band, even if it is not among the fastest
// few: knob variants of the same engine can crowd a library's own first pick out of the top four
// on a first pass of three runs, where a 2-4% difference is noise, and a search would then keep a
// candidate slower than the one no search at all runs. On an H200, C3D's conv2a bwd_data in f16
// kept a variant of cuDNN's engine 67 at 1.475 ms whose heuristic pick (another variant of it)
// ran 1.421 ms in the same process, and R(2+1)D-18's l4.spatial bwd_weights the same with engine
// 65 (docs/benchmarks.md, "GPU convolution beyond ResNet-50"); whether the pick had contended
// there was not recorded.
//
// Where the turns are loops, the first pass's single runs rank short candidates poorly, for the
// reason the loops exist: a single run of a few microseconds pays its launch and ramp-up in full,
// and those differ between candidates by more than their kernels do. Four contenders are then
// too few, the more so as a library's equivalent entries fill them: on an H200, MobileNetV2's
// b6.project forward in f16 (7 us) had cuDNN's engine 58 under three workspace knobs and a legacy
// algorithm running the same kernel as its four contenders, and a cuBLASLt configuration sampled
// at 8.9 us in single runs was left out, though it ran 7.0 us back to back against their 7.4 (and
// won another process's search whose single runs had read it at 7.2; docs/benchmarks.md, "Final
// round of short kernels"). So when the contenders are timed as loops, the fastest
// loop_contenders (10) within the band contend: ten short loops per turn cost a few ms.
// TuneOptions::final_contenders (DNNX_FINAL_CONTENDERS) sets another count, up to every candidate
// within the band: ten can leave out a configuration whose single runs read 22-28% over the best
// and that PyTorch's loops ran as fast as dnnx's choice (U-Net's d3.conv2 forward in f16 on an
// H200; docs/benchmarks.md, "Rows above 1.00 beyond the rounds' spread").
constexpr std::size_t final_contenders = 4;
constexpr std::size_t loop_contenders = 10;
constexpr int final_loop_max = 32;
// The shortest run counted when a loop's runs are counted: the default final_loop_ms (0.5) over
// final_loop_max, so that a default loop is at most final_loop_max runs.
constexpr double min_loop_run_ms = 0.5 / final_loop_max;
// The most runs one final-round sample takes: final_loop_ms of the longest allowed, at the
// shortest counted run.
constexpr double max_loop_runs = TuneOptions::max_final_loop_ms / min_loop_run_ms;

// `runs` runs of `algo` back to back as consecutive loops of at most final_loop_max runs (Note
// [final round]): ms per run.
double chunked_loop(const RunLoop& loop, const AlgoInfo& algo, int runs) {
  if (runs <= final_loop_max) return loop(algo, runs, false);
  double total_ms = 0;
  for (int done = 0; done < runs;) {
    const int chunk = std::min(final_loop_max, runs - done);
    total_ms += loop(algo, chunk, false) * chunk;
    done += chunk;
  }
  return total_ms / runs;
}

// `turns` turns in each of which every row of `rows` still ok is timed once by `sample`, in order:
// the samples per row. A row whose sample throws is marked failed, its detail `stage`'s message,
// and drops out.
std::vector<std::vector<double>> interleaved_samples(
    const std::vector<ProfileRow*>& rows, int turns,
    const std::function<double(const AlgoInfo&)>& sample, std::string_view stage) {
  std::vector<std::vector<double>> times(rows.size());
  for (int turn = 0; turn < turns; ++turn) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i]->status != CandidateStatus::ok) continue;
      try {
        times[i].push_back(sample(rows[i]->algo));
      } catch (const std::exception& error) {
        rows[i]->status = CandidateStatus::failed;
        rows[i]->detail = detail::cat("failed in ", stage, ": ", error.what());
      }
    }
  }
  return times;
}

// A row's median, minimum and run count from its samples (not empty).
void set_samples(ProfileRow& row, const std::vector<double>& times) {
  row.median_ms = median(times);
  row.min_ms = *std::min_element(times.begin(), times.end());
  row.runs = static_cast<int>(times.size());
}

// Host wall time of an exhaustive search's parts (verbose output), and the candidates that took
// the most of it (first runs that load modules, probes of slow engines).
struct SearchCost {
  int runs = 0, probes = 0;
  double run_ms = 0, probe_ms = 0, final_ms = 0;
  std::map<std::string, double> per_candidate_ms;  // runs and probes of the first pass

  void add(const std::string& id, double ms) { per_candidate_ms[id] += ms; }
  // The `count` costliest candidates, "id ms" each.
  std::string costliest(std::size_t count) const {
    std::vector<std::pair<double, std::string>> sorted;
    for (const auto& [id, ms] : per_candidate_ms) sorted.emplace_back(ms, id);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    if (sorted.size() > count) sorted.resize(count);
    std::vector<std::string> parts;
    for (const auto& [ms, id] : sorted) parts.push_back(detail::cat(id, ' ', ms, " ms"));
    return detail::join(parts, ", ");
  }
};
constexpr double final_band = 2.0;

// The final contenders among rows sorted fastest first: the fastest `most` within final_band of
// the best, and the heuristic's pick when it was timed within that band.
std::vector<ProfileRow*> final_contenders_of(std::vector<ProfileRow>& rows,
                                             const std::string& heuristic_pick,
                                             std::size_t most = final_contenders) {
  std::vector<ProfileRow*> contenders;
  for (ProfileRow& row : rows) {  // fastest first
    if (row.status != CandidateStatus::ok || unsafe(row.algo)) continue;
    if (!contenders.empty() && row.median_ms > final_band * contenders.front()->median_ms) break;
    contenders.push_back(&row);
    if (contenders.size() == most) break;
  }
  const auto pick = std::find_if(rows.begin(), rows.end(), [&](const ProfileRow& row) {
    return row.algo.id == heuristic_pick;
  });
  if (!contenders.empty() && pick != rows.end() && pick->status == CandidateStatus::ok &&
      !unsafe(pick->algo) && pick->median_ms <= final_band * contenders.front()->median_ms &&
      std::find(contenders.begin(), contenders.end(), &*pick) == contenders.end())
    contenders.push_back(&*pick);
  return contenders;
}

// Note [texture reads in long loops]
// cuDNN's knob use_tex=1 has an engine's kernel read its operands through the texture path; the
// cudnn backend notes such candidates "texture_reads". On an H200 some of them lead a short loop
// and trail a long one: ResNeXt-50's 28x28 grouped 3x3 convolutions in f32 (batch 64) ran engine
// 28 (tile_size=4, use_tex=1) forward at 0.371 ms per call in loops of 2, 0.374 in loops of 10
// and 0.395 in loops of 50 or 200, where its use_tex=0 twin ran 0.377-0.378 at every length, and
// engine 20 (tile_size=6) backward weights at 0.438, 0.460, 0.467 and 0.467 against 0.447-0.450
// (docs/benchmarks.md, "Texture-reading engines in long loops"). The final round's loops (0.5 ms:
// two runs of those) kept the texture variants, which then ran 4-5% slower in the benchmark's
// loops, as they would in a network's stream of calls; loops of 32 runs, with the host reading
// each before queuing the next, still read them fast. Other texture variants hold up in long
// loops (engine 25's backward data of the stride-2 shortcuts, within 1%), so the note alone does
// not rule a candidate out.
// What differs is the call: cuDNN creates a texture object for an operand when such a plan runs,
// which failed under stream capture for every one run so far, so these configs run without graph
// replay (Note [graph replay] in backends/cudnn/launch_graph.hpp), and the backend also notes
// them "host_heavy" (Note [host cost ties]). Issued back to back without waiting, those two
// ResNeXt-50 variants' calls took 373-384 us of host time each, about their kernels' time: each
// call waited for the device, so a stream of them has the host's turnaround between kernels;
// their twins took 11-48 us. Not every such call waits: MobileNetV2's 28x28 expansion (backward
// weights, f32) took 16.6 us against its twin's 3.2, and in the same run its loops read as its
// search did (docs/benchmarks.md, "Texture-reading engines in long loops").
// So when the final round's fastest contender is noted texture_reads and one without the note is
// within texture_band of it, those two (and the next fastest contender within the band, up to
// deep_contenders) are timed again, interleaved, in deep_turns turns of one deep loop each: runs
// back to back for deep_loop_ms (at most deep_loop_max runs), queued behind a gate held until all
// of them are (RunLoop's `held`), and those medians decide. On an H200 that added 0.1-0.4 s to the
// fp32 searches where it ran (3-11 of a file's 21-90; a loop of calls that wait for the device
// outlasts the gate, which is timed again up to its retries: Note [gated timing] in
// backends/cudnn/backend.cpp) and nothing to the others (docs/benchmarks.md, the fp32 shape
// suite). A search whose final_loop_ms is 0 (single runs decide) has no deep round either.
constexpr double texture_band = 1.08;
constexpr double deep_loop_ms = 20.0;
constexpr int deep_loop_max = 200;
constexpr int deep_turns = 3;
constexpr std::size_t deep_contenders = 3;

bool texture_reads(const AlgoInfo& algo) { return algo.has_note("texture_reads"); }

// Note [leaders that slow down in long loops]
// A final round whose samples are a few runs each (contenders of 0.125 ms or more at the default
// final_loop_ms) reads each contender near the clocks a short burst runs at. Kernels of that
// length settle 4-13% slower in a long stream of calls, under the board's power limit, and their
// neighbours with them (C3D's and DeepLabV3's 0.4-1.5 ms tensor-core kernels in f16 on an H200:
// docs/benchmarks.md, "GPU convolution beyond ResNet-50"), which a long tie-break did not re-rank
// (the same page). Some kernels fall much further: on R(2+1)D-18's l3.temporal.s2 forward in f32
// (an H200), cuDNN's 3-D engine 70 with tile_size=4 (a 256x64 FFMA kernel) read 0.426 ms in a
// final round's loops of 2 in two processes, was kept, and ran 0.52-0.55 ms in every loop of 50
// after it: 1.20 and 1.23 of PyTorch's 128x32 kernel (0.44 ms). In other processes the same
// config read 0.55 ms in the search's first runs already, and was no contender.
// So when the final round's samples were at most short_sample_runs runs of a device clock (a
// backend whose timing is warm, Note [warm first runs]; on a host clock a loop measures what
// single runs do, Note [final round]), its fastest contender, unless its texture reads send it to
// the deep round with a plain contender, is timed once more alone in one deep loop (as Note
// [texture reads in long loops] times them). Only where that loop reads more than slowdown_limit
// times its final-round median (clock settling reached 1.147 in 89 such checks over three
// files' searches, the kernel above 1.20-1.25) are the contenders whose medians are under that
// reading (deep_contenders at most, the fastest first) timed in the deep round, which decides.
// The check costs one loop of about deep_loop_ms per such search (the f16 searches of C3D's and
// DeepLabV3's long kernels: a median of 0.97-0.98 s against 0.95).
constexpr int short_sample_runs = 4;
constexpr double slowdown_limit = 1.18;

// The deep round (Note [texture reads in long loops], Note [leaders that slow down in long
// loops]): `contenders` are the final round's, timed in samples of `sample_runs` runs on a clock
// that `first_run` says is the device's or the host's.
void deep_round(std::vector<ProfileRow*> contenders, const RunLoop& loop, int sample_runs,
                FirstRun first_run) {
  std::erase_if(contenders,
                [](const ProfileRow* row) { return row->status != CandidateStatus::ok; });
  std::stable_sort(
      contenders.begin(), contenders.end(),
      [](const ProfileRow* a, const ProfileRow* b) { return a->median_ms < b->median_ms; });
  if (contenders.size() < 2) return;
  ProfileRow* const leader = contenders.front();
  const double fastest = leader->median_ms;
  if (!(fastest > 0)) return;
  const int runs = static_cast<int>(
      std::clamp(std::ceil(deep_loop_ms / fastest), 1.0, static_cast<double>(deep_loop_max)));
  const auto deep_loop = [&](const AlgoInfo& algo) { return loop(algo, runs, /*held=*/true); };
  std::vector<ProfileRow*> group{leader};
  std::string why;
  const auto plain = std::find_if(contenders.begin(), contenders.end(), [&](const ProfileRow* row) {
    return !texture_reads(row->algo) && row->median_ms <= texture_band * fastest;
  });
  if (texture_reads(leader->algo) && plain != contenders.end()) {
    group.push_back(*plain);
    why = "the fastest reads through textures, which can slow down in long loops";
    for (ProfileRow* row : contenders) {
      if (group.size() == deep_contenders || row->median_ms > texture_band * fastest) break;
      if (std::find(group.begin(), group.end(), row) == group.end()) group.push_back(row);
    }
  } else {
    if (first_run != FirstRun::warm || sample_runs > short_sample_runs) return;
    const auto check = interleaved_samples({leader}, 1, deep_loop, "the final round's long loop");
    if (leader->status != CandidateStatus::ok) return;
    const double long_ms = check.front().front();
    const double slowed = long_ms / fastest;
    leader->detail += detail::cat("; one loop of ", runs, " runs queued back to back read ",
                                  long_ms, " ms per run");
    if (!(slowed > slowdown_limit)) return;
    for (ProfileRow* row : contenders) {
      if (group.size() == deep_contenders || row->median_ms >= long_ms) break;
      if (row != leader) group.push_back(row);
    }
    if (group.size() < 2) return;
    why = detail::cat("the fastest ran ", std::round((slowed - 1) * 100),
                      "% slower in a long loop than in the final round");
  }
  const auto times =
      interleaved_samples(group, deep_turns, deep_loop, "the final round's deep loops");
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (group[i]->status != CandidateStatus::ok) continue;
    set_samples(*group[i], times[i]);
    group[i]->detail += detail::cat("; then ", deep_turns, " loops of ", runs,
                                    " runs queued back to back, which decide: ", why);
  }
}

void final_round(std::vector<ProfileRow>& rows, const TuneOptions& options, const RunOnce& run,
                 const RunLoop& loop, const std::string& heuristic_pick, FirstRun first_run) {
  // One loop length for every contender, from the best first-pass median (rows are sorted
  // fastest first; the best is the first row an automatic policy may pick).
  const auto first_ok = std::find_if(rows.begin(), rows.end(), [](const ProfileRow& row) {
    return row.status == CandidateStatus::ok && !unsafe(row.algo);
  });
  if (first_ok == rows.end()) return;
  const double best = first_ok->median_ms;
  const int loop_runs =
      !loop || !(best > 0) || !(options.final_loop_ms > 0)
          ? 1
          : static_cast<int>(
                std::clamp(std::ceil(options.final_loop_ms / std::max(best, min_loop_run_ms)), 1.0,
                           max_loop_runs));
  // The heuristic's pick, timed within the band but not among the fastest few, contends too; more
  // contenders when the turns are loops, or as many as the options say.
  const std::size_t most = options.final_contenders > 0
                               ? static_cast<std::size_t>(options.final_contenders)
                           : loop_runs > 1 ? loop_contenders
                                           : final_contenders;
  std::vector<ProfileRow*> contenders = final_contenders_of(rows, heuristic_pick, most);
  if (contenders.size() < 2) return;
  // Note [long runs]: one sample per turn, in half the turns.
  const bool long_runs = first_run == FirstRun::warm && best * loop_runs >= long_run_ms;
  const int turns = long_runs ? (options.timing_runs + 1) / 2 : options.timing_runs;
  const auto times = interleaved_samples(
      contenders, turns,
      [&](const AlgoInfo& algo) {
        // Untimed: the state a run of its own leaves (see the Note).
        if (!long_runs) run(algo);
        return loop_runs > 1 ? chunked_loop(loop, algo, loop_runs) : run(algo);
      },
      "the final round");
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    if (contenders[i]->status != CandidateStatus::ok) continue;
    set_samples(*contenders[i], times[i]);
    std::string& why = contenders[i]->detail;
    why = "final round: interleaved with the other contenders";
    if (loop_runs > 1) {
      why += detail::cat(", ", loop_runs, " runs back to back per sample");
      if (loop_runs > final_loop_max) why += detail::cat(" (as loops of ", final_loop_max, ")");
    } else if (long_runs) {
      why += ", one run per turn (long runs)";
    }
  }
  if (loop && options.final_loop_ms > 0) deep_round(contenders, loop, loop_runs, first_run);
  sort_fastest_first(rows);
}

// Note [energy policies]
// min_energy and energy_delay search as exhaustive does (the same first pass and final round), so
// they know which candidates are worth running at all; then the final contenders (the fastest few
// within final_band of the best, and the heuristic's pick in that band) have their energy per
// call measured (Note [energy per call] in energy.cpp: seconds each, so only they are), and
// min_energy keeps the one that adds the least joules per call, energy_delay the least joules x
// milliseconds. A slower candidate can win: one whose kernel keeps fewer units busy, or the
// clocks lower, for a little longer. The measured rows carry their energy; the choice its own
// and the counter's name. Where the backend reads no counter (no NVML, the cpu backend) the
// choice is the fastest, as exhaustive's, and Choice::energy_meter says why; the op layer says so
// once per process. A contender whose measurement fails keeps its time and says why in its
// detail; if none could be measured, the fastest is kept the same way.
// A contender displaces the fastest only when its energy (energy x time) is lower by more than
// the larger of the two measurements' spreads (the max - min of their loops; times the call's
// milliseconds for energy_delay): a difference within that is not a measured saving, and taking
// it would pay time for nothing. On an H200, with loops of 100 ms, a third to a half of the
// choices that differed from the fastest in ResNet-50's layers saved less than that spread
// (docs/benchmarks.md, *GPU energy*). With energy_repeats 1 there is no spread, and the least
// energy wins.
// The settling of a choice's late plans (Note [late plans] in src/ops/dispatch.cpp) measures only
// when a late plan is among the final contenders, and then every contender, the kept choice too,
// under the same conditions: a late plan too slow to contend costs no measurement (seconds, where
// the settling's share of the search is a fraction of one), and the kept choice keeps the energy
// its search recorded (Request::energy_kept): returns true then, having measured nothing.
bool choose_by_energy(Choice& choice, const Request& request, const TuneOptions& options,
                      const EnergySource& energy, const std::string& heuristic_pick) {
  choice.energy_meter = energy.meter;
  if (!energy.measure) return false;
  std::vector<ProfileRow*> contenders = final_contenders_of(choice.timings, heuristic_pick);
  if (const auto& kept = request.energy_kept;
      kept && std::isfinite(kept->energy_j) && !contenders.empty() &&
      std::all_of(contenders.begin(), contenders.end(),
                  [&](const ProfileRow* row) { return row->algo.id == kept->algo.id; })) {
    ProfileRow& row = *contenders.front();
    choice.energy_fastest = row.algo.id;
    row.energy_j = kept->energy_j;
    row.energy_spread_j = kept->energy_spread_j;
    row.power_w = kept->power_w;
    row.clock_mhz = kept->clock_mhz;
    choice.energy_j = row.energy_j;
    return true;
  }
  const bool delay =
      options.policy(parse_op_kind(request.op), request.direction).kind == PolicyKind::energy_delay;
  // What the policy minimizes, and the noise of a row's measurement in the same unit.
  const auto score = [delay](const ProfileRow& row) {
    return delay ? row.energy_j * row.median_ms : row.energy_j;
  };
  const auto noise = [delay](const ProfileRow& row) {
    const double spread = std::isfinite(row.energy_spread_j) ? row.energy_spread_j : 0.0;
    return delay ? spread * row.median_ms : spread;
  };
  ProfileRow* best = nullptr;
  std::vector<std::string> failures;
  for (ProfileRow* row : contenders) {
    try {
      record_energy(*row, energy.measure(row->algo, row->median_ms));
    } catch (const Error& error) {
      failures.push_back(row->algo.id + ": " + error.message());
      row->detail += (row->detail.empty() ? "" : "; ") + std::string("energy not measured: ") +
                     error.message();
      continue;
    }
    if (std::isfinite(score(*row)) && (best == nullptr || score(*row) < score(*best))) best = row;
  }
  if (best == nullptr) {
    choice.energy_meter += detail::cat(
        " (no contender's energy could be measured: ", detail::join(failures, "; "), ")");
    return false;
  }
  choice.energy_fastest = contenders.front()->algo.id;
  // A saving within the noise keeps the fastest (Note [energy policies]).
  if (ProfileRow* fastest = contenders.front();
      best != fastest && std::isfinite(score(*fastest)) &&
      score(*fastest) - score(*best) <= std::max(noise(*best), noise(*fastest)))
    best = fastest;
  std::rotate(choice.timings.begin(), choice.timings.begin() + (best - choice.timings.data()),
              choice.timings.begin() + (best - choice.timings.data()) + 1);
  choice.energy_j = choice.timings.front().energy_j;
  return false;
}

Choice select(const Request& request, const std::vector<AlgoInfo>& candidates,
              const TuneOptions& options, const RunOnce& run, const ProbeOnce& probe,
              FirstRun first_run, const RunLoop& loop, const std::function<void(Choice&)>& finish,
              const EnergySource& energy) {
  const auto start = std::chrono::steady_clock::now();
  const AlgoPolicy& policy = options.policy(parse_op_kind(request.op), request.direction);
  Choice choice;
  std::string search_cost;  // exhaustive: where the time went, for the verbose line
  choice.policy = policy;
  choice.op = request.op;
  choice.direction = request.direction;
  choice.key = request.key;

  switch (policy.kind) {
    case PolicyKind::heuristic:
      choice.algo = first_admissible(request, candidates, options, heuristic_may_pick, "heuristic");
      break;
    case PolicyKind::family: {
      const bool known = std::find(std::begin(family_names), std::end(family_names),
                                   policy.family) != std::end(family_names) ||
                         policy.family == "deterministic";
      DNNX_CHECK_ARG(known, "unknown algorithm family '", policy.family, "'");
      const bool any = std::any_of(candidates.begin(), candidates.end(),
                                   [&](const AlgoInfo& a) { return in_family(a, policy.family); });
      if (!any) {
        std::vector<std::string> available;
        for (const AlgoInfo& algo : candidates) {
          for (const std::string& family : algo.families) {
            if (std::find(available.begin(), available.end(), family) == available.end())
              available.push_back(family);
          }
        }
        detail::raise(ErrorKind::Unsupported,
                      detail::cat("algorithm family '", policy.family, "' has no candidate on ",
                                  request.backend, "; families available: ",
                                  available.empty() ? "(none)" : detail::join(available, ", ")),
                      context_of(request));
      }
      choice.algo = first_admissible(
          request, candidates, options,
          [&](const AlgoInfo& algo) { return in_family(algo, policy.family) && !unsafe(algo); },
          "'" + policy.family + "'");
      break;
    }
    case PolicyKind::fixed: {
      const auto it = std::find_if(candidates.begin(), candidates.end(),
                                   [&](const AlgoInfo& algo) { return algo.id == policy.id; });
      if (it == candidates.end()) {
        detail::raise(
            ErrorKind::InvalidArgument,
            detail::cat("algorithm id '", policy.id, "' is not a candidate for this ", request.op,
                        " on ", request.backend, "; valid ids: ", supported_ids(candidates)),
            context_of(request, policy.id));
      }
      if (auto why = exclusion(*it, options)) {
        detail::raise(ErrorKind::Unsupported,
                      detail::cat("fixed algorithm '", policy.id, "' cannot be used: ", why->detail,
                                  "; valid ids: ", supported_ids(candidates)),
                      context_of(request, policy.id));
      }
      choice.algo = *it;
      break;
    }
    case PolicyKind::exhaustive:
    case PolicyKind::min_energy:
    case PolicyKind::energy_delay: {
      // With a final round the first pass only has to find the contenders: half the timed runs
      // (rounded up) each; the final round gives them the full count (Note [final round]).
      check_run_counts(options);  // before the halving below
      TuneOptions screening = options;
      if (options.final_round) screening.timing_runs = (options.timing_runs + 1) / 2;
      // Where the search's wall time goes, for the verbose line.
      SearchCost cost;
      const RunOnce counted_run = [&](const AlgoInfo& algo) {
        const auto begin = std::chrono::steady_clock::now();
        const double ms = run(algo);
        ++cost.runs;
        const double host = elapsed_ms(begin);
        cost.run_ms += host;
        cost.add(algo.id, host);
        return ms;
      };
      ProbeOnce counted_probe;
      if (probe) {
        counted_probe = [&](const AlgoInfo& algo, int level) {
          const auto begin = std::chrono::steady_clock::now();
          const std::optional<ProbeRun> ms = probe(algo, level);
          ++cost.probes;
          const double host = elapsed_ms(begin);
          cost.probe_ms += host;
          cost.add(algo.id, host);
          return ms;
        };
      }
      choice.timings =
          time_candidates(candidates, screening, counted_run,
                          /*apply_benchmark_limit=*/true, counted_probe, first_run,
                          request.spent_ms, request.probe_at_once, request.settling_budget_ms);
      const auto final_start = std::chrono::steady_clock::now();
      // What the heuristic policy would run (Note [final round]).
      const AlgoInfo* heuristic = find_admissible(candidates, options, heuristic_may_pick);
      const std::string heuristic_id = heuristic != nullptr ? heuristic->id : std::string();
      if (options.final_round)
        final_round(choice.timings, options, run, loop, heuristic_id, first_run);
      cost.final_ms = elapsed_ms(final_start);
      choice.search.full_runs = cost.runs;
      choice.search.full_run_ms = cost.run_ms;
      choice.search.probes = cost.probes;
      choice.search.probe_ms = cost.probe_ms;
      choice.search.final_ms = cost.final_ms;
      choice.search.costliest = cost.costliest(4);
      search_cost = detail::cat(" (", cost.runs, " full runs ", cost.run_ms, " ms, ", cost.probes,
                                " probes on a slice ", cost.probe_ms, " ms, final round ",
                                cost.final_ms, " ms; costliest: ", cost.costliest(4), ")");
      for (const ProfileRow& row : choice.timings) {
        if (row.runs > 0 || row.status == CandidateStatus::failed) ++choice.candidates_timed;
      }
      // The chosen row (Note [unsafe candidates], Note [host cost ties]) goes first; the table
      // keeps every other row in its order.
      const auto pick = chosen_row(choice.timings, options);
      const auto fastest = std::find_if(choice.timings.begin(), choice.timings.end(), pickable);
      if (pick != fastest) {
        search_cost += detail::cat(" (host_tie: chosen over ", fastest->algo.id, ", ",
                                   fastest->median_ms, " ms, noted host_heavy)");
      }
      if (pick != choice.timings.end()) std::rotate(choice.timings.begin(), pick, pick + 1);
      const bool timed = !choice.timings.empty() &&
                         choice.timings.front().status == CandidateStatus::ok &&
                         !unsafe(choice.timings.front().algo);
      if (timed && policy.kind != PolicyKind::exhaustive) {
        // Note [energy policies]: the contenders follow the pick above, fastest first.
        const bool kept = choose_by_energy(choice, request, options, energy, heuristic_id);
        if (kept) {
          search_cost += detail::cat(" (no late plan contends: the kept choice's recorded ",
                                     choice.energy_j * 1e3, " mJ per call stands)");
        } else if (!std::isnan(choice.energy_j)) {
          search_cost += detail::cat(
              " (", policy.kind == PolicyKind::min_energy ? "least energy" : "least energy x time",
              ": ", choice.energy_j * 1e3, " mJ per call, ", choice.energy_meter, ")");
        } else {
          search_cost +=
              detail::cat(" (energy not measured: ", choice.energy_meter, "; the fastest kept)");
        }
      }
      if (!timed) {
        std::vector<std::string> why;
        for (const ProfileRow& row : choice.timings) {
          why.push_back(row.algo.id + ": " + std::string(to_string(row.status)) +
                        (row.detail.empty() ? "" : " (" + row.detail + ")"));
        }
        detail::raise(ErrorKind::Unsupported,
                      detail::cat("no candidate could be timed: ",
                                  why.empty() ? "(no candidates)" : detail::join(why, "; ")),
                      context_of(request));
      }
      choice.algo = choice.timings.front().algo;
      choice.time_ms = choice.timings.front().median_ms;
      const auto second = std::find_if(choice.timings.begin() + 1, choice.timings.end(), pickable);
      if (second != choice.timings.end()) {
        choice.runner_up = second->algo.id;
        choice.runner_up_ms = second->median_ms;
      }
      break;
    }
  }
  choice.tuning_ms = elapsed_ms(start);
  if (finish) finish(choice);
  if (options.verbose && timed_policy(policy.kind)) {
    const SearchTimes& s = choice.search;
    search_cost += detail::cat(
        " [list ", s.list_ms, " ms, build ", s.build_ms, " ms, time ", s.time_ms, " ms",
        s.plans_skipped > 0 ? detail::cat(", ", s.plans_skipped, " plans over the compile budget")
                            : std::string(),
        "]");
  }
  if (options.verbose)
    std::cerr << describe_decision(request, choice, false) << search_cost << '\n';
  return choice;
}

std::vector<ProfileRow>::iterator chosen_row(std::vector<ProfileRow>& rows,
                                             const TuneOptions& options) {
  const auto fastest = std::find_if(rows.begin(), rows.end(), pickable);
  if (fastest == rows.end() || !(options.host_tie > 0) || !host_heavy(fastest->algo))
    return fastest;
  const auto light = std::find_if(fastest, rows.end(), [&](const ProfileRow& row) {
    return pickable(row) && !host_heavy(row.algo);
  });
  if (light != rows.end() && light->median_ms <= fastest->median_ms * (1 + options.host_tie))
    return light;
  return fastest;
}

std::string make_key(std::string_view op, std::string_view desc_key, Direction direction,
                     const TuneOptions& options, std::string_view fingerprint) {
  std::ostringstream key;
  const auto limit = options.effective_workspace_limit();
  const AlgoPolicy& policy = options.policy(parse_op_kind(op), direction);
  key << op << ' ' << to_string(direction) << " | " << desc_key
      << " | policy=" << policy.to_string()
      << " ws_limit=" << (limit ? std::to_string(*limit) : std::string("none"))
      << " deterministic=" << options.deterministic;
  // Exhaustive answers also depend on how they were measured.
  if (timed_policy(policy.kind)) {
    key << " bench_limit=" << options.benchmark_limit << " runs=" << options.timing_runs
        << " naive=" << options.time_naive;
    if (!options.final_round) key << " final=0";
    // Note [pruning variants]; written only when not the default, so keys made before the rule
    // existed still apply under it.
    if (options.variant_factor != TuneOptions{}.variant_factor)
      key << " variant_factor=" << options.variant_factor;
    // Note [host cost ties]; the same convention.
    if (options.host_tie != TuneOptions{}.host_tie) key << " host_tie=" << options.host_tie;
    // Note [search budget]; the same convention.
    if (options.search_budget_ms > 0) key << " search_budget_ms=" << options.search_budget_ms;
    // Note [final round]; the same convention.
    if (options.final_contenders > 0) key << " final_contenders=" << options.final_contenders;
    // Note [energy policies]: how the energy was read.
    if (policy.kind != PolicyKind::exhaustive) {
      key << " energy_window_ms=" << options.energy_window_ms
          << " energy_repeats=" << options.energy_repeats;
    }
  }
  key << " | " << fingerprint;
  return key.str();
}

std::string describe_decision(const Request& request, const Choice& choice, bool from_cache) {
  std::ostringstream line;
  line << "dnnx: " << request.op << ' ' << to_string(request.direction) << " [" << request.backend
       << "] " << request.desc << " policy=" << choice.policy.to_string() << " -> "
       << choice.algo.id;
  if (from_cache) {
    line << " (cache hit)";
  } else {
    if (!std::isnan(choice.time_ms)) line << " " << choice.time_ms << " ms";
    if (timed_policy(choice.policy.kind)) {
      line << ", " << choice.candidates_timed << " of " << choice.timings.size()
           << " candidates timed";
    }
    line << ", workspace " << detail::format_bytes(static_cast<double>(choice.algo.workspace_bytes))
         << ", selection " << choice.tuning_ms << " ms";
  }
  return line.str();
}

}  // namespace dnnx::tune
