#pragma once
/// \file
/// The random-number generator of dnnx's seeded ops (fill, dropout): Philox4x32-10, counter
/// based, the same numbers on every backend.

#include <cstdint>

namespace dnnx {

/// A seed and an offset into the stream of Philox4x32-10 blocks that seed defines (each block is
/// four 32-bit words). Like PyTorch's generators: every op that draws consumes a range of the
/// stream starting at offset() and advances the offset past it, so consecutive calls draw
/// different numbers, and the same (seed, offset) always gives the same numbers, on every
/// backend and device, whatever the launch geometry or thread count. Element i of a call (its
/// logical row-major index) takes word i % 4 of block offset() + i / 4; a call over n elements
/// consumes ceil(n / 4) blocks. Plain data: not thread-safe (use one per thread, or guard it).
class Generator {
 public:
  /// PyTorch's default seed.
  static constexpr std::uint64_t default_seed = 67280421310721ULL;

  /// Seeded with `seed`, at offset 0.
  explicit Generator(std::uint64_t seed = default_seed) : seed_(seed) {}

  std::uint64_t seed() const { return seed_; }
  /// The next block the next call draws from (blocks of four 32-bit words).
  std::uint64_t offset() const { return offset_; }
  /// Starts the stream of `seed` again: seed() = seed, offset() = 0 (torch.manual_seed).
  void manual_seed(std::uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  /// Moves to block `offset` of the current seed's stream.
  void set_offset(std::uint64_t offset) { offset_ = offset; }

  /// Reserves the blocks of `elements` values (ceil(elements / 4) blocks) and returns the offset
  /// of the first; offset() moves past them (modulo 2^64).
  std::uint64_t consume(std::uint64_t elements) {
    const std::uint64_t first = offset_;
    offset_ += elements / 4 + (elements % 4 != 0 ? 1 : 0);
    return first;
  }

  bool operator==(const Generator&) const = default;

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

}  // namespace dnnx
