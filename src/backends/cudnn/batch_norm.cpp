// The cudnn backend's batch normalization: cuDNN's legacy calls (cudnnBatchNormalizationForward
// Training / Inference / Backward) and their Ex variants in every mode, and the backend's own
// kernels (kernels/batch_norm.cu), as candidates.
//
// Note [cudnn batch-norm candidates]
//   cudnn:legacy:<mode>   cudnnBatchNormalizationForwardTraining / ForwardInference / Backward
//                         with mode per_activation, spatial or spatial_persistent (a candidate of
//                         spatial statistics, never a mode of the desc: it may use a scaled
//                         integer reduction with a smaller range, and takes its fast path for f16
//                         NHWC data);
//   cudnn:ex:<mode>       cudnnBatchNormalizationForwardTrainingEx / BackwardEx with
//                         CUDNN_BATCHNORM_OPS_BN, whose workspace (and the forward's reserve
//                         space) come from cuDNN's size queries: what PyTorch calls, and the NHWC
//                         f16 fast path;
//   cudnn:kernel:bnorm    the two-pass kernels (Note [batch-norm kernel passes]): every desc
//                         under 2^31 elements, including the inference backward;
//   cudnn:kernel:bnorm_fused  the one-pass kernels for channels-first data with at most 4096
//                         values per statistic.
// What cuDNN cannot do is listed unsupported with the reason: its backward differentiates
// through the batch statistics, so an inference (frozen-statistics) backward runs only on the
// kernels; its inference call has no persistent mode and no Ex variant; a backward Ex call would
// need the reserve space its forward wrote, which dnnx's calls do not carry from forward to
// backward, so BackwardEx is supported only where cuDNN reports a zero-size reserve; bf16 needs
// compute capability 8.0. Limits PyTorch applies before routing to cuDNN (fewer than 2^31
// elements, N <= 880801 in training and N <= 65535 in inference) are kept.
//
// Data descriptors: spatial data as 4-D / 5-D (rank 2 as N x C x 1 x 1, rank 3 as
// N x C x 1 x W) with the layout's dense strides, from which cuDNN recognises NHWC; per-activation
// data as N x K x 1 x 1 (K = C x spatial), since a sample's values are contiguous in either
// layout and the per-activation parameters share their order (BatchNormDesc::param_dims). The
// parameter descriptor comes from cudnnDeriveBNTensorDescriptor. cuDNN's calls always read a
// scale and write parameter gradients: an affine-less plan owns a device buffer of ones, zeros
// and gradient space. Saved statistics are passed or both null (the op layer's rule). The legacy
// calls thus need no workspace, and the Ex calls exactly what cuDNN reports. Running statistics are
// cuDNN's own update (exponentialAverageFactor = momentum, unbiased variance), as PyTorch relies
// on.
//
// Note [cudnn batch-norm candidate order]
// The heuristic takes what PyTorch routes the desc to, so that its default matches PyTorch's
// speed: per-activation (and rank-2) training -> Ex per_activation; NHWC training ->
// Ex spatial_persistent; other training -> Ex spatial; inference -> legacy spatial /
// per_activation; bf16 -> the kernels (PyTorch uses its own kernels for bf16); inference backward
// -> the kernels. The other candidates follow, the legacy call after its Ex variant, and
// unsupported ones last. Every candidate is deterministic: cuDNN's reproducibility notes list no
// batch-normalization routine (the persistent mode's integer reduction is deterministic too),
// and the kernels reduce in a fixed order; cudnn_batch_norm_test checks it bitwise.

#include "backends/cudnn/kernels/batch_norm.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/batch_norm_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace bn = kernels::batch_norm;
using detail::BatchNormArgs;
using BatchNormPlan = detail::OpPlan<BatchNormArgs>;

constexpr const char* kernel_id = "cudnn:kernel:bnorm";
constexpr const char* fused_id = "cudnn:kernel:bnorm_fused";
// PyTorch's limits for routing batch normalization to cuDNN
// (aten/src/ATen/native/Normalization.cpp).
constexpr std::int64_t max_training_batch = 880801;
constexpr std::int64_t max_inference_batch = 65535;

ErrorContext context_of(const BatchNormDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

// ---- the candidates -----------------------------------------------------------------------------

enum class Api : std::uint8_t { legacy, ex, kernel, fused };

struct Spec {
  Api api;
  cudnnBatchNormMode_t mode;  // legacy / ex
  const char* mode_name;
};

constexpr std::array<Spec, 8> specs{{
    {Api::ex, CUDNN_BATCHNORM_PER_ACTIVATION, "per_activation"},
    {Api::legacy, CUDNN_BATCHNORM_PER_ACTIVATION, "per_activation"},
    {Api::ex, CUDNN_BATCHNORM_SPATIAL, "spatial"},
    {Api::legacy, CUDNN_BATCHNORM_SPATIAL, "spatial"},
    {Api::ex, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, "spatial_persistent"},
    {Api::legacy, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, "spatial_persistent"},
    {Api::kernel, CUDNN_BATCHNORM_SPATIAL, ""},
    {Api::fused, CUDNN_BATCHNORM_SPATIAL, ""},
}};

std::string id_of(const Spec& spec) {
  switch (spec.api) {
    case Api::legacy: return detail::cat("cudnn:legacy:", spec.mode_name);
    case Api::ex: return detail::cat("cudnn:ex:", spec.mode_name);
    case Api::kernel: return kernel_id;
    case Api::fused: return fused_id;
  }
  return {};
}

bool per_activation_data(const BatchNormDesc& desc) {
  return desc.mode == BatchNormMode::per_activation;
}

// The kernels' view of the data (Note [batch-norm kernel layouts]).
bn::Shape shape_of(const BatchNormDesc& desc) {
  bn::Shape shape;
  const std::int64_t spatial = desc.reduction_size() / desc.dims[0];
  shape.planes =
      desc.mode == BatchNormMode::spatial && desc.layout == Layout::channels_first && spatial > 1;
  shape.statistics = desc.statistics();
  shape.runs = shape.planes ? desc.dims[0] : desc.reduction_size();
  shape.run = shape.planes ? spatial : 1;
  return shape;
}

bn::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return bn::Element::f16;
    case DType::bf16: return bn::Element::bf16;
    default: return bn::Element::f32;
  }
}

// The data and parameter descriptors of a cuDNN call (Note [cudnn batch-norm candidates]).
struct Descriptors {
  TensorDescriptor x, params;
};

Descriptors make_descriptors(const BatchNormDesc& desc, cudnnBatchNormMode_t mode,
                             const ErrorContext& context) {
  std::vector<std::int64_t> dims;
  Layout layout = desc.layout;
  if (per_activation_data(desc) || mode == CUDNN_BATCHNORM_PER_ACTIVATION) {
    dims = {desc.dims[0], desc.statistics(), 1, 1};
    layout = Layout::channels_first;
  } else {
    dims.assign(desc.dims.begin(), desc.dims.end());
    if (dims.size() == 2) dims.insert(dims.end(), {1, 1});
    if (dims.size() == 3) dims.insert(dims.begin() + 2, 1);
  }
  const Dims promoted = Dims(std::span<const std::int64_t>(dims));
  const Dims strides = dense_strides(promoted, layout);
  std::array<int, 5> d{}, s{};
  for (int i = 0; i < promoted.rank(); ++i) {
    d[static_cast<std::size_t>(i)] = static_cast<int>(promoted[i]);
    s[static_cast<std::size_t>(i)] = static_cast<int>(strides[i]);
  }
  Descriptors descriptors{make_tensor_descriptor(context), make_tensor_descriptor(context)};
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(descriptors.x.get(), data_type(desc.dtype),
                                              promoted.rank(), d.data(), s.data()),
                   context, "describing the data");
  DNNX_CUDNN_CHECK(
      cudnnDeriveBNTensorDescriptor(descriptors.params.get(), descriptors.x.get(), mode), context,
      "deriving the parameter descriptor");
  return descriptors;
}

// Sizes cuDNN reports for an Ex call; `status` is its verdict.
struct ExSizes {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  std::size_t workspace = 0;
  std::size_t reserve = 0;
};

ExSizes ex_sizes(cudnnHandle_t handle, const Descriptors& d, cudnnBatchNormMode_t mode,
                 Direction direction) {
  ExSizes sizes;
  const cudnnTensorDescriptor_t x = d.x.get();
  sizes.status = direction == Direction::fwd
                     ? cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                           handle, mode, CUDNN_BATCHNORM_OPS_BN, x, x, x, d.params.get(), nullptr,
                           &sizes.workspace)
                     : cudnnGetBatchNormalizationBackwardExWorkspaceSize(
                           handle, mode, CUDNN_BATCHNORM_OPS_BN, x, x, x, nullptr, x,
                           d.params.get(), nullptr, &sizes.workspace);
  if (sizes.status != CUDNN_STATUS_SUCCESS) return sizes;
  sizes.status = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
      handle, mode, CUDNN_BATCHNORM_OPS_BN, nullptr, x, &sizes.reserve);
  return sizes;
}

// Why a cuDNN call cannot run the desc (empty if it can), before asking cuDNN.
std::string cudnn_reason(const BatchNormDesc& desc, Direction direction, const Spec& spec,
                         const Runtime& runtime) {
  const bool per_activation = spec.mode == CUDNN_BATCHNORM_PER_ACTIVATION;
  const bool rank2 = desc.dims.rank() == 2;  // where the two modes are one computation
  if (!rank2 && per_activation != per_activation_data(desc)) {
    return per_activation
               ? "cuDNN's PER_ACTIVATION mode keeps one statistic per C x spatial element; the "
                 "desc asks for spatial statistics (one per channel)"
               : detail::cat("cuDNN's ", spec.mode_name,
                             " mode keeps one statistic per channel; the desc asks for "
                             "per-activation statistics");
  }
  if (!desc.training && direction != Direction::fwd) {
    return "cuDNN's backward differentiates through the batch statistics; an inference "
           "(frozen-statistics) backward runs on cudnn:kernel:bnorm";
  }
  if (!desc.training && spec.api == Api::ex) {
    return "cuDNN has no Ex variant of its inference call (that is cudnn:legacy:spatial / "
           "per_activation)";
  }
  if (!desc.training && spec.mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
    return "cudnnBatchNormalizationForwardInference takes PER_ACTIVATION or SPATIAL only";
  }
  if (desc.dims.product() > INT_MAX) {
    return detail::cat(
        "cuDNN's batch-norm kernels index with 32 bits (PyTorch routes only "
        "tensors under 2^31 elements to them); the tensor has ",
        desc.dims.product(), " elements");
  }
  const std::int64_t batch = desc.dims[0];
  if (desc.training && batch > max_training_batch) {
    return detail::cat("PyTorch routes training batch-norm to cuDNN only for N <= ",
                       max_training_batch, " (cuDNN's grid limits); N = ", batch);
  }
  if (!desc.training && batch > max_inference_batch) {
    return detail::cat("cudnnBatchNormalizationForwardInference fails for N > ",
                       max_inference_batch, " (PyTorch's limit too); N = ", batch);
  }
  if (desc.dtype == DType::bf16 && runtime.facts().major < 8) {
    return detail::cat(
        "cuDNN's bf16 batch normalization needs compute capability 8.0; this GPU "
        "is ",
        runtime.facts().major, '.', runtime.facts().minor);
  }
  return {};
}

std::string kernel_reason(const BatchNormDesc& desc, Direction direction, bool fused) {
  if (desc.dims.product() > INT_MAX) {
    return detail::cat("the kernels index with 32 bits; the tensor has ", desc.dims.product(),
                       " elements (more than 2^31 - 1)");
  }
  if (!fused) return {};
  const bn::Shape shape = shape_of(desc);
  if (!shape.planes) {
    return "the fused kernels hold one statistic's values per block and walk channels-first "
           "spatial data (planes); this desc is " +
           std::string(per_activation_data(desc)              ? "per_activation"
                       : desc.layout == Layout::channels_last ? "channels_last"
                                                              : "without spatial extent");
  }
  if (shape.count() > bn::fused_capacity()) {
    return detail::cat("the fused kernels hold at most ", bn::fused_capacity(),
                       " values per statistic in a block's registers; this desc has ",
                       shape.count(), " (N x spatial)");
  }
  if (!desc.training && direction == Direction::fwd) {
    return "an inference forward has no reduction to fuse: cudnn:kernel:bnorm does the same work";
  }
  return {};
}

// Position of a spec in the heuristic order (Note [cudnn batch-norm candidate order]).
int rank_of(const BatchNormDesc& desc, Direction direction, const Spec& spec) {
  const bool kernel = spec.api == Api::kernel || spec.api == Api::fused;
  const int api_rank = spec.api == Api::ex ? 0 : spec.api == Api::legacy ? 1 : 0;
  const bool per_activation = spec.mode == CUDNN_BATCHNORM_PER_ACTIVATION;
  const bool persistent = spec.mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const int fused_first = spec.api == Api::fused ? 0 : 1;
  if (!desc.training && direction != Direction::fwd) return kernel ? fused_first : 10;
  if (desc.dtype == DType::bf16) return kernel ? fused_first : 10 + api_rank + (persistent ? 4 : 0);
  int mode_rank = 0;
  if (!desc.training) {
    mode_rank = per_activation == (per_activation_data(desc) || desc.dims.rank() == 2) ? 0 : 4;
    return kernel ? 8 + fused_first : mode_rank + api_rank;
  }
  if (per_activation_data(desc) || desc.dims.rank() == 2) {
    mode_rank = per_activation ? 0 : persistent ? 6 : 4;
  } else if (desc.layout == Layout::channels_last) {
    mode_rank = persistent ? 0 : per_activation ? 6 : 4;
  } else {
    mode_rank = persistent ? 4 : per_activation ? 6 : 0;
  }
  // The kernels come after PyTorch's choice (ranks 0-1) and before the other cuDNN modes.
  return kernel ? 2 + fused_first : mode_rank + api_rank;
}

AlgoInfo info_of(const BatchNormDesc& desc, Direction direction, const Spec& spec, Runtime& runtime,
                 std::size_t& ex_workspace, std::size_t& reserve) {
  AlgoInfo info;
  info.id = id_of(spec);
  info.deterministic = true;
  ex_workspace = 0;
  reserve = 0;
  switch (spec.api) {
    case Api::legacy:
    case Api::ex: {
      const bool ex = spec.api == Api::ex;
      const char* call = direction == Direction::fwd
                             ? (desc.training ? "cudnnBatchNormalizationForwardTraining"
                                              : "cudnnBatchNormalizationForwardInference")
                             : "cudnnBatchNormalizationBackward";
      info.name = detail::cat(call, ex ? "Ex" : "", " (", spec.mode_name, ")");
      info.notes = {ex ? "ex" : "legacy", spec.mode_name};
      info.reason = cudnn_reason(desc, direction, spec, runtime);
      if (info.reason.empty() && ex) {
        const ErrorContext context = context_of(desc, direction, info.id);
        runtime.make_current();
        const Descriptors d = make_descriptors(desc, spec.mode, context);
        const ExSizes sizes = ex_sizes(runtime.handle(), d, spec.mode, direction);
        if (sizes.status != CUDNN_STATUS_SUCCESS) {
          info.reason = detail::cat("cuDNN rejects it: ", status_name(sizes.status));
          if (const std::string message = last_cudnn_message(); !message.empty())
            info.reason += " (" + message + ")";
        } else if (direction != Direction::fwd && sizes.reserve > 0) {
          info.reason = detail::cat(
              "cudnnBatchNormalizationBackwardEx reads the reserve space its forward wrote (",
              sizes.reserve,
              " bytes here); dnnx's backward call does not carry state from its forward");
        } else {
          ex_workspace = sizes.workspace;
          reserve = sizes.reserve;
        }
      }
      info.workspace_bytes = ex_workspace;
      break;
    }
    case Api::kernel:
    case Api::fused: {
      const bool fused = spec.api == Api::fused;
      info.name = fused ? "dnnx fused kernel (one block per statistic)"
                        : "dnnx two-pass kernels (chunked f64 sums)";
      info.notes = {"kernel", fused ? "fused" : "two_pass"};
      info.reason = kernel_reason(desc, direction, fused);
      if (info.reason.empty()) {
        const bn::Shape shape = shape_of(desc);
        const bn::Geometry geometry =
            fused ? bn::fused_geometry()
                  : bn::split_geometry(shape, element_of(desc.dtype), runtime.facts().sm_count);
        info.workspace_bytes =
            bn::workspace_bytes(shape, geometry, desc.training, direction != Direction::fwd);
      }
      break;
    }
  }
  info.supported = info.reason.empty();
  return info;
}

// One candidate and the sizes its plan needs.
struct Candidate {
  AlgoInfo info;
  const Spec* spec = nullptr;
  std::size_t ex_workspace = 0;
  std::size_t reserve = 0;
};

std::vector<Candidate> list_candidates(const BatchNormDesc& desc, Direction direction,
                                       Runtime& runtime) {
  struct Ranked {
    Candidate candidate;
    int rank;
  };
  std::vector<Ranked> ranked;
  for (const Spec& spec : specs) {
    Candidate c;
    c.spec = &spec;
    c.info = info_of(desc, direction, spec, runtime, c.ex_workspace, c.reserve);
    const int rank = rank_of(desc, direction, spec) + (c.info.supported ? 0 : 1000);
    ranked.push_back({std::move(c), rank});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.rank < b.rank; });
  std::vector<Candidate> out;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    ranked[i].candidate.info.priority = static_cast<int>(i);
    out.push_back(std::move(ranked[i].candidate));
  }
  return out;
}

// ---- what the plans share -----------------------------------------------------------------------

// The f32 parameter `tensor` (null when absent, an error when `required`).
template <typename T>
float* param_of(T* tensor, const char* role, const ErrorContext& context, bool required) {
  if (tensor == nullptr) {
    if (required) detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
    return nullptr;
  }
  return static_cast<float*>(data_of(tensor, role, context));
}

// ---- cuDNN plans --------------------------------------------------------------------------------

class CudnnPlan final : public BatchNormPlan {
 public:
  CudnnPlan(std::shared_ptr<Runtime> runtime, const BatchNormDesc& desc, Direction direction,
            const Candidate& candidate)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        info_(candidate.info),
        context_(context_of(desc, direction, info_.id)),
        mode_(candidate.spec->mode),
        ex_(candidate.spec->api == Api::ex),
        reserve_bytes_(candidate.reserve) {
    runtime_->make_current();
    descriptors_ = make_descriptors(desc, mode_, context_);
    const auto k = static_cast<std::size_t>(desc.statistics());
    Allocator& allocator = runtime_->allocator();
    if (!desc.affine) {
      // cuDNN always reads a scale (and a shift in the forward) and writes the parameter
      // gradients: K ones, K zeros, and 2 K floats for the gradients nobody asked for.
      unit_ = Tensor::empty(Dims{static_cast<std::int64_t>(4 * k)}, DType::f32,
                            Layout::channels_first, allocator);
      std::vector<float> values(4 * k, 0.0f);
      std::fill(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), 1.0f);
      runtime_->memcpy(unit_.data(), values.data(), values.size() * sizeof(float),
                       detail::DeviceRuntime::CopyKind::host_to_device);
    }
    if (reserve_bytes_ > 0) {
      // The forward's reserve space: written by cuDNN, read by nothing dnnx runs (BackwardEx is
      // supported only without one).
      reserve_ = Tensor::empty(
          Dims{static_cast<std::int64_t>((reserve_bytes_ + sizeof(float) - 1) / sizeof(float))},
          DType::f32, Layout::channels_first, allocator);
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const BatchNormArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const auto k = static_cast<std::size_t>(desc_.statistics());
    auto* unit = static_cast<float*>(unit_.data());
    const float* ones = desc_.affine ? nullptr : unit;
    const float* zeros = desc_.affine ? nullptr : unit + k;
    // Every pointer is read (and checked) before anything is queued, so that a repeated call on
    // the same memory replays the cuDNN call (Note [graph replay]); they are held in the structs
    // of dnnx's own kernels (kernels/batch_norm.hpp).
    bn::Forward f;
    bn::Backward g;
    const void* x = data_of(args.src, "src", context_);
    const float* scale = desc_.affine ? param_of(args.scale, "scale", context_, true) : ones;
    void* ws = info_.workspace_bytes > 0 ? workspace.data : nullptr;
    if (direction_ == Direction::fwd) {
      f.x = x;
      f.scale = scale;
      f.y = data_of(args.dst, "dst", context_);
      f.shift = desc_.affine ? param_of(args.shift, "shift", context_, true) : zeros;
      f.running_mean = param_of(args.running_mean, "running_mean", context_, !desc_.training);
      f.running_var = param_of(args.running_var, "running_var", context_,
                               !desc_.training || f.running_mean != nullptr);
      if (desc_.training) {
        // Both or neither (the op layer's rule, which cuDNN shares).
        f.saved_mean = param_of(args.saved_mean, "saved_mean", context_, false);
        f.saved_inv_std =
            param_of(args.saved_inv_std, "saved_inv_std", context_, f.saved_mean != nullptr);
      }
      replay_.run(
          runtime_->settings(), runtime_->stream(),
          {f.x, f.y, f.scale, f.shift, f.running_mean, f.running_var, f.saved_mean, f.saved_inv_std,
           ws},
          [&] { queue(f, ws); }, context_);
      return;
    }
    g.x = x;
    g.scale = scale;
    g.dy = data_of(args.diff_dst, "diff_dst", context_);
    g.dx = data_of(args.diff_src, "diff_src", context_);
    g.saved_mean = param_of(args.saved_mean, "saved_mean", context_, true);
    g.saved_inv_std = param_of(args.saved_inv_std, "saved_inv_std", context_, true);
    g.diff_scale =
        desc_.affine ? param_of(args.diff_scale, "diff_scale", context_, true) : unit + 2 * k;
    g.diff_shift =
        desc_.affine ? param_of(args.diff_shift, "diff_shift", context_, true) : unit + 3 * k;
    replay_.run(
        runtime_->settings(), runtime_->stream(),
        {g.x, g.dy, g.dx, g.scale, g.saved_mean, g.saved_inv_std, g.diff_scale, g.diff_shift, ws},
        [&] { queue(g, ws); }, context_);
  }

 private:
  // Queues the cuDNN forward of this plan's mode.
  void queue(const bn::Forward& f, void* ws) {
    const float one = 1.0f, zero = 0.0f;
    const cudnnHandle_t handle = runtime_->handle();
    const cudnnTensorDescriptor_t x_desc = descriptors_.x.get();
    const cudnnTensorDescriptor_t p_desc = descriptors_.params.get();
    if (!desc_.training) {
      DNNX_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
                           handle, mode_, &one, &zero, x_desc, f.x, x_desc, f.y, p_desc, f.scale,
                           f.shift, f.running_mean, f.running_var, desc_.eps),
                       context_, "running cudnnBatchNormalizationForwardInference");
    } else if (ex_) {
      DNNX_CUDNN_CHECK(
          cudnnBatchNormalizationForwardTrainingEx(
              handle, mode_, CUDNN_BATCHNORM_OPS_BN, &one, &zero, x_desc, f.x, nullptr, nullptr,
              x_desc, f.y, p_desc, f.scale, f.shift, desc_.momentum, f.running_mean, f.running_var,
              desc_.eps, f.saved_mean, f.saved_inv_std, nullptr, ws, info_.workspace_bytes,
              reserve_bytes_ > 0 ? reserve_.data() : nullptr, reserve_bytes_),
          context_, "running cudnnBatchNormalizationForwardTrainingEx");
    } else {
      DNNX_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
                           handle, mode_, &one, &zero, x_desc, f.x, x_desc, f.y, p_desc, f.scale,
                           f.shift, desc_.momentum, f.running_mean, f.running_var, desc_.eps,
                           f.saved_mean, f.saved_inv_std),
                       context_, "running cudnnBatchNormalizationForwardTraining");
    }
  }

  // Queues the cuDNN backward of this plan's mode.
  void queue(const bn::Backward& g, void* ws) {
    const float one = 1.0f, zero = 0.0f;
    const cudnnHandle_t handle = runtime_->handle();
    const cudnnTensorDescriptor_t x_desc = descriptors_.x.get();
    const cudnnTensorDescriptor_t p_desc = descriptors_.params.get();
    if (ex_) {
      DNNX_CUDNN_CHECK(
          cudnnBatchNormalizationBackwardEx(
              handle, mode_, CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &zero, x_desc, g.x, nullptr,
              nullptr, x_desc, g.dy, nullptr, nullptr, x_desc, g.dx, p_desc, g.scale, nullptr,
              g.diff_scale, g.diff_shift, desc_.eps, g.saved_mean, g.saved_inv_std, nullptr, ws,
              info_.workspace_bytes, nullptr, 0),
          context_, "running cudnnBatchNormalizationBackwardEx");
    } else {
      DNNX_CUDNN_CHECK(
          cudnnBatchNormalizationBackward(handle, mode_, &one, &zero, &one, &zero, x_desc, g.x,
                                          x_desc, g.dy, x_desc, g.dx, p_desc, g.scale, g.diff_scale,
                                          g.diff_shift, desc_.eps, g.saved_mean, g.saved_inv_std),
          context_, "running cudnnBatchNormalizationBackward");
    }
  }

  std::shared_ptr<Runtime> runtime_;
  BatchNormDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
  cudnnBatchNormMode_t mode_;
  bool ex_;
  std::size_t reserve_bytes_;
  Descriptors descriptors_;
  Tensor unit_;         // affine off: K ones, K zeros, 2 K gradient floats, on the device
  Tensor reserve_;      // Ex forward: cuDNN's reserve space
  LaunchGraph replay_;  // Note [graph replay]
};

// ---- kernel plans -------------------------------------------------------------------------------

class KernelPlan final : public BatchNormPlan {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const BatchNormDesc& desc, Direction direction,
             const AlgoInfo& info)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        info_(info),
        context_(context_of(desc, direction, info_.id)),
        shape_(shape_of(desc)) {
    params_.element = element_of(desc.dtype);
    params_.training = desc.training;
    params_.eps = desc.eps;
    params_.momentum = desc.momentum;
    geometry_ = info_.id == fused_id
                    ? bn::fused_geometry()
                    : bn::split_geometry(shape_, params_.element, runtime_->facts().sm_count);
    DNNX_ASSERT(bn::workspace_bytes(shape_, geometry_, desc.training,
                                    direction != Direction::fwd) == info_.workspace_bytes,
                "kernel workspace differs from the listed one for ", info_.id);
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const BatchNormArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    cudaError_t status = cudaSuccess;
    const bool training = desc_.training;
    if (direction_ == Direction::fwd) {
      bn::Forward t;
      t.x = data_of(args.src, "src", context_);
      t.y = data_of(args.dst, "dst", context_);
      t.scale = param_of(args.scale, "scale", context_, desc_.affine);
      t.shift = param_of(args.shift, "shift", context_, desc_.affine);
      t.running_mean = param_of(args.running_mean, "running_mean", context_, !training);
      t.running_var = param_of(args.running_var, "running_var", context_,
                               !training || t.running_mean != nullptr);
      if (training) {
        t.saved_mean = param_of(args.saved_mean, "saved_mean", context_, false);
        t.saved_inv_std = param_of(args.saved_inv_std, "saved_inv_std", context_, false);
      }
      status = bn::forward(params_, shape_, geometry_, t, workspace.data, runtime_->stream());
    } else {
      bn::Backward t;
      t.x = data_of(args.src, "src", context_);
      t.dy = data_of(args.diff_dst, "diff_dst", context_);
      t.dx = data_of(args.diff_src, "diff_src", context_);
      t.scale = param_of(args.scale, "scale", context_, desc_.affine);
      if (training) {
        t.saved_mean = param_of(args.saved_mean, "saved_mean", context_, true);
        t.saved_inv_std = param_of(args.saved_inv_std, "saved_inv_std", context_, true);
      } else {
        t.running_mean = param_of(args.running_mean, "running_mean", context_, true);
        t.running_var = param_of(args.running_var, "running_var", context_, true);
      }
      t.diff_scale = param_of(args.diff_scale, "diff_scale", context_, desc_.affine);
      t.diff_shift = param_of(args.diff_shift, "diff_shift", context_, desc_.affine);
      status = bn::backward(params_, shape_, geometry_, t, workspace.data, runtime_->stream());
    }
    DNNX_CUDNN_CHECK(status, context_, "launching the batch-norm kernels");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  BatchNormDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
  bn::Shape shape_;
  bn::Params params_;
  bn::Geometry geometry_;
};

// ---- the backend --------------------------------------------------------------------------------

class CudnnBatchNorm final : public LayerBackend<BatchNormDesc, BatchNormArgs, Candidate> {
 public:
  explicit CudnnBatchNorm(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const BatchNormDesc& desc, Direction direction) override {
    return list_candidates(desc, direction, *runtime_);
  }

  std::shared_ptr<BatchNormPlan> build(const BatchNormDesc& desc, Direction direction,
                                       const Candidate& candidate) override {
    const Api api = candidate.spec->api;
    if (api == Api::kernel || api == Api::fused)
      return std::make_shared<KernelPlan>(runtime_, desc, direction, candidate.info);
    return std::make_shared<CudnnPlan>(runtime_, desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::batch_norm>> make_batch_norm_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnBatchNorm>(std::move(runtime));
}

}  // namespace dnnx::cudnn
