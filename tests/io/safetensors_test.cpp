// safetensors: round trips of every dtype, the layout the reference writer produces, and a table of
// malformed files, each a clear error.

#include <dnnx/dnnx.hpp>
#include <dnnx/safetensors.hpp>

#include "support/errors.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace dnnx::safetensors {
namespace {

using test::expect_error;

Tensor counting(const Dims& dims, DType dtype, Layout layout = Layout::channels_first) {
  Tensor tensor = Tensor::empty(dims, dtype, layout);
  std::vector<float> values(static_cast<std::size_t>(tensor.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  if (is_floating(dtype)) {
    tensor.copy_from_f32(values);
  } else {
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::i32)
        static_cast<std::int32_t*>(tensor.data())[i] = static_cast<std::int32_t>(i) - 5;
      else
        static_cast<std::int64_t*>(tensor.data())[i] =
            (std::int64_t{1} << 40) - static_cast<std::int64_t>(i);
    }
  }
  return tensor;
}

std::vector<std::byte> bytes_of(const Tensor& dense) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(dense.numel()) * size_of(dense.dtype()));
  if (!bytes.empty()) std::memcpy(bytes.data(), dense.data(), bytes.size());
  return bytes;
}

TEST(Safetensors, RoundTripsEveryDtype) {
  File file;
  file.set("conv.weight", counting({4, 3, 2, 2}, DType::f32));
  file.set("bn.running_mean", counting({7}, DType::f16));
  file.set("fc.weight", counting({3, 5}, DType::bf16));
  file.set("labels", counting({6}, DType::i32));
  file.set("bn.num_batches_tracked", counting({}, DType::i64));
  file.set("empty", counting({0, 3}, DType::f32));
  Entry raw;
  raw.dtype = "F64";
  raw.shape = {2};
  const double doubles[2] = {1.0 / 3.0, -2.5};
  raw.data.resize(16);
  std::memcpy(raw.data.data(), doubles, 16);
  file.set("doubles", raw);
  file.set("bytes", Entry{"U8", {3}, {std::byte{1}, std::byte{2}, std::byte{255}}});
  file.metadata()["format"] = "pt";

  const std::vector<std::byte> bytes = file.serialize();
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  const auto json = nlohmann::ordered_json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes.data()) + 8, header));
  // Note [safetensors layout]: metadata first, then by alignment, largest first, then by name.
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"__metadata__", "bn.num_batches_tracked", "doubles",
                                            "conv.weight", "empty", "labels", "fc.weight",
                                            "bn.running_mean", "bytes"}));
  for (const auto& item : json.items()) {
    if (item.key() == "__metadata__") continue;
    const std::uint64_t begin = item.value()["data_offsets"][0];
    EXPECT_EQ(begin % dtype_size(item.value()["dtype"].get<std::string>()), 0u) << item.key();
  }

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dnnx_st_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  file.write(path);
  const File back = load(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.names(), file.names());
  EXPECT_EQ(back.metadata(), file.metadata());
  EXPECT_EQ(back.source(), path);
  for (const std::string& name : file.names()) {
    EXPECT_EQ(back.entry(name).dtype, file.entry(name).dtype) << name;
    EXPECT_EQ(back.entry(name).shape, file.entry(name).shape) << name;
    EXPECT_EQ(back.entry(name).data, file.entry(name).data) << name;
  }
  const Tensor weight = back.tensor("conv.weight");
  EXPECT_EQ(weight.dims(), (Dims{4, 3, 2, 2}));
  EXPECT_EQ(weight.to_f32(), counting({4, 3, 2, 2}, DType::f32).to_f32());
  EXPECT_EQ(back.tensor("bn.num_batches_tracked").rank(), 0);
  EXPECT_EQ(back.tensor("empty").numel(), 0);
  EXPECT_EQ(File::parse(bytes).serialize(), bytes);
  expect_error(ErrorKind::Unsupported, {"doubles", "F64"}, [&] { back.tensor("doubles"); });
  expect_error(ErrorKind::InvalidArgument, {"missing", path}, [&] { back.tensor("missing"); });
}

TEST(Safetensors, StridedTensorsAreWrittenInLogicalOrder) {
  const Tensor nchw = counting({2, 3, 4, 5}, DType::f32);
  Tensor nhwc = Tensor::empty(nchw.dims(), DType::f32, Layout::channels_last);
  copy(nchw, nhwc);
  File file;
  file.set("nhwc", nhwc);
  EXPECT_EQ(file.entry("nhwc").data, bytes_of(nchw));
  Tensor target = Tensor::empty(nchw.dims(), DType::f32, Layout::channels_last);
  file.copy_to("nhwc", target);
  EXPECT_EQ(target.to_f32(), nchw.to_f32());
  Tensor wrong = Tensor::empty({2, 3, 4, 4}, DType::f32);
  expect_error(ErrorKind::InvalidArgument, {"nhwc", "F32 [2, 3, 4, 5]", "2x3x4x4"},
               [&] { file.copy_to("nhwc", wrong); });
  Tensor wrong_dtype = Tensor::empty(nchw.dims(), DType::f16);
  expect_error(ErrorKind::InvalidArgument, {"f16"}, [&] { file.copy_to("nhwc", wrong_dtype); });
}

TEST(Safetensors, BadEntries) {
  File file;
  expect_error(ErrorKind::InvalidArgument, {"__metadata__", "reserved"}, [&] {
    file.set("__metadata__", Entry{"U8", {1}, {std::byte{0}}});
  });
  expect_error(ErrorKind::Unsupported, {"'Q8'", "BF16"}, [&] {
    file.set("q", Entry{"Q8", {1}, {std::byte{0}}});
  });
  expect_error(ErrorKind::InvalidArgument, {"'x'", "needs 8 bytes", "has 4"}, [&] {
    file.set("x", Entry{"F32", {2}, std::vector<std::byte>(4)});
  });
  expect_error(ErrorKind::InvalidArgument, {"given twice"}, [] {
    save("/nonexistent/x.safetensors",
         {{"a", counting({1}, DType::f32)}, {"a", counting({1}, DType::f32)}});
  });
  expect_error(ErrorKind::InvalidArgument, {"/nonexistent/dir/x.safetensors"}, [] {
    save("/nonexistent/dir/x.safetensors", {{"a", counting({1}, DType::f32)}});
  });
  expect_error(ErrorKind::InvalidArgument, {"/nonexistent/y.safetensors", "cannot open"},
               [] { load("/nonexistent/y.safetensors"); });
}

// A file made of a header text and `data` bytes, the length field `length` (the header's by
// default).
std::vector<std::byte> make(const std::string& header, std::size_t data,
                            std::optional<std::uint64_t> length = std::nullopt) {
  std::vector<std::byte> bytes(8 + header.size() + data, std::byte{0});
  const std::uint64_t n = length.value_or(header.size());
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

struct Malformed {
  std::string name;
  std::vector<std::byte> bytes;
  ErrorKind kind;
  std::vector<std::string> needles;
};

TEST(Safetensors, MalformedFiles) {
  const std::string ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<Malformed> cases = {
      {"short", std::vector<std::byte>(5), ErrorKind::InvalidArgument, {"5 bytes"}},
      {"huge header",
       make("{}", 0, std::uint64_t{1} << 40),
       ErrorKind::InvalidArgument,
       {"header length 1099511627776", "limit"}},
      {"header past end",
       make("{}", 0, 64),
       ErrorKind::InvalidArgument,
       {"header length 64", "past the end"}},
      {"not an object start", make("[1,2]   ", 0), ErrorKind::InvalidArgument, {"'{'"}},
      {"bad json", make("{\"a\":", 0), ErrorKind::InvalidArgument, {"not valid JSON"}},
      {"duplicate",
       make("{" + ok + "," + ok + "}", 8),
       ErrorKind::InvalidArgument,
       {"'a' more than once"}},
      {"entry not object",
       make(R"({"a":3})", 0),
       ErrorKind::InvalidArgument,
       {"'a'", "not an object"}},
      {"no dtype",
       make(R"({"a":{"shape":[],"data_offsets":[0,0]}})", 0),
       ErrorKind::InvalidArgument,
       {"'a' has no dtype"}},
      {"no offsets",
       make(R"({"a":{"dtype":"F32","shape":[]}})", 4),
       ErrorKind::InvalidArgument,
       {"'a' has no data_offsets"}},
      {"unknown dtype",
       make(R"({"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", 1),
       ErrorKind::Unsupported,
       {"'F7'"}},
      {"dtype not string",
       make(R"({"a":{"dtype":1,"shape":[1],"data_offsets":[0,1]}})", 1),
       ErrorKind::InvalidArgument,
       {"dtype is 1"}},
      {"negative shape",
       make(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1),
       ErrorKind::InvalidArgument,
       {"shape holds -1"}},
      {"shape not array",
       make(R"({"a":{"dtype":"U8","shape":3,"data_offsets":[0,1]}})", 1),
       ErrorKind::InvalidArgument,
       {"shape is 3"}},
      {"offsets of one",
       make(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1),
       ErrorKind::InvalidArgument,
       {"data_offsets is [0]"}},
      {"size mismatch",
       make(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       ErrorKind::InvalidArgument,
       {"needs 12 bytes", "hold 8"}},
      {"past the data",
       make(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       ErrorKind::InvalidArgument,
       {"[0, 8]", "4 bytes of data"}},
      {"reversed",
       make(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", 2),
       ErrorKind::InvalidArgument,
       {"[2, 1]"}},
      {"hole",
       make(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4),
       ErrorKind::InvalidArgument,
       {"'a' starts at byte 2", "hole"}},
      {"overlap",
       make(
           R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
           3),
       ErrorKind::InvalidArgument,
       {"'b' starts at byte 1", "inside"}},
      {"trailing data",
       make("{" + ok + "}", 12),
       ErrorKind::InvalidArgument,
       {"cover 8 bytes", "has 12"}},
      {"metadata not object",
       make(R"({"__metadata__":[1]})", 0),
       ErrorKind::InvalidArgument,
       {"__metadata__ is array"}},
      {"metadata not strings",
       make(R"({"__metadata__":{"k":1}})", 0),
       ErrorKind::InvalidArgument,
       {"entry 'k'", "not a string"}},
  };
  for (const Malformed& bad : cases) {
    SCOPED_TRACE(bad.name);
    std::vector<std::string> needles = bad.needles;
    needles.push_back("test.safetensors");
    expect_error(bad.kind, needles, [&] { File::parse(bad.bytes, "test.safetensors"); });
  }
  // Spaces after the JSON object are padding, and an empty file of tensors is valid.
  EXPECT_TRUE(File::parse(make("{}      ", 0)).names().empty());
  EXPECT_EQ(File::parse(make("{" + ok + "}  ", 8)).names(), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace dnnx::safetensors
