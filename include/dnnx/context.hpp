#pragma once
/// \file
/// A Context says where and how ops run: backend, device, default dtype, selection options.

#include <dnnx/algo.hpp>
#include <dnnx/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// The implementation family an op runs on.
enum class BackendKind : std::uint8_t {
  reference,  ///< plain loops with f64 accumulation: the oracle
  cpu,        ///< oneDNN
  cudnn,      ///< cuDNN (legacy algorithms and graph-API engines)
  automatic,  ///< cudnn if a GPU and cuDNN are usable, else cpu, else reference ("auto")
};
/// "reference", "cpu", "cudnn", "auto".
std::string_view to_string(BackendKind kind);
/// Parses the names above; throws InvalidArgument listing them.
BackendKind parse_backend(std::string_view text);

/// The default dtype of the tensors and descs a context creates (nnabla's type_config):
/// Context::empty and Context::desc.
enum class TypeConfig : std::uint8_t {
  float32,   ///< "float"
  half,      ///< "half"
  bfloat16,  ///< "bfloat16"
};
std::string_view to_string(TypeConfig config);
/// Parses "float"/"float32"/"f32", "half"/"float16"/"f16", "bfloat16"/"bf16".
TypeConfig parse_type_config(std::string_view text);
/// The tensor dtype of a type config.
DType dtype_of(TypeConfig config);

/// Whether `kind` can run in this process; when not, `why` (if given) receives the reason.
bool backend_available(BackendKind kind, std::string* why = nullptr);
/// The concrete backend `automatic` resolves to here.
BackendKind resolve_backend(BackendKind kind);
/// Library versions a backend runs on, e.g. "oneDNN 3.2.0 (cpu isa avx512_core_amx)".
std::string backend_version(BackendKind kind);

/// Stops dnnx's background work: the cudnn backend's builds of runtime-compiled plans (queued
/// builds are dropped, running ones finish, their threads are joined). Call it at the end of a
/// program that searched with runtime-compiled engines, before exit begins (the dnnx CLI and the
/// Python module do): exit() runs the libraries' exit handlers, and a compile still running
/// under them may crash the process. Afterwards searches build no runtime-compiled plan in the
/// background (those not built are reported skipped, as past the compile budget); calling it
/// again does nothing more.
void stop_background_work() noexcept;

class Context;
namespace detail {
class ContextState;
/// Internal (src/ops/context_state.hpp documents it): the backend state a context runs on.
ContextState& state_of(const Context& context);
}  // namespace detail

/// Where and how ops run. Cheap to copy: copies share backend state (engines, handles, plan caches,
/// workspace) but each copy has its own TuneOptions.
class Context {
 public:
  /// Resolves `backend` (automatic picks the best available); explicitly asking for a backend that
  /// is not available throws Error(Unsupported) saying why and which are available.
  explicit Context(BackendKind backend = BackendKind::automatic, int device = 0,
                   TypeConfig type_config = TypeConfig::float32);

  /// Built from DNNX_BACKEND, DNNX_DEVICE, DNNX_TYPE and the tuning variables (apply_tune_env:
  /// DNNX_ALGO_<OP>_<DIRECTION> for every op and direction, e.g. DNNX_ALGO_CONV_FWD, also spelled
  /// DNNX_CONV_FWD_ALGO; DNNX_WORKSPACE_LIMIT, DNNX_DETERMINISTIC, DNNX_FASTEST, DNNX_VERBOSE,
  /// DNNX_BENCHMARK_LIMIT, DNNX_VARIANT_FACTOR, DNNX_FINAL_LOOP_MS, DNNX_HOST_TIE,
  /// DNNX_SEARCH_BUDGET_MS).
  /// Malformed values throw InvalidArgument naming the variable.
  static Context from_env();

  /// What was asked for (may be automatic).
  BackendKind requested_backend() const { return requested_; }
  /// What runs (never automatic).
  BackendKind backend() const { return backend_; }
  int device_id() const { return device_; }
  TypeConfig type_config() const { return type_config_; }
  /// dtype_of(type_config()).
  DType dtype() const { return dtype_of(type_config_); }
  /// Where this context's tensors live.
  Device device() const;
  /// Allocator for tensors on device().
  Allocator& allocator() const;

  /// A dense tensor of dtype() on device() (contents uninitialised), as Tensor::empty.
  Tensor empty(const Dims& dims, Layout layout = Layout::channels_first) const;
  /// An op's desc with every field at its default but the dtype, which is dtype(): with the type
  /// config the one place a network's precision is set (nnabla's type_config), a network built
  /// from `context.desc<ConvDesc>()`, `context.desc<PoolDesc>()`, ... switches to f16 by
  /// constructing its context with TypeConfig::half (or DNNX_TYPE=half under from_env()). A
  /// ConvFusedDesc gets it in its convolution.
  template <typename Desc>
  Desc desc() const {
    Desc made{};
    if constexpr (requires { made.conv.dtype; })
      made.conv.dtype = dtype();
    else
      made.dtype = dtype();
    return made;
  }

  /// Selection options; modify freely.
  TuneOptions& tune() { return tune_; }
  const TuneOptions& tune() const { return tune_; }

  /// The choice cache consulted by ops (the process-wide one by default).
  const std::shared_ptr<ChoiceCache>& choice_cache() const { return cache_; }
  void set_choice_cache(std::shared_ptr<ChoiceCache> cache);

  /// "cpu (oneDNN 3.2.0, avx512_core_amx) device 0 float" style summary.
  std::string describe() const;
  /// The library versions and machine facts that key this backend's cached choices; choices made
  /// under another fingerprint are never applied.
  std::string fingerprint() const;
  /// Waits until every op queued on this context has finished (device backends run
  /// asynchronously on their stream; host backends return at once).
  void synchronize() const;

  /// The CUDA stream (a cudaStream_t) this context's ops are queued on; null = the backend's own.
  void* stream() const { return stream_; }
  /// A copy of this context whose ops are queued on the caller's CUDA stream `stream` (a
  /// cudaStream_t that must outlive every context and tensor using it; null = the backend's own
  /// stream). Contexts on one stream share a backend instance of their own — cuDNN handle, plans,
  /// caching allocator and workspace, all ordered on that stream — so tensors for such a context
  /// must come from its allocator(). Only cudnn contexts accept a stream (InvalidArgument
  /// otherwise). The instance lives until the process ends: after destroying the stream, use no
  /// context on it again. dnnx::copy() waits for the whole device first when callers' streams
  /// are in use.
  Context with_stream(void* stream) const;

 private:
  friend detail::ContextState& detail::state_of(const Context& context);

  BackendKind requested_;
  BackendKind backend_;
  int device_;
  TypeConfig type_config_;
  TuneOptions tune_;
  void* stream_ = nullptr;
  std::shared_ptr<ChoiceCache> cache_;
  std::shared_ptr<detail::ContextState> state_;
};

/// Applies the DNNX_* tuning variables to `options` (used by Context::from_env and the CLI).
void apply_tune_env(TuneOptions& options);

}  // namespace dnnx
