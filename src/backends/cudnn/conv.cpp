// Note [cudnn candidate order]
// list() returns every supported candidate before every unsupported one; within each group the
// graph-API candidates come first (heuristics mode A's configs, then B's, then the fallback's,
// then every engine with default knobs: Note [engine candidates]) and the legacy algorithms after
// them (Note [legacy candidates]), then the knob variants dnnx adds (Note [knob search]), then
// the channel-padded candidates of f16/bf16 convs with unaligned channels (Note [channel
// padding]). The
// heuristic policy therefore picks mode A's first admissible config, and a legacy algorithm only
// when no engine is admissible (e.g. a workspace limit that rules out every engine needing
// workspace, while legacy implicit_gemm needs none).

#include "backends/cudnn/layers.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_engine.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "backends/cudnn/conv_padded.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

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
  set_tensor_descriptor(d.bias, g, g.bias, g.bias_strides, context, "describing the bias");
  set_tensor_descriptor(d.output, g, g.dst, g.dst_strides, context, "describing the conv output");
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
    std::lock_guard lock(mutex_);
    return plan_locked(desc, direction, id);
  }

  // Note [parallel plan builds]
  // Finalizing an engine's execution plan compiles or loads its kernels: about a millisecond for
  // precompiled engines and much more for runtime-compiled ones, so an exhaustive search over
  // ~100 configs spends most of its time here. cuDNN allows plans to be finalized concurrently
  // (cudnn-frontend's multithreaded build_plans does the same with one handle), so the engine plans
  // of a search are built up front on up to 16 host threads. Legacy plans are only descriptors.
  void prepare(const ConvDesc& desc, Direction direction,
               const std::vector<std::string>& ids) override {
    build_for_ids(
        desc, direction, ids,
        [&](std::vector<Build>& to_build, const ConvDesc& build_desc, const std::string& id) {
          const Candidates& candidates = candidates_locked(build_desc, direction);
          const AlgoInfo* info = candidates.find(id);
          if (info == nullptr || !info->supported || !is_engine_id(id) || !candidates.graph) return;
          detail::ConvPlanKey key{build_desc, direction, id};
          if (plans_.count(key) != 0) return;
          queue(to_build, std::move(key), *info, candidates.graph);
        },
        [&](detail::ConvPlanKey& key, const std::shared_ptr<detail::ConvPlan>& plan) {
          // A failure is left for plan() to build again and report where the search records it.
          if (plan) plans_.emplace(std::move(key), plan);
        });
  }

  // Probe plans are built from the id alone (engine config keys and legacy ids say everything a
  // plan needs): listing a sliced desc would cost a knob search of 60-100 ms per probe desc. They
  // are kept apart from plans_, whose entries carry their listing's AlgoInfo.
  std::shared_ptr<detail::ConvPlan> probe_plan(const ConvDesc& desc, Direction direction,
                                               const std::string& id) override {
    std::lock_guard lock(mutex_);
    return probe_plan_locked(desc, direction, id);
  }

  // The engine plans of a search's probes, built on several threads like prepare()'s (a few
  // hundred for ResNet-50's first layer: 0.3-2 ms each).
  void prepare_probes(const ConvDesc& desc, Direction direction,
                      const std::vector<std::string>& ids) override {
    build_for_ids(
        desc, direction, ids,
        [&](std::vector<Build>& to_build, const ConvDesc& build_desc, const std::string& id) {
          if (!is_engine_id(id)) return;
          detail::ConvPlanKey key{build_desc, direction, id};
          if (probe_plans_.count(key) != 0) return;
          std::shared_ptr<OperationGraph> graph = probe_graph_locked(build_desc, direction);
          if (!graph) return;
          queue(to_build, std::move(key), unlisted_info(id), std::move(graph));
        },
        [&](detail::ConvPlanKey& key, const std::shared_ptr<detail::ConvPlan>& plan) {
          // Null: the config cannot run the slice, which probe_plan() reports as null too.
          probe_plans_.emplace(std::move(key), plan);
        });
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
    DNNX_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(runtime_->handle(), &one, d.output.get(), diff_dst.data(),
                                     &zero, d.bias.get(), diff_bias.data()),
        context, "reducing diff_dst into the bias gradient");
  }

 private:
  std::shared_ptr<detail::ConvPlan> plan_locked(const ConvDesc& desc, Direction direction,
                                                const std::string& id) {
    detail::ConvPlanKey key{desc, direction, id};
    if (auto found = plans_.find(key); found != plans_.end()) return found->second;
    desc.validate();
    const Candidates& candidates = candidates_locked(desc, direction);
    const AlgoInfo* info = candidates.find(id);
    if (info == nullptr) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("algorithm id '", id, "' is not a cudnn candidate for this conv ",
                                to_string(direction), "; valid ids: ", candidates.supported_ids()),
                    conv_context(desc, direction, id));
    }
    if (!info->supported) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("algorithm '", id, "' cannot run this conv: ", info->reason,
                                "; valid ids: ", candidates.supported_ids()),
                    conv_context(desc, direction, id));
    }
    std::shared_ptr<detail::ConvPlan> plan;
    if (is_padded_id(id)) {  // Note [channel padding]
      const ConvDesc padded = *channel_padded(desc);
      plan = make_padded_plan(runtime_, desc, padded, direction,
                              plan_locked(padded, direction, inner_id(id)));
    } else if (is_legacy_id(id)) {
      plan = make_legacy_plan(runtime_, desc, direction, *info);
    } else {
      plan = make_engine_plan(runtime_, candidates.graph, desc, direction, *info);
    }
    plans_.emplace(std::move(key), plan);
    return plan;
  }

  std::shared_ptr<detail::ConvPlan> probe_plan_locked(const ConvDesc& desc, Direction direction,
                                                      const std::string& id) {
    detail::ConvPlanKey key{desc, direction, id};
    if (auto found = probe_plans_.find(key); found != probe_plans_.end()) return found->second;
    std::shared_ptr<detail::ConvPlan> plan;
    try {
      if (is_padded_id(id)) {
        if (const std::optional<ConvDesc> padded = channel_padded(desc)) {
          if (auto inner = probe_plan_locked(*padded, direction, inner_id(id)))
            plan = make_padded_plan(runtime_, desc, *padded, direction, std::move(inner));
        }
      } else if (is_legacy_id(id)) {
        plan = make_legacy_plan(runtime_, desc, direction, unlisted_info(id));
      } else if (is_engine_id(id)) {
        if (auto graph = probe_graph_locked(desc, direction))
          plan = make_engine_plan(runtime_, std::move(graph), desc, direction, unlisted_info(id));
      }
    } catch (const Error&) {
      plan = nullptr;  // this candidate cannot run the slice; the full run decides
    }
    probe_plans_.emplace(std::move(key), plan);
    return plan;
  }

  std::shared_ptr<OperationGraph> probe_graph_locked(const ConvDesc& desc, Direction direction) {
    detail::ConvKey key{desc, direction};
    auto found = probe_graphs_.find(key);
    if (found == probe_graphs_.end())
      found = probe_graphs_.emplace(key, operation_graph(*runtime_, desc, direction)).first;
    return found->second;
  }

  // What a plan built from its id alone knows about itself.
  static AlgoInfo unlisted_info(const std::string& id) {
    AlgoInfo info;
    info.id = id;
    info.name = id;
    info.supported = true;
    return info;
  }

  // A plan to build on one of several threads (Note [parallel plan builds]).
  struct Build {
    detail::ConvPlanKey key;
    AlgoInfo info;
    std::shared_ptr<OperationGraph> graph;
  };

  static void queue(std::vector<Build>& to_build, detail::ConvPlanKey key, AlgoInfo info,
                    std::shared_ptr<OperationGraph> graph) {
    const bool queued = std::any_of(to_build.begin(), to_build.end(),
                                    [&](const Build& build) { return build.key == key; });
    if (!queued) to_build.push_back({std::move(key), std::move(info), std::move(graph)});
  }

  // Note [parallel plan builds]: `queue_one(to_build, build_desc, id)` queues what one id of a
  // search needs built (a padded candidate's plan is cheap; its inner engine plan on the padded
  // desc is what takes time), under the lock; the plans are built on several threads, then
  // `keep(key, plan)` files each one (null where its build failed), under the lock again.
  template <typename QueueOne, typename Keep>
  void build_for_ids(const ConvDesc& desc, Direction direction,
                     const std::vector<std::string>& ids, QueueOne queue_one, Keep keep) {
    std::vector<Build> to_build;
    {
      std::lock_guard lock(mutex_);
      const std::optional<ConvDesc> padded = channel_padded(desc);
      for (const std::string& listed_id : ids) {
        const bool inner = is_padded_id(listed_id) && padded.has_value();
        queue_one(to_build, inner ? *padded : desc, inner ? inner_id(listed_id) : listed_id);
      }
    }
    const auto built = build_in_parallel(to_build, desc, direction);
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < to_build.size(); ++i) keep(to_build[i].key, built[i]);
  }

  // Builds the engine plans on up to 16 threads; null where a build failed.
  std::vector<std::shared_ptr<detail::ConvPlan>> build_in_parallel(
      const std::vector<Build>& to_build, const ConvDesc& desc, Direction direction) {
    std::vector<std::shared_ptr<detail::ConvPlan>> built(to_build.size());
    if (to_build.empty()) return built;
    const auto threads = std::min<std::size_t>({to_build.size(), 16, detail::hardware_threads()});
    std::vector<double> build_ms(to_build.size(), 0.0);
    std::atomic<std::size_t> next{0};
    const auto start = Clock::now();
    auto worker = [&] {
      for (std::size_t i = next++; i < to_build.size(); i = next++) {
        const auto begin = Clock::now();
        try {
          const Build& build = to_build[i];
          built[i] = make_engine_plan(runtime_, build.graph, build.key.desc, direction, build.info);
        } catch (const std::exception&) {
          built[i] = nullptr;
        }
        build_ms[i] = ms_since(begin);
      }
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& thread : pool) thread.join();
    if (runtime_->verbose()) {
      std::size_t slowest = 0;
      for (std::size_t i = 1; i < to_build.size(); ++i) {
        if (build_ms[i] > build_ms[slowest]) slowest = i;
      }
      double sum = 0;
      for (double ms : build_ms) sum += ms;
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": built "
                << to_build.size() << " engine plans on " << threads << " threads in "
                << ms_since(start) << " ms (sum " << sum << " ms; slowest "
                << to_build[slowest].info.id << " " << build_ms[slowest] << " ms)\n";
    }
    return built;
  }

  const Candidates& candidates_locked(const ConvDesc& desc, Direction direction) {
    detail::ConvKey key{desc, direction};
    auto found = lists_.find(key);
    if (found != lists_.end()) return found->second;
    // Note [cudnn candidate order]
    const auto start = Clock::now();
    EngineCandidates engines = engine_candidates(*runtime_, desc, direction);
    const double engines_ms = ms_since(start);
    std::vector<AlgoInfo> legacy = legacy_candidates(*runtime_, desc, direction);
    if (runtime_->verbose()) {
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": listed "
                << engines.infos.size() + engines.knob_variants.size() << " engine configs ("
                << engines.knob_variants.size() << " knob variants) in " << engines_ms << " ms and "
                << legacy.size() << " legacy algorithms in " << ms_since(start) - engines_ms
                << " ms\n";
    }
    Candidates candidates;
    candidates.graph = std::move(engines.graph);
    candidates.infos = std::move(engines.infos);
    candidates.infos.insert(candidates.infos.end(), std::make_move_iterator(legacy.begin()),
                            std::make_move_iterator(legacy.end()));
    std::stable_partition(candidates.infos.begin(), candidates.infos.end(),
                          [](const AlgoInfo& info) { return info.supported; });
    // Knob variants (all supported) after every supported candidate: Note [knob search].
    const auto first_unsupported =
        std::find_if(candidates.infos.begin(), candidates.infos.end(),
                     [](const AlgoInfo& info) { return !info.supported; });
    candidates.infos.insert(first_unsupported,
                            std::make_move_iterator(engines.knob_variants.begin()),
                            std::make_move_iterator(engines.knob_variants.end()));
    // Channel-padded candidates after every other supported one: Note [channel padding].
    if (const std::optional<ConvDesc> padded = channel_padded(desc)) {
      std::vector<AlgoInfo> wrapped;
      for (const AlgoInfo& inner : candidates_locked(*padded, direction).infos) {
        const bool tensor_cores =
            std::find(inner.notes.begin(), inner.notes.end(), "tensor_cores") != inner.notes.end();
        if (inner.supported && tensor_cores) wrapped.push_back(padded_info(desc, *padded, inner));
      }
      candidates.infos.insert(std::find_if(candidates.infos.begin(), candidates.infos.end(),
                                           [](const AlgoInfo& info) { return !info.supported; }),
                              std::make_move_iterator(wrapped.begin()),
                              std::make_move_iterator(wrapped.end()));
    }
    for (std::size_t i = 0; i < candidates.infos.size(); ++i) {
      candidates.infos[i].priority = static_cast<int>(i);
    }
    return lists_.emplace(key, std::move(candidates)).first->second;
  }

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards lists_, plans_ and the probe caches
  std::unordered_map<detail::ConvKey, Candidates, detail::ConvKeyHash> lists_;
  std::unordered_map<detail::ConvPlanKey, std::shared_ptr<detail::ConvPlan>, detail::ConvKeyHash>
      plans_;
  // Note [probing slow candidates]: plans for probes, and the graphs they were built from.
  std::unordered_map<detail::ConvPlanKey, std::shared_ptr<detail::ConvPlan>, detail::ConvKeyHash>
      probe_plans_;
  std::unordered_map<detail::ConvKey, std::shared_ptr<OperationGraph>, detail::ConvKeyHash>
      probe_graphs_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::conv>> make_conv_backend(std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnConv>(std::move(runtime));
}

}  // namespace dnnx::cudnn
