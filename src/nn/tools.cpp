#include <dnnx/nn/tools.hpp>

#include "core/check.hpp"
#include "nn/tensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace dnnx::nn {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// The timed row of `id` among a choice's or a profile's rows (null when it was not timed).
const ProfileRow* timed_row(const std::vector<ProfileRow>& rows, const std::string& id) {
  for (const ProfileRow& row : rows) {
    if (row.algo.id == id && row.status == CandidateStatus::ok) return &row;
  }
  return nullptr;
}

// The median time of `id` among a choice's or a profile's timed rows (NaN when it was not timed).
double time_of(const std::vector<ProfileRow>& rows, const std::string& id) {
  const ProfileRow* row = timed_row(rows, id);
  return row != nullptr ? row->median_ms : nan;
}

std::string format_ms(double ms) {
  if (std::isnan(ms)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", ms);
  return text;
}

}  // namespace

Report report(Module& model, const ReportOptions& options) {
  Report out;
  for (auto& [name, module] : model.named_modules()) {
    if (!module->op()) continue;
    for (int d = 0; d < direction_count; ++d) {
      const auto direction = static_cast<Direction>(d);
      const auto& choice = module->choice(direction);
      if (!choice) continue;
      ReportRow row;
      row.module = name;
      row.type = module->type_name();
      row.op = std::string(to_string(*module->op()));
      row.direction = direction;
      row.policy = module->policy(direction).to_string();
      row.id = choice->algo.id;
      row.workspace_bytes = choice->algo.workspace_bytes;
      row.time_ms = choice->time_ms;
      if (std::isnan(row.time_ms)) row.time_ms = time_of(choice->timings, row.id);
      row.energy_j = choice->energy_j;
      row.energy_meter = choice->energy_meter;
      const auto heuristic = module->heuristic_choice(direction);
      row.heuristic_id = heuristic ? heuristic->algo.id : "";
      row.heuristic_ms = time_of(choice->timings, row.heuristic_id);
      if (row.heuristic_id == row.id) row.heuristic_ms = row.time_ms;
      if (options.profile) {
        if (const auto profile = module->profile(direction)) {
          row.time_ms = time_of(profile->rows, row.id);
          row.heuristic_ms = time_of(profile->rows, row.heuristic_id);
          if (!profile->energy_meter.empty()) {
            const ProfileRow* chosen = timed_row(profile->rows, row.id);
            row.energy_j = chosen != nullptr ? chosen->energy_j : nan;
            row.energy_meter = profile->energy_meter;
          }
        }
      }
      row.speedup = row.heuristic_ms / row.time_ms;
      out.rows.push_back(std::move(row));
    }
  }
  return out;
}

std::string Report::table() const {
  std::size_t module_width = 6, id_width = 6, heuristic_width = 9, policy_width = 6;
  for (const ReportRow& row : rows) {
    module_width = std::max(module_width, row.module.size() + row.type.size() + 3);
    id_width = std::max(id_width, row.id.size());
    heuristic_width = std::max(heuristic_width, row.heuristic_id.size());
    policy_width = std::max(policy_width, row.policy.size());
  }
  // The energy column where some row's energy was measured (Note [energy policies]).
  const bool energy = std::any_of(rows.begin(), rows.end(),
                                  [](const ReportRow& row) { return !std::isnan(row.energy_j); });
  std::ostringstream text;
  char line[1024];
  const auto w = [](std::size_t width) { return static_cast<int>(width); };
  std::snprintf(line, sizeof line, "%-*s %-6s %-11s %-*s %-*s %10s %12s %-*s %10s %8s%s\n",
                w(module_width), "module", "op", "direction", w(policy_width), "policy",
                w(id_width), "chosen", "time_ms", "workspace_B", w(heuristic_width), "heuristic",
                "heur_ms", "speedup", energy ? "    mJ/call" : "");
  text << line;
  for (const ReportRow& row : rows) {
    const std::string module =
        (row.module.empty() ? std::string("(model)") : row.module) + " (" + row.type + ")";
    const std::string speedup =
        std::isnan(row.speedup) ? "-" : detail::cat(std::round(row.speedup * 100) / 100, "x");
    char millijoules[32] = "";
    if (energy) std::snprintf(millijoules, sizeof millijoules, " %10s", "-");
    if (energy && !std::isnan(row.energy_j))
      std::snprintf(millijoules, sizeof millijoules, " %10.4f", row.energy_j * 1e3);
    std::snprintf(line, sizeof line, "%-*s %-6s %-11s %-*s %-*s %10s %12zu %-*s %10s %8s%s\n",
                  w(module_width), module.c_str(), row.op.c_str(),
                  std::string(to_string(row.direction)).c_str(), w(policy_width),
                  row.policy.c_str(), w(id_width), row.id.c_str(), format_ms(row.time_ms).c_str(),
                  row.workspace_bytes, w(heuristic_width), row.heuristic_id.c_str(),
                  format_ms(row.heuristic_ms).c_str(), speedup.c_str(), millijoules);
    text << line;
  }
  // What was read where energy was asked for, or why nothing was.
  std::vector<std::string> meters;
  for (const ReportRow& row : rows) {
    if (!row.energy_meter.empty() &&
        std::find(meters.begin(), meters.end(), row.energy_meter) == meters.end())
      meters.push_back(row.energy_meter);
  }
  for (const std::string& meter : meters) text << "energy: " << meter << '\n';
  return text.str();
}

void to_layout(Module& model, Layout layout) {
  for (auto& [name, module] : model.named_modules()) module->to_layout(layout);
}

void convert(Module& model, const Context& context,
             const std::function<bool(const std::string& name, const Module& module)>& exclude) {
  for (auto& [name, module] : model.named_modules()) {
    if (exclude && exclude(name, *module)) continue;
    module->to(context);
  }
}

}  // namespace dnnx::nn
