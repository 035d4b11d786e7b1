#pragma once
// Factory of the cudnn backend (cuDNN 9, CUDA runtime). The only header of this folder the op
// layer includes; it names no CUDA or cuDNN type.

#include "core/backend.hpp"

#include <memory>
#include <string>

namespace dnnx::cudnn {

/// True when a CUDA device is visible and a cuDNN handle can be created on it; otherwise `why`
/// (if given) gets the precise reason, e.g. "no CUDA device: cudaGetDeviceCount returned
/// cudaErrorNoDevice (no CUDA-capable device is detected)". Checked once per process.
bool available(std::string* why);
/// "cuDNN 9.19.0, CUDA runtime 13.0, driver 13.0, NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)".
std::string version();
/// The cudnn backend on CUDA device `device`, queuing its work on `stream` (a cudaStream_t of the
/// caller's, which must outlive the backend) or, when null, on a stream of its own. Throws
/// InvalidArgument for a device that does not exist and Unsupported when the backend is not
/// available.
std::unique_ptr<detail::Backend> make_backend(int device, void* stream = nullptr);

/// Stops every backend's background builds of runtime-compiled plans and joins their threads
/// (dnnx::stop_background_work(); Note [background builds at exit] in conv_compile.cpp).
void stop_background_builds() noexcept;

}  // namespace dnnx::cudnn
