// Bad inputs to tensor add: every case must raise dnnx::Error of the right kind whose message
// (without the context decorations) names the argument and the value received.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/add.hpp>

#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// A bias add on 2x3x5x7.
AddDesc base_desc() { return AddDesc::from_dims(Dims{1, 3, 1, 1}, Dims{2, 3, 5, 7}); }

std::function<void()> list_with(std::function<void(AddDesc&)> edit) {
  return list_after(base_desc(), std::move(edit), dnnx::add_list);
}

std::function<void()> fwd_with(std::function<void(const AddDesc&, Tensor&, Tensor&)> edit) {
  return [edit] {
    const AddDesc desc = base_desc();
    Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
    Tensor dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
    edit(desc, src, dst);
    Context context = reference_context();
    dnnx::add_fwd(context, desc, src, dst);
  };
}

std::function<void()> bwd_with(std::function<void(const AddDesc&, Tensor&, Tensor&)> edit) {
  return [edit] {
    const AddDesc desc = base_desc();
    Tensor diff_dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 1);
    Tensor diff_src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 2);
    edit(desc, diff_dst, diff_src);
    Context context = reference_context();
    dnnx::add_bwd(context, desc, diff_dst, diff_src);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);

  // --- the desc ---
  add("broadcast_incompatible", list_with([](AddDesc& d) {
        d.dst_dims = Dims{2, 4, 5, 7};
      }),
      K::InvalidArgument, {"1x3x1x1", "2x4x5x7", "axis 1", "3 in src", "4 in dst"});
  add("ranks_differ", list_with([](AddDesc& d) { d.src_dims = Dims{3}; }), K::InvalidArgument,
      {"src_dims '3'", "rank 1", "rank 4"});
  add("dst_rank_zero", list_with([](AddDesc& d) { d.dst_dims = Dims{}; }), K::InvalidArgument,
      {"dst_dims", "rank 0"});
  add("dst_entry_zero", list_with([](AddDesc& d) {
        d.src_dims = Dims{1, 1, 1};
        d.dst_dims = Dims{2, 0, 3};
      }),
      K::InvalidArgument, {"dst_dims 2x0x3", "entry 1", "got 0"});
  add("src_entry_negative", list_with([](AddDesc& d) {
        d.src_dims = Dims{1, -3, 1, 1};
      }),
      K::InvalidArgument, {"src_dims 1x-3x1x1", "got -3"});
  add("dst_count_overflow", list_with([](AddDesc& d) {
        const std::int64_t big = std::int64_t{1} << 31;
        d.src_dims = Dims{1, 1, 1, 1};
        d.dst_dims = Dims{big, big, big, 1};
      }),
      K::InvalidArgument, {"dst_dims 2147483648x2147483648x2147483648x1", "more elements"});
  add("alpha_nan", list_with([](AddDesc& d) { d.alpha = std::numeric_limits<float>::quiet_NaN(); }),
      K::InvalidArgument, {"alpha", "nan"});
  add("beta_infinite",
      list_with([](AddDesc& d) { d.beta = -std::numeric_limits<float>::infinity(); }),
      K::InvalidArgument, {"beta", "-inf"});
  add("integer_dtype", list_with([](AddDesc& d) { d.dtype = DType::i64; }), K::InvalidArgument,
      {"dtype", "i64"});
  add("bias_of_rank_one", [] { AddDesc::bias(Dims{5}); }, K::InvalidArgument,
      {"rank >= 2", "'5'", "rank 1"});
  add("bwd_weights_direction",
      [] {
        Context context = reference_context();
        dnnx::add_list(context, base_desc(), Direction::bwd_weights);
      },
      K::InvalidArgument, {"bwd_weights"});

  // --- forward tensors ---
  add("dtype_mix", fwd_with([](const AddDesc& d, Tensor& src, Tensor&) {
        src = random_tensor(d.src_dims, DType::bf16, d.layout, 3);
      }),
      K::InvalidArgument, {"dtype mix", "src", "bf16", "f32"});
  add("src_dims_mismatch", fwd_with([](const AddDesc& d, Tensor& src, Tensor&) {
        src = Tensor::zeros({1, 4, 1, 1}, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"src dims 1x4x1x1", "src_dims 1x3x1x1"});
  add("layout_mismatch", fwd_with([](const AddDesc& d, Tensor&, Tensor& dst) {
        dst = random_tensor(d.dst_dims, d.dtype, Layout::channels_last, 3);
      }),
      K::InvalidArgument, {"layout mismatch", "dst", "nchw"});
  add("null_data", fwd_with([](const AddDesc& d, Tensor&, Tensor& dst) {
        dst = Tensor::view(nullptr, d.dst_dims, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"dst has null data"});
  add("src_on_cuda_device", fwd_with([](const AddDesc& d, Tensor& src, Tensor&) {
        src = Tensor::view(src.data(), d.src_dims, d.dtype, d.layout, dnnx::Device::cuda(0));
      }),
      K::InvalidArgument, {"src", "cuda:0", "cpu"});
  add("src_inside_dst",
      [] {
        // A bias read from dst's own memory would be overwritten while it is still needed.
        const AddDesc desc = base_desc();
        Tensor dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
        const Tensor inside = Tensor::view(dst.data(), desc.src_dims, desc.dtype, desc.layout);
        Context context = reference_context();
        dnnx::add_fwd(context, desc, inside, dst);
      },
      K::InvalidArgument, {"dst overlaps src", "cannot run in place"});

  // --- backward tensors ---
  add("bwd_diff_src_wrong_dims", bwd_with([](const AddDesc& d, Tensor&, Tensor& diff_src) {
        diff_src = Tensor::zeros({1, 3, 1, 7}, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"diff_src dims 1x3x1x7", "1x3x1x1"});
  add("bwd_diff_src_inside_diff_dst",
      bwd_with([](const AddDesc& d, Tensor& diff_dst, Tensor& diff_src) {
        diff_src =
            Tensor::view(static_cast<float*>(diff_dst.data()) + 5, d.src_dims, d.dtype, d.layout);
      }),
      K::InvalidArgument, {"diff_src overlaps diff_dst"});
  add("bwd_dtype_mix", bwd_with([](const AddDesc& d, Tensor& diff_dst, Tensor&) {
        diff_dst = random_tensor(d.dst_dims, DType::f16, d.layout, 4);
      }),
      K::InvalidArgument, {"dtype mix", "diff_dst", "f16"});

  // --- selection ---
  add("fixed_id_not_a_candidate",
      [] {
        const AddDesc desc = base_desc();
        Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
        Tensor dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
        Context context = reference_context();
        context.tune().policy(dnnx::OpKind::add, Direction::fwd) =
            dnnx::AlgoPolicy::fixed("cudnn:kernel:add");
        dnnx::add_fwd(context, desc, src, dst);
      },
      K::InvalidArgument, {"cudnn:kernel:add", "reference:direct"});
  return cases;
}

class AddErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(AddErrors, RaisesWithKindAndMessage) { expect_raises(GetParam(), "add"); }

INSTANTIATE_TEST_SUITE_P(Table, AddErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(AddErrors, TableHasAtLeastFifteenCases) { EXPECT_GE(bad_cases().size(), 15u); }

// beta = 0 makes oneDNN's scaled_dst formulation unsupported: fixing it says why.
TEST(AddErrors, FixedScaledDstWithBetaZeroIsUnsupported) {
  std::string why;
  if (!dnnx::backend_available(BackendKind::cpu, &why)) GTEST_SKIP() << why;
  AddDesc desc = base_desc();
  desc.beta = 0;
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
  std::string id;
  for (const dnnx::AlgoInfo& algo : dnnx::add_list(context, desc, Direction::fwd)) {
    if (algo.id.ends_with(":scaled_dst")) id = algo.id;
  }
  ASSERT_FALSE(id.empty());
  context.tune().policy(dnnx::OpKind::add, Direction::fwd) = dnnx::AlgoPolicy::fixed(id);
  try {
    dnnx::add_select(context, desc, Direction::fwd);
    FAIL() << id << " was accepted with beta = 0";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    EXPECT_NE(error.message().find("reads dst"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
