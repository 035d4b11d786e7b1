#pragma once
// The graph-API half of the cudnn convolution: one operation graph per (desc, direction), the
// engine configurations of cuDNN's heuristics (modes A, B, fallback) and every engine by global
// index, as candidates; execution plans built once per candidate.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/graph_util.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <cstdint>
#include <memory>
#include <optional>
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

/// The candidate engine_candidates() lists as `id` for (desc, direction), described alone (Note
/// [re-validating persisted choices] in src/ops/dispatch.cpp): `id` parsed back into its config
/// (parse_config_id), the operation graph built into `graph` and the config described there as
/// the listing describes it; its name lacks the listing's origin (", heuristics A #1") and its
/// notes "heuristics_top". nullopt when `id` is no engine id, the graph API rejects the desc or
/// the engine index is out of range. A knob variant is described whether or not the listing's
/// knob search would reach it.
std::optional<EngineCandidate> engine_candidate_of(Runtime& runtime, const ConvDesc& desc,
                                                   Direction direction, const std::string& id,
                                                   std::shared_ptr<OperationGraph>& graph);

/// The operation graph of (desc, direction) alone, without listing its engines, bound to
/// `handle` (null: the runtime's own); null when cuDNN's graph API cannot express the desc.
std::shared_ptr<OperationGraph> operation_graph(Runtime& runtime, const ConvDesc& desc,
                                                Direction direction,
                                                cudnnHandle_t handle = nullptr);

/// The execution plan of engine config `config` on `graph` (the operation graph of desc and
/// direction), recorded as `info` (its workspace made exact): compiles its kernels; cuDNN allows
/// several to be built at once on different threads. `handle` is the cuDNN handle the graph and
/// the plan are bound to (null: the runtime's own).
std::shared_ptr<detail::ConvPlan> make_engine_plan(std::shared_ptr<Runtime> runtime,
                                                   std::shared_ptr<OperationGraph> graph,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info, const ConfigKey& config,
                                                   cudnnHandle_t handle = nullptr);

/// The plan that cuDNN's JSON serialization `json` describes (Note [saved plans]), recorded as
/// `info` (its workspace made exact); throws BackendFailure when cuDNN cannot load it (a corrupt
/// or stale plan, another GPU or cuDNN).
std::shared_ptr<detail::ConvPlan> load_engine_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info, const std::string& json);

/// cuDNN's JSON serialization of an engine plan (make_engine_plan / load_engine_plan); empty for
/// another kind of plan or when cuDNN does not serialize this engine's plans.
std::string engine_plan_json(const detail::ConvPlan& plan);

/// The ids of the configs heuristics mode `mode` proposes for (desc, direction), in its order,
/// whether dnnx supports them or not (empty when the graph API rejects the desc); for tests that
/// check a search against the heuristics' own answer.
/// Uses a cuDNN handle of its own on CUDA device `device`.
std::vector<std::string> heuristic_ids(const ConvDesc& desc, Direction direction,
                                       cudnnBackendHeurMode_t mode, int device = 0);

/// Engine plans made in this process so far, for tests and verbose output.
struct EnginePlanCounts {
  std::uint64_t built = 0;             ///< finalized from an engine config
  std::uint64_t runtime_compiled = 0;  ///< of those, runtime-compiled engines' (NVRTC compiles)
  std::uint64_t loaded = 0;            ///< loaded from saved JSON
};
EnginePlanCounts engine_plan_counts();

}  // namespace dnnx::cudnn
