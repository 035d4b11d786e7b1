#pragma once
// The host's hardware threads, asked once per process: std::thread::hardware_concurrency() reads
// sysfs on every call (glibc's get_nprocs), several microseconds a small op would pay on
// every call (an 8 x 1000 cross-entropy takes about ten).

#include <algorithm>
#include <thread>

namespace dnnx::detail {

/// At least 1.
inline unsigned hardware_threads() {
  static const unsigned count = std::max(1u, std::thread::hardware_concurrency());
  return count;
}

}  // namespace dnnx::detail
