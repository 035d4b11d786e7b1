// Bad inputs to reorder: every case must raise dnnx::Error of the right kind whose message
// (without the context decorations) names the argument and the value received. Also the desc's
// own behaviour: of() from tensors, same_order(), repro / key / hash.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/reorder.hpp>

#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// f32 NCHW 2x3x4x5 into f16 NHWC.
ReorderDesc base_desc() {
  ReorderDesc desc;
  desc.dims = Dims{2, 3, 4, 5};
  desc.src_dtype = DType::f32;
  desc.dst_dtype = DType::f16;
  desc.src_layout = Layout::channels_first;
  desc.dst_layout = Layout::channels_last;
  return desc;
}

std::function<void()> list_with(std::function<void(ReorderDesc&)> edit) {
  return list_after(base_desc(), std::move(edit), dnnx::reorder_list);
}

std::function<void()> fwd_with(std::function<void(const ReorderDesc&, Tensor&, Tensor&)> edit) {
  return [edit] {
    const ReorderDesc desc = base_desc();
    Tensor src = random_tensor(desc.dims, desc.src_dtype, desc.src_layout, 1);
    Tensor dst = random_tensor(desc.dims, desc.dst_dtype, desc.dst_layout, 2);
    edit(desc, src, dst);
    Context context = reference_context();
    dnnx::reorder_fwd(context, desc, src, dst);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);

  // --- the desc ---
  add("rank_zero", list_with([](ReorderDesc& d) { d.dims = Dims{}; }), K::InvalidArgument,
      {"dims", "rank 0", "rank 1 to 5"});
  add("entry_negative", list_with([](ReorderDesc& d) {
        d.dims = Dims{2, -3, 4};
      }),
      K::InvalidArgument, {"dims 2x-3x4", "entry 1", "got -3"});
  add("count_overflow", list_with([](ReorderDesc& d) {
        const std::int64_t big = std::int64_t{1} << 31;
        d.dims = Dims{big, big, big, 1};
      }),
      K::InvalidArgument, {"dims", "2147483648x2147483648x2147483648x1"});
  add("src_dtype_integer", list_with([](ReorderDesc& d) { d.src_dtype = DType::i32; }),
      K::InvalidArgument, {"src_dtype", "f32, f16 or bf16", "got i32"});
  add("dst_dtype_integer", list_with([](ReorderDesc& d) { d.dst_dtype = DType::i64; }),
      K::InvalidArgument, {"dst_dtype", "got i64"});
  add("src_layout_invalid",
      list_with([](ReorderDesc& d) { d.src_layout = static_cast<Layout>(7); }), K::InvalidArgument,
      {"src_layout", "invalid value 7"});
  add("alpha_nan",
      list_with([](ReorderDesc& d) { d.alpha = std::numeric_limits<float>::quiet_NaN(); }),
      K::InvalidArgument, {"alpha", "nan"});
  add("beta_infinite",
      list_with([](ReorderDesc& d) { d.beta = std::numeric_limits<float>::infinity(); }),
      K::InvalidArgument, {"beta", "inf"});
  add("bwd_direction",
      [] {
        Context context = reference_context();
        dnnx::reorder_list(context, base_desc(), Direction::bwd_data);
      },
      K::InvalidArgument, {"bwd"});

  // --- of() from tensors ---
  add("of_dims_differ",
      [] {
        const Tensor src = random_tensor(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_first, 1);
        const Tensor dst = random_tensor(Dims{2, 3, 5, 4}, DType::f32, Layout::channels_last, 2);
        ReorderDesc::of(src, dst);
      },
      K::InvalidArgument, {"same dims", "2x3x4x5", "2x3x5x4"});
  add("of_non_dense_src",
      [] {
        static std::vector<float> storage(400);
        // Every other element of a 2x3x4x10 buffer: not dense in any layout.
        const Tensor src =
            Tensor::view(storage.data(), Dims{2, 3, 4, 5}, DType::f32, Dims{120, 40, 10, 2});
        const Tensor dst = random_tensor(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_last, 2);
        ReorderDesc::of(src, dst);
      },
      K::InvalidArgument, {"dense src", "120x40x10x2"});

  // --- the tensors of a call ---
  add("src_dtype_mix", fwd_with([](const ReorderDesc& d, Tensor& src, Tensor&) {
        src = random_tensor(d.dims, DType::bf16, d.src_layout, 3);
      }),
      K::InvalidArgument, {"dtype mix", "src is bf16", "src_dtype is f32"});
  add("dst_dtype_mix", fwd_with([](const ReorderDesc& d, Tensor&, Tensor& dst) {
        dst = random_tensor(d.dims, DType::f32, d.dst_layout, 3);
      }),
      K::InvalidArgument, {"dtype mix", "dst is f32", "dst_dtype is f16"});
  add("dst_dims_differ", fwd_with([](const ReorderDesc& d, Tensor&, Tensor& dst) {
        dst = random_tensor(Dims{2, 3, 4, 6}, d.dst_dtype, d.dst_layout, 3);
      }),
      K::InvalidArgument, {"dst dims 2x3x4x6", "2x3x4x5"});
  add("dst_layout_mismatch", fwd_with([](const ReorderDesc& d, Tensor&, Tensor& dst) {
        dst = random_tensor(d.dims, d.dst_dtype, Layout::channels_first, 3);
      }),
      K::InvalidArgument, {"layout mismatch", "dst", "nhwc"});
  add("src_non_dense", fwd_with([](const ReorderDesc& d, Tensor& src, Tensor&) {
        static std::vector<float> storage(400);
        src = Tensor::view(storage.data(), d.dims, d.src_dtype, Dims{120, 40, 10, 2});
      }),
      K::InvalidArgument, {"layout mismatch", "src strides 120x40x10x2"});
  add("null_dst", fwd_with([](const ReorderDesc& d, Tensor&, Tensor& dst) {
        dst = Tensor::view(nullptr, d.dims, d.dst_dtype, d.dst_layout);
      }),
      K::InvalidArgument, {"dst has null data"});
  add("src_on_cuda_device", fwd_with([](const ReorderDesc& d, Tensor& src, Tensor&) {
        src = Tensor::view(src.data(), d.dims, d.src_dtype, d.src_layout, dnnx::Device::cuda(0));
      }),
      K::InvalidArgument, {"src", "cuda:0", "cpu"});
  add("dst_overlaps_src",
      [] {
        ReorderDesc desc = base_desc();
        desc.dst_dtype = DType::f32;
        Tensor src = random_tensor(desc.dims, desc.src_dtype, desc.src_layout, 1);
        Tensor dst = Tensor::view(src.data(), desc.dims, desc.dst_dtype, desc.dst_layout);
        Context context = reference_context();
        dnnx::reorder_fwd(context, desc, src, dst);
      },
      K::InvalidArgument, {"dst overlaps src", "cannot run in place"});
  return cases;
}

class ReorderErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ReorderErrors, RaisesWithKindAndMessage) { expect_raises(GetParam(), "reorder"); }

INSTANTIATE_TEST_SUITE_P(Table, ReorderErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(ReorderDesc, OfTakesEachTensorsDtypeAndLayout) {
  const Tensor src = random_tensor(Dims{2, 3, 4, 5}, DType::bf16, Layout::channels_last, 1);
  const Tensor dst = random_tensor(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_first, 2);
  const ReorderDesc desc = ReorderDesc::of(src, dst, 0.5f, 1.0f);
  EXPECT_EQ(desc.dims, (Dims{2, 3, 4, 5}));
  EXPECT_EQ(desc.src_dtype, DType::bf16);
  EXPECT_EQ(desc.dst_dtype, DType::f32);
  EXPECT_EQ(desc.src_layout, Layout::channels_last);
  EXPECT_EQ(desc.dst_layout, Layout::channels_first);
  EXPECT_EQ(desc.alpha, 0.5f);
  EXPECT_EQ(desc.beta, 1.0f);
}

TEST(ReorderDesc, SameOrderWhereNoElementMoves) {
  ReorderDesc desc = base_desc();
  EXPECT_FALSE(desc.same_order());
  desc.dims = Dims{2, 1, 4, 5};  // one channel: both layouts put the elements in one order
  EXPECT_TRUE(desc.same_order());
  desc.dims = Dims{2, 16, 1, 1};  // no spatial extent
  EXPECT_TRUE(desc.same_order());
  desc.dims = Dims{5, 8};  // rank 2 is row-major in either layout
  EXPECT_TRUE(desc.same_order());
  desc.dims = Dims{2, 3, 7};
  EXPECT_FALSE(desc.same_order());
  desc.dst_layout = Layout::channels_first;
  EXPECT_TRUE(desc.same_order());
}

TEST(ReorderDesc, ReproKeyAndHashNameEveryField) {
  ReorderDesc desc = base_desc();
  desc.alpha = 0.5f;
  desc.beta = -2.0f;
  EXPECT_EQ(desc.repro(),
            "dnnx profile reorder --dims 2x3x4x5 --src-dtype f32 --dst-dtype f16 --src-layout nchw "
            "--dst-layout nhwc --alpha 0.5 --beta -2");
  EXPECT_EQ(desc.key(), "reorder dims=2x3x4x5 f32 nchw -> f16 nhwc alpha=0.5 beta=-2");
  ReorderDesc other = desc;
  EXPECT_EQ(desc.hash(), other.hash());
  other.src_layout = Layout::channels_last;
  EXPECT_NE(desc, other);
  EXPECT_NE(desc.hash(), other.hash());
  other = desc;
  other.dst_dtype = DType::bf16;
  EXPECT_NE(desc.hash(), other.hash());
  other = desc;
  other.beta = 0;
  EXPECT_NE(desc.hash(), other.hash());
}

}  // namespace
}  // namespace dnnx::test
