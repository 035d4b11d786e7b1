#pragma once
/// \file
/// Algorithm selection vocabulary shared by every op and backend: directions, policies,
/// candidate records, choices and profile tables.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <dnnx/op_table.hpp>

namespace dnnx {

/// Which computation of an op. Each op has its own set (OpInfo::directions): convolution fwd,
/// bwd_data and bwd_weights; ops with one backward pass fwd and bwd_data (spelled "bwd" in the CLI
/// and the environment); an op whose forward keeps state for its backward (a recurrent layer's
/// reserve space) may offer fwd_training beside fwd, the forward for inference.
enum class Direction : std::uint8_t {
  fwd,           ///< forward (for inference where the op also has fwd_training)
  bwd_data,      ///< gradient w.r.t. the input (the only backward pass of most ops)
  bwd_weights,   ///< gradient w.r.t. the weights
  fwd_training,  ///< forward that hands its backward a SavedState
};
/// Number of Direction values.
inline constexpr int direction_count = 4;

/// "fwd", "bwd_data", "bwd_weights", "fwd_training".
std::string_view to_string(Direction direction);
/// Parses "fwd"/"forward", "bwd_data"/"backward_data", "bwd_weights"/"backward_weights"/
/// "bwd_filter", "fwd_training"/"forward_training".
Direction parse_direction(std::string_view text);

/// One direction of an op and how the op spells it in the CLI (--direction) and in environment
/// variables (DNNX_ALGO_<OP>_<NAME>).
struct OpDirection {
  Direction direction;
  std::string_view name;
};

/// The direction sets of the op table (op_table.hpp's `directions` column).
namespace op_directions {
/// Forward and the gradients w.r.t. the data input and the weights (convolution).
inline constexpr OpDirection conv[] = {{Direction::fwd, "fwd"},
                                       {Direction::bwd_data, "bwd_data"},
                                       {Direction::bwd_weights, "bwd_weights"}};
/// One backward pass, the gradient w.r.t. the input (Direction::bwd_data).
inline constexpr OpDirection fwd_bwd[] = {{Direction::fwd, "fwd"}, {Direction::bwd_data, "bwd"}};
inline constexpr OpDirection fwd_only[] = {{Direction::fwd, "fwd"}};
/// An inference forward, a training forward that keeps a SavedState for the backward, and the
/// backward reading it (Direction::bwd_data, spelled "bwd"): dropout.
inline constexpr OpDirection training[] = {{Direction::fwd, "fwd"},
                                           {Direction::fwd_training, "fwd_training"},
                                           {Direction::bwd_data, "bwd"}};
/// Forward for inference, a training forward that keeps a SavedState for the backward, and the
/// gradients w.r.t. the data input and the weights (a matmul with an activation epilogue, a
/// recurrent layer).
inline constexpr OpDirection training_weights[] = {{Direction::fwd, "fwd"},
                                                   {Direction::fwd_training, "fwd_training"},
                                                   {Direction::bwd_data, "bwd_data"},
                                                   {Direction::bwd_weights, "bwd_weights"}};
}  // namespace op_directions

/// Every op, from the op table (op_table.hpp).
enum class OpKind : std::uint8_t {
#define DNNX_OP_KIND(kind, ...) kind,
  DNNX_OP_TABLE(DNNX_OP_KIND)
#undef DNNX_OP_KIND
};
/// Number of OpKind values.
inline constexpr int op_kind_count = 0
#define DNNX_OP_COUNT(...) +1
    DNNX_OP_TABLE(DNNX_OP_COUNT)
#undef DNNX_OP_COUNT
    ;

enum class BackendKind : std::uint8_t;

/// One line of the op table.
struct OpInfo {
  OpKind kind;
  std::string_view name;     ///< "conv", "pool", "act", ... (CLI, cache keys, messages)
  std::string_view aliases;  ///< other spellings parse_op_kind accepts, comma-separated
  std::span<const OpDirection> directions;  ///< in the order the CLI lists them
  std::uint8_t backends;  ///< bit (1 << BackendKind) set for each backend implementing the op
  OpKind policies;        ///< the op whose TuneOptions policies select this op's candidates

  /// Whether the op has `direction`.
  bool has(Direction direction) const;
  /// How the op spells `direction` ("bwd" for bwd_data of single-backward ops); to_string()
  /// of a direction the op does not have.
  std::string_view direction_name(Direction direction) const;
  /// Parses one of the op's direction names or a canonical direction name (parse_direction);
  /// throws InvalidArgument when the op does not have it, listing the op's directions.
  Direction parse_direction(std::string_view text) const;
  /// Throws InvalidArgument unless the op has `direction`: "<op> has no direction <d>; accepted:
  /// ..." (or "<op> has only the forward direction (fwd); got <d>").
  void check(Direction direction) const;
  /// Whether `backend` (a concrete backend) implements the op.
  bool implemented_on(BackendKind backend) const;
  /// The environment variables holding the policy of `direction`: "DNNX_ALGO_<NAME>_<DIRECTION>"
  /// (e.g. DNNX_ALGO_POOL_BWD) and the older spelling "DNNX_<NAME>_<DIRECTION>_ALGO" (e.g.
  /// DNNX_CONV_FWD_ALGO), in that order.
  std::array<std::string, 2> policy_env_names(Direction direction) const;
};

/// The op table, in OpKind order.
std::span<const OpInfo> op_table();
/// The table's line of `op`.
const OpInfo& op_info(OpKind op);

/// The op's name (the op table's `name` column, e.g. "conv", "act", "xent").
std::string_view to_string(OpKind op);
/// Parses an op name or alias; throws InvalidArgument listing the names.
OpKind parse_op_kind(std::string_view text);

/// How a candidate is picked.
enum class PolicyKind : std::uint8_t {
  heuristic,   ///< the backend's own first choice that meets the constraints (no timing)
  exhaustive,  ///< time the candidates, keep the fastest
  fixed,       ///< exactly the candidate named by AlgoPolicy::id
  family,      ///< the first candidate (backend priority order) of AlgoPolicy::family
  /// time the candidates as exhaustive does, then measure the energy per call of the final
  /// contenders and keep the one that uses the least (src/tune/energy.cpp, Note [energy per
  /// call]); the fastest where the backend reads no energy counter
  min_energy,
  /// as min_energy, keeping the lowest energy x time (the energy-delay product)
  energy_delay,
};

/// Whether a policy of `kind` times the candidates (exhaustive and the energy policies): its
/// choices depend on how they were measured, and it accepts the timing options.
constexpr bool timed_policy(PolicyKind kind) {
  return kind == PolicyKind::exhaustive || kind == PolicyKind::min_energy ||
         kind == PolicyKind::energy_delay;
}

/// When a layer-held choice is made again (free op calls always look up the choice cache).
enum class Reuse : std::uint8_t {
  on_shape_change,  ///< select again whenever the desc changes (through the choice cache)
  once,             ///< keep the first choice; re-validate it, and re-select only if it cannot run
};

/// One direction's selection policy. Theano's flag values parse onto this:
///   guess_once / guess_on_shape_change -> heuristic + once / on_shape_change
///   time_once / time_on_shape_change   -> exhaustive + once / on_shape_change
///   small, none, large, fft, fft_tiling, winograd, deterministic -> family (see docs/algorithms.md)
struct AlgoPolicy {
  PolicyKind kind = PolicyKind::heuristic;  ///< how to pick
  Reuse reuse = Reuse::on_shape_change;     ///< layer semantics
  std::string id;                           ///< candidate id, for PolicyKind::fixed
  std::string family;                       ///< family name, for PolicyKind::family

  static AlgoPolicy heuristic(Reuse reuse = Reuse::on_shape_change);
  static AlgoPolicy exhaustive(Reuse reuse = Reuse::on_shape_change);
  static AlgoPolicy min_energy(Reuse reuse = Reuse::on_shape_change);
  static AlgoPolicy energy_delay(Reuse reuse = Reuse::on_shape_change);
  static AlgoPolicy fixed(std::string id);
  static AlgoPolicy of_family(std::string family);

  /// Parses "heuristic", "exhaustive", "min_energy", "energy_delay", "fixed:<id>", a Theano name,
  /// or a family name; throws InvalidArgument listing the accepted spellings.
  static AlgoPolicy parse(std::string_view text);
  /// The canonical spelling ("exhaustive", "fixed:onednn:...", "family:winograd", ...; ":once" is
  /// appended when reuse is once).
  std::string to_string() const;
  bool operator==(const AlgoPolicy&) const = default;
};

/// Family names a backend may tag its candidates with (Theano's vocabulary).
inline constexpr std::string_view family_names[] = {"none", "small",      "large",
                                                    "fft",  "fft_tiling", "winograd"};

/// One candidate implementation for a (desc, direction), known before anything runs.
struct AlgoInfo {
  std::string id;    ///< stable id, e.g. "onednn:jit:avx512_core" or "reference:direct"
  std::string name;  ///< short human name
  bool supported = false;  ///< false: `reason` says why
  std::string reason;      ///< why unsupported (empty when supported)
  std::size_t workspace_bytes = 0;  ///< scratch memory the candidate needs, bytes
  bool deterministic = true;        ///< bitwise identical results run to run
  std::vector<std::string> notes;     ///< "direct", "gemm", "winograd", "fft", "tensor_cores", ...
  std::vector<std::string> families;  ///< Theano families this candidate belongs to
  int priority = 0;  ///< backend preference, 0 = the backend's first choice
  /// A plain reference loop (note "reference"): listed and run by id, but timed only with
  /// TuneOptions::time_naive and never ahead of another candidate that runs.
  bool naive = false;
  /// Correct only for inputs of a limited range (note "overflow_risk", e.g. an unshifted
  /// exp): runs when named by id, never picked by an automatic policy.
  bool overflow_risk = false;
  /// Forward candidates: bytes of SavedState the candidate fills for the backward (0: none).
  std::size_t saved_state_bytes = 0;
  /// The layout of the SavedState the candidate writes (a forward) or reads (a backward); empty
  /// when it uses none. A backward runs only on a state of its own format.
  std::string saved_state_format;
  /// The id of the candidate this one is a variant of (the same kernel with other knobs, e.g. a
  /// cuDNN engine's tile or split-k setting: its seed), listed before it; empty when it is no
  /// variant. An exhaustive search does not run a variant whose seed ran far slower than the best
  /// (TuneOptions::variant_factor).
  std::string variant_of;

  /// Whether `notes` holds `note`.
  bool has_note(std::string_view note) const {
    for (const std::string& held : notes) {
      if (held == note) return true;
    }
    return false;
  }
};

/// Constraints and knobs of selection; part of every choice-cache key.
struct TuneOptions {
  AlgoPolicy fwd;          ///< convolution's policy for Direction::fwd
  AlgoPolicy bwd_data;     ///< convolution's policy for Direction::bwd_data
  AlgoPolicy bwd_weights;  ///< convolution's policy for Direction::bwd_weights
  /// The other ops' policies, [OpKind][Direction]; heuristic unless set. Reach them through
  /// policy(op, direction), which checks that the op has the direction (convolution's row is
  /// unused: its policies are the three fields above).
  std::array<std::array<AlgoPolicy, direction_count>, op_kind_count> op_policies{};
  /// Largest workspace a candidate may use, bytes; nullopt = no limit.
  std::optional<std::size_t> workspace_limit;
  bool deterministic = false;  ///< only candidates that are bitwise reproducible
  bool fastest = false;        ///< ignore workspace_limit (cudnn.torch's `fastest`)
  bool verbose = false;        ///< one line per decision on stderr
  int benchmark_limit = 0;     ///< exhaustive: time at most this many candidates that ran; 0 = all
  int warmup_runs = 1;         ///< exhaustive: untimed runs per candidate before timing
  int timing_runs = 5;         ///< exhaustive: timed runs per candidate (median and min kept)
  /// exhaustive: a candidate whose first (cold) run exceeds `abandon_factor` x the best median so
  /// far is not timed further (keeps naive fallbacks from taking minutes); nor is one whose next,
  /// warm run exceeds max(1, abandon_factor / 2) x that median.
  double abandon_factor = 4.0;
  /// exhaustive and profiles: a candidate declaring a seed (AlgoInfo::variant_of) is not run when
  /// that seed was timed and its median exceeds `variant_factor` x the best median so far, or when
  /// the seed was abandoned or failed; its row is abandoned (src/tune/select.cpp, Note [pruning
  /// variants]). 0 turns the rule off (every variant runs); otherwise at least 1; infinity prunes
  /// only the variants of abandoned or failed seeds.
  double variant_factor = 2.0;
  /// exhaustive and profiles: also time naive reference implementations (notes "reference")
  /// after faster candidates ran. Off by default: they take minutes on real layers.
  bool time_naive = false;
  /// exhaustive: time the fastest few candidates (within 2x of the best) again, interleaved
  /// round by round, and let those runs decide, so a machine whose speed changed during the
  /// search does not pick a slower candidate (src/tune/select.cpp, Note [final round]).
  bool final_round = true;
  /// exhaustive: where the backend times loops (the cudnn backend), each final-round sample of a
  /// contender is a loop of back-to-back runs lasting about this long, in milliseconds (a run
  /// under 1/64 ms counted as 1/64 ms, so 32 runs at most by default; a loop of more runs timed as
  /// consecutive loops of at most 32; a contender slower than this runs once per sample); 0 =
  /// single runs. Longer loops rank candidates as a layer called in a loop runs them (clocks
  /// under a power limit, caches), at the cost of search time (Note [final round]). With 0 there
  /// are no deep loops either: those of texture-reading leaders and the long-loop check of a
  /// leader whose samples were a few runs (Note [leaders that slow down in long loops]).
  double final_loop_ms = 0.5;
  /// The largest final_loop_ms the environment, the CLI and Python accept.
  static constexpr double max_final_loop_ms = 1000.0;
  /// exhaustive: the most candidates the final round times again, the fastest within 2x of the
  /// best (the heuristic policy's pick joins them when within that band); 0 = 4, or 10 where its
  /// samples are loops (src/tune/select.cpp, Note [final round]). The energy policies' final
  /// contenders are four whatever this says.
  int final_contenders = 0;
  /// The largest final_contenders the environment, the CLI and Python accept.
  static constexpr int max_final_contenders = 1000;
  /// exhaustive and profiles: a candidate noted "host_heavy" (its backend says a call costs
  /// several times the host time of the others': cuDNN's legacy calls) is chosen only when it is
  /// more than this fraction faster than the fastest candidate without that note; 0 turns the
  /// rule off (src/tune/select.cpp, Note [host cost ties]).
  double host_tie = 0.02;
  /// The largest host_tie the environment, the CLI and Python accept.
  static constexpr double max_host_tie = 1.0;
  /// exhaustive: once a search has taken this many milliseconds of host time (listing and plan
  /// builds included), it starts no new candidate except those the backend's own heuristics rank
  /// first (notes "heuristics_top"); the others are rows not_timed that say so, and the final
  /// round runs as usual. The candidates' list order decides which are timed within the budget
  /// (src/tune/select.cpp, Note [search budget]). 0 = no budget (the default).
  double search_budget_ms = 0;
  /// The largest search_budget_ms the environment, the CLI and Python accept (an hour).
  static constexpr double max_search_budget_ms = 3'600'000.0;
  /// exhaustive: a process that reads choices listing late plans from the cache file (candidates
  /// their searches skipped while they compiled) times them against those choices within this
  /// share of the searches that the choices it read record (Choice::tuning_ms), pooled over them
  /// per cache object: a settling starts only while that credit lasts and is debited with what it
  /// took; late plans left stay listed for the next process (src/ops/dispatch.cpp, Note [late
  /// plans], Note [settling credit]). 0 = every late plan at once.
  double late_plan_share = 0.04;
  /// The largest late_plan_share the environment, the CLI and Python accept.
  static constexpr double max_late_plan_share = 1.0;
  /// min_energy, energy_delay and profiles measuring energy: each loop of a candidate's runs whose
  /// energy is read lasts at least this long, in milliseconds (the counter updates every 20-100
  /// ms; src/tune/energy.cpp, Note [energy per call]).
  double energy_window_ms = 1000.0;
  static constexpr double min_energy_window_ms = 50.0;
  static constexpr double max_energy_window_ms = 60'000.0;
  /// Loops per candidate whose energy is read (their median is kept, with their spread).
  int energy_repeats = 3;
  static constexpr int max_energy_repeats = 100;
  /// Profiles: measure the energy per call of every timed candidate too (`dnnx profile
  /// --energy`). Selection does not read it (the energy policies measure their contenders).
  bool profile_energy = false;

  /// Convolution's policy for `direction`.
  const AlgoPolicy& policy(Direction direction) const;
  AlgoPolicy& policy(Direction direction);
  /// `op`'s policy for `direction` (OpInfo::policies': the fused convolution's are
  /// convolution's); throws InvalidArgument when the op has no such direction.
  const AlgoPolicy& policy(OpKind op, Direction direction) const;
  AlgoPolicy& policy(OpKind op, Direction direction);
  /// The limit in force: nullopt when fastest is set.
  std::optional<std::size_t> effective_workspace_limit() const {
    return fastest ? std::nullopt : workspace_limit;
  }
  bool operator==(const TuneOptions&) const = default;
};

/// Outcome of one candidate in a profile or exhaustive search. `abandoned` is every candidate
/// judged unable to win: a first run far slower than the best so far, or one not run at all (a
/// naive fallback once another candidate was timed, a run on a slice already too slow, a variant
/// whose seed was far slower than the best: TuneOptions::variant_factor).
enum class CandidateStatus : std::uint8_t {
  ok,                    ///< ran and was timed
  unsupported,           ///< the backend cannot run it for this desc
  over_workspace_limit,  ///< needs more workspace than allowed
  not_deterministic,     ///< excluded by the deterministic constraint
  failed,                ///< threw while building or running
  abandoned,             ///< too slow to win (see above); not timed further
  not_timed,  ///< not run: benchmark_limit or search_budget_ms reached, or its plan not ready
};
/// "ok", "unsupported", "over_workspace_limit", ...
std::string_view to_string(CandidateStatus status);

/// One line of a profile table.
struct ProfileRow {
  AlgoInfo algo;                  ///< the candidate
  CandidateStatus status = CandidateStatus::not_timed;
  std::string detail;             ///< reason / error text for non-ok rows
  double median_ms = std::numeric_limits<double>::quiet_NaN();  ///< median of timed runs, ms
  double min_ms = std::numeric_limits<double>::quiet_NaN();     ///< fastest timed run, ms
  int runs = 0;                   ///< timed runs
  /// Energy per call when measured (NaN otherwise), joules: the energy the calls add over the
  /// idle board, the median of TuneOptions::energy_repeats loops (Note [energy per call]).
  double energy_j = std::numeric_limits<double>::quiet_NaN();
  double energy_spread_j = std::numeric_limits<double>::quiet_NaN();  ///< max - min of the loops
  double power_w = std::numeric_limits<double>::quiet_NaN();  ///< mean board power in the loops
  double clock_mhz = std::numeric_limits<double>::quiet_NaN();  ///< compute clock after them
};

/// Where the host wall time of one search went (an exhaustive selection or a profile), ms. The
/// parts add up to about the whole: list_ms + build_ms + time_ms.
struct SearchTimes {
  double list_ms = 0;   ///< listing the candidates (free when this process listed the key before)
  double build_ms = 0;  ///< building plans ahead and waiting for the ones still compiling
  double time_ms = 0;   ///< running the candidates: full runs, probes on a slice, final round
  /// Plans that were not ready within the backend's compile budget (their rows say so).
  int plans_skipped = 0;
  /// Exhaustive selection: how time_ms divides. Full runs of the candidates before the final
  /// round (count, host ms), runs on a slice (probes: count, ms), the final round (ms), and the
  /// four candidates whose full runs and probes took the most ("id ms", comma-separated).
  int full_runs = 0;
  double full_run_ms = 0;
  int probes = 0;
  double probe_ms = 0;
  double final_ms = 0;
  std::string costliest;
};

/// The selected candidate for one (desc, direction) under one TuneOptions.
struct Choice {
  AlgoInfo algo;                 ///< what runs
  AlgoPolicy policy;             ///< the policy that chose it
  std::string op;                ///< "conv"
  Direction direction = Direction::fwd;
  std::string key;               ///< the choice-cache key (human readable)
  double time_ms = std::numeric_limits<double>::quiet_NaN();  ///< median time when timed, ms
  std::vector<ProfileRow> timings;  ///< exhaustive: every candidate's row, fastest first
  double tuning_ms = 0;          ///< wall time spent selecting, ms
  int candidates_timed = 0;      ///< candidates that actually ran
  std::string runner_up;         ///< exhaustive: the second fastest id (empty if none)
  double runner_up_ms = std::numeric_limits<double>::quiet_NaN();  ///< its median time, ms
  /// The energy policies: the chosen candidate's energy per call, joules (NaN when not measured;
  /// the rows of `timings` hold every contender's).
  double energy_j = std::numeric_limits<double>::quiet_NaN();
  /// The energy policies: the counter read ("nvml: ..."), or why none was (the choice is then the
  /// fastest).
  std::string energy_meter;
  /// The energy policies: the contender that time alone keeps (what `exhaustive` would choose,
  /// host_tie applied), against which the choice was weighed; empty when nothing was measured.
  std::string energy_fastest;
  std::string backend;           ///< backend name it was made on ("cpu", ...)
  std::string fingerprint;       ///< that backend's library versions / machine facts
  std::string environment;       ///< JSON object: device, libraries, dnnx version
  std::int64_t measured_at = 0;  ///< when it was made, seconds since the Unix epoch
  SearchTimes search;            ///< exhaustive: where the selection's wall time went
  /// Exhaustive: candidates the search skipped because their plans were still compiling when the
  /// compile budget ran out, whose plans the backend saves once built; a later process that reads
  /// this choice from the cache file times them against it (Note [late plans] in
  /// src/ops/dispatch.cpp).
  std::vector<std::string> late_plans;
  /// Read from the cache file and not yet re-validated in this process (the op layer checks the
  /// id is still supported and admissible before using it).
  bool from_file = false;
};

/// A profile of every candidate of one (desc, direction).
struct ProfileResult {
  std::string op;                ///< "conv"
  Direction direction = Direction::fwd;
  std::string desc;              ///< the desc, printed
  std::string repro;             ///< CLI line reproducing it
  std::string backend;           ///< backend name
  std::vector<ProfileRow> rows;  ///< timed rows by median time, then the rest
  std::string chosen;            ///< the id exhaustive selection would pick (empty if none ran)
  double wall_ms = 0;            ///< wall time of the whole profile, ms
  SearchTimes search;            ///< where that wall time went
  /// With TuneOptions::profile_energy: the counter read ("nvml: ..."), or why energy could not
  /// be measured; empty when it was not asked for.
  std::string energy_meter;

  /// Fixed-width text table like the seed's "FwdAlgorithms profile results".
  std::string table() const;
  /// The same as a JSON document.
  std::string json() const;
};

/// A table of candidates as `dnnx algos` prints it.
std::string format_algo_table(const std::vector<AlgoInfo>& algos);

/// Whether a choice cache uses its file (DNNX_CACHE).
enum class CacheMode : std::uint8_t {
  off,        ///< memory only
  read,       ///< load the file, never write it
  readwrite,  ///< load the file and merge every new choice into it
};
/// "off", "read", "readwrite".
std::string_view to_string(CacheMode mode);
/// Parses the names above; throws InvalidArgument listing them.
CacheMode parse_cache_mode(std::string_view text);

/// What a choice cache does when its file cannot be used (not a regular file, not a dnnx cache,
/// no access, a folder that cannot be created; docs/tuning-cache.md).
enum class FileProblem : std::uint8_t {
  warn,   ///< say so once on stderr and go on: in memory only, or reading without writing
  raise,  ///< throw Error naming the path (the `dnnx cache` command)
};

/// The file behind a choice cache.
struct CacheFileOptions {
  /// Version of the file schema; part of the default file name (tune-v<N>.json).
  static constexpr int schema_version = 1;

  CacheMode mode = CacheMode::readwrite;  ///< off / read / readwrite
  std::string path;                       ///< the JSON file
  std::size_t max_entries = 4096;         ///< LRU bound on the file's entries
  /// On loading and on writing new choices; explicit requests (import, export, prune, clear,
  /// reload) always throw.
  FileProblem on_problem = FileProblem::warn;

  /// From DNNX_CACHE (off|read|readwrite, default readwrite), DNNX_CACHE_FILE (default
  /// $XDG_CACHE_HOME/dnnx/tune-v<N>.json, else ~/.cache/dnnx/tune-v<N>.json) and
  /// DNNX_CACHE_MAX_ENTRIES. Malformed values throw InvalidArgument naming the variable.
  static CacheFileOptions from_env();
  /// The default path described above.
  static std::string default_path();
};

/// What the persistent side of a cache has done in this process.
struct CacheFileStats {
  std::string path;               ///< the file ("" when the cache has none)
  CacheMode mode = CacheMode::off;
  std::size_t file_entries = 0;   ///< entries known from the file (after the last load/write)
  std::size_t applied = 0;        ///< file entries that answered a lookup (and stayed valid)
  std::size_t invalidated = 0;    ///< file entries that failed re-validation and were re-selected
  std::size_t writes = 0;         ///< successful writes (appends to the journal or rewrites)
  std::size_t set_aside = 0;      ///< unreadable files renamed aside
  std::size_t dropped = 0;        ///< malformed or out-of-range entries skipped when reading
  /// The mode in force: `mode`, or lower when the file cannot be read (off) or written (read).
  CacheMode in_force = CacheMode::off;
  std::string problem;  ///< why `in_force` is lower than `mode`, naming the path; else empty
};

/// A thread-safe store of choices keyed by everything that changes the answer. Contexts share
/// the process-wide one (backed by the file CacheFileOptions::from_env() names) unless given
/// their own.
class ChoiceCache {
 public:
  /// A memory-only cache.
  ChoiceCache();
  /// A cache backed by a file: loaded now, and in readwrite mode every new choice is merged into
  /// the file under an advisory lock, so concurrent processes lose nothing (docs/tuning-cache.md).
  /// A corrupt file of dnnx's is set aside (readwrite) or ignored (read), never applied. A file
  /// that cannot be used is left untouched, and with FileProblem::warn (the default) the cache
  /// says so once on stderr and keeps its choices in memory: it throws only for bad options, or
  /// with FileProblem::raise.
  explicit ChoiceCache(CacheFileOptions file);
  ~ChoiceCache();
  ChoiceCache(const ChoiceCache&) = delete;
  ChoiceCache& operator=(const ChoiceCache&) = delete;

  /// The process-wide cache.
  static std::shared_ptr<ChoiceCache> global();

  /// The cached choice for `key`, or null.
  std::shared_ptr<const Choice> find(const std::string& key) const;
  /// Stores (or replaces) the choice for `key`.
  void insert(const std::string& key, std::shared_ptr<const Choice> choice);
  /// Drops every entry and resets the counters.
  void clear();
  std::size_t size() const;
  /// find() calls that returned a choice, less those whose file entry then failed re-validation
  /// and was replaced by a new selection.
  std::uint64_t hits() const;
  /// find() calls that returned null, plus those file entries that failed re-validation.
  std::uint64_t misses() const;
  /// Changes whenever an entry is inserted, replaced or cleared (lets callers keep a fast path
  /// in front of the cache and notice when it changed).
  std::uint64_t generation() const;
  /// Every entry in memory and in the file (a snapshot), for display.
  std::vector<std::pair<std::string, std::shared_ptr<const Choice>>> entries() const;

  /// The file options (mode off and an empty path for a memory-only cache).
  const CacheFileOptions& file_options() const;
  CacheFileStats file_stats() const;
  /// File entries recorded for `backend` under a fingerprint other than `fingerprint`: choices
  /// measured on another device kind or library version, which are never applied.
  std::size_t foreign_entries(std::string_view backend, std::string_view fingerprint) const;
  /// Re-reads the file, merging what other processes wrote meanwhile; a file that could not be
  /// used before is tried again (file_stats().in_force goes back to the mode). Throws Error naming
  /// the path when the file cannot be used.
  void reload();
  /// Writes every entry (memory and file) to `path` as a cache file; returns the entry count.
  /// Replaces only a missing or empty file or a dnnx cache file (symbolic links followed, mode
  /// kept); throws Error naming `path` otherwise.
  std::size_t export_file(const std::string& path) const;
  /// Merges the entries of the cache file at `path` (newer measurement wins) into this cache and,
  /// in readwrite mode, into its file; returns the number of entries read (malformed ones are
  /// skipped with a warning). Throws InvalidArgument if `path` is not a regular file holding a
  /// cache document, and Error naming the cache file when it cannot be written.
  std::size_t import_file(const std::string& path);
  /// Keeps the `max_entries` most recently used file entries; returns how many were dropped.
  /// Throws Error naming the path when the file cannot be written.
  std::size_t prune(std::size_t max_entries);
  /// Empties the cache and its file (readwrite mode). Throws Error naming the path when the file
  /// cannot be written.
  void clear_file();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dnnx
