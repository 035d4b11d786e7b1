#pragma once
// Convolutions as a column matrix and a matrix product (Note [im2col candidates] in
// conv_im2col.cpp): im2col copies what every kernel tap reads into the workspace, and the
// convolution is then the 1x1 convolution of that matrix, one of the gemm candidates' products
// (Note [gemm candidates] in conv_gemm.cpp); bwd_data sums the product's result back (col2im).

#include <dnnx/algo.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/conv_gemm.hpp"
#include "backends/cudnn/kernels/im2col.hpp"
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

/// A convolution direction as a column matrix and a product, in `passes` passes over as many
/// equal parts of the batch (col_desc's batch each).
struct Im2colForm {
  ConvDesc col_desc;                   ///< the 1x1 convolution over one pass's column matrix
  GemmForm gemm;                       ///< its product (gemm_form(col_desc, direction, ...))
  GemmForm accumulating;               ///< the same adding to its output (beta 1): bwd_weights
  kernels::im2col::Geometry geometry;  ///< one pass's column matrix
  std::size_t col_bytes = 0;           ///< one pass's column matrix (256-byte aligned)
  std::int64_t passes = 1;
};

/// The column matrix's cap: a pass takes the largest part of the batch that fits (Note [im2col
/// candidates]).
inline constexpr std::size_t im2col_bytes_max = std::size_t{1} << 30;

/// The form of (desc, direction), its product packed or not, or nullopt with `why` set where
/// there is none (grouped, already a 1x1 product, one sample's column matrix over `cap`, no
/// packed form).
std::optional<Im2colForm> im2col_form(const ConvDesc& desc, Direction direction, std::string& why,
                                      bool packed = false, std::size_t cap = im2col_bytes_max);

/// What pass `pass` runs: where im2col reads (fwd, bwd_weights) or col2im writes (bwd_data) for
/// its part of the batch, and the arguments of its product (the 1x1 convolution of
/// form.col_desc) over `col` (the column matrix's tensor) and that part of the convolution's
/// tensors, whose views live in `part`.
struct Im2colPass {
  const void* src = nullptr;  ///< fwd, bwd_weights: what im2col reads
  void* diff_src = nullptr;   ///< bwd_data: what col2im writes
  detail::ConvArgs product;
};
Im2colPass im2col_pass(const ConvDesc& desc, Direction direction, const Im2colForm& form,
                       const detail::ConvArgs& args, std::int64_t pass, Tensor& col, Tensor& part,
                       Device device, const ErrorContext& context);

/// "cudnn:im2col:<matmul id>", "cudnn:im2col:packed:<matmul id>"; the inverse (the matmul id
/// and whether it is packed), or nullopt when `id` is not an im2col candidate's.
std::string im2col_id(std::string_view matmul_id, bool packed);
std::optional<GemmInnerId> im2col_inner_id(std::string_view id);

/// The listing entry of the im2col candidate wrapping matmul candidate `inner` of `form`'s
/// product; its workspace is the column matrix's, the packing's and the product's.
AlgoInfo im2col_info(const AlgoInfo& inner, const Im2colForm& form);

/// The one entry listed in their place while the im2col candidates are off for a desc's dtype or
/// its column matrix is over the cap (the caller sets the reason), and its id.
AlgoInfo im2col_off_info();
inline constexpr std::string_view im2col_off_id = "cudnn:im2col";

/// The plan of the convolution that runs matmul plan `product` (of form.gemm's product) on its
/// column matrix, pass by pass; bwd_weights in several passes runs `accumulating` (of
/// form.accumulating's) after the first, null otherwise.
std::shared_ptr<detail::ConvPlan> make_im2col_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, Im2colForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> accumulating);

}  // namespace dnnx::cudnn
