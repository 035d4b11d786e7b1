// The case table itself: names usable by gtest and unique, every desc valid, and the coverage
// the parity suite promises (a feature silently dropped from the table fails here). Also the
// shapes file the benchmarks share, and the test helpers the parity suite relies on.

#include "ops/conv_cases.hpp"

#include <dnnx/dnnx.hpp>

#include "support/compare.hpp"
#include "support/npy.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace dnnx::test {
namespace {

std::vector<ConvCase> default_table() {
  std::vector<ConvCase> cases = conv_edge_cases();
  for (auto& c : conv_random_cases(20240611, 40)) cases.push_back(c);
  for (auto& c : conv_resnet50_cases(1, std::numeric_limits<double>::infinity())) cases.push_back(c);
  return cases;
}

TEST(ConvCases, NamesAreValidAndUnique) {
  std::set<std::string> seen;
  for (const ConvCase& c : default_table()) {
    EXPECT_TRUE(is_valid_case_name(c.name)) << "'" << c.name << "'";
    EXPECT_TRUE(seen.insert(c.name).second) << "duplicate case name " << c.name;
  }
  EXPECT_FALSE(is_valid_case_name(""));
  EXPECT_FALSE(is_valid_case_name("l1.conv3x3"));
  EXPECT_FALSE(is_valid_case_name("a-b"));
}

TEST(ConvCases, EveryDescIsValid) {
  for (const ConvCase& c : default_table()) {
    EXPECT_NO_THROW(c.desc.validate()) << c.name << ": " << c.desc;
    for (int i = 0; i < c.desc.spatial_dims; ++i) EXPECT_GE(c.desc.output_size(i), 1) << c.name;
  }
}

TEST(ConvCases, RandomTableIsReproducible) {
  const auto first = conv_random_cases(7, 25);
  const auto second = conv_random_cases(7, 25);
  ASSERT_EQ(first.size(), 25u);
  ASSERT_EQ(second.size(), 25u);
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].name, second[i].name);
    EXPECT_EQ(first[i].desc, second[i].desc) << first[i].name;
  }
  const auto other = conv_random_cases(8, 25);
  bool any_different = false;
  for (std::size_t i = 0; i < other.size(); ++i) any_different |= !(other[i].desc == first[i].desc);
  EXPECT_TRUE(any_different) << "a different seed gave the same table";
  for (const ConvCase& c : conv_random_cases(7, 25, 2e5)) EXPECT_LE(c.desc.macs(), 2e5) << c.name;
}

// The features the parity matrix must cover, each asserted present in the edge table
// and (where the random draw should reach it) in the random table.
TEST(ConvCases, CoversTheRequiredFeatures) {
  using Predicate = std::function<bool(const ConvDesc&)>;
  const auto any_dim = [](const ConvDesc& d, auto&& f) {
    for (int i = 0; i < d.spatial_dims; ++i)
      if (f(static_cast<std::size_t>(i))) return true;
    return false;
  };
  const std::vector<std::pair<std::string, Predicate>> features = {
      {"1-D", [](const ConvDesc& d) { return d.spatial_dims == 1; }},
      {"2-D", [](const ConvDesc& d) { return d.spatial_dims == 2; }},
      {"3-D", [](const ConvDesc& d) { return d.spatial_dims == 3; }},
      {"stride > 1", [&](const ConvDesc& d) { return any_dim(d, [&](auto i) { return d.stride[i] > 1; }); }},
      {"asymmetric padding",
       [&](const ConvDesc& d) { return any_dim(d, [&](auto i) { return d.pad_before[i] != d.pad_after[i]; }); }},
      {"dilation > 1", [&](const ConvDesc& d) { return any_dim(d, [&](auto i) { return d.dilation[i] > 1; }); }},
      {"groups", [](const ConvDesc& d) { return d.groups > 1 && d.groups < d.in_channels; }},
      {"depthwise", [](const ConvDesc& d) { return d.groups > 1 && d.groups == d.in_channels; }},
      {"odd sizes", [&](const ConvDesc& d) { return any_dim(d, [&](auto i) { return d.input[i] % 2 == 1; }); }},
      {"batch 1", [](const ConvDesc& d) { return d.batch == 1; }},
      {"batch > 1", [](const ConvDesc& d) { return d.batch > 1; }},
      {"output 1 (kernel == padded input)",
       [&](const ConvDesc& d) {
         for (int i = 0; i < d.spatial_dims; ++i) {
           const auto s = static_cast<std::size_t>(i);
           if ((d.kernel[s] - 1) * d.dilation[s] + 1 != d.input[s] + d.pad_before[s] + d.pad_after[s])
             return false;
         }
         return true;
       }},
      {"nchw", [](const ConvDesc& d) { return d.layout == Layout::channels_first; }},
      {"nhwc", [](const ConvDesc& d) { return d.layout == Layout::channels_last; }},
      {"f32", [](const ConvDesc& d) { return d.dtype == DType::f32; }},
      {"f16", [](const ConvDesc& d) { return d.dtype == DType::f16; }},
      {"bf16", [](const ConvDesc& d) { return d.dtype == DType::bf16; }},
  };
  const auto edge = conv_edge_cases();
  const auto random = conv_random_cases(20240611, 40);
  for (const auto& [feature, has] : features) {
    EXPECT_TRUE(std::any_of(edge.begin(), edge.end(), [&](const ConvCase& c) { return has(c.desc); }))
        << "no edge case has " << feature;
    if (feature.rfind("output 1", 0) != 0) {
      EXPECT_TRUE(std::any_of(random.begin(), random.end(), [&](const ConvCase& c) { return has(c.desc); }))
          << "no random case has " << feature;
    }
  }
}

TEST(ConvCases, ResNet50ShapesFile) {
  const auto shapes = read_conv_shapes(resnet50_shapes_path());
  ASSERT_EQ(shapes.size(), 23u) << "ResNet-50 has 23 distinct conv layers";
  int layers = 0;
  int bench = 0;
  for (const ConvShape& shape : shapes) {
    layers += shape.count;
    bench += shape.bench ? 1 : 0;
    EXPECT_NO_THROW(desc_of(shape, 1)) << shape.name;
  }
  EXPECT_EQ(layers, 53) << "ResNet-50 has 53 conv layers (incl. conv1 and 4 downsamples)";
  EXPECT_EQ(bench, 8) << "the CPU and GPU conv benchmarks use 8 shapes";
  const ConvDesc conv1 = desc_of(shapes.front(), 2);
  EXPECT_EQ(shapes.front().name, "conv1");
  EXPECT_EQ(conv1.dst_dims(), (Dims{2, 64, 112, 112}));
  // The default suite's subset is a real subset and is not empty.
  const auto cheap = conv_resnet50_cases(1, 13e6);
  EXPECT_GT(cheap.size(), 0u);
  EXPECT_LT(cheap.size(), shapes.size());
}

TEST(ConvCases, MalformedShapesFileNamesTheLine) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "dnnx_conv_cases_bad_shapes.txt").string();
  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("# comment\nok 3x8x8 4x3x3x3 1 1 1\nbad 3x8x8 4x3x3x3 one 1 1\n", file);
    std::fclose(file);
  }
  try {
    read_conv_shapes(path);
    ADD_FAILURE() << "malformed stride accepted";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(":3:"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("bad"), std::string::npos) << error.what();
  }
  std::remove(path.c_str());
}

// Every file of the shape suite reads (Note [shapes file lines]): its default batch, valid descs,
// and the features each file is there for.
TEST(ConvCases, ShapeSuiteFilesRead) {
  std::map<std::string, ConvShapesFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(shapes_dir())) {
    if (entry.path().extension() != ".txt") continue;
    SCOPED_TRACE(entry.path().string());
    ConvShapesFile file = read_conv_shapes_file(entry.path().string());
    EXPECT_FALSE(file.layers.empty());
    if (entry.path().filename() != "resnet50.txt") {
      EXPECT_GT(file.batch, 0) << "no batch=N line";
    }
    files.emplace(entry.path().stem().string(), std::move(file));
  }
  auto any = [&](const std::string& name, const std::function<bool(const ConvDesc&)>& has) {
    const auto found = files.find(name);
    if (found == files.end()) return false;
    for (const ConvShape& shape : found->second.layers) {
      if (has(desc_of(shape, 1))) return true;
    }
    return false;
  };
  auto depthwise = [](const ConvDesc& d) { return d.groups > 1 && d.groups == d.in_channels; };
  EXPECT_TRUE(any("mobilenetv2", depthwise));
  EXPECT_TRUE(any("efficientnet_b0",
                  [](const ConvDesc& d) { return d.groups == d.in_channels && d.kernel[0] == 5; }));
  EXPECT_TRUE(any("deeplabv3", [](const ConvDesc& d) { return d.dilation[0] == 36; }));
  EXPECT_TRUE(any("resnext50_32x4d", [](const ConvDesc& d) { return d.groups == 32; }));
  EXPECT_TRUE(any("r2plus1d_18", [](const ConvDesc& d) {
    return d.spatial_dims == 3 && d.stride[0] == 2 && d.stride[1] == 1;
  }));
  EXPECT_TRUE(any("c3d", [](const ConvDesc& d) { return d.spatial_dims == 3; }));
  EXPECT_TRUE(any("unet", [](const ConvDesc& d) { return d.input[0] == 572; }));
  EXPECT_TRUE(any("odd_sizes", [](const ConvDesc& d) {
    return d.spatial_dims == 2 && d.kernel[0] == 1 && d.kernel[1] == 7 && d.pad_before[1] == 3;
  }));
  EXPECT_TRUE(any("odd_sizes", [](const ConvDesc& d) { return d.spatial_dims == 1; }));
  EXPECT_EQ(files.at("mobilenetv2").batch, 128);
}

TEST(ConvCases, ShapesFileOptionsAndDirectives) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "dnnx_conv_cases_options.txt").string();
  auto write = [&](const char* text) {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs(text, file);
    std::fclose(file);
  };
  write(
      "batch=7\ndw 8x9x9 16x1x3x3 1 2 1 dw groups=8 dilation=2\n"
      "v 4x5x6x7 8x4x1x3x3 1,2,2 0,1,1 3\n");
  const ConvShapesFile file = read_conv_shapes_file(path);
  EXPECT_EQ(file.batch, 7);
  ASSERT_EQ(file.layers.size(), 2u);
  const ConvDesc dw = desc_of(file.layers[0], 2);
  EXPECT_EQ(dw.groups, 8);
  EXPECT_EQ(dw.out_channels, 16);
  EXPECT_EQ(dw.dilation[0], 2);
  EXPECT_EQ(dw.dst_dims(), (Dims{2, 16, 9, 9}));
  EXPECT_EQ(file.layers[0].tags, std::vector<std::string>{"dw"});
  const ConvDesc video = desc_of(file.layers[1], 1);
  EXPECT_EQ(video.spatial_dims, 3);
  EXPECT_EQ(video.dst_dims(), (Dims{1, 8, 5, 3, 4}));
  const std::vector<std::pair<const char*, const char*>> bad{
      {"x 8x9x9 8x1x3x3 1 1 1 groups=4\n", "groups=4"},
      {"x 8x9x9 8x1x3x3 1 1 1 dilation=0\n", "dilation"},
      {"x 8x9x9 8x1x3x3 1 1 1 color=red\n", "unknown option 'color=red'"},
      {"batch=0\nx 8x9x9 8x1x3x3 1 1 1\n", "batch"},
      {"batches=2\n", "unknown directive"},
      {"x 8x9x9 8x1x3x3 1,1,1 1 1\n", "stride"},
      {"x 8x9x9 8x1x3x3 1 1 1 dilation=9\n", "kernel"},
  };
  for (const auto& [text, expected] : bad) {
    write(text);
    try {
      read_conv_shapes_file(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::runtime_error& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
          << text << " -> " << error.what();
    }
  }
  std::remove(path.c_str());
}

// ---- the helpers the parity suite trusts ---------------------------------------------------------

TEST(TestSupport, RandomValuesAreSeededAndInRange) {
  const auto a = random_uniform(1000, 42);
  EXPECT_EQ(a, random_uniform(1000, 42));
  EXPECT_NE(a, random_uniform(1000, 43));
  for (const float v : a) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_NE(seed_from("a"), seed_from("b"));
}

TEST(TestSupport, RandomTensorIsRoundedToItsDtype) {
  // bf16 keeps 8 significant bits: every stored value times 2^k is an integer below 256.
  const Tensor t = random_tensor(Dims{64}, DType::bf16, Layout::channels_first, 1);
  for (const float v : t.to_f32()) {
    int exponent = 0;
    const double mantissa = std::frexp(static_cast<double>(v), &exponent);
    EXPECT_EQ(std::ldexp(mantissa, 8), std::trunc(std::ldexp(mantissa, 8))) << v;
  }
}

TEST(TestSupport, AllFiniteCatchesNanAndInf) {
  const Dims dims{2, 3};
  EXPECT_TRUE(all_finite(std::vector<float>{1, 2, 3, 4, 5, 6}, dims, "x", "ctx"));
  auto with_nan = all_finite(std::vector<float>{1, 2, 3, std::nanf(""), 5, 6}, dims, "x", "ctx");
  EXPECT_FALSE(with_nan);
  EXPECT_NE(std::string(with_nan.message()).find("x[1,0]"), std::string::npos) << with_nan.message();
  EXPECT_FALSE(all_finite(std::vector<float>{1, 2, 3, 4, INFINITY, 6}, dims, "x", "ctx"));
}

TEST(TestSupport, CloseWithinScaleUsesThePerElementBound) {
  const Dims dims{3};
  const std::vector<float> expected{1.0f, 0.0f, -2.0f};
  const std::vector<float> scale{10.0f, 0.0f, 1.0f};
  const Tolerance tolerance{1e-3, 0.0};
  EXPECT_TRUE(close_within_scale({1.009f, 0.0f, -2.0009f}, expected, scale, dims, tolerance, "y", "ctx"));
  // Over the bound of element 0 (1e-2), exact zero demanded where scale is 0.
  const auto far = close_within_scale({1.02f, 0.0f, -2.0f}, expected, scale, dims, tolerance, "y", "repro-line");
  EXPECT_FALSE(far);
  EXPECT_NE(std::string(far.message()).find("repro-line"), std::string::npos);
  EXPECT_FALSE(close_within_scale({1.0f, 1e-30f, -2.0f}, expected, scale, dims, tolerance, "y", "ctx"));
  EXPECT_FALSE(close_within_scale({1.0f, 0.0f}, expected, scale, dims, tolerance, "y", "ctx"));
}

TEST(TestSupport, BitwiseEqualSeesOneUlp) {
  Tensor a = tensor_from(Dims{4}, DType::f32, Layout::channels_first, {1, 2, 3, 4});
  Tensor b = tensor_from(Dims{4}, DType::f32, Layout::channels_first, {1, 2, 3, 4});
  EXPECT_TRUE(bitwise_equal(a, b, "t", "ctx"));
  Tensor c = tensor_from(Dims{4}, DType::f32, Layout::channels_first,
                         {1, 2, std::nextafter(3.0f, 4.0f), 4});
  EXPECT_FALSE(bitwise_equal(a, c, "t", "ctx"));
}

TEST(TestSupport, NpyRoundTrip) {
  const std::string path = (std::filesystem::temp_directory_path() / "dnnx_npy_roundtrip.npy").string();
  const std::vector<std::int64_t> shape{2, 3, 4};
  const std::vector<float> data = random_uniform(24, 5);
  write_npy(path, shape, data);
  const NpyArray back = read_npy(path);
  EXPECT_EQ(back.shape, shape);
  EXPECT_EQ(back.data, data);
  write_npy(path, {5}, random_uniform(5, 6));
  EXPECT_EQ(read_npy(path).shape, (std::vector<std::int64_t>{5}));
  EXPECT_THROW(write_npy(path, {2, 2}, random_uniform(3, 6)), std::runtime_error);
  std::remove(path.c_str());
  EXPECT_THROW(read_npy(path), std::runtime_error);
}

}  // namespace
}  // namespace dnnx::test
