// The cudnn backend: one CUDA device, its stream, cuDNN handle and caching allocator
// (runtime.hpp), CUDA-event timing on that stream, and the convolution (conv.cpp).

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv.hpp"
#include "backends/cudnn/layers.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/cudnn.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

// Switches read once per backend instance (Settings); unset or empty means `fallback`.
bool switch_from_env(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string text = detail::lower(value);
  if (text == "1" || text == "true" || text == "on" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "off" || text == "no") return false;
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("environment variable ", name, "='", value,
                            "' is not a switch; accepted: 1, true, on, yes, 0, false, off, no"));
}

// DNNX_CUDNN_KNOB_SEARCH (Note [knob search]); unset or empty means `top`.
KnobSearch knob_search_from_env() {
  const char* value = std::getenv(knob_search_variable);
  if (value == nullptr || *value == '\0') return KnobSearch::top;
  const std::string text = detail::lower(value);
  for (KnobSearch search : {KnobSearch::off, KnobSearch::top, KnobSearch::all}) {
    if (text == to_string(search)) return search;
  }
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("environment variable ", knob_search_variable, "='", value,
                            "' is not a knob-search mode; accepted: off, top, all"));
}

// DNNX_CUDNN_KNOB_VARIANTS: knob variants per engine; unset or empty means `fallback`.
int knob_variants_from_env(int fallback) {
  const char* value = std::getenv(knob_variants_variable);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || parsed < 1 || parsed > 4096) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", knob_variants_variable, "='", value,
                              "' is not a variant count; accepted: an integer in 1..4096"));
  }
  return static_cast<int>(parsed);
}

// Note [cold runs]
// The first launch of a kernel loads its module (CUDA's lazy loading) and the first call of a
// plan may finish cuDNN's own set-up: host work of a few hundred microseconds (0.4 ms on average
// for the candidates of ResNet-50's first layer on an H100), during which the GPU waits between
// the two timing events, so a cold run reads slow. Selection judges a candidate's first run and
// abandons it when that is already too slow, so a cold reading would drop fast candidates of
// small problems. Queuing warm work costs microseconds (a graph replay ~2 us, cudnnBackendExecute
// 5-8 us, a legacy call 25-45 us), so time_ms() times the host's queuing too, and a run whose
// queuing took over cold_queuing_ms, and over cold_share of the measured time (below that the
// error does not matter), was cold: it is timed once more and that reading is returned. The
// second run is then warm, and the selection can take the first reading as a fair sample (Note
// [warm first runs] in src/tune/select.cpp). A candidate probed on a slice first has its modules
// loaded by the probe and pays nothing extra; before this, plans ran their work twice on their
// first call, which doubled the timed first run of every candidate. A plan's second call on the
// same memory captures its launches as a CUDA graph (Note [graph replay]), 0.02-1.5 ms of queuing
// (over 0.1 ms for ~15% of the conv candidates measured), and is timed again too: once per plan.
constexpr double cold_queuing_ms = 0.1;
constexpr double cold_share = 0.02;

class CudnnBackend final : public detail::Backend {
 public:
  CudnnBackend(int device, Settings settings, cudaStream_t stream)
      : runtime_(std::make_shared<Runtime>(device, settings, stream)),
        conv_(make_conv_backend(runtime_)),
        pool_(make_pool_backend(runtime_)),
        activation_(make_activation_backend(runtime_)),
        softmax_(make_softmax_backend(runtime_)),
        cross_entropy_(make_cross_entropy_backend(runtime_)),
        batch_norm_(make_batch_norm_backend(runtime_)),
        add_(make_add_backend(runtime_)),
        conv_fused_(make_conv_fused_backend(runtime_, *conv_)),
        start_(make_event(runtime_->context())),
        stop_(make_event(runtime_->context())) {}

  BackendKind kind() const override { return BackendKind::cudnn; }
  std::string name() const override { return "cudnn"; }

  // Everything that changes which candidate wins or what it computes: libraries, driver, the
  // device model and size, and whether f32 may run as TF32.
  std::string fingerprint() const override {
    const DeviceFacts& f = runtime_->facts();
    return detail::cat("cuDNN ", cudnn_version_text(f.cudnn_version), " CUDA ",
                       cuda_version_text(f.runtime_version), " driver ",
                       cuda_version_text(f.driver_version), " ", f.name, " sm_", f.major, f.minor,
                       " SMs=", f.sm_count, " tf32=", runtime_->allow_tf32() ? "on" : "off",
                       " rtc=", runtime_->settings().runtime_compiled ? "on" : "off",
                       " knobs=", knob_search_text());
  }

  std::vector<std::pair<std::string, std::string>> environment() const override {
    const DeviceFacts& f = runtime_->facts();
    return {{"device_name", f.name},
            {"compute_capability", detail::cat(f.major, '.', f.minor)},
            {"sm_count", std::to_string(f.sm_count)},
            {"device_memory", detail::format_bytes(static_cast<double>(f.memory_bytes))},
            {"cuda_driver", cuda_version_text(f.driver_version)},
            {"cuda_runtime", cuda_version_text(f.runtime_version)},
            {"cudnn_version", cudnn_version_text(f.cudnn_version)},
            {"tf32", runtime_->allow_tf32() ? "on" : "off"},
            {"runtime_compiled_engines", runtime_->settings().runtime_compiled ? "on" : "off"},
            {"graph_replay", runtime_->settings().graphs ? "on" : "off"},
            {"knob_search", knob_search_text()}};
  }

  Device device() const override { return Device::cuda(runtime_->device()); }
  Allocator& allocator() override { return runtime_->allocator(); }

  // Device time of the work queued on the backend's stream, between two events (Note [one
  // stream]); returns once the work has finished. Note [cold runs]: a run whose queuing took
  // long is timed again.
  double time_ms(const std::function<void()>& work) override {
    const ErrorContext context = runtime_->context();
    runtime_->make_current();
    for (int attempt = 0;; ++attempt) {
      DNNX_CUDNN_CHECK(cudaEventRecord(start_.get(), runtime_->stream()), context,
                       "recording the start event");
      const auto queuing = std::chrono::steady_clock::now();
      work();
      const double queuing_ms = std::chrono::duration<double, std::milli>(
                                    std::chrono::steady_clock::now() - queuing)
                                    .count();
      DNNX_CUDNN_CHECK(cudaEventRecord(stop_.get(), runtime_->stream()), context,
                       "recording the stop event");
      DNNX_CUDNN_CHECK(cudaEventSynchronize(stop_.get()), context, "waiting for the stop event");
      float ms = 0;
      DNNX_CUDNN_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), context,
                       "reading the elapsed time");
      const bool cold = queuing_ms > cold_queuing_ms && queuing_ms > cold_share * ms;
      if (attempt == 0 && cold) continue;
      return ms;
    }
  }
  bool warm_timing() const override { return true; }

  void synchronize() override { runtime_->synchronize(); }

  detail::ConvBackend& conv() override { return *conv_; }
  detail::PoolBackend& pool() override { return *pool_; }
  detail::ActivationBackend& activation() override { return *activation_; }
  detail::SoftmaxBackend& softmax() override { return *softmax_; }
  detail::CrossEntropyBackend& cross_entropy() override { return *cross_entropy_; }
  detail::BatchNormBackend& batch_norm() override { return *batch_norm_; }
  detail::AddBackend& add() override { return *add_; }
  detail::ConvFusedBackend& conv_fused() override { return *conv_fused_; }

 private:
  // "off", or "top/24": the mode and the per-engine cap, both of which change the candidates.
  std::string knob_search_text() const {
    const Settings& s = runtime_->settings();
    if (s.knob_search == KnobSearch::off) return "off";
    return detail::cat(to_string(s.knob_search), '/', s.knob_variants);
  }

  std::shared_ptr<Runtime> runtime_;
  std::unique_ptr<detail::ConvBackend> conv_;
  std::unique_ptr<detail::PoolBackend> pool_;
  std::unique_ptr<detail::ActivationBackend> activation_;
  std::unique_ptr<detail::SoftmaxBackend> softmax_;
  std::unique_ptr<detail::CrossEntropyBackend> cross_entropy_;
  std::unique_ptr<detail::BatchNormBackend> batch_norm_;
  std::unique_ptr<detail::AddBackend> add_;
  std::unique_ptr<detail::ConvFusedBackend> conv_fused_;
  Event start_, stop_;
};

struct Availability {
  bool ok = false;
  std::string why;
  int devices = 0;
};

const Availability& availability() {
  static const Availability result = [] {
    Availability a;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      a.why = detail::cat("no CUDA device: cudaGetDeviceCount returned ", status_name(status), " (",
                          cudaGetErrorString(status), ")");
      return a;
    }
    if (count == 0) {
      a.why = "no CUDA device: cudaGetDeviceCount found 0 devices";
      return a;
    }
    a.devices = count;
    cudnnHandle_t handle = nullptr;
    const cudnnStatus_t created = cudnnCreate(&handle);
    if (created != CUDNN_STATUS_SUCCESS) {
      a.why = detail::cat("cudnnCreate failed on CUDA device 0: ", status_name(created));
      if (const std::string message = last_cudnn_message(); !message.empty())
        a.why += " (" + message + ")";
      return a;
    }
    log_destroy_failure(cudnnDestroy(handle), "the probe cuDNN handle");
    a.ok = true;
    return a;
  }();
  return result;
}

}  // namespace

bool available(std::string* why) {
  const Availability& a = availability();
  if (!a.ok && why != nullptr) *why = a.why;
  return a.ok;
}

std::string version() {
  const std::size_t cudnn = cudnnGetVersion();
  int runtime = 0;
  int driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) cudaGetLastError();
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  std::string text = detail::cat("cuDNN ", cudnn_version_text(cudnn), ", CUDA runtime ",
                                 cuda_version_text(runtime), ", driver ",
                                 driver == 0 ? std::string("none") : cuda_version_text(driver));
  if (available(nullptr)) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, 0) == cudaSuccess) {
      text += detail::cat(", ", properties.name, " (sm_", properties.major, properties.minor, ", ",
                          properties.multiProcessorCount, " SMs)");
    } else {
      cudaGetLastError();
    }
  }
  return text;
}

std::unique_ptr<detail::Backend> make_backend(int device, void* stream) {
  ErrorContext context;
  context.backend = "cudnn";
  std::string why;
  if (!available(&why)) {
    detail::raise(ErrorKind::Unsupported, "the cudnn backend is not available: " + why, context);
  }
  const int devices = availability().devices;
  if (device < 0 || device >= devices) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("CUDA device ", device, " does not exist; this machine has ", devices,
                              " (valid: 0..", devices - 1, ")"),
                  context);
  }
  return std::make_unique<CudnnBackend>(device, settings_from_env(),
                                        static_cast<cudaStream_t>(stream));
}

Settings settings_from_env() {
  Settings settings;
  settings.allow_tf32 = switch_from_env(tf32_variable, settings.allow_tf32);
  settings.verbose = switch_from_env("DNNX_VERBOSE", settings.verbose);
  settings.graphs = switch_from_env("DNNX_CUDNN_GRAPHS", settings.graphs);
  settings.runtime_compiled = switch_from_env(runtime_compiled_variable, settings.runtime_compiled);
  settings.knob_search = knob_search_from_env();
  settings.knob_variants = knob_variants_from_env(settings.knob_variants);
  return settings;
}

}  // namespace dnnx::cudnn
