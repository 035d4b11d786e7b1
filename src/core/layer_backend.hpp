#pragma once
// What the op backends of the cpu and cudnn backends share beyond ListedOpBackend: the backend
// instance's runtime, and what every plan keeps. src/backends/<backend>/layer_common.hpp add each
// backend's own pieces.

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

/// A ListedOpBackend holding the backend instance's `Runtime` (engine, stream, handle), which it
/// shares with the plans it builds.
template <typename Desc, typename Args, typename Candidate, typename Runtime>
class RuntimeLayerBackend : public ListedOpBackend<Desc, Args, Candidate> {
 public:
  RuntimeLayerBackend(BackendKind backend, std::shared_ptr<Runtime> runtime)
      : ListedOpBackend<Desc, Args, Candidate>(backend), runtime_(std::move(runtime)) {}

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
