#pragma once
// The device allocator of one cudnn backend instance.
//
// Note [caching allocator]
// cudaMalloc and cudaFree cost tens of microseconds and cudaFree synchronizes the device, so a
// conv call must not allocate. Freed blocks go to a free list keyed by their size bucket and are
// handed out again for any request of the same bucket. Every user of the memory (conv plans,
// copies, bias ops) runs on the backend's one stream, so a block freed on the host while work
// that uses it is still queued can be reused at once: the next user's work is queued behind it.
// When cudaMalloc runs out of memory, every cached block is released and the allocation is tried
// once more; failing that, Error(OutOfMemory) says how much was asked, in use and free.
//
// A request takes the free block of its bucket with the lowest address, not the last one freed.
// A training step allocates and frees in the same order every time, and every block it takes it
// gives back, so the step starts from the same free blocks each time; lowest-address-first then
// hands each tensor the same memory step after step, where last-freed-first hands out the blocks
// in an order the step's frees permute, repeating only every few steps. Same memory is what lets a
// plan replay its captured launches (Note [graph replay] in launch_graph.hpp).

#include <dnnx/tensor.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace dnnx::cudnn {

class CachingAllocator final : public Allocator {
 public:
  /// Allocates on CUDA device `device`; `synchronize` waits for the backend's stream (called before
  /// cached blocks are returned to CUDA).
  CachingAllocator(int device, std::function<void()> synchronize);
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* pointer, std::size_t bytes) noexcept override;
  Device device() const override { return Device::cuda(device_); }

  /// Frees every cached (unused) block.
  void release_cached() noexcept;
  /// Bytes handed out and not yet returned, and bytes held in the free lists.
  std::size_t bytes_in_use() const;
  std::size_t bytes_cached() const;
  /// cudaMalloc calls made so far (tests check that repeated calls make none).
  std::size_t device_allocations() const;
  /// The most bytes_in_use() and bytes_in_use() + bytes_cached() have been since the allocator
  /// was made or reset_peaks() was called (PyTorch's max_memory_allocated and
  /// max_memory_reserved; bucket sizes, so up to 12.5% above the requests).
  std::size_t peak_bytes_in_use() const;
  std::size_t peak_bytes_reserved() const;
  /// Starts the peaks again from the present figures.
  void reset_peaks();

  /// The bucket a request of `bytes` is served from: 512 B steps up to 1 MiB, 2 MiB steps up to
  /// 64 MiB, then steps of 1/8 of the power of two below (at most 12.5% slack).
  static std::size_t bucket(std::size_t bytes);

 private:
  void release_cached_locked() noexcept;

  int device_;
  std::function<void()> synchronize_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::set<void*>> free_;     // bucket -> cached blocks by address
  std::unordered_map<void*, std::size_t> live_;     // block -> bucket
  std::size_t in_use_ = 0;
  std::size_t cached_ = 0;
  std::size_t device_allocations_ = 0;
  std::size_t peak_in_use_ = 0;
  std::size_t peak_reserved_ = 0;

  void note_peaks() noexcept;
};

}  // namespace dnnx::cudnn
