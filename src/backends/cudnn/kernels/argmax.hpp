#pragma once
// The cudnn backend's argmax and accuracy-count kernels (candidates "cudnn:kernel:argmax" and
// "cudnn:kernel:accuracy"), on plain device pointers. No cuDNN types.

#include "backends/cudnn/kernels/bad_value.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels::argmax {

/// Storage type of the logits; comparisons are in f32 (exact for every storage type).
enum class Element : int { f32, f16, bf16 };

/// `outer` x `inner` lines of `axis` elements, `inner` apart: line o * inner + i starts at offset
/// o * axis * inner + i (core/argmax_args.hpp).
struct Lines {
  std::int64_t outer = 1;
  std::int64_t axis = 1;
  std::int64_t inner = 1;
};

/// dst[line] = the first index of the line's largest element, NaN larger than every number
/// (torch.argmax), as i64 (`index64`) or i32. Queues the work on `stream` and returns the launch
/// status.
cudaError_t argmax(Element element, const Lines& lines, const void* src, void* dst, bool index64,
                   cudaStream_t stream);

/// One accuracy count: the lines are the positions, the line's elements the classes.
struct AccuracyParams {
  Element element = Element::f32;
  Lines lines;
  std::int64_t top_k = 1;
  std::int64_t ignore_index = -100;
  bool label64 = true;     ///< labels are i64 (else i32)
  bool count_f32 = false;  ///< count is f32 (else i64)
  bool accumulate = false;
};

/// Bytes of scratch `accuracy` needs.
std::size_t accuracy_workspace();

/// count = (count +) the positions whose label ranks below top_k (Note [label rank] in
/// core/argmax_args.hpp), ignore_index skipped. A label outside [0, C) counts as not correct and
/// the lowest such position, with its label, goes to `report` (mapped host memory, written by the
/// device once the call has run; left alone when every label is valid). `workspace` holds
/// accuracy_workspace() bytes. Queues the work on `stream` and returns the launch status.
cudaError_t accuracy(const AccuracyParams& params, const void* logits, const void* labels,
                     void* count, void* workspace, BadValueReport* report, cudaStream_t stream);

}  // namespace dnnx::cudnn::kernels::argmax
