// The data layer: IDX files (plain and gzip), their errors, Fashion-MNIST as Debian ships it, the
// synthetic dataset, shuffling, and the background loader.

#include <dnnx/data.hpp>
#include <dnnx/dnnx.hpp>

#include "support/errors.hpp"
#include "support/gpu.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace dnnx::data {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

class Scratch {
 public:
  Scratch() {
    path_ = fs::temp_directory_path() /
            ("dnnx_data_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path_);
  }
  ~Scratch() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::uint8_t type = 0x08,
                                    std::int64_t extra = 0) {
  std::vector<std::uint8_t> bytes = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  std::int64_t count = 1;
  for (const std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back((d >> shift) & 0xff);
    count *= d;
  }
  for (std::int64_t i = 0; i < count + extra; ++i)
    bytes.push_back(static_cast<std::uint8_t>(i * 7));
  return bytes;
}

void write_plain(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

std::vector<std::uint8_t> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Idx, ReadsPlainAndGzip) {
  const Scratch scratch;
  const std::vector<std::uint8_t> bytes = idx_bytes({3, 4, 5});
  write_plain(scratch.file("a.idx"), bytes);
  write_gzip(scratch.file("a.idx.gz"), bytes);
  for (const std::string name : {"a.idx", "a.idx.gz"}) {
    const IdxArray array = read_idx(scratch.file(name));
    EXPECT_EQ(array.dims, (std::vector<std::int64_t>{3, 4, 5}));
    ASSERT_EQ(array.data.size(), 60u);
    for (std::size_t i = 0; i < 60; ++i) EXPECT_EQ(array.data[i], static_cast<std::uint8_t>(i * 7));
  }
}

TEST(Idx, BadFilesNameThePath) {
  const Scratch scratch;
  const std::string missing = scratch.file("missing.gz");
  expect_error(ErrorKind::InvalidArgument, {missing, "cannot open"}, [&] { read_idx(missing); });

  const std::string magic = scratch.file("magic.idx");
  std::vector<std::uint8_t> bytes = idx_bytes({2, 2});
  bytes[0] = 0x1f;
  write_plain(magic, bytes);
  expect_error(ErrorKind::InvalidArgument, {magic, "bad magic"}, [&] { read_idx(magic); });

  const std::string type = scratch.file("type.idx");
  write_plain(type, idx_bytes({2, 2}, 0x0d));
  expect_error(ErrorKind::Unsupported, {type, "0x0d"}, [&] { read_idx(type); });

  const std::string short_data = scratch.file("short.idx");
  write_plain(short_data, idx_bytes({4, 4}, 0x08, -3));
  expect_error(ErrorKind::InvalidArgument, {short_data, "need 16 bytes", "has 13", "truncated"},
               [&] { read_idx(short_data); });

  const std::string long_data = scratch.file("long.idx.gz");
  write_gzip(long_data, idx_bytes({4, 4}, 0x08, 2));
  expect_error(ErrorKind::InvalidArgument, {long_data, "has 18", "trailing"},
               [&] { read_idx(long_data); });

  const std::string short_header = scratch.file("header.idx");
  write_plain(short_header, {0, 0, 8, 3, 0, 0});
  expect_error(ErrorKind::InvalidArgument, {short_header, "truncated", "needs 16"},
               [&] { read_idx(short_header); });
}

TEST(Idx, CorruptAndTruncatedGzip) {
  const Scratch scratch;
  const std::string good = scratch.file("good.gz");
  write_gzip(good, idx_bytes({64, 64}));
  const std::vector<std::uint8_t> compressed = read_raw(good);
  ASSERT_GT(compressed.size(), 40u);

  const std::string cut = scratch.file("cut.gz");
  write_plain(cut, std::vector<std::uint8_t>(compressed.begin(),
                                             compressed.begin() + compressed.size() / 2));
  expect_error(ErrorKind::InvalidArgument, {cut, "gzip"}, [&] { read_idx(cut); });

  const std::string corrupt = scratch.file("corrupt.gz");
  std::vector<std::uint8_t> flipped = compressed;
  for (std::size_t i = 12; i < 24; ++i) flipped[i] ^= 0x5a;
  write_plain(corrupt, flipped);
  expect_error(ErrorKind::InvalidArgument, {corrupt}, [&] { read_idx(corrupt); });
}

TEST(Mnist, PairsAreChecked) {
  const Scratch scratch;
  const std::string images = scratch.file("images.gz");
  const std::string labels = scratch.file("labels.gz");
  write_gzip(images, idx_bytes({3, 2, 2}));
  std::vector<std::uint8_t> label_bytes = {0, 0, 8, 1, 0, 0, 0, 3, 1, 9, 4};
  write_gzip(labels, label_bytes);
  const MnistDataset dataset(images, labels);
  EXPECT_EQ(dataset.size(), 3);
  EXPECT_EQ(dataset.image_dims(), (Dims{1, 2, 2}));
  std::vector<float> image(4);
  EXPECT_EQ(dataset.get(1, image), 9);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(image[static_cast<std::size_t>(j)], static_cast<std::uint8_t>((4 + j) * 7) / 255.0f);
  }
  expect_error(ErrorKind::InvalidArgument, {"index 3", "[0, 3)"}, [&] { dataset.get(3, image); });

  const std::string wrong_count = scratch.file("labels4.gz");
  write_gzip(wrong_count, {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4});
  expect_error(ErrorKind::InvalidArgument, {images, wrong_count, "3 images", "4 labels"},
               [&] { MnistDataset(images, wrong_count); });
  const std::string bad_label = scratch.file("labels_bad.gz");
  write_gzip(bad_label, {0, 0, 8, 1, 0, 0, 0, 3, 1, 10, 4});
  expect_error(ErrorKind::InvalidArgument, {bad_label, "label 10", "sample 1"},
               [&] { MnistDataset(images, bad_label); });
  expect_error(ErrorKind::InvalidArgument, {labels, "3 dimensions"},
               [&] { MnistDataset(labels, labels); });
}

TEST(FashionMnist, DebianPackage) {
  const std::string dir = default_fashion_mnist_dir();
  if (!fs::exists(fs::path(dir) / "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir
                 << " (Debian package dataset-fashion-mnist)";
  }
  const auto test = fashion_mnist(Split::test);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(test->image_dims(), (Dims{1, 28, 28}));
  EXPECT_EQ(test->classes(), 10);
  std::vector<std::int64_t> histogram(10);
  std::vector<float> image(784);
  for (std::int64_t i = 0; i < test->size(); ++i)
    ++histogram[static_cast<std::size_t>(test->get(i, image))];
  for (const std::int64_t count : histogram) EXPECT_EQ(count, 1000);
  const auto train = fashion_mnist(Split::train);
  EXPECT_EQ(train->size(), 60000);
  const Stats stats = compute_stats(*train);
  EXPECT_NEAR(stats.mean[0], fashion_mnist_mean, 5e-4);
  EXPECT_NEAR(stats.std[0], fashion_mnist_std, 5e-4);
  expect_error(ErrorKind::InvalidArgument, {"/nonexistent/fm", "dataset-fashion-mnist"},
               [] { fashion_mnist(Split::train, "/nonexistent/fm"); });
}

TEST(Synthetic, DeterministicFromSeed) {
  const SyntheticDataset a(50, {3, 5, 7}, 4, 11);
  const SyntheticDataset b(50, {3, 5, 7}, 4, 11);
  const SyntheticDataset c(50, {3, 5, 7}, 4, 12);
  std::vector<float> x(105), y(105), z(105);
  std::set<std::int32_t> labels;
  int differ = 0;
  for (std::int64_t i = 0; i < 50; ++i) {
    const std::int32_t label = a.get(i, x);
    EXPECT_EQ(label, b.get(i, y));
    c.get(i, z);
    EXPECT_EQ(x, y);
    differ += x != z;
    labels.insert(label);
    for (std::size_t j = 0; j < x.size(); ++j) {
      const bool marked = static_cast<std::int64_t>(j % 35) % 4 == label;
      EXPECT_GE(x[j], marked ? 0.5f : 0.0f);
      EXPECT_LT(x[j], marked ? 1.0f : 0.5f);
    }
  }
  EXPECT_EQ(differ, 50);
  EXPECT_EQ(labels.size(), 4u);
  expect_error(ErrorKind::InvalidArgument, {"image dims", "2x3"}, [] {
    SyntheticDataset(4, {2, 3}, 2);
  });
  expect_error(ErrorKind::InvalidArgument, {"classes 0"}, [] {
    SyntheticDataset(4, {1, 2, 3}, 0);
  });
}

TEST(Shuffle, PermutationPerEpoch) {
  const std::vector<std::int64_t> first = epoch_order(1000, 7, 0);
  std::vector<std::int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(first, identity);
  EXPECT_EQ(first, epoch_order(1000, 7, 0));
  EXPECT_NE(first, epoch_order(1000, 7, 1));
  EXPECT_NE(first, epoch_order(1000, 8, 0));
  EXPECT_TRUE(epoch_order(0, 7, 0).empty());
}

// A dataset whose sample `bad` throws, to see the error cross the loader's thread.
class Failing final : public Dataset {
 public:
  explicit Failing(std::int64_t bad) : bad_(bad) {}
  std::int64_t size() const override { return 20; }
  Dims image_dims() const override { return {1, 1, 2}; }
  std::int64_t classes() const override { return 20; }
  std::int32_t get(std::int64_t index, std::span<float> image) const override {
    if (index == bad_) {
      throw Error(ErrorKind::InvalidArgument, "sample " + std::to_string(index) + " is broken");
    }
    image[0] = static_cast<float>(index);
    image[1] = static_cast<float>(-index);
    return static_cast<std::int32_t>(index);
  }

 private:
  std::int64_t bad_;
};

std::vector<std::int32_t> labels_of(const Batch& batch) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch.labels.numel()));
  std::copy_n(static_cast<const std::int32_t*>(batch.labels.data()), labels.size(), labels.begin());
  return labels;
}

TEST(Loader, EpochsCoverEverySampleOnce) {
  LoaderOptions options;
  options.batch_size = 6;
  options.seed = 3;
  options.prefetch = 2;
  DataLoader loader(std::make_shared<Failing>(-1), options);
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  std::vector<std::vector<std::int32_t>> epochs(3);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(loader.epoch(), epoch);
    std::int64_t index = 0;
    while (auto batch = loader.next()) {
      EXPECT_EQ(batch->epoch, epoch);
      EXPECT_EQ(batch->index, index++);
      EXPECT_EQ(batch->images.dims(), (Dims{batch->labels.dims()[0], 1, 1, 2}));
      EXPECT_EQ(batch->labels.dims()[0], index == 4 ? 2 : 6);
      const std::vector<float> pixels = batch->images.to_f32();
      const std::vector<std::int32_t> labels = labels_of(*batch);
      for (std::size_t i = 0; i < labels.size(); ++i) {
        EXPECT_EQ(pixels[2 * i], static_cast<float>(labels[i]));
        EXPECT_EQ(pixels[2 * i + 1], -static_cast<float>(labels[i]));
      }
      epochs[static_cast<std::size_t>(epoch)].insert(epochs[static_cast<std::size_t>(epoch)].end(),
                                                     labels.begin(), labels.end());
    }
    EXPECT_EQ(index, 4);
    std::vector<std::int32_t> sorted = epochs[static_cast<std::size_t>(epoch)];
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int32_t> all(20);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NE(epochs[0], epochs[1]);

  // A loader started at epoch 2 (a resumed run) sees what the first saw there.
  DataLoader resumed(std::make_shared<Failing>(-1), options, 2);
  std::vector<std::int32_t> again;
  while (auto batch = resumed.next()) {
    const std::vector<std::int32_t> labels = labels_of(*batch);
    again.insert(again.end(), labels.begin(), labels.end());
  }
  EXPECT_EQ(again, epochs[2]);

  options.drop_last = true;
  options.shuffle = false;
  DataLoader dropping(std::make_shared<Failing>(-1), options);
  EXPECT_EQ(dropping.batches_per_epoch(), 3);
  std::vector<std::int32_t> in_order;
  while (auto batch = dropping.next()) {
    const std::vector<std::int32_t> labels = labels_of(*batch);
    in_order.insert(in_order.end(), labels.begin(), labels.end());
  }
  std::vector<std::int32_t> first18(18);
  std::iota(first18.begin(), first18.end(), 0);
  EXPECT_EQ(in_order, first18);
}

TEST(Loader, NormalisesAndConverts) {
  const auto dataset = std::make_shared<SyntheticDataset>(10, Dims{3, 4, 5}, 3, 5);
  LoaderOptions options;
  options.batch_size = 4;
  options.shuffle = false;
  options.mean = {0.1f, 0.2f, 0.3f};
  options.std = {0.5f, 0.25f, 2.0f};
  DataLoader plain(dataset, options);
  const auto batch = plain.next();
  ASSERT_TRUE(batch);
  const std::vector<float> values = batch->images.to_f32();
  std::vector<float> image(60);
  for (std::int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(static_cast<const std::int32_t*>(batch->labels.data())[i], dataset->get(i, image));
    for (std::size_t j = 0; j < 60; ++j) {
      const std::size_t c = j / 20;
      EXPECT_FLOAT_EQ(values[static_cast<std::size_t>(i) * 60 + j],
                      (image[j] - options.mean[c]) * (1.0f / options.std[c]));
    }
  }
  for (const DType dtype : {DType::f16, DType::bf16}) {
    LoaderOptions converted = options;
    converted.dtype = dtype;
    converted.label_dtype = DType::i64;
    converted.layout = Layout::channels_last;
    DataLoader loader(dataset, converted);
    const auto other = loader.next();
    ASSERT_TRUE(other);
    EXPECT_EQ(other->images.dtype(), dtype);
    EXPECT_TRUE(other->images.is_dense(Layout::channels_last));
    EXPECT_EQ(other->labels.dtype(), DType::i64);
    const std::vector<float> rounded = other->images.to_f32();
    const float tolerance = dtype == DType::f16 ? 1e-3f : 8e-3f;
    for (std::size_t j = 0; j < values.size(); ++j) {
      EXPECT_NEAR(rounded[j], values[j], tolerance * (1 + std::abs(values[j]))) << j;
    }
  }
}

TEST(Loader, ErrorsReachTheConsumer) {
  LoaderOptions options;
  options.batch_size = 4;
  options.shuffle = false;
  DataLoader loader(std::make_shared<Failing>(9), options);
  ASSERT_TRUE(loader.next());
  ASSERT_TRUE(loader.next());
  expect_error(ErrorKind::InvalidArgument, {"sample 9 is broken"}, [&] { loader.next(); });
  expect_error(ErrorKind::InvalidArgument, {"sample 9 is broken"}, [&] { loader.next(); });
}

TEST(Loader, StopsWithAFullQueue) {
  const auto dataset = std::make_shared<SyntheticDataset>(1000, Dims{1, 8, 8}, 10, 1);
  for (const std::size_t prefetch : {1u, 3u}) {
    LoaderOptions options;
    options.batch_size = 7;
    options.prefetch = prefetch;
    DataLoader loader(dataset, options);
    ASSERT_TRUE(loader.next());
  }
  LoaderOptions options;
  DataLoader never_read(dataset, options);
}

TEST(Loader, BadOptions) {
  const auto dataset = std::make_shared<SyntheticDataset>(10, Dims{2, 2, 2}, 3);
  const auto make = [&](auto change) {
    return [=] {
      LoaderOptions options;
      change(options);
      DataLoader loader(dataset, options);
    };
  };
  expect_error(ErrorKind::InvalidArgument, {"batch_size 0"},
               make([](LoaderOptions& o) { o.batch_size = 0; }));
  expect_error(ErrorKind::InvalidArgument, {"prefetch"},
               make([](LoaderOptions& o) { o.prefetch = 0; }));
  expect_error(ErrorKind::InvalidArgument, {"image dtype i32"},
               make([](LoaderOptions& o) { o.dtype = DType::i32; }));
  expect_error(ErrorKind::InvalidArgument, {"label dtype f32"},
               make([](LoaderOptions& o) { o.label_dtype = DType::f32; }));
  expect_error(ErrorKind::InvalidArgument, {"mean has 3 entries", "1 or 2"},
               make([](LoaderOptions& o) {
                 o.mean = {1, 2, 3};
                 o.std = {1, 2, 3};
               }));
  expect_error(ErrorKind::InvalidArgument, {"std[0] = 0"}, make([](LoaderOptions& o) {
                 o.mean = {0};
                 o.std = {0};
               }));
  expect_error(ErrorKind::InvalidArgument, {"dataset is null"},
               [] { DataLoader loader(nullptr, LoaderOptions{}); });
}

TEST(Loader, DeviceBatches) {
  DNNX_REQUIRE_GPU();
  const auto dataset = std::make_shared<SyntheticDataset>(10, Dims{1, 4, 4}, 3, 2);
  LoaderOptions options;
  options.batch_size = 4;
  options.shuffle = false;
  LoaderOptions on_device = options;
  on_device.device = test::gpu_test_context();
  DataLoader host(dataset, options);
  DataLoader device(dataset, on_device);
  const auto a = host.next();
  const auto b = device.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->images.device().kind, Device::Kind::cuda);
  EXPECT_EQ(test::host_copy_of(b->images).to_f32(), a->images.to_f32());
  EXPECT_EQ(labels_of(Batch{test::host_copy_of(b->labels), test::host_copy_of(b->labels)}),
            labels_of(*a));
}

}  // namespace
}  // namespace dnnx::data
