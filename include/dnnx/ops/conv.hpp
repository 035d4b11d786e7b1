#pragma once
/// \file
/// Convolution (1-, 2- and 3-D; groups, depthwise, dilation, asymmetric padding), every direction.
/// Cross-correlation as in PyTorch / cuDNN CUDNN_CROSS_CORRELATION.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {

/// What a convolution computes. Plain data: comparable, hashable, printable; it is the cache key,
/// the error context and the test-case name. Spatial arrays hold `spatial_dims` meaningful entries
/// in D, H, W order for 3-D, H, W for 2-D, W for 1-D (unused entries are ignored).
struct ConvDesc {
  int spatial_dims = 2;                         ///< 1, 2 or 3
  std::int64_t batch = 1;                       ///< N
  std::int64_t in_channels = 1;                 ///< C of src
  std::int64_t out_channels = 1;                ///< C of dst (= O of weights)
  std::int64_t groups = 1;                      ///< in/out channels are split into this many groups
  std::array<std::int64_t, 3> input{};          ///< src spatial sizes, elements
  std::array<std::int64_t, 3> kernel{};         ///< weights spatial sizes, elements
  std::array<std::int64_t, 3> stride{1, 1, 1};  ///< elements
  std::array<std::int64_t, 3> pad_before{};     ///< zero padding before each spatial dim, elements
  std::array<std::int64_t, 3> pad_after{};      ///< zero padding after each spatial dim, elements
  std::array<std::int64_t, 3> dilation{1, 1, 1};  ///< 1 = dense kernel
  DType dtype = DType::f32;                ///< dtype of src, weights, dst (and their gradients)
  Layout layout = Layout::channels_first;  ///< memory order of every tensor of the op

  /// Builds a desc from PyTorch-style shapes: src N,C,spatial...; weights O,C/groups,kernel...
  /// `stride`, `pad`, `dilation` have one entry per spatial dim or a single entry for all;
  /// `pad` is symmetric; use pad_before/pad_after afterwards for asymmetric padding.
  /// Throws InvalidArgument if the shapes are inconsistent.
  static ConvDesc from_shapes(const Dims& src, const Dims& weights,
                              const std::vector<std::int64_t>& stride = {1},
                              const std::vector<std::int64_t>& pad = {0},
                              const std::vector<std::int64_t>& dilation = {1},
                              std::int64_t groups = 1, DType dtype = DType::f32,
                              Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;

  // The shapes check the fields they are computed from: when one is out of range (a desc that
  // was never validated) they throw validate()'s InvalidArgument, never a negative or wrapped size.
  Dims src_dims() const;      ///< N, C, spatial...
  Dims weights_dims() const;  ///< O, C/groups, kernel...
  Dims dst_dims() const;      ///< N, O, output spatial... (the output shape)
  Dims bias_dims() const;     ///< O
  /// Output spatial size along spatial dim `i` (in [0, spatial_dims); InvalidArgument otherwise).
  std::int64_t output_size(int i) const;
  /// Multiply-accumulates of the forward pass (each direction does the same number).
  double macs() const;

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile conv --input 2x3x224x224 --weights 64x3x7x7 --stride 2 --pad 3 --dtype f32`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ConvDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ConvDesc& desc);

/// dst = conv(src, weights) [+ bias, broadcast over channels, if given]. Returns the choice that
/// ran.
std::shared_ptr<const Choice> conv_fwd(Context& context, const ConvDesc& desc, const Tensor& src,
                                       const Tensor& weights, Tensor& dst,
                                       const Tensor* bias = nullptr);
/// diff_src = gradient of conv w.r.t. src, given diff_dst. Returns the choice that ran.
std::shared_ptr<const Choice> conv_bwd_data(Context& context, const ConvDesc& desc,
                                            const Tensor& diff_dst, const Tensor& weights,
                                            Tensor& diff_src);
/// diff_weights = gradient w.r.t. weights; if diff_bias is given it receives the bias gradient
/// (sum of diff_dst over all but the channel axis). Returns the choice that ran.
std::shared_ptr<const Choice> conv_bwd_weights(Context& context, const ConvDesc& desc,
                                               const Tensor& src, const Tensor& diff_dst,
                                               Tensor& diff_weights, Tensor* diff_bias = nullptr);
/// dst += bias (broadcast over N and spatial positions).
void conv_bias_fwd(Context& context, const ConvDesc& desc, const Tensor& bias, Tensor& dst);
/// diff_bias = sum of diff_dst over N and spatial positions.
void conv_bias_bwd(Context& context, const ConvDesc& desc, const Tensor& diff_dst,
                   Tensor& diff_bias);

/// Every candidate of the context's backend for (desc, direction), with support status, workspace
/// and determinism — nothing is run. Priority order: the first supported one is the heuristic pick.
std::vector<AlgoInfo> conv_list(Context& context, const ConvDesc& desc, Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> conv_select(Context& context, const ConvDesc& desc,
                                          Direction direction);
/// Times every candidate (ignoring benchmark_limit and search_budget_ms; naive ones only with
/// TuneOptions::time_naive) on scratch tensors and returns the table.
ProfileResult conv_profile(Context& context, const ConvDesc& desc, Direction direction);

/// A convolution layer's algorithm state: holds one choice per direction so that Reuse::once
/// keeps its first choice across calls (re-validated when the shape changes), while
/// Reuse::on_shape_change selects again for every new desc. Not thread-safe; one per layer.
class Convolution {
 public:
  explicit Convolution(Context context);

  std::shared_ptr<const Choice> fwd(const ConvDesc& desc, const Tensor& src, const Tensor& weights,
                                    Tensor& dst, const Tensor* bias = nullptr);
  std::shared_ptr<const Choice> bwd_data(const ConvDesc& desc, const Tensor& diff_dst,
                                         const Tensor& weights, Tensor& diff_src);
  std::shared_ptr<const Choice> bwd_weights(const ConvDesc& desc, const Tensor& src,
                                            const Tensor& diff_dst, Tensor& diff_weights,
                                            Tensor* diff_bias = nullptr);
  /// The choice last used for `direction` (null before the first call).
  const std::shared_ptr<const Choice>& choice(Direction direction) const;
  Context& context() { return context_; }

 private:
  struct Slot {
    std::shared_ptr<const Choice> choice;
    ConvDesc desc;
  };
  std::shared_ptr<const Choice> choose(const ConvDesc& desc, Direction direction);

  Context context_;
  std::array<Slot, 3> slots_;
};

}  // namespace dnnx
