// The cudnn backend's argmax and accuracy count: dnnx's kernels (kernels/argmax.cu,
// "cudnn:kernel:argmax" and "cudnn:kernel:accuracy"), and cuDNN's cudnnReduceTensor with
// indices listed for argmax, unsupported.
//
// Note [cudnn argmax candidates]
// cudnnReduceTensor(MAX) with CUDNN_REDUCE_TENSOR_FLATTENED_INDICES also returns where each
// maximum is, but only as 32-bit indices (CUDNN_32BIT_INDICES is the one index type cuDNN 9
// implements), and cuDNN documents neither which index a tie gives nor what NaN does; argmax's
// contract is the first index with NaN as the largest (torch.argmax). dnnx lists it as
// "cudnn:legacy:reduce_tensor_indices", unsupported with that reason, until a GPU test shows the
// tie and NaN rules match for i32 indices.
//
// Note [deferred accuracy label check]
// As cross-entropy's (Note [deferred label check] in cross_entropy.cpp): a label outside [0, C)
// that is not ignore_index is found by the kernel after the call has returned; the kernel writes
// its position and value into mapped host memory owned by the plan, and the next execute() of
// the same plan raises InvalidArgument naming them (the count of the bad call leaves the position
// out). Per call this costs one host load.

#include "backends/cudnn/kernels/argmax.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/argmax_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

namespace karg = kernels::argmax;

constexpr const char* argmax_id = "cudnn:kernel:argmax";
constexpr const char* accuracy_id = "cudnn:kernel:accuracy";
constexpr const char* reduce_indices_id = "cudnn:legacy:reduce_tensor_indices";

struct Candidate {
  AlgoInfo info;
};

karg::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return karg::Element::f16;
    case DType::bf16: return karg::Element::bf16;
    default: return karg::Element::f32;
  }
}

karg::Lines lines_of(const detail::AxisGeometry& g) { return {g.outer, g.axis, g.inner}; }

class ArgmaxPlan final : public detail::OpPlan<detail::ArgmaxArgs> {
 public:
  ArgmaxPlan(std::shared_ptr<Runtime> runtime, const ArgmaxDesc& desc, Direction direction,
             AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(detail::op_context(BackendKind::cudnn, desc, direction, info_.id)),
        element_(element_of(desc.dtype)),
        lines_(lines_of(detail::axis_geometry(desc))),
        index64_(desc.index_dtype == DType::i64) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ArgmaxArgs& args, detail::Workspace) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(karg::argmax(element_, lines_, data_of(args.src, "src", context_),
                                  data_of(args.dst, "dst", context_), index64_, runtime_->stream()),
                     context_, "launching the argmax kernel");
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  karg::Element element_;
  karg::Lines lines_;
  bool index64_;
};

class CudnnArgmax final : public LayerBackend<ArgmaxDesc, detail::ArgmaxArgs, Candidate> {
 public:
  explicit CudnnArgmax(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const ArgmaxDesc&, Direction) override {
    std::vector<Candidate> list;
    list.push_back(
        {candidate_info(argmax_id, "dnnx kernel (first index of the largest)", {}, {"kernel"})});
    AlgoInfo legacy;
    legacy.id = reduce_indices_id;
    legacy.name = "cudnnReduceTensor (MAX, flattened indices)";
    legacy.reason =
        "cudnnReduceTensor gives only 32-bit indices and documents neither which index a tie "
        "gives nor what NaN does, while argmax returns the first index of the largest with NaN "
        "largest (torch.argmax); not offered until a GPU test shows its rules match";
    legacy.notes = {"legacy"};
    list.push_back({std::move(legacy)});
    for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
    return list;
  }
  std::shared_ptr<detail::OpPlan<detail::ArgmaxArgs>> build(const ArgmaxDesc& desc,
                                                            Direction direction,
                                                            const Candidate& candidate) override {
    return std::make_shared<ArgmaxPlan>(runtime_, desc, direction, candidate.info);
  }
};

class AccuracyPlan final : public detail::OpPlan<detail::AccuracyArgs> {
 public:
  AccuracyPlan(std::shared_ptr<Runtime> runtime, const AccuracyDesc& desc, Direction direction,
               AlgoInfo info)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(detail::op_context(BackendKind::cudnn, desc, direction, info_.id)),
        desc_(desc) {
    params_.element = element_of(desc.dtype);
    params_.lines = lines_of(detail::axis_geometry(desc));
    params_.top_k = desc.top_k;
    params_.ignore_index = desc.ignore_index;
    params_.label64 = desc.label_dtype == DType::i64;
    params_.count_f32 = desc.count_dtype == DType::f32;
    params_.accumulate = desc.accumulate;
    runtime_->make_current();
    // Note [deferred accuracy label check]: the report lives in mapped pinned host memory.
    report_ = make_mapped_host(sizeof(kernels::BadValueReport), "label report", context_);
    report()->position = -1;
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::AccuracyArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace, info_.workspace_bytes, context_);
    const void* logits = data_of(args.logits, "logits", context_);
    const void* labels = data_of(args.labels, "labels", context_);
    void* count = data_of(args.count, "count", context_);
    raise_reported_label();
    runtime_->make_current();
    DNNX_CUDNN_CHECK(
        karg::accuracy(params_, logits, labels, count, workspace.data,
                       static_cast<kernels::BadValueReport*>(report_.device), runtime_->stream()),
        context_, "launching the accuracy kernels");
  }

 private:
  volatile kernels::BadValueReport* report() const {
    return static_cast<volatile kernels::BadValueReport*>(report_.host.get());
  }

  // Note [deferred accuracy label check].
  void raise_reported_label() {
    const long long position = report()->position;
    if (position < 0) return;
    const long long value = report()->value;
    report()->position = -1;
    detail::raise(ErrorKind::InvalidArgument,
                  detail::cat(detail::bad_accuracy_label_message(desc_, position, value),
                              "; found on the GPU by an earlier call of this plan, whose count "
                              "left that position out (labels are checked without "
                              "synchronizing)"),
                  context_);
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  AccuracyDesc desc_;
  karg::AccuracyParams params_;
  MappedHost report_;
};

class CudnnAccuracy final : public LayerBackend<AccuracyDesc, detail::AccuracyArgs, Candidate> {
 public:
  explicit CudnnAccuracy(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const AccuracyDesc&, Direction) override {
    Candidate candidate{candidate_info(accuracy_id, "dnnx kernel (a warp per position, no sort)",
                                       {}, {"kernel"}, karg::accuracy_workspace())};
    candidate.info.priority = 0;
    return {std::move(candidate)};
  }
  std::shared_ptr<detail::OpPlan<detail::AccuracyArgs>> build(const AccuracyDesc& desc,
                                                              Direction direction,
                                                              const Candidate& candidate) override {
    return std::make_shared<AccuracyPlan>(runtime_, desc, direction, candidate.info);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::argmax>> make_argmax_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnArgmax>(std::move(runtime));
}

std::unique_ptr<detail::OpBackendOf<OpKind::accuracy>> make_accuracy_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnAccuracy>(std::move(runtime));
}

}  // namespace dnnx::cudnn
