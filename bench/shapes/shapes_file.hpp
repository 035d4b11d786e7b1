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
//
// Fields in detail: src is `C x spatial` (`CxHxW`, or `CxDxHxW` for a 3-D convolution, `CxW` for
// 1-D), weights `O x C/groups x kernel` of the same spatial rank; stride and pad are one integer
// for every spatial dim or a comma-separated list with one per dim (`1,2`: pad 0,3 for a 1x7
// kernel); count is how many times the layer occurs. After count come, in any order, options
// `key=value` and tags (plain words, e.g. `bench`). The options (parse_options()):
//   groups=N     the group count, which must agree with weights' C/groups (C / (C/groups));
//                without it the groups are C / (C/groups)
//   dilation=D   the dilation, one integer or a comma-separated list with one per spatial dim
// Any other key is an error. A line whose only field is `batch=N` (parse_directive()) gives the
// file's default batch, the one its network is trained with; readers that take a batch from the
// command line use it when none is given there. Older readers' files (no options) read the same.

#include <charconv>
#include <cstdint>
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

/// `text` as an integer >= `minimum`, or nullopt.
inline std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t minimum) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < minimum)
    return std::nullopt;
  return value;
}

/// A stride, pad or dilation field: one integer >= `minimum`, or a comma-separated list of them;
/// nullopt when malformed.
inline std::optional<std::vector<std::int64_t>> parse_int_list(std::string_view text,
                                                               std::int64_t minimum) {
  std::vector<std::int64_t> values;
  while (true) {
    const std::size_t comma = text.find(',');
    const auto value = parse_int(text.substr(0, comma), minimum);
    if (!value) return std::nullopt;
    values.push_back(*value);
    if (comma == std::string_view::npos) return values;
    text.remove_prefix(comma + 1);
  }
}

/// The options and tags after a layer's count (Note [shapes file lines]).
struct LayerOptions {
  std::int64_t groups = 0;             ///< 0: not given
  std::vector<std::int64_t> dilation;  ///< empty: not given (1)
  std::vector<std::string> tags;       ///< every field without '='
};

/// Parses fields[first...] into `options`; returns an error message naming the bad field, or ""
/// when every field is a tag or a known option with a valid value.
inline std::string parse_options(const std::vector<std::string>& fields, std::size_t first,
                                 LayerOptions& options) {
  for (std::size_t i = first; i < fields.size(); ++i) {
    const std::string& field = fields[i];
    const std::size_t equals = field.find('=');
    if (equals == std::string::npos) {
      options.tags.push_back(field);
      continue;
    }
    const std::string_view key(field.data(), equals);
    const std::string_view value = std::string_view(field).substr(equals + 1);
    if (key == "groups") {
      const auto groups = parse_int(value, 1);
      if (!groups) return "option '" + field + "': groups must be an integer >= 1";
      options.groups = *groups;
    } else if (key == "dilation") {
      auto dilation = parse_int_list(value, 1);
      if (!dilation)
        return "option '" + field +
               "': dilation must be an integer >= 1 or a comma-separated list of them";
      options.dilation = std::move(*dilation);
    } else {
      return "unknown option '" + field + "' (known: groups=N, dilation=D)";
    }
  }
  return {};
}

/// Whether `line` is a directive (a single `key=value` field) rather than a layer.
inline bool is_directive(const Line& line) {
  return line.fields.size() == 1 && line.fields[0].find('=') != std::string::npos;
}

/// The file's default batch from its directive lines (`batch=N`); 0 when there is none. Returns
/// an error message for a bad directive, "" otherwise.
inline std::string parse_directives(const std::vector<Line>& lines, std::int64_t& batch) {
  batch = 0;
  for (const Line& line : lines) {
    if (!is_directive(line)) continue;
    const std::string& field = line.fields[0];
    const std::string where = "line " + std::to_string(line.number) + ": ";
    if (field.rfind("batch=", 0) != 0)
      return where + "unknown directive '" + field + "' (known: batch=N)";
    const auto value = parse_int(std::string_view(field).substr(6), 1);
    if (!value) return where + "'" + field + "': the batch must be an integer >= 1";
    batch = *value;
  }
  return {};
}

}  // namespace dnnx::shapes
