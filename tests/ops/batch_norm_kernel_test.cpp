// The cpu backend's own batch-norm kernel (src/backends/onednn/batch_norm_kernel.cpp) at each simd
// level this machine has (Note [simd levels]), called directly: every level against the
// reference backend (Note [batch-norm tolerances]) and the vector ones against scalar, forward and
// backward, on shapes chosen for the kernel's edges: plane runs shorter than a vector, not a
// multiple of 16, longer than a piece; column counts not a multiple of 16 and wider than a tile;
// one and several row blocks; batch 1; few statistics (the by-piece schedule) and many (by
// statistic); outputs large enough for streaming stores, with runs that start unaligned. Every run
// repeats bitwise, and the two schedules of the planes walk give the same bits (what makes the
// kernel independent of the thread count, Note [batch-norm loops]). Also the threads the kernels
// run on (loop_pool.hpp).

#include "backends/onednn/batch_norm_kernel.hpp"

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "backends/onednn/loop_pool.hpp"
#include "core/dtype.hpp"
#include "ops/batch_norm_cases.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dnnx::test {
namespace {

using onednn::bnorm::Schedule;
using onednn::simd::Level;

struct KernelCase {
  std::string name;
  BatchNormDesc desc;
};

void PrintTo(const KernelCase& c,  // NOLINT(readability-identifier-naming): gtest's name
             std::ostream* out) {
  *out << c.name;
}

std::vector<KernelCase> kernel_cases() {
  struct Shape {
    Dims dims;
    BatchNormMode mode;
    Layout layout;
    bool large;  // one f32 training and one bf16 inference variant only
  };
  using M = BatchNormMode;
  const Layout first = Layout::channels_first;
  const Layout last = Layout::channels_last;
  const std::vector<Shape> shapes = {
      {{2, 3, 5, 7}, M::spatial, first, false},    // planes: runs of 35, by piece
      {{3, 20, 4, 4}, M::spatial, first, false},   // planes: runs of exactly 16, by statistic
      {{1, 2, 3, 5}, M::spatial, first, false},    // batch 1, runs shorter than a vector
      {{2, 5, 91, 91}, M::spatial, first, false},  // runs of 8281: two pieces
      {{2, 9, 7}, M::spatial, first, false},       // 1-D, runs of 7
      {{6, 33, 1, 1}, M::spatial, first, false},   // one position: walked as columns
      {{2, 3, 5, 7}, M::spatial, last, false},     // columns: 3
      {{4, 37, 6, 5}, M::spatial, last, false},    // columns: 16 + 16 + 5
      {{3, 300, 3, 3}, M::spatial, last, false},   // two tiles, an odd row count
      {{8, 16, 40, 40}, M::spatial, last, false},  // several row blocks, the last one short
      {{8, 10}, M::per_activation, first, false},  // N x F
      {{5, 3, 4, 7}, M::per_activation, last, false},
      {{2, 1, 3}, M::per_activation, first, false},  // two values per statistic
      {{4, 64, 97, 95}, M::spatial, first, true},    // > 8 MiB of f32: streaming, unaligned runs
      {{4, 64, 129, 129}, M::spatial, first, true},  // > 8 MiB of bf16
      {{8, 64, 64, 64}, M::spatial, last, true},     // large columns
  };
  std::vector<KernelCase> cases;
  for (const Shape& shape : shapes) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (int variant = 0; variant < 4; ++variant) {
        BatchNormDesc desc;
        desc.dims = shape.dims;
        desc.mode = shape.mode;
        desc.layout = shape.layout;
        desc.dtype = dtype;
        desc.training = variant % 2 == 0;
        desc.affine = variant < 2;
        desc.eps = variant == 3 ? 1e-3 : 1e-5;
        desc.momentum = variant == 2 ? 0.3 : 0.1;
        if (shape.large &&
            !((dtype == DType::f32 && variant == 0) || (dtype == DType::bf16 && variant == 1) ||
              (dtype == DType::f16 && variant == 2)))
          continue;
        try {
          desc.validate();
        } catch (const Error&) {
          continue;  // training on a single value per statistic
        }
        cases.push_back({batch_norm_case_name(desc), desc});
      }
    }
  }
  return cases;
}

// A result holder shaped like run_batch_norm_fwd's, filled by the kernel.
BatchNormFwdResult kernel_fwd(const BatchNormDesc& desc, const BatchNormInputs& in, Level level,
                              Schedule schedule) {
  const Dims params = desc.param_dims();
  const Layout param_layout = params.rank() == 1 ? Layout::channels_first : desc.layout;
  BatchNormFwdResult r;
  r.dst = nan_tensor(desc.dims, desc.dtype, desc.layout);
  r.running_mean = Tensor::empty(params, DType::f32, param_layout);
  r.running_var = Tensor::empty(params, DType::f32, param_layout);
  copy(in.running_mean, r.running_mean);
  copy(in.running_var, r.running_var);
  onednn::bnorm::Stats s;
  if (desc.affine) {
    s.scale = static_cast<const float*>(in.scale.data());
    s.shift = static_cast<const float*>(in.shift.data());
  }
  s.running_mean = static_cast<float*>(r.running_mean.data());
  s.running_var = static_cast<float*>(r.running_var.data());
  if (desc.training) {
    r.saved_mean = nan_tensor(params, DType::f32, param_layout);
    r.saved_inv_std = nan_tensor(params, DType::f32, param_layout);
    s.saved_mean = static_cast<float*>(r.saved_mean.data());
    s.saved_inv_std = static_cast<float*>(r.saved_inv_std.data());
  }
  onednn::bnorm::forward(desc, level, in.src.data(), r.dst.data(), s, schedule);
  return r;
}

BatchNormBwdResult kernel_bwd(const BatchNormDesc& desc, const BatchNormInputs& in,
                              const Tensor& saved_mean, const Tensor& saved_inv_std, Level level,
                              Schedule schedule) {
  const Dims params = desc.param_dims();
  const Layout param_layout = params.rank() == 1 ? Layout::channels_first : desc.layout;
  BatchNormBwdResult r;
  r.diff_src = nan_tensor(desc.dims, desc.dtype, desc.layout);
  onednn::bnorm::Stats s;
  if (desc.affine) {
    s.scale = static_cast<const float*>(in.scale.data());
    r.diff_scale = nan_tensor(params, DType::f32, param_layout);
    r.diff_shift = nan_tensor(params, DType::f32, param_layout);
    s.diff_scale = static_cast<float*>(r.diff_scale.data());
    s.diff_shift = static_cast<float*>(r.diff_shift.data());
  }
  if (desc.training) {
    s.saved_mean = const_cast<float*>(static_cast<const float*>(saved_mean.data()));
    s.saved_inv_std = const_cast<float*>(static_cast<const float*>(saved_inv_std.data()));
  } else {
    s.running_mean = const_cast<float*>(static_cast<const float*>(in.running_mean.data()));
    s.running_var = const_cast<float*>(static_cast<const float*>(in.running_var.data()));
  }
  onednn::bnorm::backward(desc, level, in.src.data(), in.diff_dst.data(), r.diff_src.data(), s,
                          schedule);
  return r;
}

std::string label(const BatchNormDesc& desc, Direction direction, Level level) {
  return batch_norm_context(
      desc, direction, "cpu:kernel:bnorm at level " + std::string(onednn::simd::to_string(level)));
}

class BatchNormKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(BatchNormKernel, EachLevelMatchesTheReferenceAndTheOther) {
  const BatchNormDesc& desc = GetParam().desc;
  const BatchNormInputs in = batch_norm_inputs(desc, seed_from(GetParam().name));
  Context reference = batch_norm_context_with(BackendKind::reference, Direction::fwd);
  const BatchNormFwdResult ref_fwd = run_batch_norm_fwd(reference, desc, in);
  const BatchNormBwdResult ref_bwd =
      run_batch_norm_bwd(reference, desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std);

  std::vector<BatchNormFwdResult> fwd;
  std::vector<BatchNormBwdResult> bwd;
  for (const Level level : onednn::simd::levels) {
    if (!onednn::simd::level_supported(level)) {
      std::cout << "[ skipped  ] level " << onednn::simd::to_string(level)
                << ": this CPU lacks it\n";
      continue;
    }
    const std::string f = label(desc, Direction::fwd, level);
    const std::string b = label(desc, Direction::bwd_data, level);
    fwd.push_back(kernel_fwd(desc, in, level, Schedule::automatic));
    EXPECT_TRUE(compare_batch_norm_fwd(desc, in, ref_fwd, fwd.back(), f));
    EXPECT_TRUE(bitwise_equal_fwd(fwd.back(), kernel_fwd(desc, in, level, Schedule::automatic), f));
    bwd.push_back(kernel_bwd(desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std, level,
                             Schedule::automatic));
    EXPECT_TRUE(compare_batch_norm_bwd(desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std, ref_bwd,
                                       bwd.back(), b));
    EXPECT_TRUE(bitwise_equal_bwd(
        bwd.back(),
        kernel_bwd(desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std, level, Schedule::automatic),
        b));
    // The planes walk's two schedules: the same bits (columns ignore the schedule).
    for (const Schedule schedule : {Schedule::by_statistic, Schedule::by_piece}) {
      const std::string which =
          schedule == Schedule::by_statistic ? " (by statistic)" : " (by piece)";
      EXPECT_TRUE(bitwise_equal_fwd(fwd.back(), kernel_fwd(desc, in, level, schedule), f + which));
      EXPECT_TRUE(bitwise_equal_bwd(
          bwd.back(),
          kernel_bwd(desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std, level, schedule),
          b + which));
    }
  }
  // The vector levels against scalar (fwd[0]), with the reference's bounds: the levels differ
  // only in summation order, FMA contraction and (avx512_bf16) the rounding of results below
  // 2^-126, far less than what the bounds allow against the exact results.
  for (std::size_t i = 1; i < fwd.size(); ++i) {
    const std::string vs = "vector level " + std::to_string(i) + " vs scalar";
    EXPECT_TRUE(compare_batch_norm_fwd(desc, in, fwd[0], fwd[i],
                                       batch_norm_context(desc, Direction::fwd, vs)));
    EXPECT_TRUE(compare_batch_norm_bwd(desc, in, ref_fwd.saved_mean, ref_fwd.saved_inv_std, bwd[0],
                                       bwd[i], batch_norm_context(desc, Direction::bwd_data, vs)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BatchNormKernel, ::testing::ValuesIn(kernel_cases()),
                         [](const ::testing::TestParamInfo<KernelCase>& info) {
                           return info.param.name;
                         });

// The threads the kernels run on (Note [loop threads]), OpenMP's and the backend's own pool (the
// only one where the process has no OpenMP runtime): every item exactly once, in contiguous
// ranges in order, no more ranges than threads; many calls back to back (the pool's spinning
// hand-over, Note [pool wake-ups]), serial and parallel ones mixed.
TEST(LoopThreads, EveryItemOnceInContiguousRanges) {
  using onednn::threads::Runner;
  for (const Runner runner : {Runner::automatic, Runner::pool}) {
    const int threads = onednn::threads::count(runner);
    ASSERT_GE(threads, 1);
    for (int call = 0; call < 3000; ++call) {
      const std::int64_t items = 1 + call % 97;
      const std::int64_t elements = call % 3 == 0 ? 100 : std::int64_t{1} << 20;
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(items));
      std::mutex mutex;
      std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
      onednn::threads::run_ranges(
          items, elements,
          [&](std::int64_t first, std::int64_t last) {
            for (std::int64_t i = first; i < last; ++i) ++seen[static_cast<std::size_t>(i)];
            std::lock_guard lock(mutex);
            ranges.emplace_back(first, last);
          },
          runner);
      for (std::int64_t i = 0; i < items; ++i)
        ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "item " << i << " of " << items;
      std::sort(ranges.begin(), ranges.end());
      ASSERT_LE(ranges.size(), static_cast<std::size_t>(threads));
      std::int64_t next = 0;
      for (const auto& [first, last] : ranges) {
        ASSERT_EQ(first, next);
        next = last;
      }
      ASSERT_EQ(next, items);
    }
  }
}

// Calls from several threads at once take turns on the pool and get teams of their own on
// OpenMP; each sees its own items.
TEST(LoopThreads, CallsFromSeveralThreadsAtOnce) {
  using onednn::threads::Runner;
  for (const Runner runner : {Runner::automatic, Runner::pool}) {
    std::vector<std::thread> callers;
    std::atomic<int> wrong{0};
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&, c] {
        for (int call = 0; call < 300; ++call) {
          const std::int64_t items = 8 + (call + c) % 40;
          std::atomic<std::int64_t> sum{0};
          onednn::threads::run_ranges(
              items, std::int64_t{1} << 20,
              [&](std::int64_t first, std::int64_t last) {
                for (std::int64_t i = first; i < last; ++i) sum += i;
              },
              runner);
          if (sum.load() != items * (items - 1) / 2) ++wrong;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

// ---- layer_simd.hpp's conversions (Note [simd levels]), which both kernels use

using onednn::simd::Bf16;
using onednn::simd::Bf16Rounding;
using onednn::simd::F16;

// 16 elements through the AVX-512 loads (the masked ones with every lane on) and stores; only
// pointers cross these functions (an __m512 argument would change the calling convention).
template <typename T>
DNNX_AVX512 void load_16(const T* in, float* plain, float* masked) {
  onednn::simd::avx512::store(plain, onednn::simd::avx512::load(in));
  onednn::simd::avx512::store(masked, onednn::simd::avx512::load(in, 0xffff));
}
template <Bf16Rounding R, typename T>
DNNX_AVX512 void store_16(const float* in, T* plain, T* masked) {
  const __m512 v = onednn::simd::avx512::load(in);
  onednn::simd::avx512::store<R>(plain, v);
  onednn::simd::avx512::store<R>(masked, v, 0xffff);
}

bool same_or_both_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(LayerSimd, EveryHalfAndBf16LoadsExactly) {
  if (!onednn::simd::level_supported(Level::avx512)) GTEST_SKIP() << "this CPU lacks AVX-512";
  for (std::uint32_t first = 0; first < 65536; first += 16) {
    F16 half[16];
    Bf16 brain[16];
    for (std::uint32_t j = 0; j < 16; ++j) {
      half[j].bits = static_cast<std::uint16_t>(first + j);
      brain[j].bits = static_cast<std::uint16_t>(first + j);
    }
    float plain[16], masked[16];
    load_16(half, plain, masked);
    for (std::uint32_t j = 0; j < 16; ++j) {
      const float expected = detail::half_to_float(half[j].bits);
      ASSERT_TRUE(same_or_both_nan(plain[j], expected)) << "f16 0x" << std::hex << first + j;
      ASSERT_TRUE(same_or_both_nan(masked[j], expected)) << "f16 0x" << std::hex << first + j;
    }
    load_16(brain, plain, masked);
    for (std::uint32_t j = 0; j < 16; ++j) {
      const float expected = detail::bf16_to_float(brain[j].bits);
      ASSERT_TRUE(same_or_both_nan(plain[j], expected)) << "bf16 0x" << std::hex << first + j;
      ASSERT_TRUE(same_or_both_nan(masked[j], expected)) << "bf16 0x" << std::hex << first + j;
    }
  }
}

// Stores round to nearest even like the scalar conversions: random bit patterns, ties, the f16
// overflow threshold, subnormals, infinities, NaN. vcvtneps2bf16 (the avx512_bf16 level) flushes
// results below 2^-126 to zero, and only those.
TEST(LayerSimd, StoresRoundLikeTheScalarConversions) {
  if (!onednn::simd::level_supported(Level::avx512)) GTEST_SKIP() << "this CPU lacks AVX-512";
  std::mt19937 rng(7);
  std::vector<float> values;
  for (int i = 0; i < 400000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f,
                        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                        0x1p-127f, 0x1p-140f, 0.0f, INFINITY, NAN}) {
    values.push_back(f);
    values.push_back(-f);
  }
  while (values.size() % 16 != 0) values.push_back(1.0f);
  const bool native = onednn::simd::level_supported(Level::avx512_bf16);
  for (std::size_t first = 0; first < values.size(); first += 16) {
    const float* in = values.data() + first;
    F16 half[16], half_masked[16];
    Bf16 brain[16], brain_masked[16], fast[16], fast_masked[16];
    store_16<Bf16Rounding::integer>(in, half, half_masked);
    store_16<Bf16Rounding::integer>(in, brain, brain_masked);
    if (native) store_16<Bf16Rounding::native>(in, fast, fast_masked);
    for (int j = 0; j < 16; ++j) {
      const float f = in[j];
      if (std::isnan(f)) {
        EXPECT_TRUE(std::isnan(detail::half_to_float(half[j].bits)) &&
                    std::isnan(detail::bf16_to_float(brain[j].bits)) &&
                    (!native || std::isnan(detail::bf16_to_float(fast[j].bits))));
        continue;
      }
      const std::uint16_t h = detail::float_to_half(f);
      const std::uint16_t b = detail::float_to_bf16(f);
      ASSERT_EQ(half[j].bits, h) << "f16 of " << f;
      ASSERT_EQ(half_masked[j].bits, h) << "f16 of " << f;
      ASSERT_EQ(brain[j].bits, b) << "bf16 of " << f;
      ASSERT_EQ(brain_masked[j].bits, b) << "bf16 of " << f;
      if (!native) continue;
      const bool subnormal = std::fpclassify(f) == FP_SUBNORMAL;
      const std::uint16_t want = subnormal ? static_cast<std::uint16_t>(b & 0x8000) : b;
      ASSERT_EQ(fast[j].bits, want) << "vcvtneps2bf16 of " << f;
      ASSERT_EQ(fast_masked[j].bits, want) << "vcvtneps2bf16 of " << f;
    }
  }
}

// Asking for a level the CPU lacks is an error, not a crash.
TEST(BatchNormKernelLevels, UnsupportedLevelIsAnInternalError) {
  const Level* lacking =
      std::find_if(std::begin(onednn::simd::levels), std::end(onednn::simd::levels),
                   [](Level l) { return !onednn::simd::level_supported(l); });
  if (lacking == std::end(onednn::simd::levels)) GTEST_SKIP() << "this CPU has every level";
  BatchNormDesc desc = BatchNormDesc::spatial_of(Dims{2, 3, 4, 4});
  std::vector<float> x(96, 1.0f), y(96);
  try {
    onednn::bnorm::forward(desc, *lacking, x.data(), y.data(), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(error.what()).find(onednn::simd::to_string(*lacking)), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
