// `dnnx plot PROFILE.json --out FILE.svg` and `dnnx report TUNE.json --out FILE.html`: the pictures
// of `profile --plot` and `tune --report` (pictures.hpp) drawn again from the JSON those commands
// printed with --json, on any machine, later (a GPU's profiles looked at elsewhere).

#include "commands.hpp"
#include "pictures.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::cli {
namespace {

// The largest JSON document read: a profile of every cuDNN candidate of three directions is
// about a megabyte; a tuned model's results a few.
constexpr std::uintmax_t max_document_bytes = std::uintmax_t{64} << 20;

// The JSON document in `path`, whose contents `what` describes (for the messages).
nlohmann::json read_document(const std::string& path, const std::string& what) {
  const std::string flag = "'" + path + "': ";
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status))
    throw UsageError(flag + "no such file; expected " + what);
  if (!std::filesystem::is_regular_file(status))
    throw UsageError(flag + "is not a regular file; expected " + what);
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > max_document_bytes)
    throw UsageError(flag + "the file has " + std::to_string(size) + " bytes, over 64 MiB");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(flag + "cannot be opened for reading");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) throw UsageError(flag + "reading the file failed");
  nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) throw UsageError(flag + "not JSON; expected " + what);
  return document;
}

int run_plot(const std::string& in, const std::string& out) {
  const std::string what = "the JSON of `dnnx profile ... --json`";
  nlohmann::json document = read_document(in, what);
  if (document.is_object()) document = nlohmann::json::array({document});
  if (!document.is_array() || document.empty())
    throw UsageError("'" + in + "': not a profile; expected " + what);
  std::vector<nlohmann::json> profiles;
  for (const nlohmann::json& profile : document) {
    if (!profile.is_object() || !profile.contains("rows") || !profile["rows"].is_array() ||
        !profile.contains("direction"))
      throw UsageError("'" + in + "': not a profile; expected " + what);
    for (const nlohmann::json& row : profile["rows"]) {
      if (!row.is_object() || !row.contains("algo") || !row["algo"].is_object())
        throw UsageError("'" + in + "': a row is not a profile row; expected " + what);
    }
    profiles.push_back(profile);
  }
  OutputFile svg("--out", out);
  return svg.write(profile_svg(profiles)) ? 0 : failure_exit_code;
}

int run_report(const std::string& in, const std::string& out) {
  const std::string what = "the JSON of `dnnx tune ... --json`";
  const nlohmann::json document = read_document(in, what);
  if (!document.is_object() || !document.contains("results") || !document["results"].is_array())
    throw UsageError("'" + in + "': not the results of a tune; expected " + what);
  for (const nlohmann::json& step : document["results"]) {
    if (!step.is_object() || !step.contains("layer") || !step.contains("direction"))
      throw UsageError("'" + in + "': a result is not a tuned layer-direction; expected " + what);
  }
  OutputFile html("--out", out);
  return html.write(tune_report_html(document)) ? 0 : failure_exit_code;
}

}  // namespace

void add_pictures_commands(CLI::App& app, Action& action) {
  struct Files {
    std::string in;
    std::string out;
  };
  auto plot_files = std::make_shared<Files>();
  CLI::App* plot = app.add_subcommand(
      "plot", "draw saved profiles (`dnnx profile ... --json`) as `profile --plot` does, in SVG");
  plot->add_option("PROFILE.json", plot_files->in, "what `dnnx profile ... --json` printed")
      ->required();
  plot->add_option("--out", plot_files->out, "the SVG file to write")
      ->type_name("FILE.svg")
      ->required();
  plot->callback([&action, plot_files] {
    action = [plot_files] { return run_plot(plot_files->in, plot_files->out); };
  });
  auto report_files = std::make_shared<Files>();
  CLI::App* report = app.add_subcommand(
      "report",
      "write a tuned model's page (`dnnx tune ... --json`) as `tune --report` does, in HTML");
  report->add_option("TUNE.json", report_files->in, "what `dnnx tune ... --json FILE` wrote")
      ->required();
  report->add_option("--out", report_files->out, "the HTML file to write")
      ->type_name("FILE.html")
      ->required();
  report->callback([&action, report_files] {
    action = [report_files] { return run_report(report_files->in, report_files->out); };
  });
}

}  // namespace dnnx::cli
