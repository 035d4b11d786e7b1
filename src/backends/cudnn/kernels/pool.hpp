#pragma once
// dnnx's own pooling kernels (cudnn:kernel:pool): every case cuDNN's legacy pooling cannot run
// (per-side padding, ceil mode, 1-D, max pooling with PyTorch's argmax indices) and the
// channels-last fast path. Plain pointers, sizes and a stream; no cuDNN types. Semantics: Note
// [pooling windows] and Note [reference pool indices] (src/backends/reference/pool.cpp).

#include "backends/cudnn/kernels/bad_value.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels {

/// What a window computes (PoolMode's values).
enum class PoolKernelMode : int { max = 0, avg_include_pad = 1, avg_exclude_pad = 2 };
/// Element type of every tensor (f32 accumulation for all three).
enum class PoolKernelType : int { f32 = 0, f16 = 1, bf16 = 2 };

/// One pooling in 3 spatial dims (D, H, W): 1-D and 2-D poolings have leading dims of size 1,
/// kernel 1, stride 1, dilation 1 and no padding. A window's positions are `dilation` apart.
/// Tensors are dense N, C, D, H, W (channels_last false) or N, D, H, W, C (channels_last true); dst
/// is N x C x out.
struct PoolShape {
  std::int64_t batch = 1;
  std::int64_t channels = 1;
  int input[3] = {1, 1, 1};
  int output[3] = {1, 1, 1};
  int kernel[3] = {1, 1, 1};
  int stride[3] = {1, 1, 1};
  int pad_before[3] = {0, 0, 0};
  int pad_after[3] = {0, 0, 0};
  int dilation[3] = {1, 1, 1};
  bool channels_last = false;
  PoolKernelMode mode = PoolKernelMode::max;
  PoolKernelType type = PoolKernelType::f32;
};

/// How the max backward pass finds each window's maximum (the average modes ignore it).
enum class MaxBackward : int {
  /// A first pass stores every window's argmax in the workspace, a second gathers (fast).
  argmax = 0,
  /// One pass: every input element rescans the windows it belongs to (no workspace).
  rescan = 1,
};

/// Workspace bytes pool_bwd needs for `shape` and `strategy` (0 unless max with argmax).
std::size_t pool_bwd_workspace_bytes(const PoolShape& shape, MaxBackward strategy);

/// dst = pool(src), queued on `stream`. Returns the launch status.
cudaError_t pool_fwd(const PoolShape& shape, const void* src, void* dst, cudaStream_t stream);

/// diff_src = gradient of pool w.r.t. src, queued on `stream`; every diff_src element is written
/// (zero where no window routes a gradient). Deterministic: each element sums its windows in a
/// fixed order in f32, without atomics. `workspace` holds pool_bwd_workspace_bytes(shape,
/// strategy) bytes. Returns the launch status.
cudaError_t pool_bwd(const PoolShape& shape, MaxBackward strategy, const void* src,
                     const void* diff_dst, void* diff_src, void* workspace, cudaStream_t stream);

/// Element type of argmax indices (PyTorch's int64, or int32).
enum class PoolIndexType : int { i32 = 0, i64 = 1 };

/// Device state of one plan reading indices, in device memory; pool_index_record_init() before
/// the first launch, and every launch leaves it initialized again (Note [pool index check] in
/// kernels/pool.cu).
struct PoolIndexRecord : BadValueRecord {};

/// What the host reads: position -1 when clean, else the position of a bad index in dst's logical
/// (row-major N, C, spatial...) order and the index read there.
struct PoolIndexReport : BadValueReport {};

/// Queues the initialization of `record` on `stream`.
cudaError_t pool_index_record_init(PoolIndexRecord* record, cudaStream_t stream);

/// Max pooling with indices (shape.mode max): dst = pool(src) and `indices` (of `index_type`,
/// dst's shape and layout) = each window's argmax as a flat index into its (n, c) input plane,
/// the first maximum in scan order, a NaN winning (PyTorch's max_pool*d_with_indices). Queued on
/// `stream`; returns the launch status.
cudaError_t pool_fwd_indices(const PoolShape& shape, PoolIndexType index_type, const void* src,
                             void* dst, void* indices, cudaStream_t stream);

/// Its backward, a gather: every diff_src element sums, in output order, the diff_dst elements of
/// the windows within whose extent it lies and whose index names it; written once, zero where
/// none does (no atomics, deterministic). An index that names no element of its window (outside
/// the plane, the window's extent, or, dilated, between its positions) is reported through
/// `record` and `report` (the device address of a PoolIndexReport) and turns the diff_src element
/// at its window's first input position into NaN. Queued on `stream`; returns the launch status.
cudaError_t pool_bwd_indices(const PoolShape& shape, PoolIndexType index_type, const void* diff_dst,
                             const void* indices, void* diff_src, PoolIndexRecord* record,
                             PoolIndexReport* report, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels
