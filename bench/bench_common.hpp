#pragma once
// What conv_bench and onednn_direct_bench share so that they time the same cases the same way:
// the shape list (bench/shapes/resnet50.txt), the options that are not Google Benchmark's, the
// case names the comparison script joins on, and the timing defaults (Note [timing method]).
// Header-only and free of dnnx and oneDNN types: each benchmark sees only what it measures.

#include "shapes/shapes_file.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::bench {

// Note [timing method]
// Both C++ benchmarks, and bench/compare_cpu.py for PyTorch, time a case like this:
//   1. anything that picks an implementation (dnnx's exhaustive selection, the direct benchmark's
//      sweep over oneDNN implementations) runs first and is not timed;
//   2. one untimed call, then Google Benchmark's own warm-up (--benchmark_min_warmup_time);
//   3. --benchmark_repetitions repetitions, each as many back-to-back calls as fill
//      --benchmark_min_time, giving the mean time per call of that repetition (wall clock: the
//      work runs on OpenMP threads, so the calling thread's CPU time would be wrong);
//   4. the reported figure is the median over the repetitions.
// The defaults below are injected unless the command line sets the flag itself.
inline constexpr const char* timing_defaults[] = {
    "--benchmark_min_warmup_time=0.05",
    "--benchmark_min_time=0.1",
    "--benchmark_repetitions=5",
    "--benchmark_report_aggregates_only=true",
};

/// The fastest repetition, reported next to the median: on a shared or virtualised machine the
/// spread between the two shows how much the neighbours disturbed the run.
inline double min_of(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

/// One convolution layer of a shape file (batch left out).
struct ConvShape {
  std::string name;
  std::int64_t in_channels = 0, height = 0, width = 0;  // src: C x H x W
  std::int64_t out_channels = 0, group_channels = 0;    // weights: O x C/groups
  std::int64_t kernel_h = 0, kernel_w = 0;              // weights: KH x KW
  std::int64_t stride = 1, pad = 0;                     // both spatial dims, elements
  std::int64_t count = 1;                               // occurrences in the network
  std::vector<std::string> tags;

  std::int64_t groups() const { return in_channels / group_channels; }
  std::int64_t out_height() const { return (height + 2 * pad - kernel_h) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * pad - kernel_w) / stride + 1; }
  /// Multiply-accumulates of one direction at batch `batch` (every direction does as many).
  double macs(std::int64_t batch) const {
    return static_cast<double>(batch) * static_cast<double>(out_channels) *
           static_cast<double>(out_height() * out_width()) *
           static_cast<double>(group_channels * kernel_h * kernel_w);
  }
  bool has_tag(std::string_view tag) const {
    return std::find(tags.begin(), tags.end(), tag) != tags.end();
  }
  /// "8x64x56x56 * 64x64x3x3 s1 p1" for labels and logs.
  std::string describe(std::int64_t batch) const {
    std::ostringstream out;
    out << batch << 'x' << in_channels << 'x' << height << 'x' << width << " * " << out_channels
        << 'x' << group_channels << 'x' << kernel_h << 'x' << kernel_w << " s" << stride << " p"
        << pad;
    return out.str();
  }
};

namespace detail {

inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(separator, begin);
    parts.emplace_back(text.substr(begin, end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

inline std::int64_t parse_positive(std::string_view text, const std::string& where,
                                   std::string_view what, std::int64_t minimum = 1) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < minimum) {
    throw std::runtime_error(where + ": " + std::string(what) + " must be an integer >= " +
                             std::to_string(minimum) + ", got '" + std::string(text) + "'");
  }
  return value;
}

inline std::vector<std::int64_t> parse_dims(std::string_view text, std::size_t rank,
                                            const std::string& where, std::string_view what) {
  const std::vector<std::string> parts = split(text, 'x');
  if (parts.size() != rank) {
    throw std::runtime_error(where + ": " + std::string(what) + " must have " +
                             std::to_string(rank) + " sizes separated by 'x', got '" +
                             std::string(text) + "'");
  }
  std::vector<std::int64_t> dims;
  dims.reserve(parts.size());
  for (const std::string& part : parts) dims.push_back(parse_positive(part, where, what));
  return dims;
}

}  // namespace detail

/// Reads a shape file: `name CxHxW OxC/gxKHxKW stride pad count [options] [tags...]` per line,
/// '#' comments (Note [shapes file lines]). These benchmarks run 2-D layers with one stride and pad
/// and no dilation: a 1-D or 3-D layer, a per-dim list or a dilation other than 1 is an error
/// naming the line, like every malformed field; `batch=N` lines are skipped (the batch is
/// --batch). Throws std::runtime_error naming the file, the line and the bad field.
inline std::vector<ConvShape> read_shapes(const std::string& path) {
  const auto lines = shapes::read_lines(path);
  if (!lines) throw std::runtime_error("cannot open shape file '" + path + "' (--shapes)");
  std::vector<ConvShape> shapes;
  for (const shapes::Line& line : *lines) {
    if (shapes::is_directive(line)) continue;
    const std::vector<std::string>& tokens = line.fields;
    const std::string where = path + ":" + std::to_string(line.number);
    if (tokens.size() < 6) {
      throw std::runtime_error(where +
                               ": expected 'name CxHxW OxCgxKHxKW stride pad count [tags]'"
                               ", got " +
                               std::to_string(tokens.size()) + " fields");
    }
    ConvShape shape;
    shape.name = tokens[0];
    shapes::LayerOptions options;
    if (const std::string error = shapes::parse_options(tokens, 6, options); !error.empty())
      throw std::runtime_error(where + ": " + error);
    for (const std::int64_t d : options.dilation) {
      if (d != 1)
        throw std::runtime_error(where + ": dilation " + std::to_string(d) +
                                 " is not supported by this benchmark (2-D, dilation 1)");
    }
    if (detail::split(tokens[1], 'x').size() != 3)
      throw std::runtime_error(where + ": src '" + tokens[1] +
                               "' is not CxHxW: this benchmark runs 2-D layers only");
    const auto src = detail::parse_dims(tokens[1], 3, where, "src (CxHxW)");
    const auto weights = detail::parse_dims(tokens[2], 4, where, "weights (OxCgxKHxKW)");
    shape.in_channels = src[0];
    shape.height = src[1];
    shape.width = src[2];
    shape.out_channels = weights[0];
    shape.group_channels = weights[1];
    shape.kernel_h = weights[2];
    shape.kernel_w = weights[3];
    shape.stride = detail::parse_positive(tokens[3], where, "stride");
    shape.pad = detail::parse_positive(tokens[4], where, "pad", 0);
    shape.count = detail::parse_positive(tokens[5], where, "count");
    shape.tags = options.tags;
    if (shape.in_channels % shape.group_channels != 0 || shape.out_channels % shape.groups() != 0) {
      throw std::runtime_error(
          where + ": weights' C/groups " + std::to_string(shape.group_channels) +
          " must divide src C " + std::to_string(shape.in_channels) +
          " and give a group count dividing O " + std::to_string(shape.out_channels));
    }
    if (options.groups != 0 && options.groups != shape.groups()) {
      throw std::runtime_error(
          where + ": groups=" + std::to_string(options.groups) +
          " disagrees with src C / weights' C/groups = " + std::to_string(shape.groups()));
    }
    if (shape.out_height() < 1 || shape.out_width() < 1) {
      throw std::runtime_error(where + ": kernel " + tokens[2] + " is larger than the padded " +
                               "input " + tokens[1] + " with pad " + tokens[4]);
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

/// The options both benchmarks take besides Google Benchmark's.
struct Options {
  std::string shapes_path;    // --shapes / DNNX_BENCH_SHAPES
  std::int64_t batch = 8;     // --batch
  std::string tag = "bench";  // --tag: only shapes carrying it; "all" for every shape
  std::vector<std::string> dtypes{"f32", "bf16"};                         // --dtypes
  std::vector<std::string> directions{"fwd", "bwd_data", "bwd_weights"};  // --directions
};

inline std::string usage_text(std::string_view program) {
  return std::string("usage: ") + std::string(program) +
         " [--shapes=FILE] [--batch=N] [--tag=bench|all|TAG] [--dtypes=f32,bf16]"
         " [--directions=fwd,bwd_data,bwd_weights] [Google Benchmark flags]\n"
         "  --shapes      shape file (default: $DNNX_BENCH_SHAPES, else the source tree's"
         " bench/shapes/resnet50.txt)\n"
         "  --batch       images per call (default 8)\n"
         "  --tag         run only the shapes carrying this tag (default bench: the 8 benchmark"
         " shapes)\n"
         "  timing defaults (overridable): " +
         [] {
           std::string text;
           for (const char* flag : timing_defaults) text += std::string(flag) + " ";
           return text;
         }() +
         "\n";
}

/// Removes this program's own flags from argv (Google Benchmark rejects flags it does not know)
/// and returns them. Throws std::runtime_error naming a bad flag and its value.
inline Options take_options(int& argc, char** argv, const std::string& default_shapes) {
  Options options;
  if (const char* env = std::getenv("DNNX_BENCH_SHAPES"); env != nullptr && *env != '\0') {
    options.shapes_path = env;
  } else {
    options.shapes_path = default_shapes;
  }
  const auto check_listed = [](const std::vector<std::string>& values,
                               std::initializer_list<std::string_view> accepted,
                               std::string_view flag) {
    for (const std::string& value : values) {
      if (std::find(accepted.begin(), accepted.end(), value) == accepted.end()) {
        std::string message(flag);
        message.append(": unknown value '").append(value).append("', accepted:");
        for (std::string_view name : accepted) message.append(" ").append(name);
        throw std::runtime_error(message);
      }
    }
  };
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value_of = [&](std::string_view flag) -> std::optional<std::string> {
      if (arg.substr(0, flag.size()) != flag) return std::nullopt;
      if (arg.size() > flag.size() && arg[flag.size()] == '=') {
        return std::string(arg.substr(flag.size() + 1));
      }
      if (arg.size() == flag.size()) {
        if (i + 1 >= argc) throw std::runtime_error(std::string(flag) + " needs a value");
        return std::string(argv[++i]);
      }
      return std::nullopt;
    };
    if (auto v = value_of("--shapes")) {
      options.shapes_path = *v;
    } else if (auto v = value_of("--batch")) {
      options.batch = detail::parse_positive(*v, "--batch", "the batch size");
    } else if (auto v = value_of("--tag")) {
      options.tag = *v;
    } else if (auto v = value_of("--dtypes")) {
      options.dtypes = detail::split(*v, ',');
      check_listed(options.dtypes, {"f32", "bf16"}, "--dtypes");
    } else if (auto v = value_of("--directions")) {
      options.directions = detail::split(*v, ',');
      check_listed(options.directions, {"fwd", "bwd_data", "bwd_weights"}, "--directions");
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return options;
}

/// The shapes `options` selects, in file order. Throws if none match.
inline std::vector<ConvShape> selected_shapes(const Options& options) {
  std::vector<ConvShape> shapes;
  for (ConvShape& shape : read_shapes(options.shapes_path)) {
    if (options.tag == "all" || shape.has_tag(options.tag)) shapes.push_back(std::move(shape));
  }
  if (shapes.empty()) {
    throw std::runtime_error("--tag: no shape in '" + options.shapes_path + "' carries tag '" +
                             options.tag + "'");
  }
  return shapes;
}

/// argv with the timing defaults of Note [timing method] added where the caller set none.
/// The returned strings must outlive Google Benchmark's use of argv (keep the vector alive).
inline std::vector<char*> with_timing_defaults(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  for (const char* flag : timing_defaults) {
    const std::string_view name =
        std::string_view(flag).substr(0, std::string_view(flag).find('='));
    const bool given = std::any_of(argv + 1, argv + argc, [&](const char* arg) {
      const std::string_view text = arg;
      return text.substr(0, name.size()) == name &&
             (text.size() == name.size() || text[name.size()] == '=');
    });
    if (!given) args.push_back(const_cast<char*>(flag));
  }
  args.push_back(nullptr);
  return args;
}

/// "conv1/fwd/f32": the name the comparison script joins the benchmarks and PyTorch on.
inline std::string case_name(const ConvShape& shape, std::string_view direction,
                             std::string_view dtype) {
  return shape.name + "/" + std::string(direction) + "/" + std::string(dtype);
}

/// Deterministic values in [-1, 1): the timings must not depend on the data, and these contain
/// no zeros or denormals that could take a fast or slow path.
inline void fill_pattern(float* values, std::size_t count, std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 1u;
  for (std::size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    values[i] = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f + (1.0f / 16777216.0f);
  }
}

/// Runs Google Benchmark on argv (with the timing defaults) and returns main's exit code.
inline int run_benchmarks(int argc, char** argv) {
  std::vector<char*> args = with_timing_defaults(argc, argv);
  int count = static_cast<int>(args.size()) - 1;
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace dnnx::bench
