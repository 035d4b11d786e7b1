#pragma once
/// \file
/// Forward convolution with a fused epilogue:
///   dst = act(conv(src, weights) + bias + residual_scale * residual)
/// where bias (one value per output channel) and residual (a tensor of dst's dims) are optional
/// and act is the identity or relu. The convolution is ConvDesc's (1-, 2-, 3-D, groups, dilation,
/// asymmetric padding, f32/f16/bf16 with f32 accumulation, NCHW or NHWC); the epilogue is
/// computed in f32 (or wider) on the f32 convolution result and rounded once to the dtype where
/// the implementation fuses it (docs/ops/conv_fused.md).
///
/// Selection follows convolution's forward policy (TuneOptions::fwd, DNNX_CONV_FWD_ALGO): the
/// candidates are fused implementations (oneDNN post-ops, cuDNN graph-API operation graphs and
/// cudnnConvolutionBiasActivationForward) and "unfused:<conv id>" ones that run the backend's
/// heuristic convolution and then the epilogue as a separate pass. The choice-cache key differs
/// from plain convolution's through ConvFusedDesc::key().

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// The activation applied last by a fused convolution.
enum class FusedActivation : std::uint8_t {
  identity,  ///< x
  relu,      ///< max(x, 0)
};
/// "identity", "relu".
std::string_view to_string(FusedActivation activation);
/// Parses "identity" (also "none") and "relu"; throws InvalidArgument listing them.
FusedActivation parse_fused_activation(std::string_view text);

/// What a fused forward convolution computes. Plain data: comparable, hashable, printable; it is
/// the cache key, the error context and the test-case name.
struct ConvFusedDesc {
  ConvDesc conv;          ///< the convolution (src, weights -> dst)
  bool bias = false;      ///< add a bias of conv.bias_dims() (O values), broadcast per channel
  bool residual = false;  ///< add residual_scale * residual, a tensor of conv.dst_dims()
  /// Scale of the residual (finite); must stay 1 when `residual` is false.
  float residual_scale = 1;
  FusedActivation activation = FusedActivation::relu;  ///< applied after the additions

  /// Throws InvalidArgument naming the first bad field and its value (the convolution's fields
  /// as ConvDesc::validate() names them).
  void validate() const;

  Dims src_dims() const { return conv.src_dims(); }          ///< N, C, spatial...
  Dims weights_dims() const { return conv.weights_dims(); }  ///< O, C/groups, kernel...
  Dims dst_dims() const { return conv.dst_dims(); }          ///< N, O, output spatial...
  Dims bias_dims() const { return conv.bias_dims(); }        ///< O
  Dims residual_dims() const { return conv.dst_dims(); }     ///< dst's dims

  /// The `dnnx` CLI line reproducing this case, e.g. `dnnx profile conv_fused --input
  /// 64x64x56x56 --weights 256x64x1x1 ... --bias --residual --activation relu --direction fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part): conv.key() and the epilogue,
  /// e.g. "... +bias +residual*0.5 relu".
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ConvFusedDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ConvFusedDesc& desc);

/// dst = act(conv(src, weights) + bias + residual_scale * residual). `bias` must be given exactly
/// when desc.bias is set (a dense vector of O values), `residual` exactly when desc.residual is
/// set (dst's dims, dtype and layout). `residual` may be `dst` itself (the same memory and
/// strides: in place); any other overlap of dst with an input is an InvalidArgument. Returns the
/// choice that ran.
std::shared_ptr<const Choice> conv_fused_fwd(Context& context, const ConvFusedDesc& desc,
                                             const Tensor& src, const Tensor& weights,
                                             const Tensor* bias, const Tensor* residual,
                                             Tensor& dst);

/// Every candidate of the context's backend (fused and unfused), with support status, workspace
/// and determinism — nothing is run. Priority order: the first supported one is the heuristic
/// pick. The op has only the forward direction: any other throws InvalidArgument.
std::vector<AlgoInfo> conv_fused_list(Context& context, const ConvFusedDesc& desc,
                                      Direction direction = Direction::fwd);
/// The choice convolution's forward policy makes for `desc` (may time candidates; cached).
std::shared_ptr<const Choice> conv_fused_select(Context& context, const ConvFusedDesc& desc,
                                                Direction direction = Direction::fwd);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult conv_fused_profile(Context& context, const ConvFusedDesc& desc,
                                 Direction direction = Direction::fwd);

}  // namespace dnnx
