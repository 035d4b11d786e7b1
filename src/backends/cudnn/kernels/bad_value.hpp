#pragma once
// The record and report of the kernels that check values they read (cross-entropy's labels,
// pooling's indices): threads that meet a bad value atomicMin its position into the plan's
// record, and the last block of the launch copies it, with the value read there, into the report
// (mapped pinned host memory) and initializes the record again.

#include <cuda_runtime_api.h>

namespace dnnx::cudnn::kernels {

/// Device state of one plan, in device memory; init_bad_value_record() before the first launch.
struct BadValueRecord {
  unsigned long long bad_position;  ///< lowest bad position of the running launch, or ~0
  unsigned int blocks_done;         ///< blocks of the running launch that have finished
  unsigned int unused;
};

/// What the host reads (mapped pinned memory, written by the device): position -1 when clean.
struct BadValueReport {
  long long position;
  long long value;
};

/// Queues the initialization of `record` on `stream`.
inline cudaError_t init_bad_value_record(BadValueRecord* record, cudaStream_t stream) {
  const cudaError_t status =
      cudaMemsetAsync(&record->bad_position, 0xff, sizeof record->bad_position, stream);
  if (status != cudaSuccess) return status;
  return cudaMemsetAsync(&record->blocks_done, 0, sizeof record->blocks_done, stream);
}

}  // namespace dnnx::cudnn::kernels
