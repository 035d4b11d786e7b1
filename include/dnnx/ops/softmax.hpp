#pragma once
/// \file
/// Softmax and log-softmax, forward and backward, over the channels of every position (channel
/// mode) or over everything of each sample (instance mode), as cuDNN's cudnnSoftmaxForward /
/// cudnnSoftmaxBackward compute them.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// Which elements one softmax normalizes together. For N x C inputs both modes coincide.
enum class SoftmaxMode : std::uint8_t {
  instance,  ///< all C*D*H*W values of each sample (CUDNN_SOFTMAX_MODE_INSTANCE)
  channel,   ///< the C values of every (n, spatial position) (CUDNN_SOFTMAX_MODE_CHANNEL;
             ///< cudnn.torch's SpatialSoftMax / VolumetricSoftMax)
};
/// "instance" or "channel".
std::string_view to_string(SoftmaxMode mode);
/// Parses "instance" / "channel"; throws InvalidArgument listing them.
SoftmaxMode parse_softmax_mode(std::string_view text);

/// What a softmax computes. Plain data: comparable, hashable, printable; it is the cache key, the
/// error context and the test-case name.
///   softmax:     dst_i = exp(src_i) / sum_j exp(src_j)
///   log-softmax: dst_i = src_i - log(sum_j exp(src_j))
/// where j runs over the elements normalized together (see SoftmaxMode).
struct SoftmaxDesc {
  Dims dims;                                ///< N, C, spatial... (rank 2 to 5), elements
  SoftmaxMode mode = SoftmaxMode::channel;  ///< which elements are normalized together
  bool log = false;                         ///< log-softmax instead of softmax
  DType dtype = DType::f32;                 ///< dtype of src, dst and their gradients
  Layout layout = Layout::channels_first;   ///< memory order of every tensor of the op

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;

  /// Elements normalized together (C for channel mode, C*D*H*W for instance mode). This and
  /// groups() check `dims` first: InvalidArgument naming them when they are out of range.
  std::int64_t axis_size() const;
  /// Number of independent softmaxes (N*D*H*W for channel mode, N for instance mode).
  std::int64_t groups() const;

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile softmax --input 64x1000 --mode channel --dtype f32 --layout nchw --direction
  /// fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const SoftmaxDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const SoftmaxDesc& desc);

/// dst = softmax(src) (or log-softmax). dst may be src itself (in place: the same memory, dims
/// and strides); any other overlap is rejected. Returns the choice that ran.
std::shared_ptr<const Choice> softmax_fwd(Context& context, const SoftmaxDesc& desc,
                                          const Tensor& src, Tensor& dst);
/// diff_src = gradient of the softmax w.r.t. src, computed from the forward's output `dst` (as
/// cuDNN does): softmax: dst * (diff_dst - sum(diff_dst * dst)); log-softmax:
/// diff_dst - exp(dst) * sum(diff_dst). diff_src must not overlap dst or diff_dst. Returns the
/// choice that ran.
std::shared_ptr<const Choice> softmax_bwd(Context& context, const SoftmaxDesc& desc,
                                          const Tensor& dst, const Tensor& diff_dst,
                                          Tensor& diff_src);

/// Every candidate of the context's backend for (desc, direction) — fwd or bwd_data (the
/// backward pass) — with support status, workspace and determinism; nothing is run. Priority
/// order: the first supported one is the heuristic pick.
std::vector<AlgoInfo> softmax_list(Context& context, const SoftmaxDesc& desc, Direction direction);
/// The choice the context's policy (TuneOptions::policy(OpKind::softmax, direction)) makes.
std::shared_ptr<const Choice> softmax_select(Context& context, const SoftmaxDesc& desc,
                                             Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult softmax_profile(Context& context, const SoftmaxDesc& desc, Direction direction);

}  // namespace dnnx
