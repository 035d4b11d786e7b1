#include "models.hpp"

#include "args.hpp"
#include "output.hpp"

#include <fstream>
#include <sstream>

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

}  // namespace

ConvDesc ModelLayer::desc(std::int64_t batch, DType dtype, Layout layout) const {
  std::vector<std::int64_t> src_dims{batch};
  src_dims.insert(src_dims.end(), src.begin(), src.end());
  // A weights C/groups smaller than C means grouped (or depthwise) convolution; when it does not
  // divide C, groups stays 1 and from_shapes reports the channel mismatch.
  const std::int64_t per_group = weights[1];
  const std::int64_t groups = per_group > 0 && src[0] % per_group == 0 ? src[0] / per_group : 1;
  return ConvDesc::from_shapes(Dims(std::span<const std::int64_t>(src_dims)), weights, stride, pad,
                               {1}, groups, dtype, layout);
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
  std::ifstream file{std::string(name_or_path)};
  if (!file) {
    throw UsageError("--model '" + std::string(name_or_path) + "': neither a built-in model (" +
                     join(builtin_models(), ", ") + ") nor a readable shapes file");
  }
  std::ostringstream text;
  text << file.rdbuf();
  return parse_model(text.str(), name_or_path, name_or_path);
}

Model parse_model(std::string_view text, std::string_view name, std::string_view source) {
  Model model{std::string(name), {}};
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string token; fields >> token;) tokens.push_back(token);
    if (tokens.empty()) continue;
    const std::string at = where(source, number);
    if (tokens.size() != 6 && !(tokens.size() == 7 && tokens[6] == "bench")) {
      throw UsageError(at + ": expected `name src weights stride pad count [bench]`, got '" +
                       std::string(line) + "'");
    }
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
    layer.bench = tokens.size() == 7;
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
