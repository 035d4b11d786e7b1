// Copies of many byte ranges in one launch (kernels/segments.hpp, Note [segment copies]).

#include "backends/cudnn/kernels/segments.hpp"

#include <algorithm>
#include <cstdint>

namespace dnnx::cudnn::kernels::segments {
namespace {

constexpr int block_threads = 256;
constexpr std::uint64_t max_grid = 8192;

unsigned grid_for(std::uint64_t blocks) {
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(blocks, max_grid)));
}

std::uint64_t pieces_of(std::uint64_t bytes) {
  return bytes / chunk_bytes + (bytes % chunk_bytes != 0 ? 1 : 0);
}

// The block's threads copy n bytes from src to dst in accesses of sizeof(V) bytes (a power of
// two up to 16), after a head of single bytes that brings src to that alignment; the caller has
// checked that src and dst agree modulo sizeof(V), so dst is then aligned too.
template <typename V>
__device__ __forceinline__ void copy_as(const unsigned char* src, unsigned char* dst,
                                        std::uint64_t n) {
  constexpr std::uint64_t width = sizeof(V);
  const std::uint64_t misaligned = reinterpret_cast<std::uintptr_t>(src) % width;
  const std::uint64_t to_aligned = (width - misaligned) % width;
  const std::uint64_t head = to_aligned < n ? to_aligned : n;
  const std::uint64_t body = (n - head) / width;
  const std::uint64_t tail = head + body * width;
  const std::uint64_t t = threadIdx.x;
  const std::uint64_t step = blockDim.x;
  for (std::uint64_t i = t; i < head; i += step) dst[i] = src[i];
  const V* s = reinterpret_cast<const V*>(src + head);
  V* d = reinterpret_cast<V*>(dst + head);
  for (std::uint64_t i = t; i < body; i += step) d[i] = s[i];
  for (std::uint64_t i = tail + t; i < n; i += step) dst[i] = src[i];
}

// Every thread of the block takes part, with the same arguments.
__device__ __forceinline__ void block_copy(const unsigned char* src, unsigned char* dst,
                                           std::uint64_t n) {
  const std::uintptr_t differ =
      reinterpret_cast<std::uintptr_t>(src) ^ reinterpret_cast<std::uintptr_t>(dst);
  if (differ % 16 == 0) {
    copy_as<uint4>(src, dst, n);
  } else if (differ % 8 == 0) {
    copy_as<uint2>(src, dst, n);
  } else if (differ % 4 == 0) {
    copy_as<unsigned int>(src, dst, n);
  } else if (differ % 2 == 0) {
    copy_as<unsigned short>(src, dst, n);
  } else {
    copy_as<unsigned char>(src, dst, n);
  }
}

__global__ void __launch_bounds__(block_threads)
    table_kernel(const Segment* table, std::int64_t count, unsigned char* first,
                 unsigned char* second, bool to_second) {
  for (std::int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const Segment segment = table[i];
    unsigned char* a = first + segment.first;
    unsigned char* b = second + segment.second;
    if (to_second) {
      block_copy(a, b, segment.bytes);
    } else {
      block_copy(b, a, segment.bytes);
    }
  }
}

// copy_list's copies as one kernel argument: piece p (of chunk_bytes bytes, the last of a copy
// shorter) belongs to the copy c with first_piece[c] <= p < first_piece[c + 1].
struct List {
  Copy copies[max_copies];
  std::uint64_t first_piece[max_copies + 1];
  int count;
};

__global__ void __launch_bounds__(block_threads) list_kernel(List list) {
  const std::uint64_t pieces = list.first_piece[list.count];
  for (std::uint64_t p = blockIdx.x; p < pieces; p += gridDim.x) {
    int c = 0;
    while (p >= list.first_piece[c + 1]) ++c;
    const std::uint64_t at = (p - list.first_piece[c]) * chunk_bytes;
    const std::uint64_t left = list.copies[c].bytes - at;
    block_copy(static_cast<const unsigned char*>(list.copies[c].src) + at,
               static_cast<unsigned char*>(list.copies[c].dst) + at,
               left < chunk_bytes ? left : chunk_bytes);
  }
}

}  // namespace

std::vector<Segment> merged(std::vector<Segment> segments) {
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [](const Segment& s) { return s.bytes == 0; }),
                 segments.end());
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  std::vector<Segment> runs;
  for (const Segment& s : segments) {
    if (!runs.empty()) {
      Segment& last = runs.back();
      if (last.first + last.bytes == s.first && last.second + last.bytes == s.second) {
        last.bytes += s.bytes;
        continue;
      }
    }
    runs.push_back(s);
  }
  return runs;
}

std::vector<Segment> chunks(const std::vector<Segment>& runs) {
  std::vector<Segment> out;
  for (const Segment& run : runs) {
    for (std::uint64_t at = 0; at < run.bytes; at += chunk_bytes)
      out.push_back({run.first + at, run.second + at, std::min(chunk_bytes, run.bytes - at)});
  }
  return out;
}

cudaError_t copy_table(const Segment* table, std::int64_t count, void* first, void* second,
                       bool to_second, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  table_kernel<<<grid_for(static_cast<std::uint64_t>(count)), block_threads, 0, stream>>>(
      table, count, static_cast<unsigned char*>(first), static_cast<unsigned char*>(second),
      to_second);
  return cudaGetLastError();
}

cudaError_t copy_list(const Copy* copies, int count, cudaStream_t stream) {
  if (count < 0 || count > max_copies) return cudaErrorInvalidValue;
  List list{};
  list.count = count;
  for (int c = 0; c < count; ++c) {
    list.copies[c] = copies[c];
    list.first_piece[c + 1] = list.first_piece[c] + pieces_of(copies[c].bytes);
  }
  const std::uint64_t pieces = list.first_piece[count];
  if (pieces == 0) return cudaSuccess;
  list_kernel<<<grid_for(pieces), block_threads, 0, stream>>>(list);
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::segments
