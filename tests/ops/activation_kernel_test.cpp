// The cpu backend's own activation kernel (src/backends/onednn/activation_kernel.cpp) at each simd
// level this machine has (Note [simd levels]), called directly on raw buffers: every level against
// the reference backend (Note [activation tolerances]) and the vector ones against scalar, forward
// and backward from src and from dst, for every kind variant and dtype, on lengths around the
// vector width (1, 7, 16, 17), spanning several thread chunks, and large enough for streaming
// stores (Note [streaming stores]). Each run repeats bitwise, runs in place (dst over src, diff_src
// over diff_dst) bitwise like out of place, and runs bitwise alike from a buffer that starts a few
// elements off the alignment of the streaming stores (their masked head).

#include "backends/onednn/activation_kernel.hpp"

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "ops/activation_cases.hpp"
#include "support/compare.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

using onednn::act::From;
using onednn::simd::Level;

struct KernelCase {
  std::string name;
  ActivationDesc desc;
};

void PrintTo(const KernelCase& c,  // NOLINT(readability-identifier-naming): gtest's name
             std::ostream* out) {
  *out << c.name;
}

std::vector<KernelCase> kernel_cases() {
  struct Variant {
    const char* name;
    ActivationKind kind;
    double alpha = 1.0;
    double ceiling = 6.0;
  };
  const std::vector<Variant> variants = {
      {"identity", ActivationKind::identity},
      {"relu", ActivationKind::relu},
      {"clipped_relu_c0p5", ActivationKind::clipped_relu, 1.0, 0.5},
      // A ceiling no float holds: the kinks sit at the floats around it.
      {"clipped_relu_c0p3", ActivationKind::clipped_relu, 1.0, 0.3},
      {"clipped_relu_c6", ActivationKind::clipped_relu, 1.0, 6.0},
      {"tanh", ActivationKind::tanh},
      {"sigmoid", ActivationKind::sigmoid},
      {"elu", ActivationKind::elu, 1.0},
      {"elu_a0p5", ActivationKind::elu, 0.5},
      {"elu_aneg0p5", ActivationKind::elu, -0.5},
      {"swish", ActivationKind::swish},
  };
  std::vector<KernelCase> cases;
  for (const Variant& v : variants) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<std::int64_t> sizes = {1, 7, 16, 17, 3 * 16384 + 21};
      // Outputs of more than 8 MiB (streaming stores), for a cheap and an expensive kind.
      if (v.kind == ActivationKind::relu || v.kind == ActivationKind::tanh)
        sizes.push_back(dtype == DType::f32 ? 2200001 : 4400003);
      for (const std::int64_t size : sizes) {
        ActivationDesc desc = ActivationDesc::from_dims(v.kind, Dims{size}, dtype);
        desc.alpha = v.alpha;
        desc.ceiling = v.ceiling;
        desc.validate();
        cases.push_back(
            {std::string(v.name) + "_" + std::to_string(size) + "_" + std::string(to_string(dtype)),
             desc});
      }
    }
  }
  return cases;
}

// The clipped-relu kinks of activation_src() are at the ceiling as stored: for a ceiling no float
// holds, put some at the floats just below and above it too.
Tensor kernel_src(const ActivationDesc& desc, std::uint64_t seed) {
  Tensor src = activation_src(desc, seed);
  if (desc.kind != ActivationKind::clipped_relu) return src;
  std::vector<float> values = src.to_f32();
  const auto c = static_cast<float>(desc.ceiling);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i % 17 == 2) values[i] = std::nextafter(c, 0.0f);
    if (i % 17 == 4) values[i] = std::nextafter(c, 10.0f);
  }
  return tensor_from(desc.dims, desc.dtype, desc.layout, values);
}

// A tensor of `like`'s shape holding what the kernel wrote to `data`.
Tensor from_buffer(const Tensor& like, const void* data) {
  Tensor out = clone(like);
  std::memcpy(out.data(), data, static_cast<std::size_t>(like.numel()) * size_of(like.dtype()));
  return out;
}

// A buffer of `tensor`'s bytes starting `offset` elements into its storage (off the 64-byte
// alignment of a fresh allocation when offset is not a multiple of 64 / the element size).
struct Shifted {
  std::vector<unsigned char> storage;
  void* data = nullptr;
  Shifted(const Tensor& tensor, std::size_t offset) {
    const std::size_t element = size_of(tensor.dtype());
    const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * element;
    storage.resize(bytes + (offset + 64) * element);
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    data = storage.data() + (64 - address % 64) % 64 + offset * element;
    std::memcpy(data, tensor.data(), bytes);
  }
};

std::string label(const ActivationDesc& desc, Direction direction, Level level, const char* what) {
  return activation_context(desc, direction,
                            std::string("cpu:kernel:act at level ") +
                                std::string(onednn::simd::to_string(level)) + " " + what);
}

class ActivationKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(ActivationKernel, EachLevelMatchesTheReferenceAndTheOther) {
  ActivationDesc desc = GetParam().desc;
  const std::int64_t n = desc.numel();
  const std::uint64_t seed = seed_from(GetParam().name);
  const Tensor src = kernel_src(desc, seed);
  const Tensor dst = reference_activation_fwd(desc, src);
  const Tensor dy = tensor_from(desc.dims, desc.dtype, desc.layout,
                                random_uniform(static_cast<std::size_t>(n), seed + 1));
  // The exact gradient: the reference from src.
  const Tensor expected_bwd = reference_activation_bwd(desc, src, dst, dy);

  std::vector<Tensor> fwd_by_level;
  std::vector<std::vector<Tensor>> bwd_by_level;
  for (const Level level : onednn::simd::levels) {
    if (!onednn::simd::level_supported(level)) {
      std::cout << "[ skipped  ] level " << onednn::simd::to_string(level)
                << ": this CPU lacks it\n";
      continue;
    }
    // Forward: out of place, again, in place, from a shifted buffer.
    const std::string f = label(desc, Direction::fwd, level, "");
    Tensor out = nan_tensor(desc.dims, desc.dtype, desc.layout);
    onednn::act::forward(desc, level, src.data(), out.data(), n);
    EXPECT_TRUE(activation_close(desc, Direction::fwd, out, dst, nullptr, f));
    Tensor again = nan_tensor(desc.dims, desc.dtype, desc.layout);
    onednn::act::forward(desc, level, src.data(), again.data(), n);
    EXPECT_TRUE(bitwise_equal(out, again, "dst (second run)", f));
    Tensor in_place = clone(src);
    onednn::act::forward(desc, level, in_place.data(), in_place.data(), n);
    EXPECT_TRUE(bitwise_equal(out, in_place, "dst (in place)", f));
    Shifted shifted_src(src, 3), shifted_dst(out, 5);
    onednn::act::forward(desc, level, shifted_src.data, shifted_dst.data, n);
    EXPECT_TRUE(bitwise_equal(out, from_buffer(out, shifted_dst.data), "dst (shifted)", f));
    fwd_by_level.push_back(out);

    // Backward from each tensor it can use.
    std::vector<Tensor> grads;
    for (const From from : {From::src, From::dst}) {
      const char* which = from == From::src ? "from src" : "from dst";
      const std::string b = label(desc, Direction::bwd_data, level, which);
      std::string why;
      if (!onednn::act::backward_supported(desc, from, &why)) {
        EXPECT_EQ(from, From::dst) << b;
        EXPECT_FALSE(activation_bwd_from_dst(desc.kind, desc.alpha)) << b << ": " << why;
        try {
          Tensor unused = nan_tensor(desc.dims, desc.dtype, desc.layout);
          onednn::act::backward(desc, level, from, dst.data(), dy.data(), unused.data(), n);
          ADD_FAILURE() << "an unsupported backward ran\n  " << b;
        } catch (const Error& error) {
          EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
        }
        continue;
      }
      const Tensor& data = from == From::src ? src : dst;
      Tensor grad = nan_tensor(desc.dims, desc.dtype, desc.layout);
      onednn::act::backward(desc, level, from, data.data(), dy.data(), grad.data(), n);
      EXPECT_TRUE(activation_close(desc, Direction::bwd_data, grad, expected_bwd, &dy, b));
      Tensor grad_again = nan_tensor(desc.dims, desc.dtype, desc.layout);
      onednn::act::backward(desc, level, from, data.data(), dy.data(), grad_again.data(), n);
      EXPECT_TRUE(bitwise_equal(grad, grad_again, "diff_src (second run)", b));
      Tensor grad_in_place = clone(dy);
      onednn::act::backward(desc, level, from, data.data(), grad_in_place.data(),
                            grad_in_place.data(), n);
      EXPECT_TRUE(bitwise_equal(grad, grad_in_place, "diff_src (in place)", b));
      Shifted shifted_data(data, 1), shifted_dy(dy, 2), shifted_grad(grad, 7);
      onednn::act::backward(desc, level, from, shifted_data.data, shifted_dy.data,
                            shifted_grad.data, n);
      EXPECT_TRUE(
          bitwise_equal(grad, from_buffer(grad, shifted_grad.data), "diff_src (shifted)", b));
      grads.push_back(grad);
    }
    bwd_by_level.push_back(grads);
  }
  // The vector levels against scalar (index 0), within the reference's bounds: the scalar level
  // computes in f64, so it stands in for the exact result here.
  for (std::size_t level = 1; level < fwd_by_level.size(); ++level) {
    const std::string vs = "vector level " + std::to_string(level) + " vs scalar";
    EXPECT_TRUE(activation_close(desc, Direction::fwd, fwd_by_level[level], fwd_by_level[0],
                                 nullptr, activation_context(desc, Direction::fwd, vs)));
    for (std::size_t i = 0; i < bwd_by_level[0].size(); ++i) {
      EXPECT_TRUE(activation_close(desc, Direction::bwd_data, bwd_by_level[level][i],
                                   bwd_by_level[0][i], &dy,
                                   activation_context(desc, Direction::bwd_data, vs)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationKernel, ::testing::ValuesIn(kernel_cases()),
                         [](const ::testing::TestParamInfo<KernelCase>& info) {
                           return info.param.name;
                         });

// Note [relu on 16-bit storage]: the AVX-512 level's relu on bf16 / f16 works on the stored
// bits. Every bit pattern as x (zeros, subnormals, infinities, NaNs), dy cycling through ordinary
// and special values, forward and both backward passes: the same bits as the scalar level, which
// computes in f64 (both NaN counts as the same: payloads may differ).
TEST(ActivationKernelRelu16, EveryBitPatternMatchesTheScalarLevel) {
  if (!onednn::simd::level_supported(Level::avx512)) GTEST_SKIP() << "this CPU lacks AVX-512";
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const bool bf16 = dtype == DType::bf16;
    const std::uint16_t inf = bf16 ? 0x7f80 : 0x7c00;
    const std::uint16_t one = bf16 ? 0x3f80 : 0x3c00;
    const std::vector<std::uint16_t> dy_values = {one,
                                                  static_cast<std::uint16_t>(one | 0x8000),
                                                  0x0000,
                                                  0x8000,
                                                  inf,
                                                  static_cast<std::uint16_t>(inf | 0x8000),
                                                  static_cast<std::uint16_t>(inf | 0x40),
                                                  0x0001,
                                                  0x8001,
                                                  static_cast<std::uint16_t>(one + 0x100)};
    const std::int64_t n = 65536 + 37;  // a masked tail
    std::vector<std::uint16_t> x(static_cast<std::size_t>(n)), dy(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<std::uint16_t>(i);
      dy[i] = dy_values[i % dy_values.size()];
    }
    const ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::relu, Dims{n}, dtype);
    auto is_nan = [&](std::uint16_t bits) { return (bits & 0x7fff) > inf; };
    auto expect_same = [&](const std::vector<std::uint16_t>& vector,
                           const std::vector<std::uint16_t>& scalar, const char* what) {
      int shown = 0;
      for (std::size_t i = 0; i < vector.size(); ++i) {
        if (vector[i] == scalar[i] || (is_nan(vector[i]) && is_nan(scalar[i]))) continue;
        ADD_FAILURE() << to_string(dtype) << " relu " << what << ": x bits 0x" << std::hex << x[i]
                      << ", dy bits 0x" << dy[i] << ": avx512 0x" << vector[i] << ", scalar 0x"
                      << scalar[i];
        if (++shown == 5) return;
      }
    };
    std::vector<std::uint16_t> vector(x.size()), scalar(x.size());
    for (const Level level : {Level::avx512, Level::avx512_bf16}) {
      if (!onednn::simd::level_supported(level)) continue;
      onednn::act::forward(desc, level, x.data(), vector.data(), n);
      onednn::act::forward(desc, Level::scalar, x.data(), scalar.data(), n);
      expect_same(vector, scalar, "forward");
      for (const From from : {From::src, From::dst}) {
        onednn::act::backward(desc, level, from, x.data(), dy.data(), vector.data(), n);
        onednn::act::backward(desc, Level::scalar, from, x.data(), dy.data(), scalar.data(), n);
        expect_same(vector, scalar, from == From::src ? "backward from src" : "backward from dst");
      }
    }
  }
}

// Asking for a level the CPU lacks is an error, not a crash.
TEST(ActivationKernelLevels, UnsupportedLevelIsAnInternalError) {
  const Level* lacking =
      std::find_if(std::begin(onednn::simd::levels), std::end(onednn::simd::levels),
                   [](Level l) { return !onednn::simd::level_supported(l); });
  if (lacking == std::end(onednn::simd::levels)) GTEST_SKIP() << "this CPU has every level";
  const ActivationDesc desc = ActivationDesc::from_dims(ActivationKind::relu, Dims{4});
  std::vector<float> x(4, 1.0f), y(4);
  try {
    onednn::act::forward(desc, *lacking, x.data(), y.data(), 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(error.what()).find(onednn::simd::to_string(*lacking)), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
