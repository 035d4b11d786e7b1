#pragma once
// Convolutions as Winograd's F(4x4, 3x3) (Note [winograd candidates] in conv_winograd.cpp): the
// tiles and filters transformed by dnnx's kernels (kernels/winograd.hpp), the 36 products of the
// transformed tensors as one batched product of the cudnn matmul backend, the result transformed
// back.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/matmul.hpp>

#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/kernels/winograd.hpp"
#include "backends/cudnn/runtime.hpp"
#include "core/backend.hpp"
#include "core/matmul_args.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dnnx::cudnn {

/// A convolution direction as transforms and a batched product, in `passes` passes over as many
/// equal parts of the batch (geometry.batch samples each).
struct WinogradForm {
  kernels::winograd::Geometry geometry;  ///< one pass
  /// The 36 products of one pass (bwd_weights: 36 x geometry.splits, one per point and run of
  /// tiles), and (bwd_weights) the same adding to its output, for the passes after the first.
  MatmulDesc product, accumulating;
  /// Workspace parts, each 256-byte aligned: the transformed filters (bwd_weights: their
  /// partial gradients, one per run of tiles), the transformed input tiles and the products'
  /// results (bwd_weights: the transformed gradient tiles).
  std::size_t filter_bytes = 0, in_bytes = 0, out_bytes = 0;
  std::int64_t passes = 1;
};

/// The workspace parts the product's operands are (WinogradForm's filter, in and out):
///   fwd, bwd_data  channels_first U V -> M (filter, in -> out), channels_last V U^T -> M (in,
///                  filter -> out);
///   bwd_weights    Z V^T -> dU (out, in -> filter; channels_last Z^T V).
enum class WinogradPart { filter, in, out };
struct WinogradOperands {
  WinogradPart a, b, dst;
};
WinogradOperands winograd_operands(const WinogradForm& form, Direction direction);

/// The cap on the transformed tensors (filters, input tiles, products) of one pass: a pass takes
/// the largest part of the batch whose tensors fit (Note [winograd candidates]).
inline constexpr std::size_t winograd_bytes_max = std::size_t{1} << 30;

/// The form of (desc, direction), or nullopt with `why` set where there is none (not an f32
/// 2-D ungrouped 3x3 convolution of stride 1 whose every output and tap reach the input, a
/// dilation that leaves most tile slots empty, or one sample's transformed tensors over `cap`).
std::optional<WinogradForm> winograd_form(const ConvDesc& desc, Direction direction,
                                          std::string& why, std::size_t cap = winograd_bytes_max);

/// "cudnn:winograd:<matmul id>"; the inverse (the matmul id), or nullopt when `id` is not a
/// Winograd candidate's.
std::string winograd_id(std::string_view matmul_id);
std::optional<std::string> winograd_inner_id(std::string_view id);

/// The listing entry of the Winograd candidate wrapping matmul candidate `inner` of `form`'s
/// product: its id, and the transformed tensors' workspace added to the product's.
AlgoInfo winograd_info(const AlgoInfo& inner, const WinogradForm& form);

/// The one entry listed in their place where the setting keeps them out or the convolution has
/// no form (the caller sets the reason), and its id.
AlgoInfo winograd_off_info();
inline constexpr std::string_view winograd_off_id = "cudnn:winograd";

/// The plan of the convolution that runs matmul plan `product` (of form.product) between the
/// transforms, pass by pass; bwd_weights in several passes runs `accumulating` (of
/// form.accumulating) after the first, null otherwise.
std::shared_ptr<detail::ConvPlan> make_winograd_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, WinogradForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating);

}  // namespace dnnx::cudnn
