// The datasets: MNIST-format file pairs, Fashion-MNIST's files, and the synthetic set.

#include <dnnx/data.hpp>

#include "core/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace dnnx::data {
namespace {

using detail::cat;
using detail::raise;

void check_sample(std::int64_t index, std::int64_t size, std::span<float> image,
                  std::int64_t pixels) {
  if (index < 0 || index >= size) {
    raise(ErrorKind::InvalidArgument, cat("sample index ", index, " is outside [0, ", size, ")"));
  }
  if (static_cast<std::int64_t>(image.size()) != pixels) {
    raise(ErrorKind::InvalidArgument,
          cat("image buffer has ", image.size(), " values; a sample has ", pixels));
  }
}

// splitmix64's output function: a bijective mix, good enough to drive shuffles and synthetic data.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

MnistDataset::MnistDataset(const std::string& images_path, const std::string& labels_path,
                           std::int64_t classes)
    : classes_(classes) {
  if (classes < 1 || classes > 256) {
    raise(ErrorKind::InvalidArgument,
          cat("classes ", classes, " is outside [1, 256] (labels are bytes)"));
  }
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) {
    raise(ErrorKind::InvalidArgument,
          cat("'", images_path, "': images must have 3 dimensions (N, H, W), the file has ",
              images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    raise(ErrorKind::InvalidArgument,
          cat("'", labels_path, "': labels must have 1 dimension (N), the file has ",
              labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    raise(ErrorKind::InvalidArgument,
          cat("'", images_path, "' holds ", images.dims[0], " images but '", labels_path,
              "' holds ", labels.dims[0], " labels"));
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= classes) {
      raise(ErrorKind::InvalidArgument, cat("'", labels_path, "': label ", int{labels.data[i]},
                                            " of sample ", i, " is outside [0, ", classes, ")"));
    }
  }
  size_ = images.dims[0];
  height_ = images.dims[1];
  width_ = images.dims[2];
  pixels_ = std::move(images.data);
  labels_ = std::move(labels.data);
}

std::int32_t MnistDataset::get(std::int64_t index, std::span<float> image) const {
  const std::int64_t pixels = height_ * width_;
  check_sample(index, size_, image, pixels);
  const std::uint8_t* source = pixels_.data() + index * pixels;
  for (std::int64_t j = 0; j < pixels; ++j) image[static_cast<std::size_t>(j)] = source[j] / 255.0f;
  return labels_[static_cast<std::size_t>(index)];
}

std::string default_fashion_mnist_dir() {
  if (const char* dir = std::getenv("DNNX_FASHION_MNIST"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return "/usr/share/datasets/fashion-mnist";
}

std::shared_ptr<MnistDataset> fashion_mnist(Split split, const std::string& dir) {
  const std::filesystem::path folder = dir.empty() ? default_fashion_mnist_dir() : dir;
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const auto file = [&](const std::string& name) {
    const std::filesystem::path gz = folder / (name + ".gz");
    if (!std::filesystem::exists(gz) && std::filesystem::exists(folder / name)) {
      return (folder / name).string();
    }
    return gz.string();
  };
  const std::string images = file(prefix + "-images-idx3-ubyte");
  const std::string labels = file(prefix + "-labels-idx1-ubyte");
  if (!std::filesystem::exists(images)) {
    raise(ErrorKind::InvalidArgument,
          cat("Fashion-MNIST file '", images,
              "' does not exist (install Debian's dataset-fashion-mnist, or point "
              "DNNX_FASHION_MNIST or the data path at a folder holding the four IDX files)"));
  }
  return std::make_shared<MnistDataset>(images, labels, 10);
}

SyntheticDataset::SyntheticDataset(std::int64_t size, const Dims& image_dims, std::int64_t classes,
                                   std::uint64_t seed)
    : size_(size), image_dims_(image_dims), classes_(classes), seed_(seed) {
  if (size < 0) raise(ErrorKind::InvalidArgument, cat("synthetic size ", size, " is negative"));
  bool ok = image_dims.rank() == 3;
  for (const std::int64_t d : image_dims) ok = ok && d >= 1 && d <= detail::max_dim_size;
  if (!ok) {
    raise(ErrorKind::InvalidArgument, cat("synthetic image dims ", image_dims,
                                          " must be C x H x W with each size in [1, 2^31]"));
  }
  detail::checked_count(image_dims, "synthetic image dims");
  if (classes < 1 || classes > std::int64_t{1} << 31) {
    raise(ErrorKind::InvalidArgument, cat("synthetic classes ", classes, " is outside [1, 2^31)"));
  }
}

std::int32_t SyntheticDataset::get(std::int64_t index, std::span<float> image) const {
  const std::int64_t plane = image_dims_[1] * image_dims_[2];
  check_sample(index, size_, image, image_dims_[0] * plane);
  const std::uint64_t sample = mix(seed_ ^ mix(static_cast<std::uint64_t>(index)));
  const auto label = static_cast<std::int64_t>(sample % static_cast<std::uint64_t>(classes_));
  for (std::int64_t c = 0; c < image_dims_[0]; ++c) {
    const std::uint64_t channel = mix(sample + static_cast<std::uint64_t>(c));
    for (std::int64_t j = 0; j < plane; ++j) {
      const std::uint64_t bits = mix(channel + static_cast<std::uint64_t>(j));
      const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
      image[static_cast<std::size_t>(c * plane + j)] =
          0.5f * u + (j % classes_ == label ? 0.5f : 0.0f);
    }
  }
  return static_cast<std::int32_t>(label);
}

Stats compute_stats(const Dataset& dataset, std::int64_t limit) {
  const Dims dims = dataset.image_dims();
  const std::int64_t count = limit < 0 ? dataset.size() : std::min(limit, dataset.size());
  const std::int64_t plane = dims[1] * dims[2];
  std::vector<float> image(static_cast<std::size_t>(dims[0] * plane));
  std::vector<double> sum(static_cast<std::size_t>(dims[0])), squares(sum.size());
  for (std::int64_t i = 0; i < count; ++i) {
    dataset.get(i, image);
    for (std::int64_t c = 0; c < dims[0]; ++c) {
      for (std::int64_t j = 0; j < plane; ++j) {
        const double x = image[static_cast<std::size_t>(c * plane + j)];
        sum[static_cast<std::size_t>(c)] += x;
        squares[static_cast<std::size_t>(c)] += x * x;
      }
    }
  }
  Stats stats;
  const double n = static_cast<double>(count) * static_cast<double>(plane);
  for (std::size_t c = 0; c < sum.size(); ++c) {
    const double mean = n > 0 ? sum[c] / n : 0.0;
    const double variance = n > 0 ? std::max(0.0, squares[c] / n - mean * mean) : 0.0;
    stats.mean.push_back(static_cast<float>(mean));
    stats.std.push_back(static_cast<float>(std::sqrt(variance)));
  }
  return stats;
}

std::vector<std::int64_t> epoch_order(std::int64_t size, std::uint64_t seed, std::int64_t epoch) {
  if (size < 0) raise(ErrorKind::InvalidArgument, cat("dataset size ", size, " is negative"));
  std::vector<std::int64_t> order(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) order[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = mix(seed) ^ mix(static_cast<std::uint64_t>(epoch) + 0x5851f42d4c957f2dULL);
  for (std::int64_t i = size - 1; i > 0; --i) {
    state = mix(state);
    // Lemire's multiply-shift: uniform enough for i + 1 far below 2^64, and the same everywhere.
    const auto j = static_cast<std::int64_t>(
        (static_cast<unsigned __int128>(state) * static_cast<unsigned __int128>(i + 1)) >> 64);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

}  // namespace dnnx::data
