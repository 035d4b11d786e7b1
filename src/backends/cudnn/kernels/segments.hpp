#pragma once
// Copies of many byte ranges in one launch, on plain device pointers: the cudnn recurrent layer's
// weight conversion between dnnx's flat layout and cuDNN's weight space (Note [cudnn rnn weights]
// in src/backends/cudnn/rnn.cpp) and its staging of slices (Note [cudnn rnn dropout]), where one
// cudaMemcpyAsync per range costs a launch each. No cuDNN types.
//
// Note [segment copies]
// A block copies one segment at a time (blocks stride over the segments: the grid is capped),
// its threads striding over the segment's bytes in the widest access both addresses allow once
// aligned: the low bits in which the source and destination addresses differ give the width
// (16 bytes when they agree modulo 16; 8, 4, 2, else single bytes), a head of single bytes
// brings the source to that alignment, a tail of single bytes ends the segment. Any address and
// byte count is copied correctly; the width only decides the speed. chunks() cuts long runs into
// pieces of at most chunk_bytes (cut at multiples of 16 bytes from the run's start, so each
// piece keeps its run's alignment) so that a large segment is spread over many blocks. Offsets
// and counts are 64-bit throughout.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace dnnx::cudnn::kernels::segments {

/// A run of `bytes` bytes at byte offset `first` of one buffer and `second` of another.
struct Segment {
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  std::uint64_t bytes = 0;
};

/// The largest piece chunks() leaves (bytes; a multiple of 16).
inline constexpr std::uint64_t chunk_bytes = 16384;

/// `segments` (in any order) sorted by `first`, empty ones dropped, and each one that continues
/// the previous one in both buffers (first and second both right after it) merged into it: the
/// fewest runs that copy the same bytes. Host code.
std::vector<Segment> merged(std::vector<Segment> segments);

/// `runs` cut into pieces of at most chunk_bytes bytes each, in order (Note [segment copies]).
/// Host code.
std::vector<Segment> chunks(const std::vector<Segment>& runs);

/// Copies every segment of `table` (device memory, `count` entries) between `first` + first and
/// `second` + second: from the first buffer into the second when `to_second`, else back. The
/// segments must not overlap within the buffer written. One launch; queues the work on `stream`
/// and returns the launch status (cudaSuccess for count <= 0, which launches nothing).
cudaError_t copy_table(const Segment* table, std::int64_t count, void* first, void* second,
                       bool to_second, cudaStream_t stream);

/// One copy of copy_list: `bytes` bytes from `src` to `dst` (device memory, not overlapping).
struct Copy {
  const void* src = nullptr;
  void* dst = nullptr;
  std::uint64_t bytes = 0;
};

/// The most copies one copy_list call takes (they travel as a kernel argument).
inline constexpr int max_copies = 8;

/// Copies `count` (0 .. max_copies) copies given on the host, each cut into chunk_bytes pieces,
/// in one launch. Queues the work on `stream` and returns the launch status (cudaSuccess when no
/// byte is to be copied, which launches nothing; cudaErrorInvalidValue for a count out of range).
cudaError_t copy_list(const Copy* copies, int count, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::segments
