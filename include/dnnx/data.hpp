#pragma once
/// \file
/// Training data: MNIST-format (IDX) files, Fashion-MNIST as Debian's dataset-fashion-mnist ships
/// it, a deterministic synthetic dataset of any image size, and a loader that shuffles with a
/// seed, normalises and batches on a background thread into dnnx Tensors.

#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace dnnx::data {

/// The contents of one IDX file (the MNIST format: big-endian magic 0x0000TTRR, RR dimension
/// sizes, then the elements row-major). Only element type 0x08 (unsigned byte) is read, the type
/// of every MNIST-format file.
struct IdxArray {
  std::vector<std::int64_t> dims;  ///< sizes, outermost first (N, H, W for images; N for labels)
  std::vector<std::uint8_t> data;  ///< product(dims) bytes, row-major
};

/// Reads an IDX file, gzip-compressed (as shipped, `.gz`) or not: zlib tells them apart. Throws
/// InvalidArgument naming `path` when the file is missing or unreadable, the gzip stream is
/// corrupt or truncated, the magic is wrong, or the element count does not match the dimensions
/// (too few or too many bytes); Unsupported for an element type other than unsigned byte.
IdxArray read_idx(const std::string& path);

/// A random-access set of labelled images. Implementations are immutable after construction, so
/// one dataset may be read from several threads.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual std::int64_t size() const = 0;
  /// Image dims of one sample: C, H, W.
  virtual Dims image_dims() const = 0;
  /// Number of classes: every label is in [0, classes()).
  virtual std::int64_t classes() const = 0;
  /// Writes sample `index`'s image (C*H*W values, row-major C, H, W, before normalisation) into
  /// `image` and returns its label. Throws InvalidArgument for an index outside [0, size()) or an
  /// `image` of the wrong length.
  virtual std::int32_t get(std::int64_t index, std::span<float> image) const = 0;
};

/// Which half of a dataset.
enum class Split : std::uint8_t { train, test };

/// Images and labels of an MNIST-format pair of IDX files, held as bytes; get() scales a pixel p
/// to p / 255.
class MnistDataset final : public Dataset {
 public:
  /// Reads both files (read_idx). Throws InvalidArgument naming the path when the images are not
  /// N x H x W, the labels not N, the two N differ, or a label is >= `classes`.
  MnistDataset(const std::string& images_path, const std::string& labels_path,
               std::int64_t classes = 10);

  std::int64_t size() const override { return size_; }
  Dims image_dims() const override { return {1, height_, width_}; }
  std::int64_t classes() const override { return classes_; }
  std::int32_t get(std::int64_t index, std::span<float> image) const override;

 private:
  std::int64_t size_ = 0;
  std::int64_t height_ = 0;
  std::int64_t width_ = 0;
  std::int64_t classes_ = 0;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
};

/// Where Debian's dataset-fashion-mnist installs the files: $DNNX_FASHION_MNIST when set, else
/// /usr/share/datasets/fashion-mnist.
std::string default_fashion_mnist_dir();

/// Fashion-MNIST's train (60000) or test (10000) split from `dir` (default_fashion_mnist_dir()
/// when empty): {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz, or the same names without .gz.
std::shared_ptr<MnistDataset> fashion_mnist(Split split, const std::string& dir = {});

/// Fashion-MNIST's training-set pixel mean and standard deviation (of p / 255).
inline constexpr float fashion_mnist_mean = 0.2860f;
inline constexpr float fashion_mnist_std = 0.3530f;

/// Random images with a class-dependent signal, any size, a pure function of (seed, index): the
/// label of sample i is a hash of (seed, i) modulo `classes`; pixel j of channel c is
/// 0.5 * u + 0.5 * [j mod classes == label] with u uniform in [0, 1) hashed from (seed, i, c, j),
/// so that a network can learn it. For benchmarks and tests that need no files.
class SyntheticDataset final : public Dataset {
 public:
  /// Throws InvalidArgument naming the argument for size < 0, image dims not C, H, W with each
  /// >= 1, or classes outside [1, 2^31).
  SyntheticDataset(std::int64_t size, const Dims& image_dims, std::int64_t classes,
                   std::uint64_t seed = 0);

  std::int64_t size() const override { return size_; }
  Dims image_dims() const override { return image_dims_; }
  std::int64_t classes() const override { return classes_; }
  std::int32_t get(std::int64_t index, std::span<float> image) const override;

 private:
  std::int64_t size_;
  Dims image_dims_;
  std::int64_t classes_;
  std::uint64_t seed_;
};

/// Per-channel mean and standard deviation (population) of every pixel of `dataset`, computed in
/// f64 over the first `limit` samples (all when limit < 0). One entry per channel.
struct Stats {
  std::vector<float> mean;
  std::vector<float> std;
};
Stats compute_stats(const Dataset& dataset, std::int64_t limit = -1);

/// How a DataLoader batches.
struct LoaderOptions {
  std::int64_t batch_size = 64;  ///< samples per batch, >= 1
  bool shuffle = true;           ///< a new permutation every epoch, from (seed, epoch)
  std::uint64_t seed = 0;        ///< shuffling seed
  bool drop_last = false;        ///< skip the last, smaller batch of an epoch
  /// Normalisation x' = (x - mean[c]) / std[c]: one entry per channel, or one for every channel;
  /// both empty = none.
  std::vector<float> mean;
  std::vector<float> std;
  std::size_t prefetch = 4;                ///< batches prepared ahead, >= 1
  DType dtype = DType::f32;                ///< of the images: f32, f16 or bf16
  DType label_dtype = DType::i32;          ///< of the labels: i32 or i64
  Layout layout = Layout::channels_first;  ///< memory order of the images (NCHW or NHWC)
  /// Copies batches to this context's device (through its allocator and dnnx::copy); none or a
  /// host context = batches stay on the host.
  std::optional<Context> device;
};

/// One batch: images N x C x H x W (options.dtype, options.layout), labels N (options.label_dtype,
/// dense), on the host or the loader's device.
struct Batch {
  Tensor images;
  Tensor labels;
  std::int64_t epoch = 0;  ///< the epoch it belongs to
  std::int64_t index = 0;  ///< its position in the epoch, from 0
};

/// Batches of a dataset, epoch after epoch. A background thread shuffles, reads, normalises and
/// converts up to options.prefetch batches ahead of the consumer (a bounded queue), crossing into
/// the following epoch without a pause; the order of epoch e depends only on (seed, e), so a run
/// that starts at epoch e (resuming) sees the batches a run from 0 saw there. An exception on the
/// background thread is rethrown by next(); destroying the loader stops and joins the thread.
/// Not thread-safe: one consumer.
class DataLoader {
 public:
  /// Throws InvalidArgument naming the bad option (batch size, prefetch, dtypes, a mean/std whose
  /// length is neither 1 nor the channel count, a std entry <= 0, a null dataset).
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
             std::int64_t first_epoch = 0);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// The next batch of the current epoch, or nullopt once at the end of each epoch (the call after
  /// that returns the first batch of the following epoch). Device batches are copied on the
  /// caller's thread (dnnx::copy is ordered with the device's queued work).
  std::optional<Batch> next();
  /// The epoch next() is reading.
  std::int64_t epoch() const { return epoch_; }
  /// Batches in one epoch.
  std::int64_t batches_per_epoch() const;
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  struct Item {
    std::optional<Batch> batch;  // empty: end of epoch
    std::exception_ptr error;
  };
  void produce(std::int64_t first_epoch);
  Batch make_batch(std::span<const std::int64_t> indices, std::int64_t epoch,
                   std::int64_t index) const;

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  std::int64_t epoch_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread worker_;
};

/// The sample order of epoch `epoch` of a dataset of `size` samples shuffled with `seed`: a
/// Fisher-Yates permutation driven by splitmix64, the same on every platform.
std::vector<std::int64_t> epoch_order(std::int64_t size, std::uint64_t seed, std::int64_t epoch);

}  // namespace dnnx::data
