#pragma once
// Graph-API helpers of the cudnn backend (moved from conv_engine.cpp, where the convolution's
// engines are; conv_fused.cpp builds fused operation graphs with them): thin wrappers over
// cudnnBackend{Set,Get}Attribute, tensor descriptors, engine configurations and their ids
// ("cudnn:engine:<global index>[:<knob>=<value>,...]", Note [engine candidates]), engine notes
// mapped to support, determinism and notes (Note [TF32], Note [runtime-compiled engines]), and
// the configs of cuDNN's heuristics.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/runtime.hpp"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::cudnn {

// Every tensor is declared 16-byte aligned (what vectorized kernels need); execute() checks it.
inline constexpr std::int64_t tensor_alignment = 16;

/// One engine configuration: a global engine index and explicit knob choices (type, value),
/// sorted by type; none = the engine's defaults.
struct ConfigKey {
  std::int64_t engine = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> knobs;
  bool operator==(const ConfigKey&) const = default;
};

/// The prefix of the convolution's engine ids.
inline constexpr std::string_view engine_id_prefix = "cudnn:engine:";

/// "<prefix><index>" or "<prefix><index>:<knob>=<value>,..." (knobs in enum order), e.g.
/// "cudnn:engine:5:split_k=2". Ids are only ever made from keys: a candidate carries its key.
std::string config_id(const ConfigKey& key, std::string_view prefix = engine_id_prefix);
/// The key config_id(key, prefix) makes `id` of, exactly its inverse: nullopt for any string
/// config_id() never returns (another prefix, knobs out of order or repeated, non-canonical
/// numbers, unknown knob names).
std::optional<ConfigKey> parse_config_id(std::string_view id,
                                         std::string_view prefix = engine_id_prefix);

/// One engine configuration as a candidate: its listing entry, the key its plan is built from,
/// and what selection among candidates reads as data rather than from the entry's notes.
struct EngineCandidate {
  AlgoInfo info;
  ConfigKey config;
  /// Numerical note TENSOR_CORE (Note [channel padding] wraps only tensor-core candidates).
  bool tensor_cores = false;
  /// Behaviour note RUNTIME_COMPILATION: its plan compiles kernels with NVRTC (Note
  /// [runtime-compiled engines]).
  bool runtime_compiled = false;
};

// ---- thin wrappers over cudnnBackend{Set,Get}Attribute ----------------------------------------

void set(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
         cudnnBackendAttributeType_t type, std::int64_t count, const void* values,
         const ErrorContext& context, const char* what);
void set_descriptor(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                    const BackendDescriptor& value, const ErrorContext& context, const char* what);
void finalize(const BackendDescriptor& d, const ErrorContext& context, const char* what);
std::int64_t get_int64(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                       const ErrorContext& context, const char* what);
/// "CUDNN_STATUS_NOT_SUPPORTED (cuDNN's message)" for a reason string.
std::string rejection(cudnnStatus_t status);

/// The finalized convolution descriptor of `g` (cross-correlation, f32 compute, per-side
/// padding); a null descriptor, with cuDNN's reason in `failure`, when cuDNN rejects it.
BackendDescriptor make_convolution(const Geometry& g, const ErrorContext& context,
                                   std::string& failure);

/// A finalized tensor descriptor of `g`'s data type and rank, `tensor_alignment` aligned.
BackendDescriptor make_tensor(std::int64_t uid, const std::array<std::int64_t, 5>& dims,
                              const std::array<std::int64_t, 5>& strides, const Geometry& g,
                              const ErrorContext& context);

// ---- engine configurations ---------------------------------------------------------------------

struct EngineConfig {
  BackendDescriptor engine;
  std::vector<BackendDescriptor> knobs;
  BackendDescriptor config;
};

/// Builds the config of `key` on the finalized operation graph `graph`; cuDNN's refusal (finalize
/// status) is returned, other failures throw.
cudnnStatus_t build_config(const BackendDescriptor& graph, const ConfigKey& key, EngineConfig& out,
                           const ErrorContext& context);

struct EngineNotes {
  std::vector<cudnnBackendNumericalNote_t> numerical;
  std::vector<cudnnBackendBehaviorNote_t> behavior;
  bool has(cudnnBackendNumericalNote_t note) const {
    return std::find(numerical.begin(), numerical.end(), note) != numerical.end();
  }
  bool has(cudnnBackendBehaviorNote_t note) const {
    return std::find(behavior.begin(), behavior.end(), note) != behavior.end();
  }
};

/// The numerical and behaviour notes of a finalized engine.
EngineNotes engine_notes(const BackendDescriptor& engine, const ErrorContext& context);

/// The candidate of config `key` on `graph` (the operation graph of `desc` and `direction`), id
/// config_id(key): support (cuDNN's finalize status, Note [TF32], Note [asymmetric padding
/// engines], Note [runtime-compiled engines]), workspace, determinism, notes and families.
/// `origin` is appended to the name (", heuristics A #1"). Runtime-compiled engines are
/// unsupported unless `runtime_compiled` (the caller's setting).
EngineCandidate describe_config(Runtime& runtime, const BackendDescriptor& graph,
                                const ConvDesc& desc, Direction direction, const ConfigKey& key,
                                std::string_view origin, bool runtime_compiled,
                                const ErrorContext& context);

/// The configs heuristics mode `mode` proposes for `graph`, in its order (empty if the mode has
/// none).
std::vector<ConfigKey> heuristic_configs(const BackendDescriptor& graph,
                                         cudnnBackendHeurMode_t mode, const ErrorContext& context);

}  // namespace dnnx::cudnn
