#pragma once
// The cumulative energy counter of the device a backend runs on (Backend::energy_counter()), read
// by the energy meter of src/tune/energy.cpp.

#include <limits>
#include <string>

namespace dnnx::detail {

class EnergyCounter {
 public:
  virtual ~EnergyCounter() = default;
  /// What is read, e.g. "nvml: NVIDIA H200 (GPU 0)".
  virtual std::string name() const = 0;
  /// Energy consumed since a fixed origin, joules, never decreasing; it changes only when the
  /// device updates it (every 20-100 ms on NVIDIA's boards). Throws dnnx::Error when it cannot
  /// be read.
  virtual double joules() = 0;
  /// The clock of the device's compute units now, MHz; NaN when unknown.
  virtual double clock_mhz() { return std::numeric_limits<double>::quiet_NaN(); }
};

}  // namespace dnnx::detail
