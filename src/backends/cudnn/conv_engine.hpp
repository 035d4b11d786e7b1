#pragma once
// The graph-API half of the cudnn convolution: one operation graph per (desc, direction), the
// engine configurations of cuDNN's heuristics (modes A, B, fallback) and every engine by global
// index, as candidates; execution plans built once per candidate.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/graph_util.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dnnx::cudnn {

/// The finalized operation graph of one (desc, direction) and the descriptors it refers to.
struct OperationGraph;

/// The engine candidates of one (desc, direction) and the graph their plans are built from.
struct EngineCandidates {
  std::vector<EngineCandidate> configs;        ///< priority order (Note [engine candidates])
  std::vector<EngineCandidate> knob_variants;  ///< supported only, listed last (Note [knob search])
  std::shared_ptr<OperationGraph> graph;       ///< null when the graph itself is not supported
};

EngineCandidates engine_candidates(Runtime& runtime, const ConvDesc& desc, Direction direction);

/// The operation graph of (desc, direction) alone, without listing its engines; null when
/// cuDNN's graph API cannot express the desc.
std::shared_ptr<OperationGraph> operation_graph(Runtime& runtime, const ConvDesc& desc,
                                                Direction direction);

/// The execution plan of engine config `config` on `graph` (the operation graph of desc and
/// direction), recorded as `info` (its workspace made exact): compiles its kernels; cuDNN allows
/// several to be built at once on different threads.
std::shared_ptr<detail::ConvPlan> make_engine_plan(std::shared_ptr<Runtime> runtime,
                                                   std::shared_ptr<OperationGraph> graph,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info, const ConfigKey& config);

}  // namespace dnnx::cudnn
