// The cudnn backend's pooling on a GPU (label "gpu"): the candidates it lists and why some are
// unsupported, every supported candidate of every case of the pool case table against the
// reference backend (forward and backward; max with indices: the indices exactly, i64 and i32),
// bitwise determinism of cudnn:legacy:pool:max_deterministic and dnnx's kernels on overlapping
// windows at benchmark size, the kernels' scalar fallback on unaligned views, the deferred report
// of a bad index, the zero-workspace guarantee, exhaustive selection, and a profile of the pooling
// benchmark layer for the log. Every test skips with the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "ops/pool_cases.hpp"
#include "ops/pool_support.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::test {
namespace {

Context gpu_context() {
  Context context(BackendKind::cudnn);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

const AlgoInfo* find(const std::vector<AlgoInfo>& algos, const std::string& id) {
  const auto it =
      std::find_if(algos.begin(), algos.end(), [&](const AlgoInfo& algo) { return algo.id == id; });
  return it == algos.end() ? nullptr : &*it;
}

// Which candidates exist for each mode, and when the legacy ones are unsupported.
TEST(CudnnPool, ListsTheModesOfTheDescAndTheKernels) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  const PoolDesc max = PoolDesc::from_shapes({2, 8, 12, 12}, {3}, {2}, {1});
  const auto fwd = pool_list(context, max, Direction::fwd);
  ASSERT_NE(find(fwd, "cudnn:legacy:pool:max"), nullptr);
  ASSERT_NE(find(fwd, "cudnn:legacy:pool:max_deterministic"), nullptr);
  ASSERT_NE(find(fwd, "cudnn:kernel:pool"), nullptr);
  EXPECT_EQ(find(fwd, "cudnn:kernel:pool:argmax"), nullptr);  // backward only
  EXPECT_TRUE(find(fwd, "cudnn:legacy:pool:max")->supported);
  const auto bwd = pool_list(context, max, Direction::bwd_data);
  EXPECT_FALSE(find(bwd, "cudnn:legacy:pool:max")->deterministic);
  EXPECT_TRUE(find(bwd, "cudnn:legacy:pool:max_deterministic")->deterministic);
  EXPECT_TRUE(find(bwd, "cudnn:kernel:pool")->deterministic);
  EXPECT_EQ(find(bwd, "cudnn:kernel:pool")->workspace_bytes, 0u);
  EXPECT_EQ(find(bwd, "cudnn:kernel:pool:argmax")->workspace_bytes,
            static_cast<std::size_t>(max.dst_dims().product()));

  PoolDesc asymmetric = max;
  asymmetric.pad_after = {0, 1, 0};
  const AlgoInfo* legacy =
      find(pool_list(context, asymmetric, Direction::fwd), "cudnn:legacy:pool:max");
  ASSERT_NE(legacy, nullptr);
  EXPECT_FALSE(legacy->supported);
  EXPECT_NE(legacy->reason.find("one padding per spatial dim"), std::string::npos);

  PoolDesc ceil =
      PoolDesc::from_shapes({2, 8, 12, 12}, {3}, {2}, {0}, PoolMode::avg_include_pad, true);
  const auto ceil_list = pool_list(context, ceil, Direction::bwd_data);
  EXPECT_EQ(find(ceil_list, "cudnn:legacy:pool:max"), nullptr);
  legacy = find(ceil_list, "cudnn:legacy:pool:avg_include_pad");
  ASSERT_NE(legacy, nullptr);
  EXPECT_FALSE(legacy->supported);
  EXPECT_NE(legacy->reason.find("no ceil mode"), std::string::npos);
  EXPECT_TRUE(find(ceil_list, "cudnn:kernel:pool")->supported);
  EXPECT_TRUE(ceil_list.front().supported);  // supported candidates come first

  // Dilated windows: cuDNN's pooling descriptor has none; the kernels run them, with indices too.
  for (const bool with_indices : {false, true}) {
    PoolDesc dilated = PoolDesc::from_shapes({2, 8, 12, 12}, {3}, {2}, {2}, {2}, PoolMode::max);
    dilated.indices = with_indices;
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      const auto list = pool_list(context, dilated, direction);
      EXPECT_TRUE(list.front().supported);
      ASSERT_NE(find(list, "cudnn:kernel:pool"), nullptr);
      EXPECT_TRUE(find(list, "cudnn:kernel:pool")->supported);
      const AlgoInfo* legacy_max = find(list, "cudnn:legacy:pool:max");
      ASSERT_NE(legacy_max, nullptr);
      EXPECT_FALSE(legacy_max->supported);
      if (!with_indices) {
        EXPECT_NE(legacy_max->reason.find("pooling descriptor has no dilation"), std::string::npos)
            << legacy_max->reason;
      }
    }
  }

  // Max with indices: dnnx's kernels only (Note [cudnn pool candidates]).
  PoolDesc indices = max;
  indices.indices = true;
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    const auto list = pool_list(context, indices, direction);
    ASSERT_NE(find(list, "cudnn:kernel:pool"), nullptr);
    EXPECT_TRUE(find(list, "cudnn:kernel:pool")->supported);
    EXPECT_EQ(find(list, "cudnn:kernel:pool")->workspace_bytes, 0u);
    EXPECT_EQ(list.front().id, "cudnn:kernel:pool");
    EXPECT_EQ(find(list, "cudnn:kernel:pool:argmax"), nullptr);
    for (const char* id : {"cudnn:legacy:pool:max", "cudnn:legacy:pool:max_deterministic"}) {
      ASSERT_NE(find(list, id), nullptr) << id;
      EXPECT_FALSE(find(list, id)->supported) << id;
      EXPECT_NE(find(list, id)->reason.find("neither writes nor reads argmax indices"),
                std::string::npos)
          << find(list, id)->reason;
    }
  }
}

// What a forward with indices must also match: the reference's indices, exactly; and the same
// run with i32 indices gives the same bits.
void expect_indices_agree(Context& fixed, const PoolDesc& desc, Direction direction,
                          const PoolOperands& operands, const PoolRun& run, const PoolRun& expected,
                          const std::string& context) {
  if (!desc.indices) return;
  if (direction == Direction::fwd) {
    EXPECT_EQ(index_values(run.indices), index_values(expected.indices)) << context;
  }
  const PoolRun narrow = run_pool(fixed, desc, direction, operands, DType::i32);
  EXPECT_TRUE(bitwise_equal(narrow.output, run.output, "output with i32 indices", context));
  if (direction == Direction::fwd) {
    EXPECT_EQ(index_values(narrow.indices), index_values(expected.indices)) << context;
  }
}

// Every supported candidate of every case against the reference, forward and backward.
class CudnnPoolParity : public ::testing::TestWithParam<PoolShape> {};

TEST_P(CudnnPoolParity, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  std::map<std::string, int> ran;
  for (const PoolCase& variant : pool_variants(GetParam())) {
    const PoolDesc& desc = variant.desc;
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      SCOPED_TRACE(variant.name + " " + pool_direction_name(direction));
      const PoolOperands operands = pool_operands(desc, seed_from(variant.name));
      Context reference(BackendKind::reference);
      const PoolRun expected = run_pool(reference, desc, direction, operands);
      const std::vector<float> scale = pool_error_scale(desc, direction, operands);
      Context base = gpu_context();
      bool any = false;
      for (const AlgoInfo& algo : pool_list(base, desc, direction)) {
        const std::string context = pool_context(desc, direction, algo.id);
        if (!algo.supported) {
          EXPECT_FALSE(algo.reason.empty()) << context;
          EXPECT_TRUE(algo.id.starts_with("cudnn:legacy:pool:"))
              << "only legacy candidates may be unsupported here: " << algo.reason << "\n  "
              << context;
          continue;
        }
        any = true;
        Context fixed = base;
        fixed.tune().policy(OpKind::pool, direction) = AlgoPolicy::fixed(algo.id);
        PoolRun run;
        try {
          run = run_pool(fixed, desc, direction, operands);
        } catch (const Error& error) {
          ADD_FAILURE() << "supported candidate threw: " << error.what() << "\n  " << context;
          continue;
        }
        ++ran[algo.id];
        EXPECT_EQ(run.choice->algo.id, algo.id) << context;
        if (!all_finite(run.output, "output", context)) {
          ADD_FAILURE() << all_finite(run.output, "output", context).message();
          continue;
        }
        EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected.output.to_f32(), scale,
                                       run.output.dims(), pool_tolerance(desc, direction), "output",
                                       context));
        expect_indices_agree(fixed, desc, direction, operands, run, expected, context);
        if (algo.deterministic) {
          const PoolRun again = run_pool(fixed, desc, direction, operands);
          EXPECT_TRUE(bitwise_equal(run.output, again.output, "output", context));
        }
      }
      EXPECT_TRUE(any) << "no supported cudnn candidate\n  " << pool_context(desc, direction, "");
    }
  }
  for (const auto& [id, count] : ran)
    std::cout << "[ gpu pool ] " << GetParam().name << ": " << id << " ran " << count << "x\n";
  EXPECT_GT(ran["cudnn:kernel:pool"], 0);
}

INSTANTIATE_TEST_SUITE_P(Edge, CudnnPoolParity, ::testing::ValuesIn(pool_edge_shapes()),
                         [](const ::testing::TestParamInfo<PoolShape>& info) {
                           return info.param.name;
                         });

// The benchmark layer at batch 8 (overlapping 3x3/2 windows): every supported candidate against
// the reference, and the deterministic ones twice, bitwise.
class CudnnPoolBenchmarkShape : public ::testing::TestWithParam<PoolCase> {};

TEST_P(CudnnPoolBenchmarkShape, MatchesTheReferenceAndDeterministicOnesRepeat) {
  DNNX_REQUIRE_GPU();
  PoolDesc desc = GetParam().desc;
  for (const PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad}) {
    if (desc.indices && mode != PoolMode::max) continue;  // indices exist for max only
    desc.mode = mode;
    const PoolOperands operands = pool_operands(desc, seed_from(GetParam().name));
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      Context reference(BackendKind::reference);
      const PoolRun expected = run_pool(reference, desc, direction, operands);
      const std::vector<float> scale = pool_error_scale(desc, direction, operands);
      Context base = gpu_context();
      for (const AlgoInfo& algo : pool_list(base, desc, direction)) {
        if (!algo.supported) continue;
        const std::string context = pool_context(desc, direction, algo.id);
        Context fixed = base;
        fixed.tune().policy(OpKind::pool, direction) = AlgoPolicy::fixed(algo.id);
        const PoolRun run = run_pool(fixed, desc, direction, operands);
        EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected.output.to_f32(), scale,
                                       run.output.dims(), pool_tolerance(desc, direction), "output",
                                       context));
        expect_indices_agree(fixed, desc, direction, operands, run, expected, context);
        if (!algo.deterministic) continue;
        for (int repeat = 0; repeat < 2; ++repeat) {
          const PoolRun again = run_pool(fixed, desc, direction, operands);
          EXPECT_TRUE(bitwise_equal(run.output, again.output, "output", context));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ResNet50, CudnnPoolBenchmarkShape,
                         ::testing::ValuesIn(pool_benchmark_cases(8)),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return info.param.name;
                         });

// Views whose data pointer is not 16-byte aligned take the kernels' one-channel path (channel
// packs need aligned 16-byte accesses) and still compute the same.
TEST(CudnnPool, UnalignedViewsUseTheScalarPath) {
  DNNX_REQUIRE_GPU();
  const PoolDesc desc = PoolDesc::from_shapes({2, 16, 10, 10}, {3}, {2}, {1}, PoolMode::max, true,
                                              DType::f16, Layout::channels_last);
  const PoolOperands operands = pool_operands(desc, 31);
  Context context = gpu_context();
  context.tune().policy(OpKind::pool, Direction::fwd) = AlgoPolicy::fixed("cudnn:kernel:pool");
  context.tune().policy(OpKind::pool, Direction::bwd_data) =
      AlgoPolicy::fixed("cudnn:kernel:pool:argmax");
  // Device buffers one element larger, viewed from their second element.
  const auto shifted = [&](const Tensor& host) {
    Tensor buffer = Tensor::empty(Dims{host.numel() + 1}, host.dtype(), Layout::channels_first,
                                  context.allocator());
    Tensor view = Tensor::view(static_cast<std::byte*>(buffer.data()) + size_of(host.dtype()),
                               host.dims(), host.dtype(), desc.layout, buffer.device());
    copy(host, view);
    return std::pair{buffer, view};
  };
  auto [src_buffer, src] = shifted(operands.src);
  auto [dst_buffer, dst] = shifted(nan_tensor(desc.dst_dims(), desc.dtype, desc.layout));
  pool_fwd(context, desc, src, dst);
  Tensor host_dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
  copy(dst, host_dst);
  EXPECT_TRUE(bitwise_equal(host_dst, operands.dst, "dst", desc.key()));

  auto [diff_dst_buffer, diff_dst] = shifted(operands.diff_dst);
  auto [fwd_dst_buffer, fwd_dst] = shifted(operands.dst);
  auto [diff_src_buffer, diff_src] = shifted(nan_tensor(desc.src_dims(), desc.dtype, desc.layout));
  pool_bwd(context, desc, src, fwd_dst, diff_dst, diff_src);
  Tensor host_diff_src = Tensor::empty(desc.src_dims(), desc.dtype, desc.layout);
  copy(diff_src, host_diff_src);
  Context reference(BackendKind::reference);
  const PoolRun expected = run_pool(reference, desc, Direction::bwd_data, operands);
  EXPECT_TRUE(close_within_scale(host_diff_src.to_f32(), expected.output.to_f32(),
                                 pool_error_scale(desc, Direction::bwd_data, operands),
                                 desc.src_dims(), pool_tolerance(desc, Direction::bwd_data),
                                 "diff_src", desc.key()));
}

// The same with indices: unaligned index views take the one-channel path too, and agree.
TEST(CudnnPool, UnalignedIndexViewsUseTheScalarPath) {
  DNNX_REQUIRE_GPU();
  for (const DType dtype : {DType::f16, DType::f32}) {
    PoolDesc desc = PoolDesc::from_shapes({2, 16, 10, 10}, {3}, {2}, {1}, PoolMode::max, true,
                                          dtype, Layout::channels_last);
    desc.indices = true;
    const PoolOperands operands = pool_operands(desc, 33);
    Context context = gpu_context();
    const auto shifted = [&](const Tensor& host) {
      Tensor buffer = Tensor::empty(Dims{host.numel() + 1}, host.dtype(), Layout::channels_first,
                                    context.allocator());
      Tensor view = Tensor::view(static_cast<std::byte*>(buffer.data()) + size_of(host.dtype()),
                                 host.dims(), host.dtype(), desc.layout, buffer.device());
      copy(host, view);
      return std::pair{buffer, view};
    };
    auto [src_buffer, src] = shifted(operands.src);
    auto [dst_buffer, dst] = shifted(nan_tensor(desc.dst_dims(), desc.dtype, desc.layout));
    auto [indices_buffer, indices] = shifted(index_tensor(
        desc.dst_dims(), DType::i64, desc.layout,
        std::vector<std::int64_t>(static_cast<std::size_t>(desc.dst_dims().product()), -7)));
    pool_fwd(context, desc, src, dst, indices);
    Tensor host_indices = Tensor::empty(desc.dst_dims(), DType::i64, desc.layout);
    copy(indices, host_indices);
    EXPECT_EQ(index_values(host_indices), index_values(operands.indices)) << desc.key();
    Tensor host_dst = Tensor::empty(desc.dst_dims(), desc.dtype, desc.layout);
    copy(dst, host_dst);
    EXPECT_TRUE(bitwise_equal(host_dst, operands.dst, "dst", desc.key()));

    auto [diff_dst_buffer, diff_dst] = shifted(operands.diff_dst);
    auto [diff_src_buffer, diff_src] =
        shifted(nan_tensor(desc.src_dims(), desc.dtype, desc.layout));
    pool_bwd(context, desc, diff_dst, indices, diff_src);
    Tensor host_diff_src = Tensor::empty(desc.src_dims(), desc.dtype, desc.layout);
    copy(diff_src, host_diff_src);
    Context reference(BackendKind::reference);
    const PoolRun expected = run_pool(reference, desc, Direction::bwd_data, operands);
    EXPECT_TRUE(close_within_scale(host_diff_src.to_f32(), expected.output.to_f32(),
                                   pool_error_scale(desc, Direction::bwd_data, operands),
                                   desc.src_dims(), pool_tolerance(desc, Direction::bwd_data),
                                   "diff_src", desc.key()));
  }
}

// Note [pool index check] in kernels/pool.cu: a bad index turns its window's first input element
// into NaN, and the next call of the same plan raises InvalidArgument naming its position and
// value; the call after that runs clean. Every layout and index type, channel packs and not.
TEST(CudnnPool, BadIndexIsReportedByTheNextCall) {
  DNNX_REQUIRE_GPU();
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    for (const DType index_dtype : {DType::i64, DType::i32}) {
      PoolDesc desc = PoolDesc::from_shapes({2, 16, 9, 7}, {3, 2}, {2, 1}, {1, 0}, PoolMode::max,
                                            false, DType::f16, layout);
      desc.indices = true;
      const std::string context_text = desc.key() + " " + std::string(to_string(index_dtype));
      const PoolOperands operands = pool_operands(desc, 34);
      std::vector<std::int64_t> values = index_values(operands.indices);
      // dst element [1, 9, 2, 5] (window rows [3, 6), columns [5, 7)) names input element (0, 0).
      const std::int64_t position = ((1 * 16 + 9) * 5 + 2) * 6 + 5;
      values[static_cast<std::size_t>(position)] = 0;
      const Tensor bad = index_tensor(desc.dst_dims(), index_dtype, layout, values);
      Context context = gpu_context();
      const auto device = [&](const Tensor& host) {
        Tensor copy_on_device =
            Tensor::empty(host.dims(), host.dtype(), layout, context.allocator());
        copy(host, copy_on_device);
        return copy_on_device;
      };
      const Tensor diff_dst = device(operands.diff_dst);
      const Tensor bad_indices = device(bad);
      Tensor diff_src = device(nan_tensor(desc.src_dims(), desc.dtype, layout));
      pool_bwd(context, desc, diff_dst, bad_indices, diff_src);
      Tensor host = Tensor::empty(desc.src_dims(), desc.dtype, layout);
      copy(diff_src, host);  // waits for the kernels
      const std::vector<float> grad = host.to_f32();
      // The window's first input element: [1, 9, 3, 5].
      EXPECT_TRUE(std::isnan(grad[static_cast<std::size_t>(((1 * 16 + 9) * 9 + 3) * 7 + 5)]))
          << context_text;
      EXPECT_EQ(std::count_if(grad.begin(), grad.end(), [](float v) { return std::isnan(v); }), 1)
          << context_text;
      try {
        pool_bwd(context, desc, diff_dst, bad_indices, diff_src);
        ADD_FAILURE() << "the bad index was not reported: " << context_text;
      } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
        EXPECT_NE(error.message().find("indices[1, 9, 2, 5] is 0"), std::string::npos)
            << error.what();
        EXPECT_NE(error.message().find("found on the GPU by an earlier call"), std::string::npos)
            << error.what();
      }
      // Reported once: good indices then run clean, and stay clean.
      const Tensor good = device(
          index_tensor(desc.dst_dims(), index_dtype, layout, index_values(operands.indices)));
      for (int call = 0; call < 2; ++call) {
        pool_bwd(context, desc, diff_dst, good, diff_src);
        copy(diff_src, host);
        EXPECT_TRUE(all_finite(host, "diff_src", context_text));
      }
    }
  }
}

// Dilated windows: an index between two positions of its window is reported as well (Note [pool
// index check]), in both layouts; in channels_last with 16 channels the kernels use channel packs.
TEST(CudnnPool, IndexBetweenDilatedPositionsIsReported) {
  DNNX_REQUIRE_GPU();
  for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
    // 9x11 input, kernel 3, stride 2, pad 2, dilation 2: 5x6 outputs; dst [0, 3, 2, 1] has window
    // rows 2, 4, 6 and columns 0, 2, 4.
    PoolDesc desc = PoolDesc::from_shapes({1, 16, 9, 11}, {3}, {2}, {2}, {2}, PoolMode::max, false,
                                          DType::f32, layout);
    desc.indices = true;
    const PoolOperands operands = pool_operands(desc, 35);
    std::vector<std::int64_t> values = index_values(operands.indices);
    const std::int64_t position = ((0 * 16 + 3) * 5 + 2) * 6 + 1;
    values[static_cast<std::size_t>(position)] = 3 * 11 + 2;  // row 3: between rows 2 and 4
    Context context = gpu_context();
    const auto device = [&](const Tensor& host) {
      Tensor on_device = Tensor::empty(host.dims(), host.dtype(), layout, context.allocator());
      copy(host, on_device);
      return on_device;
    };
    const Tensor diff_dst = device(operands.diff_dst);
    const Tensor bad = device(index_tensor(desc.dst_dims(), DType::i64, layout, values));
    Tensor diff_src = device(nan_tensor(desc.src_dims(), desc.dtype, layout));
    pool_bwd(context, desc, diff_dst, bad, diff_src);
    Tensor host = Tensor::empty(desc.src_dims(), desc.dtype, layout);
    copy(diff_src, host);
    // The window's first input element, [0, 3, 2, 0], holds NaN.
    EXPECT_TRUE(std::isnan(host.to_f32()[static_cast<std::size_t>(((0 * 16 + 3) * 9 + 2) * 11)]))
        << to_string(layout);
    try {
      pool_bwd(context, desc, diff_dst, bad, diff_src);
      ADD_FAILURE() << "the bad index was not reported: " << to_string(layout);
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
      EXPECT_NE(error.message().find("indices[0, 3, 2, 1] is 35 (input element 3, 2)"),
                std::string::npos)
          << error.what();
      EXPECT_NE(error.message().find("[2, 7) step 2 x [0, 5) step 2"), std::string::npos)
          << error.what();
    }
  }
}

// A zero-workspace candidate always exists (cudnn:kernel:pool), whatever the desc.
TEST(CudnnPool, ZeroWorkspaceLimitStillRuns) {
  DNNX_REQUIRE_GPU();
  const PoolDesc desc = PoolDesc::from_shapes({2, 8, 9, 9}, {3}, {2}, {1}, PoolMode::max, true);
  Context context = gpu_context();
  context.tune().workspace_limit = 0;
  const PoolOperands operands = pool_operands(desc, 32);
  const PoolRun run = run_pool(context, desc, Direction::bwd_data, operands);
  EXPECT_EQ(run.choice->algo.workspace_bytes, 0u);
}

// Exhaustive selection times the candidates on the device and keeps the fastest.
TEST(CudnnPool, ExhaustivePicksATimedCandidate) {
  DNNX_REQUIRE_GPU();
  const PoolDesc desc = pool_benchmark_cases(8)[3].desc;  // f16 nhwc
  Context context = gpu_context();
  for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
    context.tune().policy(OpKind::pool, direction) = AlgoPolicy::exhaustive();
    const auto choice = pool_select(context, desc, direction);
    ASSERT_FALSE(choice->timings.empty());
    EXPECT_EQ(choice->timings.front().status, CandidateStatus::ok);
    EXPECT_EQ(choice->timings.front().algo.id, choice->algo.id);
    EXPECT_GE(choice->candidates_timed, 2);
  }
}

// For the log: every candidate of the pooling benchmark layer at batch 64 (f32 and f16, NHWC),
// the numbers docs/ops/pool.md's candidate order rests on.
TEST(CudnnPool, ProfileOfTheBenchmarkLayer) {
  DNNX_REQUIRE_GPU();
  Context context = gpu_context();
  for (const PoolCase& c : pool_benchmark_cases(64)) {
    if (c.desc.layout != Layout::channels_last || c.desc.dtype == DType::bf16) continue;
    for (const Direction direction : {Direction::fwd, Direction::bwd_data}) {
      const ProfileResult result = pool_profile(context, c.desc, direction);
      std::cout << result.table() << "\n";
      EXPECT_FALSE(result.chosen.empty());
    }
  }
}

}  // namespace
}  // namespace dnnx::test
