// Parity of every listed candidate of every non-reference backend with the reference backend,
// for every direction of every case of the conv case table (STYLE.md "Tests"), through the
// parity runner (support/parity.hpp).
//
// Per (backend, case, direction): random inputs in [-1, 1) rounded to the dtype; outputs are
// compared elementwise within Note [conv tolerances], relative to the sum of |products| behind
// each element. Unsupported candidates are counted, reported, and each must carry one of the
// reasons of Note [expected unsupported]; anything else fails. The cpu backend must run every
// case; a backend that supports no candidate must refuse the case with Unsupported.

#include <dnnx/dnnx.hpp>

#include "ops/conv_cases.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <string_view>

namespace dnnx::test {
namespace {

// Seed of the random part of the table: changing it redraws every random case.
constexpr std::uint64_t random_table_seed = 20240611;
constexpr int random_table_size = 40;
// ResNet-50 layers in the default suite: those of at most this many MACs at batch 1, which is
// l1.reduce.first (56x56 64->64 1x1, 12.8 M MACs) alone: oneDNN's ref implementation needs ~16 s
// per direction for the next cheapest (51 M MACs) on 2 cores, and it runs twice (determinism).
// Every layer of bench/shapes/resnet50.txt at batch 2 runs with DNNX_PARITY_RESNET50_ALL=1
// (instantiated as ResNet50All/*; ctest test parity.resnet50_all with -DDNNX_TEST_RESNET50_ALL=ON).
constexpr double resnet50_default_max_macs = 13e6;

std::vector<ConvCase> resnet50_all_cases() {
  const char* all = std::getenv("DNNX_PARITY_RESNET50_ALL");
  if (all == nullptr || std::string_view(all) != "1") return {};
  return conv_resnet50_cases(2, std::numeric_limits<double>::infinity());
}

// What the cudnn entries of Note [expected unsupported] ask of a desc.

// The elements of a tensor of `dims`, as a double (no overflow near the size limits below).
double elements(const Dims& dims) {
  double count = 1;
  for (const std::int64_t size : dims) count *= static_cast<double>(size);
  return count;
}

bool asymmetric_padding(const ConvDesc& desc) {
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (desc.pad_before[s] != desc.pad_after[s]) return true;
  }
  return false;
}

// A dim or stride over INT_MAX (of the desc's tensors, or of a crop, frame or region of them,
// which keep the whole tensors' strides) needs a tensor of more than INT_MAX elements.
bool tensor_over_int_max(const ConvDesc& desc) {
  constexpr double int_max = std::numeric_limits<int>::max();
  return elements(desc.src_dims()) > int_max || elements(desc.dst_dims()) > int_max ||
         elements(desc.weights_dims()) > int_max;
}

// Whether desc can reach a size limit of dnnx's depthwise or narrow-channel kernels (their
// 32-bit index arithmetic): a src or dst of 2^31 elements or more, a kernel of over 2^19
// positions, kernel volume x ceil(out_channels / 32) of 2^26 or more, a stride product over
// 65535, or a dim whose input, padding, stride and dilated kernel add up to 2^29.
bool beyond_kernel_sizes(const ConvDesc& desc) {
  constexpr double two_29 = 536870912.0;
  constexpr double two_31 = 2147483648.0;
  if (elements(desc.src_dims()) >= two_31 || elements(desc.dst_dims()) >= two_31) return true;
  double kernel_volume = 1;
  double stride_product = 1;
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    kernel_volume *= static_cast<double>(desc.kernel[s]);
    stride_product *= static_cast<double>(desc.stride[s]);
    const double reach =
        static_cast<double>(desc.input[s]) +
        static_cast<double>(desc.pad_before[s] + desc.pad_after[s]) +
        static_cast<double>(desc.stride[s] + desc.kernel[s]) +
        static_cast<double>(desc.dilation[s]) * static_cast<double>(desc.kernel[s]);
    if (reach >= two_29) return true;
  }
  const double chunks = static_cast<double>((desc.out_channels + 31) / 32);
  return kernel_volume > 524288.0 || kernel_volume * chunks >= 67108864.0 || stride_product > 65535;
}

// Note [narrow-channel candidates]: fwd, bwd_data and bwd_weights of an ungrouped f16/bf16
// channels_last convolution with at most 8 input channels.
bool narrow_domain(const ConvDesc& desc, Direction) {
  return desc.groups == 1 && desc.in_channels <= 8 && desc.dtype != DType::f32 &&
         desc.layout == Layout::channels_last;
}

// Whether a narrow-channel kernel's input tile of `halves` may not hold the rows that 16 output
// positions read (kernels/narrow.hpp): at most every kernel row x (((16 - 1) x stride + (KW - 1)
// x dilation + 1) x C + 7, rounded up to a multiple of 8) halves (bwd_weights: 6144, fwd: 4096).
bool beyond_narrow_tile(const ConvDesc& desc, double halves) {
  const int last = desc.spatial_dims - 1;
  const auto w = static_cast<std::size_t>(last);
  double rows = 1;
  for (int i = 0; i < last; ++i)
    rows *= static_cast<double>(desc.kernel[static_cast<std::size_t>(i)]);
  const double span =
      15.0 * static_cast<double>(desc.stride[w]) +
      static_cast<double>(desc.kernel[w] - 1) * static_cast<double>(desc.dilation[w]) + 1.0;
  return rows * (span * static_cast<double>(desc.in_channels) + 14.0) > halves;
}

// Kernel volume x input channels: the narrow-channel forward kernel's reduction.
double narrow_columns(const ConvDesc& desc) {
  double columns = static_cast<double>(desc.in_channels);
  for (int i = 0; i < desc.spatial_dims; ++i)
    columns *= static_cast<double>(desc.kernel[static_cast<std::size_t>(i)]);
  return columns;
}

// Note [grouped candidates]: fwd and bwd_data of a channels_last f16 or bf16 grouped (not
// depthwise) convolution of 4, 8, 16 or 32 channels per group in and out, a channel count that is
// a multiple of 32, a 3x3 kernel of a 2-D convolution (or a 3-D one of kernel depth 1, depth
// stride 1, no depth padding), a stride of 1 or 2 along H and W, no dilation.
bool grouped_domain(const ConvDesc& desc, Direction direction) {
  if (direction == Direction::bwd_weights || desc.groups < 2 || desc.groups == desc.in_channels ||
      desc.layout != Layout::channels_last || desc.dtype == DType::f32)
    return false;
  const std::int64_t per_group = desc.in_channels / desc.groups;
  if (desc.out_channels / desc.groups != per_group ||
      (per_group != 4 && per_group != 8 && per_group != 16 && per_group != 32) ||
      desc.in_channels % 32 != 0)
    return false;
  const int d = desc.spatial_dims;
  if (d < 2) return false;
  if (d == 3 && (desc.kernel[0] != 1 || desc.stride[0] != 1 || desc.pad_before[0] != 0 ||
                 desc.pad_after[0] != 0))
    return false;
  const auto h = static_cast<std::size_t>(d - 2), w = static_cast<std::size_t>(d - 1);
  return desc.kernel[h] == 3 && desc.kernel[w] == 3 && desc.dilation[h] == 1 &&
         desc.dilation[w] == 1 && desc.stride[h] <= 2 && desc.stride[w] <= 2;
}

// Note [winograd candidates]: an ungrouped f32 2-D 3x3 convolution of stride 1.
bool winograd_shape(const ConvDesc& desc) {
  return desc.dtype == DType::f32 && desc.spatial_dims == 2 && desc.groups == 1 &&
         desc.kernel[0] == 3 && desc.kernel[1] == 3 && desc.stride[0] == 1 && desc.stride[1] == 1;
}

// Note [frame candidates]: a 3-D convolution whose kernel has a depth of 1 and no depth padding.
bool has_frames(const ConvDesc& desc) {
  return desc.spatial_dims == 3 && desc.kernel[0] == 1 && desc.pad_before[0] == 0 &&
         desc.pad_after[0] == 0;
}

// Note [im2col candidates]: whether one sample's column matrix (C x taps x output positions) is
// over its 1 GiB cap.
bool column_matrix_over_cap(const ConvDesc& desc) {
  double bytes = static_cast<double>(desc.in_channels) * static_cast<double>(size_of(desc.dtype));
  for (int i = 0; i < desc.spatial_dims; ++i) {
    bytes *= static_cast<double>(desc.kernel[static_cast<std::size_t>(i)]) *
             static_cast<double>(desc.output_size(i));
  }
  return bytes > 1073741824.0;
}

// A regex of `parts` joined.
std::regex joined(std::initializer_list<std::string_view> parts) {
  std::string pattern;
  for (const std::string_view part : parts) pattern += part;
  return std::regex(pattern);
}

// What the cudnn entries share: the ids of engine configs (Note [engine candidates] in
// src/backends/cudnn/conv_engine.cpp) and legacy algorithms (Note [legacy candidates] in
// conv_legacy.cpp); cuDNN's refusal, a NOT_SUPPORTED or BAD_PARAM status and its message (an
// internal error, or a failed execution or allocation, is no refusal); why a legacy call of a
// tap region or frame (LegacyStridedConv in conv_legacy.cpp) runs none of its algorithms.
constexpr std::string_view engine_id =
    "cudnn:engine:[0-9]+(:[a-z0-9_]+=-?[0-9]+(,[a-z0-9_]+=-?[0-9]+)*)?";
constexpr std::string_view legacy_id =
    "cudnn:legacy:(fwd|bwd_data|bwd_weights):[a-z0-9_]+:"
    "(default|tensor_op|tensor_op_allow_conversion|fma)";
constexpr std::string_view cudnn_refusal =
    "CUDNN_STATUS_(NOT_SUPPORTED|BAD_PARAM)(_[A-Z_]+)?( \\(|$)";
constexpr std::string_view legacy_refusal =
    "(legacy cuDNN takes one padding per spatial dim; this one is asymmetric|no legacy algorithm "
    "runs these tensors \\(last: (no deterministic algorithm|no math mode dnnx allows|[a-z0-9_]+: "
    "CUDNN_STATUS_(NOT_SUPPORTED|BAD_PARAM)(_[A-Z_]+)?)\\))$";

// Note [expected unsupported]: the only reasons a listed candidate may be unsupported. A reason
// outside this list fails the test, so a backend cannot quietly stop supporting a case.
const std::vector<ExpectedReason<ConvDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ConvDesc>> reasons = {
      // oneDNN implements winograd for few shapes (3x3, stride 1, f32 forward on some ISAs).
      {"onednn: no winograd implementation for the desc",
       std::regex("^onednn:unavailable:winograd$"), std::regex("has no winograd implementation"),
       [](const ConvDesc&, Direction) { return true; }},
      // Native f16/bf16 implementations exist only for some directions on some ISAs (the
      // f32-compute candidates run the rest: Note [f32 compute convolution] in
      // src/backends/onednn/conv_list.cpp); f32 has oneDNN's reference implementations
      // everywhere, so a missing f32 direct algorithm is a bug.
      {"onednn: no native direct implementation for f16/bf16 in this direction",
       std::regex("^onednn:unavailable:direct$"), std::regex("has no direct implementation"),
       [](const ConvDesc& desc, Direction) { return desc.dtype != DType::f32; }},
      // Note [known oneDNN defects] (src/backends/onednn/conv_list.cpp): implementations oneDNN
      // offers that compute wrong results for some descs (all in backward weights); the backend
      // lists them unsupported: jit_bf16 and the AMX kernels (brgconv_bwd_w, jit) with a kernel
      // longer than the input, jit_1x1 on strided nhwc activations with few channels,
      // jit:avx512_core on 3-D strided, front-padded depth; also the f32 implementations inside
      // f32-compute candidates (ids ending in ":f32").
      {"onednn: known oneDNN defect (backward weights)",
       std::regex("^onednn:(jit(_bf16|_1x1)?|brgconv_bwd_w):"), std::regex("known oneDNN defect"),
       [](const ConvDesc&, Direction direction) { return direction == Direction::bwd_weights; }},
      // dnnx's depthwise kernels (Note [depthwise candidates] in
      // src/backends/cudnn/conv_depthwise.cpp): every kernel outside depthwise descs, the
      // unrolled one outside 3x3 / 5x5 / 7x7 windows, channel packs outside channels_last with
      // multiplier 1 (and an even channel count for fwd and bwd_data, those windows for
      // bwd_weights), column strips outside channels_first fwd and bwd_data with those windows,
      // no dilation and their strides.
      {"cudnn: not a depthwise convolution", std::regex("^cudnn:kernel:depthwise:"),
       std::regex("^not a depthwise convolution"),
       [](const ConvDesc& desc, Direction) { return desc.groups != desc.in_channels; }},
      {"cudnn: depthwise kernel variant outside its domain",
       std::regex("^cudnn:kernel:depthwise:(unrolled|channel_packs|strips)$"),
       std::regex("^(the unrolled variant runs 2-D 3x3, 5x5 and 7x7 kernels only|channel packs "
                  "need (the channels_last layout|a channel multiplier of 1|an even channel "
                  "count)|channel packs run bwd_weights for 2-D 3x3, 5x5 and 7x7 kernels only|"
                  "column strips (need the channels_first layout|run fwd and bwd_data only|run "
                  "2-D 3x3, 5x5 and 7x7 kernels only|run kernels without dilation only|run fwd "
                  "at a stride of 1 or 2 along H only|run bwd_data at stride 1 along H and W "
                  "only))"),
       [](const ConvDesc&, Direction) { return true; }},
      // cuDNN's engine configs (Note [engine candidates] in src/backends/cudnn/conv_engine.cpp):
      // support is cuDNN's finalizing of the engine and config (graph_util.cpp, describe_config),
      // which refuses many descs per engine.
      {"cudnn: cuDNN rejects the engine config", joined({"^", engine_id, "$"}),
       joined({"^cuDNN rejects it: ", cudnn_refusal}),
       [](const ConvDesc&, Direction) { return true; }},
      // The one engine entry where cuDNN's graph API rejects the desc itself (conv_engine.cpp,
      // build_graph: the convolution descriptor, the operation or the graph).
      {"cudnn: cuDNN's graph API rejects the desc", std::regex("^cudnn:engine:none$"),
       joined({"^cuDNN's graph API rejects the (convolution descriptor|convolution operation|"
               "operation graph): ",
               cudnn_refusal}),
       [](const ConvDesc&, Direction) { return true; }},
      // Note [TF32] (conv_engine.cpp): without DNNX_ALLOW_TF32, engines noted TENSOR_CORE or
      // DOWN_CONVERT_INPUTS would run f32 on TF32 tensor cores.
      {"cudnn: engine runs f32 on TF32 tensor cores", joined({"^", engine_id, "$"}),
       std::regex("^runs f32 on TF32 tensor cores \\(numerical notes TENSOR_CORE/"
                  "DOWN_CONVERT_INPUTS\\) and TF32 is off \\(set DNNX_ALLOW_TF32=1 to allow "
                  "it\\)$"),
       [](const ConvDesc& desc, Direction) { return desc.dtype == DType::f32; }},
      // Note [legacy candidates] (conv_legacy.cpp, math_exclusion): for f32 without
      // DNNX_ALLOW_TF32 only fma is f32 arithmetic; the tensor_op math modes run TF32, and so may
      // default math on compute capability 8.0 and later.
      {"cudnn: legacy math mode runs f32 on TF32 tensor cores",
       std::regex("^cudnn:legacy:(fwd|bwd_data|bwd_weights):[a-z0-9_]+:"
                  "(default|tensor_op|tensor_op_allow_conversion)$"),
       std::regex(
           "^(runs f32 on TF32 tensor cores and TF32 is off \\(set DNNX_ALLOW_TF32=1 to "
           "allow it\\)|default math may run f32 on TF32 tensor cores on compute "
           "capability [0-9]+\\.[0-9]+ and TF32 is off \\(set DNNX_ALLOW_TF32=1 to allow it; "
           "fma is the f32 math mode\\))$"),
       [](const ConvDesc& desc, Direction) { return desc.dtype == DType::f32; }},
      // Note [TF32], Note [f32 accumulation] (conv_engine.cpp): f16/bf16 engines that accumulate
      // in the storage dtype or need int8x32-reordered filters.
      {"cudnn: engine breaks f32 accumulation (f16/bf16)", joined({"^", engine_id, "$"}),
       std::regex("^(accumulates in (f16|bf16) \\(numerical note REDUCED_PRECISION_REDUCTION\\) "
                  "and dnnx accumulates in f32 \\(set DNNX_ALLOW_REDUCED_PRECISION_REDUCTION=1 "
                  "to allow it\\)|needs int8x32-reordered filters)$"),
       [](const ConvDesc& desc, Direction) { return desc.dtype != DType::f32; }},
      // Note [asymmetric padding engines] (graph_util.cpp): known cuDNN defects, bwd_data engine
      // 50 and bwd_weights engines 1, 18 and 20 with per-side padding.
      {"cudnn: known cuDNN defect (asymmetric padding)",
       std::regex("^cudnn:engine:(1|18|20|50)(:[a-z0-9_]+=-?[0-9]+(,[a-z0-9_]+=-?[0-9]+)*)?$"),
       std::regex("^gives wrong results for asymmetric padding \\(Note \\[asymmetric padding "
                  "engines\\]\\)$"),
       [](const ConvDesc& desc, Direction direction) {
         return direction != Direction::fwd && asymmetric_padding(desc);
       }},
      // Note [runtime-compiled engines] (conv_engine.cpp): DNNX_CUDNN_RUNTIME_COMPILED=0, which
      // the ctest registration sets, lists them unsupported.
      {"cudnn: runtime-compiled engine turned off", joined({"^", engine_id, "$"}),
       std::regex("^runtime-compiled engine: its plan compiles kernels with NVRTC for this shape "
                  "\\(seconds\\); DNNX_CUDNN_RUNTIME_COMPILED=0 excludes it \\(Note "
                  "\\[runtime-compiled engines\\]\\)$"),
       [](const ConvDesc&, Direction) {
         const char* value = std::getenv("DNNX_CUDNN_RUNTIME_COMPILED");
         return value != nullptr && *value != '\0';
       }},
      // Note [legacy candidates] (conv_legacy.cpp): support is cuDNN's workspace query for the
      // algorithm under the math mode.
      {"cudnn: cuDNN rejects the legacy algorithm", joined({"^", legacy_id, "$"}),
       joined({"^cuDNN rejects it: ", cudnn_refusal}),
       [](const ConvDesc&, Direction) { return true; }},
      // Note [legacy candidates]: the legacy descriptor has one padding per spatial dim.
      {"cudnn: legacy algorithm with asymmetric padding", joined({"^", legacy_id, "$"}),
       std::regex(
           "^legacy cuDNN takes one padding per spatial dim; asymmetric padding \\(before "
           "[0-9x]+, after [0-9x]+\\) needs a graph-API engine \\(cudnn:engine:\\.\\.\\.\\)$"),
       [](const ConvDesc& desc, Direction) { return asymmetric_padding(desc); }},
      // conv_common.hpp, legacy_range_reason: legacy descriptors (legacy algorithms, the legacy
      // calls of tap regions and frames) hold int dims and strides.
      {"cudnn: beyond the legacy descriptors' int",
       joined({"^(", legacy_id, "|cudnn:taps:(boxes|rows)|cudnn:frames)$"}),
       std::regex("(^|: )a dim or stride exceeds INT_MAX, which legacy descriptors cannot hold$"),
       [](const ConvDesc& desc, Direction) { return tensor_over_int_max(desc); }},
      // dnnx's narrow-channel kernels (Note [narrow-channel candidates] in conv_narrow.cpp) are
      // listed for every desc: outside bwd_data and bwd_weights, groups 1, at most 8 input
      // channels, f16/bf16 and channels_last.
      {"cudnn: narrow-channel kernel outside its domain", std::regex("^cudnn:kernel:narrow:mma$"),
       std::regex(
           "^the narrow-channel kernels? (runs? fwd, bwd_data and bwd_weights|needs groups "
           "1, got groups=[0-9]+|takes at most 8 input channels, got in_channels=[0-9]+|runs "
           "f16 and bf16 only \\(f16/bf16 tensor-core products\\)|needs the channels_last "
           "layout)$"),
       [](const ConvDesc& desc, Direction direction) { return !narrow_domain(desc, direction); }},
      // Its bwd_weights kernel's input tile (Note [narrow weight gradients] in kernels/narrow.cu).
      {"cudnn: narrow-channel weight gradient beyond its input tile",
       std::regex("^cudnn:kernel:narrow:mma$"),
       std::regex("^the input rows 16 output positions read \\(kernel rows x span x channels\\) "
                  "exceed the narrow-channel kernel's 12 KiB tile$"),
       [](const ConvDesc& desc, Direction direction) {
         return direction == Direction::bwd_weights && beyond_narrow_tile(desc, 6144.0);
       }},
      // Its forward kernel's input tile and reduction (Note [narrow forward]).
      {"cudnn: narrow-channel forward beyond its input tile",
       std::regex("^cudnn:kernel:narrow:mma$"),
       std::regex("^the input rows 16 output positions read \\(kernel rows x span x channels\\) "
                  "exceed the narrow-channel forward kernel's 8 KiB tile$"),
       [](const ConvDesc& desc, Direction direction) {
         return direction == Direction::fwd && beyond_narrow_tile(desc, 4096.0);
       }},
      {"cudnn: narrow-channel forward beyond its reduction",
       std::regex("^cudnn:kernel:narrow:mma$"),
       std::regex("^the narrow-channel forward kernel takes kernel volume x channels of at most "
                  "192$"),
       [](const ConvDesc& desc, Direction direction) {
         return direction == Direction::fwd && narrow_columns(desc) > 192.0;
       }},
      // dnnx's grouped kernel (Note [grouped candidates] in conv_grouped.cpp) is listed for every
      // desc: outside its domain (grouped_domain) it says why.
      {"cudnn: grouped kernel outside its domain", std::regex("^cudnn:kernel:grouped:mma$"),
       std::regex(
           "^(the grouped kernel (runs fwd and bwd_data only|runs grouped convolutions, "
           "got groups=[0-9]+|needs the channels_last layout|runs f16 and bf16 only "
           "\\(tensor-core products\\)|runs groups of 4, 8, 16 or 32 channels, in and out "
           "alike|needs a channel count that is a multiple of 32|runs 3x3 kernels \\(of depth "
           "1 in 3-D\\) only|runs 3-D convolutions at depth stride 1 without depth padding "
           "only|runs a stride of 1 or 2 along H and W only|runs kernels without dilation "
           "only)|a depthwise convolution: the depthwise kernels run it .*)$"),
       [](const ConvDesc& desc, Direction direction) { return !grouped_domain(desc, direction); }},
      // The size limits of dnnx's depthwise and narrow-channel kernels (conv_depthwise.cpp and
      // Note [depthwise kernels] in kernels/depthwise.cu; conv_narrow.cpp and Note [narrow
      // backward data] in kernels/narrow.cu): their 32-bit index arithmetic.
      {"cudnn: size beyond dnnx's kernels' arithmetic",
       std::regex("^cudnn:kernel:(depthwise:(channel_packs|strips|unrolled|direct)|narrow:mma|"
                  "grouped:mma)$"),
       std::regex("^(spatial sizes, strides, paddings or dilations beyond 2\\^29 \\([0-9]+\\)|"
                  "spatial sizes, strides, paddings or kernel extents beyond 2\\^29|a sample of "
                  "src or dst holds 2\\^31 elements or more|a kernel of more than 2\\^19 "
                  "positions|a sample needs 2\\^31 column strips or more|out_channels beyond "
                  "2\\^31|spatial sizes, strides, paddings or dilations (beyond 2\\^31|of 2\\^29 "
                  "or more)|a stride product \\(stride phases\\) beyond 65535|kernel volume x "
                  "ceil\\(out_channels / 32\\) of 2\\^26 or more|N x input positions beyond the "
                  "grid's 2\\^31 blocks|kernel volume x channels of 2\\^24 or more|kernel volume "
                  "x channels or out_channels beyond the grid's 65535 blocks|out_channels beyond "
                  "the grid's 65535 blocks of 64|N x output rows x segments beyond 2\\^40|an "
                  "input row \\(W x C\\) of 2\\^31 elements or more)$"),
       [](const ConvDesc& desc, Direction) { return beyond_kernel_sizes(desc); }},
      // The settings that list a kind of candidate for fp32 convolutions only (runtime.cpp,
      // not_listed_reason; conv_taps.cpp): by default the frames (Note [frame candidates]), the
      // folds into 2-D convolutions (Note [fold candidates]) and the tap regions (Note
      // [tap-region candidates]); with DNNX_CUDNN_CONV_IM2COL=f32, DNNX_CUDNN_CONV_STACKED=f32 or
      // DNNX_CUDNN_CONV_PHASES=f32 also the im2col entry, the stacked folds (Note [stacked folds])
      // and the phase folds (Note [phase folds]).
      {"cudnn: candidate kind listed for fp32 only by its setting",
       std::regex("^cudnn:(im2col|taps|frames|fold|fold:stacked|fold:phases)$"),
       std::regex("^listed for fp32 convolutions only \\(DNNX_CUDNN_CONV_[A-Z0-9]+=f32(, the "
                  "default)?\\); DNNX_CUDNN_CONV_[A-Z0-9]+=(on|sparse) lists them for every dtype "
                  "\\(Note \\[[a-z0-9 -]+\\]\\)$"),
       [](const ConvDesc& desc, Direction) { return desc.dtype != DType::f32; }},
      // The settings that turn a kind of candidate off (runtime.cpp, not_listed_reason;
      // conv_taps.cpp; conv.cpp for Winograd; conv_gemm.cpp): the im2col entry by default (Note
      // [im2col candidates]: off until measured on a GPU), any kind where its variable says off.
      {"cudnn: candidate kind turned off by its setting",
       std::regex("^cudnn:(gemm|winograd|im2col|taps|frames|fold|fold:stacked|fold:phases)$"),
       std::regex(
           "^(off \\(DNNX_CUDNN_CONV_[A-Z0-9]+=off(, the default)?\\); DNNX_CUDNN_CONV_[A-Z0-9]+="
           "f32 (lists them for fp32 convolutions, =on for every dtype|\\(the default\\) "
           "lists them for fp32 convolutions where at most [0-9.]+% of the tap-pixel "
           "products read real input)|turned off by DNNX_CUDNN_CONV_(GEMM|WINOGRAD)=0; unset "
           "or 1 lists (the matmul backend's candidates for this product|them for fp32 3x3 "
           "convolutions of stride 1)) \\(Note \\[[a-z0-9 -]+\\]\\)$"),
       [](const ConvDesc&, Direction) { return true; }},
      // Note [im2col candidates] (conv_im2col.cpp): no column product where one sample's column
      // matrix is over its cap.
      {"cudnn: im2col column matrix over its cap", std::regex("^cudnn:im2col$"),
       std::regex("^no column product: one sample's column matrix would take .* of workspace, "
                  "over .* \\(Note \\[im2col candidates\\]\\)$"),
       [](const ConvDesc& desc, Direction) { return column_matrix_over_cap(desc); }},
      // Note [winograd candidates] (conv_winograd.cpp): F(4x4, 3x3) for ungrouped f32 2-D 3x3
      // convolutions of stride 1 only.
      {"cudnn: Winograd outside its shapes", std::regex("^cudnn:winograd$"),
       std::regex("^(f32 only \\(dtype (f16|bf16)\\): f16 and bf16 run cuDNN's tensor-core "
                  "engines \\(Note \\[winograd candidates\\]\\)|2-D convolutions only \\([13] "
                  "spatial dims\\)|ungrouped convolutions only \\(groups=[0-9]+\\)|a 3x3 kernel "
                  "of stride 1 only \\(kernel [0-9]+x[0-9]+, stride [0-9]+x[0-9]+\\))$"),
       [](const ConvDesc& desc, Direction) { return !winograd_shape(desc); }},
      // Note [winograd candidates]: of those shapes, none where an output or tap would read only
      // padding, where the dilation's tiles would save no multiplications, where the transformed
      // tensors of one sample are over their cap, or where sizes exceed the transforms' 32-bit
      // arithmetic.
      {"cudnn: Winograd tiles that cannot pay or would read only padding",
       std::regex("^cudnn:winograd$"),
       std::regex(
           "^(every output and every tap reading some input \\(padding of at most 2 x "
           "dilation per side, and 2 x dilation within the input and its smaller padding; "
           "dim [01]: input [0-9]+, padding [0-9]+ and [0-9]+, dilation [0-9]+\\): an "
           "output or a tap that reads only padding is exactly zero, which the transforms "
           "give only to within their rounding|tiles of 4 x 4 outputs, each of one residue "
           "class of the dilation \\([0-9]+x[0-9]+\\), would hold [0-9]+ outputs for "
           "[0-9]+, over 3 times as many: the transforms would save no multiplications|the "
           "transformed filters and one sample's transformed tiles would take .* of "
           "workspace, over .* \\(Note \\[winograd candidates\\]\\)|a spatial size of 2\\^30 "
           "or more \\(or a dilation of 2\\^27\\), beyond the transforms' 32-bit "
           "arithmetic)$"),
       [](const ConvDesc& desc, Direction) { return winograd_shape(desc); }},
      // Note [tap-region candidates] (conv_taps.cpp): a split is listed unsupported where cuDNN
      // runs no legacy algorithm on one of its regions (LegacyStridedConv).
      {"cudnn: a tap region without a legacy algorithm", std::regex("^cudnn:taps:(boxes|rows)$"),
       joined({"^a region \\(.*\\) has no legacy algorithm: ", legacy_refusal}),
       [](const ConvDesc&, Direction) { return true; }},
      // Note [frame candidates] (conv_frames.cpp): the one entry where cuDNN runs no legacy
      // algorithm on the frames.
      {"cudnn: frames without a legacy algorithm", std::regex("^cudnn:frames$"),
       joined({"^cuDNN runs no legacy algorithm on the frames: cuDNN runs [a-z0-9_]+ on no frame "
               "\\(.*\\): ",
               legacy_refusal}),
       [](const ConvDesc& desc, Direction) { return has_frames(desc); }},
  };
  return reasons;
}

struct ConvParityParam {
  BackendKind backend;
  ConvCase conv;
};

// The backends compared with the reference: cpu always (skipped with a message when not built),
// cudnn where it can run.
std::vector<ConvParityParam> with_backends(const std::vector<ConvCase>& cases) {
  std::vector<ConvParityParam> out;
  for (const BackendKind backend : parity_backends(true)) {
    for (const ConvCase& conv : cases) out.push_back({backend, conv});
  }
  return out;
}

// gtest prints parameters on failure; the default would be a byte dump.
void PrintTo(const ConvParityParam& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.conv.name << " (" << param.conv.desc << ")";
}

std::string parity_name(const ::testing::TestParamInfo<ConvParityParam>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.conv.name;
}

// One case of the conv table in one direction, for the parity runner.
class ConvParityCase final : public ParityCase {
 public:
  ConvParityCase(const ConvCase& conv, Direction direction)
      : conv_(conv),
        operands_(random_conv_operands(conv.desc, direction,
                                       seed_from(conv.name + std::string(to_string(direction))))) {}

  OpKind op_kind() const override { return OpKind::conv; }
  std::string label() const override { return conv_.name; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return conv_context(desc(), direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return conv_list(context, desc(), direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    ConvRun run = run_conv(context, desc(), direction, operands_);
    return {{{"output", std::move(run.output)}}, std::move(run.choice)};
  }
  ParityExpected reference(Direction direction) const override {
    ParityExpected expected = ParityCase::reference(direction);
    expected.scale = conv_error_scale(desc(), direction, operands_);
    return expected;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo& algo, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    const Tensor& output = actual.outputs[0].tensor;
    return close_within_scale(
        output.to_f32(), expected.run.outputs[0].tensor.to_f32(), expected.scale, output.dims(),
        conv_tolerance(desc().dtype, algo, expected.scale), "output", where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc(), direction, algo) != nullptr;
  }
  // The cpu backend runs every case on every CPU: f16/bf16 through f32-compute candidates where
  // oneDNN has no native kernel (Note [f32 compute convolution]). cudnn may support none (the op
  // must then refuse the case, which the runner checks).
  int min_ran(BackendKind backend, Direction, const std::vector<AlgoInfo>&) const override {
    return backend == BackendKind::cpu ? 1 : 0;
  }

 private:
  const ConvDesc& desc() const { return conv_.desc; }

  const ConvCase& conv_;
  ConvOperands operands_;
};

class ConvParity : public ::testing::TestWithParam<ConvParityParam> {
 protected:
  void check(Direction direction) {
    const auto& [backend, conv] = GetParam();
    std::string why;
    if (!backend_available(backend, &why)) {
      GTEST_SKIP() << "backend " << to_string(backend) << " is not available here: " << why;
    }
    SCOPED_TRACE(conv.name + " " + std::string(to_string(direction)));
    check_parity(ConvParityCase(conv, direction), backend, direction);
  }
};

TEST_P(ConvParity, fwd) { check(Direction::fwd); }
TEST_P(ConvParity, bwd_data) { check(Direction::bwd_data); }
TEST_P(ConvParity, bwd_weights) { check(Direction::bwd_weights); }

INSTANTIATE_TEST_SUITE_P(Edge, ConvParity, ::testing::ValuesIn(with_backends(conv_edge_cases())),
                         parity_name);
INSTANTIATE_TEST_SUITE_P(Random, ConvParity,
                         ::testing::ValuesIn(with_backends(conv_random_cases(random_table_seed,
                                                                             random_table_size))),
                         parity_name);
INSTANTIATE_TEST_SUITE_P(
    ResNet50, ConvParity,
    ::testing::ValuesIn(with_backends(conv_resnet50_cases(1, resnet50_default_max_macs))),
    parity_name);
INSTANTIATE_TEST_SUITE_P(ResNet50All, ConvParity,
                         ::testing::ValuesIn(with_backends(resnet50_all_cases())), parity_name);

// The unsupported candidates of the whole table, listed without running anything, tallied by
// reason: every one must fall in an expected category, and the tally is printed so that a change
// in what a backend supports shows up in the log.
TEST(ConvParityBudget, EveryUnsupportedCandidateHasAnExpectedReason) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why)) {
    GTEST_SKIP() << "backend cpu is not available here: " << why;
  }
  Context cpu(BackendKind::cpu);
  std::vector<ConvCase> cases = conv_edge_cases();
  for (auto& c : conv_random_cases(random_table_seed, random_table_size)) cases.push_back(c);
  for (auto& c : conv_resnet50_cases(1, resnet50_default_max_macs)) cases.push_back(c);

  std::map<std::string, int> by_category;
  std::map<std::string, int> uncovered_by_dtype;
  int total = 0;
  int supported = 0;
  for (const ConvCase& conv : cases) {
    for (const Direction direction :
         {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      int supported_here = 0;
      for (const AlgoInfo& algo : conv_list(cpu, conv.desc, direction)) {
        ++total;
        if (algo.supported) {
          ++supported;
          ++supported_here;
          continue;
        }
        const char* category = unsupported_category(expected_reasons(), conv.desc, direction, algo);
        ++by_category[category ? category : "UNEXPECTED"];
        EXPECT_NE(category, nullptr) << "unexpected reason \"" << algo.reason << "\"\n  "
                                     << conv_context(conv.desc, direction, algo.id);
      }
      if (supported_here == 0) {
        ++uncovered_by_dtype[std::string(to_string(conv.desc.dtype))];
        // oneDNN's reference implementations cover every f32 convolution, and f16/bf16 run on
        // f32 copies where oneDNN has no native kernel: every case has a cpu candidate.
        ADD_FAILURE() << "no cpu candidate supports the case\n  "
                      << conv_context(conv.desc, direction, "(none)");
      }
    }
  }
  std::cout << "[ budget   ] " << cases.size() << " cases x 3 directions: " << total
            << " candidates listed, " << supported << " supported\n";
  for (const auto& [category, count] : by_category) {
    std::cout << "[ budget   ]   unsupported (" << category << "): " << count << "\n";
  }
  for (const auto& [dtype, count] : uncovered_by_dtype) {
    std::cout << "[ budget   ]   " << dtype
              << " (case, direction) pairs without any cpu candidate: " << count << "\n";
  }
  EXPECT_GT(supported, 0);
}

}  // namespace
}  // namespace dnnx::test
