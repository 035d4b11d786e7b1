// Tensor's host conversions (to_f32, copy_from_f32, fill) on every dtype and on dense,
// channels_last, strided and rank-0 tensors: values in logical row-major order, elements outside
// a view untouched, and a copy from the tensor's own data.

#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace dnnx {
namespace {

// Values exact in every dtype (small integers, halves).
std::vector<float> ramp(std::int64_t count) {
  std::vector<float> values;
  for (std::int64_t i = 0; i < count; ++i) values.push_back(static_cast<float>(i % 97) - 40.0f);
  return values;
}

const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64};

TEST(TensorHost, RoundTripsInLogicalOrderInEveryLayoutAndDtype) {
  for (const DType dtype : dtypes) {
    for (const Dims& dims : {Dims{}, Dims{7}, Dims{3, 5}, Dims{2, 3, 4, 5}, Dims{2, 3, 2, 3, 4}}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        if (layout == Layout::channels_last && dims.rank() < 3) continue;
        SCOPED_TRACE(testing::Message()
                     << to_string(dtype) << " " << dims << " " << to_string(layout));
        Tensor t = Tensor::empty(dims, dtype, layout);
        const std::vector<float> values = ramp(dims.product());
        t.copy_from_f32(values);
        EXPECT_EQ(t.to_f32(), values);
        t.fill(-3.0f);
        EXPECT_EQ(t.to_f32(), std::vector<float>(values.size(), -3.0f));
      }
    }
  }
}

TEST(TensorHost, ChannelsLastStoresChannelsInnermost) {
  Tensor t = Tensor::empty(Dims{1, 2, 2, 3}, DType::f32, Layout::channels_last);
  t.copy_from_f32(ramp(12));  // logical (n, c, h, w) order: c is the second index
  const auto* raw = static_cast<const float*>(t.data());
  // Memory order n, h, w, c: element (0, c, h, w) at (h * 3 + w) * 2 + c.
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w)
        EXPECT_EQ(raw[(h * 3 + w) * 2 + c], static_cast<float>((c * 2 + h) * 3 + w) - 40.0f);
}

TEST(TensorHost, StridedViewsTouchOnlyTheirElements) {
  for (const DType dtype : dtypes) {
    SCOPED_TRACE(to_string(dtype));
    // A 3 x 4 view of every other column of a 3 x 8 buffer, and one of a transposed 4 x 3.
    Tensor buffer = Tensor::empty(Dims{3, 8}, dtype);
    buffer.fill(7.0f);
    Tensor view = Tensor::view(buffer.data(), Dims{3, 4}, dtype, Dims{8, 2});
    const std::vector<float> values = ramp(12);
    view.copy_from_f32(values);
    EXPECT_EQ(view.to_f32(), values);
    const std::vector<float> all = buffer.to_f32();
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 8; ++c) {
        const float expected = c % 2 == 0 ? values[static_cast<std::size_t>(r * 4 + c / 2)] : 7.0f;
        EXPECT_EQ(all[static_cast<std::size_t>(r * 8 + c)], expected) << r << "," << c;
      }
    }
    view.fill(1.0f);
    for (std::size_t i = 0; i < 24; ++i)
      EXPECT_EQ(buffer.to_f32()[i], i % 2 == 0 ? 1.0f : 7.0f) << i;
    Tensor transposed = Tensor::view(buffer.data(), Dims{4, 3}, dtype, Dims{2, 8});
    buffer.copy_from_f32(ramp(24));
    const std::vector<float> flat = ramp(24);
    const std::vector<float> read = transposed.to_f32();
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(read[static_cast<std::size_t>(r * 3 + c)],
                  flat[static_cast<std::size_t>(c * 8 + r * 2)]);
  }
}

TEST(TensorHost, CopiesFromItsOwnData) {
  Tensor t = Tensor::empty(Dims{4, 6}, DType::f32);
  t.copy_from_f32(ramp(24));
  t.copy_from_f32(std::span<const float>(static_cast<const float*>(t.data()), 24));
  EXPECT_EQ(t.to_f32(), ramp(24));
}

TEST(TensorHost, EmptyTensorsAndWrongCounts) {
  Tensor empty = Tensor::empty(Dims{2, 0, 3}, DType::f16);
  EXPECT_TRUE(empty.to_f32().empty());
  empty.copy_from_f32({});
  empty.fill(1.0f);
  Tensor t = Tensor::empty(Dims{2, 3}, DType::f32);
  EXPECT_THROW(t.copy_from_f32(ramp(5)), Error);
}

}  // namespace
}  // namespace dnnx
