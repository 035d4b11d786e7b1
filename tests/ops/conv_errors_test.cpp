// Bad inputs to convolution and its vocabulary: every case must raise dnnx::Error of the right
// kind whose message (without the context decorations) names the argument and the value received.
// Nothing may crash, so every case also runs the call to completion under the test's own process.

#include <dnnx/dnnx.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace {

using dnnx::BackendKind;
using dnnx::Context;
using dnnx::ConvDesc;
using dnnx::Dims;
using dnnx::Direction;
using dnnx::DType;
using dnnx::ErrorKind;
using dnnx::Layout;
using dnnx::Tensor;

// N=2, C=4 -> O=6, 9x9 input, 3x3 kernel, pad 1: dst 2x6x9x9. Sizes are chosen so that each
// number a case corrupts is distinct from the sizes around it in the message.
ConvDesc base_desc() {
  ConvDesc desc;
  desc.spatial_dims = 2;
  desc.batch = 2;
  desc.in_channels = 4;
  desc.out_channels = 6;
  desc.groups = 1;
  desc.input = {9, 9, 1};
  desc.kernel = {3, 3, 1};
  desc.pad_before = {1, 1, 0};
  desc.pad_after = {1, 1, 0};
  return desc;
}

// Dense owning tensors for every role of `desc`.
struct Tensors {
  explicit Tensors(const ConvDesc& desc)
      : src(Tensor::zeros(desc.src_dims(), desc.dtype, desc.layout)),
        weights(Tensor::zeros(desc.weights_dims(), desc.dtype, desc.layout)),
        dst(Tensor::zeros(desc.dst_dims(), desc.dtype, desc.layout)),
        bias(Tensor::zeros(desc.bias_dims(), desc.dtype)) {}
  Tensor src;
  Tensor weights;
  Tensor dst;
  Tensor bias;
};

Context reference_context() { return Context(BackendKind::reference); }

void fwd(const ConvDesc& desc, const Tensors& t) {
  Context context = reference_context();
  Tensor dst = t.dst;
  dnnx::conv_fwd(context, desc, t.src, t.weights, dst);
}

// Runs forward with the valid base desc after `edit` corrupted one of its tensors.
std::function<void()> fwd_with(std::function<void(Tensors&)> edit) {
  return [edit] {
    const ConvDesc desc = base_desc();
    Tensors t(desc);
    edit(t);
    fwd(desc, t);
  };
}

// Validates the base desc after `edit` corrupted one field, through the op layer (conv_list
// must validate before asking any backend) and directly.
std::function<void()> desc_with(std::function<void(ConvDesc&)> edit) {
  return [edit] {
    ConvDesc desc = base_desc();
    edit(desc);
    desc.validate();
    ADD_FAILURE() << "validate() accepted " << desc;
  };
}
std::function<void()> list_with(std::function<void(ConvDesc&)> edit) {
  return [edit] {
    ConvDesc desc = base_desc();
    edit(desc);
    Context context = reference_context();
    dnnx::conv_list(context, desc, Direction::fwd);
  };
}

struct BadCase {
  std::string name;
  std::function<void()> call;
  ErrorKind kind;
  std::vector<std::string> needles;  // each must appear in Error::message()
};

std::ostream& operator<<(std::ostream& out, const BadCase& bad) { return out << bad.name; }

Tensor view_of(void* data, const Dims& dims, DType dtype = DType::f32,
               Layout layout = Layout::channels_first) {
  return Tensor::view(data, dims, dtype, layout);
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  auto add = [&](std::string name, std::function<void()> call, K kind,
                 std::vector<std::string> needles) {
    cases.push_back({std::move(name), std::move(call), kind, std::move(needles)});
  };

  // --- the desc itself ---
  add("groups_not_dividing_in_channels", desc_with([](ConvDesc& d) {
        d.in_channels = 6;
        d.out_channels = 8;
        d.groups = 4;
      }),
      K::InvalidArgument, {"groups", "4", "in_channels", "6"});
  add("groups_not_dividing_out_channels", desc_with([](ConvDesc& d) {
        d.in_channels = 8;
        d.out_channels = 6;
        d.groups = 4;
      }),
      K::InvalidArgument, {"groups", "4", "out_channels", "6"});
  add("groups_zero", desc_with([](ConvDesc& d) { d.groups = 0; }), K::InvalidArgument,
      {"groups", "0"});
  add("batch_zero", desc_with([](ConvDesc& d) { d.batch = 0; }), K::InvalidArgument,
      {"batch", "0"});
  add("in_channels_negative", desc_with([](ConvDesc& d) { d.in_channels = -3; }),
      K::InvalidArgument, {"in_channels", "-3"});
  add("out_channels_zero", list_with([](ConvDesc& d) { d.out_channels = 0; }), K::InvalidArgument,
      {"out_channels", "0"});
  add("input_size_zero", desc_with([](ConvDesc& d) {
        d.input = {0, 9, 1};
      }),
      K::InvalidArgument, {"input", "0"});
  add("kernel_size_negative", list_with([](ConvDesc& d) {
        d.kernel = {3, -2, 1};
      }),
      K::InvalidArgument, {"kernel", "-2"});
  add("kernel_larger_than_padded_input", desc_with([](ConvDesc& d) {
        d.input = {4, 4, 1};
        d.kernel = {7, 7, 1};
      }),
      K::InvalidArgument, {"kernel", "7", "6"});  // 6 = padded input 1 + 4 + 1
  add("dilated_kernel_larger_than_padded_input", list_with([](ConvDesc& d) {
        d.input = {5, 5, 1};
        d.pad_before = {0, 0, 0};
        d.pad_after = {0, 0, 0};
        d.dilation = {3, 3, 1};  // extent 7 > 5
      }),
      K::InvalidArgument, {"kernel", "7", "5"});
  add("pad_before_negative", desc_with([](ConvDesc& d) {
        d.pad_before = {1, -1, 0};
      }),
      K::InvalidArgument, {"pad", "-1"});
  add("pad_after_negative", list_with([](ConvDesc& d) {
        d.pad_after = {-2, 1, 0};
      }),
      K::InvalidArgument, {"pad", "-2"});
  add("stride_zero", desc_with([](ConvDesc& d) {
        d.stride = {1, 0, 1};
      }),
      K::InvalidArgument, {"stride", "0"});
  add("stride_negative", list_with([](ConvDesc& d) {
        d.stride = {-2, 1, 1};
      }),
      K::InvalidArgument, {"stride", "-2"});
  add("dilation_zero", desc_with([](ConvDesc& d) {
        d.dilation = {0, 1, 1};
      }),
      K::InvalidArgument, {"dilation", "0"});
  add("spatial_dims_zero", desc_with([](ConvDesc& d) { d.spatial_dims = 0; }), K::InvalidArgument,
      {"spatial_dims", "0"});
  add("spatial_dims_four", list_with([](ConvDesc& d) { d.spatial_dims = 4; }), K::InvalidArgument,
      {"spatial_dims", "4"});

  // The op layer must report the bad field even when the desc is too broken to print.
  add("spatial_dims_negative_through_select",
      [] {
        ConvDesc desc = base_desc();
        desc.spatial_dims = -1;
        Context context = reference_context();
        dnnx::conv_select(context, desc, Direction::fwd);
      },
      K::InvalidArgument, {"spatial_dims", "-1"});
  add("spatial_dims_four_through_conv_fwd",
      [] {
        const ConvDesc good = base_desc();
        Tensors t(good);
        ConvDesc desc = good;
        desc.spatial_dims = 4;
        fwd(desc, t);
      },
      K::InvalidArgument, {"spatial_dims", "4"});
  add("stride_zero_through_conv_bwd_data",
      [] {
        const ConvDesc good = base_desc();
        Tensors t(good);
        ConvDesc desc = good;
        desc.stride = {0, 0, 0};
        Context context = reference_context();
        dnnx::conv_bwd_data(context, desc, t.dst, t.weights, t.src);
      },
      K::InvalidArgument, {"stride", "0"});

  // --- from_shapes ---
  add("from_shapes_channel_mismatch",
      [] {
        ConvDesc::from_shapes({2, 4, 9, 9}, {6, 5, 3, 3});
      },
      K::InvalidArgument, {"weights", "6x5x3x3", "4"});
  add("from_shapes_rank_mismatch",
      [] {
        ConvDesc::from_shapes({2, 4, 9, 9}, {6, 4, 3});
      },
      K::InvalidArgument, {"weights", "6x4x3"});
  add("from_shapes_src_rank_two",
      [] {
        ConvDesc::from_shapes({2, 4}, {6, 4});
      },
      K::InvalidArgument, {"src", "2x4"});
  add("from_shapes_stride_count",
      [] {
        ConvDesc::from_shapes({2, 4, 9, 9}, {6, 4, 3, 3}, {1, 2, 1});
      },
      K::InvalidArgument, {"stride", "3"});
  add("from_shapes_groups_channel_mismatch",
      [] {
        ConvDesc::from_shapes({2, 4, 9, 9}, {6, 4, 3, 3}, {1}, {1}, {1}, 2);
      },
      K::InvalidArgument, {"weights", "6x4x3x3"});

  // --- tensors against the desc ---
  add("src_channel_mismatch", fwd_with([](Tensors& t) {
        t.src = Tensor::zeros({2, 5, 9, 9}, DType::f32);
      }),
      K::InvalidArgument, {"src", "2x5x9x9", "2x4x9x9"});
  add("weights_channel_mismatch", fwd_with([](Tensors& t) {
        t.weights = Tensor::zeros({6, 3, 3, 3}, DType::f32);
      }),
      K::InvalidArgument, {"weights", "6x3x3x3", "6x4x3x3"});
  add("src_wrong_rank", fwd_with([](Tensors& t) {
        t.src = Tensor::zeros({2, 4, 9}, DType::f32);
      }),
      K::InvalidArgument, {"src", "2x4x9"});
  add("dst_wrong_shape", fwd_with([](Tensors& t) {
        t.dst = Tensor::zeros({2, 6, 7, 7}, DType::f32);
      }),
      K::InvalidArgument, {"dst", "2x6x7x7", "2x6x9x9"});
  add("src_dtype_f16_desc_f32", fwd_with([](Tensors& t) {
        t.src = Tensor::zeros({2, 4, 9, 9}, DType::f16);
      }),
      K::InvalidArgument, {"src", "f16", "f32"});
  add("weights_dtype_bf16_desc_f32", fwd_with([](Tensors& t) {
        t.weights = Tensor::zeros({6, 4, 3, 3}, DType::bf16);
      }),
      K::InvalidArgument, {"weights", "bf16", "f32"});
  add("dst_dtype_f16_desc_bf16",
      [] {
        ConvDesc desc = base_desc();
        desc.dtype = DType::bf16;
        Tensors t(desc);
        t.dst = Tensor::zeros(desc.dst_dims(), DType::f16);
        fwd(desc, t);
      },
      K::InvalidArgument, {"dst", "f16", "bf16"});
  add("src_layout_nhwc_desc_nchw", fwd_with([](Tensors& t) {
        t.src = Tensor::zeros({2, 4, 9, 9}, DType::f32, Layout::channels_last);
      }),
      K::InvalidArgument, {"src", "324x1x36x4", "nchw"});  // dense nhwc strides
  add("weights_layout_nchw_desc_nhwc",
      [] {
        ConvDesc desc = base_desc();
        desc.layout = Layout::channels_last;
        Tensors t(desc);
        t.weights = Tensor::zeros(desc.weights_dims(), DType::f32, Layout::channels_first);
        fwd(desc, t);
      },
      K::InvalidArgument, {"weights", "36x9x3x1", "nhwc"});  // dense nchw strides
  add("src_strides_not_dense",
      [] {
        // A 2x4x9x9 window of a 2x4x9x10 buffer: rows padded to 10, dense in no layout.
        static std::vector<float> buffer(2 * 4 * 9 * 10);
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        t.src = Tensor::view(buffer.data(), {2, 4, 9, 9}, DType::f32, Dims{360, 90, 10, 1});
        fwd(desc, t);
      },
      K::InvalidArgument, {"src", "360x90x10x1"});
  add("src_null_data", fwd_with([](Tensors& t) {
        t.src = view_of(nullptr, {2, 4, 9, 9});
      }),
      K::InvalidArgument, {"src", "null"});
  add("weights_empty_tensor", fwd_with([](Tensors& t) { t.weights = Tensor(); }),
      K::InvalidArgument, {"weights", "rank 0"});
  add("tensor_negative_size",
      [] {
        Tensor::zeros({2, -4, 9, 9}, DType::f32);
      },
      K::InvalidArgument, {"2x-4x9x9", "-4"});
  add("src_on_cuda_device", fwd_with([](Tensors& t) {
        static std::vector<float> buffer(2 * 4 * 9 * 9);
        t.src = Tensor::view(buffer.data(), {2, 4, 9, 9}, DType::f32, Layout::channels_first,
                             dnnx::Device::cuda(0));
      }),
      K::InvalidArgument, {"src", "cuda:0", "cpu"});
  add("bias_wrong_length",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        const Tensor bias = Tensor::zeros({5}, DType::f32);
        Context context = reference_context();
        dnnx::conv_fwd(context, desc, t.src, t.weights, t.dst, &bias);
      },
      K::InvalidArgument, {"bias", "5", "6"});
  add("bias_fwd_wrong_length",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        const Tensor bias = Tensor::zeros({7}, DType::f32);
        Context context = reference_context();
        dnnx::conv_bias_fwd(context, desc, bias, t.dst);
      },
      K::InvalidArgument, {"bias", "7", "6"});
  add("diff_bias_wrong_dtype",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        Tensor diff_weights = Tensor::zeros(desc.weights_dims(), DType::f32);
        Tensor diff_bias = Tensor::zeros({6}, DType::f16);
        Context context = reference_context();
        dnnx::conv_bwd_weights(context, desc, t.src, t.dst, diff_weights, &diff_bias);
      },
      K::InvalidArgument, {"diff_bias", "f16", "f32"});
  add("bias_bwd_wrong_length",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        Tensor diff_bias = Tensor::zeros({3}, DType::f32);
        Context context = reference_context();
        dnnx::conv_bias_bwd(context, desc, t.dst, diff_bias);
      },
      K::InvalidArgument, {"diff_bias", "3", "6"});
  add("bwd_data_diff_src_wrong_shape",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        Tensor diff_src = Tensor::zeros({2, 4, 8, 9}, DType::f32);
        Context context = reference_context();
        dnnx::conv_bwd_data(context, desc, t.dst, t.weights, diff_src);
      },
      K::InvalidArgument, {"diff_src", "2x4x8x9", "2x4x9x9"});
  add("bwd_data_diff_dst_wrong_dtype",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        const Tensor diff_dst = Tensor::zeros(desc.dst_dims(), DType::bf16);
        Context context = reference_context();
        dnnx::conv_bwd_data(context, desc, diff_dst, t.weights, t.src);
      },
      K::InvalidArgument, {"diff_dst", "bf16", "f32"});
  add("bwd_weights_diff_weights_wrong_shape",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        Tensor diff_weights = Tensor::zeros({6, 4, 3, 2}, DType::f32);
        Context context = reference_context();
        dnnx::conv_bwd_weights(context, desc, t.src, t.dst, diff_weights);
      },
      K::InvalidArgument, {"diff_weights", "6x4x3x2", "6x4x3x3"});
  add("dst_aliases_src",
      [] {
        // dst and src are the same shape here (4 -> 4 channels, pad 1), so only the overlap is
        // wrong.
        ConvDesc desc = base_desc();
        desc.out_channels = 4;
        Tensors t(desc);
        Tensor dst = t.src;
        Context context = reference_context();
        dnnx::conv_fwd(context, desc, t.src, t.weights, dst);
      },
      K::InvalidArgument, {"dst", "src", "overlap"});

  add("bias_aliases_dst",
      [] {
        // bias is read after dst is written: a bias inside dst would be read back corrupted.
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        const Tensor bias = Tensor::view(t.dst.data(), {6}, DType::f32);
        Context context = reference_context();
        dnnx::conv_fwd(context, desc, t.src, t.weights, t.dst, &bias);
      },
      K::InvalidArgument, {"bias", "dst", "overlap"});

  // --- sizes whose products overflow 64 bits: an error, never a wrapped allocation ---
  add("tensor_numel_overflow",
      [] {
        Tensor::empty({std::int64_t{1} << 40, std::int64_t{1} << 30, 1, 1}, DType::f32);
      },
      K::InvalidArgument, {"1099511627776x1073741824x1x1"});
  add("dilation_extent_overflow", desc_with([](ConvDesc& d) {
        d.dilation = {std::int64_t{1} << 62, 1, 1};
      }),
      K::InvalidArgument, {"dilation", "4611686018427387904"});
  add("batch_overflow_through_select",
      [] {
        ConvDesc desc = base_desc();
        desc.batch = std::int64_t{1} << 61;  // src numel = 2^61 * 4 * 81 overflows int64
        Context context = reference_context();
        context.tune().fwd = dnnx::AlgoPolicy::exhaustive();
        dnnx::conv_select(context, desc, Direction::fwd);
      },
      K::InvalidArgument, {"2305843009213693952"});

  add("from_shapes_groups_product_overflow",
      [] {
        // weights C/groups x groups = 4 x (2^63 - 1) wrapped to -4 ("expect -4").
        ConvDesc::from_shapes({1, 9, 8, 8}, {8, 4, 3, 3}, {1}, {0}, {1},
                              std::numeric_limits<std::int64_t>::max());
      },
      K::InvalidArgument, {"groups=9223372036854775807", "4 x 9223372036854775807", "64 bits"});
  add("dilation_overflow_through_output_size",
      [] {
        ConvDesc desc = base_desc();
        desc.dilation = {std::int64_t{1} << 62, 1, 1};
        desc.output_size(0);
      },
      K::InvalidArgument, {"dilation", "4611686018427387904"});

  // --- shapes of a desc nobody validated: validate()'s error, never a negative or wrapped size ---
  add("dst_dims_of_unvalidated_desc_kernel_too_large",
      [] {
        ConvDesc desc = base_desc();
        desc.input = {4, 4, 1};
        desc.pad_before = {0, 0, 0};
        desc.pad_after = {0, 0, 0};
        desc.kernel = {7, 7, 1};  // (4 - 7) / 1 + 1 = -2 without the check
        desc.dst_dims();
      },
      K::InvalidArgument, {"kernel", "7", "4"});
  add("output_size_of_unvalidated_desc_stride_zero",
      [] {
        ConvDesc desc = base_desc();
        desc.stride = {0, 1, 1};  // a division by zero without the check
        desc.output_size(0);
      },
      K::InvalidArgument, {"stride", "0"});
  add("src_dims_of_unvalidated_desc_negative_batch",
      [] {
        ConvDesc desc = base_desc();
        desc.batch = -2;
        desc.src_dims();
      },
      K::InvalidArgument, {"batch", "-2"});
  add("weights_dims_of_unvalidated_desc_groups_zero",
      [] {
        ConvDesc desc = base_desc();
        desc.groups = 0;  // in_channels / groups without the check
        desc.weights_dims();
      },
      K::InvalidArgument, {"groups", "0"});
  add("dst_dims_of_unvalidated_desc_spatial_dims_seven",
      [] {
        ConvDesc desc = base_desc();
        desc.spatial_dims = 7;
        desc.dst_dims();
      },
      K::InvalidArgument, {"spatial_dims", "7"});
  add("dst_dims_of_unvalidated_desc_huge_batch",
      [] {
        ConvDesc desc = base_desc();
        desc.batch = std::int64_t{1} << 62;
        desc.dst_dims();
      },
      K::InvalidArgument, {"batch", "4611686018427387904", "2^31"});
  add("output_size_index_out_of_range", [] { base_desc().output_size(2); }, K::InvalidArgument,
      {"output_size(2)", "spatial_dims = 2"});

  // --- tensors, views and copies: sizes, strides and spans in 64 bits ---
  add("dims_product_overflow",
      [] {
        Dims{std::int64_t{1} << 40, std::int64_t{1} << 40}.product();
      },
      K::InvalidArgument, {"1099511627776x1099511627776", "64 bits"});
  add("dense_strides_overflow",
      [] {
        const std::int64_t big = std::int64_t{1} << 40;
        dnnx::dense_strides(Dims{2, big, big, big}, Layout::channels_first);
      },
      K::InvalidArgument, {"2x1099511627776x1099511627776x1099511627776", "64 bits"});
  add("view_numel_overflow",
      [] {
        static float element = 0;
        const std::int64_t big = std::int64_t{1} << 40;
        Tensor::view(&element, {big, big}, DType::f32);
      },
      K::InvalidArgument, {"view dims", "1099511627776x1099511627776"});
  add("view_stride_product_overflow",
      [] {
        // (3 - 1) x 2^62 does not fit in 64 bits.
        static float element = 0;
        Tensor::view(&element, {3, 1}, DType::f32, Dims{std::int64_t{1} << 62, 1});
      },
      K::InvalidArgument, {"strides 4611686018427387904x1", "2^60"});
  add("view_stride_sum_overflow",
      [] {
        // Each step fits in 64 bits; their sum, 2^59 + 2^63 - 1, does not.
        static float element = 0;
        Tensor::view(&element, {2, 2}, DType::f32,
                     Dims{std::int64_t{1} << 59, std::numeric_limits<std::int64_t>::max()});
      },
      K::InvalidArgument, {"strides 576460752303423488x9223372036854775807"});
  add("view_span_beyond_2_60",
      [] {
        static float element = 0;
        Tensor::view(&element, {2, 1}, DType::f32, Dims{std::int64_t{1} << 60, 1});
      },
      K::InvalidArgument, {"strides 1152921504606846976x1", "2^60"});
  add("copy_overlapping_views",
      [] {
        static std::vector<float> buffer(10);
        const Tensor src = Tensor::view(buffer.data(), {8}, DType::f32);
        Tensor dst = Tensor::view(buffer.data() + 2, {8}, DType::f32);
        dnnx::copy(src, dst);
      },
      K::InvalidArgument, {"copy", "dst f32[8", "overlaps src"});
  add("copy_transpose_onto_itself",
      [] {
        // The same memory read as a 4x4 and written as its transpose: not the same window.
        static std::vector<float> buffer(16);
        const Tensor src = Tensor::view(buffer.data(), {4, 4}, DType::f32, Dims{4, 1});
        Tensor dst = Tensor::view(buffer.data(), {4, 4}, DType::f32, Dims{1, 4});
        dnnx::copy(src, dst);
      },
      K::InvalidArgument, {"copy", "strides 1x4", "overlaps src"});

  // --- algorithm ids and policies ---
  add("fixed_unknown_id",
      [] {
        Context context = reference_context();
        context.tune().fwd = dnnx::AlgoPolicy::fixed("reference:winograd_nope");
        dnnx::conv_select(context, base_desc(), Direction::fwd);
      },
      K::InvalidArgument, {"reference:winograd_nope", "reference:direct"});
  add("fixed_unknown_id_through_conv_fwd",
      [] {
        const ConvDesc desc = base_desc();
        Tensors t(desc);
        Context context = reference_context();
        context.tune().fwd = dnnx::AlgoPolicy::fixed("onednn:jit:avx512_core");
        dnnx::conv_fwd(context, desc, t.src, t.weights, t.dst);
      },
      K::InvalidArgument, {"onednn:jit:avx512_core", "reference:direct"});
  add("policy_unknown_name", [] { dnnx::AlgoPolicy::parse("fastest"); }, K::InvalidArgument,
      {"fastest", "heuristic", "exhaustive", "fixed:"});
  add("policy_fixed_without_id", [] { dnnx::AlgoPolicy::parse("fixed:"); }, K::InvalidArgument,
      {"fixed:"});

  // --- names ---
  add("backend_unknown_name", [] { dnnx::parse_backend("tpu"); }, K::InvalidArgument,
      {"tpu", "reference", "cpu", "cudnn", "auto"});
  add("dtype_unknown_name", [] { dnnx::parse_dtype("f64"); }, K::InvalidArgument,
      {"f64", "f32", "f16", "bf16"});
  add("layout_unknown_name", [] { dnnx::parse_layout("nchw16c"); }, K::InvalidArgument,
      {"nchw16c", "nchw", "nhwc"});
  add("direction_unknown_name", [] { dnnx::parse_direction("sideways"); }, K::InvalidArgument,
      {"sideways", "fwd", "bwd_data", "bwd_weights"});
  add("type_config_unknown_name", [] { dnnx::parse_type_config("double"); }, K::InvalidArgument,
      {"double", "float", "half", "bfloat16"});
  add("dims_parse_garbage", [] { Dims::parse("2x3xabc", "input"); }, K::InvalidArgument,
      {"input", "2x3xabc"});
  add("dims_parse_empty_entry", [] { Dims::parse("2xx3", "weights"); }, K::InvalidArgument,
      {"weights", "2xx3"});
  add("dims_parse_empty", [] { Dims::parse("", "input"); }, K::InvalidArgument, {"input"});
  add("dims_parse_too_many", [] { Dims::parse("1x2x3x4x5x6", "input"); }, K::InvalidArgument,
      {"input", "1x2x3x4x5x6", "5"});
  // One grammar for every entry: no '+', no spaces (std::stoll took both).
  add("dims_parse_plus_sign", [] { Dims::parse("+1x+4x8x8", "input"); }, K::InvalidArgument,
      {"input", "'+1x+4x8x8'", "entry '+1'"});
  add("dims_parse_space", [] { Dims::parse("2x 3", "weights"); }, K::InvalidArgument,
      {"weights", "entry ' 3'"});
  add("dims_parse_out_of_range", [] { Dims::parse("2x99999999999999999999", "input"); },
      K::InvalidArgument, {"input", "entry '99999999999999999999'"});

  // --- backends ---
  add("cudnn_requested_explicitly", [] { Context context(BackendKind::cudnn); }, K::Unsupported,
      {"cudnn", "reference"});
  add("reference_device_index", [] { Context context(BackendKind::reference, 3); },
      K::InvalidArgument, {"device", "3"});
  return cases;
}

class ConvBadInput : public testing::TestWithParam<BadCase> {};

TEST_P(ConvBadInput, RaisesKindNamingArgumentAndValue) {
  const BadCase& bad = GetParam();
  try {
    bad.call();
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), bad.kind)
        << "got " << dnnx::to_string(error.kind()) << ": " << error.what();
    for (const std::string& needle : bad.needles) {
      EXPECT_NE(error.message().find(needle), std::string::npos)
          << "message does not contain \"" << needle << "\": " << error.message();
    }
    // what() carries the kind's name so a log line alone says what class of failure it was.
    EXPECT_NE(std::string(error.what()).find(dnnx::to_string(bad.kind)), std::string::npos)
        << error.what();
    return;
  } catch (const std::exception& other) {
    FAIL() << "threw a non-dnnx exception: " << other.what();
  }
  FAIL() << "no error raised";
}

INSTANTIATE_TEST_SUITE_P(Conv, ConvBadInput, testing::ValuesIn(bad_cases()),
                         [](const testing::TestParamInfo<BadCase>& info) {
                           return info.param.name;
                         });

TEST(ConvBadInput, TableHasAtLeastTwentyFiveCases) { EXPECT_GE(bad_cases().size(), 25u); }

// Copying a tensor onto itself (the same memory, dims and strides, size-1 dims aside) is a no-op
// (Note [overlapping copy] in core/device.cpp); separate buffers copy as before.
TEST(ConvBadInput, CopyOntoItselfIsANoOpAndSeparateBuffersCopy) {
  std::vector<float> buffer{1, 2, 3, 4, 5, 6};
  const Tensor src = Tensor::view(buffer.data(), {2, 3}, DType::f32);
  Tensor same = Tensor::view(buffer.data(), {2, 3}, DType::f32);
  dnnx::copy(src, same);
  EXPECT_EQ(same.to_f32(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // A size-1 dim's stride never addresses a second element: still the same window.
  const Tensor column = Tensor::view(buffer.data(), {6, 1}, DType::f32, Dims{1, 1});
  Tensor column_again = Tensor::view(buffer.data(), {6, 1}, DType::f32, Dims{1, 99});
  dnnx::copy(column, column_again);
  std::vector<float> other(6, 0.0f);
  Tensor dst = Tensor::view(other.data(), {2, 3}, DType::f32);
  dnnx::copy(src, dst);
  EXPECT_EQ(other, buffer);
}

// A host allocation near SIZE_MAX is out of memory, not a wrapped round-up to a few bytes that
// would then be written past.
TEST(ConvBadInput, HostAllocationNearTheAddressSpaceIsOutOfMemory) {
  for (const std::size_t bytes :
       {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 62}) {
    try {
      void* p = dnnx::host_allocator().allocate(bytes);
      dnnx::host_allocator().deallocate(p, bytes);
      ADD_FAILURE() << "allocating " << bytes << " bytes succeeded";
    } catch (const dnnx::Error& error) {
      EXPECT_EQ(error.kind(), dnnx::ErrorKind::OutOfMemory) << error.what();
      EXPECT_NE(std::string(error.what()).find(std::to_string(bytes)), std::string::npos)
          << error.what();
    }
  }
}

// Every accessor of a desc that was never validated either returns the shape or throws; a valid
// desc's shapes are unchanged by the checks.
TEST(ConvBadInput, ShapesOfAValidDescAreUnchanged) {
  const ConvDesc desc = base_desc();
  EXPECT_EQ(desc.src_dims(), (Dims{2, 4, 9, 9}));
  EXPECT_EQ(desc.weights_dims(), (Dims{6, 4, 3, 3}));
  EXPECT_EQ(desc.dst_dims(), (Dims{2, 6, 9, 9}));
  EXPECT_EQ(desc.output_size(1), 9);
  EXPECT_EQ(desc.bias_dims(), (Dims{6}));
}

// A failed call must leave the context usable: the same context then runs a valid call.
TEST(ConvBadInput, ContextStillWorksAfterErrors) {
  const ConvDesc desc = base_desc();
  Tensors t(desc);
  Context context = reference_context();
  Tensor wrong_dst = Tensor::zeros({2, 6, 7, 7}, DType::f32);
  EXPECT_THROW(dnnx::conv_fwd(context, desc, t.src, t.weights, wrong_dst), dnnx::Error);
  t.src.fill(1.0f);
  t.weights.fill(1.0f);
  dnnx::conv_fwd(context, desc, t.src, t.weights, t.dst);
  // The centre of a 3x3 all-ones kernel over 4 all-ones channels sums 36 products.
  EXPECT_FLOAT_EQ(t.dst.to_f32()[4 * 9 + 4], 36.0f);
}

// Validation happens before anything is written: a bad bias must not leave dst half-computed.
TEST(ConvBadInput, ABadBiasLeavesDstUntouched) {
  const ConvDesc desc = base_desc();
  Tensors t(desc);
  t.src.fill(1.0f);
  t.weights.fill(1.0f);
  t.dst.fill(7.0f);
  const Tensor bias = Tensor::zeros({5}, DType::f32);
  Context context = reference_context();
  EXPECT_THROW(dnnx::conv_fwd(context, desc, t.src, t.weights, t.dst, &bias), dnnx::Error);
  const std::vector<float> dst = t.dst.to_f32();
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](float v) { return v == 7.0f; }))
      << "dst[0] = " << dst[0];
}

}  // namespace
