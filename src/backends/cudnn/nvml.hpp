#pragma once
// The GPU's cumulative energy counter through NVML (Backend::energy_counter(); Note [energy per
// call] in src/tune/energy.cpp). NVML is loaded at run time from the driver's libnvidia-ml.so.1:
// dnnx neither builds nor links against it, and a machine without it measures no energy.

#include "core/energy_counter.hpp"

#include <memory>
#include <string>

namespace dnnx::cudnn {

/// The energy counter of CUDA device `device` (found in NVML by its PCI bus id, so that
/// CUDA_VISIBLE_DEVICES does not matter), or null with `why` set: no NVML library, NVML failing
/// to start, or a GPU without the counter (NVIDIA's total energy counter starts with Volta).
std::shared_ptr<detail::EnergyCounter> nvml_energy_counter(int device, std::string& why);

}  // namespace dnnx::cudnn
