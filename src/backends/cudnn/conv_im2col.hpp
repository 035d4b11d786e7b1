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
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dnnx::cudnn {

/// A convolution direction as a column matrix and a product.
struct Im2colForm {
  ConvDesc col_desc;                   ///< the 1x1 convolution over the column matrix
  GemmForm gemm;                       ///< its product (gemm_form(col_desc, direction, ...))
  kernels::im2col::Geometry geometry;  ///< the column matrix's layout
  std::size_t col_bytes = 0;           ///< the column matrix (256-byte aligned)
};

/// The form of (desc, direction), its product packed or not, or nullopt with `why` set where
/// there is none (grouped, already a 1x1 product, a column matrix over im2col_bytes_max, no
/// packed form).
std::optional<Im2colForm> im2col_form(const ConvDesc& desc, Direction direction, std::string& why,
                                      bool packed = false);

/// The column matrix's cap: larger ones list no im2col candidate.
inline constexpr std::size_t im2col_bytes_max = std::size_t{1} << 30;

/// "cudnn:im2col:<matmul id>", "cudnn:im2col:packed:<matmul id>"; the inverse (the matmul id
/// and whether it is packed), or nullopt when `id` is not an im2col candidate's.
std::string im2col_id(std::string_view matmul_id, bool packed);
std::optional<GemmInnerId> im2col_inner_id(std::string_view id);

/// The listing entry of the im2col candidate wrapping matmul candidate `inner` of `form`'s
/// product; its workspace is the column matrix's, the packing's and the product's.
AlgoInfo im2col_info(const AlgoInfo& inner, const Im2colForm& form);

/// The one entry listed while the im2col candidates are off for desc's dtype, with the reason,
/// and its id.
AlgoInfo im2col_off_info();
inline constexpr std::string_view im2col_off_id = "cudnn:im2col";

/// The plan of the convolution that runs matmul plan `product` (of form.gemm's product) on its
/// column matrix.
std::shared_ptr<detail::ConvPlan> make_im2col_plan(
    std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction, Im2colForm form,
    std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> product);

}  // namespace dnnx::cudnn
