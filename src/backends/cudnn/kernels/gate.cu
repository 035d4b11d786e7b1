// The stream gate of the backend's timing (Note [gated timing] in backend.cpp).
//
// One thread polls the host's flag in mapped memory, sleeping a microsecond between reads so
// that it does not flood the PCIe link, and reads the device's global timer (nanoseconds) to give
// up after the timeout. The host opens the gate once it has queued everything to be timed; the
// poll then sees the flag within a few microseconds, before the start event is processed.

#include "backends/cudnn/kernels/gate.hpp"

namespace dnnx::cudnn::kernels::gate {
namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void hold_kernel(Gate* gate, long long timeout_ns) {
  volatile Gate* shared = gate;
  const unsigned long long start = global_ns();
  while (shared->open == 0) {
    if (global_ns() - start > static_cast<unsigned long long>(timeout_ns)) {
      shared->timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t hold(Gate* gate, long long timeout_ns, cudaStream_t stream) {
  hold_kernel<<<1, 1, 0, stream>>>(gate, timeout_ns);
  return cudaGetLastError();
}

}  // namespace dnnx::cudnn::kernels::gate
