// The cudnn backend's fused convolution.
//
// Note [fused operation graph]
// The graph API expresses the epilogue as pointwise operations after the convolution, through
// virtual (never materialised) f32 tensors:
//   x, w -> conv fprop -> c  [-> add(c, bias) -> t1]  [-> add(t1, alpha2 = residual_scale * z)
//   -> t2]  [-> relu -> y]
// The last operation writes y (dst); with no epilogue at all the graph is the plain convolution.
// bias is 1 x O x 1 x 1 in the dtype, broadcast by the pointwise add; z (the residual) has y's
// dims, strides and dtype. cuDNN fuses such a graph when an engine supports the pattern: the
// precompiled kernels cover conv + bias + relu (and + add) for some dtypes, layouts and compute
// capabilities; the runtime-fusion engines, which compile their kernels with NVRTC, cover more but
// are candidates only with DNNX_CUDNN_RUNTIME_COMPILED=1 (Note [runtime-compiled engines]). The
// candidates are the configs of heuristics modes A, B and FALLBACK on this graph, then every engine
// by global index, with the support, workspace and TF32 rules of plain convolution's engines
// (describe_config, Note [TF32]); ids "cudnn:fused:engine:<index>[:<knob>=<value>,...]" (the
// graph's engine indices are not the plain convolution's). Knob variants (Note [knob search]) are
// not searched for fused graphs. The residual may be y itself: each element of z is read by the
// epilogue of the thread that writes the same element of y.
//
// Note [legacy fused candidates]
// cudnnConvolutionBiasActivationForward computes y = act(alpha1 * conv(x, w) + alpha2 * z + bias)
// with any forward algorithm; cuDNN documents the identity activation only with
// IMPLICIT_PRECOMP_GEMM, needs the bias, and takes z = y with alpha2 = 0 when there is no
// residual. Each algorithm under each math mode is a candidate "cudnn:fused:legacy:<algorithm>:
// <math>", with plain convolution's rules: asymmetric padding and dims beyond INT_MAX are out,
// f32 without TF32 runs only under fma math (Note [legacy candidates]), support and workspace come
// from cudnnGetConvolutionForwardWorkspaceSize. implicit_precomp_gemm, the fused kernel, comes
// first; cuDNN may run the other algorithms' epilogue as kernels of its own after the convolution.
//
// Note [cudnn unfused candidate]
// "unfused:<conv id>" runs the backend's heuristic convolution (the first supported candidate of
// conv_list) and then the epilogue kernel (kernels/conv_fused.cu) in one pass. With a residual the
// convolution writes into the workspace (after its own workspace) rather than into dst, so that a
// residual which is dst itself is intact when the epilogue reads it.
//
// Order: supported graph-API configs, then supported legacy candidates, then the unfused one, then
// every unsupported candidate with its reason.

#include "backends/cudnn/kernels/conv_fused.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/graph_util.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/conv_fused_args.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view engine_prefix = "cudnn:fused:engine:";
constexpr std::string_view legacy_prefix = "cudnn:fused:legacy:";
constexpr std::string_view unfused_prefix = "unfused:";

ErrorContext fused_context(const ConvFusedDesc& desc, std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, Direction::fwd, std::move(implementation));
}

std::size_t round_up(std::size_t bytes) {
  constexpr std::size_t alignment = 256;
  return (bytes + alignment - 1) / alignment * alignment;
}

std::size_t dst_bytes(const ConvFusedDesc& desc) {
  return static_cast<std::size_t>(desc.dst_dims().product()) * size_of(desc.conv.dtype);
}

// The pointers of one call, checked (the plans can be called from below the op layer).
struct Pointers {
  const void* src = nullptr;
  const void* weights = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* dst = nullptr;
};

Pointers bind(const ConvFusedDesc& desc, const detail::ConvFusedArgs& args,
              const ErrorContext& context) {
  auto need = [&](const Tensor* tensor, const char* role) {
    return data_of(tensor, role, context);
  };
  Pointers p;
  p.src = need(args.src, "src");
  p.weights = need(args.weights, "weights");
  p.dst = need(args.dst, "dst");
  if (desc.bias) p.bias = need(args.bias, "bias");
  if (desc.residual) p.residual = need(args.residual, "residual");
  return p;
}

// ---- graph API ----------------------------------------------------------------------------------

// Unique ids of the graph's tensors (Note [fused operation graph]). The virtual ones are
// uid_virtual + stage, a range clear of the real tensors' ids, which the variant pack binds.
constexpr std::int64_t uid_x = 1;
constexpr std::int64_t uid_w = 2;
constexpr std::int64_t uid_y = 3;
constexpr std::int64_t uid_bias = 4;
constexpr std::int64_t uid_residual = 5;
constexpr std::int64_t uid_virtual = 100;

struct FusedGraph {
  std::vector<BackendDescriptor> tensors;     // every tensor the operations refer to
  std::vector<BackendDescriptor> pointwise;   // the pointwise descriptors
  std::vector<BackendDescriptor> operations;  // conv first
  BackendDescriptor conv;
  BackendDescriptor graph;
  std::int64_t engine_count = 0;
};

// An f32 intermediate of y's dims and strides that cuDNN never writes to memory.
BackendDescriptor virtual_tensor(std::int64_t uid, const Geometry& g, const ErrorContext& context) {
  BackendDescriptor t = make_backend_descriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, context);
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const bool is_virtual = true;
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, context,
      "setting a tensor's dtype");
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, g.nb_dims, g.dst.data(), context,
      "setting a tensor's dims");
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, g.nb_dims, g.dst_strides.data(), context,
      "setting a tensor's strides");
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, context, "setting a tensor's id");
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &tensor_alignment, context,
      "setting a tensor's alignment");
  set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, context,
      "marking a tensor virtual");
  finalize(t, context, "finalizing a virtual tensor");
  return t;
}

// Builds the graph of Note [fused operation graph]; a finalize failure of a descriptor, an
// operation or the graph (cuDNN cannot express the desc) is returned as `failure`.
std::shared_ptr<FusedGraph> build_fused_graph(Runtime& runtime, const ConvFusedDesc& desc,
                                              const ErrorContext& context, std::string& failure) {
  const Geometry g = conv_geometry(desc.conv);
  auto graph = std::make_shared<FusedGraph>();
  struct Stage {
    cudnnPointwiseMode_t mode;
    std::int64_t operand;  // uid of the second input, 0 for none
    float alpha2;
  };
  std::vector<Stage> stages;
  if (desc.bias) stages.push_back({CUDNN_POINTWISE_ADD, uid_bias, 1.0f});
  if (desc.residual) stages.push_back({CUDNN_POINTWISE_ADD, uid_residual, desc.residual_scale});
  if (desc.activation == FusedActivation::relu)
    stages.push_back({CUDNN_POINTWISE_RELU_FWD, 0, 1.0f});

  // x, w, y, [bias], [residual], then the virtual outputs.
  std::vector<BackendDescriptor> tensors;
  tensors.push_back(make_tensor(uid_x, g.src, g.src_strides, g, context));
  tensors.push_back(make_tensor(uid_w, g.weights, g.weights_strides, g, context));
  const std::size_t y_index = tensors.size();
  tensors.push_back(make_tensor(uid_y, g.dst, g.dst_strides, g, context));
  std::size_t bias_index = 0, residual_index = 0;
  if (desc.bias) {
    bias_index = tensors.size();
    tensors.push_back(make_tensor(uid_bias, g.bias, g.bias_strides, g, context));
  }
  if (desc.residual) {
    residual_index = tensors.size();
    tensors.push_back(make_tensor(uid_residual, g.dst, g.dst_strides, g, context));
  }
  // The conv output and each stage's output but the last are virtual.
  std::vector<std::size_t> outputs;  // index into tensors of the conv's and each stage's output
  for (std::size_t i = 0; i < stages.size(); ++i) {
    outputs.push_back(tensors.size());
    tensors.push_back(virtual_tensor(uid_virtual + static_cast<std::int64_t>(i), g, context));
  }
  outputs.push_back(y_index);

  graph->conv = make_convolution(g, context, failure);
  if (!graph->conv.get()) return nullptr;

  const float one = 1.0f;
  const float zero = 0.0f;
  BackendDescriptor conv_op =
      make_backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, context);
  set_descriptor(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, tensors[0], context,
                 "setting x");
  set_descriptor(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, tensors[1], context,
                 "setting w");
  set_descriptor(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, tensors[outputs[0]], context,
                 "setting the convolution's output");
  set_descriptor(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, graph->conv, context,
                 "setting the convolution");
  set(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one, context,
      "setting alpha");
  set(conv_op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero, context,
      "setting beta");
  if (const cudnnStatus_t status = cudnnBackendFinalize(conv_op.get());
      status != CUDNN_STATUS_SUCCESS) {
    failure = "the convolution operation: " + rejection(status);
    return nullptr;
  }
  graph->operations.push_back(std::move(conv_op));

  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Stage& stage = stages[i];
    BackendDescriptor pointwise =
        make_backend_descriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, context);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(pointwise, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &stage.mode, context,
        "setting a pointwise mode");
    set(pointwise, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision, context,
        "setting a pointwise precision");
    if (const cudnnStatus_t status = cudnnBackendFinalize(pointwise.get());
        status != CUDNN_STATUS_SUCCESS) {
      failure = "a pointwise descriptor: " + rejection(status);
      return nullptr;
    }
    BackendDescriptor op =
        make_backend_descriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, context);
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pointwise, context,
                   "setting the pointwise descriptor");
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors[outputs[i]], context,
                   "setting a pointwise input");
    if (stage.operand != 0) {
      const std::size_t operand = stage.operand == uid_bias ? bias_index : residual_index;
      set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensors[operand], context,
                     "setting a pointwise operand");
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, context,
          "setting a pointwise alpha1");
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &stage.alpha2, context,
          "setting a pointwise alpha2");
    }
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensors[outputs[i + 1]], context,
                   "setting a pointwise output");
    if (const cudnnStatus_t status = cudnnBackendFinalize(op.get());
        status != CUDNN_STATUS_SUCCESS) {
      failure = detail::cat("a pointwise operation (stage ", i + 1, "): ", rejection(status));
      return nullptr;
    }
    graph->pointwise.push_back(std::move(pointwise));
    graph->operations.push_back(std::move(op));
  }

  graph->graph = make_backend_descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, context);
  std::vector<cudnnBackendDescriptor_t> operations;
  for (const BackendDescriptor& op : graph->operations) operations.push_back(op.get());
  set(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<std::int64_t>(operations.size()), operations.data(), context,
      "adding the operations to the graph");
  cudnnHandle_t handle = runtime.handle();
  set(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context,
      "binding the graph to the handle");
  if (const cudnnStatus_t status = cudnnBackendFinalize(graph->graph.get());
      status != CUDNN_STATUS_SUCCESS) {
    failure = "the operation graph: " + rejection(status);
    return nullptr;
  }
  graph->engine_count = get_int64(graph->graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                  context, "counting the engines");
  graph->tensors = std::move(tensors);
  return graph;
}

// The graph-API candidates, in priority order (Note [fused operation graph]); ids
// config_id(key, engine_prefix).
std::vector<EngineCandidate> engine_candidates(Runtime& runtime, const FusedGraph* graph,
                                               const ConvFusedDesc& desc,
                                               const std::string& failure,
                                               const ErrorContext& context) {
  std::vector<EngineCandidate> candidates;
  if (graph == nullptr) {
    EngineCandidate none;
    none.info.id = detail::cat(engine_prefix, "none");
    none.info.name = "graph API, epilogue fused";
    none.info.notes = {"graph_api", "fused"};
    none.info.reason = "cuDNN's graph API rejects " + failure;
    candidates.push_back(std::move(none));
    return candidates;
  }
  std::vector<ConfigKey> listed;
  auto add = [&](const ConfigKey& key, std::string_view origin) {
    if (std::find(listed.begin(), listed.end(), key) != listed.end()) return;
    listed.push_back(key);
    EngineCandidate candidate =
        describe_config(runtime, graph->graph, desc.conv, Direction::fwd, key, origin,
                        runtime.settings().runtime_compiled_fused, context);
    candidate.info.id = config_id(key, engine_prefix);
    candidate.info.name += ", epilogue fused";
    candidate.info.notes.insert(candidate.info.notes.begin() + 1, "fused");
    candidates.push_back(std::move(candidate));
  };
  const std::pair<cudnnBackendHeurMode_t, std::string_view> modes[] = {
      {CUDNN_HEUR_MODE_A, "heuristics A"},
      {CUDNN_HEUR_MODE_B, "heuristics B"},
      {CUDNN_HEUR_MODE_FALLBACK, "fallback"}};
  for (const auto& [mode, name] : modes) {
    int rank = 0;
    for (const ConfigKey& key : heuristic_configs(graph->graph, mode, context)) {
      add(key, detail::cat(", ", name, " #", ++rank));
    }
  }
  for (std::int64_t engine = 0; engine < graph->engine_count; ++engine)
    add(ConfigKey{engine, {}}, "");
  return candidates;
}

class FusedEnginePlan final : public detail::ConvFusedPlan {
 public:
  FusedEnginePlan(std::shared_ptr<Runtime> runtime, std::shared_ptr<FusedGraph> graph,
                  const ConvFusedDesc& desc, AlgoInfo info, const ConfigKey& key)
      : runtime_(std::move(runtime)),
        graph_(std::move(graph)),
        desc_(desc),
        info_(std::move(info)),
        context_(fused_context(desc, info_.id)) {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(build_config(graph_->graph, key, config_, context_), context_,
                     "building the engine config");
    plan_ = make_backend_descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, context_);
    cudnnHandle_t handle = runtime_->handle();
    set(plan_, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context_,
        "binding the plan to the handle");
    set_descriptor(plan_, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config_.config, context_,
                   "setting the plan's config");
    finalize(plan_, context_, "building the execution plan");
    info_.workspace_bytes = static_cast<std::size_t>(get_int64(
        plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, context_, "reading the plan's workspace"));
    uids_ = {uid_x, uid_w, uid_y};
    if (desc_.bias) uids_.push_back(uid_bias);
    if (desc_.residual) uids_.push_back(uid_residual);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvFusedArgs& args, detail::Workspace workspace) override {
    const Pointers p = bind(desc_, args, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    // In uids_ order: x, w, y [, bias] [, residual]; unused entries stay null.
    std::array<void*, 5> pointers = {const_cast<void*>(p.src), const_cast<void*>(p.weights), p.dst,
                                     nullptr, nullptr};
    std::size_t count = 3;
    if (desc_.bias) pointers[count++] = const_cast<void*>(p.bias);
    if (desc_.residual) pointers[count++] = const_cast<void*>(p.residual);
    for (std::size_t i = 0; i < count; ++i) {
      void* pointer = pointers[i];
      if (reinterpret_cast<std::uintptr_t>(pointer) % tensor_alignment != 0) {
        detail::raise(ErrorKind::BackendFailure,
                      detail::cat("graph-API plans are built for ", tensor_alignment,
                                  "-byte aligned tensors; got address ", pointer),
                      context_);
      }
    }
    void* workspace_data = info_.workspace_bytes > 0 ? workspace.data : nullptr;
    runtime_->make_current();
    // The variant pack of the last call is reused when the pointers are the same.
    if (!variant_pack_ || pointers != last_pointers_ || workspace_data != last_workspace_) {
      variant_pack_ = make_backend_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, context_);
      const auto n = static_cast<std::int64_t>(uids_.size());
      set(variant_pack_, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids_.data(),
          context_, "setting the variant pack's ids");
      set(variant_pack_, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n,
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
                {p.src, p.weights, p.dst, workspace_data, p.bias, p.residual}, launch, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<FusedGraph> graph_;
  ConvFusedDesc desc_;
  AlgoInfo info_;
  ErrorContext context_;
  EngineConfig config_;  // what the plan was finalized from, kept alive with it
  BackendDescriptor plan_;
  std::vector<std::int64_t> uids_;
  BackendDescriptor variant_pack_;
  std::array<void*, 5> last_pointers_{};
  void* last_workspace_ = nullptr;
  LaunchGraph replay_;  // Note [graph replay]
};

// ---- legacy cudnnConvolutionBiasActivationForward -----------------------------------------------

using ActivationDescriptor = Handle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

struct LegacyAlgo {
  cudnnConvolutionFwdAlgo_t algo;
  std::string_view name;
  std::string_view note;
  std::string_view family;
};
// Note [legacy fused candidates]: implicit_precomp_gemm first, then cuDNN's numbering.
constexpr std::array<LegacyAlgo, 8> legacy_algos{{
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "implicit_precomp_gemm", "implicit_gemm",
     "small"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "implicit_gemm", "implicit_gemm", "none"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "gemm", "gemm", "large"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "direct", "direct", ""},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fft", "fft", "fft"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "fft_tiling", "fft", "fft_tiling"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "winograd", "winograd", "winograd"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused", "winograd", "winograd"},
}};

struct MathMode {
  cudnnMathType_t math;
  std::string_view name;
};
constexpr std::array<MathMode, 4> math_modes{{
    {CUDNN_DEFAULT_MATH, "default"},
    {CUDNN_TENSOR_OP_MATH, "tensor_op"},
    {CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, "tensor_op_allow_conversion"},
    {CUDNN_FMA_MATH, "fma"},
}};

// Tensor cores first where they are allowed, fma first for f32 without TF32 (as conv_legacy.cpp).
std::array<MathMode, 4> math_order(const ConvFusedDesc& desc, const Runtime& runtime) {
  if (desc.conv.dtype == DType::f32 && !runtime.allow_tf32()) {
    return {math_modes[3], math_modes[0], math_modes[1], math_modes[2]};
  }
  return {math_modes[1], math_modes[2], math_modes[0], math_modes[3]};
}

// Note [legacy candidates] (conv_legacy.cpp): TF32 off means fma math for f32.
std::string math_exclusion(const ConvFusedDesc& desc, cudnnMathType_t math,
                           const Runtime& runtime) {
  if (desc.conv.dtype != DType::f32 || runtime.allow_tf32()) return {};
  if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
    return detail::cat("runs f32 on TF32 tensor cores and TF32 is off (set ", tf32_variable,
                       "=1 to allow it)");
  }
  if (math == CUDNN_DEFAULT_MATH && runtime.facts().major >= 8) {
    return detail::cat("default math may run f32 on TF32 tensor cores on compute capability ",
                       runtime.facts().major, '.', runtime.facts().minor, " and TF32 is off (set ",
                       tf32_variable, "=1 to allow it; fma is the f32 math mode)");
  }
  return {};
}

bool fits_int(const Geometry& g) {
  auto ok = [&](const std::array<std::int64_t, 5>& values) {
    return std::all_of(values.begin(), values.begin() + g.nb_dims,
                       [](std::int64_t v) { return v <= INT_MAX; });
  };
  return ok(g.src) && ok(g.src_strides) && ok(g.dst) && ok(g.dst_strides) && ok(g.weights);
}

// The legacy descriptors of one desc; the math mode is set on `conv` per query or plan.
struct LegacyDescriptors {
  TensorDescriptor src, dst, bias;
  FilterDescriptor weights;
  ConvolutionDescriptor conv;
  ActivationDescriptor activation;
};

LegacyDescriptors make_legacy_descriptors(const ConvFusedDesc& desc, const ErrorContext& context) {
  const Geometry g = conv_geometry(desc.conv);
  LegacyDescriptors d{make_tensor_descriptor(context),      make_tensor_descriptor(context),
                      make_tensor_descriptor(context),      make_filter_descriptor(context),
                      make_convolution_descriptor(context), ActivationDescriptor()};
  cudnnActivationDescriptor_t raw_activation = nullptr;
  DNNX_CUDNN_CHECK(cudnnCreateActivationDescriptor(&raw_activation), context,
                   "creating an activation descriptor");
  d.activation = ActivationDescriptor(raw_activation, "activation descriptor");
  auto narrow = [&](const std::array<std::int64_t, 5>& values) {
    std::array<int, 5> out{};
    for (int i = 0; i < g.nb_dims; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<int>(values[static_cast<std::size_t>(i)]);
    return out;
  };
  const auto src = narrow(g.src), src_strides = narrow(g.src_strides);
  const auto dst = narrow(g.dst), dst_strides = narrow(g.dst_strides);
  const auto bias = narrow(g.bias), bias_strides = narrow(g.bias_strides);
  const auto weights = narrow(g.weights);
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.src.get(), g.data_type, g.nb_dims, src.data(),
                                              src_strides.data()),
                   context, "describing src");
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.dst.get(), g.data_type, g.nb_dims, dst.data(),
                                              dst_strides.data()),
                   context, "describing dst");
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.bias.get(), g.data_type, g.nb_dims, bias.data(),
                                              bias_strides.data()),
                   context, "describing the bias");
  const cudnnTensorFormat_t format =
      desc.conv.layout == Layout::channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  DNNX_CUDNN_CHECK(
      cudnnSetFilterNdDescriptor(d.weights.get(), g.data_type, format, g.nb_dims, weights.data()),
      context, "describing weights");
  std::array<int, 3> pad{}, stride{}, dilation{};
  for (int i = 0; i < g.spatial; ++i) {
    const auto s = static_cast<std::size_t>(i);
    pad[s] = static_cast<int>(g.pad_before[s]);
    stride[s] = static_cast<int>(g.stride[s]);
    dilation[s] = static_cast<int>(g.dilation[s]);
  }
  DNNX_CUDNN_CHECK(
      cudnnSetConvolutionNdDescriptor(d.conv.get(), g.spatial, pad.data(), stride.data(),
                                      dilation.data(), CUDNN_CROSS_CORRELATION, g.compute_type),
      context, "describing the convolution");
  DNNX_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv.get(), static_cast<int>(desc.conv.groups)),
                   context, "setting the group count");
  const cudnnActivationMode_t mode =
      desc.activation == FusedActivation::relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
  DNNX_CUDNN_CHECK(cudnnSetActivationDescriptor(d.activation.get(), mode, CUDNN_PROPAGATE_NAN, 0.0),
                   context, "describing the activation");
  return d;
}

std::string legacy_id(std::string_view algo, std::string_view math) {
  return detail::cat(legacy_prefix, algo, ':', math);
}

// A cudnnConvolutionBiasActivationForward candidate: its listing entry and what its plan runs.
struct LegacyFusedCandidate {
  AlgoInfo info;
  cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// Note [legacy fused candidates].
std::vector<LegacyFusedCandidate> legacy_candidates(Runtime& runtime, const ConvFusedDesc& desc,
                                                    const ErrorContext& context) {
  const Geometry g = conv_geometry(desc.conv);
  std::string common;
  if (!desc.bias) {
    common =
        "cudnnConvolutionBiasActivationForward needs a bias and desc.bias is false (the "
        "graph-API and unfused candidates run without one)";
  } else if (!g.symmetric_padding) {
    common =
        "legacy cuDNN takes one padding per spatial dim; asymmetric padding needs a "
        "graph-API engine (cudnn:fused:engine:...)";
  } else if (!fits_int(g)) {
    common = "a dim or stride exceeds INT_MAX, which legacy descriptors cannot hold";
  }
  std::unique_ptr<LegacyDescriptors> d;
  if (common.empty()) {
    runtime.make_current();
    d = std::make_unique<LegacyDescriptors>(make_legacy_descriptors(desc, context));
  }
  std::vector<LegacyFusedCandidate> candidates;
  for (const LegacyAlgo& algo : legacy_algos) {
    for (const MathMode& math : math_order(desc, runtime)) {
      LegacyFusedCandidate candidate;
      candidate.algorithm = algo.algo;
      candidate.math = math.math;
      AlgoInfo& info = candidate.info;
      info.id = legacy_id(algo.name, math.name);
      info.name =
          detail::cat("cudnnConvolutionBiasActivationForward, ", algo.name, " (", math.name, ")");
      info.deterministic = true;  // every forward algorithm is (Note [legacy candidates])
      // host_heavy: a legacy call (Note [host cost ties] in src/tune/select.cpp).
      info.notes = {"legacy", "fused", std::string(algo.note), "host_heavy"};
      if (math.math == CUDNN_TENSOR_OP_MATH || math.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        info.notes.emplace_back("tensor_cores");
      if (math.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        info.notes.emplace_back("down_convert");
      if (!algo.family.empty()) info.families.emplace_back(algo.family);
      std::string reason = common;
      if (reason.empty() && desc.activation == FusedActivation::identity &&
          algo.algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
        reason =
            "cuDNN runs cudnnConvolutionBiasActivationForward with the identity activation "
            "only with implicit_precomp_gemm";
      }
      if (reason.empty()) reason = math_exclusion(desc, math.math, runtime);
      if (reason.empty()) {
        DNNX_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv.get(), math.math), context,
                         "setting the math mode");
        std::size_t bytes = 0;
        const cudnnStatus_t status = cudnnGetConvolutionForwardWorkspaceSize(
            runtime.handle(), d->src.get(), d->weights.get(), d->conv.get(), d->dst.get(),
            algo.algo, &bytes);
        if (status == CUDNN_STATUS_SUCCESS) {
          info.workspace_bytes = bytes;
        } else {
          reason = "cuDNN rejects it: " + rejection(status);
        }
      }
      info.supported = reason.empty();
      info.reason = std::move(reason);
      candidates.push_back(std::move(candidate));
    }
  }
  return candidates;
}

class LegacyFusedPlan final : public detail::ConvFusedPlan {
 public:
  LegacyFusedPlan(std::shared_ptr<Runtime> runtime, const ConvFusedDesc& desc, AlgoInfo info,
                  cudnnConvolutionFwdAlgo_t algorithm, cudnnMathType_t math)
      : runtime_(std::move(runtime)),
        desc_(desc),
        info_(std::move(info)),
        context_(fused_context(desc, info_.id)),
        algo_(algorithm) {
    runtime_->make_current();
    descriptors_ = std::make_unique<LegacyDescriptors>(make_legacy_descriptors(desc_, context_));
    DNNX_CUDNN_CHECK(cudnnSetConvolutionMathType(descriptors_->conv.get(), math), context_,
                     "setting the math mode");
    std::size_t bytes = 0;
    DNNX_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
                         runtime_->handle(), descriptors_->src.get(), descriptors_->weights.get(),
                         descriptors_->conv.get(), descriptors_->dst.get(), algo_, &bytes),
                     context_, "querying the workspace size");
    info_.workspace_bytes = bytes;
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvFusedArgs& args, detail::Workspace workspace) override {
    const Pointers p = bind(desc_, args, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    auto launch = [&] {
      const float alpha1 = 1.0f;
      // Without a residual z is y with weight 0 (cuDNN's convention).
      const float alpha2 = desc_.residual ? desc_.residual_scale : 0.0f;
      const void* z = desc_.residual ? p.residual : p.dst;
      const LegacyDescriptors& d = *descriptors_;
      DNNX_CUDNN_CHECK(
          cudnnConvolutionBiasActivationForward(
              runtime_->handle(), &alpha1, d.src.get(), p.src, d.weights.get(), p.weights,
              d.conv.get(), algo_, workspace.data, workspace.bytes, &alpha2, d.dst.get(), z,
              d.bias.get(), p.bias, d.activation.get(), d.dst.get(), p.dst),
          context_, "running cudnnConvolutionBiasActivationForward");
    };
    replay_.run(runtime_->settings(), runtime_->stream(),
                {p.src, p.weights, p.dst, workspace.data, p.bias, p.residual}, launch, context_);
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvFusedDesc desc_;
  AlgoInfo info_;
  ErrorContext context_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::unique_ptr<LegacyDescriptors> descriptors_;
  LaunchGraph replay_;  // Note [graph replay]
};

// ---- unfused ------------------------------------------------------------------------------------

// The unfused candidate: its listing entry and the id of the convolution candidate it runs
// (the conv backend's heuristic pick, whose plan that backend builds).
struct UnfusedCandidate {
  AlgoInfo info;
  std::string conv_id;
};

UnfusedCandidate unfused_candidate(const ConvFusedDesc& desc, detail::ConvBackend& conv) {
  UnfusedCandidate unfused;
  AlgoInfo& info = unfused.info;
  const std::vector<AlgoInfo> convs = conv.list(desc.conv, Direction::fwd);
  const auto heuristic =
      std::find_if(convs.begin(), convs.end(), [](const AlgoInfo& algo) { return algo.supported; });
  if (heuristic == convs.end()) {
    info.id = detail::cat(unfused_prefix, "none");
    info.name = "convolution, then the epilogue kernel (no convolution candidate)";
    info.notes = {"unfused"};
    info.reason = "the cudnn convolution has no supported candidate for this desc";
    return unfused;
  }
  unfused.conv_id = heuristic->id;
  info.id = detail::cat(unfused_prefix, heuristic->id);
  info.name = detail::cat(heuristic->name, ", then the epilogue kernel");
  info.notes = {"unfused", "kernel"};
  info.notes.insert(info.notes.end(), heuristic->notes.begin(), heuristic->notes.end());
  info.families = heuristic->families;
  info.deterministic = heuristic->deterministic;  // the kernel is (Note [epilogue kernel])
  info.supported = true;
  info.workspace_bytes = heuristic->workspace_bytes;
  // With a residual the convolution's output is staged after its own workspace.
  if (desc.residual) info.workspace_bytes = round_up(heuristic->workspace_bytes) + dst_bytes(desc);
  return unfused;
}

kernels::conv_fused::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kernels::conv_fused::Element::f16;
    case DType::bf16: return kernels::conv_fused::Element::bf16;
    default: return kernels::conv_fused::Element::f32;
  }
}

class UnfusedPlan final : public detail::ConvFusedPlan {
 public:
  UnfusedPlan(std::shared_ptr<Runtime> runtime, const ConvFusedDesc& desc, AlgoInfo info,
              std::shared_ptr<detail::ConvPlan> conv)
      : runtime_(std::move(runtime)),
        desc_(desc),
        info_(std::move(info)),
        context_(fused_context(desc, info_.id)),
        conv_(std::move(conv)) {
    // The convolution's plan knows its exact workspace (an engine's may differ from the listed
    // one): the staging buffer goes after it, and the workspace is exact for this plan.
    info_.workspace_bytes = conv_->algo().workspace_bytes;
    if (desc.residual) {
      staging_offset_ = round_up(conv_->algo().workspace_bytes);
      info_.workspace_bytes = staging_offset_ + dst_bytes(desc);
    }
    const std::int64_t channels = desc.conv.out_channels;
    shape_.batch = desc.conv.batch;
    shape_.channels = channels;
    shape_.spatial = desc.dst_dims().product() / (desc.conv.batch * channels);
    shape_.channels_last = desc.conv.layout == Layout::channels_last;
    shape_.relu = desc.activation == FusedActivation::relu;
    shape_.residual_scale = desc.residual_scale;
    shape_.element = element_of(desc.conv.dtype);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvFusedArgs& args, detail::Workspace workspace) override {
    const Pointers p = bind(desc_, args, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    // Note [cudnn unfused candidate]: with a residual the convolution's output is staged. The
    // view over the workspace is made again only when the workspace moves.
    Tensor* conv_out = args.dst;
    if (desc_.residual) {
      void* staging = static_cast<std::byte*>(workspace.data) + staging_offset_;
      if (staged_.data() != staging) {
        staged_ = Tensor::view(staging, desc_.dst_dims(), desc_.conv.dtype, desc_.conv.layout,
                               Device::cuda(runtime_->device()));
      }
      conv_out = &staged_;
    }
    detail::ConvArgs conv_args;
    conv_args.src = args.src, conv_args.weights = args.weights, conv_args.dst = conv_out;
    conv_->execute(conv_args, {workspace.data, desc_.residual ? staging_offset_ : workspace.bytes});
    const bool nothing_to_do =
        !desc_.bias && !desc_.residual && desc_.activation == FusedActivation::identity;
    if (nothing_to_do) return;
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kernels::conv_fused::epilogue(shape_, conv_out->data(), p.bias, p.residual,
                                                   p.dst, runtime_->stream()),
                     context_, "launching the epilogue kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvFusedDesc desc_;
  AlgoInfo info_;
  ErrorContext context_;
  std::shared_ptr<detail::ConvPlan> conv_;
  std::size_t staging_offset_ = 0;  // of the convolution's output (desc.residual)
  Tensor staged_;  // the convolution's output in the workspace (desc.residual)
  kernels::conv_fused::Shape shape_;
};

// ---- the backend --------------------------------------------------------------------------------

// A candidate of the fused convolution, listed as data: its AlgoInfo and, per kind, what building
// its plan takes, so a plan is built from the candidate and never from its id.
struct Candidate {
  enum class Kind { engine, legacy, unfused };
  AlgoInfo info;
  Kind kind = Kind::engine;
  // engine: the config on the desc's fused operation graph (null when cuDNN's graph API rejects
  // the desc; every engine candidate is unsupported then).
  ConfigKey config;
  std::shared_ptr<FusedGraph> graph;
  // legacy: cudnnConvolutionBiasActivationForward's algorithm and math mode.
  cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  // unfused: the convolution candidate it runs.
  std::string conv_id;
};

bool is_supported(const Candidate& candidate) { return candidate.info.supported; }

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class CudnnConvFused final
    : public detail::ListedOpBackend<ConvFusedDesc, detail::ConvFusedArgs, Candidate> {
 public:
  CudnnConvFused(std::shared_ptr<Runtime> runtime, detail::ConvBackend& conv)
      : ListedOpBackend(BackendKind::cudnn), runtime_(std::move(runtime)), conv_(conv) {}

  // Note [parallel plan builds] (conv.cpp): the engine plans of a search are built up front on
  // host threads.
  void prepare(const ConvFusedDesc& desc, Direction direction, const std::vector<std::string>& ids,
               Clock::time_point) override {
    if (direction != Direction::fwd) return;  // plan() reports it
    const std::vector<Candidate>& listed = listed_candidates(desc, direction);
    std::vector<const Candidate*> to_build;
    for (const std::string& id : ids) {
      const auto found = std::find_if(listed.begin(), listed.end(),
                                      [&](const Candidate& c) { return c.info.id == id; });
      if (found != listed.end() && found->info.supported &&
          found->kind == Candidate::Kind::engine && found->graph)
        to_build.push_back(&*found);
    }
    if (to_build.size() < 2) return;
    const auto threads = std::min<std::size_t>({to_build.size(), 16, detail::hardware_threads()});
    std::vector<std::shared_ptr<detail::ConvFusedPlan>> built(to_build.size());
    std::atomic<std::size_t> next{0};
    const auto start = Clock::now();
    auto worker = [&] {
      for (std::size_t i = next++; i < to_build.size(); i = next++) {
        try {
          built[i] = build(desc, direction, *to_build[i]);
        } catch (const std::exception&) {
          // plan() builds it again and reports the error where the search records it.
        }
      }
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& thread : pool) thread.join();
    if (runtime_->verbose()) {
      std::cerr << "dnnx: cudnn: conv_fused " << desc << ": built " << to_build.size()
                << " engine plans on " << threads << " threads in " << ms_since(start) << " ms\n";
    }
    for (std::size_t i = 0; i < to_build.size(); ++i) {
      if (built[i]) {
        plans().get_or_build(desc, direction, to_build[i]->info.id, [&] { return built[i]; });
      }
    }
  }

 private:
  // Order: supported graph-API configs, then supported legacy candidates, then the unfused one,
  // then every unsupported candidate with its reason.
  std::vector<Candidate> enumerate(const ConvFusedDesc& desc, Direction direction) override {
    const auto start = Clock::now();
    const ErrorContext context = fused_context(desc, {});
    runtime_->make_current();
    std::string failure;
    const std::shared_ptr<FusedGraph> graph = build_fused_graph(*runtime_, desc, context, failure);
    std::vector<Candidate> candidates;
    for (EngineCandidate& engine :
         engine_candidates(*runtime_, graph.get(), desc, failure, context)) {
      Candidate candidate;
      candidate.info = std::move(engine.info);
      candidate.kind = Candidate::Kind::engine;
      candidate.config = std::move(engine.config);
      candidate.graph = graph;
      candidates.push_back(std::move(candidate));
    }
    const double engines_ms = ms_since(start);
    for (LegacyFusedCandidate& legacy : legacy_candidates(*runtime_, desc, context)) {
      Candidate candidate;
      candidate.info = std::move(legacy.info);
      candidate.kind = Candidate::Kind::legacy;
      candidate.algorithm = legacy.algorithm;
      candidate.math = legacy.math;
      candidates.push_back(std::move(candidate));
    }
    UnfusedCandidate unfused = unfused_candidate(desc, conv_);
    Candidate candidate;
    candidate.info = std::move(unfused.info);
    candidate.kind = Candidate::Kind::unfused;
    candidate.conv_id = std::move(unfused.conv_id);
    candidates.push_back(std::move(candidate));
    std::stable_partition(candidates.begin(), candidates.end(), is_supported);
    for (std::size_t i = 0; i < candidates.size(); ++i)
      candidates[i].info.priority = static_cast<int>(i);
    if (runtime_->verbose()) {
      std::cerr << "dnnx: cudnn: conv_fused " << desc << ": listed " << candidates.size()
                << " candidates (engine configs in " << engines_ms << " ms, all in "
                << ms_since(start) << " ms)\n";
    }
    return candidates;
  }

  std::shared_ptr<detail::ConvFusedPlan> build(const ConvFusedDesc& desc, Direction,
                                               const Candidate& candidate) override {
    switch (candidate.kind) {
      case Candidate::Kind::engine:
        return std::make_shared<FusedEnginePlan>(runtime_, candidate.graph, desc, candidate.info,
                                                 candidate.config);
      case Candidate::Kind::legacy:
        return std::make_shared<LegacyFusedPlan>(runtime_, desc, candidate.info,
                                                 candidate.algorithm, candidate.math);
      case Candidate::Kind::unfused:
        return std::make_shared<UnfusedPlan>(
            runtime_, desc, candidate.info,
            conv_.plan(desc.conv, Direction::fwd, candidate.conv_id));
    }
    return nullptr;
  }

  std::shared_ptr<Runtime> runtime_;
  detail::ConvBackend& conv_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv_fused>> make_conv_fused_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends& built) {
  return std::make_unique<CudnnConvFused>(std::move(runtime), built.get<OpKind::conv>(BackendKind::cudnn));
}

}  // namespace dnnx::cudnn
