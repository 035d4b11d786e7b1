// The cudnn backend: one CUDA device, its stream, cuDNN handle and caching allocator
// (runtime.hpp), CUDA-event timing on that stream, and the convolution (conv.cpp).

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/cudnn.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/kernels/gate.hpp"
#include "backends/cudnn/kernels/sweep.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layers.hpp"
#include "backends/cudnn/nvml.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"
#include "tune/plan_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <optional>
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

// A setting of named values from `variable` (any case): unset or empty means `fallback`, the
// switch words of switch_from_env() mean `on` and `off`, and anything else is an
// InvalidArgument listing the names (`what`: "an im2col setting").
template <typename Setting>
Setting named_setting_from_env(const char* variable, Setting fallback, Setting on, Setting off,
                               std::initializer_list<Setting> names, const char* what) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string text = detail::lower(value);
  for (Setting setting : names) {
    if (text == to_string(setting)) return setting;
  }
  if (text == "1" || text == "true" || text == "yes") return on;
  if (text == "0" || text == "false" || text == "no") return off;
  std::vector<std::string> accepted;
  for (Setting setting : names) accepted.emplace_back(to_string(setting));
  detail::raise(ErrorKind::InvalidArgument,
                detail::cat("environment variable ", variable, "='", value, "' is not ", what,
                            "; accepted: ", detail::join(accepted, ", "), " (or 0, 1)"));
}

// A ListedFor setting from `variable`; unset or empty means `fallback`.
ListedFor listed_for_from_env(const char* variable, ListedFor fallback, const char* what) {
  using enum ListedFor;
  return named_setting_from_env(variable, fallback, on, off, {off, f32, on}, what);
}

// DNNX_CUDNN_CONV_TAPS (Note [tap-region candidates]); unset or empty means f32.
TapCandidates taps_from_env() {
  using enum TapCandidates;
  return named_setting_from_env(taps_variable, f32, on, off, {off, f32, sparse, on},
                                "a tap-region setting");
}

// An integer in [low, high] from `variable` (`what` it is, and what its values mean after the
// range in the error); unset or empty means `fallback`.
int int_from_env(const char* variable, int fallback, int low, int high, const char* what,
                 const char* meaning = "") {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || parsed < low || parsed > high) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", variable, "='", value, "' is not ", what,
                              "; accepted: an integer in ", low, "..", high, meaning));
  }
  return static_cast<int>(parsed);
}

// DNNX_CUDNN_KNOB_VARIANTS: knob variants per engine; unset or empty means `fallback`.
int knob_variants_from_env(int fallback) {
  return int_from_env(knob_variants_variable, fallback, 1, 4096, "a variant count");
}

// DNNX_CUDNN_COMPILE_BUDGET: seconds, a decimal number in [0, 3600]; unset or empty means
// `fallback`.
double compile_budget_from_env(double fallback) {
  const char* value = std::getenv(compile_budget_variable);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(parsed >= 0 && parsed <= 3600)) {
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat("environment variable ", compile_budget_variable, "='", value,
                              "' is not a compile budget; accepted: seconds in [0, 3600]"));
  }
  return parsed;
}

// DNNX_CUDNN_BUILD_THREADS: an integer in [0, 64], 0 for the default; unset or empty means
// `fallback`.
int build_threads_from_env(int fallback) {
  return int_from_env(build_threads_variable, fallback, 0, 64, "a thread count",
                      " (0: one fewer than the host's threads, at most 8)");
}

// DNNX_PLAN_DIR, else next to the choice cache's file (Note [saved plans] in
// src/tune/plan_store.hpp).
std::string plan_dir_from_env() {
  CacheFileOptions cache;
  try {
    cache = CacheFileOptions::from_env();
  } catch (const Error&) {
    cache.mode = CacheMode::off;  // a malformed DNNX_CACHE* variable is reported by the cache
  }
  return tune::PlanStore::folder_from_env(cache);
}

// Note [gated timing]
// A run timed between two events on an idle stream measures, besides the GPU's work, the time the
// host takes to queue it: the GPU processes the start event at once and then waits for each
// launch. Warm, that is a few microseconds for a graph replay and more for cudnnBackendExecute or
// a legacy call (Note [graph replay]); cold, the first launch of a kernel loads its module, and a
// plan's second call on the same memory captures a CUDA graph, each of which can take longer than
// the GPU's work. Those costs differ between candidates, so ungated readings rank candidates
// partly by host work, and a fast kernel with a costly first launch can be screened out on its
// first run. So time_ms() first queues a kernel that holds the stream until the host opens a gate
// (kernels/gate.cu), then the start event, the work and the stop event, and then opens the gate:
// the GPU starts the clock only once everything is queued, so a reading is the GPU's time alone,
// cold or warm, and a candidate's first run is a fair sample (Note [warm first runs] in
// src/tune/select.cpp). nvbench times this way too (its "blocking kernel").
//
// The gate gives up after gate_timeout_ns, and a run whose gate timed out, which may include
// host time, is timed again (at most gate_retries times). That matters more than it seems: CUDA's
// lazy loading may synchronize the context to load a module, which waits for the gate kernel,
// which waits for the host: a cold launch holds until the timeout, so a long timeout is paid by
// every cold candidate of an exhaustive search. Hence the timeout is short, 0.25 ms: warm queuing
// takes microseconds (a loop of graph replays in the final round included), and a cold launch
// costs one timeout and a repeat. A repeat captures no CUDA graph (Note [no capture in a repeated
// timing run] in launch_graph.hpp): a plan whose queuing outlasts the timeout on every call (one
// of thousands of kernels) is read, after the repeats, with that host time, which is what each
// of its calls costs. Work that waits for its own stream is thus never stalled for long either.
// Figures: docs/benchmarks.md, "Kernel design measurements" (GPU timing gate).
constexpr long long gate_timeout_ns = 250'000;
constexpr int gate_retries = 2;

// Note [cache after timing]
// Running the candidates of a selection changes what the L2 cache holds, and that can slow the
// chosen kernel for as long as it runs afterwards. cuDNN's semi-persistent NHWC batch-norm
// forward for 64x2048x7x7 fp16 (x and y fit L2 together) runs measurably slower after cuDNN's
// non-persistent kernel for the same desc (a candidate of that selection) has run, on the same
// tensors or on others, from the same cuDNN handle or another, and stays slower over hundreds of
// calls: an exhaustive selection left the chosen kernel slower than the same choice made by a
// fixed policy. Clocks and device settings (cache config, persisting-L2 limit, the stream's access
// window; cudaCtxResetPersistingL2Cache does nothing) do not explain it; what L2 holds does. The
// kernel is fast again after a block is read and then cudaFree-d (which invalidates its lines), but
// not after the same read from a block that stays allocated (L2 left full of its clean lines) or
// a cudaMalloc + cudaFree without a read, and only partly after writes: it is fast when L2 is
// empty, not merely clean. (A fresh process inherits L2 from the one before it.)
//
// So after a selection or a profile that timed candidates, the backend reads a block of three
// times the L2 size and then invalidates the block's lines with `discard.global.L2`
// (kernels/sweep.cu): L2 is left empty, as after a free, without a cudaFree (which synchronizes
// the device). One pass at HBM bandwidth once per selection costs tens of microseconds, against the
// milliseconds the selection took. The block comes from the caching allocator and goes back to
// it (Note [caching allocator]); when it cannot be had, the sweep is skipped: it only speeds up
// what follows. It also discards what other work on the device had cached (a process sharing the
// GPU, another stream): DNNX_CUDNN_L2_SWEEP=0 turns it off. Figures: docs/benchmarks.md, "GPU
// layers vs PyTorch (batch 64)".
constexpr std::size_t sweep_l2_multiple = 3;

class CudnnBackend final : public detail::Backend {
 public:
  CudnnBackend(int device, Settings settings, cudaStream_t stream)
      : runtime_(std::make_shared<Runtime>(device, settings, stream)),
        ops_(make_ops(runtime_)),
        start_(make_event(runtime_->context())),
        stop_(make_event(runtime_->context())),
        gate_(make_mapped_host(sizeof(kernels::gate::Gate), "timing gate", runtime_->context())) {}

  BackendKind kind() const override { return BackendKind::cudnn; }
  std::string name() const override { return "cudnn"; }

  // Everything that changes which candidate wins or what it computes: libraries, driver, the
  // device model and size, and whether f32 may run as TF32.
  std::string fingerprint() const override {
    const DeviceFacts& f = runtime_->facts();
    return detail::cat("cuDNN ", cudnn_version_text(f.cudnn_version), " cuBLASLt ",
                       cublas_version_text(f.cublaslt_version), " CUDA ",
                       cuda_version_text(f.runtime_version), " driver ",
                       cuda_version_text(f.driver_version), " ", f.name, " sm_", f.major, f.minor,
                       " SMs=", f.sm_count, " tf32=", runtime_->allow_tf32() ? "on" : "off",
                       " rpr=", runtime_->allow_reduced_precision_reduction() ? "on" : "off",
                       " rtc=", runtime_compiled_text(), " knobs=", knob_search_text(),
                       " conv_gemm=", runtime_->settings().conv_gemm ? "on" : "off",
                       " winograd=", runtime_->settings().conv_winograd ? "on" : "off",
                       " im2col=", to_string(runtime_->settings().conv_im2col),
                       " taps=", to_string(runtime_->settings().conv_taps),
                       " frames=", to_string(runtime_->settings().conv_frames),
                       " folds=", to_string(runtime_->settings().conv_folds),
                       " stacked=", to_string(runtime_->settings().conv_stacked),
                       " phases=", to_string(runtime_->settings().conv_phases),
                       " kernels=", runtime_->settings().conv_kernels ? "on" : "off");
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
            {"cublaslt_version", cublas_version_text(f.cublaslt_version)},
            {"tf32", runtime_->allow_tf32() ? "on" : "off"},
            {"reduced_precision_reduction",
             runtime_->allow_reduced_precision_reduction() ? "on" : "off"},
            {"runtime_compiled_engines", runtime_compiled_text()},
            {"saved_plans", runtime_->settings().plan_dir.empty() ? std::string("off")
                                                                  : runtime_->settings().plan_dir},
            {"graph_replay", runtime_->settings().graphs ? "on" : "off"},
            {"l2_sweep_after_timing", runtime_->settings().l2_sweep ? "on" : "off"},
            {"knob_search", knob_search_text()},
            {"conv_gemm_candidates", runtime_->settings().conv_gemm ? "on" : "off"},
            {"conv_winograd_candidates", runtime_->settings().conv_winograd ? "on" : "off"},
            {"conv_im2col_candidates", to_string(runtime_->settings().conv_im2col)},
            {"conv_tap_region_candidates", to_string(runtime_->settings().conv_taps)},
            {"conv_frame_candidates", to_string(runtime_->settings().conv_frames)},
            {"conv_fold_candidates", to_string(runtime_->settings().conv_folds)},
            {"conv_stacked_fold_candidates", to_string(runtime_->settings().conv_stacked)},
            {"conv_phase_fold_candidates", to_string(runtime_->settings().conv_phases)},
            {"conv_kernel_candidates", runtime_->settings().conv_kernels ? "on" : "off"},
            {"dependent_launches", runtime_->kernel_queue().dependent ? "on" : "off"}};
  }

  Device device() const override { return Device::cuda(runtime_->device()); }
  Allocator& allocator() override { return runtime_->allocator(); }

  // NVML's counter of this GPU, looked up once (nvml.cpp).
  std::shared_ptr<detail::EnergyCounter> energy_counter(std::string& why) override {
    std::call_once(energy_once_, [this] {
      runtime_->make_current();
      energy_ = nvml_energy_counter(runtime_->device(), energy_why_);
    });
    why = energy_why_;
    return energy_;
  }

  // Device time of the work queued on the backend's stream, between two events (Note [one
  // stream]) behind the gate (Note [gated timing]); returns once the work has finished.
  double time_ms(const std::function<void()>& work) override {
    return gated_ms(work, gate_timeout_ns);
  }
  double time_queued_ms(const std::function<void()>& work, double queue_ms) override {
    return gated_ms(work, std::max(gate_timeout_ns, static_cast<long long>(queue_ms * 1e6)));
  }
  bool warm_timing() const override { return true; }

  void synchronize() override { runtime_->synchronize(); }

  // Note [cache after timing]
  void after_timing() override {
    const std::size_t bytes = sweep_l2_multiple * runtime_->facts().l2_bytes;
    if (!runtime_->settings().l2_sweep || bytes == 0) return;
    runtime_->make_current();
    Allocator& allocator = runtime_->allocator();
    void* block = nullptr;
    try {
      block = allocator.allocate(bytes);
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::OutOfMemory) throw;
      return;
    }
    const cudaError_t status =
        kernels::sweep::empty_l2(block, bytes, runtime_->facts().sm_count, runtime_->stream());
    // Queued on the backend's one stream, so the block may go back at once.
    allocator.deallocate(block, bytes);
    DNNX_CUDNN_CHECK(status, runtime_->context(), "sweeping the L2 cache after timing");
  }

 protected:
  const detail::OpBackends& ops() const override { return ops_; }

 private:
  // time_ms() with the gate held at most timeout_ns (Note [gated timing]).
  double gated_ms(const std::function<void()>& work, long long timeout_ns) {
    const ErrorContext context = runtime_->context();
    runtime_->make_current();
    auto* gate = static_cast<volatile kernels::gate::Gate*>(gate_.host.get());
    for (int attempt = 0;; ++attempt) {
      gate->open = 0;
      gate->timed_out = 0;
      DNNX_CUDNN_CHECK(kernels::gate::hold(static_cast<kernels::gate::Gate*>(gate_.device),
                                           timeout_ns, runtime_->stream()),
                       context, "queuing the timing gate");
      try {
        DNNX_CUDNN_CHECK(cudaEventRecord(start_.get(), runtime_->stream()), context,
                         "recording the start event");
        std::optional<CapturePause> pause;  // Note [no capture in a repeated timing run]
        if (attempt > 0) pause.emplace();
        work();
        DNNX_CUDNN_CHECK(cudaEventRecord(stop_.get(), runtime_->stream()), context,
                         "recording the stop event");
      } catch (...) {
        // A candidate that throws must not hold the stream, and the gate kernel must be done
        // before the next run resets the gate.
        gate->open = 1;
        if (cudaStreamSynchronize(runtime_->stream()) != cudaSuccess) cudaGetLastError();
        throw;
      }
      gate->open = 1;
      DNNX_CUDNN_CHECK(cudaEventSynchronize(stop_.get()), context, "waiting for the stop event");
      float ms = 0;
      DNNX_CUDNN_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), context,
                       "reading the elapsed time");
      if (attempt < gate_retries && gate->timed_out != 0) continue;
      return ms;
    }
  }

  // Every op the op table marks as implemented by this backend, in table order.
  static detail::OpBackends make_ops(const std::shared_ptr<Runtime>& runtime) {
    detail::OpBackends ops;
#define DNNX_CUDNN_MAKE(kind, Type, name, aliases, directions, reference, cpu, cudnn, ...) \
  DNNX_OP_IF(cudnn, ops.set<OpKind::kind>(make_##kind##_backend(runtime, ops));)
    DNNX_OP_TABLE(DNNX_CUDNN_MAKE)
#undef DNNX_CUDNN_MAKE
    return ops;
  }
  // "off", or "on/0.9s" (the conv's runtime-compiled engines under a compile budget of 0.9 s), with
  // "+fused" when the fused conv's are candidates too: each changes what a search can pick.
  std::string runtime_compiled_text() const {
    const Settings& s = runtime_->settings();
    if (!s.runtime_compiled) return "off";
    return detail::cat("on/", s.compile_budget_s, 's', s.runtime_compiled_fused ? "+fused" : "");
  }
  // "off", or "top/24+splitk": the mode and the per-engine cap, both of which change the
  // candidates, which take in cuBLASLt's split-K variants too (Note [split-K variants] in
  // matmul.cpp).
  std::string knob_search_text() const {
    const Settings& s = runtime_->settings();
    if (s.knob_search == KnobSearch::off) return "off";
    return detail::cat(to_string(s.knob_search), '/', s.knob_variants, "+splitk");
  }

  std::shared_ptr<Runtime> runtime_;
  detail::OpBackends ops_;
  Event start_, stop_;
  MappedHost gate_;  // Note [gated timing]
  std::once_flag energy_once_;
  std::shared_ptr<detail::EnergyCounter> energy_;
  std::string energy_why_;
};

struct Availability {
  bool ok = false;
  std::string why;
  int devices = 0;
};

// Never destroyed (Note [static destruction]): a Context made in a static's destructor asks it.
const Availability& availability() {
  static const auto* result = new Availability([] {
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
  }());
  return *result;
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
  settings.allow_reduced_precision_reduction =
      switch_from_env(reduced_precision_variable, settings.allow_reduced_precision_reduction);
  settings.verbose = switch_from_env("DNNX_VERBOSE", settings.verbose);
  settings.graphs = switch_from_env("DNNX_CUDNN_GRAPHS", settings.graphs);
  settings.l2_sweep = switch_from_env("DNNX_CUDNN_L2_SWEEP", settings.l2_sweep);
  // Unset: the conv's runtime-compiled engines are candidates, the fused conv's are not; set, the
  // switch applies to both (Note [runtime-compiled engines]).
  const char* runtime_compiled = std::getenv(runtime_compiled_variable);
  if (runtime_compiled != nullptr && *runtime_compiled != '\0') {
    settings.runtime_compiled = switch_from_env(runtime_compiled_variable, true);
    settings.runtime_compiled_fused = settings.runtime_compiled;
  }
  settings.compile_budget_s = compile_budget_from_env(settings.compile_budget_s);
  settings.build_threads = build_threads_from_env(settings.build_threads);
  settings.plan_dir = plan_dir_from_env();
  settings.knob_search = knob_search_from_env();
  settings.knob_variants = knob_variants_from_env(settings.knob_variants);
  settings.conv_gemm = switch_from_env("DNNX_CUDNN_CONV_GEMM", settings.conv_gemm);
  settings.conv_winograd = switch_from_env(winograd_variable, settings.conv_winograd);
  // Note [im2col candidates], [frame candidates], [fold candidates], [stacked folds].
  settings.conv_im2col =
      listed_for_from_env(im2col_variable, settings.conv_im2col, "an im2col setting");
  settings.conv_taps = taps_from_env();
  settings.conv_frames =
      listed_for_from_env(frames_variable, settings.conv_frames, "a frame-candidate setting");
  settings.conv_folds =
      listed_for_from_env(folds_variable, settings.conv_folds, "a fold-candidate setting");
  settings.conv_stacked =
      listed_for_from_env(stacked_variable, settings.conv_stacked, "a stacked-fold setting");
  settings.conv_phases =
      listed_for_from_env(phases_variable, settings.conv_phases, "a phase-fold setting");
  settings.conv_kernels = switch_from_env(kernels_variable, settings.conv_kernels);
  settings.dependent_launches =
      switch_from_env("DNNX_CUDNN_DEPENDENT_LAUNCHES", settings.dependent_launches);
  return settings;
}

}  // namespace dnnx::cudnn
