// Text and JSON renderings of candidate lists and profile tables.

#include <dnnx/algo.hpp>

#include "core/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace dnnx {
namespace {

std::string ms_text(double ms) {
  if (std::isnan(ms)) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(ms < 1.0 ? 4 : 3) << ms;
  return out.str();
}

// A measurement with `decimals` decimals; "-" when not measured.
std::string number_text(double value, int decimals) {
  if (std::isnan(value)) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << value;
  return out.str();
}

std::string status_text(const ProfileRow& row) {
  std::string text(to_string(row.status));
  if (!row.detail.empty()) text += ": " + row.detail;
  return text;
}

// Pads every column to its widest cell; the last column is left unpadded.
std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i + 1 < row.size()) {
        out << std::left << std::setw(static_cast<int>(widths[i]) + 2) << row[i];
      } else {
        out << row[i];
      }
    }
    out << '\n';
  }
  return out.str();
}

nlohmann::json algo_json(const AlgoInfo& algo) {
  return {{"id", algo.id},
          {"name", algo.name},
          {"supported", algo.supported},
          {"reason", algo.reason},
          {"workspace_bytes", algo.workspace_bytes},
          {"deterministic", algo.deterministic},
          {"notes", algo.notes},
          {"families", algo.families},
          {"priority", algo.priority},
          {"variant_of", algo.variant_of}};
}

nlohmann::json number_or_null(double value) {
  return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
}

}  // namespace

std::string format_algo_table(const std::vector<AlgoInfo>& algos) {
  // The reason an algorithm is unsupported can be long: it goes last, so the columns stay narrow.
  // The seed column (AlgoInfo::variant_of) is shown only when some candidate is a variant.
  const bool variants = std::any_of(algos.begin(), algos.end(),
                                    [](const AlgoInfo& algo) { return !algo.variant_of.empty(); });
  std::vector<std::vector<std::string>> rows{
      {"#", "id", "status", "workspace", "deterministic", "notes", "families", "reason"}};
  if (variants) rows.front().insert(rows.front().end() - 1, "variant of");
  for (const AlgoInfo& algo : algos) {
    rows.push_back({std::to_string(algo.priority), algo.id,
                    algo.supported ? "supported" : "unsupported",
                    detail::format_bytes(static_cast<double>(algo.workspace_bytes)),
                    algo.deterministic ? "yes" : "no", detail::join(algo.notes, ","),
                    detail::join(algo.families, ","), algo.supported ? "" : algo.reason});
    if (variants) rows.back().insert(rows.back().end() - 1, algo.variant_of);
  }
  return render(rows);
}

std::string ProfileResult::table() const {
  std::ostringstream out;
  out << op << ' ' << to_string(direction) << " profile [" << backend << "] " << desc << '\n';
  // The energy columns only where some candidate's energy was measured.
  const bool energy = std::any_of(rows.begin(), rows.end(),
                                  [](const ProfileRow& row) { return !std::isnan(row.energy_j); });
  std::vector<std::vector<std::string>> cells{
      {"id", "median ms", "min ms", "runs", "workspace", "det", "status"}};
  if (energy) cells.front().insert(cells.front().begin() + 4, {"mJ/call", "+-", "W", "MHz"});
  for (const ProfileRow& row : rows) {
    cells.push_back({row.algo.id, ms_text(row.median_ms), ms_text(row.min_ms),
                    std::to_string(row.runs),
                    detail::format_bytes(static_cast<double>(row.algo.workspace_bytes)),
                    row.algo.deterministic ? "yes" : "no", status_text(row)});
    if (energy) {
      cells.back().insert(
          cells.back().begin() + 4,
          {number_text(row.energy_j * 1e3, 4), number_text(row.energy_spread_j * 1e3, 4),
           number_text(row.power_w, 1), number_text(row.clock_mhz, 0)});
    }
  }
  out << render(cells);
  // The chosen row is the fastest unless an automatic policy may not pick that one (Note [unsafe
  // candidates]) or a lighter one ties with it (Note [host cost ties]).
  const bool fastest_chosen = !chosen.empty() && !rows.empty() && rows.front().algo.id == chosen;
  const bool any_ran = !rows.empty() && rows.front().status == CandidateStatus::ok;
  if (chosen.empty() || fastest_chosen)
    out << "fastest: "
        << (!chosen.empty() ? chosen
            : any_ran       ? std::string("(none an automatic policy may pick)")
                            : std::string("(none ran)"));
  else
    out << "chosen: " << chosen << " (the fastest, " << rows.front().algo.id << ", is "
        << (rows.front().algo.overflow_risk ? "overflow_risk"
                                            : "noted host_heavy and within host_tie")
        << ")";
  out << "  (profile took " << ms_text(wall_ms) << " ms: list " << ms_text(search.list_ms)
      << ", build " << ms_text(search.build_ms) << ", time " << ms_text(search.time_ms) << ")\n";
  if (search.plans_skipped > 0) {
    out << "plans skipped over the compile budget: " << search.plans_skipped
        << " (their rows say why)\n";
  }
  if (!energy_meter.empty()) out << "energy: " << energy_meter << '\n';
  out << "repro: " << repro << '\n';
  return out.str();
}

std::string ProfileResult::json() const {
  nlohmann::json doc;
  doc["op"] = op;
  doc["direction"] = std::string(to_string(direction));
  doc["desc"] = desc;
  doc["repro"] = repro;
  doc["backend"] = backend;
  doc["chosen"] = chosen;
  doc["wall_ms"] = wall_ms;
  doc["energy_meter"] =
      energy_meter.empty() ? nlohmann::json(nullptr) : nlohmann::json(energy_meter);
  doc["search"] = {{"list_ms", search.list_ms},
                   {"build_ms", search.build_ms},
                   {"time_ms", search.time_ms},
                   {"plans_skipped", search.plans_skipped}};
  doc["rows"] = nlohmann::json::array();
  for (const ProfileRow& row : rows) {
    doc["rows"].push_back({{"algo", algo_json(row.algo)},
                           {"status", std::string(to_string(row.status))},
                           {"detail", row.detail},
                           {"median_ms", number_or_null(row.median_ms)},
                           {"min_ms", number_or_null(row.min_ms)},
                           {"runs", row.runs},
                           {"energy_j", number_or_null(row.energy_j)},
                           {"energy_spread_j", number_or_null(row.energy_spread_j)},
                           {"power_w", number_or_null(row.power_w)},
                           {"clock_mhz", number_or_null(row.clock_mhz)}});
  }
  return doc.dump(2);
}

}  // namespace dnnx
