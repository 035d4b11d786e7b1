#pragma once
// The interface every backend implements. Backends see core and tune only; the op layer
// (src/ops) owns Backend instances through the Context and dispatches to them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::detail {

/// Scratch memory handed to an implementation for one call.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// The tensors of one convolution call. Which are set depends on the direction:
///   fwd:         src, weights      -> dst
///   bwd_data:    diff_dst, weights -> diff_src
///   bwd_weights: src, diff_dst     -> diff_weights
/// The op layer has validated shapes, dtypes, layouts and devices against the desc.
struct ConvArgs {
  const Tensor* src = nullptr;
  const Tensor* weights = nullptr;
  const Tensor* diff_dst = nullptr;
  Tensor* dst = nullptr;
  Tensor* diff_src = nullptr;
  Tensor* diff_weights = nullptr;
};

/// Key of everything kept per (desc, direction): candidate lists, resolved calls.
struct ConvKey {
  ConvDesc desc;
  Direction direction = Direction::fwd;
  bool operator==(const ConvKey&) const = default;
};

/// Key of a plan: (desc, direction, candidate id).
struct ConvPlanKey {
  ConvDesc desc;
  Direction direction = Direction::fwd;
  std::string id;
  bool operator==(const ConvPlanKey&) const = default;
};

/// Hash of both keys, for unordered containers.
struct ConvKeyHash {
  std::size_t operator()(const ConvKey& key) const {
    return key.desc.hash() * 3 + static_cast<std::size_t>(key.direction);
  }
  std::size_t operator()(const ConvPlanKey& key) const {
    return (key.desc.hash() * 3 + static_cast<std::size_t>(key.direction)) ^
           (std::hash<std::string>{}(key.id) * 0x9e3779b97f4a7c15ULL);
  }
};

/// A ready-to-run convolution for one (desc, direction, candidate): descriptors, primitives or
/// plans are built once in the constructor and reused by every execute().
class ConvPlan {
 public:
  virtual ~ConvPlan() = default;
  /// The candidate this plan runs (workspace_bytes is exact for this plan).
  virtual const AlgoInfo& algo() const = 0;
  /// Runs the computation. `workspace.bytes` >= algo().workspace_bytes.
  virtual void execute(const ConvArgs& args, Workspace workspace) = 0;
};

/// A backend's convolution implementations.
class ConvBackend {
 public:
  virtual ~ConvBackend() = default;
  /// Every candidate for (desc, direction) in priority order, supported or not (with the reason),
  /// without running anything. The first supported entry is the backend's heuristic choice.
  /// Ids are stable across processes for the same library versions and machine.
  virtual std::vector<AlgoInfo> list(const ConvDesc& desc, Direction direction) = 0;
  /// The plan for candidate `id` (built on first request, then served from the backend's cache).
  /// Throws Error(Unsupported) naming the reason if `id` cannot run `desc`, Error(InvalidArgument)
  /// if `id` is not a candidate at all.
  virtual std::shared_ptr<ConvPlan> plan(const ConvDesc& desc, Direction direction,
                                         const std::string& id) = 0;
  /// Called before an exhaustive search with the ids it may run: a backend whose plans are costly
  /// to build can build them ahead, e.g. on several host threads. Failures are left for plan() to
  /// report. The default builds nothing.
  virtual void prepare(const ConvDesc& desc, Direction direction,
                       const std::vector<std::string>& ids) {}
  /// dst += bias broadcast over N and spatial positions.
  virtual void bias_fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) = 0;
  /// diff_bias = sum of diff_dst over N and spatial positions.
  virtual void bias_bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) = 0;
};

/// One backend instance, bound to a device. Owned by a Context's shared state.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  /// "reference", "cpu", "cudnn".
  virtual std::string name() const = 0;
  /// Library versions and machine facts that change which candidate wins (cache-key part),
  /// e.g. "oneDNN 3.2.0 isa=avx512_core_amx threads=2".
  virtual std::string fingerprint() const = 0;
  /// Facts recorded with every persisted choice (device name, compute capability, SM count,
  /// driver, library versions...), as name/value pairs. The op layer adds backend, fingerprint
  /// and the dnnx version.
  virtual std::vector<std::pair<std::string, std::string>> environment() const { return {}; }
  virtual Device device() const = 0;
  /// Allocator for tensors and workspaces on device().
  virtual Allocator& allocator() = 0;
  /// Milliseconds `work` takes, measured the backend's way (host clock, or device events on the
  /// backend's stream); returns once the work has finished.
  virtual double time_ms(const std::function<void()>& work) = 0;
  /// Waits for queued work (no-op on synchronous backends).
  virtual void synchronize() {}

  virtual ConvBackend& conv() = 0;
};

}  // namespace dnnx::detail
