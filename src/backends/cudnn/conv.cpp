// Note [cudnn candidate order]
// list() returns the graph-API candidates first (heuristics mode A's configs, then B's, then the
// fallback's, then every engine with default knobs: Note [engine candidates]) and the legacy
// algorithms after them (Note [legacy candidates]); within each half the supported ones come
// first. The heuristic policy therefore picks mode A's first admissible config, and a legacy
// algorithm only when no engine is admissible (e.g. a workspace limit of 0 rules out every engine
// that needs workspace, while legacy implicit_gemm needs none).

#include "backends/cudnn/conv.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_engine.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

struct ListKey {
  ConvDesc desc;
  Direction direction;
  bool operator==(const ListKey&) const = default;
};

struct PlanKey {
  ConvDesc desc;
  Direction direction;
  std::string id;
  bool operator==(const PlanKey&) const = default;
};

struct KeyHash {
  std::size_t operator()(const ListKey& key) const {
    return key.desc.hash() * 3 + static_cast<std::size_t>(key.direction);
  }
  std::size_t operator()(const PlanKey& key) const {
    return (key.desc.hash() * 3 + static_cast<std::size_t>(key.direction)) ^
           (std::hash<std::string>{}(key.id) * 0x9e3779b97f4a7c15ULL);
  }
};

struct Candidates {
  std::vector<AlgoInfo> infos;
  std::shared_ptr<OperationGraph> graph;

  const AlgoInfo* find(const std::string& id) const {
    auto it = std::find_if(infos.begin(), infos.end(),
                           [&](const AlgoInfo& info) { return info.id == id; });
    return it == infos.end() ? nullptr : &*it;
  }
  std::string supported_ids() const {
    std::vector<std::string> ids;
    for (const AlgoInfo& info : infos) {
      if (info.supported) ids.push_back(info.id);
    }
    return ids.empty() ? std::string("(none)") : detail::join(ids, ", ");
  }
};

// Bias tensors and the conv's output, described for cudnnAddTensor / cudnnConvolutionBackwardBias.
struct BiasDescriptors {
  TensorDescriptor bias, output;
};

BiasDescriptors bias_descriptors(const ConvDesc& desc, const ErrorContext& context) {
  const Geometry g = conv_geometry(desc);
  BiasDescriptors d{make_tensor_descriptor(context), make_tensor_descriptor(context)};
  std::array<int, 5> bias{}, bias_strides{}, dst{}, dst_strides{};
  for (int i = 0; i < g.nb_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    bias[s] = static_cast<int>(g.bias[s]);
    bias_strides[s] = static_cast<int>(g.bias_strides[s]);
    dst[s] = static_cast<int>(g.dst[s]);
    dst_strides[s] = static_cast<int>(g.dst_strides[s]);
  }
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.bias.get(), g.data_type, g.nb_dims, bias.data(),
                                              bias_strides.data()),
                   context, "describing the bias");
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.output.get(), g.data_type, g.nb_dims, dst.data(),
                                              dst_strides.data()),
                   context, "describing the conv output");
  return d;
}

class CudnnConv final : public detail::ConvBackend {
 public:
  explicit CudnnConv(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  std::vector<AlgoInfo> list(const ConvDesc& desc, Direction direction) override {
    desc.validate();
    std::lock_guard lock(mutex_);
    return candidates_locked(desc, direction).infos;
  }

  std::shared_ptr<detail::ConvPlan> plan(const ConvDesc& desc, Direction direction,
                                         const std::string& id) override {
    PlanKey key{desc, direction, id};
    std::lock_guard lock(mutex_);
    if (auto found = plans_.find(key); found != plans_.end()) return found->second;
    desc.validate();
    const Candidates& candidates = candidates_locked(desc, direction);
    const AlgoInfo* info = candidates.find(id);
    if (info == nullptr) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("algorithm id '", id, "' is not a cudnn candidate for this conv ",
                                to_string(direction),
                                "; valid ids: ", candidates.supported_ids()),
                    conv_context(desc, direction, id));
    }
    if (!info->supported) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("algorithm '", id, "' cannot run this conv: ", info->reason,
                                "; valid ids: ", candidates.supported_ids()),
                    conv_context(desc, direction, id));
    }
    std::shared_ptr<detail::ConvPlan> plan =
        is_legacy_id(id) ? make_legacy_plan(runtime_, desc, direction, *info)
                         : make_engine_plan(runtime_, candidates.graph, desc, direction, *info);
    plans_.emplace(std::move(key), plan);
    return plan;
  }

  void bias_fwd(const ConvDesc& desc, const Tensor& bias, Tensor& dst) override {
    const ErrorContext context = conv_context(desc, Direction::fwd, "cudnn:add_tensor");
    runtime_->make_current();
    const BiasDescriptors d = bias_descriptors(desc, context);
    const float one = 1.0f;
    DNNX_CUDNN_CHECK(cudnnAddTensor(runtime_->handle(), &one, d.bias.get(), bias.data(), &one,
                                    d.output.get(), dst.data()),
                     context, "adding the bias");
  }

  void bias_bwd(const ConvDesc& desc, const Tensor& diff_dst, Tensor& diff_bias) override {
    const ErrorContext context =
        conv_context(desc, Direction::bwd_weights, "cudnn:convolution_backward_bias");
    runtime_->make_current();
    const BiasDescriptors d = bias_descriptors(desc, context);
    const float one = 1.0f;
    const float zero = 0.0f;
    DNNX_CUDNN_CHECK(cudnnConvolutionBackwardBias(runtime_->handle(), &one, d.output.get(),
                                                  diff_dst.data(), &zero, d.bias.get(),
                                                  diff_bias.data()),
                     context, "reducing diff_dst into the bias gradient");
  }

 private:
  const Candidates& candidates_locked(const ConvDesc& desc, Direction direction) {
    ListKey key{desc, direction};
    auto found = lists_.find(key);
    if (found != lists_.end()) return found->second;
    // Note [cudnn candidate order]
    EngineCandidates engines = engine_candidates(*runtime_, desc, direction);
    std::vector<AlgoInfo> legacy = legacy_candidates(*runtime_, desc, direction);
    Candidates candidates;
    candidates.graph = std::move(engines.graph);
    candidates.infos = std::move(engines.infos);
    candidates.infos.insert(candidates.infos.end(), std::make_move_iterator(legacy.begin()),
                            std::make_move_iterator(legacy.end()));
    std::stable_partition(candidates.infos.begin(), candidates.infos.end(),
                          [](const AlgoInfo& info) { return info.supported; });
    for (std::size_t i = 0; i < candidates.infos.size(); ++i) {
      candidates.infos[i].priority = static_cast<int>(i);
    }
    return lists_.emplace(std::move(key), std::move(candidates)).first->second;
  }

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards lists_ and plans_
  std::unordered_map<ListKey, Candidates, KeyHash> lists_;
  std::unordered_map<PlanKey, std::shared_ptr<detail::ConvPlan>, KeyHash> plans_;
};

}  // namespace

std::unique_ptr<detail::ConvBackend> make_conv_backend(std::shared_ptr<Runtime> runtime) {
  return std::make_unique<CudnnConv>(std::move(runtime));
}

}  // namespace dnnx::cudnn
