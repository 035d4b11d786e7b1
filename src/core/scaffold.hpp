#pragma once
// Temporary scaffolding while the ops of issue 4 are written in parallel: an op backend with no
// candidates, so the tree links before every implementation exists. Every use is replaced by the
// op's implementation; this header is deleted when the last one lands.

#include "core/backend.hpp"
#include "core/check.hpp"

namespace dnnx::detail {

template <typename Desc, typename Args>
class NoCandidates final : public OpBackend<Desc, Args> {
 public:
  std::vector<AlgoInfo> list(const Desc&, Direction) override { return {}; }
  std::shared_ptr<OpPlan<Args>> plan(const Desc&, Direction, const std::string& id) override {
    raise(ErrorKind::Unsupported, "not implemented yet: " + id);
  }
};

}  // namespace dnnx::detail
