// `dnnx profile ... --plot FILE.svg`: every candidate that ran as a point, median time (x, log
// scale) against workspace (y: log scale, zero on a band of its own), the Pareto front of the
// timed ones (no other candidate both faster and lighter), the chosen and the heuristic candidate
// marked, and beside the plot the candidates that did not run, grouped by reason.

#include "args.hpp"
#include "output.hpp"
#include "pictures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

namespace dnnx::cli {

std::string markup_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

OutputFile::OutputFile(std::string flag, std::string path)
    : flag_(std::move(flag)), path_(std::move(path)) {
  if (path_.empty()) throw UsageError(flag_ + " needs a file name");
  out_.open(path_);
  if (!out_) throw UsageError(flag_ + " '" + path_ + "': cannot open for writing");
}

void OutputFile::replace(const std::string& text) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path_, error)) return;
  // Written beside it and renamed over it, so that a reader (or a process killed meanwhile)
  // never finds the file half written.
  const std::string partial = path_ + ".partial";
  {
    std::ofstream out(partial, std::ios::out | std::ios::trunc);
    out << text << std::flush;
    if (!out) {
      std::filesystem::remove(partial, error);
      return;
    }
  }
  std::filesystem::rename(partial, path_, error);
  if (error) {
    std::filesystem::remove(partial, error);
    return;
  }
  replaced_ = true;
}

bool OutputFile::write(const std::string& text) {
  if (replaced_) {
    out_.close();
    out_.open(path_, std::ios::out | std::ios::trunc);
  }
  out_ << text << std::flush;
  if (out_) return true;
  std::cerr << "dnnx: " << flag_ << " '" << path_
            << "': writing the results failed (disk full or file system error)\n";
  return false;
}

namespace {

// The geometry of a panel: the plot on the left, the list of candidates that did not run on the
// right, both under the panel's title lines.
constexpr double svg_width = 1200;
constexpr double svg_plot_left = 90;  // room for the workspace labels
constexpr double svg_plot_width = 620;
constexpr double svg_plot_height = 380;
constexpr double svg_list_left = 780;
constexpr double svg_line = 15;  // text line height
constexpr std::size_t svg_title_chars = 150;
constexpr std::size_t svg_list_chars = 56;
constexpr double svg_zero_band = 34;        // the band of zero workspace at the plot's bottom
constexpr std::size_t svg_max_labels = 12;  // point labels besides the chosen and the heuristic
constexpr double svg_energy_height = 260;   // the time-energy plot, where energy was measured

std::string svg_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// A measurement in full, for a data- attribute.
std::string svg_exact(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.12g", value);
  return buffer;
}

// A time for a tick label: 3 significant digits, no trailing zeros.
std::string svg_ms_label(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", ms);
  return buffer;
}

// `text` cut into lines of at most `width` characters, at spaces or commas where it can.
std::vector<std::string> svg_wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    if (text.size() - at <= width) {
      lines.push_back(text.substr(at));
      break;
    }
    std::size_t cut = text.find_last_of(" ,", at + width);
    if (cut == std::string::npos || cut <= at) cut = at + width - 1;
    lines.push_back(text.substr(at, cut - at + 1));
    at = cut + 1;
    while (at < text.size() && text[at] == ' ') ++at;
  }
  while (!lines.empty() && !lines.back().empty() && lines.back().back() == ' ')
    lines.back().pop_back();
  return lines;
}

struct SvgPoint {
  std::string id;
  double ms = 0;
  double min_ms = 0;
  int runs = 0;
  std::size_t workspace = 0;
  std::string status;  // "ok" or "abandoned"
  std::string detail;
  bool front = false;
  double energy_j = std::numeric_limits<double>::quiet_NaN();  // per call, when measured
  bool energy_front = false;                                   // on the time-energy front
};

// `object`'s member `key`, or null when it has none.
const nlohmann::json& svg_field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json none;
  if (!object.is_object()) return none;
  const auto found = object.find(key);
  return found == object.end() ? none : *found;
}

double svg_json_number(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// A log scale over [lo, hi] (both > 0) onto [from, to], with a margin either side.
struct SvgLogScale {
  double lo = 0, hi = 1, from = 0, to = 1;
  SvgLogScale(double low, double high, double a, double b, double base) : from(a), to(b) {
    if (!(low < high)) {
      low /= 2;
      high *= 2;
    }
    const double l = std::log(low) / std::log(base), h = std::log(high) / std::log(base);
    const double margin = std::max(0.06 * (h - l), 0.05);
    lo = l - margin;
    hi = h + margin;
    base_ = base;
  }
  double operator()(double value) const {
    return from + (std::log(value) / std::log(base_) - lo) / (hi - lo) * (to - from);
  }
  double base_ = 10;
};

class SvgPanel {
 public:
  SvgPanel(const nlohmann::json& profile, double top) : profile_(profile), top_(top) {
    read_rows();
    lay_out();
  }
  double height() const { return height_; }
  std::string render() const;

 private:
  void read_rows();
  void lay_out();
  void axes(std::ostringstream& out, const SvgLogScale& x) const;
  void x_axis(std::ostringstream& out, const SvgLogScale& x, double top, double bottom) const;
  void energy_plot(std::ostringstream& out, const SvgLogScale& x) const;
  void marks(std::ostringstream& out, const SvgPoint& point, double px, double py) const;
  void staircase(std::ostringstream& out, const char* cls, bool SvgPoint::*on_front,
                 const SvgLogScale& x, const std::function<double(const SvgPoint&)>& y) const;
  double y_of(std::size_t workspace) const {
    if (workspace == 0 || !y_scale_) return plot_bottom_ - svg_zero_band / 2;
    return (*y_scale_)(static_cast<double>(workspace));
  }

  const nlohmann::json& profile_;
  double top_;
  std::vector<SvgPoint> points_;
  // The rows that did not run: "status: detail" -> ids.
  std::vector<std::pair<std::string, std::vector<std::string>>> not_run_;
  std::vector<std::string> title_lines_;
  std::vector<std::string> list_lines_;
  std::string chosen_;
  std::string heuristic_;
  std::string heuristic_note_;
  double plot_top_ = 0, plot_bottom_ = 0, height_ = 0;
  bool energy_ = false;  // some row's energy was measured: the time-energy plot below
  double energy_top_ = 0, energy_bottom_ = 0;
  bool zero_band_ = false;
  std::optional<SvgLogScale> y_scale_;
};

void SvgPanel::read_rows() {
  chosen_ = profile_.value("chosen", std::string());
  const nlohmann::json& heuristic = svg_field(profile_, "heuristic");
  if (svg_field(heuristic, "id").is_string()) heuristic_ = svg_field(heuristic, "id");
  if (svg_field(heuristic, "error").is_string()) {
    heuristic_note_ =
        "the heuristic policy picks none here: " + svg_field(heuristic, "error").get<std::string>();
  }
  std::map<std::string, std::size_t> group_of;
  static const nlohmann::json no_rows = nlohmann::json::array();
  const nlohmann::json& rows = svg_field(profile_, "rows");
  for (const nlohmann::json& row : rows.is_array() ? rows : no_rows) {
    SvgPoint point;
    const nlohmann::json& algo = svg_field(row, "algo");
    point.id = algo.value("id", std::string());
    point.workspace = algo.value("workspace_bytes", std::size_t{0});
    point.status = row.value("status", std::string());
    point.detail = row.value("detail", std::string());
    point.ms = svg_json_number(svg_field(row, "median_ms"));
    point.min_ms = svg_json_number(svg_field(row, "min_ms"));
    point.runs = row.value("runs", 0);
    point.energy_j = svg_json_number(svg_field(row, "energy_j"));
    const bool timed = point.runs > 0 && std::isfinite(point.ms) && point.ms > 0;
    if (timed && (point.status == "ok" || point.status == "abandoned")) {
      points_.push_back(std::move(point));
      continue;
    }
    if (point.id == heuristic_ && heuristic_note_.empty())
      heuristic_note_ =
          "the heuristic's pick " + heuristic_ + " did not run (" + point.status + ")";
    const std::string reason =
        point.status + (point.detail.empty() ? std::string() : ": " + point.detail);
    const auto [at, added] = group_of.emplace(reason, not_run_.size());
    if (added) not_run_.emplace_back(reason, std::vector<std::string>{});
    not_run_[at->second].second.push_back(point.id);
  }
  // The Pareto front of the timed candidates: fastest first, each lighter than every faster one.
  std::vector<SvgPoint*> timed;
  for (SvgPoint& point : points_) {
    if (point.status == "ok") timed.push_back(&point);
  }
  std::sort(timed.begin(), timed.end(), [](const SvgPoint* a, const SvgPoint* b) {
    return a->ms != b->ms ? a->ms < b->ms : a->workspace < b->workspace;
  });
  std::size_t lightest = std::numeric_limits<std::size_t>::max();
  double least = std::numeric_limits<double>::infinity();
  for (SvgPoint* point : timed) {
    if (point->workspace < lightest) {
      point->front = true;
      lightest = point->workspace;
    }
    // The same over energy, among those measured.
    if (std::isfinite(point->energy_j)) {
      energy_ = true;
      if (point->energy_j < least) {
        point->energy_front = true;
        least = point->energy_j;
      }
    }
  }
}

void SvgPanel::lay_out() {
  std::string title = profile_.value("op", std::string()) + " " +
                      profile_.value("direction", std::string()) + " profile [" +
                      profile_.value("backend", std::string()) + "] " +
                      profile_.value("desc", std::string());
  title_lines_ = svg_wrap(title, svg_title_chars);
  std::size_t ok = 0, abandoned = 0, not_run = 0;
  for (const SvgPoint& point : points_) (point.status == "ok" ? ok : abandoned) += 1;
  for (const auto& group : not_run_) not_run += group.second.size();
  std::ostringstream summary;
  summary << ok << " timed, " << abandoned << " abandoned after a run, " << not_run
          << " did not run; chosen: " << (chosen_.empty() ? "none" : chosen_)
          << "; heuristic: " << (heuristic_.empty() ? "none" : heuristic_) << "; profile took "
          << format_ms(profile_.value("wall_ms", 0.0)) << " ms";
  if (const nlohmann::json& meter = svg_field(profile_, "energy_meter"); meter.is_string())
    summary << "; energy: " << meter.get<std::string>();
  for (const std::string& line : svg_wrap(summary.str(), svg_title_chars))
    title_lines_.push_back(line);
  plot_top_ = top_ + 22 + svg_line * static_cast<double>(title_lines_.size()) + 16;
  plot_bottom_ = plot_top_ + svg_plot_height;
  energy_top_ = plot_bottom_ + 56;
  energy_bottom_ = energy_top_ + (energy_ ? svg_energy_height : 0.0);

  std::size_t lo = std::numeric_limits<std::size_t>::max(), hi = 0;
  for (const SvgPoint& point : points_) {
    if (point.workspace == 0) {
      zero_band_ = true;
      continue;
    }
    lo = std::min(lo, point.workspace);
    hi = std::max(hi, point.workspace);
  }
  if (hi > 0) {
    const double band_top = plot_bottom_ - (zero_band_ ? svg_zero_band : 0.0);
    y_scale_.emplace(static_cast<double>(lo), static_cast<double>(hi), band_top, plot_top_, 2.0);
  }

  if (!heuristic_note_.empty()) {
    for (const std::string& line : svg_wrap(heuristic_note_, svg_list_chars))
      list_lines_.push_back(line);
    list_lines_.emplace_back();
  }
  std::size_t total = 0;
  for (const auto& group : not_run_) total += group.second.size();
  list_lines_.push_back(total == 0 ? std::string("every candidate ran")
                                   : "did not run (" + std::to_string(total) + "):");
  for (const auto& [reason, ids] : not_run_) {
    for (const std::string& line : svg_wrap(reason, svg_list_chars))
      list_lines_.push_back("\x01" + line);  // \x01: a reason line, drawn bold
    for (const std::string& line : svg_wrap(join(ids, ", "), svg_list_chars - 2))
      list_lines_.push_back("  " + line);
  }
  const double list_bottom = plot_top_ + 110 + svg_line * static_cast<double>(list_lines_.size());
  height_ = std::max((energy_ ? energy_bottom_ : plot_bottom_) + 48, list_bottom + 10) - top_;
}

// The frame of a plot from `top` to `bottom` and its time axis: 1, 2 and 5 times the powers of
// ten within the scale.
void SvgPanel::x_axis(std::ostringstream& out, const SvgLogScale& x, double top,
                      double bottom) const {
  const double left = svg_plot_left, right = svg_plot_left + svg_plot_width;
  out << "<rect class=\"frame\" x=\"" << svg_number(left) << "\" y=\"" << svg_number(top)
      << "\" width=\"" << svg_number(svg_plot_width) << "\" height=\"" << svg_number(bottom - top)
      << "\"/>\n";
  out << "<g class=\"x-axis\">\n";
  for (int k = static_cast<int>(std::floor(x.lo)) - 1; k <= static_cast<int>(std::ceil(x.hi));
       ++k) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double value = m * std::pow(10.0, k);
      const double at = x(value);
      if (at < left - 0.5 || at > right + 0.5) continue;
      out << "<line class=\"grid\" x1=\"" << svg_number(at) << "\" y1=\"" << svg_number(top)
          << "\" x2=\"" << svg_number(at) << "\" y2=\"" << svg_number(bottom) << "\"/>"
          << "<text class=\"tick\" x=\"" << svg_number(at) << "\" y=\"" << svg_number(bottom + 15)
          << "\" text-anchor=\"middle\">" << svg_ms_label(value) << "</text>\n";
    }
  }
  out << "<text class=\"axis-label\" x=\"" << svg_number(left + svg_plot_width / 2) << "\" y=\""
      << svg_number(bottom + 34)
      << "\" text-anchor=\"middle\">median time per call, ms (log scale)</text>\n</g>\n";
}

void SvgPanel::axes(std::ostringstream& out, const SvgLogScale& x) const {
  const double left = svg_plot_left, right = svg_plot_left + svg_plot_width;
  x_axis(out, x, plot_top_, plot_bottom_);
  // Workspace ticks: powers of two, spaced to at most about eight.
  out << "<g class=\"y-axis\">\n";
  if (y_scale_) {
    const SvgLogScale& y = *y_scale_;
    int step = 1;
    for (const int candidate : {1, 2, 5, 10}) {
      step = candidate;
      if ((y.hi - y.lo) / candidate <= 8) break;
    }
    for (int k = static_cast<int>(std::floor(y.lo)); k <= static_cast<int>(std::ceil(y.hi)); ++k) {
      if (k < 0 || k % step != 0 || k > 62) continue;
      const double at = y(std::ldexp(1.0, k));
      if (at > y.from + 0.5 || at < plot_top_ - 0.5) continue;
      out << "<line class=\"grid\" x1=\"" << svg_number(left) << "\" y1=\"" << svg_number(at)
          << "\" x2=\"" << svg_number(right) << "\" y2=\"" << svg_number(at) << "\"/>"
          << "<text class=\"tick\" x=\"" << svg_number(left - 6) << "\" y=\"" << svg_number(at + 4)
          << "\" text-anchor=\"end\">" << markup_escape(format_bytes(std::size_t{1} << k))
          << "</text>\n";
    }
  }
  if (zero_band_ || !y_scale_) {
    const double at = y_of(0);
    if (y_scale_) {
      out << "<line class=\"band\" x1=\"" << svg_number(left) << "\" y1=\""
          << svg_number(plot_bottom_ - svg_zero_band) << "\" x2=\"" << svg_number(right)
          << "\" y2=\"" << svg_number(plot_bottom_ - svg_zero_band) << "\"/>";
    }
    out << "<text class=\"tick\" x=\"" << svg_number(left - 6) << "\" y=\"" << svg_number(at + 4)
        << "\" text-anchor=\"end\">none</text>\n";
  }
  out << "<text class=\"axis-label\" transform=\"translate(" << svg_number(left - 70) << ","
      << svg_number(plot_top_ + svg_plot_height / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">workspace (log scale)</text>\n</g>\n";
}

// A Pareto front as a staircase: from each of its points (`on_front`) right to the next one's
// time, then down to that one's y, and on to the plot's right edge.
void SvgPanel::staircase(std::ostringstream& out, const char* cls, bool SvgPoint::*on_front,
                         const SvgLogScale& x,
                         const std::function<double(const SvgPoint&)>& y) const {
  std::vector<const SvgPoint*> front;
  for (const SvgPoint& point : points_) {
    if (point.*on_front) front.push_back(&point);
  }
  if (front.empty()) return;
  std::sort(front.begin(), front.end(),
            [](const SvgPoint* a, const SvgPoint* b) { return a->ms < b->ms; });
  out << "<path class=\"" << cls << "\" d=\"M" << svg_number(x(front[0]->ms)) << ","
      << svg_number(y(*front[0]));
  for (std::size_t i = 1; i < front.size(); ++i)
    out << " H" << svg_number(x(front[i]->ms)) << " V" << svg_number(y(*front[i]));
  out << " H" << svg_number(svg_plot_left + svg_plot_width) << "\"/>\n";
}

// The chosen candidate's ring and the heuristic's diamond around a point at (px, py).
void SvgPanel::marks(std::ostringstream& out, const SvgPoint& point, double px, double py) const {
  if (point.id == chosen_) {
    out << "<circle class=\"chosen-mark\" data-id=\"" << markup_escape(point.id) << "\" cx=\""
        << svg_number(px) << "\" cy=\"" << svg_number(py) << "\" r=\"9\"/>\n";
  }
  if (point.id == heuristic_) {
    out << "<path class=\"heuristic-mark\" data-id=\"" << markup_escape(point.id) << "\" d=\"M"
        << svg_number(px) << "," << svg_number(py - 12) << " L" << svg_number(px + 12) << ","
        << svg_number(py) << " L" << svg_number(px) << "," << svg_number(py + 12) << " L"
        << svg_number(px - 12) << "," << svg_number(py) << " Z\"/>\n";
  }
}

// Time against energy per call (linear, in millijoules) for the candidates whose energy was
// measured, with their own front: no other candidate both faster and leaner.
void SvgPanel::energy_plot(std::ostringstream& out, const SvgLogScale& x) const {
  double lo = 0, hi = 0;
  for (const SvgPoint& point : points_) {
    if (!std::isfinite(point.energy_j)) continue;
    lo = std::min(lo, point.energy_j * 1e3);
    hi = std::max(hi, point.energy_j * 1e3);
  }
  if (!(hi > lo)) hi = lo + 1;
  // Ticks at 1, 2 or 5 times a power of ten, about five of them.
  const double raw = (hi - lo) / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / power < 1.5 ? power : raw / power < 3.5 ? 2 * power : 5 * power;
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  const auto y = [&](double mj) {
    return energy_bottom_ - (mj - lo) / (hi - lo) * (energy_bottom_ - energy_top_);
  };
  out << "<g class=\"energy-plot\">\n";
  x_axis(out, x, energy_top_, energy_bottom_);
  for (double v = lo; v <= hi + step / 2; v += step) {
    out << "<line class=\"grid\" x1=\"" << svg_number(svg_plot_left) << "\" y1=\""
        << svg_number(y(v)) << "\" x2=\"" << svg_number(svg_plot_left + svg_plot_width)
        << "\" y2=\"" << svg_number(y(v)) << "\"/><text class=\"tick\" x=\""
        << svg_number(svg_plot_left - 6) << "\" y=\"" << svg_number(y(v) + 4)
        << "\" text-anchor=\"end\">" << svg_exact(std::abs(v) < step / 1e6 ? 0.0 : v)
        << "</text>\n";
  }
  out << "<text class=\"axis-label\" transform=\"translate(" << svg_number(svg_plot_left - 70)
      << "," << svg_number((energy_top_ + energy_bottom_) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">energy per call over idle, mJ</text>\n";
  staircase(out, "pareto energy", &SvgPoint::energy_front, x,
            [&](const SvgPoint& point) { return y(point.energy_j * 1e3); });
  for (const SvgPoint& point : points_) {
    if (!std::isfinite(point.energy_j)) continue;
    const double px = x(point.ms), py = y(point.energy_j * 1e3);
    out << "<circle class=\"energy-point" << (point.energy_front ? " front" : "") << "\" data-id=\""
        << markup_escape(point.id) << "\" data-energy-j=\"" << svg_exact(point.energy_j)
        << "\" cx=\"" << svg_number(px) << "\" cy=\"" << svg_number(py) << "\" r=\"4.5\"><title>"
        << markup_escape(point.id + "\n" + format_ms(point.ms) + " ms, " +
                         svg_ms_label(point.energy_j * 1e3) + " mJ per call")
        << "</title></circle>\n";
    marks(out, point, px, py);
  }
  out << "</g>\n";
}

std::string SvgPanel::render() const {
  std::ostringstream out;
  out << "<g class=\"panel\" data-op=\"" << markup_escape(profile_.value("op", std::string()))
      << "\" data-direction=\"" << markup_escape(profile_.value("direction", std::string()))
      << "\">\n";
  double line_y = top_ + 22;
  for (std::size_t i = 0; i < title_lines_.size(); ++i, line_y += svg_line) {
    out << "<text class=\"" << (i == 0 ? "title" : "subtitle") << "\" x=\"10\" y=\""
        << svg_number(line_y) << "\">" << markup_escape(title_lines_[i]) << "</text>\n";
  }
  if (points_.empty()) {
    out << "<text class=\"empty\" x=\"" << svg_number(svg_plot_left) << "\" y=\""
        << svg_number(plot_top_ + 40) << "\">no candidate ran: nothing to plot</text>\n";
  } else {
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const SvgPoint& point : points_) {
      lo = std::min(lo, point.ms);
      hi = std::max(hi, point.ms);
    }
    const SvgLogScale x(lo, hi, svg_plot_left, svg_plot_left + svg_plot_width, 10.0);
    axes(out, x);
    staircase(out, "pareto", &SvgPoint::front, x,
              [&](const SvgPoint& point) { return y_of(point.workspace); });
    std::size_t labels = 0;
    for (const SvgPoint& point : points_) {
      const double px = x(point.ms), py = y_of(point.workspace);
      const std::string cls = point.status == "ok" ? (point.front ? "candidate front" : "candidate")
                                                   : "candidate abandoned";
      out << "<circle class=\"" << cls << "\" data-id=\"" << markup_escape(point.id)
          << "\" data-ms=\"" << svg_exact(point.ms) << "\" data-workspace=\"" << point.workspace
          << "\" cx=\"" << svg_number(px) << "\" cy=\"" << svg_number(py) << "\" r=\"4.5\"><title>"
          << markup_escape(point.id + "\nmedian " + format_ms(point.ms) + " ms, min " +
                           format_ms(point.min_ms) + " ms, " + std::to_string(point.runs) +
                           (point.runs == 1 ? " run" : " runs") + "\nworkspace " +
                           format_bytes(point.workspace) + "\n" + point.status +
                           (point.detail.empty() ? "" : ": " + point.detail))
          << "</title></circle>\n";
      const bool marked = point.id == chosen_ || point.id == heuristic_;
      marks(out, point, px, py);
      if (marked || (point.front && labels < svg_max_labels)) {
        if (!marked) ++labels;
        std::string label = point.id;
        if (point.id == chosen_)
          label += point.id == heuristic_ ? " (chosen, heuristic)" : " (chosen)";
        else if (point.id == heuristic_)
          label += " (heuristic)";
        // Right of the point, or left of it in the plot's right part (the list is beside it).
        const bool left = px > svg_plot_left + 0.55 * svg_plot_width;
        out << "<text class=\"point-label" << (marked ? " marked" : "") << "\" x=\""
            << svg_number(left ? px - 11 : px + 11) << "\" y=\"" << svg_number(py - 7)
            << "\" text-anchor=\"" << (left ? "end" : "start") << "\">" << markup_escape(label)
            << "</text>\n";
      }
    }
    if (energy_) energy_plot(out, x);
  }
  // The legend and the candidates that did not run.
  double y = plot_top_ + 4;
  const auto legend = [&](const std::string& shape, const std::string& text) {
    out << shape << "<text class=\"legend\" x=\"" << svg_number(svg_list_left + 22) << "\" y=\""
        << svg_number(y + 4) << "\">" << markup_escape(text) << "</text>\n";
    y += 18;
  };
  const double lx = svg_list_left + 8;
  legend("<circle class=\"candidate front\" cx=\"" + svg_number(lx) + "\" cy=\"" + svg_number(y) +
             "\" r=\"4.5\"/>",
         "timed, on the Pareto front (none faster and lighter)");
  legend("<circle class=\"candidate\" cx=\"" + svg_number(lx) + "\" cy=\"" + svg_number(y) +
             "\" r=\"4.5\"/>",
         "timed");
  legend("<circle class=\"candidate abandoned\" cx=\"" + svg_number(lx) + "\" cy=\"" +
             svg_number(y) + "\" r=\"4.5\"/>",
         "abandoned: too slow to win after its first run(s)");
  legend("<circle class=\"chosen-mark\" cx=\"" + svg_number(lx) + "\" cy=\"" + svg_number(y) +
             "\" r=\"8\"/>",
         "chosen (what exhaustive selection picks)");
  legend("<path class=\"heuristic-mark\" d=\"M" + svg_number(lx) + "," + svg_number(y - 8) + " L" +
             svg_number(lx + 8) + "," + svg_number(y) + " L" + svg_number(lx) + "," +
             svg_number(y + 8) + " L" + svg_number(lx - 8) + "," + svg_number(y) + " Z\"/>",
         "heuristic (the backend's own first choice)");
  y += 8;
  out << "<g class=\"not-run\">\n";
  for (const std::string& line : list_lines_) {
    const bool reason = !line.empty() && line[0] == '\x01';
    out << "<text class=\"" << (reason ? "reason" : "list") << "\" x=\""
        << svg_number(svg_list_left) << "\" y=\"" << svg_number(y) << "\" xml:space=\"preserve\">"
        << markup_escape(reason ? line.substr(1) : line) << "</text>\n";
    y += svg_line;
  }
  out << "</g>\n</g>\n";
  return out.str();
}

}  // namespace

std::string profile_svg(const std::vector<nlohmann::json>& profiles) {
  std::vector<SvgPanel> panels;
  double top = 0;
  for (const nlohmann::json& profile : profiles) {
    panels.emplace_back(profile, top);
    top += panels.back().height() + 12;
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_number(svg_width)
      << "\" height=\"" << svg_number(std::max(top, 40.0)) << "\" viewBox=\"0 0 "
      << svg_number(svg_width) << " " << svg_number(std::max(top, 40.0)) << "\">\n"
      << "<style>\n"
      << "text { font-family: sans-serif; font-size: 12px; fill: #222; }\n"
      << ".title { font-size: 14px; font-weight: bold; }\n"
      << ".subtitle, .tick, .list { font-size: 11px; fill: #444; }\n"
      << ".reason { font-size: 11px; font-weight: bold; fill: #333; }\n"
      << ".axis-label { font-size: 12px; fill: #333; }\n"
      << ".frame { fill: #fcfcfc; stroke: #999; }\n"
      << ".grid { stroke: #e3e3e3; }\n"
      << ".band { stroke: #bbb; stroke-dasharray: 4 3; }\n"
      << ".pareto { fill: none; stroke: #d62728; stroke-width: 1.5; stroke-dasharray: 6 3; }\n"
      << ".energy-point { fill: #9467bd; fill-opacity: 0.75; stroke: #fff; stroke-width: 0.5; }\n"
      << ".energy-point.front { fill: #d62728; fill-opacity: 1; }\n"
      << ".candidate { fill: #1f77b4; fill-opacity: 0.75; stroke: #fff; stroke-width: 0.5; }\n"
      << ".candidate.front { fill: #d62728; fill-opacity: 1; }\n"
      << ".candidate.abandoned { fill: none; stroke: #888; stroke-width: 1.2; }\n"
      << ".chosen-mark { fill: none; stroke: #2ca02c; stroke-width: 2.5; }\n"
      << ".heuristic-mark { fill: none; stroke: #ff7f0e; stroke-width: 2; }\n"
      << ".point-label { font-size: 10px; fill: #555; }\n"
      << ".point-label.marked { font-weight: bold; fill: #222; }\n"
      << "</style>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  for (const SvgPanel& panel : panels) out << panel.render();
  out << "</svg>\n";
  return out.str();
}

}  // namespace dnnx::cli
