// `dnnx tune --model resnet50 --batch N`: selects an algorithm for every distinct conv layer of a
// network and every direction, and reports how much the choice gains over the heuristic pick.

#include "commands.hpp"
#include "models.hpp"
#include "output.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace dnnx::cli {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct TuneArgs {
  std::string model = "resnet50";
  std::string batch = "8";
  std::string dtype = "f32";
  std::string layout = "nchw";
  BackendArgs backend;
  SelectionArgs selection;
  std::string policy;
  std::string benchmark_limit;
  std::string json_file;
  std::string report_file;
  std::string layers;
  std::string direction = "all";
};

// Everything the command line says, parsed and checked before any backend is touched.
struct TunePlan {
  Model model;
  std::vector<const ModelLayer*> layers;
  std::vector<Direction> directions;
  std::int64_t batch = 1;
  DType dtype = DType::f32;
  Layout layout = Layout::channels_first;
  BackendChoice backend;
  Selection selection;
  std::optional<AlgoPolicy> policy;
  std::optional<int> benchmark_limit;
  std::string json_file;
  std::string report_file;
};

struct Timed {
  double ms = nan;
  std::string source;  // "selection": from the library's timing; "measured": run here
};

struct StepResult {
  const ModelLayer* layer = nullptr;
  Direction direction = Direction::fwd;
  std::string desc;
  std::string repro;
  std::string error;  // non-empty: the step failed and nothing else is meaningful
  AlgoInfo chosen;
  Timed chosen_time;
  std::string heuristic_id;
  std::string heuristic_error;
  Timed heuristic_time;
  int candidates_timed = 0;
  std::vector<std::string> late_plans;  // Note [late plans] in src/ops/dispatch.cpp
  std::string environment;   // Choice::environment: the machine and libraries it was measured on
  double energy_j = nan;     // the energy policies: the chosen candidate's joules per call
  std::string energy_meter;  // the energy policies: the counter read, or why none was
  std::string energy_fastest;           // the energy policies: the contender exhaustive would keep
  std::vector<ProfileRow> energy_rows;  // the energy policies: the contenders measured
  double tuning_ms = 0;    // the selection's own cost when it was made (maybe in another process)
  double step_ms = 0;      // what this step cost in this process
  bool cache_hit = false;  // the choice came from the choice cache (memory or file)
  // Note [the tune's next step]: its wall time (NaN: the step listed no late plans), and the
  // search's own pick where the next step settled on another.
  double next_step_ms = nan;
  std::string settled_from;
  std::string next_step_error;  // the next step failed: the search's choice stands

  bool ok() const { return error.empty(); }
  double speedup() const { return heuristic_time.ms / chosen_time.ms; }
};

// The variable of the environment that sets convolution's policy for `direction` (either
// spelling), or empty.
std::string policy_env_variable(Direction direction) {
  for (const std::string& name : op_info(OpKind::conv).policy_env_names(direction)) {
    const char* value = std::getenv(name.c_str());
    if (value != nullptr && *value != '\0') return name;
  }
  return {};
}

TunePlan parse_plan(const TuneArgs& args) {
  TunePlan plan;
  plan.model = load_model(args.model);
  plan.batch = parse_int("--batch", args.batch, 1, max_batch);
  plan.dtype = parse_dtype_arg("--dtype", args.dtype);
  plan.layout = parse_layout_arg("--layout", args.layout);
  plan.directions = parse_directions(OpKind::conv, "--direction", args.direction);
  plan.backend = parse_backend_args(args.backend);
  plan.selection = parse_selection(args.selection);
  if (!args.policy.empty()) plan.policy = parse_policy_arg("--policy", args.policy);
  if (!args.benchmark_limit.empty()) {
    plan.benchmark_limit = static_cast<int>(
        parse_int("--benchmark-limit", args.benchmark_limit, 0, max_benchmark_limit));
  }
  plan.json_file = args.json_file;
  plan.report_file = args.report_file;

  if (args.layers.empty()) {
    for (const ModelLayer& layer : plan.model.layers) plan.layers.push_back(&layer);
  } else {
    std::stringstream names(args.layers);
    for (std::string name; std::getline(names, name, ',');) {
      const auto found = std::find_if(plan.model.layers.begin(), plan.model.layers.end(),
                                      [&](const ModelLayer& layer) { return layer.name == name; });
      if (found == plan.model.layers.end()) {
        std::vector<std::string> valid;
        valid.reserve(plan.model.layers.size());
        for (const ModelLayer& layer : plan.model.layers) valid.push_back(layer.name);
        throw UsageError("--layers '" + args.layers + "': no layer '" + name + "' in " +
                         plan.model.name + " (layers: " + join(valid, ", ") + ")");
      }
      if (std::find(plan.layers.begin(), plan.layers.end(), &*found) == plan.layers.end())
        plan.layers.push_back(&*found);
    }
  }
  // Shapes a built-in or user model gets wrong surface here as usage errors, before tuning starts.
  for (const ModelLayer* layer : plan.layers) {
    try {
      layer->desc(plan.batch, plan.dtype, plan.layout).validate();
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::InvalidArgument) throw;
      throw UsageError("--model '" + args.model + "' layer " + layer->name + ": " +
                       error.message());
    }
  }
  return plan;
}

// The exhaustive default applies to a direction unless --policy or its DNNX_ALGO_CONV_<DIR> /
// DNNX_CONV_<DIR>_ALGO says otherwise (flags beat the environment, the environment beats the
// default).
void apply_policies(const TunePlan& plan, TuneOptions& options) {
  for (const OpDirection& direction : op_info(OpKind::conv).directions) {
    if (plan.policy)
      options.policy(direction.direction) = *plan.policy;
    else if (policy_env_variable(direction.direction).empty())
      options.policy(direction.direction) = AlgoPolicy::exhaustive();
  }
  if (plan.benchmark_limit) options.benchmark_limit = *plan.benchmark_limit;
  plan.selection.apply(options);
}

// A fixed:<id> policy must name a candidate the backend lists for the direction it applies to
// (for some planned layer: the lists hold unsupported candidates too, so they do not depend on the
// shape). An unknown id is a bad command line, reported before any tuning; a known one that a
// layer cannot run fails that layer-direction's step like any other failure.
void check_fixed_ids(const TunePlan& plan, Context& context, const std::string& policy_flag) {
  for (const Direction direction : plan.directions) {
    const AlgoPolicy& policy = context.tune().policy(direction);
    if (policy.kind != PolicyKind::fixed) continue;
    std::vector<std::string> ids;
    for (const ModelLayer* layer : plan.layers) {
      const ConvDesc desc = layer->desc(plan.batch, plan.dtype, plan.layout);
      for (const AlgoInfo& algo : conv_list(context, desc, direction)) {
        if (std::find(ids.begin(), ids.end(), algo.id) == ids.end()) ids.push_back(algo.id);
      }
      if (std::find(ids.begin(), ids.end(), policy.id) != ids.end()) break;
    }
    if (std::find(ids.begin(), ids.end(), policy.id) != ids.end()) continue;
    const std::string source =
        plan.policy ? policy_flag : policy_env_variable(direction);
    throw UsageError(source + " '" + policy.to_string() + "': no " +
                     std::string(to_string(direction)) + " candidate of backend " +
                     std::string(to_string(context.backend())) + " has the id '" + policy.id +
                     "'; valid ids: " + (ids.empty() ? std::string("(none)") : join(ids, ", ")));
  }
}

// Runs the op with candidate `id` forced and returns the median wall time of the timing runs.
// Used only when the library's selection did not time that candidate (non-exhaustive policies,
// benchmark_limit, abandoned candidates).
double measure_ms(const Context& context, const ConvDesc& desc, Direction direction,
                  const std::string& id) {
  Context fixed = context;
  fixed.tune().policy(direction) = AlgoPolicy::fixed(id);
  Allocator& allocator = fixed.allocator();
  const bool host = fixed.device().kind == Device::Kind::cpu;
  const auto make = [&](const Dims& dims) {
    Tensor tensor = Tensor::empty(dims, desc.dtype, desc.layout, allocator);
    Tensor values = host ? tensor : Tensor::empty(dims, desc.dtype, desc.layout);
    values.fill(0.5f);
    if (!host) copy(values, tensor);
    return tensor;
  };
  Tensor src = make(desc.src_dims());
  Tensor weights = make(desc.weights_dims());
  Tensor dst = make(desc.dst_dims());
  // Device ops may return before they finish. dnnx::copy returns only after every op queued before
  // it, so copying one element to the host ends each timed run.
  Tensor probe =
      host ? Tensor() : Tensor::empty(Dims{1}, DType::f32, Layout::channels_first, allocator);
  Tensor probe_host = host ? Tensor() : Tensor::empty(Dims{1}, DType::f32);
  const auto run = [&] {
    switch (direction) {
      case Direction::fwd: conv_fwd(fixed, desc, src, weights, dst); break;
      case Direction::bwd_data: conv_bwd_data(fixed, desc, dst, weights, src); break;
      case Direction::bwd_weights: conv_bwd_weights(fixed, desc, src, dst, weights); break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
    if (!host) copy(probe, probe_host);
  };
  // At least one warm-up: the first call builds (and caches) the implementation.
  for (int i = 0; i < std::max(1, fixed.tune().warmup_runs); ++i) run();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, fixed.tune().timing_runs); ++i) {
    const auto start = Clock::now();
    run();
    times.push_back(seconds_since(start) * 1e3);
  }
  std::sort(times.begin(), times.end());
  const std::size_t middle = times.size() / 2;
  return times.size() % 2 == 1 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
}

// The candidate's time from the selection's own table. An abandoned candidate was timed once and
// found far slower than the best; that one run stands rather than running it again here.
std::optional<Timed> timed_in(const Choice& choice, const std::string& id) {
  for (const ProfileRow& row : choice.timings) {
    if (row.algo.id != id || row.runs < 1 || std::isnan(row.median_ms)) continue;
    if (row.status == CandidateStatus::ok) return Timed{row.median_ms, "selection"};
    if (row.status == CandidateStatus::abandoned)
      return Timed{row.median_ms, "selection (abandoned after 1 run)"};
  }
  return std::nullopt;
}

// The chosen candidate's time: the selection's own, else its row of the table, else run here.
Timed chosen_time(Context& context, const ConvDesc& desc, Direction direction,
                  const Choice& choice) {
  if (!std::isnan(choice.time_ms)) return {choice.time_ms, "selection"};
  if (const auto timed = timed_in(choice, choice.algo.id)) return *timed;
  return {measure_ms(context, desc, direction, choice.algo.id), "measured"};
}

// The step's view of `choice`: the pick, its late plans, its environment and energy figures.
void take_choice(StepResult& result, const Choice& choice) {
  result.chosen = choice.algo;
  result.late_plans = choice.late_plans;
  result.environment = choice.environment;
  result.energy_j = choice.energy_j;
  result.energy_meter = choice.energy_meter;
  result.energy_fastest = choice.energy_fastest;
  result.energy_rows.clear();
  for (const ProfileRow& row : choice.timings) {
    if (!std::isnan(row.energy_j)) result.energy_rows.push_back(row);
  }
}

StepResult tune_step(Context& context, const ModelLayer& layer, const TunePlan& plan,
                     Direction direction) {
  StepResult result;
  result.layer = &layer;
  result.direction = direction;
  const auto start = Clock::now();
  try {
    const ConvDesc desc = layer.desc(plan.batch, plan.dtype, plan.layout);
    std::ostringstream text;
    text << desc;
    result.desc = text.str();
    result.repro = desc.repro(direction);

    const std::uint64_t hits_before = context.choice_cache()->hits();
    const std::shared_ptr<const Choice> choice = conv_select(context, desc, direction);
    result.cache_hit = context.choice_cache()->hits() > hits_before;
    take_choice(result, *choice);
    result.candidates_timed = choice->candidates_timed;
    result.tuning_ms = choice->tuning_ms;
    result.chosen_time = chosen_time(context, desc, direction, *choice);

    try {
      Context heuristic = context;
      heuristic.tune().policy(direction) = AlgoPolicy::heuristic();
      result.heuristic_id = conv_select(heuristic, desc, direction)->algo.id;
      if (result.heuristic_id == result.chosen.id)
        result.heuristic_time = result.chosen_time;
      else if (const auto timed = timed_in(*choice, result.heuristic_id))
        result.heuristic_time = *timed;
      else
        result.heuristic_time = {measure_ms(context, desc, direction, result.heuristic_id),
                                 "measured"};
    } catch (const Error& error) {
      result.heuristic_error = error.what();
    }
  } catch (const Error& error) {
    result.error = error.what();
  }
  result.step_ms = seconds_since(start) * 1e3;
  return result;
}

// Note [the tune's next step]
// A search may leave late plans, runtime-compiled candidates still compiling when its compile
// budget ran out (Note [late plans] in src/ops/dispatch.cpp). A program settles its own as its
// later calls find them compiled, outside the settling credit a later process has; a tune selects
// each layer-direction once and ends, so its file would hand every late plan to the processes
// that read it, each settling what its credit allows and running the searches' picks meanwhile.
// So after the last step the tune selects again every step that listed late plans, in order, as a
// program's next step would: the plans compiled by then are timed against the choice and the file
// gets the settled choice; those still compiling stay listed. The report gives the settled choice,
// the search's own pick beside it, and what the next step took.
void next_step(Context& context, const TunePlan& plan, std::vector<StepResult>& results) {
  for (StepResult& result : results) {
    if (!result.ok() || result.late_plans.empty()) continue;
    const auto start = Clock::now();
    try {
      const ConvDesc desc = result.layer->desc(plan.batch, plan.dtype, plan.layout);
      const std::shared_ptr<const Choice> choice = conv_select(context, desc, result.direction);
      if (choice->algo.id == result.chosen.id) {
        result.late_plans = choice->late_plans;
      } else {
        // Timed first: a failure leaves the step as the search left it.
        const Timed time = chosen_time(context, desc, result.direction, *choice);
        result.settled_from = result.chosen.id;
        take_choice(result, *choice);
        result.chosen_time = time;
        if (result.heuristic_id == result.chosen.id) result.heuristic_time = time;
      }
    } catch (const Error& error) {
      // The search's choice stands; its late plans stay listed for a later process.
      result.next_step_error = error.what();
    }
    result.next_step_ms = seconds_since(start) * 1e3;
  }
}

// Progress on stderr: a redrawn bar on a terminal, one plain line per step otherwise (logs, CI).
class Progress {
 public:
  explicit Progress(std::size_t total)
      : total_(total), terminal_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}

  void begin(std::size_t index, const ModelLayer& layer, Direction direction) {
    const std::string elapsed = clock_text(seconds_since(start_));
    if (!terminal_) {
      std::fprintf(stderr, "tune [%zu/%zu] %s %s (elapsed %s)\n", index + 1, total_,
                   layer.name.c_str(), std::string(to_string(direction)).c_str(), elapsed.c_str());
      return;
    }
    constexpr std::size_t width = 30;
    const std::size_t filled = total_ == 0 ? width : width * index / total_;
    const std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
    std::fprintf(stderr, "\r\033[K[%s] %zu/%zu %s %s  %s", bar.c_str(), index + 1, total_,
                 layer.name.c_str(), std::string(to_string(direction)).c_str(), elapsed.c_str());
    std::fflush(stderr);
  }

  void finish() {
    const std::string line = "tuned " + std::to_string(total_) + " layer-directions in " +
                             format_seconds(seconds_since(start_));
    std::fprintf(stderr, terminal_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
  }

  double elapsed_s() const { return seconds_since(start_); }

 private:
  static std::string clock_text(double seconds) {
    const auto whole = static_cast<long>(seconds);
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld", whole / 60, whole % 60);
    return buffer;
  }

  std::size_t total_;
  bool terminal_;
  Clock::time_point start_;
};

std::string policies_text(const TuneOptions& options) {
  std::string fwd = options.fwd.to_string();
  if (fwd == options.bwd_data.to_string() && fwd == options.bwd_weights.to_string()) return fwd;
  return "fwd " + fwd + ", bwd_data " + options.bwd_data.to_string() + ", bwd_weights " +
         options.bwd_weights.to_string();
}

struct Totals {
  double chosen_ms = 0;
  double heuristic_ms = 0;
  int steps = 0;
};

// Sums time x count over the steps where both times are known, per direction and overall.
std::vector<std::pair<std::string, Totals>> totals_of(const std::vector<StepResult>& results,
                                                      const std::vector<Direction>& directions) {
  std::vector<std::pair<std::string, Totals>> totals;
  totals.reserve(directions.size() + 1);
  for (const Direction direction : directions) totals.emplace_back(to_string(direction), Totals{});
  totals.emplace_back("all", Totals{});
  for (const StepResult& result : results) {
    if (!result.ok() || std::isnan(result.chosen_time.ms) || std::isnan(result.heuristic_time.ms))
      continue;
    const auto count = static_cast<double>(result.layer->count);
    for (auto& [name, total] : totals) {
      if (name != "all" && name != to_string(result.direction)) continue;
      total.chosen_ms += result.chosen_time.ms * count;
      total.heuristic_ms += result.heuristic_time.ms * count;
      ++total.steps;
    }
  }
  return totals;
}

void print_report(std::ostream& out, const std::vector<StepResult>& results,
                  const std::vector<Direction>& directions, double wall_s) {
  std::vector<std::vector<std::string>> rows;
  for (const StepResult& result : results) {
    std::vector<std::string> row{result.layer->name, std::string(to_string(result.direction)),
                                 std::to_string(result.layer->count)};
    if (!result.ok()) {
      row.insert(row.end(), {"FAILED (see below)", "-", "-", "-", "-", "-", "-"});
    } else {
      row.insert(row.end(),
                 {result.chosen.id, format_ms(result.chosen_time.ms),
                  format_bytes(result.chosen.workspace_bytes),
                  result.heuristic_id.empty() ? "FAILED (see below)" : result.heuristic_id,
                  format_ms(result.heuristic_time.ms), format_ratio(result.speedup()),
                  result.cache_hit ? "hit" : "tuned"});
    }
    rows.push_back(std::move(row));
  }
  // The energy policies' column (Note [energy policies]), where some choice measured it.
  const bool energy = std::any_of(results.begin(), results.end(), [](const StepResult& result) {
    return result.ok() && !std::isnan(result.energy_j);
  });
  std::vector<std::string> columns{"layer",     "direction", "count", "chosen",  "ms",
                                   "workspace", "heuristic", "ms",    "speedup", "cache"};
  std::vector<std::size_t> right{2, 4, 5, 7, 8};
  if (energy) {
    columns.insert(columns.begin() + 5, "mJ/call");
    right = {2, 4, 5, 6, 8, 9};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const StepResult& result = results[i];
      char text[32] = "-";
      if (result.ok() && !std::isnan(result.energy_j))
        std::snprintf(text, sizeof text, "%.4f", result.energy_j * 1e3);
      rows[i].insert(rows[i].begin() + 5, text);
    }
  }
  out << format_table(columns, rows, right);

  std::vector<std::vector<std::string>> total_rows;
  for (const auto& [name, total] : totals_of(results, directions)) {
    total_rows.push_back({name, std::to_string(total.steps), format_ms(total.chosen_ms),
                          format_ms(total.heuristic_ms),
                          format_ratio(total.heuristic_ms / total.chosen_ms)});
  }
  out << "\ntotals: sum over layers of time x count\n"
      << format_table({"direction", "layers", "chosen ms", "heuristic ms", "speedup"}, total_rows,
                      {1, 2, 3, 4});

  double selection_ms = 0;
  int timed = 0;
  std::size_t hits = 0;
  for (const StepResult& result : results) {
    hits += result.cache_hit;
    if (result.cache_hit) continue;  // their selection ran in an earlier process
    selection_ms += result.tuning_ms;
    timed += result.candidates_timed;
  }
  out << "\ntuning wall time: " << format_seconds(wall_s) << " (selection "
      << format_seconds(selection_ms / 1e3) << ", " << timed << " candidates timed)\n";
  out << "cache hits: " << hits << " of " << results.size()
      << " layer-directions (choices made earlier, in this or another process)\n";
  // Note [the tune's next step]
  double next_ms = 0;
  int stepped = 0, settled = 0;
  std::size_t still_late = 0;
  for (const StepResult& result : results) {
    if (std::isnan(result.next_step_ms)) continue;
    ++stepped;
    next_ms += result.next_step_ms;
    settled += !result.settled_from.empty();
    still_late += result.late_plans.size();
  }
  if (stepped > 0) {
    out << "late plans: " << stepped << " layer-directions selected again after the last step ("
        << format_seconds(next_ms / 1e3) << "), " << settled << " changed to a late plan; "
        << still_late << " late plans still compiling, listed for a later process\n";
  }
  // The energy policies: what was read, or why nothing was (then the fastest was kept).
  std::vector<std::string> meters;
  for (const StepResult& result : results) {
    if (result.ok() && !result.energy_meter.empty() &&
        std::find(meters.begin(), meters.end(), result.energy_meter) == meters.end())
      meters.push_back(result.energy_meter);
  }
  for (const std::string& meter : meters) out << "energy: " << meter << '\n';

  bool header = false;
  for (const StepResult& result : results) {
    const std::string& error = result.ok() ? result.heuristic_error : result.error;
    for (const auto& [what, text] :
         {std::pair{std::string_view(result.ok() ? " (heuristic pick)" : ""), &error},
          std::pair{std::string_view(" (next step)"), &result.next_step_error}}) {
      if (text->empty()) continue;
      if (!header) out << "\nfailures:\n";
      header = true;
      out << "  " << result.layer->name << ' ' << to_string(result.direction) << what << ": "
          << *text << '\n';
    }
  }
}

nlohmann::json report_json(const TunePlan& plan, const Context& context,
                           const std::vector<StepResult>& results, double wall_s, bool complete) {
  const TuneOptions& options = context.tune();
  nlohmann::json steps = nlohmann::json::array();
  for (const StepResult& result : results) {
    nlohmann::json step{{"layer", result.layer->name},
                        {"direction", to_string(result.direction)},
                        {"count", result.layer->count},
                        {"bench", result.layer->bench},
                        {"desc", result.desc},
                        {"repro", result.repro},
                        {"error", result.ok() ? nlohmann::json() : nlohmann::json(result.error)}};
    if (result.ok()) {
      step["chosen"] = {{"id", result.chosen.id},
                        {"name", result.chosen.name},
                        {"time_ms", result.chosen_time.ms},
                        {"time_source", result.chosen_time.source},
                        {"workspace_bytes", result.chosen.workspace_bytes},
                        {"deterministic", result.chosen.deterministic}};
      step["heuristic"] = {
          {"id", result.heuristic_id},
          {"time_ms", result.heuristic_time.ms},
          {"time_source", result.heuristic_time.source},
          {"error", result.heuristic_error.empty() ? nlohmann::json()
                                                   : nlohmann::json(result.heuristic_error)}};
      step["speedup"] = result.speedup();
      step["candidates_timed"] = result.candidates_timed;
      step["late_plans"] = result.late_plans;
      if (!std::isnan(result.next_step_ms)) {  // Note [the tune's next step]
        step["next_step"] = {
            {"ms", result.next_step_ms},
            {"settled_from",
             result.settled_from.empty() ? nlohmann::json() : nlohmann::json(result.settled_from)},
            {"error", result.next_step_error.empty() ? nlohmann::json()
                                                     : nlohmann::json(result.next_step_error)}};
      }
      if (!result.energy_meter.empty()) {
        step["chosen"]["energy_j"] =
            std::isnan(result.energy_j) ? nlohmann::json() : nlohmann::json(result.energy_j);
        step["energy_meter"] = result.energy_meter;
        // Every contender measured, and the one time alone keeps (what exhaustive would keep,
        // host_tie applied: not always the least time_ms of the rows).
        step["energy_fastest"] = result.energy_fastest.empty()
                                     ? nlohmann::json()
                                     : nlohmann::json(result.energy_fastest);
        const auto number = [](double value) {
          return std::isnan(value) ? nlohmann::json() : nlohmann::json(value);
        };
        step["energy_rows"] = nlohmann::json::array();
        for (const ProfileRow& row : result.energy_rows) {
          step["energy_rows"].push_back({{"id", row.algo.id},
                                         {"time_ms", number(row.median_ms)},
                                         {"energy_j", number(row.energy_j)},
                                         {"energy_spread_j", number(row.energy_spread_j)},
                                         {"power_w", number(row.power_w)},
                                         {"clock_mhz", number(row.clock_mhz)}});
        }
      }
      step["tuning_ms"] = result.tuning_ms;
      step["step_ms"] = result.step_ms;
      step["cache_hit"] = result.cache_hit;
    }
    steps.push_back(std::move(step));
  }
  nlohmann::json totals = nlohmann::json::object();
  for (const auto& [name, total] : totals_of(results, plan.directions)) {
    totals[name] = {{"layers", total.steps},
                    {"chosen_ms", total.chosen_ms},
                    {"heuristic_ms", total.heuristic_ms},
                    {"speedup", total.heuristic_ms / total.chosen_ms}};
  }
  // The machine and libraries of the first choice measured in this process, else of the first
  // one read from the cache.
  nlohmann::json environment;
  for (const bool from_here : {true, false}) {
    for (const StepResult& result : results) {
      if (!environment.is_null() || !result.ok() || result.cache_hit == from_here ||
          result.environment.empty())
        continue;
      environment = nlohmann::json::parse(result.environment, nullptr, /*allow_exceptions=*/false);
      if (environment.is_discarded()) environment = nullptr;
    }
  }
  const auto limit = options.effective_workspace_limit();
  return {{"model", plan.model.name},
          {"batch", plan.batch},
          {"dtype", to_string(plan.dtype)},
          {"layout", to_string(plan.layout)},
          {"backend", to_string(context.backend())},
          {"context", context.describe()},
          {"environment", environment},
          {"dnnx_version", version()},
          {"options",
           {{"fwd", options.fwd.to_string()},
            {"bwd_data", options.bwd_data.to_string()},
            {"bwd_weights", options.bwd_weights.to_string()},
            {"workspace_limit", limit ? nlohmann::json(*limit) : nlohmann::json()},
            {"deterministic", options.deterministic},
            {"fastest", options.fastest},
            {"time_naive", options.time_naive},
            {"final_round", options.final_round},
            {"final_loop_ms", options.final_loop_ms},
            {"final_contenders", options.final_contenders},
            {"host_tie", options.host_tie},
            {"search_budget_ms", options.search_budget_ms},
            {"late_plan_share", options.late_plan_share},
            {"energy_window_ms", options.energy_window_ms},
            {"energy_repeats", options.energy_repeats},
            {"benchmark_limit", options.benchmark_limit},
            {"timing_runs", options.timing_runs},
            {"warmup_runs", options.warmup_runs},
            // JSON has no infinity: that factor is written "inf".
            {"variant_factor", std::isfinite(options.variant_factor)
                                   ? nlohmann::json(options.variant_factor)
                                   : nlohmann::json("inf")}}},
          {"results", steps},
          {"totals", totals},
          {"tuning_wall_s", wall_s},
          {"complete", complete},
          {"cache",
           {{"mode", to_string(context.choice_cache()->file_options().mode)},
            {"file", context.choice_cache()->file_options().path}}}};
}

int run_tune(const TuneArgs& args) {
  const TunePlan plan = parse_plan(args);
  // Opened before tuning so that an unwritable path fails now, not after minutes of timing.
  const bool json_to_stdout = plan.json_file == "-";
  OutputFile json_file = plan.json_file.empty() || json_to_stdout
                             ? OutputFile()
                             : OutputFile("--json", plan.json_file);
  OutputFile report =
      plan.report_file.empty() ? OutputFile() : OutputFile("--report", plan.report_file);
  std::ostream& text = json_to_stdout ? std::cerr : std::cout;

  Context context = make_context(plan.backend, plan.dtype);
  apply_policies(plan, context.tune());
  check_fixed_ids(plan, context, "--policy");
  const TuneOptions& options = context.tune();
  const auto limit = options.effective_workspace_limit();
  text << "dnnx tune: " << plan.model.name << ", " << plan.layers.size() << " layers x "
       << plan.directions.size() << " directions, batch " << plan.batch << ", "
       << to_string(plan.dtype) << ' ' << to_string(plan.layout) << '\n'
       << "context: " << context.describe() << '\n'
       << "policy: " << policies_text(options)
       << "; workspace limit: " << (limit ? format_bytes(*limit) : std::string("none"))
       << "; deterministic: " << (options.deterministic ? "yes" : "no") << "; benchmark limit: "
       << (options.benchmark_limit > 0 ? std::to_string(options.benchmark_limit) : "all");
  if (options.search_budget_ms > 0)
    text << "; search budget: " << options.search_budget_ms << " ms";
  text << "; runs: " << options.timing_runs << " (warm-up " << options.warmup_runs << ")\n";
  const CacheFileOptions& cache_file = context.choice_cache()->file_options();
  text << "choice cache: " << to_string(cache_file.mode)
       << (cache_file.mode == CacheMode::off ? std::string() : " " + cache_file.path) << '\n'
       << std::flush;

  std::vector<StepResult> results;
  Progress progress(plan.layers.size() * plan.directions.size());
  std::size_t index = 0;
  for (const ModelLayer* layer : plan.layers) {
    for (const Direction direction : plan.directions) {
      progress.begin(index++, *layer, direction);
      results.push_back(tune_step(context, *layer, plan, direction));
      // The document so far, `"complete": false`, so that a run cut short (a time limit, a
      // crash) keeps what it measured: a step under an energy policy takes seconds.
      if (json_file.wanted() && index < plan.layers.size() * plan.directions.size())
        json_file.replace(report_json(plan, context, results, progress.elapsed_s(), false).dump(2) +
                          "\n");
    }
  }
  next_step(context, plan, results);  // Note [the tune's next step]
  progress.finish();
  const double wall_s = progress.elapsed_s();

  text << '\n';
  print_report(text, results, plan.directions, wall_s);
  const nlohmann::json document = report_json(plan, context, results, wall_s, true);
  if (json_to_stdout) std::cout << document.dump(2) << '\n';
  // Each file is written even if the other could not be.
  const bool json_written = !json_file.wanted() || json_file.write(document.dump(2) + "\n");
  const bool report_written = !report.wanted() || report.write(tune_report_html(document));
  if (!json_written || !report_written) return failure_exit_code;

  const auto failed = std::count_if(results.begin(), results.end(),
                                    [](const StepResult& result) { return !result.ok(); });
  if (failed > 0) {
    std::cerr << "dnnx: tune: " << failed << " of " << results.size()
              << " layer-directions failed (see failures above)\n";
    return failure_exit_code;
  }
  return 0;
}

}  // namespace

void add_tune_command(CLI::App& app, Action& action) {
  CLI::App* tune = app.add_subcommand(
      "tune",
      "select an algorithm for every distinct conv layer of a network, every direction, and "
      "compare with the heuristic pick");
  auto args = std::make_shared<TuneArgs>();
  const std::string models = join(builtin_models(), " | ");
  tune->add_option("--model", args->model,
                   models + " | path to a shapes file (bench/shapes format)")
      ->type_name("MODEL")
      ->capture_default_str();
  tune->add_option("--batch", args->batch, "batch size N, 1 to 2^31")
      ->type_name("N")
      ->capture_default_str();
  tune->add_option("--dtype", args->dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  tune->add_option("--layout", args->layout, "nchw | nhwc")
      ->type_name("LAYOUT")
      ->capture_default_str();
  add_backend_options(*tune, args->backend);
  tune->add_option("--policy", args->policy,
                   "heuristic | exhaustive | fixed:<id> | a Theano name (time_once, guess_once, "
                   "...) | a family (winograd, ...), for every direction (default: exhaustive, or "
                   "$DNNX_CONV_{FWD,BWD_DATA,BWD_WEIGHTS}_ALGO)")
      ->type_name("POLICY");
  add_selection_options(*tune, args->selection);
  tune->add_option("--benchmark-limit", args->benchmark_limit,
                   "exhaustive: time at most N candidates that run, 0 to " +
                       std::to_string(max_benchmark_limit) +
                       "; 0 = all (default: $DNNX_BENCHMARK_LIMIT, else 0)")
      ->type_name("N");
  tune->add_option("--layers", args->layers, "only these layers (comma-separated names)")
      ->type_name("NAME,...");
  tune->add_option("--direction", args->direction,
                   "fwd | bwd_data | bwd_weights | all, or a comma-separated list")
      ->type_name("DIR")
      ->capture_default_str();
  tune->add_option("--json", args->json_file,
                   "also write the results as JSON to FILE ('-': JSON on stdout, text on stderr)")
      ->type_name("FILE");
  tune->add_option("--report", args->report_file,
                   "also write the results as one self-contained HTML page to FILE: per layer "
                   "and direction the chosen candidate against the heuristic's as bars, "
                   "workspace, search, totals, machine and libraries; sortable")
      ->type_name("FILE.html");
  tune->callback([&action, args] { action = [args] { return run_tune(*args); }; });
}

}  // namespace dnnx::cli
