// The cudnn backend's broadcasting-add kernels.
//
// Note [broadcast add kernels]
// Forward walks dst in memory order, `pack` consecutive elements per thread (16 bytes when the
// innermost merged axis is a multiple of the pack and dst is 16-byte aligned, else one element),
// and finds each pack's src element by dividing its index by the merged sizes (Shape): src is
// dense in the same layout, so its offset is the dot product of the dst index with src strides
// that are 0 along broadcast axes. Indices are 32-bit when dst has fewer than 2^31 elements, which
// makes that division several times cheaper. With nothing broadcast (a residual sum, a copy with
// beta = 0) src is walked like dst: a pack of each per thread, no index arithmetic, when both are
// 16-byte aligned and the count is a multiple of the pack.
//
// Backward sums diff_dst over the broadcast axes into diff_src. Its shape splits into kept axes
// (one output each) and reduced axes. Two kernels, by which kind the innermost axis is:
//   columns  the innermost axis is kept (e.g. a channels_last bias gradient): a block reads 32
//            consecutive outputs' columns (coalesced) with 8 rows of threads, each summing every
//            8th row of its chunk of rows; the 8 partial sums are added in row order;
//   rows     the innermost axis is reduced (e.g. a channels_first bias gradient over H x W): a
//            block sums one output's chunk of contiguous rows, tree-reduced across the block.
// When one block per output would leave the GPU idle the reduced range is split into chunks,
// whose f32 partial sums go to the workspace and are added in chunk order by a last kernel. Every
// order of addition is fixed by (shape, SM count), so the result is bitwise reproducible.

#include "backends/cudnn/kernels/add.hpp"
#include "backends/cudnn/kernels/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dnnx::cudnn::kernels::add {
namespace {

constexpr int block_threads = 256;
constexpr int column_tile = 32;  // outputs per block of the columns kernel (one warp wide)
constexpr int column_rows = 8;   // rows of threads per block of the columns kernel

// A merged shape for the forward kernel: src's stride along each axis (0 where broadcast).
struct ForwardGeometry {
  int rank;
  std::int64_t dims[Shape::max_rank];
  std::int64_t src_strides[Shape::max_rank];
};

template <typename Index>
__device__ __forceinline__ Index src_offset(Index index, const ForwardGeometry& g) {
  Index offset = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const auto size = static_cast<Index>(g.dims[d]);
    offset += (index % size) * static_cast<Index>(g.src_strides[d]);
    index /= size;
  }
  return offset;
}

// Note [broadcast add kernels]: `packs` groups of V dst elements, each within the innermost axis.
template <typename T, typename Index, int V, bool ReadDst>
__global__ void __launch_bounds__(block_threads)
    forward_kernel(const T* src, T* dst, ForwardGeometry g, Index packs, float alpha, float beta) {
  using P = Pack<T, V>;
  const auto inner = static_cast<Index>(g.src_strides[g.rank - 1]);  // 1, or 0 if broadcast
  for (Index p = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; p < packs;
       p += static_cast<Index>(gridDim.x) * block_threads) {
    const Index i = p * V;
    const Index s = src_offset<Index>(i, g);
    P* out = reinterpret_cast<P*>(dst + i);
    P old;
    if constexpr (ReadDst) old = *out;
    P result;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float value = alpha * to_float(src[s + static_cast<Index>(k) * inner]);
      if constexpr (ReadDst) value += beta * to_float(old.v[k]);
      result.v[k] = from_float<T>(value);
    }
    *out = result;
  }
}

// Note [broadcast add kernels]: nothing broadcast, `packs` packs of src and of dst alike.
template <typename T, typename Index, bool ReadDst>
__global__ void __launch_bounds__(block_threads)
    same_shape_kernel(const T* src, T* dst, Index packs, float alpha, float beta) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, V>;
  const P* in = reinterpret_cast<const P*>(src);
  P* out = reinterpret_cast<P*>(dst);
  for (Index p = static_cast<Index>(blockIdx.x) * block_threads + threadIdx.x; p < packs;
       p += static_cast<Index>(gridDim.x) * block_threads) {
    const P value = in[p];
    P old;
    if constexpr (ReadDst) old = out[p];
    P result;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float sum = alpha * to_float(value.v[k]);
      if constexpr (ReadDst) sum += beta * to_float(old.v[k]);
      result.v[k] = from_float<T>(sum);
    }
    out[p] = result;
  }
}

// The kept and reduced axes of a merged shape, each with dst's strides (memory order).
struct Split {
  int kept_rank = 0;
  int reduced_rank = 0;
  std::int64_t kept_dims[Shape::max_rank] = {};
  std::int64_t kept_strides[Shape::max_rank] = {};
  std::int64_t reduced_dims[Shape::max_rank] = {};
  std::int64_t reduced_strides[Shape::max_rank] = {};
};

// The dst offset of row-major index `index` over `rank` axes.
__device__ __forceinline__ std::int64_t offset_of(std::int64_t index, int rank,
                                                  const std::int64_t* dims,
                                                  const std::int64_t* strides) {
  if (rank == 1) return index * strides[0];
  std::int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return offset;
}

// Note [broadcast add kernels], columns: outputs k of tile blockIdx.x, rows of chunk blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(column_tile* column_rows)
    columns_kernel(const T* x, T* out, float* partial, Split s, std::int64_t outputs,
                   std::int64_t rows, std::int64_t rows_per_chunk, float alpha) {
  __shared__ float sums[column_rows][column_tile + 1];
  const std::int64_t tiles = (outputs + column_tile - 1) / column_tile;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t k = tile * column_tile + threadIdx.x;
    float acc = 0.0f;
    if (k < outputs) {
      const std::int64_t base = offset_of(k, s.kept_rank, s.kept_dims, s.kept_strides);
      for (std::int64_t r = begin + threadIdx.y; r < end; r += column_rows)
        acc += to_float(x[base + offset_of(r, s.reduced_rank, s.reduced_dims, s.reduced_strides)]);
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && k < outputs) {
      float total = 0.0f;
#pragma unroll
      for (int y = 0; y < column_rows; ++y) total += sums[y][threadIdx.x];
      if (gridDim.y == 1) {
        out[k] = from_float<T>(alpha * total);
      } else {
        partial[static_cast<std::int64_t>(blockIdx.y) * outputs + k] = total;
      }
    }
    __syncthreads();
  }
}

// The sum of `value` over the block (block_threads threads), in a fixed order; valid in thread 0.
__device__ __forceinline__ float block_sum(float value) {
  __shared__ float warp_sums[block_threads / 32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) warp_sums[warp] = value;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int w = 0; w < block_threads / 32; ++w) total += warp_sums[w];
  }
  __syncthreads();  // warp_sums is reused by the next call
  return total;
}

// Note [broadcast add kernels], rows: output blockIdx.x, reduced elements of chunk blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    rows_kernel(const T* x, T* out, float* partial, Split s, std::int64_t outputs,
                std::int64_t reduced, std::int64_t per_chunk, float alpha) {
  const std::int64_t inner = s.reduced_dims[s.reduced_rank - 1];  // contiguous in memory
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * per_chunk;
  const std::int64_t end = begin + per_chunk < reduced ? begin + per_chunk : reduced;
  for (std::int64_t k = blockIdx.x; k < outputs; k += gridDim.x) {
    const std::int64_t base = offset_of(k, s.kept_rank, s.kept_dims, s.kept_strides);
    float acc = 0.0f;
    for (std::int64_t r = begin + threadIdx.x; r < end; r += block_threads) {
      const std::int64_t row = r / inner;
      const std::int64_t offset = r - row * inner +
                                  (s.reduced_rank > 1 ? offset_of(row, s.reduced_rank - 1,
                                                                  s.reduced_dims, s.reduced_strides)
                                                      : 0);
      acc += to_float(x[base + offset]);
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) {
      if (gridDim.y == 1) {
        out[k] = from_float<T>(alpha * total);
      } else {
        partial[static_cast<std::int64_t>(blockIdx.y) * outputs + k] = total;
      }
    }
  }
}

// Adds the chunks' partial sums of each output in chunk order.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    finalize_kernel(const float* partial, T* out, std::int64_t outputs, std::int64_t chunks,
                    float alpha) {
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
       k < outputs; k += static_cast<std::int64_t>(gridDim.x) * block_threads) {
    float total = 0.0f;
    for (std::int64_t c = 0; c < chunks; ++c) total += partial[c * outputs + k];
    out[k] = from_float<T>(alpha * total);
  }
}

unsigned grid_for(std::int64_t items, std::int64_t per_block, std::int64_t limit = INT_MAX) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((items + per_block - 1) / per_block, 1, limit));
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

ForwardGeometry forward_geometry(const Shape& shape) {
  ForwardGeometry g{};
  g.rank = shape.rank;
  std::int64_t stride = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    g.dims[d] = shape.dims[d];
    g.src_strides[d] = shape.broadcast[d] ? 0 : stride;
    if (!shape.broadcast[d]) stride *= shape.dims[d];
  }
  return g;
}

template <typename T, typename Index, int V>
void launch_forward(const Shape& shape, const T* src, T* dst, float alpha, float beta,
                    cudaStream_t stream) {
  const ForwardGeometry g = forward_geometry(shape);
  const auto packs = static_cast<Index>(shape.dst_count() / V);
  const unsigned grid = grid_for(packs, block_threads);
  if (beta == 0.0f) {
    forward_kernel<T, Index, V, false>
        <<<grid, block_threads, 0, stream>>>(src, dst, g, packs, alpha, beta);
  } else {
    forward_kernel<T, Index, V, true>
        <<<grid, block_threads, 0, stream>>>(src, dst, g, packs, alpha, beta);
  }
}

template <typename T, typename Index>
void launch_same_shape(std::int64_t count, const T* src, T* dst, float alpha, float beta,
                       cudaStream_t stream) {
  constexpr int pack = 16 / static_cast<int>(sizeof(T));
  const auto packs = static_cast<Index>(count / pack);
  const unsigned grid = grid_for(packs, block_threads);
  if (beta == 0.0f) {
    same_shape_kernel<T, Index, false>
        <<<grid, block_threads, 0, stream>>>(src, dst, packs, alpha, beta);
  } else {
    same_shape_kernel<T, Index, true>
        <<<grid, block_threads, 0, stream>>>(src, dst, packs, alpha, beta);
  }
}

template <typename T>
cudaError_t forward_typed(const Shape& shape, const void* src_raw, void* dst_raw, float alpha,
                          float beta, cudaStream_t stream) {
  const auto* src = static_cast<const T*>(src_raw);
  auto* dst = static_cast<T*>(dst_raw);
  constexpr int pack = 16 / static_cast<int>(sizeof(T));
  const bool broadcast =
      std::any_of(shape.broadcast, shape.broadcast + shape.rank, [](bool axis) { return axis; });
  const std::int64_t count = shape.dst_count();
  if (!broadcast && count % pack == 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 &&
      reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
    if (count / pack < (std::int64_t{1} << 31)) {
      launch_same_shape<T, std::uint32_t>(count, src, dst, alpha, beta, stream);
    } else {
      launch_same_shape<T, std::int64_t>(count, src, dst, alpha, beta, stream);
    }
    return cudaGetLastError();
  }
  const bool vector =
      shape.dims[shape.rank - 1] % pack == 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  const bool narrow = shape.dst_count() < (std::int64_t{1} << 31);
  if (vector && narrow) {
    launch_forward<T, std::uint32_t, pack>(shape, src, dst, alpha, beta, stream);
  } else if (vector) {
    launch_forward<T, std::int64_t, pack>(shape, src, dst, alpha, beta, stream);
  } else if (narrow) {
    launch_forward<T, std::uint32_t, 1>(shape, src, dst, alpha, beta, stream);
  } else {
    launch_forward<T, std::int64_t, 1>(shape, src, dst, alpha, beta, stream);
  }
  return cudaGetLastError();
}

// How backward runs for one (shape, SM count): Note [broadcast add kernels].
struct BackwardPlan {
  enum class Kind { scale, columns, rows } kind = Kind::scale;
  Split split;
  std::int64_t outputs = 1;    // kept elements (diff_src)
  std::int64_t reduced = 1;    // reduced elements per output
  std::int64_t chunks = 1;     // of the reduced range
  std::int64_t per_chunk = 1;  // reduced elements (rows for columns) per chunk
};

BackwardPlan plan_backward(const Shape& shape, int sm_count) {
  BackwardPlan plan;
  std::int64_t stride = 1;
  std::int64_t strides[Shape::max_rank] = {};
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape.dims[d];
  }
  Split& s = plan.split;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.broadcast[d]) {
      s.reduced_dims[s.reduced_rank] = shape.dims[d];
      s.reduced_strides[s.reduced_rank++] = strides[d];
      plan.reduced *= shape.dims[d];
    } else {
      s.kept_dims[s.kept_rank] = shape.dims[d];
      s.kept_strides[s.kept_rank++] = strides[d];
      plan.outputs *= shape.dims[d];
    }
  }
  if (s.kept_rank == 0) {  // everything is summed into one element
    s.kept_dims[0] = 1;
    s.kept_strides[0] = 0;
    s.kept_rank = 1;
  }
  if (plan.reduced == 1) return plan;  // no broadcast axis: diff_src = alpha * diff_dst
  // Enough blocks to fill the GPU a few times over, but chunks long enough to be worth a block.
  const std::int64_t target_blocks = 4 * static_cast<std::int64_t>(std::max(sm_count, 1));
  std::int64_t wanted = 1;
  if (!shape.broadcast[shape.rank - 1]) {
    plan.kind = BackwardPlan::Kind::columns;
    const std::int64_t tiles = ceil_div(plan.outputs, column_tile);
    wanted = std::clamp<std::int64_t>(ceil_div(target_blocks, tiles), 1,
                                      std::max<std::int64_t>(plan.reduced / 64, 1));
  } else {
    plan.kind = BackwardPlan::Kind::rows;
    wanted = std::clamp<std::int64_t>(ceil_div(target_blocks, plan.outputs), 1,
                                      std::max<std::int64_t>(plan.reduced / 4096, 1));
  }
  wanted = std::min<std::int64_t>(wanted, 65535);  // gridDim.y
  plan.per_chunk = ceil_div(plan.reduced, wanted);
  plan.chunks = ceil_div(plan.reduced, plan.per_chunk);
  return plan;
}

template <typename T>
cudaError_t backward_typed(const Shape& shape, const BackwardPlan& plan, float alpha,
                           const void* diff_dst_raw, void* diff_src_raw, void* workspace,
                           cudaStream_t stream) {
  const auto* x = static_cast<const T*>(diff_dst_raw);
  auto* out = static_cast<T*>(diff_src_raw);
  auto* partial = static_cast<float*>(workspace);
  const dim3 grid_chunks(1, static_cast<unsigned>(plan.chunks));
  switch (plan.kind) {
    case BackwardPlan::Kind::scale:
      return forward_typed<T>(shape, diff_dst_raw, diff_src_raw, alpha, 0.0f, stream);
    case BackwardPlan::Kind::columns: {
      const dim3 grid(grid_for(plan.outputs, column_tile), grid_chunks.y);
      columns_kernel<T><<<grid, dim3(column_tile, column_rows), 0, stream>>>(
          x, out, partial, plan.split, plan.outputs, plan.reduced, plan.per_chunk, alpha);
      break;
    }
    case BackwardPlan::Kind::rows: {
      const dim3 grid(grid_for(plan.outputs, 1), grid_chunks.y);
      rows_kernel<T><<<grid, block_threads, 0, stream>>>(x, out, partial, plan.split, plan.outputs,
                                                         plan.reduced, plan.per_chunk, alpha);
      break;
    }
  }
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (plan.chunks > 1) {
    finalize_kernel<T><<<grid_for(plan.outputs, block_threads), block_threads, 0, stream>>>(
        partial, out, plan.outputs, plan.chunks, alpha);
  }
  return cudaGetLastError();
}

}  // namespace

std::int64_t Shape::dst_count() const {
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= dims[d];
  return count;
}

std::int64_t Shape::src_count() const {
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= broadcast[d] ? 1 : dims[d];
  return count;
}

Shape make_shape(int rank, const std::int64_t* dst_dims, const std::int64_t* src_dims) {
  Shape shape;
  shape.rank = 0;
  for (int i = 0; i < rank; ++i) {
    if (dst_dims[i] == 1) continue;  // size-1 axes change no offset
    const bool broadcast = src_dims[i] == 1;
    if (shape.rank > 0 && shape.broadcast[shape.rank - 1] == broadcast) {
      shape.dims[shape.rank - 1] *= dst_dims[i];
    } else {
      shape.dims[shape.rank] = dst_dims[i];
      shape.broadcast[shape.rank] = broadcast;
      ++shape.rank;
    }
  }
  if (shape.rank == 0) {
    shape.rank = 1;
    shape.dims[0] = 1;
    shape.broadcast[0] = false;
  }
  return shape;
}

cudaError_t forward(Element element, float alpha, float beta, const Shape& shape, const void* src,
                    void* dst, cudaStream_t stream) {
  switch (element) {
    case Element::f32: return forward_typed<float>(shape, src, dst, alpha, beta, stream);
    case Element::f16: return forward_typed<__half>(shape, src, dst, alpha, beta, stream);
    case Element::bf16: return forward_typed<__nv_bfloat16>(shape, src, dst, alpha, beta, stream);
  }
  return cudaErrorInvalidValue;
}

std::size_t backward_workspace(const Shape& shape, int sm_count) {
  const BackwardPlan plan = plan_backward(shape, sm_count);
  return plan.chunks > 1 ? static_cast<std::size_t>(plan.chunks * plan.outputs) * sizeof(float) : 0;
}

cudaError_t backward(Element element, float alpha, const Shape& shape, const void* diff_dst,
                     void* diff_src, void* workspace, int sm_count, cudaStream_t stream) {
  const BackwardPlan plan = plan_backward(shape, sm_count);
  if (plan.chunks > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (element) {
    case Element::f32:
      return backward_typed<float>(shape, plan, alpha, diff_dst, diff_src, workspace, stream);
    case Element::f16:
      return backward_typed<__half>(shape, plan, alpha, diff_dst, diff_src, workspace, stream);
    case Element::bf16:
      return backward_typed<__nv_bfloat16>(shape, plan, alpha, diff_dst, diff_src, workspace,
                                           stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dnnx::cudnn::kernels::add
