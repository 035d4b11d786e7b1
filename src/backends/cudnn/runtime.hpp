#pragma once
// The CUDA and cuDNN objects one cudnn backend instance owns, shared with the plans it hands out
// (a plan may outlive the backend that built it).
//
// Note [one stream]
// Each backend instance has one non-blocking stream, and its cuDNN handle is bound to it. Every
// kernel the backend launches (conv plans, bias ops), every copy through dnnx::copy() and the
// timing events go to that stream, so they run in the order they were issued and the caching
// allocator may reuse a block as soon as the host frees it (Note [caching allocator]). The op
// layer serializes calls on one backend instance (ContextState::mutex), which is also what the
// cuDNN handle requires.
//
// Note [cuBLAS handles]
// The matrix multiply runs on cuBLASLt (and cuBLAS's cublasGemmEx). Their handles are created on
// first use, since most programs never multiply matrices on the GPU and a cuBLAS handle costs
// device memory. cublasLtMatmul takes the stream and workspace per call; the cuBLAS handle is bound
// to stream() before each call (cublasSetStream), then given the call's workspace
// (cublasSetWorkspace: cublasSetStream resets it to cuBLAS's own pool, which dnnx does not use).

#include <dnnx/tensor.hpp>

#include "backends/cudnn/allocator.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/kernels/queue.hpp"
#include "core/device.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::cudnn {

/// What the device and libraries are; part of every choice-cache key through the fingerprint.
struct DeviceFacts {
  std::string name;                  ///< "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;          ///< compute capability
  int sm_count = 0;                  ///< multiprocessors
  std::size_t memory_bytes = 0;      ///< global memory
  std::size_t l2_bytes = 0;          ///< L2 cache (cudaDeviceProp::l2CacheSize)
  int driver_version = 0;            ///< cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;           ///< cudaRuntimeGetVersion
  std::size_t cudnn_version = 0;     ///< cudnnGetVersion, e.g. 91900
  std::size_t cublaslt_version = 0;  ///< cublasLtGetVersion, e.g. 130100
};

/// "9.19.0" from 91900; "13.0" from 13000; "13.1.0" from cuBLAS's 130100.
std::string cudnn_version_text(std::size_t version);
std::string cublas_version_text(std::size_t version);
std::string cuda_version_text(int version);

/// Makes `device` the calling thread's current CUDA device if it is not already.
void make_current(int device, const ErrorContext& context);

/// Which engines get knob variants beyond cuDNN's own configs (Note [knob search]).
enum class KnobSearch { off, top, all };
/// Where the tap-region candidates are listed (Note [tap-region candidates] in conv_taps.cpp).
enum class TapCandidates { off, f32, sparse, on };
/// Where a kind of convolution candidate is listed: nowhere, for fp32 convolutions only, or for
/// every dtype (the im2col, frame and fold candidates: Notes [im2col candidates] in
/// conv_im2col.cpp, [frame candidates] in conv_frames.cpp, [fold candidates] in conv_folds.cpp,
/// [stacked folds] in conv_stacked.cpp).
enum class ListedFor { off, f32, on };
/// Whether `setting` lists its candidates for convolutions of `dtype`.
bool listed_for(ListedFor setting, DType dtype);
/// Why `setting`, the value of `variable` (whose default is `fallback`), lists no candidate of its
/// kind for `dtype`, naming the Note [`note`] that describes them; empty where it lists them.
std::string not_listed_reason(ListedFor setting, ListedFor fallback, std::string_view variable,
                              std::string_view note, DType dtype);

/// Switches of one backend instance, read from the environment when it is created.
struct Settings {
  bool allow_tf32 = false;        ///< DNNX_ALLOW_TF32: f32 may run on TF32 tensor cores
  /// DNNX_ALLOW_REDUCED_PRECISION_REDUCTION: f16 / bf16 convolutions may run cuDNN engines that
  /// accumulate in f16 / bf16 (Note [TF32] in conv_engine.cpp)
  bool allow_reduced_precision_reduction = false;
  bool verbose = false;           ///< DNNX_VERBOSE: listing and plan-building costs on stderr
  bool graphs = true;             ///< DNNX_CUDNN_GRAPHS: Note [graph replay]
  bool l2_sweep = true;           ///< DNNX_CUDNN_L2_SWEEP: Note [cache after timing]
  /// DNNX_CUDNN_RUNTIME_COMPILED: the convolution's runtime-compiled engines are candidates
  /// (default on, under the compile budget); Note [runtime-compiled engines]
  bool runtime_compiled = true;
  /// The fused convolution's too: only when DNNX_CUDNN_RUNTIME_COMPILED=1 is set explicitly (its
  /// searches build every plan up front, with no compile budget).
  bool runtime_compiled_fused = false;
  /// DNNX_CUDNN_COMPILE_BUDGET: seconds a search waits, from its start (its listing included),
  /// for the plans that compile alongside its timing (Note [compile budget] in
  /// src/ops/dispatch.cpp); under a second, so that a search that waits for them all, its final
  /// round included, stays within a second
  double compile_budget_s = 0.9;
  /// DNNX_CUDNN_BUILD_THREADS: the threads that compile runtime-compiled plans in the background
  /// (Note [late builds] in conv_compile.cpp); 0, the default: one fewer than the host has, at
  /// most 8
  int build_threads = 0;
  /// DNNX_PLAN_DIR: the folder of saved plans (Note [saved plans] in src/tune/plan_store.hpp);
  /// by default "<choice-cache file>.plans", empty (off) when the choice cache has no file or
  /// the variable is "off"
  std::string plan_dir;
  KnobSearch knob_search = KnobSearch::top;  ///< DNNX_CUDNN_KNOB_SEARCH: Note [knob search]
  int knob_variants = 24;                    ///< DNNX_CUDNN_KNOB_VARIANTS: per engine
  /// DNNX_CUDNN_CONV_GEMM: 1x1 convolutions list cuBLASLt / cuBLAS matrix products (Note [gemm
  /// candidates] in conv_gemm.cpp); on by default
  bool conv_gemm = true;
  /// DNNX_CUDNN_CONV_IM2COL: off, f32 or on (Note [im2col candidates] in conv_im2col.cpp)
  ListedFor conv_im2col = ListedFor::off;
  /// DNNX_CUDNN_CONV_WINOGRAD: fp32 3x3 convolutions of stride 1 list Winograd's F(4x4, 3x3)
  /// transforms and products (Note [winograd candidates] in conv_winograd.cpp); on by default
  bool conv_winograd = true;
  /// DNNX_CUDNN_CONV_TAPS: off, f32, sparse or on (Note [tap-region candidates] in
  /// conv_taps.cpp)
  TapCandidates conv_taps = TapCandidates::f32;
  /// DNNX_CUDNN_CONV_FRAMES: off, f32 or on (Note [frame candidates] in conv_frames.cpp)
  ListedFor conv_frames = ListedFor::f32;
  /// DNNX_CUDNN_CONV_FOLDS: off, f32 or on (Note [fold candidates] in conv_folds.cpp)
  ListedFor conv_folds = ListedFor::f32;
  /// DNNX_CUDNN_CONV_STACKED: off, f32 or on, the stacked folds (Note [stacked folds] in
  /// conv_stacked.cpp)
  ListedFor conv_stacked = ListedFor::on;
  /// DNNX_CUDNN_CONV_PHASES: off, f32 or on, the phase folds (Note [phase folds] in
  /// conv_phases.cpp)
  ListedFor conv_phases = ListedFor::on;
  /// DNNX_CUDNN_CONV_KERNELS: dnnx's own convolution kernels (depthwise, grouped,
  /// narrow-channel: kernel_candidates() in conv_common.hpp) are candidates; on by default
  bool conv_kernels = true;
  /// DNNX_CUDNN_DEPENDENT_LAUNCHES: dnnx's own convolution kernels may begin while the stream's
  /// previous kernel finishes, on devices of compute capability 9.0 and later (Note [dependent
  /// launches] in kernels/common.cuh); on by default
  bool dependent_launches = true;
};

/// "off", "top", "all".
const char* to_string(KnobSearch search);
const char* to_string(ListedFor where);
const char* to_string(TapCandidates where);

/// The settings the environment asks for (DNNX_ALLOW_TF32,
/// DNNX_ALLOW_REDUCED_PRECISION_REDUCTION, DNNX_VERBOSE, DNNX_CUDNN_GRAPHS,
/// DNNX_CUDNN_L2_SWEEP, DNNX_CUDNN_RUNTIME_COMPILED, DNNX_CUDNN_COMPILE_BUDGET,
/// DNNX_CUDNN_BUILD_THREADS, DNNX_PLAN_DIR, DNNX_CUDNN_KNOB_SEARCH, DNNX_CUDNN_KNOB_VARIANTS,
/// DNNX_CUDNN_CONV_GEMM, DNNX_CUDNN_CONV_WINOGRAD, DNNX_CUDNN_CONV_IM2COL, DNNX_CUDNN_CONV_TAPS,
/// DNNX_CUDNN_CONV_FRAMES, DNNX_CUDNN_CONV_FOLDS, DNNX_CUDNN_CONV_STACKED, DNNX_CUDNN_CONV_PHASES,
/// DNNX_CUDNN_CONV_KERNELS, DNNX_CUDNN_DEPENDENT_LAUNCHES); unset or empty variables keep the
/// defaults. Throws InvalidArgument naming a malformed variable and its value.
Settings settings_from_env();

class Runtime final : public detail::DeviceRuntime {
 public:
  /// Creates the stream (or adopts `external`, a caller's stream that must outlive this runtime),
  /// the handle and the allocator on `device`, and registers this runtime for dnnx::copy().
  Runtime(int device, Settings settings, cudaStream_t external = nullptr);
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int device() const { return device_; }
  const DeviceFacts& facts() const { return facts_; }
  bool allow_tf32() const { return settings_.allow_tf32; }
  bool allow_reduced_precision_reduction() const {
    return settings_.allow_reduced_precision_reduction;
  }
  bool verbose() const { return settings_.verbose; }
  const Settings& settings() const { return settings_; }
  cudaStream_t stream() const { return stream_raw_; }
  /// The stream as dnnx's own convolution kernels take it: dependent launches where the settings
  /// allow them and the device has them (Note [dependent launches] in kernels/common.cuh).
  kernels::Queue kernel_queue() const {
    return {stream_raw_, settings_.dependent_launches && facts_.major >= 9};
  }
  /// Whether the stream is the caller's (Context::with_stream) rather than this runtime's own.
  bool external_stream() const { return !stream_; }
  cudnnHandle_t handle() const { return handle_.get(); }
  /// A cuDNN handle of its own for background plan builds slot `slot` (created on first use, kept
  /// as long as the runtime, which the plans built with it keep alive): cuDNN allows a handle on
  /// one thread at a time, and those builds run while the main thread executes on handle(). It is
  /// bound to a stream of its own, never to stream() (Note [build handles' streams]).
  cudnnHandle_t build_handle(std::size_t slot);
  /// The cuBLASLt handle, created on the first call (Note [cuBLAS handles]).
  cublasLtHandle_t blas_lt();
  /// The cuBLAS handle, created on the first call (Note [cuBLAS handles]); bind it to stream()
  /// and a workspace before each use.
  cublasHandle_t blas();
  CachingAllocator& allocator() { return *allocator_; }
  /// Makes this runtime's device current on the calling thread.
  void make_current() const;
  /// ErrorContext with backend "cudnn" and the given implementation.
  ErrorContext context(std::string implementation = {}) const;

  void memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void fill(void* dst, std::size_t count, std::size_t element_bytes,
            std::uint64_t pattern) override;
  void synchronize() override;
  void synchronize_device() override;

 private:
  // `handle`, made by make(context()) with this runtime's device current on the first call (under
  // blas_mutex_), then the same raw handle every time.
  template <typename Handle, typename Make>
  auto created_once(Handle& handle, Make make) {
    std::lock_guard lock(blas_mutex_);
    if (!handle) {
      make_current();
      handle = make(context());
    }
    return handle.get();
  }

  int device_;
  Settings settings_;
  DeviceFacts facts_;
  // Destroyed bottom-up: the allocator's release waits on the stream, which must still exist.
  Stream stream_;  // empty for an external stream
  cudaStream_t stream_raw_ = nullptr;
  CudnnHandle handle_;
  std::mutex blas_mutex_;  // guards the creation of the two handles below
  CublasLtHandle blas_lt_;
  CublasHandle blas_;
  // A background build's handle and the stream it is bound to (Note [build handles' streams]);
  // the handle goes first.
  struct BuildHandle {
    Stream stream;
    CudnnHandle handle;
  };
  std::mutex build_handles_mutex_;  // guards build_handles_
  std::vector<std::unique_ptr<BuildHandle>> build_handles_;
  std::unique_ptr<CachingAllocator> allocator_;
  bool registered_ = false;
};

}  // namespace dnnx::cudnn
