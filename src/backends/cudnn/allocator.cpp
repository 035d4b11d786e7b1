#include "backends/cudnn/allocator.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>

namespace dnnx::cudnn {
namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = 1024 * kib;

std::size_t round_up(std::size_t value, std::size_t step) {
  return (value + step - 1) / step * step;
}

// Makes `device` current for the scope of an allocator call (the caller's thread may have another).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~CurrentDevice() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_)
      cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace

std::size_t CachingAllocator::bucket(std::size_t bytes) {
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  if (size <= mib) return round_up(size, 512);
  if (size <= 64 * mib) return round_up(size, 2 * mib);
  const std::size_t power = std::bit_floor(size);
  return round_up(size, power / 8);
}

CachingAllocator::CachingAllocator(int device, std::function<void()> synchronize)
    : device_(device), synchronize_(std::move(synchronize)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
  // Blocks still handed out belong to tensors that outlive the backend (static tensors at exit):
  // the process is ending, and freeing them under a live tensor would be worse than keeping them.
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = bucket(bytes);
  std::lock_guard lock(mutex_);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    // Note [caching allocator]: the lowest address.
    void* block = *it->second.begin();
    it->second.erase(it->second.begin());
    cached_ -= size;
    in_use_ += size;
    live_.emplace(block, size);
    note_peaks();
    return block;
  }
  CurrentDevice current(device_);
  void* block = nullptr;
  cudaError_t status = cudaMalloc(&block, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    release_cached_locked();
    status = cudaMalloc(&block, size);
  }
  if (status != cudaSuccess) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
    ErrorContext context;
    context.backend = "cudnn";
    raise_status(
        status,
        detail::cat("device allocation of ", bytes, " bytes (",
                    detail::format_bytes(static_cast<double>(bytes)), ") on cuda:", device_,
                    " failed after releasing the cache; dnnx holds ",
                    detail::format_bytes(static_cast<double>(in_use_)), ", the device has ",
                    detail::format_bytes(static_cast<double>(free_bytes)), " free of ",
                    detail::format_bytes(static_cast<double>(total_bytes))),
        std::move(context));
  }
  ++device_allocations_;
  in_use_ += size;
  live_.emplace(block, size);
  note_peaks();
  return block;
}

void CachingAllocator::deallocate(void* pointer, std::size_t) noexcept {
  if (pointer == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(pointer);
  if (it == live_.end()) return;
  const std::size_t size = it->second;
  live_.erase(it);
  in_use_ -= size;
  try {
    free_[size].insert(pointer);
    cached_ += size;
  } catch (...) {
    // No memory for the free list's bookkeeping: give the block back to CUDA instead.
    CurrentDevice current(device_);
    log_destroy_failure(cudaFree(pointer), "a device block");
  }
}

void CachingAllocator::release_cached() noexcept {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() noexcept {
  if (cached_ == 0 || process_exiting()) return;  // Note [process exit]
  // Work queued on the stream may still use a cached block (Note [caching allocator]).
  try {
    if (synchronize_) synchronize_();
  } catch (...) {
  }
  CurrentDevice current(device_);
  for (auto& [size, blocks] : free_) {
    for (void* block : blocks) log_destroy_failure(cudaFree(block), "a cached device block");
  }
  free_.clear();
  cached_ = 0;
}

std::size_t CachingAllocator::bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

void CachingAllocator::note_peaks() noexcept {
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  peak_reserved_ = std::max(peak_reserved_, in_use_ + cached_);
}

std::size_t CachingAllocator::peak_bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}

std::size_t CachingAllocator::peak_bytes_reserved() const {
  std::lock_guard lock(mutex_);
  return peak_reserved_;
}

void CachingAllocator::reset_peaks() {
  std::lock_guard lock(mutex_);
  peak_in_use_ = in_use_;
  peak_reserved_ = in_use_ + cached_;
}

std::size_t CachingAllocator::bytes_cached() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

std::size_t CachingAllocator::device_allocations() const {
  std::lock_guard lock(mutex_);
  return device_allocations_;
}

}  // namespace dnnx::cudnn
