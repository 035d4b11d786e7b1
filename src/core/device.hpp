#pragma once
// What core needs from a device backend to move bytes: a copy and a wait. A device backend (the
// cudnn backend) implements DeviceRuntime and registers it for its device when it is created;
// core never includes a CUDA header. No static-initializer registration: a device has a runtime
// exactly while a backend instance for it exists.

#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>

namespace dnnx::detail {

/// Byte movement on one device, ordered with the work its backend queues.
class DeviceRuntime {
 public:
  enum class CopyKind : unsigned char { host_to_device, device_to_host, device_to_device };

  virtual ~DeviceRuntime() = default;
  /// Copies `bytes` bytes and returns once the copy has finished. The copy runs after every
  /// operation the backend queued before it.
  virtual void memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind) = 0;
  /// Writes `pattern` (its low `element_bytes` bytes: 1, 2, 4 or 8) into each of `count`
  /// consecutive elements at `dst` and returns once the fill has finished. The fill runs after
  /// every operation the backend queued before it (Tensor::zeros, Tensor::fill).
  virtual void fill(void* dst, std::size_t count, std::size_t element_bytes,
                    std::uint64_t pattern) = 0;
  /// Waits for every operation the backend queued.
  virtual void synchronize() = 0;
  /// Waits for every operation queued on the device, on any stream (a device-wide wait: it never
  /// touches a particular stream, so a caller's stream that no longer exists does no harm).
  virtual void synchronize_device() = 0;
};

/// Adds `runtime` to the runtimes of `device` (a CUDA device; one per backend instance). Throws
/// Internal if it is registered already.
void register_device_runtime(Device device, DeviceRuntime& runtime);
/// Removes `runtime` if it is the one registered for `device` (never throws).
void unregister_device_runtime(Device device, const DeviceRuntime& runtime) noexcept;
/// The runtime that copies for `device` (the first registered), after a device-wide wait when the
/// device has other runtimes (callers' streams); null when no backend on that device exists.
DeviceRuntime* device_runtime(Device device);

}  // namespace dnnx::detail
