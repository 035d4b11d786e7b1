// The DataLoader: a producer thread fills a bounded queue with ready host batches, the consumer
// takes them (and copies them to the device) in next().

#include <dnnx/data.hpp>

#include "core/check.hpp"

#include <algorithm>

namespace dnnx::data {
namespace {

using detail::cat;
using detail::raise;

void check_options(const Dataset* dataset, const LoaderOptions& options) {
  if (dataset == nullptr) raise(ErrorKind::InvalidArgument, "DataLoader: dataset is null");
  if (options.batch_size < 1 || options.batch_size > detail::max_dim_size) {
    raise(ErrorKind::InvalidArgument,
          cat("DataLoader: batch_size ", options.batch_size, " is outside [1, 2^31]"));
  }
  if (options.prefetch < 1) {
    raise(ErrorKind::InvalidArgument, "DataLoader: prefetch 0; at least 1 batch must be queued");
  }
  if (!is_floating(options.dtype)) {
    raise(ErrorKind::InvalidArgument,
          cat("DataLoader: image dtype ", to_string(options.dtype), " is not f32, f16 or bf16"));
  }
  if (options.label_dtype != DType::i32 && options.label_dtype != DType::i64) {
    raise(ErrorKind::InvalidArgument,
          cat("DataLoader: label dtype ", to_string(options.label_dtype), " is not i32 or i64"));
  }
  const std::size_t channels = static_cast<std::size_t>(dataset->image_dims()[0]);
  if (options.mean.size() != options.std.size() ||
      (!options.mean.empty() && options.mean.size() != 1 && options.mean.size() != channels)) {
    raise(ErrorKind::InvalidArgument,
          cat("DataLoader: mean has ", options.mean.size(), " entries and std ", options.std.size(),
              "; both must have 1 or ", channels, " (the channel count), or both none"));
  }
  for (std::size_t c = 0; c < options.std.size(); ++c) {
    if (!(options.std[c] > 0)) {
      raise(ErrorKind::InvalidArgument,
            cat("DataLoader: std[", c, "] = ", options.std[c], "; it must be > 0"));
    }
  }
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                       std::int64_t first_epoch)
    : dataset_(std::move(dataset)), options_(std::move(options)), epoch_(first_epoch) {
  check_options(dataset_.get(), options_);
  if (first_epoch < 0) {
    raise(ErrorKind::InvalidArgument, cat("DataLoader: first epoch ", first_epoch, " is negative"));
  }
  if (options_.device && options_.device->device().kind == Device::Kind::cpu) {
    options_.device.reset();
  }
  worker_ = std::thread([this, first_epoch] { produce(first_epoch); });
}

DataLoader::~DataLoader() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t size = dataset_->size();
  return options_.drop_last ? size / options_.batch_size
                            : (size + options_.batch_size - 1) / options_.batch_size;
}

Batch DataLoader::make_batch(std::span<const std::int64_t> indices, std::int64_t epoch,
                             std::int64_t index) const {
  const Dims image = dataset_->image_dims();
  const std::int64_t channels = image[0];
  const std::int64_t plane = image[1] * image[2];
  const std::int64_t pixels = channels * plane;
  const auto n = static_cast<std::int64_t>(indices.size());
  Batch batch;
  batch.epoch = epoch;
  batch.index = index;
  batch.images = Tensor::empty({n, channels, image[1], image[2]}, options_.dtype, options_.layout);
  batch.labels = Tensor::empty({n}, options_.label_dtype);
  // f32 NCHW is written in place; any other dtype or layout goes through copy_from_f32.
  const bool direct = options_.dtype == DType::f32 && options_.layout == Layout::channels_first;
  std::vector<float> staging(direct ? 0 : static_cast<std::size_t>(n * pixels));
  float* values = direct ? static_cast<float*>(batch.images.data()) : staging.data();
  for (std::int64_t i = 0; i < n; ++i) {
    std::span<float> sample(values + i * pixels, static_cast<std::size_t>(pixels));
    const std::int32_t label = dataset_->get(indices[static_cast<std::size_t>(i)], sample);
    if (options_.label_dtype == DType::i32) {
      static_cast<std::int32_t*>(batch.labels.data())[i] = label;
    } else {
      static_cast<std::int64_t*>(batch.labels.data())[i] = label;
    }
    if (options_.mean.empty()) continue;
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::size_t k = options_.mean.size() == 1 ? 0 : static_cast<std::size_t>(c);
      const float mean = options_.mean[k];
      const float scale = 1.0f / options_.std[k];
      float* channel = sample.data() + c * plane;
      for (std::int64_t j = 0; j < plane; ++j) channel[j] = (channel[j] - mean) * scale;
    }
  }
  if (!direct) batch.images.copy_from_f32(staging);
  return batch;
}

void DataLoader::produce(std::int64_t first_epoch) {
  const auto wait_for_room = [this](std::unique_lock<std::mutex>& lock) {
    changed_.wait(lock, [this] { return stop_ || queue_.size() < options_.prefetch; });
    return !stop_;
  };
  try {
    const std::int64_t size = dataset_->size();
    const std::int64_t batches = batches_per_epoch();
    std::vector<std::int64_t> order;
    for (std::int64_t epoch = first_epoch;; ++epoch) {
      if (options_.shuffle) {
        order = epoch_order(size, options_.seed, epoch);
      } else if (order.empty()) {
        order.resize(static_cast<std::size_t>(size));
        for (std::int64_t i = 0; i < size; ++i) order[static_cast<std::size_t>(i)] = i;
      }
      for (std::int64_t b = 0; b <= batches; ++b) {
        {
          std::unique_lock lock(mutex_);
          if (!wait_for_room(lock)) return;
        }
        Item item;
        if (b < batches) {
          const std::int64_t begin = b * options_.batch_size;
          const std::int64_t end = std::min(size, begin + options_.batch_size);
          item.batch = make_batch(
              std::span<const std::int64_t>(order).subspan(static_cast<std::size_t>(begin),
                                                           static_cast<std::size_t>(end - begin)),
              epoch, b);
        }
        {
          const std::lock_guard lock(mutex_);
          queue_.push_back(std::move(item));
        }
        changed_.notify_all();
      }
    }
  } catch (...) {
    {
      const std::lock_guard lock(mutex_);
      Item item;
      item.error = std::current_exception();
      queue_.push_back(std::move(item));
    }
    changed_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  Item item;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !queue_.empty(); });
    // The error stays queued: every later call rethrows it.
    if (queue_.front().error) std::rethrow_exception(queue_.front().error);
    item = std::move(queue_.front());
    queue_.pop_front();
  }
  changed_.notify_all();
  if (!item.batch) {
    ++epoch_;
    return std::nullopt;
  }
  if (options_.device) {
    Batch& host = *item.batch;
    Allocator& allocator = options_.device->allocator();
    Tensor images =
        Tensor::empty(host.images.dims(), host.images.dtype(), options_.layout, allocator);
    Tensor labels =
        Tensor::empty(host.labels.dims(), host.labels.dtype(), Layout::channels_first, allocator);
    copy(host.images, images);
    copy(host.labels, labels);
    host.images = std::move(images);
    host.labels = std::move(labels);
  }
  return std::move(item.batch);
}

}  // namespace dnnx::data
