#pragma once
// Cross-entropy CUDA kernels of the cudnn backend: the fused candidate (cudnn:kernel:fused) and
// the gradient half of the cuDNN-softmax candidate. Plain pointers, sizes and a stream; no cuDNN or
// dnnx type.
//
// Logits are `outer` x `classes` x `inner` (class c of position p = o * inner + i at
// (o * classes + c) * inner + i); labels, per-position losses and diff_loss are indexed by p.
//
// Every launch records the lowest position whose label is neither ignore_index nor in
// [0, classes) (Note [deferred label check] in backends/cudnn/cross_entropy.cpp): threads that
// meet one atomicMin its position into the plan's XentRecord, the last block to finish copies it
// (with the label's value) into the XentReport, which lives in mapped pinned host memory, and
// resets the record. The loss of such a position is NaN, and so is its gradient row.

#include "backends/cudnn/kernels/bad_value.hpp"
#include "backends/cudnn/kernels/softmax.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dnnx::cudnn::kernels {

enum class LabelType : std::uint8_t { i32, i64 };
enum class Reduce : std::uint8_t { none, mean, sum };

/// What every cross-entropy kernel needs to know.
struct XentParams {
  Element element = Element::f32;
  LabelType label = LabelType::i64;
  Reduce reduce = Reduce::mean;
  std::int64_t ignore_index = -100;
  std::int64_t outer = 1;
  std::int64_t classes = 1;
  std::int64_t inner = 1;
  std::int64_t positions() const { return outer * inner; }
};

/// Device state of one plan, in device memory; xent_record_init() before the first launch. The
/// kernels leave it initialized again when they finish.
struct XentRecord : BadValueRecord {};

/// What the host reads: position -1 when clean, else the lowest bad label's position and value.
struct XentReport : BadValueReport {};

/// Queues the initialization of `record` on `stream`.
cudaError_t xent_record_init(XentRecord* record, cudaStream_t stream);

/// Workspace bytes of each launcher below for `params` (exact; 0 when none).
std::size_t xent_fused_forward_workspace(const XentParams& params);
std::size_t xent_backward_workspace(const XentParams& params);

/// loss = cross-entropy of logits (fused log-sum-exp + NLL, one read of the logits).
/// `weights` (f32 [classes]) may be null. `report` is the device address of the XentReport.
cudaError_t xent_fused_forward(const XentParams& params, const void* logits, const void* labels,
                               const float* weights, void* loss, void* workspace,
                               XentRecord* record, XentReport* report, cudaStream_t stream);

/// diff_logits = g * w[y] * (softmax - onehot) from the logits, fused (log-sum-exp, then the
/// writing pass). For Reduce::mean the total weight is summed first into the workspace.
cudaError_t xent_fused_backward(const XentParams& params, const void* logits, const void* labels,
                                const float* weights, const void* diff_loss, void* diff_logits,
                                void* workspace, XentRecord* record, XentReport* report,
                                cudaStream_t stream);

/// diff_logits = g * w[y] * (p - onehot) in place, where diff_logits holds the probabilities p
/// (e.g. cuDNN's CUDNN_SOFTMAX_ACCURATE output).
cudaError_t xent_backward_from_probabilities(const XentParams& params, const void* labels,
                                             const float* weights, const void* diff_loss,
                                             void* diff_logits, void* workspace, XentRecord* record,
                                             XentReport* report, cudaStream_t stream);

/// Loads the kernels `params` launches (CUDA loads modules lazily). Returns the first failure.
cudaError_t xent_prime(const XentParams& params);

}  // namespace dnnx::cudnn::kernels
