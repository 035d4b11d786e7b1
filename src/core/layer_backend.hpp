#pragma once
// The part of a layer op's backend (pool, act, add, bnorm, conv_fused) that is the same on every
// backend: the context of its errors, a ListedOpBackend that names the backend and the op in them,
// and what every plan keeps. src/backends/<backend>/layer_common.hpp add each backend's own pieces.
// Header-only, so that dnnx_core's target list stays as it is.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>

#include "core/check.hpp"
#include "core/op_backend.hpp"
#include "core/strings.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::detail {

/// The context of errors about one layer op call: op "<op> <direction>" (e.g. "pool bwd_data",
/// as the dispatcher names it), the desc's repro line, `backend` ("cpu", "cudnn", "reference")
/// and `implementation` (a candidate id, or empty).
inline ErrorContext layer_context(std::string_view backend, std::string_view op,
                                  Direction direction, std::string repro,
                                  std::string implementation) {
  ErrorContext context;
  context.op = cat(op, ' ', to_string(direction));
  context.repro = std::move(repro);
  context.backend = std::string(backend);
  context.implementation = std::move(implementation);
  return context;
}

/// Which directions a layer op has.
enum class LayerDirections : bool {
  fwd_and_bwd,  ///< fwd and bwd_data (Note [directions of single-backward ops])
  fwd_only      ///< fwd alone (the fused convolution)
};

/// A ListedOpBackend of a layer op on `backend`, whose errors carry layer_context(backend, op,
/// ...). A fwd_only op refuses other directions before the desc is even validated:
/// InvalidArgument "<op> has only the forward direction (fwd); got <direction>". Subclasses give
/// enumerate() and build().
template <typename Desc, typename Args, typename Candidate>
class LayerOpBackend : public ListedOpBackend<Desc, Args, Candidate> {
 public:
  LayerOpBackend(std::string backend, std::string op,
                 LayerDirections directions = LayerDirections::fwd_and_bwd)
      : backend_(std::move(backend)), op_(std::move(op)), directions_(directions) {}

  std::vector<AlgoInfo> list(const Desc& desc, Direction direction) override {
    check_direction(desc, direction);
    return ListedOpBackend<Desc, Args, Candidate>::list(desc, direction);
  }
  std::shared_ptr<OpPlan<Args>> plan(const Desc& desc, Direction direction,
                                     const std::string& id) override {
    check_direction(desc, direction);
    return ListedOpBackend<Desc, Args, Candidate>::plan(desc, direction, id);
  }

 protected:
  std::string op_name() const override { return op_; }
  ErrorContext error_context(const Desc& desc, Direction direction,
                             const std::string& id) const override {
    return layer_context(backend_, op_, direction, desc.repro(direction), id);
  }

 private:
  void check_direction(const Desc& desc, Direction direction) const {
    if (directions_ == LayerDirections::fwd_only && direction != Direction::fwd) {
      raise(ErrorKind::InvalidArgument,
            cat(op_, " has only the forward direction (fwd); got ", to_string(direction)),
            layer_context(backend_, op_, Direction::fwd, desc.repro(Direction::fwd), {}));
    }
  }

  std::string backend_;
  std::string op_;
  LayerDirections directions_;
};

/// A LayerOpBackend holding the backend instance's `Runtime` (engine, stream, handle), which it
/// shares with the plans it builds.
template <typename Desc, typename Args, typename Candidate, typename Runtime>
class RuntimeLayerBackend : public LayerOpBackend<Desc, Args, Candidate> {
 public:
  RuntimeLayerBackend(std::string backend, std::string op, std::shared_ptr<Runtime> runtime,
                      LayerDirections directions = LayerDirections::fwd_and_bwd)
      : LayerOpBackend<Desc, Args, Candidate>(std::move(backend), std::move(op), directions),
        runtime_(std::move(runtime)) {}

 protected:
  std::shared_ptr<Runtime> runtime_;
};

/// What every plan of a layer op keeps: its candidate's record (algo(), workspace_bytes exact for
/// the plan) and the context of its errors.
template <typename Args>
class LayerPlanBase : public OpPlan<Args> {
 public:
  const AlgoInfo& algo() const override { return info_; }

 protected:
  LayerPlanBase(AlgoInfo info, ErrorContext context)
      : info_(std::move(info)), context_(std::move(context)) {}

  AlgoInfo info_;
  ErrorContext context_;
};

}  // namespace dnnx::detail
