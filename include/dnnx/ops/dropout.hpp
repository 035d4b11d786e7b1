#pragma once
/// \file
/// Dropout (torch.nn.functional.dropout): in training, each element is kept with probability
/// 1 - p and scaled by 1 / (1 - p), the mask drawn from a Generator and kept in the forward's
/// SavedState for the backward; in inference, the identity.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/random.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dnnx {

/// What a dropout computes. Plain data: comparable, hashable, printable; the cache key.
///
///   fwd:          dst = src (inference)
///   fwd_training: dst = src * m, m = keep ? 1 / (1 - p) : 0, keep = (uniform u >= p), u the value
///                 fill(uniform(0, 1)) would draw for the element from the same generator state
///                 (Note [dropout mask] in src/core/dropout_desc.cpp); the mask goes to the
///                 SavedState
///   bwd_data:     diff_src = diff_dst * m, m from the SavedState the forward filled
///
/// As in PyTorch, a dropped element is src * 0 (NaN and inf stay NaN), and p = 1 drops every
/// element (dst = src * 0).
struct DropoutDesc {
  Dims dims;                               ///< rank 1 to 5, entries >= 0
  float p = 0.5f;                          ///< probability of dropping an element, in [0, 1]
  DType dtype = DType::f32;                ///< of every tensor (f32, f16, bf16)
  Layout layout = Layout::channels_first;  ///< memory order; the mask follows the logical index
  /// The mask must be dnnx's Philox stream (the same bits on every backend for the same
  /// generator state). false also admits cuDNN's own dropout, whose mask comes from cuDNN's RNG
  /// state (docs/ops/dropout.md).
  bool reproducible = true;

  /// The desc of a dropout on `tensor` (its dims, dtype and dense layout) with probability `p`.
  static DropoutDesc of(const Tensor& tensor, float p);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// 1 / (1 - p) computed in f32 as PyTorch does (0 when p = 1): the scale of kept elements.
  float scale() const;
  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile dropout --dims 64x4096 --p 0.1 --dtype f16 --layout nchw --direction
  /// fwd_training`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const DropoutDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const DropoutDesc& desc);

/// Inference: dst = src. dst must not overlap src. Returns the choice that ran.
std::shared_ptr<const Choice> dropout_fwd(Context& context, const DropoutDesc& desc,
                                          const Tensor& src, Tensor& dst);
/// Training: draws the mask from `generator` (advancing it by ceil(numel / 4) Philox blocks once
/// the call ran), dst = src * mask / (1 - p), and keeps the mask in `state` for dropout_bwd. dst
/// must not overlap src. Returns the choice that ran.
std::shared_ptr<const Choice> dropout_fwd_training(Context& context, const DropoutDesc& desc,
                                                   Generator& generator, const Tensor& src,
                                                   Tensor& dst, SavedState& state);
/// diff_src = diff_dst * mask / (1 - p), the mask read from the `state` a dropout_fwd_training of
/// the same desc filled (InvalidArgument otherwise). diff_src must not overlap diff_dst.
std::shared_ptr<const Choice> dropout_bwd(Context& context, const DropoutDesc& desc,
                                          const Tensor& diff_dst, Tensor& diff_src,
                                          const SavedState& state);

/// Every candidate of the context's backend for (desc, direction), nothing run.
std::vector<AlgoInfo> dropout_list(Context& context, const DropoutDesc& desc, Direction direction);
/// The choice the context's policy makes (may time candidates; cached).
std::shared_ptr<const Choice> dropout_select(Context& context, const DropoutDesc& desc,
                                             Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult dropout_profile(Context& context, const DropoutDesc& desc, Direction direction);

}  // namespace dnnx
