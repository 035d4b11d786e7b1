#pragma once
// Convolutions that are matrix products, as cuBLASLt / cuBLAS candidates (Note [gemm
// candidates] in conv_gemm.cpp): a 1x1 convolution of stride 1, no padding and one group runs as
// one of the cudnn matmul backend's candidates on views of the convolution's tensors.

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/ops/matmul.hpp>

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

/// The matrix product a convolution direction is: the matmul desc and the matmul direction.
struct GemmForm {
  MatmulDesc desc;
  Direction direction = Direction::fwd;
  /// Note [packed gemm]: an NCHW bwd_weights as one product over the batch, its diff_dst and src
  /// first set side by side in the workspace ({channels, samples * positions} each).
  bool packed = false;
  std::int64_t samples = 1, positions = 1;  // packed: the batch and the spatial size
  /// packed: src is given in the packed layout already ({channels, samples * positions}, as
  /// im2col writes it: Note [im2col candidates]), so only diff_dst is packed.
  bool src_packed = false;
};

/// The product (desc, direction) is, or nullopt with `why` set when the convolution is not one;
/// with `packed`, its packed form (Note [packed gemm]; `src_packed` as in GemmForm), or nullopt
/// with `why` where it has none.
std::optional<GemmForm> gemm_form(const ConvDesc& desc, Direction direction, std::string& why,
                                  bool packed = false, bool src_packed = false);

/// `bytes` rounded up to the 256-byte alignment each part of a candidate's workspace starts at
/// where the candidate carves it into buffers (gemm, im2col, padded, fold, stacked and phase
/// plans).
std::size_t workspace_aligned(std::size_t bytes);

/// The base of the workspace a plan carves its buffers from, each aligned as workspace_aligned()
/// aligns: throws as check_workspace() does when it is smaller than `needed`, and BackendFailure
/// naming `plans` when its address is not so aligned.
std::byte* carved_workspace(const detail::Workspace& workspace, std::size_t needed,
                            std::string_view plans, const ErrorContext& context);

/// Bytes of the workspace a packed form's matrices take before the product's own (0 for a form
/// that is not packed; diff_dst's alone when src_packed), and where src's packed matrix starts in
/// it (diff_dst's at 0).
std::size_t gemm_packing_bytes(const GemmForm& form);
std::size_t gemm_packed_src_offset(const GemmForm& form);

/// At most this many of the matmul backend's supported candidates are listed per direction, in
/// its order (cuBLASLt's heuristic first).
inline constexpr std::size_t gemm_candidates_max = 8;
/// And at most this many of its split-K variants of those (Note [split-K variants] in matmul.cpp).
inline constexpr std::size_t gemm_variants_max = 16;

/// "cudnn:gemm:<matmul id>" for a matmul candidate's id, "cudnn:gemm:packed:<matmul id>" for
/// one of the packed form; the inverse, or nullopt when `id` is not a gemm candidate's.
struct GemmInnerId {
  std::string matmul_id;
  bool packed = false;
};
std::string gemm_id(std::string_view matmul_id, bool packed = false);
std::optional<GemmInnerId> gemm_inner_id(std::string_view id);
/// The same for any `head` ("cudnn:gemm:", "cudnn:im2col:"): "<head>[packed:]<matmul id>".
std::string product_id(std::string_view head, std::string_view matmul_id, bool packed);
std::optional<GemmInnerId> product_inner_id(std::string_view head, std::string_view id);

/// The listing entry of the gemm candidate wrapping matmul candidate `inner` of `form`: its id,
/// and the packing's workspace added to the product's.
AlgoInfo gemm_info(const AlgoInfo& inner, const GemmForm& form);

/// The one entry listed while the gemm candidates are off (DNNX_CUDNN_CONV_GEMM), with the reason,
/// and its id.
AlgoInfo gemm_off_info();
inline constexpr std::string_view gemm_off_id = "cudnn:gemm";

/// Views of the convolution's tensors as the product's matrices.
struct GemmViews {
  Tensor a, b, dst;
};

/// The arguments of `form`'s product (gemm_form(desc, direction)) over the memory of the
/// convolution's arguments `args`, on `device`; the views live in `views`, and a view already
/// over the same memory is kept (a plan's calls on the same tensors make none). A packed form
/// reads its two inputs from `packed` (gemm_packing_bytes() of memory holding them as Note
/// [packed gemm] lays them out) and writes diff_weights. Throws InvalidArgument naming a missing
/// tensor.
detail::MatmulArgs gemm_args(const ConvDesc& desc, Direction direction, const GemmForm& form,
                             const detail::ConvArgs& args, Device device, GemmViews& views,
                             const ErrorContext& context, void* packed = nullptr);

/// The plan running matmul plan `inner` (of `form`, gemm_form(desc, direction)) for the
/// convolution.
std::shared_ptr<detail::ConvPlan> make_gemm_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, GemmForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> inner);

}  // namespace dnnx::cudnn
