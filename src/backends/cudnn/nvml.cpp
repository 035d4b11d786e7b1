#include "backends/cudnn/nvml.hpp"

#include "core/check.hpp"
#include "core/strings.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>

namespace dnnx::cudnn {
namespace {

// The few NVML entry points used, declared as nvml.h does (its C ABI is stable across drivers;
// the header is not needed to call them).
using NvmlReturn = int;  // nvmlReturn_t: 0 is success
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn nvml_success = 0;
constexpr int nvml_clock_sm = 1;  // NVML_CLOCK_SM

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;  // millijoules
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;     // MHz
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  std::string problem;  // why NVML cannot be used; empty when it can

  std::string error(NvmlReturn status) const {
    const char* text = error_string != nullptr ? error_string(status) : nullptr;
    return detail::cat(text != nullptr ? text : "unknown error", " (NVML status ", status, ")");
  }
};

template <typename Function>
bool resolve(void* library, const char* symbol, Function& into) {
  into = reinterpret_cast<Function>(dlsym(library, symbol));
  return into != nullptr;
}

// Loaded and started once per process, never unloaded (the counters handed out use it).
const Nvml& nvml() {
  static const Nvml* const loaded = [] {
    auto* n = new Nvml;
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      n->problem = detail::cat(
          "NVML (libnvidia-ml.so.1, installed with the NVIDIA driver) could "
          "not be loaded: ",
          why != nullptr ? why : "not found");
      return n;
    }
    const bool all = resolve(library, "nvmlInit_v2", n->init) &&
                     resolve(library, "nvmlErrorString", n->error_string) &&
                     resolve(library, "nvmlDeviceGetHandleByPciBusId_v2", n->by_pci_bus_id) &&
                     resolve(library, "nvmlDeviceGetTotalEnergyConsumption", n->total_energy) &&
                     resolve(library, "nvmlDeviceGetClockInfo", n->clock_info) &&
                     resolve(library, "nvmlDeviceGetName", n->name);
    if (!all) {
      n->problem = "the NVML library lacks an entry point dnnx reads (an NVML older than CUDA 9's)";
      return n;
    }
    if (const NvmlReturn status = n->init(); status != nvml_success)
      n->problem = "NVML did not start: " + n->error(status);
    return n;
  }();
  return *loaded;
}

class NvmlCounter final : public detail::EnergyCounter {
 public:
  NvmlCounter(const Nvml& nvml, NvmlDevice device, std::string name)
      : nvml_(nvml), device_(device), name_(std::move(name)) {}

  std::string name() const override { return name_; }

  double joules() override {
    unsigned long long millijoules = 0;
    if (const NvmlReturn status = nvml_.total_energy(device_, &millijoules);
        status != nvml_success) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("reading the energy counter (", name_, "): ", nvml_.error(status)));
    }
    return static_cast<double>(millijoules) / 1e3;
  }

  double clock_mhz() override {
    unsigned int mhz = 0;
    return nvml_.clock_info(device_, nvml_clock_sm, &mhz) == nvml_success
               ? static_cast<double>(mhz)
               : std::numeric_limits<double>::quiet_NaN();
  }

 private:
  const Nvml& nvml_;
  NvmlDevice device_;
  std::string name_;
};

}  // namespace

std::shared_ptr<detail::EnergyCounter> nvml_energy_counter(int device, std::string& why) {
  const Nvml& n = nvml();
  if (!n.problem.empty()) {
    why = n.problem;
    return nullptr;
  }
  char bus_id[64] = {};
  if (const cudaError_t status = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device);
      status != cudaSuccess) {
    why = detail::cat("the PCI bus id of CUDA device ", device,
                      " is unknown: ", cudaGetErrorString(status));
    return nullptr;
  }
  NvmlDevice handle = nullptr;
  if (const NvmlReturn status = n.by_pci_bus_id(bus_id, &handle); status != nvml_success) {
    why = detail::cat("NVML does not know the GPU at PCI ", bus_id, ": ", n.error(status));
    return nullptr;
  }
  char name[96] = {};
  if (n.name(handle, name, sizeof name) != nvml_success) name[0] = '\0';
  const std::string gpu =
      detail::cat(name[0] != '\0' ? name : "GPU", " (CUDA device ", device, ", PCI ", bus_id, ")");
  unsigned long long millijoules = 0;
  if (const NvmlReturn status = n.total_energy(handle, &millijoules); status != nvml_success) {
    why = detail::cat(gpu, " has no energy counter NVML can read: ", n.error(status));
    return nullptr;
  }
  return std::make_shared<NvmlCounter>(n, handle, "nvml: " + gpu);
}

}  // namespace dnnx::cudnn
