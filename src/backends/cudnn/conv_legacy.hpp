#pragma once
// The legacy half of the cudnn convolution: cuDNN's numbered algorithms (cudnnConvolutionForward /
// BackwardData / BackwardFilter), each under each math mode, as candidates and plans.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dnnx::cudnn {

/// A legacy algorithm: a value of its direction's cuDNN enum.
using LegacyAlgorithm = std::variant<cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t,
                                     cudnnConvolutionBwdFilterAlgo_t>;

/// What a legacy plan runs: an algorithm under a math mode.
struct LegacyConfig {
  LegacyAlgorithm algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

/// One legacy candidate: its listing entry and its config.
struct LegacyCandidate {
  AlgoInfo info;
  LegacyConfig config;
  /// A tensor-op math mode (Note [channel padding] wraps only tensor-core candidates).
  bool tensor_cores = false;
};

/// Every legacy candidate of (desc, direction): algorithm x math mode, supported or not, in
/// priority order (Note [legacy candidates]).
std::vector<LegacyCandidate> legacy_candidates(Runtime& runtime, const ConvDesc& desc,
                                               Direction direction);

/// The candidate legacy_candidates() lists as `id` for (desc, direction), described alone
/// without cuDNN's ranking (Note [re-validating persisted choices] in src/ops/dispatch.cpp), or
/// nullopt when `id` is not a legacy id of `direction`.
std::optional<LegacyCandidate> legacy_candidate_of(Runtime& runtime, const ConvDesc& desc,
                                                   Direction direction, const std::string& id);

/// The plan of legacy config `config` (an algorithm of `direction`) for desc, recorded as `info`
/// (its workspace made exact).
std::shared_ptr<detail::ConvPlan> make_legacy_plan(std::shared_ptr<Runtime> runtime,
                                                   const ConvDesc& desc, Direction direction,
                                                   const AlgoInfo& info,
                                                   const LegacyConfig& config);

/// The legacy algorithms of `direction` by index ("implicit_gemm", ..., as legacy ids name them).
std::vector<std::string> legacy_algorithm_names(Direction direction);

/// The note ("implicit_gemm", "gemm", "direct", "fft", "winograd") and the Theano family
/// (docs/algorithms.md; empty for none) of the legacy algorithm of `direction` at `algorithm`
/// (an index into legacy_algorithm_names(direction)), as its legacy candidates carry them.
std::pair<std::string, std::string> legacy_algorithm_kind(Direction direction, int algorithm);

/// The indexes of those that are not deterministic (Note [legacy candidates]).
std::vector<int> legacy_nondeterministic_algorithms(Direction direction);

/// A legacy convolution on tensors of explicit geometry: g.src and g.dst with any strides (crops
/// of larger tensors), a packed filter of g.weights' dims in desc's layout, desc's groups, g's
/// padding, stride and dilation (Note [tap-region candidates] in conv_taps.cpp runs one per
/// region). Without `algorithm` it runs the first algorithm, in cuDNN's ranking for these
/// descriptors and then in cuDNN's numbering, that is deterministic, that dnnx's math rules allow
/// (Note [legacy candidates]) and whose workspace cuDNN reports for these descriptors; with one
/// (an index into legacy_algorithm_names(direction)), that algorithm under the first math mode
/// that qualifies so, deterministic or not.
class LegacyStridedConv {
 public:
  /// Throws Unsupported naming cuDNN's last refusal when no algorithm qualifies.
  LegacyStridedConv(Runtime& runtime, const ConvDesc& desc, const Geometry& g, Direction direction,
                    const ErrorContext& context, std::optional<int> algorithm = std::nullopt);
  ~LegacyStridedConv();
  LegacyStridedConv(const LegacyStridedConv&) = delete;
  LegacyStridedConv& operator=(const LegacyStridedConv&) = delete;

  std::size_t workspace_bytes() const;
  /// "<algorithm> (<math mode>)", e.g. "implicit_precomp_gemm (fma)".
  const std::string& algorithm_name() const;
  bool deterministic() const;
  /// output = conv + beta * output on the handle's stream; (first, second, output) as
  /// bind_tensors() orders a direction's tensors.
  void run(cudnnHandle_t handle, const void* first, const void* second, void* output, float beta,
           void* workspace, std::size_t workspace_bytes) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A LegacyStridedConv of `desc` under `algorithm` on views of the caller's tensors where cuDNN
/// takes them, else with x (src / diff_src), y (dst / diff_dst) or both packed (copied in the
/// workspace): the first of views, y packed, x packed, both packed that cuDNN runs. `packed` is
/// desc's own geometry; `view_x` / `view_y` the strides of x and y as views (a packing whose view
/// is packed already is not tried again). The tap regions (Note [tap-region candidates] in
/// conv_taps.cpp) and the frames (Note [frame candidates] in conv_frames.cpp) run so.
struct ViewedLegacyConv {
  std::unique_ptr<LegacyStridedConv> conv;  ///< null where cuDNN ran none
  bool pack_x = false, pack_y = false;
  std::string refusal;  ///< cuDNN's last refusal where it ran none
};
ViewedLegacyConv legacy_conv_on_views(Runtime& runtime, const ConvDesc& desc,
                                      const Geometry& packed,
                                      const std::array<std::int64_t, 5>& view_x,
                                      const std::array<std::int64_t, 5>& view_y,
                                      Direction direction, const ErrorContext& context,
                                      std::optional<int> algorithm);

/// The descriptors copying a tensor of `dims` (of geometry `g`) between a view of strides `view`
/// and its packed copy of strides `packed` (cudnnTransformTensor), and the copy's bytes.
struct ViewCopy {
  TensorDescriptor view, packed;
  std::size_t bytes = 0;
};
ViewCopy view_copy(const Geometry& g, const std::array<std::int64_t, 5>& dims,
                   const std::array<std::int64_t, 5>& view,
                   const std::array<std::int64_t, 5>& packed, std::size_t element,
                   const ErrorContext& context);
/// to = from + beta x to through cudnnTransformTensor: a copy between a view and its packed
/// form (ViewCopy) either way, or with beta 1 its sum into the view; `what` names it in errors.
void transform_tensor(cudnnHandle_t handle, const TensorDescriptor& from_desc, const void* from,
                      const TensorDescriptor& to_desc, void* to, float beta,
                      const ErrorContext& context, const char* what);

}  // namespace dnnx::cudnn
