// Context, its TuneOptions (every field of include/dnnx/algo.hpp's struct, policies as their text
// spelling), per-op policy views derived from the op table, the choice cache, choices and profile
// tables.

#include "bindings.hpp"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include <cmath>

namespace dnnx::python {
namespace {

/// One op's policies inside a TuneOptions: `tune.pool.bwd = "exhaustive"`. Holds the TuneOptions
/// it came from alive (keep_alive on the accessor).
struct OpPolicies {
  TuneOptions* tune;
  OpKind op;
};

// Every spelling a direction has somewhere in the op table ("bwd" is bwd_data of the ops with one
// backward pass), each an attribute of OpPolicies that the op may or may not have.
constexpr const char* direction_attributes[] = {"fwd", "bwd", "bwd_data", "bwd_weights",
                                                "fwd_training"};

std::string policy_text(const AlgoPolicy& policy) { return policy.to_string(); }

nb::dict stats_of(const ChoiceCache& cache) {
  const CacheFileStats file = cache.file_stats();
  nb::dict stats;
  stats["size"] = cache.size();
  stats["hits"] = cache.hits();
  stats["misses"] = cache.misses();
  stats["generation"] = cache.generation();
  stats["path"] = file.path;
  stats["mode"] = std::string(to_string(file.mode));
  stats["in_force"] = std::string(to_string(file.in_force));
  stats["problem"] = file.problem;
  stats["file_entries"] = file.file_entries;
  stats["applied"] = file.applied;
  stats["invalidated"] = file.invalidated;
  stats["writes"] = file.writes;
  stats["set_aside"] = file.set_aside;
  stats["dropped"] = file.dropped;
  return stats;
}

std::size_t size_from(std::int64_t value, const char* name) {
  if (value < 0)
    throw Error(
        ErrorKind::InvalidArgument,
        std::string(name) + " must be >= 0 (None for no limit), got " + std::to_string(value));
  return static_cast<std::size_t>(value);
}

// TuneOptions' scalar fields by name, for pickling (the policies and workspace_limit aside).
template <typename T>
struct Field {
  const char* name;
  T TuneOptions::*member;
};
constexpr Field<bool> bool_fields[] = {{"deterministic", &TuneOptions::deterministic},
                                       {"fastest", &TuneOptions::fastest},
                                       {"verbose", &TuneOptions::verbose},
                                       {"time_naive", &TuneOptions::time_naive},
                                       {"final_round", &TuneOptions::final_round},
                                       {"profile_energy", &TuneOptions::profile_energy}};
constexpr Field<int> int_fields[] = {{"benchmark_limit", &TuneOptions::benchmark_limit},
                                     {"warmup_runs", &TuneOptions::warmup_runs},
                                     {"timing_runs", &TuneOptions::timing_runs},
                                     {"final_contenders", &TuneOptions::final_contenders},
                                     {"energy_repeats", &TuneOptions::energy_repeats}};
constexpr Field<double> double_fields[] = {{"abandon_factor", &TuneOptions::abandon_factor},
                                           {"variant_factor", &TuneOptions::variant_factor},
                                           {"final_loop_ms", &TuneOptions::final_loop_ms},
                                           {"host_tie", &TuneOptions::host_tie},
                                           {"search_budget_ms", &TuneOptions::search_budget_ms},
                                           {"late_plan_share", &TuneOptions::late_plan_share},
                                           {"energy_window_ms", &TuneOptions::energy_window_ms}};

template <typename T, std::size_t N>
void put_fields(const TuneOptions& options, const Field<T> (&fields)[N], nb::dict& state) {
  for (const Field<T>& field : fields) state[field.name] = options.*field.member;
}
// A field missing from `state` (pickled before the field existed) keeps its default.
template <typename T, std::size_t N>
void take_fields(TuneOptions& options, const Field<T> (&fields)[N], const nb::dict& state) {
  for (const Field<T>& field : fields) {
    if (state.contains(field.name)) options.*field.member = nb::cast<T>(state[field.name]);
  }
}

// A double field of TuneOptions that takes values from 0 to `max`; out of range (NaN too) is an
// InvalidArgument saying "<name> must be <unit> from 0 <zero> to <max>, got <value>".
void def_bounded(nb::class_<TuneOptions>& tune, const char* name, double TuneOptions::*member,
                 double max, const char* unit, const char* zero, const char* doc) {
  tune.def_prop_rw(
      name, [member](const TuneOptions& self) { return self.*member; },
      [=](TuneOptions& self, double value) {
        if (!(value >= 0 && value <= max))
          throw Error(ErrorKind::InvalidArgument,
                      std::string(name) + " must be " + unit + " from 0 " + zero + " to " +
                          std::to_string(max) + ", got " + std::to_string(value));
        self.*member = value;
      },
      nb::arg("value"), doc);
}

void bind_tune_options(nb::module_& module) {
  nb::class_<OpPolicies> policies(module, "OpPolicies",
                                  "One op's selection policies per direction, e.g. "
                                  "ctx.tune.pool.bwd = 'exhaustive'.");
  for (const char* attribute : direction_attributes) {
    const std::string name = attribute;
    policies.def_prop_rw(
        attribute,
        [name](const OpPolicies& self) {
          const OpInfo& info = op_info(self.op);
          return policy_text(self.tune->policy(self.op, info.parse_direction(name)));
        },
        [name](OpPolicies& self, std::string_view text) {
          const OpInfo& info = op_info(self.op);
          self.tune->policy(self.op, info.parse_direction(name)) = AlgoPolicy::parse(text);
        });
  }
  policies.def_prop_ro("op",
                       [](const OpPolicies& self) { return std::string(to_string(self.op)); });
  policies.def_prop_ro(
      "directions",
      [](const OpPolicies& self) {
        std::vector<std::string> names;
        for (const OpDirection& direction : op_info(self.op).directions)
          names.emplace_back(direction.name);
        return names;
      },
      "The op's direction names.");
  policies.def("__repr__", [](const OpPolicies& self) {
    const OpInfo& info = op_info(self.op);
    std::string text = std::string(info.name) + " policies:";
    for (const OpDirection& direction : info.directions)
      text += " " + std::string(direction.name) + "=" +
              policy_text(self.tune->policy(self.op, direction.direction));
    return text;
  });

  nb::class_<TuneOptions> tune(module, "TuneOptions",
                               "Selection options (dnnx::TuneOptions): policies per op and "
                               "direction, workspace limit, determinism, timing knobs.");
  tune.def(nb::init<>());
  tune.def(
      "copy", [](const TuneOptions& self) { return self; }, "A copy.");
  tune.def("__copy__", [](const TuneOptions& self) { return self; });
  tune.def("__deepcopy__", [](const TuneOptions& self, nb::handle) { return self; });
  tune.def("__eq__", [](const TuneOptions& a, const TuneOptions& b) { return a == b; });
  // Pickling (torch.save of a model whose layers hold their own options): every field, policies
  // by "op.direction" in their text spelling, so that the state reads back across versions that
  // add ops or reorder them.
  tune.def("__getstate__", [](const TuneOptions& self) {
    nb::dict policies;
    for (const OpInfo& info : op_table()) {
      if (info.policies != info.kind) continue;  // shares another op's policies
      for (const OpDirection& direction : info.directions) {
        policies[nb::str((std::string(info.name) + "." + std::string(direction.name)).c_str())] =
            policy_text(self.policy(info.kind, direction.direction));
      }
    }
    nb::dict state;
    state["policies"] = policies;
    state["workspace_limit"] = self.workspace_limit ? nb::cast(*self.workspace_limit) : nb::none();
    put_fields(self, bool_fields, state);
    put_fields(self, int_fields, state);
    put_fields(self, double_fields, state);
    return state;
  });
  tune.def("__setstate__", [](TuneOptions& self, const nb::dict& state) {
    new (&self) TuneOptions();
    const nb::dict policies = nb::cast<nb::dict>(state["policies"]);
    for (const auto& [key, value] : policies) {
      const std::string name = nb::cast<std::string>(key);
      const std::size_t dot = name.find('.');
      if (dot == std::string::npos)
        throw Error(ErrorKind::InvalidArgument,
                    "a pickled TuneOptions names policy '" + name + "', not '<op>.<direction>'");
      const OpInfo& info = op_info(parse_op_kind(std::string_view(name).substr(0, dot)));
      self.policy(info.kind, info.parse_direction(std::string_view(name).substr(dot + 1))) =
          AlgoPolicy::parse(nb::cast<std::string>(value));
    }
    const nb::handle limit = state["workspace_limit"];
    if (!limit.is_none()) self.workspace_limit = nb::cast<std::size_t>(limit);
    take_fields(self, bool_fields, state);
    take_fields(self, int_fields, state);
    take_fields(self, double_fields, state);
  });
  for (Direction direction : {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
    tune.def_prop_rw(
        std::string(to_string(direction)).c_str(),
        [direction](const TuneOptions& self) { return policy_text(self.policy(direction)); },
        [direction](TuneOptions& self, std::string_view text) {
          self.policy(direction) = AlgoPolicy::parse(text);
        },
        "Convolution's policy for this direction: 'heuristic', 'exhaustive', 'fixed:<id>', a "
        "Theano name or a family.");
  }
  // One attribute per op name and alias of the op table: tune.pool, tune.batch_norm, ...
  for (const OpInfo& info : op_table()) {
    std::vector<std::string> names{std::string(info.name)};
    std::string_view aliases = info.aliases;
    while (!aliases.empty()) {
      const auto comma = aliases.find(',');
      names.emplace_back(aliases.substr(0, comma));
      aliases = comma == std::string_view::npos ? std::string_view() : aliases.substr(comma + 1);
    }
    const OpKind op = info.kind;
    for (const std::string& name : names) {
      tune.def_prop_ro(
          name.c_str(),
          [op](TuneOptions& self) {
            return OpPolicies{&self, op};
          },
          nb::keep_alive<0, 1>(),
          ("The policies of " + std::string(info.name) + " per direction.").c_str());
    }
  }
  tune.def(
      "policy",
      [](const TuneOptions& self, std::string_view op, std::string_view direction) {
        const OpKind kind = parse_op_kind(op);
        return policy_text(self.policy(kind, op_info(kind).parse_direction(direction)));
      },
      nb::arg("op"), nb::arg("direction"), "The policy of (op, direction), as text.");
  tune.def(
      "set_policy",
      [](TuneOptions& self, std::string_view op, std::string_view direction,
         std::string_view policy) {
        const OpKind kind = parse_op_kind(op);
        self.policy(kind, op_info(kind).parse_direction(direction)) = AlgoPolicy::parse(policy);
      },
      nb::arg("op"), nb::arg("direction"), nb::arg("policy"),
      "Sets the policy of (op, direction).");
  tune.def_prop_rw(
      "workspace_limit",
      [](const TuneOptions& self) -> std::optional<std::size_t> { return self.workspace_limit; },
      [](TuneOptions& self, std::optional<std::int64_t> bytes) {
        self.workspace_limit.reset();
        if (bytes) self.workspace_limit = size_from(*bytes, "workspace_limit");
      },
      nb::arg("bytes").none(), "Largest workspace a candidate may use, bytes; None = no limit.");
  tune.def_rw("deterministic", &TuneOptions::deterministic,
              "Only candidates whose results are bitwise reproducible.");
  tune.def_rw("fastest", &TuneOptions::fastest, "Ignore workspace_limit.");
  tune.def_rw("verbose", &TuneOptions::verbose, "One line per decision on stderr.");
  tune.def_rw("benchmark_limit", &TuneOptions::benchmark_limit,
              "Exhaustive: time at most this many candidates that ran; 0 = all.");
  tune.def_rw("warmup_runs", &TuneOptions::warmup_runs,
              "Exhaustive: untimed runs per candidate before timing.");
  tune.def_rw("timing_runs", &TuneOptions::timing_runs, "Exhaustive: timed runs per candidate.");
  tune.def_rw("abandon_factor", &TuneOptions::abandon_factor,
              "Exhaustive: stop timing a candidate this many times slower than the best.");
  tune.def_prop_rw(
      "variant_factor", [](const TuneOptions& self) { return self.variant_factor; },
      [](TuneOptions& self, double factor) {
        if (!(factor == 0 || factor >= 1))
          throw Error(ErrorKind::InvalidArgument,
                      "variant_factor must be 0 (off) or >= 1 (inf allowed), got " +
                          std::to_string(factor));
        self.variant_factor = factor;
      },
      nb::arg("factor"),
      "Exhaustive and profiles: do not run a knob variant whose seed ran over this many times "
      "slower than the best so far, or was abandoned; 0 = run every variant.");
  def_bounded(tune, "final_loop_ms", &TuneOptions::final_loop_ms, TuneOptions::max_final_loop_ms,
              "milliseconds", "(single runs)",
              "Exhaustive: each final-round sample of a contender is a loop of back-to-back runs "
              "lasting about this long (ms), where the backend times loops; 0 = single runs "
              "(and no deep loops: those of texture-reading leaders, the long-loop check of a "
              "long leader).");
  tune.def_prop_rw(
      "final_contenders", [](const TuneOptions& self) { return self.final_contenders; },
      [](TuneOptions& self, int count) {
        if (count < 0 || count > TuneOptions::max_final_contenders)
          throw Error(ErrorKind::InvalidArgument,
                      "final_contenders must be from 0 (the default count) to " +
                          std::to_string(TuneOptions::max_final_contenders) + ", got " +
                          std::to_string(count));
        self.final_contenders = count;
      },
      nb::arg("count"),
      "Exhaustive: the final round times again at most this many of the fastest candidates "
      "within 2x of the best; 0 = 4, or 10 where its samples are loops.");
  def_bounded(tune, "search_budget_ms", &TuneOptions::search_budget_ms,
              TuneOptions::max_search_budget_ms, "milliseconds", "(no budget)",
              "Exhaustive: once a search has taken this long (ms, its listing and plan builds "
              "included), it times no further candidates but the backend heuristics' first "
              "picks; the rest are not_timed. 0 = no budget.");
  def_bounded(tune, "late_plan_share", &TuneOptions::late_plan_share,
              TuneOptions::max_late_plan_share, "a fraction", "(every late plan at once)",
              "Exhaustive: the choices read from the cache file time their late plans "
              "(candidates their searches skipped while they compiled) within this share of the "
              "searches they record, pooled over them; the rest stay listed for a later "
              "process. 0 = all at once.");
  def_bounded(tune, "host_tie", &TuneOptions::host_tie, TuneOptions::max_host_tie, "a fraction",
              "(off)",
              "Exhaustive and profiles: choose a candidate noted host_heavy (cuDNN's legacy calls, "
              "engine configs reading through textures) "
              "only when it is more than this fraction faster than the fastest other one; 0 = "
              "off.");
  tune.def_prop_rw(
      "energy_window_ms", [](const TuneOptions& self) { return self.energy_window_ms; },
      [](TuneOptions& self, double ms) {
        if (!(ms >= TuneOptions::min_energy_window_ms && ms <= TuneOptions::max_energy_window_ms))
          throw Error(
              ErrorKind::InvalidArgument,
              "energy_window_ms must be milliseconds from 50 to 60000, got " + std::to_string(ms));
        self.energy_window_ms = ms;
      },
      nb::arg("ms"),
      "min_energy, energy_delay and profiles with profile_energy: each loop of runs whose energy "
      "is read lasts at least this long (ms; the counter updates every 20-100 ms).");
  tune.def_prop_rw(
      "energy_repeats", [](const TuneOptions& self) { return self.energy_repeats; },
      [](TuneOptions& self, int repeats) {
        if (repeats < 1 || repeats > TuneOptions::max_energy_repeats)
          throw Error(ErrorKind::InvalidArgument,
                      "energy_repeats must be from 1 to 100, got " + std::to_string(repeats));
        self.energy_repeats = repeats;
      },
      nb::arg("repeats"), "Those loops per candidate; their median is kept with their spread.");
  tune.def_rw("profile_energy", &TuneOptions::profile_energy,
              "Profiles: also measure every timed candidate's energy per call (energy_j, "
              "energy_spread_j, power_w and clock_mhz of each row; profile.energy_meter says "
              "what was read, or why nothing was).");
  tune.def_rw("time_naive", &TuneOptions::time_naive,
              "Exhaustive and profiles: also time naive reference loops.");
  tune.def_rw("final_round", &TuneOptions::final_round,
              "Exhaustive: re-time the fastest few interleaved before deciding.");
  tune.def(
      "effective_workspace_limit",
      [](const TuneOptions& self) -> std::optional<std::size_t> {
        return self.effective_workspace_limit();
      },
      "The limit in force: None when fastest is set.");
  tune.def("__repr__", [](const TuneOptions& self) {
    std::string text = "TuneOptions(fwd=" + policy_text(self.fwd) +
                       ", bwd_data=" + policy_text(self.bwd_data) +
                       ", bwd_weights=" + policy_text(self.bwd_weights);
    const AlgoPolicy heuristic;
    for (const OpInfo& info : op_table()) {
      if (info.kind == OpKind::conv || info.policies != info.kind) continue;
      for (const OpDirection& direction : info.directions) {
        const AlgoPolicy& policy = self.policy(info.kind, direction.direction);
        if (!(policy == heuristic))
          text += ", " + std::string(info.name) + "." + std::string(direction.name) + "=" +
                  policy_text(policy);
      }
    }
    text += ", workspace_limit=" +
            (self.workspace_limit ? std::to_string(*self.workspace_limit) : std::string("None"));
    text += std::string(", deterministic=") + (self.deterministic ? "True" : "False");
    text += std::string(", fastest=") + (self.fastest ? "True" : "False");
    text += std::string(", verbose=") + (self.verbose ? "True" : "False");
    text += ", benchmark_limit=" + std::to_string(self.benchmark_limit) + ")";
    return text;
  });
  module.def(
      "apply_tune_env", [](TuneOptions& options) { apply_tune_env(options); }, nb::arg("options"),
      "Applies the DNNX_* tuning variables to `options`.");
  module.def(
      "parse_policy", [](std::string_view text) { return AlgoPolicy::parse(text).to_string(); },
      nb::arg("text"), "The canonical spelling of a policy; InvalidArgument listing the accepted.");
}

void bind_cache(nb::module_& module) {
  nb::class_<ChoiceCache> cache(module, "ChoiceCache",
                                "A store of choices (dnnx::ChoiceCache): memory only, or backed "
                                "by a file shared between processes.");
  cache.def(nb::init<>(), "A memory-only cache.");
  cache.def(
      "__init__",
      [](ChoiceCache* self, std::string path, std::string_view mode, std::int64_t max_entries) {
        CacheFileOptions options;
        options.path = std::move(path);
        options.mode = parse_cache_mode(mode);
        options.max_entries = size_from(max_entries, "max_entries");
        options.on_problem = FileProblem::raise;
        new (self) ChoiceCache(std::move(options));
      },
      nb::arg("path"), nb::arg("mode") = "readwrite", nb::arg("max_entries") = 4096,
      "A cache backed by the file `path` (mode 'off', 'read' or 'readwrite'); a file that "
      "cannot be used raises.");
  cache.def_static("process", &ChoiceCache::global,
                   "The process-wide cache (DNNX_CACHE, DNNX_CACHE_FILE), shared by contexts.");
  cache.def("stats", &stats_of,
            "size, hits, misses, generation and what the file side has done (path, mode, "
            "in_force, problem, file_entries, applied, invalidated, writes, set_aside, dropped).");
  cache.def("__len__", &ChoiceCache::size);
  cache.def("clear", &ChoiceCache::clear, "Drops every entry in memory and resets the counters.");
  cache.def(
      "entries",
      [](const ChoiceCache& self) {
        nb::list entries;
        for (auto& [key, choice] : self.entries())
          entries.append(nb::make_tuple(key, PyChoice{choice}));
        return entries;
      },
      "(key, Choice) of every entry in memory and in the file.");
  cache.def("export_file", &ChoiceCache::export_file, nb::arg("path"),
            nb::call_guard<nb::gil_scoped_release>(),
            "Writes every entry to `path` as a cache file; returns the entry count.");
  cache.def("import_file", &ChoiceCache::import_file, nb::arg("path"),
            nb::call_guard<nb::gil_scoped_release>(),
            "Merges the entries of the cache file `path`; returns the entries read.");
  cache.def("reload", &ChoiceCache::reload, nb::call_guard<nb::gil_scoped_release>(),
            "Re-reads the file, merging what other processes wrote.");
  cache.def(
      "prune",
      [](ChoiceCache& self, std::int64_t max_entries) {
        return self.prune(size_from(max_entries, "max_entries"));
      },
      nb::arg("max_entries"), "Keeps the most recently used file entries; returns those dropped.");
  cache.def("clear_file", &ChoiceCache::clear_file, "Empties the cache and its file.");
  cache.def_prop_ro("path", [](const ChoiceCache& self) { return self.file_options().path; });
  cache.def_prop_ro("mode", [](const ChoiceCache& self) {
    return std::string(to_string(self.file_options().mode));
  });
  module.def("default_cache_path", &CacheFileOptions::default_path,
             "The cache file used without DNNX_CACHE_FILE.");
}

void bind_context_class(nb::module_& module) {
  nb::class_<Context> context(module, "Context",
                              "Where and how ops run (dnnx::Context): backend, device, type "
                              "config, tuning options.");
  context.def(
      "__init__",
      [](Context* self, std::string_view backend, int device, std::string_view type_config) {
        new (self) Context(parse_backend(backend), device, parse_type_config(type_config));
      },
      nb::arg("backend") = "auto", nb::arg("device") = 0, nb::arg("type_config") = "float",
      "backend: 'auto', 'cpu', 'cudnn' or 'reference'; device: CUDA ordinal; type_config: "
      "'float', 'half' or 'bfloat16'.");
  context.def(nb::init<const Context&>(), nb::arg("other"),
              "A copy of `other`: its backend state shared, its TuneOptions copied.");
  context.def_static("from_env", &Context::from_env,
                     "Built from DNNX_BACKEND, DNNX_DEVICE, DNNX_TYPE and the tuning variables.");
  context.def_prop_ro(
      "backend", [](const Context& self) { return std::string(to_string(self.backend())); },
      "The backend that runs ('reference', 'cpu' or 'cudnn').");
  context.def_prop_ro("requested_backend", [](const Context& self) {
    return std::string(to_string(self.requested_backend()));
  });
  context.def_prop_ro("device_id", &Context::device_id);
  context.def_prop_ro(
      "device", [](const Context& self) { return to_string(self.device()); }, "'cpu' or 'cuda:N'.");
  context.def_prop_ro("type_config", [](const Context& self) {
    return std::string(to_string(self.type_config()));
  });
  context.def_prop_ro("dtype",
                      [](const Context& self) { return std::string(to_string(self.dtype())); });
  context.def_prop_rw(
      "tune", [](Context& self) -> TuneOptions& { return self.tune(); },
      [](Context& self, const TuneOptions& options) { self.tune() = options; },
      nb::rv_policy::reference_internal, "Selection options; modify freely.");
  context.def_prop_rw(
      "choice_cache", [](const Context& self) { return self.choice_cache(); },
      [](Context& self, std::shared_ptr<ChoiceCache> cache) {
        if (!cache) throw Error(ErrorKind::InvalidArgument, "choice_cache: None is not a cache");
        self.set_choice_cache(std::move(cache));
      },
      "The choice cache the ops consult (the process-wide one by default).");
  context.def("describe", &Context::describe);
  context.def("__repr__",
              [](const Context& self) { return "dnnx.Context(" + self.describe() + ")"; });
  context.def("fingerprint", &Context::fingerprint);
  context.def("synchronize", &Context::synchronize, nb::call_guard<nb::gil_scoped_release>(),
              "Waits until every op queued on this context has finished.");
  context.def_prop_ro(
      "stream", [](const Context& self) { return reinterpret_cast<std::uintptr_t>(self.stream()); },
      "The cudaStream_t the ops are queued on, as an int (0: the backend's own).");
  context.def(
      "with_stream",
      [](const Context& self, std::uintptr_t stream) {
        return self.with_stream(reinterpret_cast<void*>(stream));
      },
      nb::arg("stream"),
      "A copy whose ops go on the CUDA stream `stream` (a cudaStream_t as an int, e.g. "
      "torch.cuda.current_stream().cuda_stream); cudnn contexts only.");
  context.def(
      "copy", [](const Context& self) { return self; },
      "A copy sharing the backend state, with its own TuneOptions.");
  context.def("__copy__", [](const Context& self) { return self; });

  module.def(
      "backend_available",
      [](std::string_view backend) {
        std::string why;
        const bool available = backend_available(parse_backend(backend), &why);
        return std::make_pair(available, why);
      },
      nb::arg("backend"), "(available, why not) for a backend name.");
  module.def("stop_background_work", &stop_background_work,
             "Stops the background builds of runtime-compiled plans and joins their threads "
             "(registered with atexit by the dnnx package).");
  module.def(
      "resolve_backend",
      [](std::string_view backend) {
        return std::string(to_string(resolve_backend(parse_backend(backend))));
      },
      nb::arg("backend") = "auto", "The concrete backend a name resolves to here.");
  module.def(
      "backend_version",
      [](std::string_view backend) { return backend_version(parse_backend(backend)); },
      nb::arg("backend"), "Library versions the backend runs on.");
  module.def(
      "ops",
      [] {
        nb::list ops;
        for (const OpInfo& info : op_table()) {
          std::vector<std::string> directions;
          for (const OpDirection& direction : info.directions)
            directions.emplace_back(direction.name);
          ops.append(nb::make_tuple(std::string(info.name), directions));
        }
        return ops;
      },
      "(name, directions) of every op of the op table.");
}

}  // namespace

void bind_selection_types(nb::module_& module) {
  nb::class_<PyChoice> choice(module, "Choice",
                              "A selected candidate (dnnx::Choice): what runs for a (desc, "
                              "direction) under a context's options.");
  choice.def_prop_ro("id", [](const PyChoice& self) { return self.choice->algo.id; });
  choice.def_prop_ro("name", [](const PyChoice& self) { return self.choice->algo.name; });
  choice.def_prop_ro("policy",
                     [](const PyChoice& self) { return self.choice->policy.to_string(); });
  choice.def_prop_ro("op", [](const PyChoice& self) { return self.choice->op; });
  choice.def_prop_ro("direction", [](const PyChoice& self) {
    return std::string(to_string(self.choice->direction));
  });
  choice.def_prop_ro("key", [](const PyChoice& self) { return self.choice->key; });
  choice.def_prop_ro("time_ms", [](const PyChoice& self) -> std::optional<double> {
    if (std::isnan(self.choice->time_ms)) return std::nullopt;
    return self.choice->time_ms;
  });
  choice.def_prop_ro("workspace",
                     [](const PyChoice& self) { return self.choice->algo.workspace_bytes; });
  choice.def_prop_ro("deterministic",
                     [](const PyChoice& self) { return self.choice->algo.deterministic; });
  choice.def_prop_ro("notes", [](const PyChoice& self) { return self.choice->algo.notes; });
  choice.def_prop_ro("tuning_ms", [](const PyChoice& self) { return self.choice->tuning_ms; });
  choice.def_prop_ro("candidates_timed",
                     [](const PyChoice& self) { return self.choice->candidates_timed; });
  choice.def_prop_ro("runner_up", [](const PyChoice& self) { return self.choice->runner_up; });
  choice.def_prop_ro("runner_up_ms", [](const PyChoice& self) -> std::optional<double> {
    if (std::isnan(self.choice->runner_up_ms)) return std::nullopt;
    return self.choice->runner_up_ms;
  });
  choice.def_prop_ro("backend", [](const PyChoice& self) { return self.choice->backend; });
  choice.def_prop_ro("fingerprint", [](const PyChoice& self) { return self.choice->fingerprint; });
  choice.def_prop_ro("from_file", [](const PyChoice& self) { return self.choice->from_file; });
  choice.def_prop_ro(
      "late_plans", [](const PyChoice& self) { return self.choice->late_plans; },
      "Exhaustive: ids skipped while their plans compiled, which the next process that reads "
      "this choice from the cache file times against it.");
  choice.def_prop_ro(
      "energy_j",
      [](const PyChoice& self) -> std::optional<double> {
        if (std::isnan(self.choice->energy_j)) return std::nullopt;
        return self.choice->energy_j;
      },
      "min_energy, energy_delay: the chosen candidate's energy per call, joules (None when not "
      "measured).");
  choice.def_prop_ro(
      "energy_meter", [](const PyChoice& self) { return self.choice->energy_meter; },
      "min_energy, energy_delay: the counter read, or why none was (the choice is then the "
      "fastest); empty for the other policies.");
  choice.def_prop_ro(
      "energy_fastest", [](const PyChoice& self) { return self.choice->energy_fastest; },
      "min_energy, energy_delay: the contender that time alone keeps (what exhaustive would "
      "choose), against which the choice was weighed; empty when nothing was measured.");
  choice.def_prop_ro(
      "timings",
      [](const PyChoice& self) {
        nb::list rows;
        for (const ProfileRow& row : self.choice->timings) rows.append(profile_row(row));
        return rows;
      },
      "Exhaustive: every candidate's row, fastest first.");
  choice.def("__repr__", [](const PyChoice& self) {
    return "Choice(" + self.choice->op + " " + std::string(to_string(self.choice->direction)) +
           ": " + self.choice->algo.id + ", policy " + self.choice->policy.to_string() + ")";
  });

  nb::class_<ProfileResult> profile(module, "ProfileResult",
                                    "Every candidate of a (desc, direction), timed.");
  profile.def_ro("op", &ProfileResult::op);
  profile.def_prop_ro("direction", [](const ProfileResult& self) {
    return std::string(to_string(self.direction));
  });
  profile.def_ro("desc", &ProfileResult::desc);
  profile.def_ro("repro", &ProfileResult::repro);
  profile.def_ro("backend", &ProfileResult::backend);
  profile.def_ro("chosen", &ProfileResult::chosen);
  profile.def_ro("wall_ms", &ProfileResult::wall_ms);
  profile.def_ro("energy_meter", &ProfileResult::energy_meter);
  profile.def_prop_ro("rows", [](const ProfileResult& self) {
    nb::list rows;
    for (const ProfileRow& row : self.rows) rows.append(profile_row(row));
    return rows;
  });
  profile.def("table", &ProfileResult::table, "The fixed-width text table.");
  profile.def("json", &ProfileResult::json, "The same as a JSON document.");
}

void bind_context(nb::module_& module) {
  bind_tune_options(module);
  bind_cache(module);
  bind_context_class(module);
}

}  // namespace dnnx::python
