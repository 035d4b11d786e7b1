#pragma once
// Note [shapes file lines]
// The line structure of a shapes file (bench/shapes/*.txt), read by the benchmarks
// (bench_common.hpp, cudnn_conv_bench.cpp), the conv case table (tests/ops/conv_cases.cpp) and
// `dnnx tune --model` (tools/dnnx/models.cpp): one layer per line, `name src weights stride pad
// count [tags...]`, fields separated by white space, '#' starting a comment that runs to the end of
// the line; lines without fields are skipped. It lives next to the files it reads and uses the
// standard library only, so that the command-line tool, which sees the public API only, can include
// it as well as the benchmarks and tests. Each reader then turns the fields into its own type (the
// tool's layers keep per-dim stride lists, the benchmarks' shapes are 2-D) and reports bad values
// through its own error type (UsageError in the tool, std::runtime_error elsewhere).

#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::shapes {

/// One line of a shapes file that holds fields.
struct Line {
  int number = 0;                   ///< 1-based, counting every line of the file
  std::string text;                 ///< the line without its comment
  std::vector<std::string> fields;  ///< white-space separated; never empty
};

/// The lines of `text` that hold fields, in order (Note [shapes file lines]).
inline std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string field; words >> field;) fields.push_back(std::move(field));
    if (fields.empty()) continue;
    lines.push_back({number, std::move(line), std::move(fields)});
  }
  return lines;
}

/// split_lines of the file at `path`, or nullopt when it cannot be opened.
inline std::optional<std::vector<Line>> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return split_lines(text);
}

}  // namespace dnnx::shapes
