// `dnnx tune ... --report FILE.html`: one page, its style and script inline, drawn from the
// document `dnnx tune --json` writes. Per layer and direction a row: the chosen candidate, its
// time and the heuristic's as two bars on the row's own scale, the speedup, the workspace, the
// search; the totals per direction; the machine, the libraries and the selection options. The
// tables sort by a click on a column header (numbers as numbers, empty cells last), and on load by
// the address's "#sort=<column>" or "#sort=<column>-desc".

#include "output.hpp"
#include "pictures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace dnnx::cli {
namespace {

// The page's script. The first part, in <head>, records a script error on the root element
// (data-dnnx-error), where a test that renders the page in a browser looks for it; the second
// makes the tables sortable and marks the page rendered (data-dnnx-ready on <body>: the rows of
// the layer table).
constexpr const char* html_error_script = R"(window.addEventListener('error', function (event) {
  document.documentElement.setAttribute('data-dnnx-error', String(event.message));
});)";

constexpr const char* html_sort_script = R"((function () {
  'use strict';
  function key(cell, numeric) {
    var raw = cell.hasAttribute('data-sort') ? cell.getAttribute('data-sort') : cell.textContent;
    if (!numeric) return raw.trim().toLowerCase();
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }
  function sortTable(table, column, descending) {
    var header = table.tHead.rows[0].cells;
    var numeric = header[column].getAttribute('data-type') === 'number';
    var body = table.tBodies[0];
    var rows = Array.prototype.map.call(body.rows, function (row, index) {
      return {row: row, index: index, key: key(row.cells[column], numeric)};
    });
    rows.sort(function (a, b) {
      if (a.key === null || b.key === null) {
        if (a.key === b.key) return a.index - b.index;
        return a.key === null ? 1 : -1;  // empty cells last either way
      }
      var order = a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      return (descending ? -order : order) || a.index - b.index;
    });
    rows.forEach(function (entry) { body.appendChild(entry.row); });
    Array.prototype.forEach.call(header, function (cell, index) {
      if (index === column) cell.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
      else cell.removeAttribute('aria-sort');
    });
  }
  var tables = document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables, function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell, index) {
      cell.tabIndex = 0;
      var toggle = function () {
        sortTable(table, index, cell.getAttribute('aria-sort') === 'ascending');
      };
      cell.addEventListener('click', toggle);
      cell.addEventListener('keydown', function (event) {
        if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); toggle(); }
      });
    });
  });
  var wanted = /(?:^#|&)sort=([a-z_]+?)(-desc)?(?:&|$)/.exec(window.location.hash);
  var steps = document.getElementById('steps');
  if (wanted && steps) {
    Array.prototype.forEach.call(steps.tHead.rows[0].cells, function (cell, index) {
      if (cell.getAttribute('data-key') === wanted[1]) sortTable(steps, index, !!wanted[2]);
    });
  }
  document.body.setAttribute('data-dnnx-ready', String(steps ? steps.tBodies[0].rows.length : 0));
})();)";

constexpr const char* html_style = R"(body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; }
.generated { color: #666; font-size: 13px; margin-top: 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #e2e2e2; padding: 4px 8px; text-align: left; vertical-align: middle; }
th { background: #f3f3f3; position: sticky; top: 0; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: ' \2195'; color: #aaa; }
th[aria-sort='ascending']::after { content: ' \2191'; color: #222; }
th[aria-sort='descending']::after { content: ' \2193'; color: #222; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
td.id { font-family: monospace; font-size: 12px; }
table.facts th { position: static; width: 14em; }
.bars { width: 220px; }
.bar { height: 7px; margin: 2px 0; border-radius: 2px; min-width: 1px; }
.bar.chosen { background: #2ca02c; }
.bar.heuristic { background: #ff7f0e; }
.legend span { display: inline-block; width: 14px; height: 7px; margin: 0 4px 0 12px; }
.failed { color: #b00020; }
.note { color: #555; font-size: 13px; }
.summary { font-size: 15px; })";

std::string html_number(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// A number as the sort key of its cell ("" when unknown: sorted last).
std::string html_sort_key(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

double html_double(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::numeric_limits<double>::quiet_NaN();
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>()
                                                     : std::numeric_limits<double>::quiet_NaN();
}

// `object`'s member `key`, or null when it has none.
const nlohmann::json& html_member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json none;
  if (!object.is_object()) return none;
  const auto found = object.find(key);
  return found == object.end() ? none : *found;
}

std::string html_text(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return {};
  return found->is_string() ? found->get<std::string>() : found->dump();
}

struct HtmlColumn {
  const char* key;
  const char* title;
  bool numeric;
};

void html_head_row(std::ostringstream& out, const std::vector<HtmlColumn>& columns) {
  out << "<thead><tr>";
  for (const HtmlColumn& column : columns) {
    out << "<th scope=\"col\" data-key=\"" << column.key << "\" data-type=\""
        << (column.numeric ? "number" : "text") << "\">" << markup_escape(column.title) << "</th>";
  }
  out << "</tr></thead>\n";
}

void html_cell(std::ostringstream& out, const std::string& text, const char* cls = nullptr) {
  out << "<td" << (cls != nullptr ? std::string(" class=\"") + cls + "\"" : std::string()) << ">"
      << markup_escape(text) << "</td>";
}

void html_number_cell(std::ostringstream& out, double value, const std::string& text) {
  out << "<td class=\"number\" data-sort=\"" << html_sort_key(value) << "\">" << markup_escape(text)
      << "</td>";
}

// The chosen time and the heuristic's as two bars, the longer of the two filling the cell.
void html_bars(std::ostringstream& out, double chosen_ms, double heuristic_ms, double speedup) {
  const double scale = std::max(std::isfinite(chosen_ms) ? chosen_ms : 0.0,
                                std::isfinite(heuristic_ms) ? heuristic_ms : 0.0);
  out << "<td class=\"bars\" data-sort=\"" << html_sort_key(speedup) << "\">";
  const auto bar = [&](const char* cls, double ms, const char* who) {
    if (!std::isfinite(ms) || scale <= 0) return;
    out << "<div class=\"bar " << cls << "\" style=\"width:" << html_number(100.0 * ms / scale, 1)
        << "%\" title=\"" << who << " " << html_number(ms, 4) << " ms\"></div>";
  };
  bar("chosen", chosen_ms, "chosen");
  bar("heuristic", heuristic_ms, "heuristic");
  out << "</td>";
}

void html_fact(std::ostringstream& out, const std::string& name, const std::string& value) {
  out << "<tr><th scope=\"row\">" << markup_escape(name) << "</th><td>" << markup_escape(value)
      << "</td></tr>\n";
}

}  // namespace

std::string tune_report_html(const nlohmann::json& report) {
  std::ostringstream out;
  const std::string model = html_text(report, "model");
  const std::string title = "dnnx tune: " + model + ", batch " + html_text(report, "batch") + ", " +
                            html_text(report, "dtype") + " " + html_text(report, "layout") + " [" +
                            html_text(report, "backend") + "]";
  const std::string version = html_text(report, "dnnx_version");
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"generator\" content=\"dnnx " << markup_escape(version) << "\">\n"
      << "<title>" << markup_escape(title) << "</title>\n"
      << "<script>" << html_error_script << "</script>\n"
      << "<style>\n"
      << html_style << "\n</style>\n</head>\n<body>\n"
      << "<h1>" << markup_escape(title) << "</h1>\n"
      << "<p class=\"generated\">written by dnnx " << markup_escape(version)
      << " from the document of <code>dnnx tune --json</code>; tuning took "
      << html_number(html_double(report, "tuning_wall_s"), 1) << " s</p>\n";
  // A document written while the tune still ran (`"complete": false`) and never finished.
  if (const nlohmann::json& complete = html_member(report, "complete");
      complete.is_boolean() && !complete.get<bool>()) {
    out << "<p class=\"incomplete\">incomplete: the tune stopped before its last "
           "layer-direction; these are the ones it finished</p>\n";
  }
  // The whole model at a glance: the totals over every direction.
  if (const nlohmann::json& all = html_member(html_member(report, "totals"), "all");
      all.is_object()) {
    out << "<p class=\"summary\">" << markup_escape(html_text(all, "layers"))
        << " layer-directions, summed as time x count: the chosen candidates "
        << html_number(html_double(all, "chosen_ms"), 3) << " ms, the heuristic's picks "
        << html_number(html_double(all, "heuristic_ms"), 3) << " ms ("
        << html_number(html_double(all, "speedup"), 2) << "x faster chosen)</p>\n";
  }

  // The layers.
  const nlohmann::json& results = html_member(report, "results");
  out << "<h2 id=\"layers\">Layers and directions</h2>\n"
      << "<p class=\"note legend\">Times are per call. Bars: <span class=\"bar chosen\"></span>"
         "chosen <span class=\"bar heuristic\"></span>heuristic pick, the longer filling the "
         "cell. Click a column to sort; <code>#sort=chosen_ms</code> (or "
         "<code>#sort=speedup-desc</code>, any column's key) in the address sorts on load.</p>\n"
      << "<table id=\"steps\" class=\"sortable\">\n";
  // The energy policies' column, where some choice measured its energy.
  bool energy = false;
  if (results.is_array()) {
    for (const nlohmann::json& step : results)
      energy = energy || std::isfinite(html_double(html_member(step, "chosen"), "energy_j"));
  }
  std::vector<HtmlColumn> columns{{"layer", "layer", false},
                                  {"direction", "direction", false},
                                  {"count", "count", true},
                                  {"chosen", "chosen", false},
                                  {"chosen_ms", "chosen ms", true},
                                  {"heuristic", "heuristic", false},
                                  {"heuristic_ms", "heuristic ms", true},
                                  {"bars", "chosen vs heuristic", true},
                                  {"speedup", "speedup", true},
                                  {"workspace", "workspace", true},
                                  {"timed", "candidates timed", true},
                                  {"search_ms", "search ms", true},
                                  {"cache", "cache", false}};
  if (energy) columns.insert(columns.begin() + 5, {"energy", "chosen mJ/call", true});
  html_head_row(out, columns);
  out << "<tbody>\n";
  std::vector<std::pair<std::string, std::string>> failures;
  if (results.is_array()) {
    for (const nlohmann::json& step : results) {
      const std::string layer = html_text(step, "layer");
      const std::string direction = html_text(step, "direction");
      const std::string error = html_text(step, "error");
      out << "<tr data-layer=\"" << markup_escape(layer) << "\" data-direction=\""
          << markup_escape(direction) << "\">";
      html_cell(out, layer);
      html_cell(out, direction);
      html_number_cell(out, html_double(step, "count"), html_text(step, "count"));
      if (!error.empty()) {
        failures.emplace_back(layer + " " + direction, error);
        html_cell(out, "FAILED (see Failures)", "failed");
        for (int i = 0; i < (energy ? 9 : 8); ++i) html_number_cell(out, std::nan(""), "-");
        html_cell(out, "-");
        out << "</tr>\n";
        continue;
      }
      const nlohmann::json& chosen = html_member(step, "chosen");
      const nlohmann::json& heuristic = html_member(step, "heuristic");
      const double chosen_ms = html_double(chosen, "time_ms");
      const double heuristic_ms = html_double(heuristic, "time_ms");
      const double speedup = html_double(step, "speedup");
      const std::string heuristic_error = html_text(heuristic, "error");
      if (!heuristic_error.empty())
        failures.emplace_back(layer + " " + direction + " (heuristic pick)", heuristic_error);
      html_cell(out, html_text(chosen, "id"), "id");
      html_number_cell(out, chosen_ms, html_number(chosen_ms, 4));
      if (energy) {
        const double joules = html_double(chosen, "energy_j");
        html_number_cell(out, joules, html_number(joules * 1e3, 4));
      }
      html_cell(out, heuristic_error.empty() ? html_text(heuristic, "id") : "FAILED",
                heuristic_error.empty() ? "id" : "failed");
      html_number_cell(out, heuristic_ms, html_number(heuristic_ms, 4));
      html_bars(out, chosen_ms, heuristic_ms, speedup);
      html_number_cell(out, speedup, html_number(speedup, 2) + (std::isfinite(speedup) ? "x" : ""));
      const double workspace = html_double(chosen, "workspace_bytes");
      html_number_cell(out, workspace,
                       std::isfinite(workspace) ? format_bytes(static_cast<std::size_t>(workspace))
                                                : std::string("-"));
      html_number_cell(out, html_double(step, "candidates_timed"),
                       html_text(step, "candidates_timed"));
      const double search_ms = html_double(step, "tuning_ms");
      html_number_cell(out, search_ms, html_number(search_ms, 1));
      // Note [the tune's next step] (cmd_tune.cpp): a late plan that replaced the search's pick.
      const nlohmann::json& next_step = html_member(step, "next_step");
      const std::string settled_from = html_text(next_step, "settled_from");
      const std::string next_error = html_text(next_step, "error");
      if (!next_error.empty())
        failures.emplace_back(layer + " " + direction + " (next step)", next_error);
      html_cell(out, std::string(step.value("cache_hit", false) ? "hit" : "tuned") +
                         (settled_from.empty() ? "" : "; a late plan, after " + settled_from));
      out << "</tr>\n";
    }
  }
  out << "</tbody>\n</table>\n";

  // The totals.
  out << "<h2 id=\"totals\">Totals</h2>\n<p class=\"note\">Sums over the layers of time &times; "
         "count, where both times are known.</p>\n<table id=\"totals-table\" class=\"sortable\">\n";
  html_head_row(out, std::vector<HtmlColumn>{{"direction", "direction", false},
                                             {"layers", "layer-directions", true},
                                             {"chosen_ms", "chosen ms", true},
                                             {"heuristic_ms", "heuristic ms", true},
                                             {"bars", "chosen vs heuristic", true},
                                             {"speedup", "speedup", true}});
  out << "<tbody>\n";
  if (const nlohmann::json& totals = html_member(report, "totals"); totals.is_object()) {
    for (const auto& [name, total] : totals.items()) {
      const double chosen_ms = html_double(total, "chosen_ms");
      const double heuristic_ms = html_double(total, "heuristic_ms");
      const double speedup = html_double(total, "speedup");
      out << "<tr>";
      html_cell(out, name);
      html_number_cell(out, html_double(total, "layers"), html_text(total, "layers"));
      html_number_cell(out, chosen_ms, html_number(chosen_ms, 3));
      html_number_cell(out, heuristic_ms, html_number(heuristic_ms, 3));
      html_bars(out, chosen_ms, heuristic_ms, speedup);
      html_number_cell(out, speedup, html_number(speedup, 2) + (std::isfinite(speedup) ? "x" : ""));
      out << "</tr>\n";
    }
  }
  out << "</tbody>\n</table>\n";

  if (!failures.empty()) {
    out << "<h2 id=\"failures\">Failures</h2>\n<ul>\n";
    for (const auto& [what, error] : failures) {
      out << "<li class=\"failed\"><b>" << markup_escape(what) << "</b>: " << markup_escape(error)
          << "</li>\n";
    }
    out << "</ul>\n";
  }

  // The machine, the libraries and the options.
  out << "<h2 id=\"machine\">Machine and libraries</h2>\n<table class=\"facts\">\n";
  html_fact(out, "context", html_text(report, "context"));
  if (const nlohmann::json& environment = html_member(report, "environment");
      environment.is_object()) {
    for (const auto& [name, value] : environment.items())
      html_fact(out, name, value.is_string() ? value.get<std::string>() : value.dump());
  }
  html_fact(out, "dnnx", version);
  // The energy policies: the counter read, or why none was.
  std::vector<std::string> meters;
  if (results.is_array()) {
    for (const nlohmann::json& step : results) {
      const std::string meter = html_text(step, "energy_meter");
      if (!meter.empty() && std::find(meters.begin(), meters.end(), meter) == meters.end())
        meters.push_back(meter);
    }
  }
  for (const std::string& meter : meters) html_fact(out, "energy", meter);
  if (const nlohmann::json& cache = html_member(report, "cache"); cache.is_object()) {
    const std::string file = html_text(cache, "file");
    html_fact(out, "choice cache", html_text(cache, "mode") + (file.empty() ? "" : " " + file));
  }
  out << "</table>\n<h2 id=\"options\">Selection options</h2>\n<table class=\"facts\">\n";
  if (const nlohmann::json& options = html_member(report, "options"); options.is_object()) {
    for (const auto& [name, value] : options.items())
      html_fact(out, name,
                value.is_null()     ? "none"
                : value.is_string() ? value.get<std::string>()
                                    : value.dump());
  }
  out << "</table>\n<script>" << html_sort_script << "</script>\n</body>\n</html>\n";
  return out.str();
}

}  // namespace dnnx::cli
