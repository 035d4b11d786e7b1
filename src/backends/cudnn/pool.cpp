// The cudnn backend's pooling: cuDNN's legacy cudnnPoolingForward / cudnnPoolingBackward, one
// candidate per pooling mode that computes the desc's mode, and dnnx's own kernels
// (kernels/pool.cu), which run every desc.
//
// Note [cudnn pool candidates]
//   cudnn:legacy:pool:max, cudnn:legacy:pool:max_deterministic   (mode max)
//   cudnn:legacy:pool:avg_include_pad                             (mode avg_include_pad)
//   cudnn:legacy:pool:avg_exclude_pad                             (mode avg_exclude_pad)
//   cudnn:kernel:pool:argmax  (max backward only: an argmax pass into the workspace, then a gather)
//   cudnn:kernel:pool         (every desc, dilated ones included, no workspace; max backward
//                              rescans the windows)
// A legacy pooling descriptor has one padding per spatial dim, no dilation, and cuDNN sizes the
// output by rounding down, so the legacy candidates are unsupported (with the reason) for
// dilated windows, per-side padding and for ceil mode whenever it changes an output size; 1-D
// runs as 2-D with height 1. bf16 is
// left to the kernels below compute capability 8.0. cuDNN's documentation lists
// cudnnPoolingBackward with CUDNN_POOLING_MAX among the routines that are not reproducible
// (atomics); its other modes, every forward and dnnx's kernels are deterministic (Note [pool
// kernel backward]). NaNs propagate (CUDNN_PROPAGATE_NAN), as in PyTorch. cuDNN's max backward
// finds each window's maximum by comparing src with dst, which is why the backward call takes
// dst; the kernels recompute it from src.
// Max pooling with indices (desc.indices) runs on cudnn:kernel:pool alone: cuDNN's pooling has no
// argmax output or input, so the legacy candidates are listed unsupported with that reason, and
// cudnn:kernel:pool:argmax (the byte-index workspace variant of the backward) is not listed. The
// forward writes PyTorch's flat indices; the backward gathers through them and checks each index
// without synchronizing (Note [pool index check] in kernels/pool.cu): a bad index raises
// InvalidArgument at the next call of the same plan, and its window's first input element holds
// NaN in the meantime.
// Order: for channels_last the kernels first (they read 16-byte packs of channels; ResNet-50's
// max-pool 3x3/2 pad 1 in f16 NHWC, the case bench/layers_bench.cpp times, is theirs), then cuDNN;
// for channels_first cuDNN first. Unsupported candidates come after supported ones.

#include "backends/cudnn/kernels/pool.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/pool_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

using PoolingDescriptor = Handle<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;

constexpr const char* kernel_id = "cudnn:kernel:pool";
constexpr const char* kernel_argmax_id = "cudnn:kernel:pool:argmax";
constexpr const char* legacy_prefix = "cudnn:legacy:pool:";

ErrorContext context_of(const PoolDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(implementation));
}

struct LegacyMode {
  cudnnPoolingMode_t mode;
  const char* name;
  bool deterministic_bwd;
};

// The cuDNN modes that compute `mode` (Note [cudnn pool candidates]).
std::vector<LegacyMode> legacy_modes(PoolMode mode) {
  switch (mode) {
    case PoolMode::max:
      return {{CUDNN_POOLING_MAX, "max", false},
              {CUDNN_POOLING_MAX_DETERMINISTIC, "max_deterministic", true}};
    case PoolMode::avg_include_pad:
      return {{CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, "avg_include_pad", true}};
    case PoolMode::avg_exclude_pad:
      return {{CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, "avg_exclude_pad", true}};
  }
  return {};
}

std::string spatial_text(const std::array<std::int64_t, 3>& values, int n) {
  return detail::join(std::span<const std::int64_t>(values.data(), static_cast<std::size_t>(n)),
                      "x");
}

// Why the legacy calls cannot run `desc` (empty: they can).
std::string legacy_exclusion(const PoolDesc& desc, const Runtime& runtime) {
  const int n = desc.spatial_dims;
  if (desc.indices) {
    return detail::cat(
        "cuDNN's pooling neither writes nor reads argmax indices (its max backward compares src "
        "with dst); max pooling with indices runs on ",
        kernel_id);
  }
  for (int i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (desc.dilation[s] != 1) {
      return detail::cat("cuDNN's pooling descriptor has no dilation; dilation ",
                         spatial_text(desc.dilation, n), " runs on ", kernel_id);
    }
  }
  if (desc.pad_before != desc.pad_after) {
    for (int i = 0; i < n; ++i) {
      const auto s = static_cast<std::size_t>(i);
      if (desc.pad_before[s] != desc.pad_after[s]) {
        return detail::cat(
            "the legacy pooling descriptor takes one padding per spatial dim; "
            "per-side padding (before ",
            spatial_text(desc.pad_before, n), ", after ", spatial_text(desc.pad_after, n),
            ") runs on ", kernel_id);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const std::int64_t floor_size =
        (desc.input[s] + desc.pad_before[s] + desc.pad_after[s] - desc.kernel[s]) / desc.stride[s] +
        1;
    if (desc.output_size(i) != floor_size) {
      return detail::cat("cuDNN has no ceil mode: it gives ", floor_size,
                         " outputs along spatial dim ", i, " where ceil mode gives ",
                         desc.output_size(i), "; runs on ", kernel_id);
    }
  }
  for (const Dims& dims : {desc.src_dims(), desc.dst_dims()}) {
    if (dims.product() > INT_MAX)
      return detail::cat("a tensor of ", dims.product(),
                         " elements exceeds INT_MAX, which legacy descriptors cannot address");
  }
  if (desc.dtype == DType::bf16 && runtime.facts().major < 8) {
    return detail::cat("cuDNN pools bf16 on compute capability 8.0 and newer; this device is ",
                       runtime.facts().major, '.', runtime.facts().minor);
  }
  return {};
}

// The desc in the kernels' 3-D terms.
kernels::PoolShape kernel_shape(const PoolDesc& desc) {
  kernels::PoolShape shape;
  shape.batch = desc.batch;
  shape.channels = desc.channels;
  const int missing = 3 - desc.spatial_dims;
  for (int i = missing; i < 3; ++i) {
    const auto s = static_cast<std::size_t>(i - missing);
    shape.input[i] = static_cast<int>(desc.input[s]);
    shape.output[i] = static_cast<int>(desc.output_size(i - missing));
    shape.kernel[i] = static_cast<int>(desc.kernel[s]);
    shape.stride[i] = static_cast<int>(desc.stride[s]);
    shape.pad_before[i] = static_cast<int>(desc.pad_before[s]);
    shape.pad_after[i] = static_cast<int>(desc.pad_after[s]);
    // A single position has no spacing (and any dilation, up to 2^31, describes it).
    shape.dilation[i] = desc.kernel[s] == 1 ? 1 : static_cast<int>(desc.dilation[s]);
  }
  shape.channels_last = desc.layout == Layout::channels_last;
  shape.mode = static_cast<kernels::PoolKernelMode>(static_cast<int>(desc.mode));
  shape.type = desc.dtype == DType::f16    ? kernels::PoolKernelType::f16
               : desc.dtype == DType::bf16 ? kernels::PoolKernelType::bf16
                                           : kernels::PoolKernelType::f32;
  return shape;
}

// Why the kernels cannot run `desc` (empty: they can): their window arithmetic (position +
// padding + kernel) is in int.
std::string kernel_exclusion(const PoolDesc& desc) {
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    for (std::int64_t value : {desc.input[s], desc.kernel[s], desc.stride[s], desc.output_size(i),
                               desc.effective_kernel(i)}) {
      if (value > INT_MAX / 4) {
        return detail::cat("spatial size ", value, " exceeds what the kernels' 32-bit window ",
                           "arithmetic holds (", INT_MAX / 4, ")");
      }
    }
  }
  return {};
}

AlgoInfo kernel_info(const PoolDesc& desc, Direction direction, bool argmax) {
  AlgoInfo info;
  info.id = argmax ? kernel_argmax_id : kernel_id;
  info.name = argmax ? "dnnx kernel (argmax pass + gather)" : "dnnx kernel";
  info.deterministic = true;
  info.notes = {"kernel", "direct"};
  if (desc.layout == Layout::channels_last) info.notes.emplace_back("vectorized_channels");
  if (desc.indices) {
    info.notes.emplace_back("indices");
  } else if (direction != Direction::fwd && desc.mode == PoolMode::max) {
    info.notes.emplace_back(argmax ? "argmax_workspace" : "rescan");
  }
  info.families = {"none"};
  info.reason = kernel_exclusion(desc);
  const kernels::PoolShape shape = kernel_shape(desc);
  if (argmax && info.reason.empty()) {
    const std::int64_t window =
        static_cast<std::int64_t>(shape.kernel[0]) * shape.kernel[1] * shape.kernel[2];
    if (window > 255) {
      info.reason = detail::cat(
          "the argmax pass stores window-local indices in a byte; this "
          "window has ",
          window, " positions (", kernel_id, " rescans instead)");
    }
  }
  info.supported = info.reason.empty();
  if (info.supported && direction != Direction::fwd && !desc.indices) {
    info.workspace_bytes = kernels::pool_bwd_workspace_bytes(
        shape, argmax ? kernels::MaxBackward::argmax : kernels::MaxBackward::rescan);
  }
  return info;
}

std::vector<AlgoInfo> list_candidates(const Runtime& runtime, const PoolDesc& desc,
                                      Direction direction) {
  std::vector<AlgoInfo> legacy;
  const std::string legacy_reason = legacy_exclusion(desc, runtime);
  for (const LegacyMode& mode : legacy_modes(desc.mode)) {
    AlgoInfo info;
    info.id = detail::cat(legacy_prefix, mode.name);
    info.name = detail::cat("cudnnPooling", direction == Direction::fwd ? "Forward" : "Backward",
                            " (", mode.name, ")");
    info.deterministic = direction == Direction::fwd || mode.deterministic_bwd;
    info.notes = {"legacy"};
    info.families = {"none"};
    info.reason = legacy_reason;
    info.supported = info.reason.empty();
    legacy.push_back(std::move(info));
  }
  std::vector<AlgoInfo> own;
  if (direction != Direction::fwd && desc.mode == PoolMode::max && !desc.indices)
    own.push_back(kernel_info(desc, direction, true));
  own.push_back(kernel_info(desc, direction, false));

  std::vector<AlgoInfo> infos;
  const bool kernels_first = desc.layout == Layout::channels_last;
  for (const auto* group : kernels_first ? std::array{&own, &legacy} : std::array{&legacy, &own})
    infos.insert(infos.end(), group->begin(), group->end());
  std::stable_partition(infos.begin(), infos.end(),
                        [](const AlgoInfo& info) { return info.supported; });
  for (std::size_t i = 0; i < infos.size(); ++i) infos[i].priority = static_cast<int>(i);
  return infos;
}

// The tensor roles a plan reads and writes, checked before anything is queued.
struct Bound {
  const void* src = nullptr;
  const void* dst_in = nullptr;
  const void* diff_dst = nullptr;
  void* out = nullptr;      // dst (fwd) or diff_src (bwd)
  void* indices = nullptr;  // desc.indices: written (fwd) or read (bwd)
  kernels::PoolIndexType index_type = kernels::PoolIndexType::i64;
};

Bound bind(const detail::PoolArgs& args, const PoolDesc& desc, Direction direction,
           const ErrorContext& context) {
  auto need = [&](const Tensor* tensor, const char* role, const Dims& dims, DType dtype) {
    data_of(tensor, role, context);
    if (tensor->dims() != dims || tensor->dtype() != dtype || !tensor->is_dense(desc.layout) ||
        tensor->device().kind != Device::Kind::cuda) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat(role, " is ", describe(*tensor), "; this plan takes a dense ",
                                to_string(dtype), '[', dims.to_string(), ' ',
                                to_string(desc.layout), "] on a CUDA device"),
                    context);
    }
    return tensor->data();
  };
  Bound bound;
  if (desc.indices) {
    const Tensor* indices = direction == Direction::fwd ? args.indices : args.indices_in;
    const DType index_dtype =
        indices != nullptr && indices->dtype() == DType::i32 ? DType::i32 : DType::i64;
    bound.index_type =
        index_dtype == DType::i32 ? kernels::PoolIndexType::i32 : kernels::PoolIndexType::i64;
    bound.indices = const_cast<void*>(need(indices, "indices", desc.dst_dims(), index_dtype));
    if (direction == Direction::fwd) {
      bound.src = need(args.src, "src", desc.src_dims(), desc.dtype);
      bound.out = need(args.dst, "dst", desc.dst_dims(), desc.dtype);
    } else {
      bound.diff_dst = need(args.diff_dst, "diff_dst", desc.dst_dims(), desc.dtype);
      bound.out = need(args.diff_src, "diff_src", desc.src_dims(), desc.dtype);
    }
    return bound;
  }
  bound.src = need(args.src, "src", desc.src_dims(), desc.dtype);
  if (direction == Direction::fwd) {
    bound.out = need(args.dst, "dst", desc.dst_dims(), desc.dtype);
  } else {
    bound.dst_in = need(args.dst_in, "dst", desc.dst_dims(), desc.dtype);
    bound.diff_dst = need(args.diff_dst, "diff_dst", desc.dst_dims(), desc.dtype);
    bound.out = need(args.diff_src, "diff_src", desc.src_dims(), desc.dtype);
  }
  return bound;
}

// A tensor descriptor of `dims` (N, C, spatial) dense in `layout`, 1-D as 2-D with height 1.
TensorDescriptor describe_tensor(const Dims& logical, DType dtype, Layout layout,
                                 const ErrorContext& context) {
  Dims dims = logical;
  if (logical.rank() == 3) dims = Dims{logical[0], logical[1], 1, logical[2]};
  const Dims strides = dense_strides(dims, layout);
  std::array<int, 5> d{}, s{};
  for (int i = 0; i < dims.rank(); ++i) {
    d[static_cast<std::size_t>(i)] = static_cast<int>(dims[i]);
    s[static_cast<std::size_t>(i)] = static_cast<int>(strides[i]);
  }
  TensorDescriptor descriptor = make_tensor_descriptor(context);
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(descriptor.get(), data_type(dtype), dims.rank(),
                                              d.data(), s.data()),
                   context, "describing a tensor");
  return descriptor;
}

class LegacyPlan final : public detail::PoolPlan {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const PoolDesc& desc, Direction direction,
             AlgoInfo info, cudnnPoolingMode_t mode)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        desc_(desc),
        direction_(direction) {
    runtime_->make_current();
    src_ = describe_tensor(desc.src_dims(), desc.dtype, desc.layout, context_);
    dst_ = describe_tensor(desc.dst_dims(), desc.dtype, desc.layout, context_);
    cudnnPoolingDescriptor_t raw = nullptr;
    DNNX_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&raw), context_, "creating a pooling descriptor");
    pooling_ = PoolingDescriptor(raw, "cudnnPoolingDescriptor_t");
    std::array<int, 3> window{1, 1, 1}, padding{0, 0, 0}, stride{1, 1, 1};
    const int offset = desc.spatial_dims == 1 ? 1 : 0;  // 1-D: height 1 first
    const int dims = desc.spatial_dims + offset;
    for (int i = 0; i < desc.spatial_dims; ++i) {
      const auto s = static_cast<std::size_t>(i);
      const auto t = static_cast<std::size_t>(i) + static_cast<std::size_t>(offset);
      window[t] = static_cast<int>(desc.kernel[s]);
      padding[t] = static_cast<int>(desc.pad_before[s]);
      stride[t] = static_cast<int>(desc.stride[s]);
    }
    DNNX_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(pooling_.get(), mode, CUDNN_PROPAGATE_NAN, dims,
                                                 window.data(), padding.data(), stride.data()),
                     context_, "describing the pooling");
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::PoolArgs& args, detail::Workspace workspace) override {
    const Bound bound = bind(args, desc_, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    replay_.run(
        runtime_->settings(), runtime_->stream(),
        {bound.src, bound.dst_in, bound.diff_dst, bound.out}, [&] { launch(bound); }, context_);
  }

 private:
  void launch(const Bound& bound) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    if (direction_ == Direction::fwd) {
      DNNX_CUDNN_CHECK(cudnnPoolingForward(runtime_->handle(), pooling_.get(), &alpha, src_.get(),
                                           bound.src, &beta, dst_.get(), bound.out),
                       context_, "running the pooling");
      return;
    }
    DNNX_CUDNN_CHECK(cudnnPoolingBackward(runtime_->handle(), pooling_.get(), &alpha, dst_.get(),
                                          bound.dst_in, dst_.get(), bound.diff_dst, src_.get(),
                                          bound.src, &beta, src_.get(), bound.out),
                     context_, "running the pooling backward");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  PoolDesc desc_;
  Direction direction_;
  TensorDescriptor src_, dst_;  // also diff_src, diff_dst
  PoolingDescriptor pooling_;
  LaunchGraph replay_;  // Note [graph replay]
};

// What a plan reading indices keeps to report a bad one (Note [pool index check] in
// kernels/pool.cu): the kernels' record in device memory and the report in mapped pinned host
// memory, which raise() reads with a plain host load.
class IndexCheck {
 public:
  IndexCheck(std::shared_ptr<Runtime> runtime, const ErrorContext& context)
      : runtime_(std::move(runtime)),
        record_(runtime_->allocator().allocate(sizeof(kernels::PoolIndexRecord))) {
    report_ = make_mapped_host(sizeof(kernels::PoolIndexReport), "index report", context);
    report()->position = -1;
    report_device_ = static_cast<kernels::PoolIndexReport*>(report_.device);
    DNNX_CUDNN_CHECK(kernels::pool_index_record_init(record(), runtime_->stream()), context,
                     "initializing the index record");
  }
  ~IndexCheck() { runtime_->allocator().deallocate(record_, sizeof(kernels::PoolIndexRecord)); }
  IndexCheck(const IndexCheck&) = delete;
  IndexCheck& operator=(const IndexCheck&) = delete;

  kernels::PoolIndexRecord* record() const {
    return static_cast<kernels::PoolIndexRecord*>(record_);
  }
  kernels::PoolIndexReport* report_device() const { return report_device_; }

  // Raises the bad index an earlier launch reported, if any, and clears the report.
  void raise_reported(const PoolDesc& desc, const ErrorContext& context) {
    const long long position = report()->position;
    if (position < 0) return;
    const long long value = report()->value;
    report()->position = -1;
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(detail::bad_pool_index_message(desc, position, value),
                              "; found on the GPU by an earlier call of this plan, whose diff_src "
                              "holds NaN at that window's first input element (indices are "
                              "checked without synchronizing)"),
                  context);
  }

 private:
  volatile kernels::PoolIndexReport* report() const {
    return static_cast<volatile kernels::PoolIndexReport*>(report_.host.get());
  }

  std::shared_ptr<Runtime> runtime_;
  void* record_;
  MappedHost report_;
  kernels::PoolIndexReport* report_device_ = nullptr;
};

class KernelPlan final : public detail::PoolPlan {
 public:
  KernelPlan(std::shared_ptr<Runtime> runtime, const PoolDesc& desc, Direction direction,
             AlgoInfo info, kernels::MaxBackward strategy)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(context_of(desc, direction, info_.id)),
        desc_(desc),
        direction_(direction),
        shape_(kernel_shape(desc)),
        strategy_(strategy) {
    if (desc.indices && direction != Direction::fwd) {
      runtime_->make_current();
      check_ = std::make_unique<IndexCheck>(runtime_, context_);
    }
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::PoolArgs& args, detail::Workspace workspace) override {
    const Bound bound = bind(args, desc_, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    if (check_) check_->raise_reported(desc_, context_);
    runtime_->make_current();
    launch(bound, workspace);
  }

 private:
  void launch(const Bound& bound, const detail::Workspace& workspace) {
    const cudaStream_t stream = runtime_->stream();
    cudaError_t status = cudaSuccess;
    if (desc_.indices) {
      status = direction_ == Direction::fwd
                   ? kernels::pool_fwd_indices(shape_, bound.index_type, bound.src, bound.out,
                                               bound.indices, stream)
                   : kernels::pool_bwd_indices(shape_, bound.index_type, bound.diff_dst,
                                               bound.indices, bound.out, check_->record(),
                                               check_->report_device(), stream);
    } else {
      status = direction_ == Direction::fwd
                   ? kernels::pool_fwd(shape_, bound.src, bound.out, stream)
                   : kernels::pool_bwd(shape_, strategy_, bound.src, bound.diff_dst, bound.out,
                                       workspace.data, stream);
    }
    DNNX_CUDNN_CHECK(status, context_, "launching the pooling kernel");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  PoolDesc desc_;
  Direction direction_;
  kernels::PoolShape shape_;
  kernels::MaxBackward strategy_;
  std::unique_ptr<IndexCheck> check_;  // backward with indices
};

// The candidates are records only: a plan is picked by its id.
struct Candidate {
  AlgoInfo info;
};

class CudnnPool final : public LayerBackend<PoolDesc, detail::PoolArgs, Candidate> {
 public:
  explicit CudnnPool(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 protected:
  std::vector<Candidate> enumerate(const PoolDesc& desc, Direction direction) override {
    std::vector<Candidate> candidates;
    for (AlgoInfo& info : list_candidates(*runtime_, desc, direction))
      candidates.push_back({std::move(info)});
    return candidates;
  }

  std::shared_ptr<detail::PoolPlan> build(const PoolDesc& desc, Direction direction,
                                          const Candidate& candidate) override {
    const std::string& id = candidate.info.id;
    if (id == kernel_id || id == kernel_argmax_id) {
      return std::make_shared<KernelPlan>(
          runtime_, desc, direction, candidate.info,
          id == kernel_argmax_id ? kernels::MaxBackward::argmax : kernels::MaxBackward::rescan);
    }
    for (const LegacyMode& mode : legacy_modes(desc.mode)) {
      if (id == detail::cat(legacy_prefix, mode.name))
        return std::make_shared<LegacyPlan>(runtime_, desc, direction, candidate.info, mode.mode);
    }
    detail::raise(ErrorKind::Internal, detail::cat("listed candidate ", id, " has no plan"),
                  context_of(desc, direction, id));
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::pool>> make_pool_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnPool>(std::move(runtime));
}

}  // namespace dnnx::cudnn
