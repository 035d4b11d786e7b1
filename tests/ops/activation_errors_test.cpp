// Bad inputs to activations: every case must raise dnnx::Error of the right kind whose message
// (without the context decorations) names the argument and the value received. Each case runs the
// call to completion in the test's own process, so nothing may crash either.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// 2x3x5x7 relu: sizes distinct from each other so that a message naming one is unambiguous.
ActivationDesc base_desc(ActivationKind kind = ActivationKind::relu) {
  ActivationDesc desc;
  desc.kind = kind;
  desc.dims = Dims{2, 3, 5, 7};
  return desc;
}

Tensor make(const ActivationDesc& desc, std::uint64_t seed = 1) {
  return random_tensor(desc.dims, desc.dtype, desc.layout, seed);
}

// Validates `desc` through the op layer (activation_list must validate before any backend runs).
std::function<void()> list_with(std::function<void(ActivationDesc&)> edit) {
  return list_after(base_desc(), std::move(edit), dnnx::activation_list);
}

// Runs forward on the base desc with `src` and `dst` as `edit` leaves them.
std::function<void()> fwd_with(std::function<void(const ActivationDesc&, Tensor&, Tensor&)> edit) {
  return [edit] {
    const ActivationDesc desc = base_desc();
    Tensor src = make(desc, 1);
    Tensor dst = make(desc, 2);
    edit(desc, src, dst);
    Context context = reference_context();
    dnnx::activation_fwd(context, desc, src, dst);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);

  // --- the desc ---
  add("ceiling_zero", list_with([](ActivationDesc& d) {
        d.kind = ActivationKind::clipped_relu;
        d.ceiling = 0;
      }),
      K::InvalidArgument, {"ceiling", "got 0"});
  add("ceiling_negative", list_with([](ActivationDesc& d) {
        d.kind = ActivationKind::clipped_relu;
        d.ceiling = -1.5;
      }),
      K::InvalidArgument, {"ceiling", "-1.5"});
  add("ceiling_nan", list_with([](ActivationDesc& d) {
        d.kind = ActivationKind::clipped_relu;
        d.ceiling = std::numeric_limits<double>::quiet_NaN();
      }),
      K::InvalidArgument, {"ceiling", "nan"});
  add("elu_alpha_infinite", list_with([](ActivationDesc& d) {
        d.kind = ActivationKind::elu;
        d.alpha = std::numeric_limits<double>::infinity();
      }),
      K::InvalidArgument, {"alpha", "inf"});
  add("elu_alpha_nan_through_constructor",
      [] { ActivationDesc::elu(Dims{4}, std::numeric_limits<double>::quiet_NaN()); },
      K::InvalidArgument, {"alpha", "nan"});
  add("kind_out_of_range",
      list_with([](ActivationDesc& d) { d.kind = static_cast<ActivationKind>(42); }),
      K::InvalidArgument, {"kind", "42"});
  add("kind_unknown_name", [] { dnnx::parse_activation_kind("gelu"); }, K::InvalidArgument,
      {"gelu", "relu", "swish"});
  add("saved_unknown_name", [] { dnnx::parse_activation_saved("x"); }, K::InvalidArgument,
      {"'x'", "src_and_dst"});
  add("dims_rank_zero", list_with([](ActivationDesc& d) { d.dims = Dims{}; }), K::InvalidArgument,
      {"rank 0", "1 to 5"});
  add("dims_zero_entry", list_with([](ActivationDesc& d) {
        d.dims = Dims{2, 0, 5};
      }),
      K::InvalidArgument, {"2x0x5", "entry 1", "got 0"});
  add("dims_count_overflow", list_with([](ActivationDesc& d) {
        d.dims = Dims{std::int64_t{1} << 40, std::int64_t{1} << 40};
      }),
      K::InvalidArgument, {"dims 1099511627776x1099511627776", "more elements"});
  add("integer_dtype", list_with([](ActivationDesc& d) { d.dtype = DType::i32; }),
      K::InvalidArgument, {"dtype", "i32"});
  add("bwd_weights_direction",
      [] {
        Context context = reference_context();
        dnnx::activation_list(context, base_desc(), Direction::bwd_weights);
      },
      K::InvalidArgument, {"bwd_weights", "fwd, bwd_data"});

  // --- forward tensors ---
  add("dtype_mix", fwd_with([](const ActivationDesc& d, Tensor& src, Tensor&) {
        src = random_tensor(d.dims, DType::f16, d.layout, 3);
      }),
      K::InvalidArgument, {"dtype mix", "src", "f16", "f32"});
  add("dst_dims_mismatch", fwd_with([](const ActivationDesc& d, Tensor&, Tensor& dst) {
        dst = Tensor::zeros({2, 3, 5, 6}, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"dst", "2x3x5x6", "2x3x5x7"});
  add("layout_mismatch", fwd_with([](const ActivationDesc& d, Tensor& src, Tensor&) {
        src = random_tensor(d.dims, d.dtype, Layout::channels_last, 3);
      }),
      K::InvalidArgument, {"layout mismatch", "src", "nchw"});
  add("null_data", fwd_with([](const ActivationDesc& d, Tensor& src, Tensor&) {
        src = Tensor::view(nullptr, d.dims, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"src", "null data"});
  add("src_on_cuda_device", fwd_with([](const ActivationDesc& d, Tensor& src, Tensor&) {
        src = Tensor::view(src.data(), d.dims, d.dtype, d.layout, dnnx::Device::cuda(0));
      }),
      K::InvalidArgument, {"src", "cuda:0", "cpu"});
  add("in_place_mismatched_strides",
      fwd_with([](const ActivationDesc& d, Tensor& src, Tensor& dst) {
        // The same memory as src, read as channels_last: element i of dst is not element i of src.
        dst = Tensor::view(src.data(), d.dims, d.dtype, Layout::channels_last);
      }),
      K::InvalidArgument, {"dst", "in place", "strides", "105x1x21x3", "105x35x7x1"});
  add("partial_overlap", fwd_with([](const ActivationDesc& d, Tensor& src, Tensor& dst) {
        // dst starts one element into src's buffer (the buffer outlives the call).
        static std::vector<float> buffer(2 * 3 * 5 * 7 + 1);
        src = Tensor::view(buffer.data(), d.dims, d.dtype, d.layout);
        dst = Tensor::view(buffer.data() + 1, d.dims, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"dst overlaps src", "byte offset 4"});

  // --- backward tensors ---
  add("bwd_missing_src",
      [] {
        const ActivationDesc desc = base_desc();  // saved = src_and_dst
        const Tensor dst = make(desc, 2), diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, nullptr, &dst, diff_dst, diff_src);
      },
      K::InvalidArgument, {"src is null", "desc.saved is src_and_dst", "desc.saved = dst"});
  add("bwd_missing_dst",
      [] {
        ActivationDesc desc = base_desc(ActivationKind::tanh);
        desc.saved = ActivationSaved::dst;
        const Tensor diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, nullptr, nullptr, diff_dst, diff_src);
      },
      K::InvalidArgument, {"dst is null", "desc.saved is dst"});
  add("bwd_dst_given_but_not_saved",
      [] {
        ActivationDesc desc = base_desc();
        desc.saved = ActivationSaved::src;
        const Tensor src = make(desc, 1), dst = make(desc, 2), diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, &src, &dst, diff_dst, diff_src);
      },
      K::InvalidArgument, {"dst is given", "desc.saved is src"});
  add("bwd_src_is_dst_after_in_place_forward",
      [] {
        const ActivationDesc desc = base_desc();  // saved = src_and_dst
        const Tensor both = make(desc, 1), diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, &both, &both, diff_dst, diff_src);
      },
      K::InvalidArgument, {"src and dst overlap", "desc.saved = dst"});
  add("bwd_diff_src_over_dst",
      [] {
        ActivationDesc desc = base_desc();
        desc.saved = ActivationSaved::dst;
        Tensor dst = make(desc, 2);
        const Tensor diff_dst = make(desc, 3);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, nullptr, &dst, diff_dst, dst);
      },
      K::InvalidArgument, {"diff_src overlaps dst", "separate buffers"});
  add("bwd_in_place_mismatched_strides",
      [] {
        const ActivationDesc desc = base_desc();
        const Tensor src = make(desc, 1), dst = make(desc, 2), diff_dst = make(desc, 3);
        Tensor diff_src =
            Tensor::view(diff_dst.data(), desc.dims, desc.dtype, Layout::channels_last);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, &src, &dst, diff_dst, diff_src);
      },
      K::InvalidArgument, {"diff_src", "diff_dst", "in place", "strides"});
  add("bwd_swish_from_dst_only",
      [] {
        ActivationDesc desc = base_desc(ActivationKind::swish);
        desc.saved = ActivationSaved::dst;
        const Tensor dst = make(desc, 2), diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, nullptr, &dst, diff_dst, diff_src);
      },
      K::Unsupported, {"swish backward needs src", "desc.saved = dst"});
  add("bwd_elu_negative_alpha_from_dst_only",
      [] {
        ActivationDesc desc = ActivationDesc::elu(Dims{2, 3, 5, 7}, -0.5);
        desc.saved = ActivationSaved::dst;
        const Tensor dst = make(desc, 2), diff_dst = make(desc, 3);
        Tensor diff_src = make(desc, 4);
        Context context = reference_context();
        dnnx::activation_bwd(context, desc, nullptr, &dst, diff_dst, diff_src);
      },
      K::Unsupported, {"alpha -0.5", "needs src"});

  // --- selection ---
  add("fixed_id_not_a_candidate",
      [] {
        const ActivationDesc desc = base_desc();
        Tensor src = make(desc, 1), dst = make(desc, 2);
        Context context = reference_context();
        context.tune().policy(dnnx::OpKind::activation, Direction::fwd) =
            dnnx::AlgoPolicy::fixed("onednn:jit:nope:relu");
        dnnx::activation_fwd(context, desc, src, dst);
      },
      K::InvalidArgument, {"onednn:jit:nope:relu", "reference:direct"});
  return cases;
}

class ActivationErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ActivationErrors, RaisesWithKindAndMessage) { expect_raises(GetParam(), "act"); }

INSTANTIATE_TEST_SUITE_P(Table, ActivationErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(ActivationErrors, TableHasAtLeastFifteenCases) { EXPECT_GE(bad_cases().size(), 15u); }

}  // namespace
}  // namespace dnnx::test
