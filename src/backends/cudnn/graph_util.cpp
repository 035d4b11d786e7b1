// Graph-API helpers shared by the cudnn backend's graph users (the convolution's engines,
// conv_engine.cpp, and the fused convolution's, conv_fused.cpp): attribute setters, tensor
// descriptors, engine configurations and their ids, engine notes and what dnnx makes of them,
// heuristics. Moved here unchanged from conv_engine.cpp (the functions that took the convolution's
// OperationGraph take its operation-graph descriptor instead); the Notes they implement stay
// there: [engine candidates], [TF32], [runtime-compiled engines], [f32 accumulation].

#include "backends/cudnn/graph_util.hpp"

#include "backends/cudnn/check.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

namespace dnnx::cudnn {

namespace {

// cudnnBackendKnobType_t names, in enum order (the id's spelling); later types print as "k<N>".
constexpr std::array<std::string_view, 44> knob_names{"split_k",
                                                      "swizzle",
                                                      "tile_size",
                                                      "use_tex",
                                                      "edge",
                                                      "kblock",
                                                      "ldga",
                                                      "ldgb",
                                                      "chunk_k",
                                                      "split_h",
                                                      "wino_tile",
                                                      "multiply",
                                                      "split_k_buf",
                                                      "tilek",
                                                      "stages",
                                                      "reduction_mode",
                                                      "cta_split_k_mode",
                                                      "split_k_slc",
                                                      "idx_mode",
                                                      "sliced",
                                                      "split_rs",
                                                      "singlebuffer",
                                                      "ldgc",
                                                      "specfilt",
                                                      "kernel_cfg",
                                                      "workspace",
                                                      "tile_cga",
                                                      "tile_cga_m",
                                                      "tile_cga_n",
                                                      "block_size",
                                                      "occupancy",
                                                      "array_size_per_thread",
                                                      "num_c_per_block",
                                                      "split_cols",
                                                      "tile_rows",
                                                      "tile_cols",
                                                      "load_size",
                                                      "cta_count",
                                                      "stream_k",
                                                      "split_p_slc",
                                                      "tile_m",
                                                      "tile_n",
                                                      "warp_spec_cfg",
                                                      "swap_ab"};
// CUDNN_KNOB_TYPE_USE_TEX, whose enumerator cuDNN 9's headers mark deprecated.
constexpr std::int64_t use_tex_knob = 3;
static_assert(knob_names[use_tex_knob] == "use_tex");

std::string knob_name(std::int64_t type) {
  if (type >= 0 && type < static_cast<std::int64_t>(knob_names.size()))
    return std::string(knob_names[static_cast<std::size_t>(type)]);
  return detail::cat('k', type);
}

}  // namespace

std::string config_id(const ConfigKey& key, std::string_view prefix) {
  std::string id = detail::cat(prefix, key.engine);
  for (std::size_t i = 0; i < key.knobs.size(); ++i) {
    id += detail::cat(i == 0 ? ':' : ',', knob_name(key.knobs[i].first), '=', key.knobs[i].second);
  }
  return id;
}

namespace {

// A canonical decimal int64 ("0", "-12"; no sign on zero, no leading zeros, no '+'), as
// detail::cat prints one; nullopt for anything else.
std::optional<std::int64_t> parse_int64(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || detail::cat(value) != text) return std::nullopt;
  return value;
}

// The knob type knob_name() names `name`.
std::optional<std::int64_t> knob_type(std::string_view name) {
  for (std::size_t type = 0; type < knob_names.size(); ++type) {
    if (knob_names[type] == name) return static_cast<std::int64_t>(type);
  }
  if (name.size() < 2 || name[0] != 'k') return std::nullopt;
  return parse_int64(name.substr(1));
}

}  // namespace

std::optional<ConfigKey> parse_config_id(std::string_view id, std::string_view prefix) {
  if (id.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = id.substr(prefix.size());
  const std::size_t colon = rest.find(':');
  ConfigKey key;
  const std::optional<std::int64_t> engine = parse_int64(rest.substr(0, colon));
  if (!engine || *engine < 0) return std::nullopt;
  key.engine = *engine;
  if (colon != std::string_view::npos) {
    std::string_view knobs = rest.substr(colon + 1);
    while (true) {
      const std::size_t comma = knobs.find(',');
      const std::string_view knob = knobs.substr(0, comma);
      const std::size_t equals = knob.find('=');
      if (equals == std::string_view::npos) return std::nullopt;
      const std::optional<std::int64_t> type = knob_type(knob.substr(0, equals));
      const std::optional<std::int64_t> value = parse_int64(knob.substr(equals + 1));
      if (!type || !value) return std::nullopt;
      key.knobs.emplace_back(*type, *value);
      if (comma == std::string_view::npos) break;
      knobs = knobs.substr(comma + 1);
    }
  }
  // Exactly the ids config_id() makes: knobs sorted by type, each once, names as it spells them.
  if (config_id(key, prefix) != id) return std::nullopt;
  for (std::size_t i = 1; i < key.knobs.size(); ++i) {
    if (key.knobs[i - 1].first >= key.knobs[i].first) return std::nullopt;
  }
  return key;
}

// ---- thin wrappers over cudnnBackend{Set,Get}Attribute ----------------------------------------

void set(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
         cudnnBackendAttributeType_t type, std::int64_t count, const void* values,
         const ErrorContext& context, const char* what) {
  DNNX_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), name, type, count, values), context, what);
}

void set_descriptor(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                    const BackendDescriptor& value, const ErrorContext& context, const char* what) {
  cudnnBackendDescriptor_t raw = value.get();
  set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, context, what);
}

void finalize(const BackendDescriptor& d, const ErrorContext& context, const char* what) {
  DNNX_CUDNN_CHECK(cudnnBackendFinalize(d.get()), context, what);
}

std::int64_t get_int64(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                       const ErrorContext& context, const char* what) {
  std::int64_t value = 0;
  std::int64_t count = 0;
  DNNX_CUDNN_CHECK(cudnnBackendGetAttribute(d.get(), name, CUDNN_TYPE_INT64, 1, &count, &value),
                   context, what);
  return value;
}

// "CUDNN_STATUS_NOT_SUPPORTED (cuDNN's message)" for a reason string.
std::string rejection(cudnnStatus_t status) {
  std::string text = status_name(status);
  if (const std::string message = last_cudnn_message(); !message.empty())
    text += " (" + message + ")";
  return text;
}

BackendDescriptor make_convolution(const Geometry& g, const ErrorContext& context,
                                   std::string& failure) {
  BackendDescriptor conv = make_backend_descriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, context);
  const std::int64_t spatial = g.spatial;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &g.compute_type, context,
      "setting the compute type");
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, context,
      "setting the convolution mode");
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, context,
      "setting the spatial dims");
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial, g.dilation.data(), context,
      "setting the dilation");
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, spatial, g.stride.data(),
      context, "setting the stride");
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial, g.pad_before.data(),
      context, "setting the padding before");
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, spatial, g.pad_after.data(),
      context, "setting the padding after");
  if (const cudnnStatus_t status = cudnnBackendFinalize(conv.get());
      status != CUDNN_STATUS_SUCCESS) {
    failure = "the convolution descriptor: " + rejection(status);
    return {};
  }
  return conv;
}

BackendDescriptor make_tensor(std::int64_t uid, const std::array<std::int64_t, 5>& dims,
                              const std::array<std::int64_t, 5>& strides, const Geometry& g,
                              const ErrorContext& context) {
  BackendDescriptor t = make_backend_descriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, context);
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &g.data_type, context,
      "setting a tensor's dtype");
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, g.nb_dims, dims.data(), context,
      "setting a tensor's dims");
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, g.nb_dims, strides.data(), context,
      "setting a tensor's strides");
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, context, "setting a tensor's id");
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &tensor_alignment, context,
      "setting a tensor's alignment");
  finalize(t, context, "finalizing a tensor descriptor");
  return t;
}

// ---- engine configurations ---------------------------------------------------------------------

// Builds the config of `key`; cuDNN's refusal (finalize status) is returned, other failures throw.
cudnnStatus_t build_config(const BackendDescriptor& graph, const ConfigKey& key, EngineConfig& out,
                           const ErrorContext& context) {
  out.engine = make_backend_descriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, context);
  set_descriptor(out.engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph, context,
                 "binding the engine to the graph");
  set(out.engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &key.engine, context,
      "setting the engine index");
  if (const cudnnStatus_t status = cudnnBackendFinalize(out.engine.get());
      status != CUDNN_STATUS_SUCCESS)
    return status;
  std::vector<cudnnBackendDescriptor_t> raw_knobs;
  for (const auto& [type, value] : key.knobs) {
    BackendDescriptor knob = make_backend_descriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, context);
    const auto knob_type = static_cast<cudnnBackendKnobType_t>(type);
    set(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &knob_type, context,
        "setting a knob type");
    set(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value, context,
        "setting a knob value");
    if (const cudnnStatus_t status = cudnnBackendFinalize(knob.get());
        status != CUDNN_STATUS_SUCCESS)
      return status;
    raw_knobs.push_back(knob.get());
    out.knobs.push_back(std::move(knob));
  }
  out.config = make_backend_descriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, context);
  set_descriptor(out.config, CUDNN_ATTR_ENGINECFG_ENGINE, out.engine, context,
                 "setting the config's engine");
  if (!raw_knobs.empty()) {
    set(out.config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<std::int64_t>(raw_knobs.size()), raw_knobs.data(), context,
        "setting the config's knobs");
  }
  return cudnnBackendFinalize(out.config.get());
}

namespace {

// The notes of one kind (`attribute`, of cuDNN type `type`; at most `capacity`) an engine carries.
template <typename Note, std::size_t capacity>
std::vector<Note> engine_attribute_notes(const BackendDescriptor& engine,
                                         cudnnBackendAttributeName_t attribute,
                                         cudnnBackendAttributeType_t type,
                                         const ErrorContext& context, const char* what) {
  std::array<Note, capacity> notes{};
  std::int64_t count = 0;
  DNNX_CUDNN_CHECK(
      cudnnBackendGetAttribute(engine.get(), attribute, type,
                               static_cast<std::int64_t>(notes.size()), &count, notes.data()),
      context, what);
  return std::vector<Note>(notes.begin(),
                           notes.begin() + std::clamp<std::int64_t>(count, 0, notes.size()));
}

}  // namespace

EngineNotes engine_notes(const BackendDescriptor& engine, const ErrorContext& context) {
  EngineNotes notes;
  notes.numerical =
      engine_attribute_notes<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT>(
          engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, context,
          "reading an engine's numerical notes");
  notes.behavior =
      engine_attribute_notes<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT>(
          engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, context,
          "reading an engine's behavior notes");
  return notes;
}

namespace {

// Note [asymmetric padding engines]
// Some engines accept per-side padding and then compute something else: cudnn_conv_test found,
// on cuDNN 9.19 / sm_90, bwd_data engine 50 and bwd_weights engines 1 and 18 (f16 nhwc, 3x3,
// padding before 0 and after 1) and bwd_weights engine 20 (f32 nchw, stride 2, before 1,0 and
// after 0,1) off by hundreds to tens of thousands of times the error bound in nearly every
// element. They are listed unsupported whenever the padding is asymmetric; the parity test keeps
// checking every other engine on asymmetric descs, so a new cuDNN that breaks another one fails it.
struct AsymmetricPaddingBug {
  Direction direction;
  std::int64_t engine;
};
constexpr AsymmetricPaddingBug asymmetric_padding_bugs[] = {{Direction::bwd_data, 50},
                                                            {Direction::bwd_weights, 1},
                                                            {Direction::bwd_weights, 18},
                                                            {Direction::bwd_weights, 20}};

std::string padding_exclusion(const ConvDesc& desc, Direction direction, std::int64_t engine) {
  if (conv_geometry(desc).symmetric_padding) return {};
  for (const AsymmetricPaddingBug& bug : asymmetric_padding_bugs) {
    if (bug.direction == direction && bug.engine == engine) {
      return "gives wrong results for asymmetric padding (Note [asymmetric padding engines])";
    }
  }
  return {};
}

// Why dnnx rules the engine out for `desc` (Note [TF32]); empty if it does not.
std::string numeric_exclusion(const EngineNotes& notes, const ConvDesc& desc,
                              const Runtime& runtime) {
  if (desc.dtype == DType::f32) {
    if (runtime.allow_tf32()) return {};
    if (notes.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
        notes.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) {
      return detail::cat(
          "runs f32 on TF32 tensor cores (numerical notes TENSOR_CORE/"
          "DOWN_CONVERT_INPUTS) and TF32 is off (set ",
          tf32_variable, "=1 to allow it)");
    }
    return {};
  }
  if (notes.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) &&
      !runtime.allow_reduced_precision_reduction()) {
    return detail::cat("accumulates in ", to_string(desc.dtype),
                       " (numerical note REDUCED_PRECISION_REDUCTION) and dnnx accumulates in f32 "
                       "(set ",
                       reduced_precision_variable, "=1 to allow it)");
  }
  if (notes.has(CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER) ||
      notes.has(CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER)) {
    return "needs int8x32-reordered filters";
  }
  return {};
}

}  // namespace

EngineCandidate describe_config(Runtime& runtime, const BackendDescriptor& graph,
                                const ConvDesc& desc, Direction direction, const ConfigKey& key,
                                std::string_view origin, bool runtime_compiled,
                                const ErrorContext& context) {
  EngineCandidate candidate;
  candidate.config = key;
  AlgoInfo& info = candidate.info;
  info.id = config_id(key);
  info.name =
      detail::cat("engine ", key.engine, key.knobs.empty() ? " (default knobs)" : "", origin);
  info.notes = {"graph_api"};
  EngineConfig config;
  const cudnnStatus_t status = build_config(graph, key, config, context);
  if (status != CUDNN_STATUS_SUCCESS) {
    info.reason = "cuDNN rejects it: " + rejection(status);
    return candidate;
  }
  const EngineNotes notes = engine_notes(config.engine, context);
  info.deterministic = !notes.has(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
  candidate.tensor_cores = notes.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
  if (candidate.tensor_cores) info.notes.emplace_back("tensor_cores");
  if (notes.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) info.notes.emplace_back("down_convert");
  if (notes.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
    info.notes.emplace_back("reduced_precision_reduction");
  if (notes.has(CUDNN_NUMERICAL_NOTE_FFT)) {
    info.notes.emplace_back("fft");
    info.families.emplace_back("fft");
  }
  if (notes.has(CUDNN_NUMERICAL_NOTE_WINOGRAD) ||
      notes.has(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4) ||
      notes.has(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6) ||
      notes.has(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13)) {
    info.notes.emplace_back("winograd");
    info.families.emplace_back("winograd");
  }
  // Note [texture reads in long loops] in src/tune/select.cpp: such a config's call is also
  // host-heavy (Note [host cost ties] there).
  const bool texture = std::any_of(key.knobs.begin(), key.knobs.end(), [](const auto& knob) {
    return knob.first == use_tex_knob && knob.second == 1;
  });
  if (texture) {
    info.notes.emplace_back("texture_reads");
    info.notes.emplace_back("host_heavy");
  }
  candidate.runtime_compiled = notes.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
  if (candidate.runtime_compiled) info.notes.emplace_back("runtime_compiled");
  if (!info.deterministic) info.notes.emplace_back("nondeterministic");
  info.reason = numeric_exclusion(notes, desc, runtime);
  if (info.reason.empty()) info.reason = padding_exclusion(desc, direction, key.engine);
  if (info.reason.empty() && candidate.runtime_compiled && !runtime_compiled) {
    // Off by the user's DNNX_CUDNN_RUNTIME_COMPILED=0, or by default for an op that has no
    // compile budget (the fused convolution).
    info.reason = detail::cat(
        "runtime-compiled engine: its plan compiles kernels with NVRTC for this shape (seconds); ",
        runtime.settings().runtime_compiled
            ? detail::cat("set ", runtime_compiled_variable, "=1 to include it")
            : detail::cat(runtime_compiled_variable, "=0 excludes it"),
        " (Note [runtime-compiled engines])");
  }
  if (info.reason.empty()) {
    info.workspace_bytes =
        static_cast<std::size_t>(get_int64(config.config, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE,
                                           context, "reading a config's workspace size"));
    info.supported = true;
  }
  return candidate;
}

// The configs heuristics mode `mode` proposes, in its order (empty if the mode has none).
std::vector<ConfigKey> heuristic_configs(const BackendDescriptor& graph,
                                         cudnnBackendHeurMode_t mode, const ErrorContext& context) {
  BackendDescriptor heuristics =
      make_backend_descriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, context);
  set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, context,
                 "binding the heuristics to the graph");
  set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, context,
      "setting the heuristics mode");
  // A mode that does not cover this graph simply proposes nothing.
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) return {};
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return {};
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.push_back(make_backend_descriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, context));
    raw.push_back(configs.back().get());
  }
  std::int64_t returned = 0;
  DNNX_CUDNN_CHECK(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
      context, "reading the heuristics' results");
  std::vector<ConfigKey> keys;
  for (std::int64_t i = 0; i < std::min(returned, count); ++i) {
    const cudnnBackendDescriptor_t config = raw[static_cast<std::size_t>(i)];
    BackendDescriptor engine = make_backend_descriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, context);
    cudnnBackendDescriptor_t engine_raw = engine.get();
    std::int64_t n = 0;
    if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &n, &engine_raw) != CUDNN_STATUS_SUCCESS)
      continue;
    ConfigKey key;
    key.engine = get_int64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, context,
                           "reading a config's engine index");
    std::vector<BackendDescriptor> knobs;
    std::vector<cudnnBackendDescriptor_t> knob_raw;
    for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; ++k) {
      knobs.push_back(make_backend_descriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, context));
      knob_raw.push_back(knobs.back().get());
    }
    std::int64_t knob_count = 0;
    if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 static_cast<std::int64_t>(knob_raw.size()), &knob_count,
                                 knob_raw.data()) == CUDNN_STATUS_SUCCESS) {
      for (std::int64_t k = 0; k < std::min<std::int64_t>(knob_count, knob_raw.size()); ++k) {
        const BackendDescriptor& knob = knobs[static_cast<std::size_t>(k)];
        cudnnBackendKnobType_t type{};
        std::int64_t n_type = 0;
        DNNX_CUDNN_CHECK(cudnnBackendGetAttribute(knob.get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                  CUDNN_TYPE_KNOB_TYPE, 1, &n_type, &type),
                         context, "reading a knob type");
        const std::int64_t value =
            get_int64(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, context, "reading a knob value");
        key.knobs.emplace_back(static_cast<std::int64_t>(type), value);
      }
    }
    std::sort(key.knobs.begin(), key.knobs.end());
    keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace dnnx::cudnn
