// Policies and tuning options: parsing (Theano's vocabulary included) and the DNNX_* variables.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>

#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <utility>

namespace dnnx {
namespace {

constexpr std::string_view policy_spellings =
    "heuristic, exhaustive, min_energy, energy_delay, fixed:<id>, guess_once, "
    "guess_on_shape_change, time_once, "
    "time_on_shape_change, deterministic, none, small, large, fft, fft_tiling, winograd "
    "(optionally followed by ':once')";

}  // namespace

AlgoPolicy AlgoPolicy::heuristic(Reuse reuse) { return {PolicyKind::heuristic, reuse, {}, {}}; }
AlgoPolicy AlgoPolicy::exhaustive(Reuse reuse) { return {PolicyKind::exhaustive, reuse, {}, {}}; }
AlgoPolicy AlgoPolicy::min_energy(Reuse reuse) { return {PolicyKind::min_energy, reuse, {}, {}}; }
AlgoPolicy AlgoPolicy::energy_delay(Reuse reuse) {
  return {PolicyKind::energy_delay, reuse, {}, {}};
}
AlgoPolicy AlgoPolicy::fixed(std::string id) {
  return {PolicyKind::fixed, Reuse::on_shape_change, std::move(id), {}};
}
AlgoPolicy AlgoPolicy::of_family(std::string family) {
  return {PolicyKind::family, Reuse::on_shape_change, {}, std::move(family)};
}

AlgoPolicy AlgoPolicy::parse(std::string_view text) {
  // ":once" may follow any policy, fixed ids included (to_string writes it that way).
  Reuse reuse = Reuse::on_shape_change;
  std::string_view body = text;
  if (detail::lower(body).ends_with(":once")) {
    reuse = Reuse::once;
    body.remove_suffix(5);
  }
  if (detail::lower(body.substr(0, 6)) == "fixed:") {
    std::string id(body.substr(6));
    DNNX_CHECK_ARG(!id.empty(), "algorithm policy '", text, "' needs an id after 'fixed:'");
    AlgoPolicy policy = fixed(std::move(id));
    policy.reuse = reuse;
    return policy;
  }
  std::string name = detail::lower(body);
  if (name.starts_with("family:")) name = name.substr(7);
  if (name == "heuristic") return heuristic(reuse);
  if (name == "exhaustive") return exhaustive(reuse);
  if (name == "min_energy") return min_energy(reuse);
  if (name == "energy_delay") return energy_delay(reuse);
  if (name == "guess_once") return heuristic(Reuse::once);
  if (name == "guess_on_shape_change") return heuristic(Reuse::on_shape_change);
  if (name == "time_once") return exhaustive(Reuse::once);
  if (name == "time_on_shape_change") return exhaustive(Reuse::on_shape_change);
  const bool family = name == "deterministic" ||
                      std::find(std::begin(family_names), std::end(family_names), name) !=
                          std::end(family_names);
  if (family) {
    AlgoPolicy policy = of_family(name);
    policy.reuse = reuse;
    return policy;
  }
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("unknown algorithm policy '", text, "'; accepted: ", policy_spellings));
}

std::string AlgoPolicy::to_string() const {
  std::string text;
  switch (kind) {
    case PolicyKind::heuristic: text = "heuristic"; break;
    case PolicyKind::exhaustive: text = "exhaustive"; break;
    case PolicyKind::fixed: text = "fixed:" + id; break;
    case PolicyKind::family: text = "family:" + family; break;
    case PolicyKind::min_energy: text = "min_energy"; break;
    case PolicyKind::energy_delay: text = "energy_delay"; break;
  }
  if (reuse == Reuse::once) text += ":once";
  return text;
}

const AlgoPolicy& TuneOptions::policy(Direction direction) const {
  switch (direction) {
    case Direction::fwd: return fwd;
    case Direction::bwd_data: return bwd_data;
    case Direction::bwd_weights: return bwd_weights;
    case Direction::fwd_training: break;
  }
  op_info(OpKind::conv).check(direction);
  return fwd;
}

AlgoPolicy& TuneOptions::policy(Direction direction) {
  return const_cast<AlgoPolicy&>(std::as_const(*this).policy(direction));
}

const AlgoPolicy& TuneOptions::policy(OpKind op, Direction direction) const {
  const OpInfo& info = op_info(op);
  info.check(direction);
  if (info.policies == OpKind::conv) return policy(direction);
  return op_policies[static_cast<std::size_t>(info.policies)][static_cast<std::size_t>(direction)];
}

AlgoPolicy& TuneOptions::policy(OpKind op, Direction direction) {
  return const_cast<AlgoPolicy&>(std::as_const(*this).policy(op, direction));
}

namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool parse_bool(const char* name, std::string_view text) {
  const std::string value = detail::lower(text);
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("environment variable ", name, "='", text,
                            "' is not a boolean; accepted: 1/0, true/false, yes/no, on/off"));
}

std::int64_t parse_integer(const char* name, std::string_view text, std::int64_t min,
                           std::int64_t max) {
  const std::string value(text);
  const bool plain = !value.empty() && (std::isdigit(static_cast<unsigned char>(value[0])) ||
                                        (value[0] == '-' && value.size() > 1));
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (!plain || errno != 0 || end == value.c_str() || *end != '\0' || parsed < min ||
      parsed > max) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", name, "='", text,
                              "' is not an integer in [", min, ", ", max, "]"));
  }
  return parsed;
}

// A number in [0, max] from environment variable `name`; otherwise InvalidArgument saying it is
// not `what`, and what is accepted.
double parse_bounded(const char* name, std::string_view text, double max, std::string_view what,
                     std::string_view accepted) {
  const std::string value(text);
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(parsed >= 0 && parsed <= max)) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", name, "='", text, "' is not ", what,
                              "; accepted: ", accepted));
  }
  return parsed;
}

// DNNX_FINAL_LOOP_MS: milliseconds in [0, max_final_loop_ms] (TuneOptions::final_loop_ms).
double parse_final_loop_ms(const char* name, std::string_view text) {
  return parse_bounded(
      name, text, TuneOptions::max_final_loop_ms, "a final-round loop length",
      detail::cat("milliseconds from 0 (single runs) to ", TuneOptions::max_final_loop_ms));
}

// DNNX_SEARCH_BUDGET_MS: milliseconds in [0, max_search_budget_ms] (TuneOptions::search_budget_ms).
double parse_search_budget_ms(const char* name, std::string_view text) {
  return parse_bounded(
      name, text, TuneOptions::max_search_budget_ms, "a search budget",
      detail::cat("milliseconds from 0 (no budget) to ", TuneOptions::max_search_budget_ms));
}

// DNNX_HOST_TIE: a fraction in [0, max_host_tie] (TuneOptions::host_tie; Note [host cost ties] in
// select.cpp).
double parse_host_tie(const char* name, std::string_view text) {
  return parse_bounded(
      name, text, TuneOptions::max_host_tie, "a host_tie",
      detail::cat("a fraction from 0 (off) to ", TuneOptions::max_host_tie, " (0.02: 2%)"));
}

// DNNX_LATE_PLAN_SHARE: a fraction in [0, max_late_plan_share] (TuneOptions::late_plan_share;
// Note [late plans] in src/ops/dispatch.cpp).
double parse_late_plan_share(const char* name, std::string_view text) {
  return parse_bounded(name, text, TuneOptions::max_late_plan_share, "a late-plan share",
                       detail::cat("a fraction from 0 (every late plan at once) to ",
                                   TuneOptions::max_late_plan_share, " (0.04: 4%)"));
}

// DNNX_VARIANT_FACTOR: 0 (off), or a number >= 1 ("inf" allowed); Note [pruning variants] in
// select.cpp.
double parse_variant_factor(const char* name, std::string_view text) {
  const std::string value(text);
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(parsed == 0 || parsed >= 1)) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", name, "='", text,
                              "' is not a variant factor; accepted: 0 (off) or a number >= 1 "
                              "(inf: prune only the variants of abandoned or failed seeds)"));
  }
  return parsed;
}

// DNNX_ENERGY_WINDOW_MS: milliseconds in [min_energy_window_ms, max_energy_window_ms]
// (TuneOptions::energy_window_ms; Note [energy per call] in energy.cpp).
double parse_energy_window_ms(const char* name, std::string_view text) {
  const double parsed =
      parse_bounded(name, text, TuneOptions::max_energy_window_ms, "an energy window",
                    detail::cat("milliseconds from ", TuneOptions::min_energy_window_ms, " to ",
                                TuneOptions::max_energy_window_ms));
  if (parsed < TuneOptions::min_energy_window_ms) {
    detail::raise(
        ErrorKind::InvalidArgument,
        detail::cat("environment variable ", name, "='", text,
                    "' is not an energy window; accepted: milliseconds from ",
                    TuneOptions::min_energy_window_ms, " to ", TuneOptions::max_energy_window_ms));
  }
  return parsed;
}

AlgoPolicy parse_policy_env(const char* name, std::string_view text) {
  try {
    return AlgoPolicy::parse(text);
  } catch (const Error& error) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", name, ": ", error.message()));
  }
}

}  // namespace

void apply_tune_env(TuneOptions& target) {
  // Parsed into a copy so that a malformed variable leaves the options untouched.
  TuneOptions options = target;
  // Every (op, direction) of the op table: DNNX_ALGO_<OP>_<DIRECTION> (e.g. DNNX_ALGO_POOL_BWD),
  // and the older spelling DNNX_<OP>_<DIRECTION>_ALGO (DNNX_CONV_FWD_ALGO, DNNX_POOL_BWD_ALGO).
  // Ops selected under another op's policies (OpInfo::policies) have no variables of their own.
  for (const OpInfo& op : op_table()) {
    if (op.policies != op.kind) continue;
    for (const OpDirection& direction : op.directions) {
      const auto [name, older] = op.policy_env_names(direction.direction);
      const char* value = env(name.c_str());
      const char* older_value = env(older.c_str());
      if (value != nullptr && older_value != nullptr && std::string_view(value) != older_value) {
        detail::raise(ErrorKind::InvalidArgument,
                      detail::cat("environment variables ", name, "='", value, "' and ", older,
                                  "='", older_value,
                                  "' set different policies for the same direction; set one"));
      }
      if (value == nullptr) value = older_value;
      if (value == nullptr) continue;
      options.policy(op.kind, direction.direction) =
          parse_policy_env(value == older_value ? older.c_str() : name.c_str(), value);
    }
  }
  if (const char* value = env("DNNX_WORKSPACE_LIMIT")) {
    // -1 means "no limit", as NNABLA_CUDNN_WORKSPACE_LIMIT.
    const std::int64_t limit = parse_integer("DNNX_WORKSPACE_LIMIT", value, -1,
                                               std::numeric_limits<std::int64_t>::max());
    options.workspace_limit =
        limit < 0 ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(limit));
  }
  if (const char* value = env("DNNX_DETERMINISTIC"))
    options.deterministic = parse_bool("DNNX_DETERMINISTIC", value);
  if (const char* value = env("DNNX_FASTEST")) options.fastest = parse_bool("DNNX_FASTEST", value);
  if (const char* value = env("DNNX_VERBOSE")) options.verbose = parse_bool("DNNX_VERBOSE", value);
  if (const char* value = env("DNNX_BENCHMARK_LIMIT")) {
    options.benchmark_limit =
        static_cast<int>(parse_integer("DNNX_BENCHMARK_LIMIT", value, 0,
                                       std::numeric_limits<int>::max()));
  }
  if (const char* value = env("DNNX_VARIANT_FACTOR"))
    options.variant_factor = parse_variant_factor("DNNX_VARIANT_FACTOR", value);
  if (const char* value = env("DNNX_FINAL_LOOP_MS"))
    options.final_loop_ms = parse_final_loop_ms("DNNX_FINAL_LOOP_MS", value);
  if (const char* value = env("DNNX_FINAL_CONTENDERS")) {
    options.final_contenders = static_cast<int>(
        parse_integer("DNNX_FINAL_CONTENDERS", value, 0, TuneOptions::max_final_contenders));
  }
  if (const char* value = env("DNNX_HOST_TIE"))
    options.host_tie = parse_host_tie("DNNX_HOST_TIE", value);
  if (const char* value = env("DNNX_SEARCH_BUDGET_MS"))
    options.search_budget_ms = parse_search_budget_ms("DNNX_SEARCH_BUDGET_MS", value);
  if (const char* value = env("DNNX_LATE_PLAN_SHARE"))
    options.late_plan_share = parse_late_plan_share("DNNX_LATE_PLAN_SHARE", value);
  if (const char* value = env("DNNX_ENERGY_WINDOW_MS"))
    options.energy_window_ms = parse_energy_window_ms("DNNX_ENERGY_WINDOW_MS", value);
  if (const char* value = env("DNNX_ENERGY_REPEATS")) {
    options.energy_repeats = static_cast<int>(
        parse_integer("DNNX_ENERGY_REPEATS", value, 1, TuneOptions::max_energy_repeats));
  }
  target = std::move(options);
}

}  // namespace dnnx
