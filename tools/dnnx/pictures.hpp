#pragma once
// Pictures of the tool's results, drawn from the JSON documents the commands print with --json
// (so a picture shows what the JSON holds, and nothing else): `dnnx profile ... --plot FILE.svg`
// draws every timed candidate of each direction, time against workspace, with the Pareto front,
// the chosen and the heuristic candidate, and the candidates that did not run with their reasons;
// `dnnx tune ... --report FILE.html` is one self-contained page of a tuned model (no network
// access needed to view it), its tables sortable.

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cli {

/// `text` with &, <, >, " and ' escaped, for XML and HTML text and attribute values.
std::string markup_escape(std::string_view text);

/// A standalone SVG document with one panel per profile. Each profile is a ProfileResult::json()
/// document with "heuristic" added: {"id": the heuristic policy's pick or null, "error": why it
/// has none or null}.
std::string profile_svg(const std::vector<nlohmann::json>& profiles);

/// A self-contained HTML page of `dnnx tune --json`'s document: per layer and direction the
/// chosen candidate, its time against the heuristic's as bars, workspace, the search; totals; the
/// machine, the libraries and the options. Every table sorts by a click on a column header, or on
/// load by the address's `#sort=<column>` (`#sort=<column>-desc` descending).
std::string tune_report_html(const nlohmann::json& report);

/// A file the command writes when it is done (--json, --plot, --report), opened before any work so
/// that a path that cannot be written fails at once (UsageError naming `flag`). write() reports a
/// failed write on stderr ("<flag> '<path>': writing the results failed ...") and returns false.
class OutputFile {
 public:
  OutputFile() = default;
  OutputFile(std::string flag, std::string path);
  bool wanted() const { return !path_.empty(); }
  bool write(const std::string& text);
  /// Replaces what the file holds by `text` where it is a regular file (so not a device, a pipe
  /// or a terminal, where a second document would follow the first), silently: for the partial
  /// documents a long command keeps up to date, whose last write() reports failures. The text
  /// goes to `<path>.partial` first, renamed over the file, so the file is never half written.
  void replace(const std::string& text);

 private:
  std::string flag_;
  std::string path_;
  std::ofstream out_;
  bool replaced_ = false;  // replace() renamed another file over path_: write() opens it again
};

}  // namespace dnnx::cli
