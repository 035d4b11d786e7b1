#pragma once
// The interface every backend implements. Backends see core and tune only; the op layer
// (src/ops) owns Backend instances through the Context and dispatches to them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "core/energy_counter.hpp"
#include "core/op_backend.hpp"

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::detail {

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

  /// The arguments of `direction` from three tensors named by their shapes: `src` is diff_src
  /// for bwd_data, `weights` is diff_weights for bwd_weights, `dst` is diff_dst for both
  /// backwards (scratch tensors and benchmarks that run every direction on one set).
  static ConvArgs by_shape(Direction direction, Tensor& src, Tensor& weights, Tensor& dst) {
    ConvArgs a;
    switch (direction) {
      case Direction::fwd: a.src = &src, a.weights = &weights, a.dst = &dst; break;
      case Direction::bwd_data: a.diff_dst = &dst, a.weights = &weights, a.diff_src = &src; break;
      case Direction::bwd_weights:
        a.src = &src, a.diff_dst = &dst, a.diff_weights = &weights;
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
    return a;
  }
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

/// A ready-to-run convolution for one (desc, direction, candidate).
using ConvPlan = OpPlan<ConvArgs>;

/// A backend's convolution implementations (list / plan / prepare as for every op, plus bias).
class ConvBackend : public OpBackend<ConvDesc, ConvArgs> {
 public:
  /// dst += bias broadcast over N and spatial positions.
  virtual void bias_fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) = 0;
  /// diff_bias = sum of diff_dst over N and spatial positions.
  virtual void bias_bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) = 0;
};

// Each op's Args struct is in core/<op>_args.hpp (convolution's above).
#define DNNX_DECLARE_ARGS(kind, Type, ...) struct Type##Args;
DNNX_OP_TABLE(DNNX_DECLARE_ARGS)
#undef DNNX_DECLARE_ARGS

/// The interface a backend implements an op through: OpBackend<Desc, Args>, or a class derived
/// from it where the op needs more (ConvBackend's bias).
template <typename Desc, typename Args>
struct OpInterface {
  using type = OpBackend<Desc, Args>;
};
template <>
struct OpInterface<ConvDesc, ConvArgs> {
  using type = ConvBackend;
};

/// The types of op `kind`, from the op table: Desc, Args and the backend Interface.
template <OpKind kind>
struct OpTypes;
#define DNNX_OP_TYPES(kind, Type, ...)                          \
  template <>                                                   \
  struct OpTypes<OpKind::kind> {                                \
    using Desc = Type##Desc;                                    \
    using Args = Type##Args;                                    \
    using Interface = typename OpInterface<Desc, Args>::type;   \
  };
DNNX_OP_TABLE(DNNX_OP_TYPES)
#undef DNNX_OP_TYPES

/// The interface op `kind` is implemented through (ConvBackend for convolution).
template <OpKind kind>
using OpBackendOf = typename OpTypes<kind>::Interface;

/// The op backends of one backend instance, one slot per op of the table; a slot stays empty
/// where the backend does not implement the op.
class OpBackends {
 public:
  template <OpKind kind>
  void set(std::unique_ptr<typename OpTypes<kind>::Interface> backend) {
    slots_[static_cast<std::size_t>(kind)] = std::move(backend);
  }
  /// Op `kind`'s backend, or null.
  template <OpKind kind>
  typename OpTypes<kind>::Interface* find() const {
    return static_cast<typename OpTypes<kind>::Interface*>(
        slots_[static_cast<std::size_t>(kind)].get());
  }
  /// Op `kind`'s backend; throws Unsupported naming `backend` and the backends that implement
  /// the op (missing_op) when there is none.
  template <OpKind kind>
  typename OpTypes<kind>::Interface& get(BackendKind backend) const {
    auto* found = find<kind>();
    if (found == nullptr) missing_op(kind, backend);
    return *found;
  }

 private:
  [[noreturn]] static void missing_op(OpKind kind, BackendKind backend);
  std::array<std::unique_ptr<OpBackendBase>, op_kind_count> slots_;
};

/// The host time a held timing loop allows per queued call (Backend::time_queued_ms): a hundred
/// times what a replayed graph takes to queue (Note [held timing loops] in bench/line_bench.hpp).
inline constexpr double loop_queue_ms_per_call = 0.2;

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
  /// time_ms() for work whose queuing may take up to `queue_ms` of host time, such as a caller's
  /// loop of many calls: a backend that holds the device while work is queued (the cudnn
  /// backend's gate, Note [gated timing] in backends/cudnn/backend.cpp) holds it that long at
  /// most, so that the reading is the device's time alone.
  virtual double time_queued_ms(const std::function<void()>& work, double queue_ms) {
    (void)queue_ms;
    return time_ms(work);
  }
  /// Whether time_ms() reads a device clock that leaves one-time host costs (code loaded or set
  /// up on first use) out of the reading, so that a candidate's first timed run is already a fair
  /// sample (Note [warm first runs] in src/tune/select.cpp).
  virtual bool warm_timing() const { return false; }
  /// Waits for queued work (no-op on synchronous backends).
  virtual void synchronize() {}
  /// The device's cumulative energy counter (src/tune/energy.cpp, Note [energy per call]), or
  /// null with `why` saying why there is none (no counter library, a device without a counter).
  /// The counter may be shared by every caller; it is read from the thread selecting.
  virtual std::shared_ptr<EnergyCounter> energy_counter(std::string& why) {
    why = "the " + name() + " backend reads no energy counter";
    return nullptr;
  }
  /// Called once a selection or a profile has timed candidates: undoes what running them left
  /// in the device's caches that would slow the work that follows (Note [cache after timing] in
  /// src/backends/cudnn/backend.cpp). No-op where there is nothing to undo.
  virtual void after_timing() {}

  /// Op `kind`'s implementations on this backend; throws Unsupported naming the backends that
  /// implement the op when this one does not.
  template <OpKind kind>
  typename OpTypes<kind>::Interface& op() {
    return ops().template get<kind>(this->kind());
  }
  /// Convolution's implementations (op<OpKind::conv>()).
  ConvBackend& conv() { return op<OpKind::conv>(); }

 protected:
  /// The op backends this instance built (one per op of the table it implements).
  virtual const OpBackends& ops() const = 0;
};

}  // namespace dnnx::detail
