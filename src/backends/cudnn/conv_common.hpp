#pragma once
// What the legacy and the graph-API halves of the cudnn convolution share: the desc turned into
// cuDNN's tensor geometry, dtypes, error contexts and the tensors a direction binds.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/kernels/spatial.hpp"
#include "core/backend.hpp"

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cudnn {

// Note [cuDNN geometry]
// cuDNN convolves 4-D (2 spatial dims) and 5-D (3 spatial dims) tensors. A 1-D convolution is run
// as a 2-D one with height 1 (kernel 1, stride 1, no padding, dilation 1 along it); the bytes are
// the same in either layout. Strides are the desc's dense strides, so channels_last tensors are
// described as NCHW dims with NHWC strides, which both APIs accept; weights in channels_last are
// OHWI (cuDNN's CUDNN_TENSOR_NHWC filter format).
struct Geometry {
  int nb_dims = 4;  ///< 4 or 5
  int spatial = 2;  ///< nb_dims - 2
  std::array<std::int64_t, 5> src{}, src_strides{};
  std::array<std::int64_t, 5> dst{}, dst_strides{};
  std::array<std::int64_t, 5> weights{}, weights_strides{};
  std::array<std::int64_t, 5> bias{}, bias_strides{};  ///< 1 x O x 1 x 1 [x 1]
  std::array<std::int64_t, 3> pad_before{}, pad_after{}, stride{}, dilation{};
  bool symmetric_padding = true;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  /// Accumulation type: always f32 (Note [f32 accumulation]).
  cudnnDataType_t compute_type = CUDNN_DATA_FLOAT;
};

Geometry conv_geometry(const ConvDesc& desc);

/// desc's spatial sizes as dnnx's own kernels take them (kernels/spatial.hpp: D, H, W, 1-D and 2-D
/// lifted with leading dims of size 1), each value clamped to `cap` (at most INT_MAX): a caller
/// that has not bounded a value passes its kernels' bound + 1, which they then reject.
kernels::SpatialDims kernel_dims(const ConvDesc& desc, std::int64_t cap);

/// The product of the first g.nb_dims entries of `dims` (a tensor of `g`).
std::int64_t elements_of(const Geometry& g, const std::array<std::int64_t, 5>& dims);

/// Whether every dim and stride of g's src, dst and weights fits the legacy API's int.
bool fits_legacy_int(const Geometry& g);
inline constexpr const char* legacy_range_reason =
    "a dim or stride exceeds INT_MAX, which legacy descriptors cannot hold";

/// Throws Unsupported (legacy_range_reason) unless fits_legacy_int(g): descriptors of crops and
/// frames of g's tensors keep their strides.
void check_legacy_range(const Geometry& g, const ErrorContext& context);

/// The first g.nb_dims entries of `values` (dims or strides of `g`) as int, the legacy API's type.
inline std::array<int, 5> narrow_to_int(const Geometry& g,
                                        const std::array<std::int64_t, 5>& values) {
  std::array<int, 5> out{};
  for (int i = 0; i < g.nb_dims; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<int>(values[static_cast<std::size_t>(i)]);
  return out;
}

/// cudnnSetTensorNdDescriptor of `descriptor` to `dims` and `strides` of `g`; `what` is the
/// action a failure reports ("describing src").
inline void set_tensor_descriptor(const TensorDescriptor& descriptor, const Geometry& g,
                                  const std::array<std::int64_t, 5>& dims,
                                  const std::array<std::int64_t, 5>& strides,
                                  const ErrorContext& context, const char* what) {
  const std::array<int, 5> narrow_dims = narrow_to_int(g, dims),
                           narrow_strides = narrow_to_int(g, strides);
  DNNX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(descriptor.get(), g.data_type, g.nb_dims,
                                              narrow_dims.data(), narrow_strides.data()),
                   context, what);
}

/// CUDNN_DATA_FLOAT / HALF / BFLOAT16.
cudnnDataType_t data_type(DType dtype);

/// Context for errors about (desc, direction, implementation).
ErrorContext conv_context(const ConvDesc& desc, Direction direction, std::string implementation);

/// The three tensors of a direction in the order (read, read, written):
///   fwd: src, weights -> dst; bwd_data: diff_dst, weights -> diff_src;
///   bwd_weights: src, diff_dst -> diff_weights.
struct BoundTensors {
  const void* first = nullptr;
  const void* second = nullptr;
  void* output = nullptr;
};
/// Throws InvalidArgument naming the missing tensor.
BoundTensors bind_tensors(const detail::ConvArgs& args, Direction direction,
                          const ErrorContext& context);

/// The three tensors of a direction by role (bind_tensors()'s order turned into roles): x = src /
/// diff_src, y = dst / diff_dst, w = weights / diff_weights.
struct TensorRoles {
  void* x = nullptr;
  void* y = nullptr;
  void* w = nullptr;
};
TensorRoles tensor_roles(const BoundTensors& t, Direction direction);

/// Runs `plan`, a plan of `desc`, in `direction` on dense tensors of desc's layout at `at` on
/// `device`, its workspace the first plan.algo().workspace_bytes at `workspace` (the wrapping
/// plans' inner plan: channel-padded, folded).
void execute_at(detail::ConvPlan& plan, const ConvDesc& desc, Direction direction,
                const TensorRoles& at, const Device& device, void* workspace);

/// The geometry's index of desc's spatial dim i (a 1-D convolution is lifted to 2-D with its
/// dim second: Note [cuDNN geometry]).
std::size_t geometry_dim(const ConvDesc& desc, int i);

/// Throws InvalidArgument when `workspace` is smaller than `needed` or null while needed.
void check_workspace(const detail::Workspace& workspace, std::size_t needed,
                     const ErrorContext& context);

/// Whether `list` contains `item`.
bool contains(const std::vector<std::string>& list, const std::string& item);

/// The unsupported entry a listing shows in place of one kind of candidate that is not listed
/// (turned off, or nothing of that kind can run): `id` the kind's off id, `note` its note.
AlgoInfo off_entry(std::string_view id, std::string name, std::string reason, std::string note);

/// What the cudnn convolution backends of this process have worked out about candidates, for
/// tests and verbose output: listings (every candidate of a desc and direction, Note [cudnn
/// candidate order]; a channel-padded desc's listing lists the padded desc too) and single
/// descriptions (one id without a listing, Note [re-validating persisted choices] in
/// src/ops/dispatch.cpp).
struct ConvListingCounts {
  std::uint64_t listed = 0;
  std::uint64_t described = 0;
};
ConvListingCounts conv_listing_counts();

/// Names of the switches that reasons mention.
inline constexpr const char* tf32_variable = "DNNX_ALLOW_TF32";
inline constexpr const char* reduced_precision_variable = "DNNX_ALLOW_REDUCED_PRECISION_REDUCTION";
inline constexpr const char* runtime_compiled_variable = "DNNX_CUDNN_RUNTIME_COMPILED";
inline constexpr const char* compile_budget_variable = "DNNX_CUDNN_COMPILE_BUDGET";
inline constexpr const char* build_threads_variable = "DNNX_CUDNN_BUILD_THREADS";
inline constexpr const char* knob_search_variable = "DNNX_CUDNN_KNOB_SEARCH";
inline constexpr const char* im2col_variable = "DNNX_CUDNN_CONV_IM2COL";
inline constexpr const char* winograd_variable = "DNNX_CUDNN_CONV_WINOGRAD";
inline constexpr const char* taps_variable = "DNNX_CUDNN_CONV_TAPS";
inline constexpr const char* frames_variable = "DNNX_CUDNN_CONV_FRAMES";
inline constexpr const char* folds_variable = "DNNX_CUDNN_CONV_FOLDS";
inline constexpr const char* stacked_variable = "DNNX_CUDNN_CONV_STACKED";
inline constexpr const char* phases_variable = "DNNX_CUDNN_CONV_PHASES";
inline constexpr const char* knob_variants_variable = "DNNX_CUDNN_KNOB_VARIANTS";
inline constexpr const char* kernels_variable = "DNNX_CUDNN_CONV_KERNELS";

/// dnnx's own convolution kernels for desc and direction, in their order: the depthwise ones
/// (Note [depthwise candidates]), the grouped one (Note [grouped candidates]), then the
/// narrow-channel one (Note [narrow-channel candidates]). `listed` false
/// (DNNX_CUDNN_CONV_KERNELS=0): each of them unsupported, the reason naming the variable.
std::vector<AlgoInfo> kernel_candidates(const ConvDesc& desc, Direction direction, bool listed);

}  // namespace dnnx::cudnn
