// Note [engine candidates]
// cuDNN 9's graph API describes the convolution as a one-operation graph (tensors x, w, y with
// per-side padding, so asymmetric padding is expressible here) and runs it through an engine
// (a kernel family, numbered 0..CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT-1) configured by
// knobs (tile sizes, split-k, stages...). The candidates, in priority order:
//   1. the configs of heuristics mode A, in its order (the heuristic policy's pick is the first
//      admissible one),
//   2. then those of mode B, then of the FALLBACK mode, that are not already listed,
//   3. then every engine by global index with its default knobs.
// A config's id is "cudnn:engine:<global index>" for default knobs, or
// "cudnn:engine:<global index>:<knob>=<value>,..." with the knobs in cuDNN's enum order, so an id
// names the same config in any process and for any desc (choice caches persist ids; a search's
// probes run a config listed for one desc on a smaller one). Support comes from finalizing the
// engine and the config: a failure is the unsupported reason (cuDNN's status and message). The
// config's workspace is CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, so nothing is compiled while listing.
//
// Note [knob search]
// A config's knobs pick a kernel variant (tile shapes, cluster shape, split-k, stages...); the
// heuristics propose a handful per engine and the default config is one more, but the fastest
// variant for a shape is sometimes another (on an H200, a neighbour of cuDNN's configs was 5-13%
// faster on 6 of 48 ResNet-50 layer-directions: docs/benchmarks.md, "cuDNN knob search modes").
// With DNNX_CUDNN_KNOB_SEARCH=top (the default) the first 4 distinct engines that heuristics modes
// A and B propose and dnnx supports are searched around; with `all` every supported engine is;
// `off` lists cuDNN's configs only. The seed of an engine is its first listed config (a heuristic
// one where there is one, else the default); its variants change one knob at a time, over the range
// CUDNN_ATTR_ENGINE_KNOB_INFO gives (min..max by stride), nearest the seed's value first and taking
// the knobs in turn, so a cap keeps the closest neighbours of every knob. DNNX_CUDNN_KNOB_VARIANTS
// (default 24) caps the variants per engine that cuDNN accepts; those it rejects are dropped, not
// listed, since dnnx made them up. Everything is still listed before running: variants come after
// every other candidate (legacy included), so the heuristic pick is unchanged, and an exhaustive
// search times them with the rest, their plans built in parallel (Note [parallel plan builds]).
// A variant names its seed's id (AlgoInfo::variant_of; its name says "knob variant of <id>"), and
// the search runs no variant whose seed was timed far slower than the best so far, or was
// abandoned (Note [pruning variants] in src/tune/select.cpp).
// Both settings are in the backend's fingerprint, hence in every cache key.
//
// Note [TF32]
// fp32 means fp32 unless DNNX_ALLOW_TF32=1: engines whose numerical notes say TENSOR_CORE or
// DOWN_CONVERT_INPUTS run f32 data on TF32 tensor cores (10-bit mantissa inputs), a silent loss of
// precision, so for f32 they are listed unsupported with that reason. For f16/bf16 the tensor-core
// engines are the point; engines noted REDUCED_PRECISION_REDUCTION accumulate in f16/bf16, which
// breaks dnnx's promise of f32 accumulation (Note [f32 accumulation]), and are unsupported too
// unless DNNX_ALLOW_REDUCED_PRECISION_REDUCTION=1. PyTorch's cudnn.benchmark does not rule them
// out (it drops DOWN_CONVERT_INPUTS engines, and TENSOR_CORE ones for f32 without TF32), so the
// switch is what lets a comparison with PyTorch time the same engines; like PyTorch's
// allow_fp16_reduced_precision_reduction for matrix products it trades accuracy for speed.
// NONDETERMINISTIC makes a candidate non-deterministic; WINOGRAD and FFT become notes and families.
//
// Note [runtime-compiled engines]
// Engines noted RUNTIME_COMPILATION compile their kernels with NVRTC when their plan is built:
// 0.4 to 16 s per shape on an H200 (engines 69, 77, 80, 84 for the ResNet-50 layers in f16),
// where every other plan of a search builds in under 1 s all together. None of them won a
// ResNet-50 layer or direction in bench/compare_gpu.py, but some shapes have no fast precompiled
// kernel: MobileNetV2's first depthwise bwd_data (batch 128, 96 channels, 112x112, 3x3 stride 2,
// f16 NHWC) took 2.61 ms on an H100 with the best of the others against 0.53 ms with engine 6
// (dgrad2d_c1_k1_nhwc_specialized), which PyTorch's cudnn.benchmark found. So they are
// candidates by default, at a cost kept in bounds:
//   - they are listed after every other supported candidate (conv.cpp, Note [cudnn candidate
//     order]), so the heuristic policy compiles only when nothing else can run, and no knob
//     variants are made of them (each would compile), nor channel-padded wrappers; their plans
//     for a search's smallest probe slice compile in the background too, once the search
//     starts probing (Note [probing runtime-compiled candidates] in conv.cpp);
//   - an exhaustive search (and a profile) compiles their plans on background threads, each
//     with a cuDNN handle of its own (conv_compile.hpp), in listing order, so heuristics modes
//     A and B's picks first, while the main thread times every other candidate; then it waits
//     for them until the compile budget (DNNX_CUDNN_COMPILE_BUDGET seconds from the search's
//     start, default 1) runs out, and a plan not built by then is timed no more in that search:
//     its row is not_timed with the reason (Note [compile budget] in src/ops/dispatch.cpp). A
//     compile that has started finishes in the background and serves a later search or call;
//     one that has not is never started;
//   - the chosen plan is saved next to the choice cache, so another process with the cache
//     neither compiles nor times it (Note [saved plans] in src/tune/plan_store.hpp).
// DNNX_CUDNN_RUNTIME_COMPILED=0 lists them unsupported with that reason; =1 also makes the fused
// convolution's runtime-compiled engines candidates, whose searches build every plan up front
// and have no budget (unset, they stay unsupported). The setting and the budget are part of the
// backend's fingerprint, hence of every cache key.
//
// Note [f32 accumulation]
// Every convolution, whatever its storage dtype, accumulates in f32: the compute type of both
// APIs is CUDNN_DATA_FLOAT, so f16/bf16 convolutions are cuDNN's "pseudo half" configurations.

#include "backends/cudnn/conv_engine.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/graph_util.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <string_view>
#include <utility>

namespace dnnx::cudnn {

struct OperationGraph {
  BackendDescriptor x, w, y, conv, operation, graph;
  std::int64_t engine_count = 0;
};

namespace {

// Unique ids of the graph's tensors: x = src / diff_src, w = weights / diff_weights,
// y = dst / diff_dst.
constexpr std::int64_t uid_x = 1;
constexpr std::int64_t uid_w = 2;
constexpr std::int64_t uid_y = 3;

// Builds the graph; a finalize failure of the operation or graph (cuDNN cannot express the desc)
// is returned as `failure` instead of thrown.
std::shared_ptr<OperationGraph> build_graph(cudnnHandle_t handle, const ConvDesc& desc,
                                            Direction direction, const ErrorContext& context,
                                            std::string& failure) {
  const Geometry g = conv_geometry(desc);
  auto graph = std::make_shared<OperationGraph>();
  graph->x = make_tensor(uid_x, g.src, g.src_strides, g, context);
  graph->w = make_tensor(uid_w, g.weights, g.weights_strides, g, context);
  graph->y = make_tensor(uid_y, g.dst, g.dst_strides, g, context);

  graph->conv = make_convolution(g, context, failure);
  if (!graph->conv.get()) return nullptr;

  // The operation of each direction and its attributes for x, w, y, the convolution, alpha, beta.
  struct Attributes {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static constexpr Attributes by_direction[] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  const Attributes& a = by_direction[static_cast<int>(direction)];
  const float alpha = 1.0f;
  const float beta = 0.0f;
  graph->operation = make_backend_descriptor(a.type, context);
  set_descriptor(graph->operation, a.x, graph->x, context, "setting x");
  set_descriptor(graph->operation, a.w, graph->w, context, "setting w");
  set_descriptor(graph->operation, a.y, graph->y, context, "setting y");
  set_descriptor(graph->operation, a.conv, graph->conv, context, "setting the convolution");
  set(graph->operation, a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, context, "setting alpha");
  set(graph->operation, a.beta, CUDNN_TYPE_FLOAT, 1, &beta, context, "setting beta");
  if (const cudnnStatus_t status = cudnnBackendFinalize(graph->operation.get());
      status != CUDNN_STATUS_SUCCESS) {
    failure = "the convolution operation: " + rejection(status);
    return nullptr;
  }

  graph->graph = make_backend_descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, context);
  cudnnBackendDescriptor_t operation = graph->operation.get();
  set(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &operation,
      context, "adding the operation to the graph");
  set(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context,
      "binding the graph to the handle");
  if (const cudnnStatus_t status = cudnnBackendFinalize(graph->graph.get());
      status != CUDNN_STATUS_SUCCESS) {
    failure = "the operation graph: " + rejection(status);
    return nullptr;
  }
  graph->engine_count = get_int64(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                  context, "counting the engines");
  return graph;
}

// Note [heuristics' top configs]
// The first heuristics_top_count supported configs of heuristics modes A and B are what cuDNN
// expects to be fastest; an exhaustive search times each of them, even past its budget. They
// carry the note "heuristics_top", which holds a run on a slice (Note [probing slow candidates]
// in src/tune/select.cpp) to the loose bound abandon_factor: a top config is left without a full
// run only when a slice of the problem alone took over 4x the best (the default); a full run of
// a slow one can cost a second (Note [long runs] in src/tune/select.cpp).
constexpr std::size_t heuristics_top_count = 3;

// ---- knob search -------------------------------------------------------------------------------

struct KnobRange {
  std::int64_t type = 0, min = 0, max = 0, stride = 1;
};

// The knobs of a finalized engine that have more than one value.
std::vector<KnobRange> knob_ranges(const BackendDescriptor& engine, const ErrorContext& context) {
  std::vector<BackendDescriptor> infos;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; ++k) {
    infos.push_back(make_backend_descriptor(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, context));
    raw.push_back(infos.back().get());
  }
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_KNOB_INFO,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(raw.size()),
                               &count, raw.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  std::vector<KnobRange> ranges;
  for (std::int64_t k = 0; k < std::min<std::int64_t>(count, raw.size()); ++k) {
    const BackendDescriptor& info = infos[static_cast<std::size_t>(k)];
    cudnnBackendKnobType_t type{};
    std::int64_t n = 0;
    DNNX_CUDNN_CHECK(cudnnBackendGetAttribute(info.get(), CUDNN_ATTR_KNOB_INFO_TYPE,
                                              CUDNN_TYPE_KNOB_TYPE, 1, &n, &type),
                     context, "reading a knob's type");
    KnobRange range;
    range.type = static_cast<std::int64_t>(type);
    range.min =
        get_int64(info, CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, context, "reading a knob's min");
    range.max =
        get_int64(info, CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, context, "reading a knob's max");
    range.stride = std::max<std::int64_t>(
        1, get_int64(info, CUDNN_ATTR_KNOB_INFO_STRIDE, context, "reading a knob's stride"));
    if (range.max > range.min) ranges.push_back(range);
  }
  return ranges;
}

// Note [knob search]: the one-knob neighbours of `seed`, nearest first, the knobs in turn.
std::vector<ConfigKey> knob_neighbours(const ConfigKey& seed,
                                       const std::vector<KnobRange>& ranges) {
  // Values further than this many steps from the seed's are never reached by a sane cap.
  constexpr std::size_t max_values_per_knob = 64;
  std::vector<std::vector<std::int64_t>> values(ranges.size());
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const KnobRange& range = ranges[r];
    auto in_seed = std::find_if(seed.knobs.begin(), seed.knobs.end(),
                                [&](const auto& knob) { return knob.first == range.type; });
    // A default seed does not say its value; every value is then a candidate.
    const bool known = in_seed != seed.knobs.end();
    const std::int64_t base = known ? in_seed->second : range.min;
    std::vector<std::int64_t>& v = values[r];
    for (std::int64_t value = range.min; value <= range.max; value += range.stride) {
      if (!(known && value == base)) v.push_back(value);
      if (v.size() > 4 * max_values_per_knob) break;
    }
    std::stable_sort(v.begin(), v.end(), [base](std::int64_t a, std::int64_t b) {
      return (a > base ? a - base : base - a) < (b > base ? b - base : base - b);
    });
    if (v.size() > max_values_per_knob) v.resize(max_values_per_knob);
  }
  std::vector<ConfigKey> keys;
  for (std::size_t round = 0; round < max_values_per_knob; ++round) {
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      if (round >= values[r].size()) continue;
      ConfigKey key = seed;
      auto it = std::find_if(key.knobs.begin(), key.knobs.end(),
                             [&](const auto& knob) { return knob.first == ranges[r].type; });
      if (it != key.knobs.end()) {
        it->second = values[r][round];
      } else {
        key.knobs.emplace_back(ranges[r].type, values[r][round]);
        std::sort(key.knobs.begin(), key.knobs.end());
      }
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

// ---- plans
// ---------------------------------------------------------------------------------------

// Note [saved plans] counters: engine plans finalized from a config (compiled: their kernels
// loaded or, for runtime-compiled engines, compiled with NVRTC) and loaded from saved JSON.
std::atomic<std::uint64_t> plans_built{0};
std::atomic<std::uint64_t> runtime_compiled_plans_built{0};
std::atomic<std::uint64_t> plans_loaded{0};

class EnginePlan final : public detail::ConvPlan {
 public:
  // Builds the plan of `key` on `graph`, with `handle` (the runtime's, or a build handle of its:
  // Runtime::build_handle) bound to it.
  EnginePlan(std::shared_ptr<Runtime> runtime, std::shared_ptr<OperationGraph> graph,
             const ConvDesc& desc, Direction direction, AlgoInfo info, const ConfigKey& key,
             cudnnHandle_t handle)
      : runtime_(std::move(runtime)),
        graph_(std::move(graph)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)),
        direction_(direction) {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(build_config(graph_->graph, key, config_, context_), context_,
                     "building the engine config");
    plan_ = make_backend_descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, context_);
    set(plan_, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context_,
        "binding the plan to the handle");
    set_descriptor(plan_, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config_.config, context_,
                   "setting the plan's config");
    finalize(plan_, context_, "building the execution plan");
    info_.workspace_bytes = static_cast<std::size_t>(get_int64(
        plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, context_, "reading the plan's workspace"));
    ++plans_built;
    if (info_.has_note("runtime_compiled")) ++runtime_compiled_plans_built;
  }

  // Loads a plan from cuDNN's JSON serialization of it (Note [saved plans]); cuDNN's refusal
  // throws BackendFailure.
  EnginePlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
             AlgoInfo info, const std::string& json)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)),
        direction_(direction) {
    runtime_->make_current();
    plan_ = make_backend_descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, context_);
    set(plan_, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
        static_cast<std::int64_t>(json.size()), json.data(), context_,
        "setting the saved plan's JSON");
    cudnnHandle_t handle = runtime_->handle();
    set(plan_, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context_,
        "binding the saved plan to the handle");
    finalize(plan_, context_, "loading the saved execution plan");
    info_.workspace_bytes =
        static_cast<std::size_t>(get_int64(plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           context_, "reading the saved plan's workspace"));
    ++plans_loaded;
  }

  // cuDNN's JSON serialization of the plan; empty when cuDNN does not serialize this engine's
  // plans (it documents serialization for runtime-compiled engines).
  std::string json() const {
    std::int64_t count = 0;
    if (cudnnBackendGetAttribute(plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, 0, &count, nullptr) != CUDNN_STATUS_SUCCESS ||
        count <= 0)
      return {};
    std::string text(static_cast<std::size_t>(count), '\0');
    std::int64_t written = 0;
    if (cudnnBackendGetAttribute(plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, count, &written,
                                 text.data()) != CUDNN_STATUS_SUCCESS)
      return {};
    text.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(written, 0, count)));
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    std::array<void*, 3> pointers{};
    switch (direction_) {
      case Direction::fwd:
        pointers = {const_cast<void*>(t.first), const_cast<void*>(t.second), t.output};
        break;
      case Direction::bwd_data:  // x = diff_src, w = weights, y = diff_dst
        pointers = {t.output, const_cast<void*>(t.second), const_cast<void*>(t.first)};
        break;
      case Direction::bwd_weights:  // x = src, w = diff_weights, y = diff_dst
        pointers = {const_cast<void*>(t.first), t.output, const_cast<void*>(t.second)};
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
    for (void* pointer : pointers) {
      if (reinterpret_cast<std::uintptr_t>(pointer) % tensor_alignment != 0) {
        detail::raise(ErrorKind::BackendFailure,
                      detail::cat("graph-API plans are built for ", tensor_alignment,
                                  "-byte aligned tensors; got address ", pointer),
                      context_);
      }
    }
    void* workspace_data = info_.workspace_bytes > 0 ? workspace.data : nullptr;
    runtime_->make_current();
    // The variant pack of the last call is reused when the pointers are the same (a layer called
    // on the same buffers, the timing loops): building one costs a few microseconds.
    if (!variant_pack_ || pointers != last_pointers_ || workspace_data != last_workspace_) {
      variant_pack_ = make_backend_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, context_);
      const std::array<std::int64_t, 3> uids{uid_x, uid_w, uid_y};
      set(variant_pack_, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data(),
          context_, "setting the variant pack's ids");
      set(variant_pack_, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
          pointers.data(), context_, "setting the variant pack's pointers");
      set(variant_pack_, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace_data,
          context_, "setting the variant pack's workspace");
      const cudnnStatus_t status = cudnnBackendFinalize(variant_pack_.get());
      if (status != CUDNN_STATUS_SUCCESS) {
        variant_pack_.reset();
        raise_status(status, "building the variant pack", context_);
      }
      last_pointers_ = pointers;
      last_workspace_ = workspace_data;
    }
    auto launch = [this] {
      DNNX_CUDNN_CHECK(cudnnBackendExecute(runtime_->handle(), plan_.get(), variant_pack_.get()),
                       context_, "running the execution plan");
    };
    replay_.run(runtime_->settings(), runtime_->stream(),
                {pointers[0], pointers[1], pointers[2], workspace_data}, launch, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<OperationGraph> graph_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  EngineConfig config_;  // what the plan was finalized from, kept alive with it
  BackendDescriptor plan_;
  BackendDescriptor variant_pack_;
  std::array<void*, 3> last_pointers_{};
  void* last_workspace_ = nullptr;
  LaunchGraph replay_;  // Note [graph replay]
};

// Note [knob search]. `listed` holds the key of every config listed so far, `configs` first (the
// first `from_heuristics_ab` of those came from heuristics modes A and B).
void add_knob_variants(Runtime& runtime, const OperationGraph& graph, const ConvDesc& desc,
                       Direction direction, std::vector<ConfigKey>& listed,
                       const std::vector<EngineCandidate>& configs, std::size_t from_heuristics_ab,
                       std::vector<EngineCandidate>& variants, const ErrorContext& context) {
  constexpr std::size_t top_engines = 4;
  const Settings& settings = runtime.settings();
  if (settings.knob_search == KnobSearch::off) return;
  const std::size_t seeds_from =
      settings.knob_search == KnobSearch::top ? from_heuristics_ab : configs.size();
  std::vector<std::size_t> seeds;  // indices into configs, one per engine
  for (std::size_t i = 0; i < seeds_from; ++i) {
    // A runtime-compiled engine's variants would each compile for seconds.
    if (!configs[i].info.supported || configs[i].runtime_compiled) continue;
    const bool seen = std::any_of(seeds.begin(), seeds.end(), [&](std::size_t s) {
      return configs[s].config.engine == configs[i].config.engine;
    });
    if (!seen) seeds.push_back(i);
    if (settings.knob_search == KnobSearch::top && seeds.size() == top_engines) break;
  }
  const auto cap = static_cast<std::size_t>(settings.knob_variants);
  std::size_t tried = 0;
  for (std::size_t s : seeds) {
    const ConfigKey seed = configs[s].config;
    EngineConfig config;
    if (build_config(graph.graph, seed, config, context) != CUDNN_STATUS_SUCCESS) continue;
    const std::vector<KnobRange> ranges = knob_ranges(config.engine, context);
    const std::string origin = detail::cat(", knob variant of ", configs[s].info.id);
    std::size_t accepted = 0;
    // cuDNN rejects many combinations; stop looking after a few times the cap.
    std::size_t attempts = 0;
    for (const ConfigKey& key : knob_neighbours(seed, ranges)) {
      if (accepted == cap || attempts == 4 * cap) break;
      if (std::find(listed.begin(), listed.end(), key) != listed.end()) continue;
      ++attempts;
      EngineCandidate variant = describe_config(runtime, graph.graph, desc, direction, key, origin,
                                                runtime.settings().runtime_compiled, context);
      if (!variant.info.supported) continue;
      // The seed, whose timing decides whether the search runs the variant (Note [pruning
      // variants] in src/tune/select.cpp).
      variant.info.variant_of = configs[s].info.id;
      listed.push_back(key);
      variants.push_back(std::move(variant));
      ++accepted;
    }
    tried += attempts;
  }
  if (runtime.verbose()) {
    std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": knob search ("
              << to_string(settings.knob_search) << ") around " << seeds.size()
              << " engines: " << variants.size() << " variants accepted of " << tried << " tried\n";
  }
}

}  // namespace

std::shared_ptr<OperationGraph> operation_graph(Runtime& runtime, const ConvDesc& desc,
                                                Direction direction, cudnnHandle_t handle) {
  runtime.make_current();
  std::string failure;
  return build_graph(handle != nullptr ? handle : runtime.handle(), desc, direction,
                     conv_context(desc, direction, {}), failure);
}

EngineCandidates engine_candidates(Runtime& runtime, const ConvDesc& desc, Direction direction) {
  const ErrorContext context = conv_context(desc, direction, {});
  runtime.make_current();
  EngineCandidates result;
  std::string failure;
  result.graph = build_graph(runtime.handle(), desc, direction, context, failure);
  if (!result.graph) {
    EngineCandidate none;
    none.info.id = detail::cat(engine_id_prefix, "none");
    none.info.name = "graph API";
    none.info.notes = {"graph_api"};
    none.info.reason = "cuDNN's graph API rejects " + failure;
    result.configs.push_back(std::move(none));
    return result;
  }
  std::vector<ConfigKey> listed;
  auto add = [&](const ConfigKey& key, std::string_view origin) {
    if (std::find(listed.begin(), listed.end(), key) != listed.end()) return;
    listed.push_back(key);
    result.configs.push_back(describe_config(runtime, result.graph->graph, desc, direction, key,
                                             origin, runtime.settings().runtime_compiled, context));
  };
  const std::pair<cudnnBackendHeurMode_t, std::string_view> modes[] = {
      {CUDNN_HEUR_MODE_A, "heuristics A"},
      {CUDNN_HEUR_MODE_B, "heuristics B"},
      {CUDNN_HEUR_MODE_FALLBACK, "fallback"}};
  std::size_t from_heuristics_ab = 0;  // how many of `listed` modes A and B proposed
  for (const auto& [mode, name] : modes) {
    int rank = 0;
    std::size_t top = 0;  // supported configs of this mode marked heuristics_top
    for (const ConfigKey& key : heuristic_configs(result.graph->graph, mode, context)) {
      add(key, detail::cat(", ", name, " #", ++rank));
      if (mode == CUDNN_HEUR_MODE_FALLBACK || top == heuristics_top_count) continue;
      // Note [heuristics' top configs]
      const auto config = std::find_if(result.configs.begin(), result.configs.end(),
                                       [&](const EngineCandidate& c) { return c.config == key; });
      if (config == result.configs.end() || !config->info.supported) continue;
      ++top;
      if (!config->info.has_note("heuristics_top"))
        config->info.notes.emplace_back("heuristics_top");
    }
    if (mode != CUDNN_HEUR_MODE_FALLBACK) from_heuristics_ab = listed.size();
  }
  for (std::int64_t engine = 0; engine < result.graph->engine_count; ++engine) {
    add(ConfigKey{engine, {}}, "");
  }
  add_knob_variants(runtime, *result.graph, desc, direction, listed, result.configs,
                    from_heuristics_ab, result.knob_variants, context);
  // Supported first (priority order kept), the rest after: the first supported entry is the
  // heuristic pick.
  std::stable_partition(result.configs.begin(), result.configs.end(),
                        [](const EngineCandidate& config) { return config.info.supported; });
  return result;
}

std::optional<EngineCandidate> engine_candidate_of(Runtime& runtime, const ConvDesc& desc,
                                                   Direction direction, const std::string& id,
                                                   std::shared_ptr<OperationGraph>& graph) {
  const std::optional<ConfigKey> key = parse_config_id(id);
  if (!key) return std::nullopt;
  const ErrorContext context = conv_context(desc, direction, {});
  runtime.make_current();
  std::string failure;
  graph = build_graph(runtime.handle(), desc, direction, context, failure);
  // Without a graph the listing holds only cudnn:engine:none; engine indices stop at the count.
  if (!graph || key->engine >= graph->engine_count) return std::nullopt;
  // As engine_candidates() describes a config (knob variants included), less the origin.
  return describe_config(runtime, graph->graph, desc, direction, *key, "",
                         runtime.settings().runtime_compiled, context);
}

std::shared_ptr<detail::ConvPlan> make_engine_plan(std::shared_ptr<Runtime> runtime,
                                                   std::shared_ptr<OperationGraph> graph,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info, const ConfigKey& config,
                                                   cudnnHandle_t handle) {
  DNNX_ASSERT(graph != nullptr, "engine candidate '", info.id, "' has no operation graph");
  if (handle == nullptr) handle = runtime->handle();
  return std::make_shared<EnginePlan>(std::move(runtime), std::move(graph), desc, direction, info,
                                      config, handle);
}

std::shared_ptr<detail::ConvPlan> load_engine_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info, const std::string& json) {
  return std::make_shared<EnginePlan>(std::move(runtime), desc, direction, info, json);
}

std::string engine_plan_json(const detail::ConvPlan& plan) {
  const auto* engine = dynamic_cast<const EnginePlan*>(&plan);
  return engine != nullptr ? engine->json() : std::string();
}

std::vector<std::string> heuristic_ids(const ConvDesc& desc, Direction direction,
                                       cudnnBackendHeurMode_t mode, int device) {
  const ErrorContext context = conv_context(desc, direction, {});
  make_current(device, context);
  const CudnnHandle handle = make_cudnn_handle(nullptr, context);
  std::string failure;
  const std::shared_ptr<OperationGraph> graph =
      build_graph(handle.get(), desc, direction, context, failure);
  if (!graph) return {};
  std::vector<std::string> ids;
  for (const ConfigKey& key : heuristic_configs(graph->graph, mode, context))
    ids.push_back(config_id(key));
  return ids;
}

EnginePlanCounts engine_plan_counts() {
  return {plans_built.load(), runtime_compiled_plans_built.load(), plans_loaded.load()};
}

}  // namespace dnnx::cudnn
