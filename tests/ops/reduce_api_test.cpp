// reduce, argmax and accuracy through the public API on the reference and cpu backends, on
// values worked out by hand: the kinds, the tie rules (max / min gradients split among ties,
// argmax's first index, NaN), top-k, ignore_index, accumulating a count over calls (also under
// exhaustive selection, which must not add its timing runs into the caller's count), and the
// listings.

#include <dnnx/dnnx.hpp>

#include "ops/reduce_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

std::vector<BackendKind> host_backends() {
  std::vector<BackendKind> backends{BackendKind::reference};
  if (backend_available(BackendKind::cpu)) backends.push_back(BackendKind::cpu);
  return backends;
}

Context context_on(BackendKind backend) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

Tensor f32(const Dims& dims, const std::vector<float>& values) {
  return tensor_from(dims, DType::f32, Layout::channels_first, values);
}

std::vector<std::int64_t> indices_of(const Tensor& tensor) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    if (tensor.dtype() == DType::i32) {
      std::int32_t v = 0;
      std::memcpy(&v, static_cast<const char*>(tensor.data()) + i * 4, 4);
      out.push_back(v);
    } else {
      std::int64_t v = 0;
      std::memcpy(&v, static_cast<const char*>(tensor.data()) + i * 8, 8);
      out.push_back(v);
    }
  }
  return out;
}

Tensor labels_of(const std::vector<std::int64_t>& values) {
  Tensor labels = Tensor::empty(Dims{static_cast<std::int64_t>(values.size())}, DType::i64);
  std::memcpy(labels.data(), values.data(), values.size() * 8);
  return labels;
}

TEST(ReduceApi, EveryKindOnKnownValues) {
  // Rows (1, -2, 3, -4) and (3, 4, 0, 0) of a 2x4 tensor, reduced over axis 1.
  const Tensor src = f32(Dims{2, 4}, {1, -2, 3, -4, 3, 4, 0, 0});
  const struct {
    ReduceKind kind;
    float row0, row1;
  } expected[] = {{ReduceKind::sum, -2, 7},   {ReduceKind::mean, -0.5f, 1.75f},
                  {ReduceKind::max, 3, 4},    {ReduceKind::min, -4, 0},
                  {ReduceKind::norm1, 10, 7}, {ReduceKind::norm2, std::sqrt(30.0f), 5}};
  for (const BackendKind backend : host_backends()) {
    Context context = context_on(backend);
    for (const auto& e : expected) {
      SCOPED_TRACE(std::string(to_string(backend)) + " " + std::string(to_string(e.kind)));
      const ReduceDesc desc = ReduceDesc::over(e.kind, Dims{2, 4}, {1});
      Tensor dst = Tensor::empty(desc.dst_dims, DType::f32);
      reduce_fwd(context, desc, src, dst);
      const std::vector<float> got = dst.to_f32();
      EXPECT_FLOAT_EQ(got[0], e.row0);
      EXPECT_FLOAT_EQ(got[1], e.row1);
    }
  }
}

TEST(ReduceApi, MaxGradientIsSplitAmongTies) {
  const Tensor src = f32(Dims{1, 5}, {1, 3, 3, 2, 3});
  const Tensor diff_dst = f32(Dims{1, 1}, {6});
  for (const BackendKind backend : host_backends()) {
    SCOPED_TRACE(to_string(backend));
    Context context = context_on(backend);
    const ReduceDesc desc = ReduceDesc::over(ReduceKind::max, Dims{1, 5}, {1});
    Tensor dst = Tensor::empty(desc.dst_dims, DType::f32);
    reduce_fwd(context, desc, src, dst);
    Tensor diff_src = nan_tensor(desc.src_dims, DType::f32, Layout::channels_first);
    reduce_bwd(context, desc, src, dst, diff_dst, diff_src);
    EXPECT_EQ(diff_src.to_f32(), (std::vector<float>{0, 2, 2, 0, 2}));
    // min: one minimum, all of the gradient.
    const ReduceDesc min = ReduceDesc::over(ReduceKind::min, Dims{1, 5}, {1});
    reduce_fwd(context, min, src, dst);
    reduce_bwd(context, min, src, dst, diff_dst, diff_src);
    EXPECT_EQ(diff_src.to_f32(), (std::vector<float>{6, 0, 0, 0, 0}));
  }
}

TEST(ReduceApi, SumAndMeanGradientsBroadcast) {
  const Tensor diff_dst = f32(Dims{2, 1}, {4, -8});
  for (const BackendKind backend : host_backends()) {
    SCOPED_TRACE(to_string(backend));
    Context context = context_on(backend);
    for (const ReduceKind kind : {ReduceKind::sum, ReduceKind::mean}) {
      const ReduceDesc desc = ReduceDesc::over(kind, Dims{2, 4}, {1});
      Tensor diff_src = nan_tensor(desc.src_dims, DType::f32, Layout::channels_first);
      reduce_bwd(context, desc, diff_dst, diff_src);
      const float a = kind == ReduceKind::sum ? 4 : 1, b = kind == ReduceKind::sum ? -8 : -2;
      EXPECT_EQ(diff_src.to_f32(), (std::vector<float>{a, a, a, a, b, b, b, b}));
    }
  }
}

TEST(ReduceApi, NoReducedAxisIsACopy) {
  const Tensor src = f32(Dims{2, 3}, {1, -2, 3, -4, 5, -6});
  for (const BackendKind backend : host_backends()) {
    SCOPED_TRACE(to_string(backend));
    Context context = context_on(backend);
    const ReduceDesc desc = ReduceDesc::over(ReduceKind::max, Dims{2, 3}, {});
    Tensor dst = Tensor::empty(desc.dst_dims, DType::f32);
    reduce_fwd(context, desc, src, dst);
    EXPECT_EQ(dst.to_f32(), src.to_f32());
  }
}

TEST(ReduceApi, MaxPropagatesNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor src = f32(Dims{2, 3}, {1, nan, 3, 4, 5, 6});
  for (const BackendKind backend : {BackendKind::reference}) {
    Context context = context_on(backend);
    const ReduceDesc desc = ReduceDesc::over(ReduceKind::max, Dims{2, 3}, {1});
    Tensor dst = Tensor::empty(desc.dst_dims, DType::f32);
    reduce_fwd(context, desc, src, dst);
    EXPECT_TRUE(std::isnan(dst.to_f32()[0]));
    EXPECT_EQ(dst.to_f32()[1], 6);
  }
}

TEST(ArgmaxApi, FirstIndexOfTiesAndNanLargest) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor src = f32(Dims{3, 4}, {1, 5, 5, 2, 1, nan, 7, nan, -3, -3, -3, -3});
  for (const BackendKind backend : host_backends()) {
    for (const DType index : {DType::i32, DType::i64}) {
      SCOPED_TRACE(std::string(to_string(backend)) + " " + std::string(to_string(index)));
      Context context = context_on(backend);
      ArgmaxDesc desc;
      desc.src_dims = Dims{3, 4};
      desc.axis = 1;
      desc.index_dtype = index;
      Tensor dst = Tensor::empty(desc.dst_dims(), index);
      argmax_fwd(context, desc, src, dst);
      EXPECT_EQ(indices_of(dst), (std::vector<std::int64_t>{1, 1, 0}));
      // Along axis 0: column-wise.
      desc.axis = 0;
      Tensor columns = Tensor::empty(desc.dst_dims(), index);
      argmax_fwd(context, desc, src, columns);
      EXPECT_EQ(indices_of(columns), (std::vector<std::int64_t>{0, 1, 1, 1}));
    }
  }
}

TEST(AccuracyApi, TopKIgnoreIndexAndAccumulation) {
  // Four rows of 3 classes; labels 1, 0, 2, ignored.
  const Tensor logits = f32(Dims{4, 3}, {0.1f, 0.7f, 0.2f,  // argmax 1: correct at k = 1
                                         0.5f, 0.5f, 0.0f,  // tie 0/1: the first, 0: correct
                                         0.3f, 0.6f, 0.1f,  // label 2 ranks 2: correct at k = 3
                                         9.0f, 0.0f, 0.0f});
  const Tensor labels = labels_of({1, 0, 2, -100});
  for (const BackendKind backend : host_backends()) {
    SCOPED_TRACE(to_string(backend));
    Context context = context_on(backend);
    AccuracyDesc desc;
    desc.dims = Dims{4, 3};
    for (const auto& [k, correct] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{3, 3}}) {
      desc.top_k = k;
      Tensor count = count_tensor(DType::i64, 99);
      accuracy_fwd(context, desc, logits, labels, count);
      EXPECT_EQ(count_value(count), correct) << "top " << k;
    }
    desc.top_k = 1;
    desc.accumulate = true;
    desc.count_dtype = DType::f32;
    Tensor total = count_tensor(DType::f32, 0);
    for (int batch = 0; batch < 3; ++batch) accuracy_fwd(context, desc, logits, labels, total);
    EXPECT_EQ(count_value(total), 6);
  }
}

TEST(AccuracyApi, ExhaustiveSelectionDoesNotCountItsTimingRuns) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend unavailable";
  Context context = context_on(BackendKind::cpu);
  context.tune().policy(OpKind::accuracy, Direction::fwd) = AlgoPolicy::exhaustive();
  AccuracyDesc desc;
  desc.dims = Dims{4, 3};
  desc.accumulate = true;
  const Tensor logits = f32(Dims{4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0});
  const Tensor labels = labels_of({0, 1, 2, 1});
  Tensor count = count_tensor(DType::i64, 10);
  accuracy_fwd(context, desc, logits, labels, count);
  EXPECT_EQ(count_value(count), 13);
}

// docs/ops/reduce.md "scale / axpby": dst *= s is add with a one-element zero src and alpha 0.
TEST(ReduceApi, ScaleInPlaceIsAddWithAZeroScalar) {
  const Tensor zero = f32(Dims{1, 1}, {0});
  for (const BackendKind backend : host_backends()) {
    SCOPED_TRACE(to_string(backend));
    Context context = context_on(backend);
    Tensor dst = f32(Dims{2, 3}, {1, -2, 3, -4, 5, -6});
    add_fwd(context, AddDesc::from_dims(Dims{1, 1}, Dims{2, 3}, 0.0f, -0.5f), zero, dst);
    EXPECT_EQ(dst.to_f32(), (std::vector<float>{-0.5f, 1, -1.5f, 2, -2.5f, 3}));
  }
}

TEST(ReduceApi, ListingsNameTheirCandidates) {
  if (!backend_available(BackendKind::cpu)) GTEST_SKIP() << "cpu backend unavailable";
  Context context = context_on(BackendKind::cpu);
  const ReduceDesc desc = ReduceDesc::all(ReduceKind::sum, Dims{8, 16});
  const std::vector<AlgoInfo> fwd = reduce_list(context, desc, Direction::fwd);
  ASSERT_FALSE(fwd.empty());
  EXPECT_TRUE(fwd.front().supported);
  bool kernel = false, onednn = false;
  for (const AlgoInfo& algo : fwd) {
    kernel = kernel || algo.id == "cpu:kernel:reduce";
    onednn = onednn || (algo.id.starts_with("onednn:") && algo.supported);
  }
  EXPECT_TRUE(kernel);
  EXPECT_TRUE(onednn);
  const std::vector<AlgoInfo> bwd = reduce_list(context, desc, Direction::bwd_data);
  ASSERT_EQ(bwd.size(), 1u);
  EXPECT_EQ(bwd[0].id, "cpu:kernel:reduce");
  Context reference = context_on(BackendKind::reference);
  EXPECT_EQ(reduce_list(reference, desc, Direction::fwd)[0].id, "reference:direct");
}

}  // namespace
}  // namespace dnnx::test
