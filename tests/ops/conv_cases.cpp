#include "ops/conv_cases.hpp"

#include "shapes_file.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#ifndef DNNX_RESNET50_SHAPES
#error "DNNX_RESNET50_SHAPES (path of bench/shapes/resnet50.txt) must be defined by the build"
#endif

namespace dnnx::test {
namespace {

using Sizes = std::initializer_list<std::int64_t>;

// Spatial arrays from a list of 1 (broadcast) or spatial_dims entries.
std::array<std::int64_t, 3> spatial(Sizes values, int spatial_dims, std::int64_t fill) {
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(spatial_dims)) {
    throw std::logic_error("conv case table: spatial list of the wrong length");
  }
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (int i = 0; i < spatial_dims; ++i) {
    out[static_cast<std::size_t>(i)] =
        values.size() == 1 ? *values.begin() : *(values.begin() + i);
  }
  return out;
}

// Reads like the table it builds: Shape(n, c, o, input, kernel).stride(...).pad(...)...
class Shape {
 public:
  Shape(std::int64_t batch, std::int64_t in_channels, std::int64_t out_channels, Sizes input,
        Sizes kernel) {
    desc_.spatial_dims = static_cast<int>(input.size());
    desc_.batch = batch;
    desc_.in_channels = in_channels;
    desc_.out_channels = out_channels;
    desc_.input = spatial(input, desc_.spatial_dims, 0);
    desc_.kernel = spatial(kernel, desc_.spatial_dims, 0);
  }
  Shape& groups(std::int64_t groups) {
    desc_.groups = groups;
    return *this;
  }
  Shape& stride(Sizes stride) {
    desc_.stride = spatial(stride, desc_.spatial_dims, 1);
    return *this;
  }
  Shape& pad(Sizes pad) { return pad2(pad, pad); }
  Shape& pad2(Sizes before, Sizes after) {
    desc_.pad_before = spatial(before, desc_.spatial_dims, 0);
    desc_.pad_after = spatial(after, desc_.spatial_dims, 0);
    return *this;
  }
  Shape& dilation(Sizes dilation) {
    desc_.dilation = spatial(dilation, desc_.spatial_dims, 1);
    return *this;
  }
  const ConvDesc& desc() const { return desc_; }

 private:
  ConvDesc desc_;
};

struct NamedShape {
  const char* name;
  Shape shape;
};

std::vector<NamedShape> edge_shapes() {
  return {
      {"1d_basic", Shape(2, 3, 4, {17}, {3}).pad({1})},
      {"1d_stride2_dilation2_asym_pad",
       Shape(2, 4, 6, {23}, {5}).stride({2}).dilation({2}).pad2({3}, {1})},
      {"1d_groups3", Shape(2, 6, 9, {11}, {3}).groups(3).pad2({1}, {0})},
      {"1d_depthwise_even_kernel", Shape(1, 5, 5, {16}, {4}).groups(5).pad2({2}, {1})},
      {"2d_basic", Shape(2, 3, 4, {8, 8}, {3, 3}).pad({1})},
      {"2d_stride2_odd", Shape(2, 5, 6, {9, 11}, {3, 3}).stride({2}).pad({1})},
      {"2d_asym_pad", Shape(2, 3, 5, {7, 10}, {3, 2}).pad2({0, 2}, {1, 0})},
      {"2d_dilation", Shape(2, 4, 4, {11, 9}, {3, 3}).dilation({2, 3}).pad({2, 3})},
      {"2d_rect_kernel_stride", Shape(2, 3, 4, {6, 13}, {1, 5}).stride({1, 2}).pad({0, 2})},
      {"2d_groups4", Shape(2, 8, 12, {7, 7}, {3, 3}).groups(4).pad({1})},
      // Groups of 4, 8 and 16 channels in and out (ResNeXt-50 32x4d's 3x3 layers; the first and
      // the third within the cudnn grouped kernel's domain, Note [grouped candidates]).
      {"2d_groups_of_4", Shape(2, 32, 32, {9, 8}, {3, 3}).groups(8).pad({1})},
      {"2d_groups_of_16", Shape(1, 64, 64, {6, 7}, {3, 3}).groups(4).pad({1})},
      {"2d_groups_of_8_stride2", Shape(2, 32, 32, {10, 9}, {3, 3}).groups(4).stride({2}).pad({1})},
      {"2d_depthwise", Shape(2, 8, 8, {10, 10}, {3, 3}).groups(8).pad({1})},
      {"2d_depthwise_stride2", Shape(1, 16, 16, {11, 11}, {3, 3}).groups(16).stride({2}).pad({1})},
      {"2d_depthwise_multiplier2", Shape(2, 4, 8, {9, 9}, {3, 3}).groups(4).pad({1})},
      {"2d_depthwise_5x5_dilation2_asym_pad",
       Shape(2, 6, 6, {13, 12}, {5, 5}).groups(6).stride({2}).dilation({2}).pad2({4, 3}, {2, 4})},
      {"2d_batch1", Shape(1, 5, 3, {13, 7}, {3, 3})},
      {"2d_pointwise", Shape(2, 16, 8, {6, 6}, {1, 1})},
      {"2d_pointwise_stride2", Shape(2, 8, 16, {9, 9}, {1, 1}).stride({2})},
      // Output 1x1: the kernel covers the whole padded input.
      {"2d_kernel_eq_padded_input", Shape(2, 3, 4, {5, 6}, {7, 8}).pad({1})},
      {"2d_kernel_eq_input", Shape(3, 4, 5, {4, 4}, {4, 4})},
      // Stride larger than the kernel: some src elements feed no output (diff_src must be 0).
      {"2d_stride_gt_kernel", Shape(2, 3, 4, {10, 10}, {2, 2}).stride({3})},
      // "Full" padding (kernel - 1 each side).
      {"2d_full_pad", Shape(2, 3, 4, {5, 6}, {3, 3}).pad({2})},
      // Padding wider than the kernel: border outputs see only zeros and must be exactly 0.
      {"2d_pad_beyond_kernel", Shape(1, 3, 4, {4, 5}, {2, 2}).pad2({3, 0}, {0, 3})},
      {"2d_channels64", Shape(2, 64, 64, {8, 8}, {3, 3}).pad({1})},
      {"2d_channel_tails", Shape(2, 17, 33, {7, 9}, {3, 3}).pad({1})},
      {"3d_basic", Shape(2, 3, 4, {5, 6, 7}, {3, 3, 3}).pad({1})},
      {"3d_stride_dilation_asym_pad", Shape(2, 4, 4, {7, 8, 9}, {2, 3, 3})
                                          .stride({2, 1, 2})
                                          .dilation({1, 2, 1})
                                          .pad2({1, 0, 2}, {0, 2, 1})},
      {"3d_depthwise", Shape(1, 6, 6, {5, 5, 5}, {3, 3, 3}).groups(6).pad({1})},
      {"3d_groups2_batch1", Shape(1, 4, 6, {4, 6, 5}, {1, 3, 3}).groups(2).pad({0, 1, 1})},
      {"3d_pointwise", Shape(2, 8, 16, {4, 5, 6}, {1, 1, 1})},
  };
}

std::string dtype_layout_suffix(const ConvDesc& desc) {
  return std::string(to_string(desc.dtype)) + "_" + std::string(to_string(desc.layout));
}

// Uniform integer in [lo, hi] from a portable engine (distributions are not portable).
std::int64_t draw(std::mt19937_64& engine, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(hi - lo + 1));
}

ConvDesc random_desc(std::mt19937_64& engine) {
  ConvDesc desc;
  desc.spatial_dims = static_cast<int>(draw(engine, 1, 3));
  desc.batch = draw(engine, 1, 3);
  // Groups: plain, grouped, or depthwise (with a channel multiplier of 1 or 2).
  const std::int64_t group_kind = draw(engine, 0, 3);
  if (group_kind == 3) {
    desc.groups = draw(engine, 2, 12);
    desc.in_channels = desc.groups;
    desc.out_channels = desc.groups * draw(engine, 1, 2);
  } else {
    desc.groups = group_kind + 1;
    desc.in_channels = desc.groups * draw(engine, 1, 8);
    desc.out_channels = desc.groups * draw(engine, 1, 8);
  }
  // Shorter sides in 3-D keep the cost of a case similar across ranks.
  const std::int64_t max_input = desc.spatial_dims == 1 ? 40 : desc.spatial_dims == 2 ? 16 : 8;
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    desc.input[s] = draw(engine, 1, max_input);
    desc.kernel[s] = draw(engine, 1, 5);
    desc.stride[s] = draw(engine, 1, 3);
    desc.dilation[s] = draw(engine, 0, 3) == 0 ? 2 : 1;
    desc.pad_before[s] = draw(engine, 0, desc.kernel[s] - 1);
    desc.pad_after[s] = draw(engine, 0, 3) == 0 ? draw(engine, 0, desc.kernel[s] - 1)
                                                 : desc.pad_before[s];
    // Shrink the kernel until it fits in the padded input: every drawn input size stays usable.
    while (desc.kernel[s] > 1 && desc.dilation[s] * (desc.kernel[s] - 1) + 1 >
                                     desc.input[s] + desc.pad_before[s] + desc.pad_after[s]) {
      --desc.kernel[s];
    }
  }
  constexpr DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  desc.dtype = dtypes[draw(engine, 0, 2)];
  desc.layout = draw(engine, 0, 1) == 0 ? Layout::channels_first : Layout::channels_last;
  return desc;
}

std::runtime_error shapes_error(const std::string& path, int line, const std::string& what) {
  return std::runtime_error(path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

bool is_valid_case_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<ConvCase> conv_edge_cases() {
  std::vector<ConvCase> cases;
  for (const auto& [name, shape] : edge_shapes()) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        ConvDesc desc = shape.desc();
        desc.dtype = dtype;
        desc.layout = layout;
        cases.push_back({std::string(name) + "_" + dtype_layout_suffix(desc), desc});
      }
    }
  }
  return cases;
}

std::vector<ConvCase> conv_random_cases(std::uint64_t seed, int count, double max_macs) {
  std::mt19937_64 engine(seed);
  std::vector<ConvCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    const ConvDesc desc = random_desc(engine);
    if (desc.macs() > max_macs) continue;
    std::ostringstream name;
    name << "random" << (cases.size() < 10 ? "0" : "") << cases.size() << "_"
         << desc.spatial_dims << "d_" << dtype_layout_suffix(desc);
    cases.push_back({name.str(), desc});
  }
  return cases;
}

ConvShapesFile read_conv_shapes_file(const std::string& path) {
  const auto lines = shapes::read_lines(path);
  if (!lines) throw std::runtime_error(path + ": cannot open the shapes file");
  ConvShapesFile file;
  if (const std::string error = shapes::parse_directives(*lines, file.batch); !error.empty())
    throw std::runtime_error(path + ": " + error);
  for (const shapes::Line& text : *lines) {
    if (shapes::is_directive(text)) continue;
    const std::vector<std::string>& tokens = text.fields;
    const int line = text.number;
    if (tokens.size() < 6) {
      throw shapes_error(path, line,
                         "expected 'name src weights stride pad count [options] [tags]', got " +
                             std::to_string(tokens.size()) + " fields");
    }
    ConvShape shape;
    shape.name = tokens[0];
    try {
      shape.src = Dims::parse(tokens[1], "src");
      shape.weights = Dims::parse(tokens[2], "weights");
      shape.count = std::stoi(tokens[5]);
    } catch (const std::exception& error) {
      throw shapes_error(path, line, std::string("malformed layer '") + tokens[0] + "': " +
                                         error.what());
    }
    const auto stride = shapes::parse_int_list(tokens[3], 1);
    const auto pad = shapes::parse_int_list(tokens[4], 0);
    if (!stride || !pad) {
      throw shapes_error(path, line,
                         "malformed layer '" + tokens[0] + "': stride '" + tokens[3] +
                             "' and pad '" + tokens[4] +
                             "' must be integers or comma-separated lists");
    }
    shape.stride = *stride;
    shape.pad = *pad;
    if (shape.src.rank() < 2 || shape.src.rank() > 4 ||
        shape.src.rank() != shape.weights.rank() - 1) {
      throw shapes_error(path, line, "src " + shape.src.to_string() + " (C x spatial) and weights " +
                                         shape.weights.to_string() +
                                         " (O x C x kernel) disagree in rank");
    }
    shapes::LayerOptions options;
    if (const std::string error = shapes::parse_options(tokens, 6, options); !error.empty())
      throw shapes_error(path, line, "layer '" + tokens[0] + "': " + error);
    const std::int64_t per_group = shape.weights[1];
    shape.groups = per_group > 0 && shape.src[0] % per_group == 0 ? shape.src[0] / per_group : 1;
    if (options.groups != 0 && options.groups != shape.groups) {
      throw shapes_error(path, line,
                         "layer '" + tokens[0] + "': groups=" + std::to_string(options.groups) +
                             " disagrees with src C " + std::to_string(shape.src[0]) +
                             " / weights' C/groups " + std::to_string(per_group));
    }
    if (!options.dilation.empty()) shape.dilation = options.dilation;
    shape.tags = options.tags;
    shape.bench = std::find(shape.tags.begin(), shape.tags.end(), "bench") != shape.tags.end();
    try {
      desc_of(shape, 1);
    } catch (const std::exception& error) {
      throw shapes_error(path, line, "layer '" + tokens[0] + "': " + error.what());
    }
    file.layers.push_back(shape);
  }
  return file;
}

std::vector<ConvShape> read_conv_shapes(const std::string& path) {
  return read_conv_shapes_file(path).layers;
}

std::string resnet50_shapes_path() { return DNNX_RESNET50_SHAPES; }

std::string shapes_dir() {
  const std::string path = resnet50_shapes_path();
  return path.substr(0, path.find_last_of('/'));
}

ConvDesc desc_of(const ConvShape& shape, std::int64_t batch, DType dtype, Layout layout) {
  std::vector<std::int64_t> src{batch};
  src.insert(src.end(), shape.src.begin(), shape.src.end());
  return ConvDesc::from_shapes(Dims(std::span<const std::int64_t>(src)), shape.weights,
                               shape.stride, shape.pad, shape.dilation, shape.groups, dtype,
                               layout);
}

std::vector<ConvCase> conv_resnet50_cases(std::int64_t batch, double max_macs) {
  std::vector<ConvCase> cases;
  for (const ConvShape& shape : read_conv_shapes(resnet50_shapes_path())) {
    const ConvDesc desc = desc_of(shape, batch);
    if (desc.macs() > max_macs) continue;
    std::string name = "resnet50_" + shape.name + "_n" + std::to_string(batch);
    std::replace(name.begin(), name.end(), '.', '_');
    cases.push_back({name, desc});
  }
  return cases;
}

}  // namespace dnnx::test
