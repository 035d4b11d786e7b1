#include "models.hpp"

#include "args.hpp"
#include "output.hpp"
#include "shapes_file.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace dnnx::cli {
namespace detail {
extern const std::string_view resnet50_shapes;
}  // namespace detail

namespace {

struct Builtin {
  std::string_view name;
  std::string_view source;
  const std::string_view* text;
};

const Builtin builtins[] = {
    {"resnet50", "bench/shapes/resnet50.txt", &detail::resnet50_shapes},
};

std::string where(std::string_view source, int line) {
  return std::string(source) + ":" + std::to_string(line);
}

// Note [model files]
// A shapes file is a few kilobytes (ResNet-50's has 53 lines). --model reads a path only if it
// names a regular file (not a directory, a FIFO, /dev/zero or another device, which may never end)
// of at most max_model_bytes, and reads at most that many bytes even if the file grows meanwhile.
constexpr std::uintmax_t max_model_bytes = std::uintmax_t{1} << 20;

std::string_view file_kind(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::directory: return "a directory";
    case file_type::character: return "a character device";
    case file_type::block: return "a block device";
    case file_type::fifo: return "a FIFO";
    case file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

// The first characters of `line` for a message: a bad line of a large file stays one short line.
std::string excerpt(std::string_view line) {
  constexpr std::size_t max_chars = 80;
  return line.size() <= max_chars ? std::string(line)
                                  : std::string(line.substr(0, max_chars)) + "...";
}

}  // namespace

ConvDesc ModelLayer::desc(std::int64_t batch, DType dtype, Layout layout) const {
  std::vector<std::int64_t> src_dims{batch};
  src_dims.insert(src_dims.end(), src.begin(), src.end());
  // A weights C/groups smaller than C means grouped (or depthwise) convolution; when it does not
  // divide C, groups stays 1 and from_shapes reports the channel mismatch.
  const std::int64_t per_group = weights[1];
  const std::int64_t groups = per_group > 0 && src[0] % per_group == 0 ? src[0] / per_group : 1;
  return ConvDesc::from_shapes(Dims(std::span<const std::int64_t>(src_dims)), weights, stride, pad,
                               dilation, groups, dtype, layout);
}

std::vector<std::string> builtin_models() {
  std::vector<std::string> names;
  for (const Builtin& builtin : builtins) names.emplace_back(builtin.name);
  return names;
}

Model load_model(std::string_view name_or_path) {
  for (const Builtin& builtin : builtins) {
    if (builtin.name == name_or_path)
      return parse_model(*builtin.text, builtin.name, builtin.source);
  }
  // Note [model files].
  const std::string path(name_or_path);
  const std::string flag = "--model '" + path + "': ";
  const std::string accepted = "a built-in model (" + join(builtin_models(), ", ") +
                               ") or a shapes file (a regular file of at most 1 MiB)";
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status))
    throw UsageError(flag + "no such file; expected " + accepted);
  if (!std::filesystem::is_regular_file(status))
    throw UsageError(flag + "is " + std::string(file_kind(status.type())) + "; expected " +
                     accepted);
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > max_model_bytes) {
    throw UsageError(flag + "the file has " + std::to_string(size) + " bytes; expected " +
                     accepted);
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(flag + "cannot be opened for reading; expected " + accepted);
  std::string text(max_model_bytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) throw UsageError(flag + "reading the file failed");
  text.resize(static_cast<std::size_t>(file.gcount()));
  if (text.size() > max_model_bytes)
    throw UsageError(flag + "the file has more than 1 MiB; expected " + accepted);
  return parse_model(text, path, path);
}

Model parse_model(std::string_view text, std::string_view name, std::string_view source) {
  Model model{std::string(name), {}};
  for (const shapes::Line& line : shapes::split_lines(text)) {
    const std::vector<std::string>& tokens = line.fields;
    const std::string at = where(source, line.number);
    if (shapes::is_directive(line)) continue;  // `batch=N`: the tool's batch is --batch
    if (tokens.size() < 6) {
      throw UsageError(at +
                       ": expected `name src weights stride pad count [options] [tags]`, got '" +
                       excerpt(line.text) + "'");
    }
    shapes::LayerOptions options;
    if (const std::string error = shapes::parse_options(tokens, 6, options); !error.empty())
      throw UsageError(at + ": " + error + " in '" + excerpt(line.text) + "'");
    ModelLayer layer;
    layer.name = tokens[0];
    layer.src = parse_dims(at + " src", tokens[1]);
    layer.weights = parse_dims(at + " weights", tokens[2]);
    if (layer.src.rank() < 2 || layer.src.rank() > 4 ||
        layer.weights.rank() != layer.src.rank() + 1) {
      throw UsageError(at + ": src '" + tokens[1] +
                       "' must be C x 1 to 3 spatial dims and weights '" + tokens[2] +
                       "' O x C/groups x as many kernel dims");
    }
    layer.stride = parse_int_list(at + " stride", tokens[3], 1);
    layer.pad = parse_int_list(at + " pad", tokens[4], 0);
    layer.count = parse_int(at + " count", tokens[5], 1);
    layer.bench =
        std::find(options.tags.begin(), options.tags.end(), "bench") != options.tags.end();
    if (!options.dilation.empty()) layer.dilation = options.dilation;
    const std::int64_t per_group = layer.weights[1];
    const std::int64_t groups =
        per_group > 0 && layer.src[0] % per_group == 0 ? layer.src[0] / per_group : 1;
    if (options.groups != 0 && options.groups != groups) {
      throw UsageError(at + ": groups=" + std::to_string(options.groups) +
                       " disagrees with src C " + std::to_string(layer.src[0]) +
                       " / weights' C/groups " + std::to_string(per_group));
    }
    for (const ModelLayer& other : model.layers) {
      if (other.name == layer.name)
        throw UsageError(at + ": layer name '" + layer.name + "' appears twice");
    }
    model.layers.push_back(std::move(layer));
  }
  if (model.layers.empty())
    throw UsageError(std::string(source) +
                     ": no layers (expected `name src weights stride pad count`)");
  return model;
}

}  // namespace dnnx::cli
