#pragma once
// THE convolution case table (STYLE.md "Tests"): hand-picked edge cases, a seeded random
// matrix, and the ResNet-50 layers of bench/shapes/resnet50.txt (the file the benchmarks and
// `dnnx tune --model resnet50` read). Every case has a unique name that is a valid gtest
// parameter name; the desc itself prints, validates and reproduces the case.

#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct ConvCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique within a table
  ConvDesc desc;
};

/// Hand-picked edge shapes (1/2/3-D, stride, asymmetric padding, dilation, groups, depthwise,
/// odd sizes, batch 1, kernel as large as the padded input, padding wider than the kernel),
/// each in every dtype (f32, f16, bf16) and both layouts. Names: <shape>_<dtype>_<layout>.
std::vector<ConvCase> conv_edge_cases();

/// `count` valid random descs drawn from `seed` (a fixed seed gives the same table everywhere):
/// 1-3 spatial dims, batch 1-3, groups 1/2/3/depthwise, stride 1-3, dilation 1-2, independent
/// padding per side, random dtype and layout, at most `max_macs` multiply-accumulates each.
std::vector<ConvCase> conv_random_cases(std::uint64_t seed, int count, double max_macs = 1.5e6);

/// One line of a shapes file such as bench/shapes/resnet50.txt (Note [shapes file lines]).
struct ConvShape {
  std::string name;     ///< layer name, e.g. "l1.conv3x3"
  Dims src;             ///< C x spatial (batch left out): C x W, C x H x W or C x D x H x W
  Dims weights;         ///< O x C/groups x kernel
  std::vector<std::int64_t> stride{1};    ///< one entry, or one per spatial dim
  std::vector<std::int64_t> pad{0};       ///< one entry, or one per spatial dim (symmetric)
  std::vector<std::int64_t> dilation{1};  ///< one entry, or one per spatial dim
  std::int64_t groups = 1;                ///< C / weights' C/groups (the groups= option must agree)
  int count = 1;        ///< times the shape occurs in the network
  bool bench = false;   ///< one of the benchmark shapes (tag "bench")
  std::vector<std::string> tags;  ///< every tag of the line, "bench" included
};

/// A shapes file: its layers and its default batch (the `batch=N` line; 0 when absent).
struct ConvShapesFile {
  std::vector<ConvShape> layers;
  std::int64_t batch = 0;
};

/// Parses a shapes file ('#' comments; name src weights stride pad count [options] [tags]); throws
/// std::runtime_error naming the file, line and field on malformed input, including a layer
/// whose desc would not validate.
ConvShapesFile read_conv_shapes_file(const std::string& path);

/// The layers of read_conv_shapes_file(path).
std::vector<ConvShape> read_conv_shapes(const std::string& path);

/// bench/shapes/resnet50.txt of this source tree.
std::string resnet50_shapes_path();

/// The bench/shapes folder of this source tree (every suite file: *.txt).
std::string shapes_dir();

/// The desc of `shape` at `batch` (its groups and dilation, symmetric padding).
ConvDesc desc_of(const ConvShape& shape, std::int64_t batch, DType dtype = DType::f32,
                 Layout layout = Layout::channels_first);

/// ResNet-50's distinct layers at `batch`, in f32 and channels-first, keeping only those of at
/// most `max_macs` multiply-accumulates (pass infinity for all). Names: resnet50_<layer>_n<batch>.
std::vector<ConvCase> conv_resnet50_cases(std::int64_t batch, double max_macs);

/// True when `name` is non-empty and only [A-Za-z0-9_] (what gtest accepts as a parameter name).
bool is_valid_case_name(std::string_view name);

}  // namespace dnnx::test
