// Note [cudnn candidate order]
// list() returns every supported candidate before every unsupported one; within each group the
// graph-API candidates come first (heuristics mode A's configs, then B's, then the fallback's, then
// every engine with default knobs: Note [engine candidates]) and the legacy algorithms after them
// (Note [legacy candidates]), then the supported runtime-compiled engines (Note [runtime-compiled
// engines]), then the knob variants dnnx adds (Note [knob search]), then the channel-padded
// candidates of f16/bf16 convs with unaligned channels (Note [channel padding]), then dnnx's matrix
// products, Winograd's products, column products, tap regions, frames and folds (Note [gemm
// candidates], Note [winograd candidates], Note [im2col candidates], Note [tap-region
// candidates], Note [frame candidates], Note [fold candidates]). dnnx's supported depthwise,
// grouped and narrow-channel kernels come right after the last of the heuristics' top configs
// that is not runtime-compiled (Note [depthwise candidates], Note [grouped candidates], Note
// [narrow-channel candidates]). The heuristic
// policy therefore picks mode A's first admissible config, and a legacy algorithm only when no
// engine is admissible (e.g. a workspace limit that rules out every engine needing workspace, while
// legacy implicit_gemm needs none).

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_compile.hpp"
#include "backends/cudnn/conv_depthwise.hpp"
#include "backends/cudnn/conv_engine.hpp"
#include "backends/cudnn/conv_folds.hpp"
#include "backends/cudnn/conv_frames.hpp"
#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/conv_grouped.hpp"
#include "backends/cudnn/conv_im2col.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "backends/cudnn/conv_narrow.hpp"
#include "backends/cudnn/conv_padded.hpp"
#include "backends/cudnn/conv_taps.hpp"
#include "backends/cudnn/conv_winograd.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"
#include "core/threads.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
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

// Note [probing runtime-compiled candidates]
// A runtime-compiled candidate gets no plan on a probe's slice unless it is compiled for it, and
// without a probe its single full run decides (Note [probing slow candidates] in
// src/tune/select.cpp). Those runs were the slowest part of the slowest searches: on an H200,
// DeepLabV3's l4.downsample bwd_weights in f16 (batch 16, 1024 -> 2048 channels, 1x1, 65x65)
// spent 3.7 of a 4.2 s search in one run of cuDNN's engine 19 (a kernel for depthwise shapes),
// against 0.36 ms for the best, and its ASPP and forward rows 0.2-0.9 s each in engines 80 and
// 84 (docs/benchmarks.md, "GPU convolution beyond ResNet-50"). So when a search first prepares
// its probes (its smallest slice), the plans of its runtime-compiled candidates for that slice
// are compiled on the background builders too, under the search's compile deadline, behind the
// full plans already queued (only for candidates whose full plan is not at hand then). A probe
// of a candidate whose slice plan its own search queued waits for it at most until that
// deadline, even when the full plan has been built meanwhile: the search would have waited for
// the full plan under the same deadline, and a full run of a slow one costs more than the wait
// (the 3.7 s run above came after the full plan finished first: a probe that did not wait for
// its slice plan then ran it in full). A candidate whose full plan was at hand when the probes
// were prepared (loaded from the plan store, as in the settling of late plans) had no slice plan
// queued by this search: it takes one only if it is built already (by an earlier search), and
// never waits. Larger slices are not compiled: a candidate that passes the smallest slice goes
// to its full run. The deadline comes from the searching thread's last start_compiles(), which
// the same search's prepare() called before it probes.
// Waiting until the deadline was not enough on that layer: engine 19's slice plan, queued behind
// the full plans, was still compiling after a wait of 0.46 s, and the full run took 4.2 s of a
// 4.8 s search. So a candidate whose slice plan is still compiling at the deadline (or was still
// queued then: it is queued again, with a compile budget of its own) is skipped, with the reason,
// rather than run in full (probe_pending(), Note [probing slow candidates] in
// src/tune/select.cpp), and it becomes a late plan (Note [late plans] in src/ops/dispatch.cpp):
// its full plan counts as at hand only once the slice plan is built, and the settling of late
// plans then probes it on that slice first. That slice plan also goes to the plan store once
// built (keep_slice_plan()), so that a later process settling the late plan probes it too. A
// candidate with no slice plan at hand (none saved; a larger slice; a build that failed) still
// gets its full run.
struct SearchCompiles {
  Clock::time_point deadline{};
  ConvDesc desc;  // the search's, with its direction: where its full plans are found
  Direction direction = Direction::fwd;
  bool slices_submitted = false;    // the search's first prepare_probes() has run
  ConvDesc slice_desc;              // that slice's
  std::set<std::string> slice_ids;  // the candidates whose slice plans it queued
};
thread_local SearchCompiles this_search;

// Note [cudnn conv candidates]
// A candidate is listed as data: its AlgoInfo and, per kind, what building its plan takes, so a
// plan is built from the candidate and never from its id:
//   engine  a graph-API config (ConfigKey: engine index and knobs) on the operation graph of the
//           desc it was listed for (Note [engine candidates]);
//   legacy  a cuDNN algorithm of the direction under a math mode (Note [legacy candidates]);
//   padded  a candidate of the channel-padded desc, wrapped in the padding copies (Note [channel
//           padding]);
//   kernel  one of dnnx's own kernels (Note [depthwise candidates], Note [grouped candidates],
//           Note [narrow-channel candidates]), named by its id;
//   gemm    a candidate of the cudnn matmul backend for the matrix product the convolution is
//           (Note [gemm candidates] in conv_gemm.cpp), named by its id there;
//   im2col  one for the product of the convolution's column matrix (Note [im2col candidates] in
//           conv_im2col.cpp);
//   winograd  one for the 36 products of Winograd's F(4x4, 3x3) between dnnx's transforms (Note
//           [winograd candidates] in conv_winograd.cpp);
//   taps    smaller legacy convolutions on the output regions of one range of taps, by split
//           (Note [tap-region candidates] in conv_taps.cpp);
//   frames  one 2-D legacy convolution per output frame of a 3-D one whose kernel has a depth of
//           1, by legacy algorithm (Note [frame candidates] in conv_frames.cpp);
//   folded  a candidate of the convolution this one folds into (the 2-D one a 3-D one is; the
//           stacked form of a dilated one), wrapped in the copies the fold needs (Note [fold
//           candidates] in conv_folds.cpp, Note [stacked folds] in conv_stacked.cpp).
// An id names the same config for every desc (Note [engine candidates]), so the backend also
// keeps, per direction, the candidate of every supported id it has listed (or described alone,
// as the settling of late plans in a later process does): a search's probes run
// a candidate listed for one desc on a smaller slice of it (Note [probing slow candidates]) from
// that record, built on the slice's own operation graph, without listing the slice. And an id
// alone is turned back into its candidate, by the code of its kind that makes such ids, to
// re-validate a choice read from the cache file without listing (unlisted_candidate(): Note
// [re-validating persisted choices] in src/ops/dispatch.cpp).
struct Candidate {
  enum class Kind { engine, legacy, padded, kernel, gemm, im2col, winograd, taps, frames, folded };
  AlgoInfo info;
  Kind kind = Kind::engine;
  /// Runs on tensor cores (Note [channel padding] wraps only such candidates).
  bool tensor_cores = false;
  /// Its plan compiles kernels with NVRTC (Note [runtime-compiled engines]).
  bool runtime_compiled = false;
  // engine: the config, and the operation graph of the listed desc (null when cuDNN's graph API
  // rejects that desc; every engine candidate is unsupported then).
  ConfigKey config;
  std::shared_ptr<OperationGraph> graph;
  // legacy
  LegacyConfig legacy;
  // padded, folded: the desc it wraps a candidate of (the channels rounded up, the fold's), and
  // that candidate; folded: which fold.
  ConvDesc inner_desc;
  std::shared_ptr<const Candidate> inner;
  std::optional<FoldKind> fold;
  // gemm, im2col, winograd: the matmul candidate's id, and whether it is of the packed form
  // (Note [packed gemm]; never for winograd).
  std::string matmul_id;
  bool gemm_packed = false;
  // taps, frames: what it runs (none for the entry listed where the setting keeps them out),
  // and the plan the listing made of the listed desc to describe it, which build() hands on.
  std::optional<TapsConfig> taps;
  std::optional<int> frames_algorithm;
  std::shared_ptr<detail::ConvPlan> listed_plan;
};

Candidate engine_candidate(EngineCandidate engine, std::shared_ptr<OperationGraph> graph) {
  Candidate candidate;
  candidate.info = std::move(engine.info);
  candidate.kind = Candidate::Kind::engine;
  candidate.tensor_cores = engine.tensor_cores;
  candidate.runtime_compiled = engine.runtime_compiled;
  candidate.config = std::move(engine.config);
  candidate.graph = std::move(graph);
  return candidate;
}

Candidate legacy_candidate(LegacyCandidate legacy) {
  Candidate candidate;
  candidate.info = std::move(legacy.info);
  candidate.kind = Candidate::Kind::legacy;
  candidate.tensor_cores = legacy.tensor_cores;
  candidate.legacy = legacy.config;
  return candidate;
}

// Whether a candidate of the channel-padded desc is one that padded candidates wrap (Note
// [channel padding]): a supported tensor-core one, not runtime-compiled (Note [runtime-compiled
// engines]), not padded itself, and no phase fold, whose copy rounds the channels up already
// (Note [phase folds]).
bool padding_wraps(const Candidate& inner) {
  return inner.info.supported && inner.tensor_cores && !inner.runtime_compiled &&
         inner.kind != Candidate::Kind::padded && inner.fold != FoldKind::phases;
}

Candidate padded_candidate(const ConvDesc& desc, const ConvDesc& padded, const Candidate& inner) {
  Candidate candidate;
  candidate.info = padded_info(desc, padded, inner.info);
  candidate.kind = Candidate::Kind::padded;
  candidate.tensor_cores = inner.tensor_cores;
  candidate.inner_desc = padded;
  candidate.inner = std::make_shared<const Candidate>(inner);
  return candidate;
}

Candidate fold_candidate(const ConvDesc& desc, const ConvFold& fold, const Candidate& inner) {
  Candidate candidate;
  candidate.info = fold_info(desc, fold, inner.info);
  candidate.kind = Candidate::Kind::folded;
  candidate.tensor_cores = inner.tensor_cores;
  candidate.inner_desc = fold.folded;
  candidate.inner = std::make_shared<const Candidate>(inner);
  candidate.fold = fold.kind;
  return candidate;
}

Candidate folds_off_candidate(FoldKind kind, std::string reason) {
  Candidate candidate;
  candidate.info = folds_off_info(kind, std::move(reason));
  candidate.kind = Candidate::Kind::folded;
  return candidate;
}

// Whether a candidate of a fold's convolution is one that fold candidates wrap (Note [fold
// candidates]): a supported engine config or legacy algorithm, not runtime-compiled, on planes
// not an FFT; in NDHWC frames without copies, legacy algorithms only where `frames_listed` is
// false (the frame candidates run them there).
bool folds_wrap(const ConvFold& fold, const Candidate& inner, bool frames_listed) {
  if (!inner.info.supported || inner.runtime_compiled) return false;
  if (fold.kind == FoldKind::planes && inner.info.has_note("fft")) return false;
  if (inner.kind == Candidate::Kind::legacy)
    return !(fold.kind == FoldKind::frames && !fold.copies && frames_listed);
  return inner.kind == Candidate::Kind::engine;
}

Candidate kernel_candidate(AlgoInfo info) {
  Candidate candidate;
  candidate.info = std::move(info);
  candidate.kind = Candidate::Kind::kernel;
  return candidate;
}

bool is_kernel_id(const std::string& id) {
  return is_depthwise_id(id) || is_grouped_id(id) || is_narrow_id(id);
}

std::shared_ptr<detail::ConvPlan> kernel_plan(std::shared_ptr<Runtime> runtime,
                                              const ConvDesc& desc, Direction direction,
                                              const AlgoInfo& info) {
  if (is_narrow_id(info.id)) return make_narrow_plan(std::move(runtime), desc, direction, info);
  if (is_grouped_id(info.id)) return make_grouped_plan(std::move(runtime), desc, direction, info);
  return make_depthwise_plan(std::move(runtime), desc, direction, info);
}

// A gemm candidate: `inner` a matmul candidate of `form`'s product, or the unsupported entry
// listed while they are off (Note [gemm candidates]).
Candidate gemm_candidate(const AlgoInfo& inner, const GemmForm& form) {
  Candidate candidate;
  candidate.info = gemm_info(inner, form);
  candidate.kind = Candidate::Kind::gemm;
  candidate.matmul_id = inner.id;
  candidate.gemm_packed = form.packed;
  return candidate;
}
Candidate gemm_off_candidate() {
  Candidate candidate;
  candidate.info = gemm_off_info();
  candidate.kind = Candidate::Kind::gemm;
  return candidate;
}

// The one unsupported entry `off` (a kind's off entry: im2col_off_info(), winograd_off_info())
// listed in place of a kind of candidate, with `reason`.
Candidate unsupported_candidate(AlgoInfo off, std::string reason, Candidate::Kind kind) {
  Candidate candidate;
  candidate.info = std::move(off);
  candidate.info.reason = std::move(reason);
  candidate.kind = kind;
  return candidate;
}

// An im2col candidate: `inner` a matmul candidate of the product of `form` (Note [im2col
// candidates]); its unsupported entry is listed while they are off or the convolution has no
// column product within the workspace cap.
Candidate im2col_candidate(const AlgoInfo& inner, const Im2colForm& form) {
  Candidate candidate;
  candidate.info = im2col_info(inner, form);
  candidate.kind = Candidate::Kind::im2col;
  candidate.matmul_id = inner.id;
  candidate.gemm_packed = form.gemm.packed;
  return candidate;
}
Candidate im2col_unsupported_candidate(std::string reason) {
  return unsupported_candidate(im2col_off_info(), std::move(reason), Candidate::Kind::im2col);
}

// A Winograd candidate: `inner` a matmul candidate of `form`'s product (Note [winograd
// candidates]); its unsupported entry is listed where the setting keeps them out or the
// convolution has no form.
Candidate winograd_candidate(const AlgoInfo& inner, const WinogradForm& form) {
  Candidate candidate;
  candidate.info = winograd_info(inner, form);
  candidate.kind = Candidate::Kind::winograd;
  candidate.matmul_id = inner.id;
  return candidate;
}
Candidate winograd_unsupported_candidate(std::string reason) {
  return unsupported_candidate(winograd_off_info(), std::move(reason), Candidate::Kind::winograd);
}

Candidate taps_candidate(TapsEntry entry) {
  Candidate candidate;
  candidate.kind = Candidate::Kind::taps;
  candidate.info = std::move(entry.info);
  candidate.taps = entry.config;
  candidate.listed_plan = std::move(entry.plan);
  return candidate;
}

Candidate frames_candidate(FramesEntry entry) {
  Candidate candidate;
  candidate.kind = Candidate::Kind::frames;
  candidate.info = std::move(entry.info);
  candidate.frames_algorithm = entry.algorithm;
  candidate.listed_plan = std::move(entry.plan);
  return candidate;
}

bool is_supported(const Candidate& candidate) { return candidate.info.supported; }

// conv_listing_counts()
std::atomic<std::uint64_t> listings{0};
std::atomic<std::uint64_t> descriptions{0};

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

class CudnnConv final
    : public detail::ListedOpBackend<ConvDesc, detail::ConvArgs, Candidate, detail::ConvBackend> {
 public:
  explicit CudnnConv(std::shared_ptr<Runtime> runtime)
      : ListedOpBackend(BackendKind::cudnn),
        runtime_(std::move(runtime)),
        background_(runtime_),
        store_(runtime_->settings().plan_dir) {}

  // Note [parallel plan builds]
  // Finalizing an engine's execution plan compiles or loads its kernels: about a millisecond for
  // precompiled engines and much more for runtime-compiled ones, so an exhaustive search over
  // ~100 configs spends most of its time here. cuDNN allows plans to be finalized concurrently
  // (cudnn-frontend's multithreaded build_plans does the same with one handle), so the engine plans
  // of a search are built up front on up to 16 host threads, except the runtime-compiled ones,
  // which compile in the background under the compile budget (Note [runtime-compiled engines]).
  // Legacy plans are only descriptors.
  // A padded candidate's plan is cheap too; its inner engine plan on the padded desc is what takes
  // time, so that one is built ahead, filed under the padded desc where build() finds it.
  void prepare(const ConvDesc& desc, Direction direction, const std::vector<std::string>& ids,
               Clock::time_point search_start) override {
    const std::vector<Candidate>& listed = listed_candidates(desc, direction);
    std::vector<Build> to_build;
    std::vector<BackgroundBuilds::Request> compiled;  // Note [runtime-compiled engines]
    for (const std::string& id : ids) {
      const auto found = std::find_if(listed.begin(), listed.end(),
                                      [&](const Candidate& c) { return c.info.id == id; });
      if (found == listed.end()) continue;
      const bool wrapped = found->inner != nullptr;  // padded, folded
      const ConvDesc& build_desc = wrapped ? found->inner_desc : desc;
      const Candidate& candidate = wrapped ? *found->inner : *found;
      if (!candidate.info.supported || candidate.kind != Candidate::Kind::engine ||
          !candidate.graph)
        continue;
      if (plans().find(build_desc, direction, candidate.info.id)) continue;
      if (candidate.runtime_compiled) {
        compiled.push_back(
            {{build_desc, direction, candidate.info.id}, candidate.info, candidate.config});
        continue;
      }
      queue(to_build, {build_desc, direction, candidate.info.id}, candidate.info, candidate.graph,
            candidate.config);
    }
    start_compiles(desc, direction, compiled, search_start);
    const auto built = build_in_parallel(to_build, desc, direction);
    for (std::size_t i = 0; i < to_build.size(); ++i) {
      // A failure is left for plan() to build again and report where the search records it.
      if (!built[i]) continue;
      const detail::ConvPlanKey& key = to_build[i].key;
      plans().get_or_build(key.desc, direction, key.id, [&] { return built[i]; });
    }
  }

  // Note [compile budget] (src/ops/dispatch.cpp): the runtime-compiled plans the last prepare()
  // of (desc, direction) left compiling and that are not built yet.
  std::vector<std::string> pending_plans(const ConvDesc& desc, Direction direction) override {
    std::vector<std::string> ids;
    {
      std::lock_guard lock(compile_mutex_);
      const auto found = compiling_.find(detail::ConvKey{desc, direction});
      if (found != compiling_.end()) ids = found->second;
    }
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](const std::string& id) {
                               return plans().find(desc, direction, id) != nullptr;
                             }),
              ids.end());
    return ids;
  }

  std::string await_plan(const ConvDesc& desc, Direction direction,
                         const std::string& id) override {
    if (plans().find(desc, direction, id)) return {};
    const detail::ConvPlanKey key{desc, direction, id};
    BackgroundBuilds::Outcome outcome = background_.await(key);
    const double budget = runtime_->settings().compile_budget_s;
    switch (outcome.state) {
      case BackgroundBuilds::State::none: return {};  // plan() builds it
      case BackgroundBuilds::State::ready:
        plans().get_or_build(desc, direction, id, [&] { return outcome.plan; });
        return {};
      case BackgroundBuilds::State::failed: {
        // The run's plan() reports it, as for any build that fails.
        std::lock_guard lock(compile_mutex_);
        failed_compiles_[key] = outcome.error;
        return {};
      }
      case BackgroundBuilds::State::running:
        return detail::cat("runtime-compiled plan still compiling when the compile budget of ",
                           budget, " s ran out (", compile_budget_variable,
                           "); its build goes on in the background for a later search or call");
      case BackgroundBuilds::State::queued:
      case BackgroundBuilds::State::cancelled:
        return detail::cat(
            "runtime-compiled plan not compiled: the compile budget of ", budget, " s (",
            compile_budget_variable, ") ran out before its turn",
            outcome.queued_ahead > 0
                ? detail::cat(" (", outcome.queued_ahead, " compiles were queued before it)")
                : std::string());
    }
    return {};
  }

  // Note [saved plans]: the chosen engine plan goes to the plan store where cuDNN serializes it
  // (it documents that for runtime-compiled engines), so that another process with the same
  // choice cache loads it instead of compiling it again. Legacy and channel-padded plans have no
  // serialization (engine_plan_json() is empty for them).
  void keep_plan(const ConvDesc& desc, Direction direction, const std::string& id) override {
    if (!store_.enabled()) return;
    if (const std::shared_ptr<detail::ConvPlan> plan = plans().find(desc, direction, id))
      save_plan(desc, direction, id, *plan);
  }

  // Note [late plans] (src/ops/dispatch.cpp): a runtime-compiled plan the search skipped while
  // it compiled is saved when its build finishes, on the builder's thread; one whose build never
  // started is built late first (Note [late builds] in conv_compile.cpp).
  bool keep_late_plan(const ConvDesc& desc, Direction direction, const std::string& id) override {
    if (!store_.enabled()) return false;
    if (const std::shared_ptr<detail::ConvPlan> plan = plans().find(desc, direction, id))
      return save_plan(desc, direction, id, *plan);
    const detail::ConvPlanKey key{desc, direction, id};
    const auto save = [this, desc, direction, id](const detail::ConvPlan& plan) {
      save_plan(desc, direction, id, plan);
    };
    return background_.when_built(key, save) || background_.build_late(key, save);
  }

  // Note [late plans]: built already (here or on a builder's thread), or saved in the plan store
  // in a form that loads.
  bool plan_at_hand(const ConvDesc& desc, Direction direction, const std::string& id) override {
    // Skipped by a probe (probe_pending()): at hand once its slice plan is built. (The builders
    // call save_plan() under their own lock, which takes compile_mutex_: not the other way.)
    std::optional<detail::ConvPlanKey> slice;
    {
      std::lock_guard lock(compile_mutex_);
      if (const auto found = unprobed_.find({desc, direction, id}); found != unprobed_.end())
        slice = found->second;
    }
    if (slice) {
      if (background_.building(*slice)) return false;
      keep_slice_plan(*slice);
      std::lock_guard lock(compile_mutex_);
      unprobed_.erase({desc, direction, id});
    }
    if (plans().find(desc, direction, id) || background_.built({desc, direction, id})) return true;
    if (!store_.enabled()) return false;
    std::string problem;
    const bool saved =
        store_.load(saved_plan_key(runtime_->facts(), desc, direction, id), &problem).has_value();
    if (!problem.empty()) std::cerr << "dnnx: cudnn: " << problem << '\n';
    return saved;
  }

  // Note [probing runtime-compiled candidates]: the slice plan of a candidate a probe skipped is
  // saved to the plan store once built (now if it is; when its build ends if it is running), so
  // that a later process settling the late plan can probe it (compiled_probe_plan()).
  void keep_slice_plan(const detail::ConvPlanKey& key) {
    if (!store_.enabled()) return;
    background_.when_built(key, [this, key](const detail::ConvPlan& plan) {
      save_plan(key.desc, key.direction, key.id, plan);
    });
  }

  // Saves `plan` to the plan store once per key; whether it is there now. Never throws (it may
  // run on a builder's thread).
  bool save_plan(const ConvDesc& desc, Direction direction, const std::string& id,
                 const detail::ConvPlan& plan) noexcept {
    try {
      const std::string key = saved_plan_key(runtime_->facts(), desc, direction, id);
      {
        std::lock_guard lock(compile_mutex_);
        if (!stored_.insert(key).second) return true;  // loaded from or saved to the store already
      }
      auto not_saved = [&] {
        std::lock_guard lock(compile_mutex_);
        stored_.erase(key);
        return false;
      };
      const std::string json = engine_plan_json(plan);
      if (json.empty()) {
        if (runtime_->verbose())
          std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": " << id
                    << ": cuDNN does not serialize this plan; not saved\n";
        return not_saved();
      }
      std::string problem;
      if (!store_.save(key, json, &problem)) {
        std::cerr << "dnnx: cudnn: cannot save the plan of " << id << ": " << problem << '\n';
        return not_saved();
      }
      if (runtime_->verbose()) {
        std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc
                  << ": saved the plan of " << id << " (" << json.size() << " bytes) to "
                  << store_.path_of(key) << '\n';
      }
      return true;
    } catch (const std::exception& error) {
      std::cerr << "dnnx: cudnn: cannot save the plan of " << id << ": " << error.what() << '\n';
      return false;
    }
  }

  // Note [re-validating persisted choices] (src/ops/dispatch.cpp): candidate `id` without a
  // listing of (desc, direction), unless that listing exists already. The id is parsed back into
  // its candidate (Note [cudnn conv candidates]) and the candidate's plan is built, or loaded
  // from the plan store (Note [saved plans]), into the plan cache, where the call that follows
  // finds it; the plan's AlgoInfo (its workspace exact) is the answer. The listing cache is left
  // alone, so a later fallback, search or `dnnx algos` lists every candidate as before.
  std::optional<AlgoInfo> describe_candidate(const ConvDesc& desc, Direction direction,
                                             const std::string& id) override {
    return describe_alone(desc, direction, id, /*build_plan=*/true);
  }

  // Note [late plans] (src/ops/dispatch.cpp): describe_candidate() without building the plan,
  // whose load from the plan store a late plan its probe rules out never needs; the workspace is
  // the config's (CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE), as a listing gives it. plan() builds it
  // from the candidate kept here when a full run asks for it.
  std::optional<AlgoInfo> describe_unbuilt(const ConvDesc& desc, Direction direction,
                                           const std::string& id) override {
    return describe_alone(desc, direction, id, /*build_plan=*/false);
  }

  // The plan of a candidate describe_unbuilt() kept, without listing desc; else as listed.
  std::shared_ptr<detail::ConvPlan> plan(const ConvDesc& desc, Direction direction,
                                         const std::string& id) override {
    std::shared_ptr<const Candidate> described;
    {
      std::lock_guard lock(records_mutex_);
      if (const auto found = unbuilt_.find({desc, direction, id}); found != unbuilt_.end())
        described = found->second;
    }
    if (!described || is_listed(desc, direction)) return ListedOpBackend::plan(desc, direction, id);
    return plans().get_or_build(desc, direction, id,
                                [&] { return build(desc, direction, *described); });
  }

  // Probe plans are built from the record of their id (Note [cudnn conv candidates]): listing a
  // sliced desc would cost a knob search of 60-100 ms per probe desc. They are kept apart from
  // plan()'s, whose entries carry their listing's AlgoInfo.
  std::shared_ptr<detail::ConvPlan> probe_plan(const ConvDesc& desc, Direction direction,
                                               const std::string& id) override {
    const std::shared_ptr<const Candidate> candidate = recorded(direction, id);
    if (!candidate) return nullptr;  // never listed: nothing says what it would run
    if (candidate->runtime_compiled) return compiled_probe_plan(desc, direction, *candidate);
    std::lock_guard lock(probe_mutex_);
    return probe_plan_locked(desc, direction, *candidate);
  }

  // The engine plans of a search's probes, built on several threads like prepare()'s (a few
  // hundred for ResNet-50's first layer: 0.3-2 ms each).
  void prepare_probes(const ConvDesc& desc, Direction direction,
                      const std::vector<std::string>& ids) override {
    std::vector<Build> to_build;
    std::vector<BackgroundBuilds::Request> compiled;  // Note [probing runtime-compiled candidates]
    const bool first_slice = !std::exchange(this_search.slices_submitted, true);
    {
      std::lock_guard lock(probe_mutex_);
      for (const std::string& id : ids) {
        std::shared_ptr<const Candidate> candidate = recorded(direction, id);
        if (!candidate) continue;
        std::optional<ConvDesc> inner_desc;  // padded, folded: the slice's
        const ConvDesc* build_desc = &desc;
        if (candidate->inner) {
          inner_desc = wrapped_desc(desc, *candidate);
          if (!inner_desc) continue;
          build_desc = &*inner_desc;
          candidate = candidate->inner;
        }
        if (candidate->kind != Candidate::Kind::engine) continue;
        detail::ConvPlanKey key{*build_desc, direction, candidate->info.id};
        if (probe_plans_.count(key) != 0) continue;
        if (candidate->runtime_compiled) {
          // A full plan at hand (loaded from the plan store) does not wait for its slice plan.
          if (first_slice && !search_plan_built(direction, id))
            compiled.push_back({std::move(key), unlisted_info(id), candidate->config});
          continue;
        }
        std::shared_ptr<OperationGraph> graph = probe_graph_locked(*build_desc, direction);
        if (!graph) continue;
        queue(to_build, std::move(key), unlisted_info(candidate->info.id), std::move(graph),
              candidate->config);
      }
    }
    if (!compiled.empty() && Clock::now() < this_search.deadline) {
      background_.submit(compiled, this_search.deadline);
      this_search.slice_desc = desc;
      for (const BackgroundBuilds::Request& request : compiled)
        this_search.slice_ids.insert(request.key.id);
      if (runtime_->verbose()) {
        std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": "
                  << compiled.size() << " runtime-compiled plans compiling for probes\n";
      }
    }
    const auto built = build_in_parallel(to_build, desc, direction);
    std::lock_guard lock(probe_mutex_);
    for (std::size_t i = 0; i < to_build.size(); ++i) {
      // Null: the config cannot run the slice, which probe_plan() reports as null too.
      probe_plans_.emplace(to_build[i].key, built[i]);
    }
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
  // Note [cudnn candidate order]. Runs with ListedOpBackend's lock held.
  std::vector<Candidate> enumerate(const ConvDesc& desc, Direction direction) override {
    const auto start = Clock::now();
    ++listings;
    EngineCandidates engines = engine_candidates(*runtime_, desc, direction);
    const double engines_ms = ms_since(start);
    std::vector<LegacyCandidate> legacy = legacy_candidates(*runtime_, desc, direction);
    if (runtime_->verbose()) {
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": listed "
                << engines.configs.size() + engines.knob_variants.size() << " engine configs ("
                << engines.knob_variants.size() << " knob variants) in " << engines_ms << " ms and "
                << legacy.size() << " legacy algorithms in " << ms_since(start) - engines_ms
                << " ms\n";
    }
    std::vector<Candidate> candidates;
    for (EngineCandidate& config : engines.configs)
      candidates.push_back(engine_candidate(std::move(config), engines.graph));
    for (LegacyCandidate& algorithm : legacy)
      candidates.push_back(legacy_candidate(std::move(algorithm)));
    std::stable_partition(candidates.begin(), candidates.end(), is_supported);
    // dnnx's own kernels: the supported ones right after the last of cuDNN's heuristics' top
    // configs that is not runtime-compiled (those move last, below), in their order, the others
    // last (Note [depthwise candidates], Note [narrow-channel candidates]).
    {
      const auto supported_end =
          std::find_if_not(candidates.begin(), candidates.end(), is_supported);
      const auto last_top = std::find_if(
          std::make_reverse_iterator(supported_end), candidates.rend(), [](const Candidate& c) {
            return c.info.has_note("heuristics_top") && !c.runtime_compiled;
          });
      // No top config (the heuristics offer nothing supported): after every supported one.
      std::ptrdiff_t at =
          (last_top == candidates.rend() ? supported_end : last_top.base()) - candidates.begin();
      for (AlgoInfo& info : kernel_candidates(desc, direction, runtime_->settings().conv_kernels)) {
        if (info.supported) {
          candidates.insert(candidates.begin() + at++, kernel_candidate(std::move(info)));
        } else {
          candidates.push_back(kernel_candidate(std::move(info)));
        }
      }
    }
    // Supported runtime-compiled engines after every other supported candidate, so that the
    // heuristic policy never compiles for seconds where another candidate can run (Note
    // [runtime-compiled engines]).
    std::stable_partition(candidates.begin(),
                          std::find_if_not(candidates.begin(), candidates.end(), is_supported),
                          [](const Candidate& c) { return !c.runtime_compiled; });
    // Each kind below after every other supported candidate: its supported ones end the
    // supported group, its unsupported ones (the entry listed while a kind is off) begin the
    // unsupported one.
    auto after_supported = [&](std::vector<Candidate> more) {
      std::stable_partition(more.begin(), more.end(), is_supported);
      candidates.insert(std::find_if_not(candidates.begin(), candidates.end(), is_supported),
                        std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    };
    // Knob variants (all supported): Note [knob search].
    {
      std::vector<Candidate> variants;
      for (EngineCandidate& variant : engines.knob_variants)
        variants.push_back(engine_candidate(std::move(variant), engines.graph));
      after_supported(std::move(variants));
    }
    // Channel-padded candidates: Note [channel padding].
    if (const std::optional<ConvDesc> padded = channel_padded(desc)) {
      std::vector<Candidate> wrapped;
      for (const Candidate& inner : candidates_locked(*padded, direction)) {
        if (padding_wraps(inner)) wrapped.push_back(padded_candidate(desc, *padded, inner));
      }
      after_supported(std::move(wrapped));
    }
    // Then, each after the one before: matrix products (Note [gemm candidates]), Winograd's
    // products (Note [winograd candidates]), column products (Note [im2col candidates]), tap
    // regions (Note [tap-region candidates]), frames (Note [frame candidates]), folds (Note [fold
    // candidates]).
    after_supported(gemm_candidates(desc, direction));
    after_supported(winograd_candidates(desc, direction));
    after_supported(im2col_candidates(desc, direction));
    after_supported(taps_candidates(desc, direction));
    after_supported(frames_candidates(desc, direction));
    after_supported(fold_candidates(desc, direction));
    for (std::size_t i = 0; i < candidates.size(); ++i)
      candidates[i].info.priority = static_cast<int>(i);
    record(direction, candidates);
    return candidates;
  }

  // Note [fold candidates]: for each fold of desc, the wrapped candidates of its convolution
  // (listed here, which lists that convolution), in its order (the first stacked_inner_max of a
  // stacked fold); the one unsupported entry of each setting that keeps some out; nothing for a
  // convolution that folds into none.
  std::vector<Candidate> fold_candidates(const ConvDesc& desc, Direction direction) {
    const bool frames_listed = frames_listed_for(desc);
    std::vector<Candidate> out;
    bool folds_off = false;
    for (const ConvFold& fold : conv_folds(desc)) {
      if (std::string off = fold_off_reason(desc, fold.kind); !off.empty()) {
        // One entry for the planes and frames (one setting), one for the stacked fold.
        if (fold.kind == FoldKind::stacked || fold.kind == FoldKind::phases ||
            !std::exchange(folds_off, true))
          out.push_back(folds_off_candidate(fold.kind, std::move(off)));
        continue;
      }
      std::size_t wrapped = 0;
      for (const Candidate& inner : candidates_locked(fold.folded, direction)) {
        if ((fold.kind == FoldKind::stacked || fold.kind == FoldKind::phases) &&
            wrapped == stacked_inner_max)
          break;
        if (!folds_wrap(fold, inner, frames_listed)) continue;
        out.push_back(fold_candidate(desc, fold, inner));
        // The fold of the folded convolution's first candidate (its heuristics' pick) is timed
        // early by a search (Note [scout candidates] in src/tune/select.cpp).
        if (wrapped == 0) out.back().info.notes.push_back("scout");
        ++wrapped;
      }
    }
    return out;
  }

  // Whether DNNX_CUDNN_CONV_FRAMES lists frame candidates for desc's dtype (Note [frame
  // candidates]).
  bool frames_listed_for(const ConvDesc& desc) const {
    return listed_for(runtime_->settings().conv_frames, desc.dtype);
  }

  // Why DNNX_CUDNN_CONV_FOLDS (planes, frames), DNNX_CUDNN_CONV_STACKED or
  // DNNX_CUDNN_CONV_PHASES lists no fold of `kind` for desc's dtype; empty where it does.
  std::string fold_off_reason(const ConvDesc& desc, FoldKind kind) const {
    if (kind == FoldKind::phases) {
      return not_listed_reason(runtime_->settings().conv_phases, Settings{}.conv_phases,
                               phases_variable, "phase folds", desc.dtype);
    }
    if (kind == FoldKind::stacked) {
      return not_listed_reason(runtime_->settings().conv_stacked, Settings{}.conv_stacked,
                               stacked_variable, "stacked folds", desc.dtype);
    }
    return not_listed_reason(runtime_->settings().conv_folds, Settings{}.conv_folds, folds_variable,
                             "fold candidates", desc.dtype);
  }

  // The fold candidate `inner_id` of fold `kind` for desc, as fold_candidates() lists it, or
  // nullopt.
  std::optional<Candidate> unlisted_fold(const ConvDesc& desc, Direction direction,
                                         const FoldInnerId& id) {
    const std::optional<ConvFold> fold = conv_fold(desc, id.kind);
    if (!fold || !fold_off_reason(desc, id.kind).empty()) return std::nullopt;
    const std::optional<Candidate> inner = unlisted_candidate(fold->folded, direction, id.inner);
    if (!inner || !folds_wrap(*fold, *inner, frames_listed_for(desc))) return std::nullopt;
    return fold_candidate(desc, *fold, *inner);
  }

  // Note [gemm candidates]: the matmul backend's first supported candidates for the product the
  // convolution is, then those of its packed form where it has one (Note [packed gemm]), or the
  // one unsupported entry while they are off; nothing for a convolution that is no product.
  std::vector<Candidate> gemm_candidates(const ConvDesc& desc, Direction direction) {
    std::string why;
    const std::optional<GemmForm> form = gemm_form(desc, direction, why);
    if (!form) return {};
    if (!runtime_->settings().conv_gemm) return {gemm_off_candidate()};
    std::vector<Candidate> out;
    const std::optional<GemmForm> packed = gemm_form(desc, direction, why, true);
    for (const GemmForm* f : {&*form, packed ? &*packed : nullptr}) {
      if (f == nullptr) continue;
      for (const AlgoInfo& inner : first_products(*f)) out.push_back(gemm_candidate(inner, *f));
    }
    return out;
  }

  // The matmul backend's first gemm_candidates_max supported candidates for form's product, and
  // up to gemm_variants_max of its split-K variants whose seeds are among them (Note [split-K
  // variants] in matmul.cpp: the matmul lists them after its other candidates).
  std::vector<AlgoInfo> first_products(const GemmForm& form) {
    return first_products(form.desc, form.direction);
  }
  std::vector<AlgoInfo> first_products(const MatmulDesc& product, Direction direction) {
    std::vector<AlgoInfo> out;
    std::set<std::string> taken;
    std::size_t variants = 0;
    for (const AlgoInfo& inner : matmul().list(product, direction)) {
      if (!inner.supported) continue;
      if (inner.variant_of.empty()) {
        if (taken.size() == gemm_candidates_max) continue;
        taken.insert(inner.id);
      } else {
        if (variants == gemm_variants_max || taken.count(inner.variant_of) == 0) continue;
        ++variants;
      }
      out.push_back(inner);
    }
    return out;
  }

  // Note [im2col candidates]: the matmul backend's first supported candidates for the product of
  // the column matrix, then those of its packed form where it has one; the one unsupported entry
  // while they are off for desc's dtype or the column matrix is over its cap; nothing for a
  // grouped convolution or one that is a product itself.
  std::vector<Candidate> im2col_candidates(const ConvDesc& desc, Direction direction) {
    std::string why;
    if (desc.groups != 1 || gemm_form(desc, direction, why)) return {};
    if (std::string off = im2col_off_reason(desc); !off.empty())
      return {im2col_unsupported_candidate(std::move(off))};
    const std::optional<Im2colForm> form = im2col_form(desc, direction, why);
    if (!form) return {im2col_unsupported_candidate(why)};
    std::vector<Candidate> out;
    const std::optional<Im2colForm> packed = im2col_form(desc, direction, why, true);
    for (const Im2colForm* f : {&*form, packed ? &*packed : nullptr}) {
      if (f == nullptr) continue;
      for (const AlgoInfo& inner : first_products(f->gemm))
        out.push_back(im2col_candidate(inner, *f));
    }
    return out;
  }

  // Note [winograd candidates]: the matmul backend's first supported candidates for the product
  // of the transformed tensors, or the one unsupported entry saying why there are none.
  std::vector<Candidate> winograd_candidates(const ConvDesc& desc, Direction direction) {
    if (!runtime_->settings().conv_winograd) {
      return {winograd_unsupported_candidate(
          detail::cat("turned off by ", winograd_variable,
                      "=0; unset or 1 lists them for fp32 3x3 convolutions of stride 1 (Note "
                      "[winograd candidates])"))};
    }
    std::string why;
    const std::optional<WinogradForm> form = winograd_form(desc, direction, why);
    if (!form) return {winograd_unsupported_candidate(why)};
    std::vector<Candidate> out;
    for (const AlgoInfo& inner : first_products(form->product, Direction::fwd))
      out.push_back(winograd_candidate(inner, *form));
    if (out.empty()) {
      out.push_back(winograd_unsupported_candidate(
          "the matmul backend has no supported candidate for the 36 products"));
    }
    return out;
  }

  // Note [tap-region candidates]: taps_entries() as candidates.
  std::vector<Candidate> taps_candidates(const ConvDesc& desc, Direction direction) {
    std::vector<Candidate> out;
    for (TapsEntry& entry : taps_entries(runtime_, desc, direction))
      out.push_back(taps_candidate(std::move(entry)));
    return out;
  }

  // Note [frame candidates]: frames_entries() as candidates (every supported one before the entry
  // saying why there is none).
  std::vector<Candidate> frames_candidates(const ConvDesc& desc, Direction direction) {
    std::vector<Candidate> out;
    for (FramesEntry& entry : frames_entries(runtime_, desc, direction))
      out.push_back(frames_candidate(std::move(entry)));
    return out;
  }

  // Why DNNX_CUDNN_CONV_IM2COL lists no im2col candidate for desc's dtype; empty where it does.
  std::string im2col_off_reason(const ConvDesc& desc) const {
    return not_listed_reason(runtime_->settings().conv_im2col, Settings{}.conv_im2col,
                             im2col_variable, "im2col candidates", desc.dtype);
  }

  // The matmul backend the gemm candidates run on (this backend's own instance, on its runtime).
  detail::OpBackendOf<OpKind::matmul>& matmul() {
    std::call_once(matmul_once_,
                   [this] { matmul_ = make_matmul_backend(runtime_, detail::OpBackends{}); });
    return *matmul_;
  }

  // describe_candidate() (`build_plan`: the plan built or loaded into the plan cache, its
  // AlgoInfo the answer) and describe_unbuilt() (the candidate kept for plan(), its listed
  // AlgoInfo the answer).
  std::optional<AlgoInfo> describe_alone(const ConvDesc& desc, Direction direction,
                                         const std::string& id, bool build_plan) {
    check_direction(desc, direction);
    desc.validate();
    if (is_listed(desc, direction)) return ListedOpBackend::describe_candidate(desc, direction, id);
    if (const std::shared_ptr<detail::ConvPlan> built = plans().find(desc, direction, id))
      return built->algo();
    const auto start = Clock::now();
    ++descriptions;
    std::optional<Candidate> candidate = unlisted_candidate(desc, direction, id);
    if (!candidate || !candidate->info.supported) {
      if (runtime_->verbose()) {
        std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": " << id
                  << (candidate ? " is unsupported here (" + candidate->info.reason + ")"
                                : std::string(" is not a candidate here"))
                  << "\n";
      }
      if (!candidate) return std::nullopt;
      return candidate->info;
    }
    // Kept like a listed one, so that probes (the settling of late plans in a process that
    // lists nothing) find it (Note [cudnn conv candidates]).
    record(direction, {*candidate});
    AlgoInfo info = candidate->info;
    if (build_plan) {
      info =
          plans()
              .get_or_build(desc, direction, id, [&] { return build(desc, direction, *candidate); })
              ->algo();
    } else {
      std::lock_guard lock(records_mutex_);
      unbuilt_.insert_or_assign(detail::ConvPlanKey{desc, direction, id},
                                std::make_shared<const Candidate>(std::move(*candidate)));
    }
    if (runtime_->verbose()) {
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": described "
                << id
                << (build_plan ? " and built its plan without listing"
                               : " without listing or building its plan")
                << ", in " << ms_since(start) << " ms\n";
    }
    return info;
  }

  // Note [cudnn conv candidates]: the candidate enumerate() lists as `id` for (desc, direction),
  // made from the id alone (supported or not, as listed), or nullopt where the listing has no
  // such id. Each kind's own code turns ids back into what they were made from.
  std::optional<Candidate> unlisted_candidate(const ConvDesc& desc, Direction direction,
                                              const std::string& id) {
    if (const std::optional<std::string> inner_id = padded_inner_id(id)) {
      const std::optional<ConvDesc> padded = channel_padded(desc);
      if (!padded) return std::nullopt;
      const std::optional<Candidate> inner = unlisted_candidate(*padded, direction, *inner_id);
      // What enumerate() wraps.
      if (!inner || !padding_wraps(*inner)) return std::nullopt;
      return padded_candidate(desc, *padded, *inner);
    }
    if (const std::optional<FoldInnerId> fold_id = fold_inner_id(id))
      return unlisted_fold(desc, direction, *fold_id);
    if (id == folds_off_id || id == stacked_off_id || id == phases_off_id) {
      // What fold_candidates() lists, for this id alone: the entry of the setting that keeps
      // out some fold of desc it governs.
      auto governs = [&](FoldKind kind) {
        if (kind == FoldKind::stacked) return id == stacked_off_id;
        if (kind == FoldKind::phases) return id == phases_off_id;
        return id == folds_off_id;
      };
      for (const ConvFold& fold : conv_folds(desc)) {
        if (!governs(fold.kind)) continue;
        std::string off = fold_off_reason(desc, fold.kind);
        if (off.empty()) return std::nullopt;
        return folds_off_candidate(fold.kind, std::move(off));
      }
      return std::nullopt;
    }
    if (is_kernel_id(id)) {
      for (AlgoInfo& info : kernel_candidates(desc, direction, runtime_->settings().conv_kernels)) {
        if (info.id == id) return kernel_candidate(std::move(info));
      }
      return std::nullopt;
    }
    if (id == gemm_off_id || gemm_inner_id(id)) {
      std::string why;
      if (!gemm_form(desc, direction, why)) return std::nullopt;
      if (!runtime_->settings().conv_gemm)
        return id == gemm_off_id ? std::optional(gemm_off_candidate()) : std::nullopt;
      const std::optional<GemmInnerId> inner_id = gemm_inner_id(id);
      if (!inner_id) return std::nullopt;
      const std::optional<GemmForm> form = gemm_form(desc, direction, why, inner_id->packed);
      if (!form) return std::nullopt;
      const std::optional<AlgoInfo> inner =
          matmul().describe_candidate(form->desc, form->direction, inner_id->matmul_id);
      if (!inner || !inner->supported) return std::nullopt;
      return gemm_candidate(*inner, *form);
    }
    if (id == im2col_off_id || im2col_inner_id(id)) {
      // What im2col_candidates() lists, for this id alone.
      std::string why;
      if (desc.groups != 1 || gemm_form(desc, direction, why)) return std::nullopt;
      if (std::string off = im2col_off_reason(desc); !off.empty()) {
        return id == im2col_off_id ? std::optional(im2col_unsupported_candidate(std::move(off)))
                                   : std::nullopt;
      }
      const std::optional<Im2colForm> full = im2col_form(desc, direction, why);
      if (!full)
        return id == im2col_off_id ? std::optional(im2col_unsupported_candidate(why))
                                   : std::nullopt;
      const std::optional<GemmInnerId> inner_id = im2col_inner_id(id);
      if (!inner_id) return std::nullopt;
      const std::optional<Im2colForm> form = im2col_form(desc, direction, why, inner_id->packed);
      if (!form) return std::nullopt;
      const std::optional<AlgoInfo> inner =
          matmul().describe_candidate(form->gemm.desc, form->gemm.direction, inner_id->matmul_id);
      if (!inner || !inner->supported) return std::nullopt;
      return im2col_candidate(*inner, *form);
    }
    if (id == winograd_off_id || winograd_inner_id(id)) {
      // What winograd_candidates() lists, for this id alone.
      const std::optional<std::string> inner_id = winograd_inner_id(id);
      std::string why;
      const std::optional<WinogradForm> form =
          runtime_->settings().conv_winograd ? winograd_form(desc, direction, why) : std::nullopt;
      if (!inner_id) {
        std::vector<Candidate> listed = winograd_candidates(desc, direction);
        if (listed.front().info.id != winograd_off_id) return std::nullopt;
        return std::move(listed.front());
      }
      if (!form) return std::nullopt;
      const std::optional<AlgoInfo> inner =
          matmul().describe_candidate(form->product, Direction::fwd, *inner_id);
      if (!inner || !inner->supported) return std::nullopt;
      return winograd_candidate(*inner, *form);
    }
    if (is_taps_id(id)) {
      // What taps_candidates() lists, for this id alone (a few cuDNN queries per region).
      for (Candidate& candidate : taps_candidates(desc, direction)) {
        if (candidate.info.id == id) return std::move(candidate);
      }
      return std::nullopt;
    }
    if (is_frames_id(id)) {
      // What frames_candidates() lists, for this id alone (a few cuDNN queries per algorithm).
      for (Candidate& candidate : frames_candidates(desc, direction)) {
        if (candidate.info.id == id) return std::move(candidate);
      }
      return std::nullopt;
    }
    if (std::optional<LegacyCandidate> legacy = legacy_candidate_of(*runtime_, desc, direction, id))
      return legacy_candidate(std::move(*legacy));
    std::shared_ptr<OperationGraph> graph;
    if (std::optional<EngineCandidate> engine =
            engine_candidate_of(*runtime_, desc, direction, id, graph))
      return engine_candidate(std::move(*engine), std::move(graph));
    return std::nullopt;
  }

  std::shared_ptr<detail::ConvPlan> build(const ConvDesc& desc, Direction direction,
                                          const Candidate& candidate) override {
    switch (candidate.kind) {
      case Candidate::Kind::engine:
        if (candidate.runtime_compiled) return runtime_compiled_plan(desc, direction, candidate);
        if (std::shared_ptr<detail::ConvPlan> saved =
                saved_plan({desc, direction, candidate.info.id}, candidate.info))
          return saved;
        return make_engine_plan(runtime_, candidate.graph, desc, direction, candidate.info,
                                candidate.config);
      case Candidate::Kind::legacy:
        return make_legacy_plan(runtime_, desc, direction, candidate.info, candidate.legacy);
      case Candidate::Kind::padded:
      case Candidate::Kind::folded: {
        if (!candidate.inner) {
          detail::raise(ErrorKind::Unsupported, candidate.info.reason,
                        conv_context(desc, direction, candidate.info.id));
        }
        // The inner plan is the inner desc's own (plan() of it serves the same one).
        const Candidate& inner = *candidate.inner;
        std::shared_ptr<detail::ConvPlan> inner_plan =
            plans().get_or_build(candidate.inner_desc, direction, inner.info.id,
                                 [&] { return build(candidate.inner_desc, direction, inner); });
        return wrapped_plan(desc, direction, candidate, std::move(inner_plan));
      }
      case Candidate::Kind::kernel: return kernel_plan(runtime_, desc, direction, candidate.info);
      case Candidate::Kind::gemm: return gemm_plan(desc, direction, candidate);
      case Candidate::Kind::im2col: return im2col_plan(desc, direction, candidate);
      case Candidate::Kind::winograd: return winograd_plan(desc, direction, candidate);
      case Candidate::Kind::taps:
        // build() gets the candidate listed (or described alone) for desc: its listing's plan.
        if (candidate.listed_plan) return candidate.listed_plan;
        return taps_plan(desc, direction, candidate);
      case Candidate::Kind::frames:
        if (candidate.listed_plan) return candidate.listed_plan;
        return frames_plan(desc, direction, candidate);
    }
    return nullptr;
  }

  // The desc whose plan a padded or folded candidate wraps for desc (desc itself or a slice of
  // it): channel_padded(desc) or its fold; nullopt where desc has none.
  static std::optional<ConvDesc> wrapped_desc(const ConvDesc& desc, const Candidate& candidate) {
    if (candidate.kind == Candidate::Kind::padded) return channel_padded(desc);
    if (candidate.kind == Candidate::Kind::folded && candidate.fold) {
      if (std::optional<ConvFold> fold = conv_fold(desc, *candidate.fold)) return fold->folded;
    }
    return std::nullopt;
  }

  // The plan of a padded or folded candidate for desc around `inner`, a plan of
  // wrapped_desc(desc, candidate).
  std::shared_ptr<detail::ConvPlan> wrapped_plan(const ConvDesc& desc, Direction direction,
                                                 const Candidate& candidate,
                                                 std::shared_ptr<detail::ConvPlan> inner) {
    if (candidate.kind == Candidate::Kind::folded) {
      const std::optional<ConvFold> fold =
          candidate.fold ? conv_fold(desc, *candidate.fold) : std::nullopt;
      if (!fold) {
        detail::raise(ErrorKind::Unsupported, "the convolution has no such fold",
                      conv_context(desc, direction, candidate.info.id));
      }
      return make_fold_plan(runtime_, desc, *fold, direction, std::move(inner));
    }
    const std::optional<ConvDesc> padded = channel_padded(desc);
    if (!padded) {
      detail::raise(ErrorKind::Unsupported, "the convolution has no channel-padded form",
                    conv_context(desc, direction, candidate.info.id));
    }
    return make_padded_plan(runtime_, desc, *padded, direction, std::move(inner));
  }

  // Note [gemm candidates]: the matmul backend's plan of the candidate, on views of the conv's
  // tensors.
  std::shared_ptr<detail::ConvPlan> gemm_plan(const ConvDesc& desc, Direction direction,
                                              const Candidate& candidate) {
    std::string why;
    const std::optional<GemmForm> form = gemm_form(desc, direction, why, candidate.gemm_packed);
    if (!form || candidate.matmul_id.empty()) {
      detail::raise(ErrorKind::Unsupported,
                    candidate.matmul_id.empty() ? candidate.info.reason : why,
                    conv_context(desc, direction, candidate.info.id));
    }
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner =
        matmul().plan(form->desc, form->direction, candidate.matmul_id);
    return make_gemm_plan(runtime_, desc, direction, *form, std::move(inner));
  }

  // Note [im2col candidates]: the matmul backend's plan of the candidate's product, run on the
  // column matrix.
  std::shared_ptr<detail::ConvPlan> im2col_plan(const ConvDesc& desc, Direction direction,
                                                const Candidate& candidate) {
    std::string why;
    std::optional<Im2colForm> form = candidate.matmul_id.empty()
                                         ? std::nullopt
                                         : im2col_form(desc, direction, why, candidate.gemm_packed);
    if (!form) {
      detail::raise(ErrorKind::Unsupported,
                    candidate.matmul_id.empty() ? candidate.info.reason : why,
                    conv_context(desc, direction, candidate.info.id));
    }
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product =
        matmul().plan(form->gemm.desc, form->gemm.direction, candidate.matmul_id);
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating;
    if (direction == Direction::bwd_weights && form->passes > 1) {
      accumulating =
          matmul().plan(form->accumulating.desc, form->accumulating.direction, candidate.matmul_id);
    }
    return make_im2col_plan(runtime_, desc, direction, std::move(*form), std::move(product),
                            std::move(accumulating));
  }

  // Note [winograd candidates]: the matmul backend's plan of the candidate's product, run
  // between the transforms.
  std::shared_ptr<detail::ConvPlan> winograd_plan(const ConvDesc& desc, Direction direction,
                                                  const Candidate& candidate) {
    std::string why;
    std::optional<WinogradForm> form =
        candidate.matmul_id.empty() ? std::nullopt : winograd_form(desc, direction, why);
    if (!form) {
      detail::raise(ErrorKind::Unsupported,
                    candidate.matmul_id.empty() ? candidate.info.reason : why,
                    conv_context(desc, direction, candidate.info.id));
    }
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product =
        matmul().plan(form->product, Direction::fwd, candidate.matmul_id);
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating;
    if (direction == Direction::bwd_weights && form->passes > 1)
      accumulating = matmul().plan(form->accumulating, Direction::fwd, candidate.matmul_id);
    return make_winograd_plan(runtime_, desc, direction, std::move(*form), std::move(product),
                              std::move(accumulating));
  }

  // Note [tap-region candidates]
  std::shared_ptr<detail::ConvPlan> taps_plan(const ConvDesc& desc, Direction direction,
                                              const Candidate& candidate) {
    if (!candidate.taps) {
      detail::raise(ErrorKind::Unsupported, candidate.info.reason,
                    conv_context(desc, direction, candidate.info.id));
    }
    return make_taps_plan(runtime_, desc, direction, *candidate.taps);
  }

  // Note [frame candidates]
  std::shared_ptr<detail::ConvPlan> frames_plan(const ConvDesc& desc, Direction direction,
                                                const Candidate& candidate) {
    if (!candidate.frames_algorithm) {
      detail::raise(ErrorKind::Unsupported, candidate.info.reason,
                    conv_context(desc, direction, candidate.info.id));
    }
    return make_frames_plan(runtime_, desc, direction, *candidate.frames_algorithm);
  }

  // Note [runtime-compiled engines]: their plans are compiled on background threads (after those
  // of the plan store are loaded), in the order given (heuristics' ranks first), until `start`
  // plus the compile budget.
  void start_compiles(const ConvDesc& desc, Direction direction,
                      const std::vector<BackgroundBuilds::Request>& requests,
                      Clock::time_point start) {
    std::vector<BackgroundBuilds::Request> to_compile;
    for (const BackgroundBuilds::Request& request : requests) {
      if (std::shared_ptr<detail::ConvPlan> saved = saved_plan(request.key, request.info)) {
        plans().get_or_build(request.key.desc, direction, request.key.id, [&] { return saved; });
        continue;
      }
      to_compile.push_back(request);
    }
    const auto budget = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(runtime_->settings().compile_budget_s));
    // Note [probing runtime-compiled candidates]
    this_search = {start + budget, desc, direction, false, {}, {}};
    background_.submit(to_compile, start + budget);
    std::vector<std::string> ids;
    for (const BackgroundBuilds::Request& request : to_compile) ids.push_back(request.key.id);
    if (runtime_->verbose() && !requests.empty()) {
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": "
                << requests.size() - to_compile.size() << " runtime-compiled plans loaded, "
                << to_compile.size() << " compiling on " << background_.threads()
                << " background threads for up to " << runtime_->settings().compile_budget_s
                << " s\n";
    }
    std::lock_guard lock(compile_mutex_);
    compiling_[detail::ConvKey{desc, direction}] = std::move(ids);
  }

  // The plan of a runtime-compiled candidate needed now: from a background build, the plan
  // store, or compiled here.
  std::shared_ptr<detail::ConvPlan> runtime_compiled_plan(const ConvDesc& desc, Direction direction,
                                                          const Candidate& candidate) {
    const detail::ConvPlanKey key{desc, direction, candidate.info.id};
    const ErrorContext context = conv_context(desc, direction, candidate.info.id);
    {
      std::lock_guard lock(compile_mutex_);
      if (const auto failed = failed_compiles_.find(key); failed != failed_compiles_.end()) {
        const std::string error = failed->second;
        failed_compiles_.erase(failed);
        detail::raise(ErrorKind::BackendFailure, "building the plan failed: " + error, context);
      }
    }
    BackgroundBuilds::Outcome outcome = background_.take(key);
    if (outcome.state == BackgroundBuilds::State::ready) return outcome.plan;
    if (outcome.state == BackgroundBuilds::State::failed)
      detail::raise(ErrorKind::BackendFailure, "building the plan failed: " + outcome.error,
                    context);
    if (std::shared_ptr<detail::ConvPlan> saved = saved_plan(key, candidate.info)) return saved;
    return make_engine_plan(runtime_, candidate.graph, desc, direction, candidate.info,
                            candidate.config);
  }

  // Note [saved plans]: the plan of `key` from the plan store, or null. A saved plan that is not
  // a whole file of its key or that cuDNN cannot load is dropped with a warning.
  std::shared_ptr<detail::ConvPlan> saved_plan(const detail::ConvPlanKey& plan_key,
                                               const AlgoInfo& info) {
    if (!store_.enabled()) return nullptr;
    const std::string key =
        saved_plan_key(runtime_->facts(), plan_key.desc, plan_key.direction, plan_key.id);
    std::string problem;
    const std::optional<std::string> json = store_.load(key, &problem);
    if (!problem.empty()) std::cerr << "dnnx: cudnn: " << problem << "; building the plan again\n";
    if (!json) return nullptr;
    try {
      std::shared_ptr<detail::ConvPlan> plan =
          load_engine_plan(runtime_, plan_key.desc, plan_key.direction, info, *json);
      std::lock_guard lock(compile_mutex_);
      stored_.insert(key);
      return plan;
    } catch (const Error& error) {
      store_.remove(key);
      std::cerr << "dnnx: cudnn: saved plan " << store_.path_of(key)
                << " dropped: cuDNN cannot load it (" << error.message()
                << "); building the plan again\n";
      return nullptr;
    }
  }

  // Note [cudnn conv candidates]: the supported candidates of a listing, by id. An id listed
  // before keeps its first record (every record of an id names the same config).
  void record(Direction direction, const std::vector<Candidate>& candidates) {
    std::lock_guard lock(records_mutex_);
    auto& by_id = records_[static_cast<std::size_t>(direction)];
    for (const Candidate& candidate : candidates) {
      if (!candidate.info.supported || by_id.count(candidate.info.id) != 0) continue;
      auto kept = std::make_shared<Candidate>(candidate);
      kept->listed_plan = nullptr;  // of the listed desc only; a record serves every desc
      by_id.emplace(candidate.info.id, std::move(kept));
    }
  }

  // The record of `id` for `direction`; null when no listing had it supported.
  std::shared_ptr<const Candidate> recorded(Direction direction, const std::string& id) {
    std::lock_guard lock(records_mutex_);
    const auto& by_id = records_[static_cast<std::size_t>(direction)];
    const auto found = by_id.find(id);
    return found == by_id.end() ? nullptr : found->second;
  }

  // Note [probing runtime-compiled candidates]: whether the full plan of `id` for the searching
  // thread's search is built (in the plan cache, or by a builder).
  bool search_plan_built(Direction direction, const std::string& id) {
    return this_search.direction == direction &&
           (plans().find(this_search.desc, direction, id) != nullptr ||
            background_.built(detail::ConvPlanKey{this_search.desc, direction, id}));
  }

  // Note [probing runtime-compiled candidates]: whether the searching thread's search queued the
  // plan of `id` for `desc`, its smallest slice.
  bool slice_plan_queued_here(const ConvDesc& desc, Direction direction, const std::string& id) {
    return this_search.direction == direction && this_search.slice_ids.count(id) != 0 &&
           this_search.slice_desc == desc;
  }

  // Note [probing runtime-compiled candidates]: the slice plan prepare_probes() queued for this
  // search, waited for until the search's compile deadline; another search's, only when it is
  // built already while the full plan is at hand; null when it is not built by then (the full
  // run decides), failed, or was never queued (a larger slice).
  std::shared_ptr<detail::ConvPlan> compiled_probe_plan(const ConvDesc& desc, Direction direction,
                                                        const Candidate& candidate) {
    const std::string& id = candidate.info.id;
    const detail::ConvPlanKey key{desc, direction, id};
    {
      std::lock_guard lock(probe_mutex_);
      if (auto found = probe_plans_.find(key); found != probe_plans_.end()) return found->second;
    }
    // Waited for only within its search's compile budget (after it, the settling of late plans
    // on the same thread finds this_search unchanged).
    const bool queued_here =
        slice_plan_queued_here(desc, direction, id) && Clock::now() < this_search.deadline;
    if (!queued_here && !background_.built(key)) {
      // A slice plan saved by the process that skipped this candidate (probe_pending()).
      if (std::shared_ptr<detail::ConvPlan> saved = saved_plan(key, unlisted_info(id))) {
        std::lock_guard lock(probe_mutex_);
        probe_plans_.emplace(key, saved);
        return saved;
      }
      // Not this search's slice plan: taken only if built already while the full plan is at hand.
      const bool full_at_hand =
          this_search.direction != direction || search_plan_built(direction, id);
      if (full_at_hand) return nullptr;
    }
    const Clock::time_point asked = Clock::now();
    BackgroundBuilds::Outcome outcome = background_.await(key);
    if (runtime_->verbose() && queued_here) {
      std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": slice plan of "
                << id << ' '
                << (outcome.state == BackgroundBuilds::State::ready    ? "ready"
                    : outcome.state == BackgroundBuilds::State::failed ? "failed"
                                                                       : "not built in time")
                << " after a wait of " << ms_since(asked) << " ms\n";
    }
    if (outcome.state != BackgroundBuilds::State::ready &&
        outcome.state != BackgroundBuilds::State::failed)
      return nullptr;  // a build still running stays for a later search's probe
    std::lock_guard lock(probe_mutex_);
    probe_plans_.emplace(key, outcome.plan);  // null when it failed: this config cannot run it
    return outcome.plan;
  }

  // Note [probing runtime-compiled candidates]: a runtime-compiled candidate whose slice plan is
  // still compiling (or was still queued at the compile deadline: queued again, with a budget of
  // its own) is skipped rather than run in full; the full plan is not at hand for the settling of
  // late plans until that slice plan is built (plan_at_hand()).
  std::string probe_pending(const ConvDesc& desc, Direction direction,
                            const std::string& id) override {
    // Without the plan store no late plan is kept (keep_late_plan()): the full run decides.
    if (!store_.enabled()) return {};
    const std::shared_ptr<const Candidate> candidate = recorded(direction, id);
    if (!candidate || !candidate->runtime_compiled) return {};
    const detail::ConvPlanKey key{desc, direction, id};
    {
      std::lock_guard lock(probe_mutex_);
      if (probe_plans_.count(key) != 0) return {};  // its build failed: the full run decides
    }
    const double budget_s = runtime_->settings().compile_budget_s;
    if (slice_plan_queued_here(desc, direction, id)) {
      if (!background_.building(key)) {
        // Nothing of it is building, so this returns at once: built since, failed, or cancelled
        // while still queued at the deadline (then queued again).
        const BackgroundBuilds::Outcome outcome = background_.await(key);
        if (outcome.state == BackgroundBuilds::State::ready ||
            outcome.state == BackgroundBuilds::State::failed) {
          std::lock_guard lock(probe_mutex_);
          probe_plans_.emplace(key, outcome.plan);  // null when it failed: this config cannot
          return {};                                // run the slice, the full run decides
        }
        background_.submit({{key, unlisted_info(id), candidate->config}},
                           Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(budget_s)));
      }
      keep_slice_plan(key);  // while it compiles; a queued one from plan_at_hand()
      std::lock_guard lock(compile_mutex_);
      unprobed_[detail::ConvPlanKey{this_search.desc, direction, id}] = key;
    } else {
      // Another probe of a candidate skipped so (the settling of other late plans): still
      // waiting while that slice plan builds. Any other plan (a larger slice) is not waited for.
      bool skipped_before = false;
      {
        std::lock_guard lock(compile_mutex_);
        for (const auto& [full, slice] : unprobed_) skipped_before |= slice == key;
      }
      if (!skipped_before || !background_.building(key)) return {};
    }
    return detail::cat(
        "runtime-compiled, and its plan for a slice of the problem (", desc,
        ") was not compiled within the compile budget (", budget_s,
        " s): without a run on a slice, its full run could take seconds where this search has "
        "seen slow candidates; it goes on compiling, and the candidate is timed as a late plan "
        "once that plan is built");
  }

  std::shared_ptr<detail::ConvPlan> probe_plan_locked(const ConvDesc& desc, Direction direction,
                                                      const Candidate& candidate) {
    detail::ConvPlanKey key{desc, direction, candidate.info.id};
    if (auto found = probe_plans_.find(key); found != probe_plans_.end()) return found->second;
    std::shared_ptr<detail::ConvPlan> plan;
    try {
      switch (candidate.kind) {
        case Candidate::Kind::padded:
        case Candidate::Kind::folded:
          if (const std::optional<ConvDesc> inner_desc = wrapped_desc(desc, candidate)) {
            if (auto inner = probe_plan_locked(*inner_desc, direction, *candidate.inner))
              plan = wrapped_plan(desc, direction, candidate, std::move(inner));
          }
          break;
        case Candidate::Kind::legacy:
          plan = make_legacy_plan(runtime_, desc, direction, unlisted_info(candidate.info.id),
                                  candidate.legacy);
          break;
        case Candidate::Kind::kernel:
          plan = kernel_plan(runtime_, desc, direction, unlisted_info(candidate.info.id));
          break;
        case Candidate::Kind::gemm:  // the slice's product, if the matmul lists this id for it
          plan = gemm_plan(desc, direction, candidate);
          break;
        case Candidate::Kind::im2col: plan = im2col_plan(desc, direction, candidate); break;
        case Candidate::Kind::winograd: plan = winograd_plan(desc, direction, candidate); break;
        case Candidate::Kind::taps: plan = taps_plan(desc, direction, candidate); break;
        case Candidate::Kind::frames: plan = frames_plan(desc, direction, candidate); break;
        case Candidate::Kind::engine:
          if (auto graph = probe_graph_locked(desc, direction))
            plan = make_engine_plan(runtime_, std::move(graph), desc, direction,
                                    unlisted_info(candidate.info.id), candidate.config);
          break;
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

  // What a probe plan, built without a listing of its desc, knows about itself.
  static AlgoInfo unlisted_info(const std::string& id) {
    AlgoInfo info;
    info.id = id;
    info.name = id;
    info.supported = true;
    return info;
  }

  // An engine plan to build on one of several threads (Note [parallel plan builds]).
  struct Build {
    detail::ConvPlanKey key;
    AlgoInfo info;
    std::shared_ptr<OperationGraph> graph;
    ConfigKey config;
  };

  static void queue(std::vector<Build>& to_build, detail::ConvPlanKey key, AlgoInfo info,
                    std::shared_ptr<OperationGraph> graph, const ConfigKey& config) {
    const bool queued = std::any_of(to_build.begin(), to_build.end(),
                                    [&](const Build& build) { return build.key == key; });
    if (!queued) to_build.push_back({std::move(key), std::move(info), std::move(graph), config});
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
          built[i] = make_engine_plan(runtime_, build.graph, build.key.desc, direction, build.info,
                                      build.config);
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

  std::shared_ptr<Runtime> runtime_;
  // Lock order: ListedOpBackend's lock (held in enumerate) or probe_mutex_, then records_mutex_.
  std::mutex records_mutex_;  // guards records_ and unbuilt_
  std::array<std::unordered_map<std::string, std::shared_ptr<const Candidate>>, direction_count>
      records_;
  // describe_unbuilt()'s candidates, whose plans plan() builds without a listing.
  std::unordered_map<detail::ConvPlanKey, std::shared_ptr<const Candidate>, detail::ConvKeyHash>
      unbuilt_;
  // Note [probing slow candidates]: plans for probes, and the graphs they were built from.
  std::mutex probe_mutex_;  // guards probe_plans_ and probe_graphs_
  std::unordered_map<detail::ConvPlanKey, std::shared_ptr<detail::ConvPlan>, detail::ConvKeyHash>
      probe_plans_;
  std::unordered_map<detail::ConvKey, std::shared_ptr<OperationGraph>, detail::ConvKeyHash>
      probe_graphs_;
  // Note [runtime-compiled engines] and Note [saved plans].
  BackgroundBuilds background_;
  tune::PlanStore store_;
  std::once_flag matmul_once_;  // Note [gemm candidates]: matmul_ made on first use
  std::unique_ptr<detail::OpBackendOf<OpKind::matmul>> matmul_;
  std::mutex compile_mutex_;  // guards the four below
  std::unordered_map<detail::ConvKey, std::vector<std::string>, detail::ConvKeyHash> compiling_;
  // probe_pending(): the slice plan a skipped candidate waits for, by its full plan's key.
  std::unordered_map<detail::ConvPlanKey, detail::ConvPlanKey, detail::ConvKeyHash> unprobed_;
  std::unordered_map<detail::ConvPlanKey, std::string, detail::ConvKeyHash> failed_compiles_;
  std::set<std::string> stored_;  // plan-store keys loaded or saved by this backend
};

}  // namespace

std::vector<AlgoInfo> kernel_candidates(const ConvDesc& desc, Direction direction, bool listed) {
  std::vector<AlgoInfo> infos = depthwise_candidates(desc, direction);
  for (AlgoInfo& info : grouped_candidates(desc, direction)) infos.push_back(std::move(info));
  for (AlgoInfo& info : narrow_candidates(desc, direction)) infos.push_back(std::move(info));
  if (!listed) {
    for (AlgoInfo& info : infos) {
      info.supported = false;
      info.workspace_bytes = 0;  // an unsupported candidate asks for none
      info.reason =
          std::string("dnnx's own convolution kernels are turned off (") + kernels_variable + "=0)";
    }
  }
  return infos;
}

ConvListingCounts conv_listing_counts() { return {listings.load(), descriptions.load()}; }

std::unique_ptr<detail::OpBackendOf<OpKind::conv>> make_conv_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  return std::make_unique<CudnnConv>(std::move(runtime));
}

}  // namespace dnnx::cudnn
