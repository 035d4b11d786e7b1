// Note [legacy candidates]
// Every algorithm of the direction (fwd 0-7, bwd_data 0-5, bwd_weights 0-6) under every math mode
// (default, tensor_op, tensor_op_allow_conversion, fma) is one candidate, id
// "cudnn:legacy:<direction>:<algorithm>:<math>". Support and workspace come from
// cudnnGetConvolution*WorkspaceSize with the math mode set on the convolution descriptor: a
// failing status makes the candidate unsupported, with cuDNN's status and message as the reason.
// Before that, dnnx rules out what it knows cannot or must not run:
//   - asymmetric padding: the legacy descriptor has one padding per spatial dim;
//   - f32 with TF32 off (Note [TF32]): tensor_op and tensor_op_allow_conversion run f32 on TF32
//     tensor cores, and so may default math on compute capability >= 8.0 (cuDNN's documentation of
//     cudnnMathType_t); only fma is f32 arithmetic there.
// Determinism follows cuDNN's documentation: bwd_data algorithm 0 and bwd_weights algorithms 0
// and 3 accumulate with atomics and are not deterministic; every other one is.
// Every one is noted "host_heavy": a legacy call costs 25-45 us of host time where a graph-API
// engine's costs 5-8 us (Note [graph replay]), which an exhaustive search weighs in a near tie
// (Note [host cost ties] in src/tune/select.cpp).
// Order: the ranking of cudnnGetConvolution*Algorithm_v7 (its (algorithm, math) pairs first, in
// its order), then the remaining math modes of those algorithms, then the algorithms it did not
// return, in cuDNN's numbering. Where the ranking is not asked for (Note [legacy ranking cost]),
// every algorithm is in that last band.
//
// Note [legacy ranking cost]
// cudnnGetConvolutionBackwardFilterAlgorithm_v7 takes 0.7-1.1 s per call for depthwise
// convolutions in f16 NHWC on an H200 with cuDNN 9.19 (97 channels at 41x41, 576 at 14x14) and
// 2.4-4.5 s in f16 NCHW, every call (a second call on the same descriptors is no faster) and
// under every math mode, against 0.1 ms in f32 (docs/benchmarks.md, "Search time"). In the
// shape suite's listings it took 0.3-1.2 s on most depthwise layers of 28x28 and smaller, and
// 6-60 ms on the larger ones and on ResNeXt's 32 groups. That was up to half of an exhaustive
// search, for an order that matters only when no graph-API engine is admissible (Note [cudnn
// candidate order]). So the listing does not ask for it for depthwise bwd_weights (groups =
// input channels) in f16 and bf16 (bf16 not measured; dnnx assumes it shares f16's paths): their
// legacy candidates come in cuDNN's numbering. cuDNN's ranking put algo_1 first in every case
// measured, which the numbering puts second, after algo_0.

#include "backends/cudnn/conv_legacy.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <string_view>
#include <variant>

namespace dnnx::cudnn {
namespace {

struct AlgoSpec {
  std::string_view name;
  std::string_view note;    // implicit_gemm / gemm / direct / fft / winograd
  std::string_view family;  // Theano family, "" for none
  bool deterministic;
};

constexpr std::array<AlgoSpec, 8> fwd_algos{{
    {"implicit_gemm", "implicit_gemm", "none", true},
    {"implicit_precomp_gemm", "implicit_gemm", "small", true},
    {"gemm", "gemm", "large", true},
    {"direct", "direct", "", true},
    {"fft", "fft", "fft", true},
    {"fft_tiling", "fft", "fft_tiling", true},
    {"winograd", "winograd", "winograd", true},
    {"winograd_nonfused", "winograd", "winograd", true},
}};
constexpr std::array<AlgoSpec, 6> bwd_data_algos{{
    {"algo_0", "implicit_gemm", "none", false},
    {"algo_1", "implicit_gemm", "", true},
    {"fft", "fft", "fft", true},
    {"fft_tiling", "fft", "fft_tiling", true},
    {"winograd", "winograd", "winograd", true},
    {"winograd_nonfused", "winograd", "winograd", true},
}};
constexpr std::array<AlgoSpec, 7> bwd_weights_algos{{
    {"algo_0", "implicit_gemm", "none", false},
    {"algo_1", "implicit_gemm", "", true},
    {"fft", "fft", "fft", true},
    {"algo_3", "implicit_gemm", "small", false},
    {"winograd", "winograd", "winograd", true},
    {"winograd_nonfused", "winograd", "winograd", true},
    {"fft_tiling", "fft", "fft_tiling", true},
}};

std::span<const AlgoSpec> algos(Direction direction) {
  switch (direction) {
    case Direction::fwd: return fwd_algos;
    case Direction::bwd_data: return bwd_data_algos;
    case Direction::bwd_weights: return bwd_weights_algos;
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return {};
}

// Algorithm `index` of algos(direction) (the tables follow cuDNN's numbering).
LegacyAlgorithm algorithm_of(Direction direction, int index) {
  switch (direction) {
    case Direction::fwd: return static_cast<cudnnConvolutionFwdAlgo_t>(index);
    case Direction::bwd_data: return static_cast<cudnnConvolutionBwdDataAlgo_t>(index);
    case Direction::bwd_weights: return static_cast<cudnnConvolutionBwdFilterAlgo_t>(index);
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return {};
}

// One callable of several lambdas, for std::visit over a LegacyAlgorithm.
template <typename... Lambdas>
struct Overloaded : Lambdas... {
  using Lambdas::operator()...;
};

struct MathSpec {
  cudnnMathType_t math;
  std::string_view name;
};
constexpr std::array<MathSpec, 4> math_modes{{
    {CUDNN_DEFAULT_MATH, "default"},
    {CUDNN_TENSOR_OP_MATH, "tensor_op"},
    {CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, "tensor_op_allow_conversion"},
    {CUDNN_FMA_MATH, "fma"},
}};

std::string legacy_id(Direction direction, std::string_view algo, std::string_view math) {
  return detail::cat("cudnn:legacy:", to_string(direction), ':', algo, ':', math);
}

// The descriptors of one (desc, direction); the math mode is set on `conv` per query or plan.
struct Descriptors {
  TensorDescriptor src, dst;
  FilterDescriptor weights;
  ConvolutionDescriptor conv;
};

Descriptors make_descriptors(const ConvDesc& desc, const Geometry& g, const ErrorContext& context) {
  Descriptors d{make_tensor_descriptor(context), make_tensor_descriptor(context),
                make_filter_descriptor(context), make_convolution_descriptor(context)};
  const auto weights = narrow_to_int(g, g.weights);
  set_tensor_descriptor(d.src, g, g.src, g.src_strides, context, "describing src");
  set_tensor_descriptor(d.dst, g, g.dst, g.dst_strides, context, "describing dst");
  const cudnnTensorFormat_t format =
      desc.layout == Layout::channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
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
  DNNX_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv.get(), static_cast<int>(desc.groups)),
                   context, "setting the group count");
  return d;
}

// Workspace bytes of `algorithm` under the math mode set on d.conv; a failed status is returned.
cudnnStatus_t workspace_size(cudnnHandle_t handle, const Descriptors& d,
                             const LegacyAlgorithm& algorithm, std::size_t& bytes) {
  return std::visit(
      Overloaded{
          [&](cudnnConvolutionFwdAlgo_t algo) {
            return cudnnGetConvolutionForwardWorkspaceSize(handle, d.src.get(), d.weights.get(),
                                                           d.conv.get(), d.dst.get(), algo, &bytes);
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(
                handle, d.weights.get(), d.dst.get(), d.conv.get(), d.src.get(), algo, &bytes);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t algo) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle, d.src.get(), d.dst.get(), d.conv.get(), d.weights.get(), algo, &bytes);
          }},
      algorithm);
}

struct Ranked {
  int algo;
  cudnnMathType_t math;
};

// cuDNN's heuristic ranking of (algorithm, math) for the descriptors.
std::vector<Ranked> heuristic_ranking(cudnnHandle_t handle, const Descriptors& d,
                                      Direction direction, const ErrorContext& context) {
  std::vector<Ranked> ranked;
  int returned = 0;
  auto collect = [&](const auto& results) {
    for (int i = 0; i < returned; ++i) {
      const auto& r = results[static_cast<std::size_t>(i)];
      if (r.status == CUDNN_STATUS_SUCCESS)
        ranked.push_back({static_cast<int>(r.algo), r.mathType});
    }
  };
  switch (direction) {
    case Direction::fwd: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> results{};
      DNNX_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                           handle, d.src.get(), d.weights.get(), d.conv.get(), d.dst.get(),
                           static_cast<int>(results.size()), &returned, results.data()),
                       context, "ranking the legacy algorithms");
      collect(results);
      break;
    }
    case Direction::bwd_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>
          results{};
      DNNX_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                           handle, d.weights.get(), d.dst.get(), d.conv.get(), d.src.get(),
                           static_cast<int>(results.size()), &returned, results.data()),
                       context, "ranking the legacy algorithms");
      collect(results);
      break;
    }
    case Direction::bwd_weights: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
          results{};
      DNNX_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                           handle, d.src.get(), d.dst.get(), d.conv.get(), d.weights.get(),
                           static_cast<int>(results.size()), &returned, results.data()),
                       context, "ranking the legacy algorithms");
      collect(results);
      break;
    }
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return ranked;
}

// Note [legacy ranking cost]: cuDNN's ranking takes a second or more here.
bool ranking_too_slow(const ConvDesc& desc, Direction direction) {
  return direction == Direction::bwd_weights && desc.groups > 1 &&
         desc.groups == desc.in_channels && (desc.dtype == DType::f16 || desc.dtype == DType::bf16);
}

// Why dnnx itself rules out `math` for `desc` (Note [legacy candidates]); empty if it does not.
std::string math_exclusion(const ConvDesc& desc, cudnnMathType_t math, const Runtime& runtime) {
  if (desc.dtype != DType::f32 || runtime.allow_tf32()) return {};
  if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
    return detail::cat("runs f32 on TF32 tensor cores and TF32 is off (set ", tf32_variable,
                       "=1 to allow it)");
  }
  if (math == CUDNN_DEFAULT_MATH && runtime.facts().major >= 8) {
    return detail::cat("default math may run f32 on TF32 tensor cores on compute capability ",
                       runtime.facts().major, '.', runtime.facts().minor, " and TF32 is off (set ",
                       tf32_variable,
                       "=1 to allow it; fma is the f32 "
                       "math mode)");
  }
  return {};
}

// The math modes in the order dnnx prefers them for `desc`: tensor cores first where they are
// allowed, fma first for f32 without TF32.
std::array<MathSpec, 4> math_order(const ConvDesc& desc, const Runtime& runtime) {
  if (desc.dtype == DType::f32 && !runtime.allow_tf32()) {
    return {math_modes[3], math_modes[0], math_modes[1], math_modes[2]};
  }
  return {math_modes[1], math_modes[2], math_modes[0], math_modes[3]};
}

class LegacyPlan final : public detail::ConvPlan {
 public:
  LegacyPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
             AlgoInfo info, const LegacyConfig& config)
      : runtime_(std::move(runtime)),
        info_(std::move(info)),
        context_(conv_context(desc, direction, info_.id)),
        direction_(direction),
        algorithm_(config.algorithm) {
    runtime_->make_current();
    const Geometry g = conv_geometry(desc);
    descriptors_ = std::make_unique<Descriptors>(make_descriptors(desc, g, context_));
    DNNX_CUDNN_CHECK(cudnnSetConvolutionMathType(descriptors_->conv.get(), config.math), context_,
                     "setting the math mode");
    std::size_t bytes = 0;
    DNNX_CUDNN_CHECK(workspace_size(runtime_->handle(), *descriptors_, algorithm_, bytes), context_,
                     "querying the workspace size");
    info_.workspace_bytes = bytes;
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    replay_.run(
        runtime_->settings(), runtime_->stream(), {t.first, t.second, t.output, workspace.data},
        [&] { launch(t, workspace); }, context_);
  }

 private:
  void launch(const BoundTensors& t, const detail::Workspace& workspace) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const Descriptors& d = *descriptors_;
    const cudnnHandle_t handle = runtime_->handle();
    const cudnnStatus_t status = std::visit(
        Overloaded{[&](cudnnConvolutionFwdAlgo_t algo) {
                     return cudnnConvolutionForward(handle, &alpha, d.src.get(), t.first,
                                                    d.weights.get(), t.second, d.conv.get(), algo,
                                                    workspace.data, workspace.bytes, &beta,
                                                    d.dst.get(), t.output);
                   },
                   [&](cudnnConvolutionBwdDataAlgo_t algo) {
                     return cudnnConvolutionBackwardData(handle, &alpha, d.weights.get(), t.second,
                                                         d.dst.get(), t.first, d.conv.get(), algo,
                                                         workspace.data, workspace.bytes, &beta,
                                                         d.src.get(), t.output);
                   },
                   [&](cudnnConvolutionBwdFilterAlgo_t algo) {
                     return cudnnConvolutionBackwardFilter(
                         handle, &alpha, d.src.get(), t.first, d.dst.get(), t.second, d.conv.get(),
                         algo, workspace.data, workspace.bytes, &beta, d.weights.get(), t.output);
                   }},
        algorithm_);
    DNNX_CUDNN_CHECK(status, context_, "running the convolution");
  }

  std::shared_ptr<Runtime> runtime_;
  AlgoInfo info_;
  ErrorContext context_;
  Direction direction_;
  LegacyAlgorithm algorithm_;  // of direction_'s enum
  std::unique_ptr<Descriptors> descriptors_;
  LaunchGraph replay_;  // Note [graph replay]
};

// Why no legacy algorithm can run `desc` (Note [legacy candidates]); empty if that is not so.
std::string common_exclusion(const ConvDesc& desc, const Geometry& g) {
  if (!g.symmetric_padding) {
    return detail::cat(
        "legacy cuDNN takes one padding per spatial dim; asymmetric padding (before ",
        detail::join(std::span(desc.pad_before.data(), static_cast<std::size_t>(desc.spatial_dims)),
                     "x"),
        ", after ",
        detail::join(std::span(desc.pad_after.data(), static_cast<std::size_t>(desc.spatial_dims)),
                     "x"),
        ") needs a graph-API engine (cudnn:engine:...)");
  }
  if (!fits_legacy_int(g)) return legacy_range_reason;
  return {};
}

// Verbose: a cuDNN query of the listing that took longer than slow_query_ms. Some take seconds
// (the bwd_weights ranking of some depthwise shapes in f16: docs/benchmarks.md, "Search time"),
// and the listing's time is part of every search's.
constexpr double slow_query_ms = 20;

void report_slow_query(const Runtime& runtime, const ConvDesc& desc, Direction direction,
                       const std::string& what, const char* query,
                       std::chrono::steady_clock::time_point start) {
  if (!runtime.verbose()) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (ms < slow_query_ms) return;
  std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc << ": " << what << ' '
            << query << " took " << ms << " ms\n";
}

// The candidate of algorithm `algo` (of algos(direction), `spec`) under `math`: what the listing
// says of it, whatever its place there. `d` holds the descriptors of desc (null when
// `common_reason` rules every algorithm out); its math mode is set here for the query.
LegacyCandidate describe_pair(Runtime& runtime, const ConvDesc& desc, Direction direction, int algo,
                              const AlgoSpec& spec, const MathSpec& math,
                              const std::string& common_reason, const Descriptors* d,
                              const ErrorContext& context) {
  LegacyCandidate candidate;
  candidate.config = {algorithm_of(direction, algo), math.math};
  candidate.tensor_cores =
      math.math == CUDNN_TENSOR_OP_MATH || math.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  AlgoInfo& info = candidate.info;
  info.id = legacy_id(direction, spec.name, math.name);
  info.name = detail::cat(spec.name, " (", math.name, ")");
  info.deterministic = spec.deterministic;
  info.notes = {"legacy", std::string(spec.note), "host_heavy"};
  if (candidate.tensor_cores) info.notes.emplace_back("tensor_cores");
  if (math.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) info.notes.emplace_back("down_convert");
  if (!spec.family.empty()) info.families.emplace_back(spec.family);
  std::string reason = common_reason;
  if (reason.empty()) reason = math_exclusion(desc, math.math, runtime);
  if (reason.empty()) {
    DNNX_CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv.get(), math.math), context,
                     "setting the math mode");
    std::size_t bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    const cudnnStatus_t status =
        workspace_size(runtime.handle(), *d, candidate.config.algorithm, bytes);
    report_slow_query(runtime, desc, direction, info.id, "workspace query", start);
    if (status == CUDNN_STATUS_SUCCESS) {
      info.workspace_bytes = bytes;
    } else {
      reason = detail::cat("cuDNN rejects it: ", status_name(status));
      if (const std::string message = last_cudnn_message(); !message.empty())
        reason += " (" + message + ")";
    }
  }
  info.supported = reason.empty();
  info.reason = std::move(reason);
  return candidate;
}

}  // namespace

std::vector<LegacyCandidate> legacy_candidates(Runtime& runtime, const ConvDesc& desc,
                                               Direction direction) {
  const ErrorContext context = conv_context(desc, direction, {});
  const Geometry g = conv_geometry(desc);
  const auto specs = algos(direction);
  const auto maths = math_order(desc, runtime);

  const std::string common_reason = common_exclusion(desc, g);
  std::unique_ptr<Descriptors> d;
  std::vector<Ranked> ranking;
  if (common_reason.empty()) {
    runtime.make_current();
    d = std::make_unique<Descriptors>(make_descriptors(desc, g, context));
    const bool f32_exact = desc.dtype == DType::f32 && !runtime.allow_tf32();
    DNNX_CUDNN_CHECK(
        cudnnSetConvolutionMathType(d->conv.get(), f32_exact ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
        context, "setting the math mode");
    if (ranking_too_slow(desc, direction)) {
      if (runtime.verbose()) {
        std::cerr << "dnnx: cudnn: conv " << to_string(direction) << ' ' << desc
                  << ": legacy algorithms in cuDNN's numbering, not ranked (Note [legacy ranking "
                     "cost])\n";
      }
    } else {
      const auto start = std::chrono::steady_clock::now();
      ranking = heuristic_ranking(runtime.handle(), *d, direction, context);
      report_slow_query(runtime, desc, direction, "legacy algorithms", "ranking", start);
    }
  }

  // Note [legacy ranks]
  // The listing's order is one sort key (rank) per (algorithm, math) pair, in bands:
  //   [0, ranked_pairs)   the pairs cuDNN's heuristic ranks, at their place in its ranking;
  //   ranked_pairs + algorithm_rank * maths_per_algorithm + (place of the math in `maths`)
  //                       the pairs it did not rank, grouped by their algorithm's rank (where the
  //                       algorithm first appears in cuDNN's ranking; for an algorithm it never
  //                       ranks, unranked_algorithms + its enum value), each group in `maths`
  //                       order;
  //   + unsupported_offset  an unsupported pair: after every supported one, in the same order.
  // The numbers only separate the bands, so each must exceed everything the band below it can
  // reach: cuDNN's ranking has at most max_algorithms entries (we ask for as many results as the
  // direction has algorithms), and `maths` has math_modes.size() entries. The static_asserts
  // below check exactly that; the values themselves are arbitrary round numbers.
  constexpr int max_algorithms =
      std::max({static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT),
                static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT),
                static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)});
  constexpr int ranked_pairs = 100;
  constexpr int unranked_algorithms = 1000;
  constexpr int maths_per_algorithm = 8;
  constexpr int unsupported_offset = 100000;
  static_assert(ranked_pairs >= max_algorithms, "a ranked pair's place is below max_algorithms");
  static_assert(unranked_algorithms >= max_algorithms,
                "an algorithm cuDNN ranks has a place below max_algorithms");
  static_assert(maths_per_algorithm >= static_cast<int>(math_modes.size()),
                "one algorithm's group holds every math mode");
  static_assert(unsupported_offset >
                    ranked_pairs + (unranked_algorithms + max_algorithms) * maths_per_algorithm,
                "every supported pair ranks below unsupported_offset");
  struct Entry {
    LegacyCandidate candidate;
    int rank;
  };
  std::vector<Entry> entries;
  for (std::size_t a = 0; a < specs.size(); ++a) {
    const AlgoSpec& spec = specs[a];
    const int algo = static_cast<int>(a);
    const auto first_algo = std::find_if(ranking.begin(), ranking.end(),
                                         [&](const Ranked& r) { return r.algo == algo; });
    const int algo_rank =
        first_algo == ranking.end() ? unranked_algorithms + algo
                                    : static_cast<int>(first_algo - ranking.begin());
    for (std::size_t m = 0; m < maths.size(); ++m) {
      const MathSpec& math = maths[m];
      LegacyCandidate candidate = describe_pair(runtime, desc, direction, algo, spec, math,
                                                common_reason, d.get(), context);
      const auto exact = std::find_if(ranking.begin(), ranking.end(), [&](const Ranked& r) {
        return r.algo == algo && r.math == math.math;
      });
      int rank = exact != ranking.end()
                     ? static_cast<int>(exact - ranking.begin())
                     : ranked_pairs + algo_rank * maths_per_algorithm + static_cast<int>(m);
      if (!candidate.info.supported) rank += unsupported_offset;
      entries.push_back({std::move(candidate), rank});
    }
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.rank < b.rank; });
  std::vector<LegacyCandidate> candidates;
  candidates.reserve(entries.size());
  for (Entry& entry : entries) candidates.push_back(std::move(entry.candidate));
  return candidates;
}

std::optional<LegacyCandidate> legacy_candidate_of(Runtime& runtime, const ConvDesc& desc,
                                                   Direction direction, const std::string& id) {
  // The ids legacy_candidates() makes, matched by making them (one place spells them).
  const auto specs = algos(direction);
  for (std::size_t a = 0; a < specs.size(); ++a) {
    for (const MathSpec& math : math_modes) {
      if (legacy_id(direction, specs[a].name, math.name) != id) continue;
      const ErrorContext context = conv_context(desc, direction, {});
      const Geometry g = conv_geometry(desc);
      const std::string common_reason = common_exclusion(desc, g);
      std::unique_ptr<Descriptors> d;
      if (common_reason.empty()) {
        runtime.make_current();
        d = std::make_unique<Descriptors>(make_descriptors(desc, g, context));
      }
      return describe_pair(runtime, desc, direction, static_cast<int>(a), specs[a], math,
                           common_reason, d.get(), context);
    }
  }
  return std::nullopt;
}

std::shared_ptr<detail::ConvPlan> make_legacy_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info,
                                                   const LegacyConfig& config) {
  return std::make_shared<LegacyPlan>(std::move(runtime), desc, direction, info, config);
}

struct LegacyStridedConv::Impl {
  Descriptors d;
  LegacyAlgorithm algorithm;
  std::size_t workspace = 0;
  std::string name;
  bool deterministic = true;
  ErrorContext context;
};

std::vector<std::string> legacy_algorithm_names(Direction direction) {
  std::vector<std::string> names;
  for (const AlgoSpec& spec : algos(direction)) names.emplace_back(spec.name);
  return names;
}

std::pair<std::string, std::string> legacy_algorithm_kind(Direction direction, int algorithm) {
  const AlgoSpec& spec = algos(direction)[static_cast<std::size_t>(algorithm)];
  return {std::string(spec.note), std::string(spec.family)};
}

std::vector<int> legacy_nondeterministic_algorithms(Direction direction) {
  std::vector<int> out;
  const auto specs = algos(direction);
  for (std::size_t a = 0; a < specs.size(); ++a) {
    if (!specs[a].deterministic) out.push_back(static_cast<int>(a));
  }
  return out;
}

LegacyStridedConv::LegacyStridedConv(Runtime& runtime, const ConvDesc& desc, const Geometry& g,
                                     Direction direction, const ErrorContext& context,
                                     std::optional<int> algorithm) {
  if (!g.symmetric_padding || !fits_legacy_int(g)) {
    detail::raise(ErrorKind::Unsupported,
                  !g.symmetric_padding
                      ? "legacy cuDNN takes one padding per spatial dim; this one is asymmetric"
                      : legacy_range_reason,
                  context);
  }
  runtime.make_current();
  Descriptors d = make_descriptors(desc, g, context);
  const bool f32_exact = desc.dtype == DType::f32 && !runtime.allow_tf32();
  DNNX_CUDNN_CHECK(
      cudnnSetConvolutionMathType(d.conv.get(), f32_exact ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
      context, "setting the math mode");
  const auto specs = algos(direction);
  std::vector<Ranked> order;
  if (algorithm) {
    DNNX_ASSERT(*algorithm >= 0 && static_cast<std::size_t>(*algorithm) < specs.size());
    for (const MathSpec& math : math_order(desc, runtime)) order.push_back({*algorithm, math.math});
  } else {
    if (!ranking_too_slow(desc, direction))
      order = heuristic_ranking(runtime.handle(), d, direction, context);
    for (std::size_t a = 0; a < specs.size(); ++a) {
      for (const MathSpec& math : math_order(desc, runtime))
        order.push_back({static_cast<int>(a), math.math});
    }
  }
  std::string refusal = algorithm ? "no math mode dnnx allows" : "no deterministic algorithm";
  for (const Ranked& pair : order) {
    const AlgoSpec& spec = specs[static_cast<std::size_t>(pair.algo)];
    if ((!algorithm && !spec.deterministic) || !math_exclusion(desc, pair.math, runtime).empty())
      continue;
    DNNX_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), pair.math), context,
                     "setting the math mode");
    const LegacyAlgorithm legacy_algorithm = algorithm_of(direction, pair.algo);
    std::size_t bytes = 0;
    const cudnnStatus_t status = workspace_size(runtime.handle(), d, legacy_algorithm, bytes);
    if (status != CUDNN_STATUS_SUCCESS) {
      refusal = detail::cat(spec.name, ": ", status_name(status));
      continue;
    }
    const auto math = std::find_if(math_modes.begin(), math_modes.end(),
                                   [&](const MathSpec& m) { return m.math == pair.math; });
    impl_ = std::make_unique<Impl>(Impl{std::move(d), legacy_algorithm, bytes,
                                        detail::cat(spec.name, " (", math->name, ")"),
                                        spec.deterministic, context});
    return;
  }
  detail::raise(ErrorKind::Unsupported,
                detail::cat("no legacy algorithm runs these tensors (last: ", refusal, ")"),
                context);
}

LegacyStridedConv::~LegacyStridedConv() = default;

std::size_t LegacyStridedConv::workspace_bytes() const { return impl_->workspace; }

const std::string& LegacyStridedConv::algorithm_name() const { return impl_->name; }

bool LegacyStridedConv::deterministic() const { return impl_->deterministic; }

void LegacyStridedConv::run(cudnnHandle_t handle, const void* first, const void* second,
                            void* output, float beta, void* workspace,
                            std::size_t workspace_bytes) const {
  const float alpha = 1.0f;
  const Descriptors& d = impl_->d;
  const cudnnStatus_t status = std::visit(
      Overloaded{[&](cudnnConvolutionFwdAlgo_t algo) {
                   return cudnnConvolutionForward(
                       handle, &alpha, d.src.get(), first, d.weights.get(), second, d.conv.get(),
                       algo, workspace, workspace_bytes, &beta, d.dst.get(), output);
                 },
                 [&](cudnnConvolutionBwdDataAlgo_t algo) {
                   return cudnnConvolutionBackwardData(
                       handle, &alpha, d.weights.get(), second, d.dst.get(), first, d.conv.get(),
                       algo, workspace, workspace_bytes, &beta, d.src.get(), output);
                 },
                 [&](cudnnConvolutionBwdFilterAlgo_t algo) {
                   return cudnnConvolutionBackwardFilter(
                       handle, &alpha, d.src.get(), first, d.dst.get(), second, d.conv.get(), algo,
                       workspace, workspace_bytes, &beta, d.weights.get(), output);
                 }},
      impl_->algorithm);
  DNNX_CUDNN_CHECK(status, impl_->context, "running a region's convolution");
}

ViewedLegacyConv legacy_conv_on_views(Runtime& runtime, const ConvDesc& desc,
                                      const Geometry& packed,
                                      const std::array<std::int64_t, 5>& view_x,
                                      const std::array<std::int64_t, 5>& view_y,
                                      Direction direction, const ErrorContext& context,
                                      std::optional<int> algorithm) {
  ViewedLegacyConv out;
  for (const auto& [pack_x, pack_y] :
       {std::pair{false, false}, {false, true}, {true, false}, {true, true}}) {
    if ((pack_x && view_x == packed.src_strides) || (pack_y && view_y == packed.dst_strides))
      continue;  // the same descriptors as without the copy
    Geometry g = packed;
    if (!pack_x) g.src_strides = view_x;
    if (!pack_y) g.dst_strides = view_y;
    try {
      out.conv =
          std::make_unique<LegacyStridedConv>(runtime, desc, g, direction, context, algorithm);
      out.pack_x = pack_x;
      out.pack_y = pack_y;
      return out;
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::Unsupported) throw;
      out.refusal = error.message();
    }
  }
  return out;
}

ViewCopy view_copy(const Geometry& g, const std::array<std::int64_t, 5>& dims,
                   const std::array<std::int64_t, 5>& view,
                   const std::array<std::int64_t, 5>& packed, std::size_t element,
                   const ErrorContext& context) {
  ViewCopy copy{make_tensor_descriptor(context), make_tensor_descriptor(context), 0};
  set_tensor_descriptor(copy.view, g, dims, view, context, "describing a view");
  set_tensor_descriptor(copy.packed, g, dims, packed, context, "describing a view's packed copy");
  copy.bytes = static_cast<std::size_t>(elements_of(g, dims)) * element;
  return copy;
}

void transform_tensor(cudnnHandle_t handle, const TensorDescriptor& from_desc, const void* from,
                      const TensorDescriptor& to_desc, void* to, float beta,
                      const ErrorContext& context, const char* what) {
  const float one = 1.0f;
  DNNX_CUDNN_CHECK(
      cudnnTransformTensor(handle, &one, from_desc.get(), from, &beta, to_desc.get(), to), context,
      what);
}

}  // namespace dnnx::cudnn
