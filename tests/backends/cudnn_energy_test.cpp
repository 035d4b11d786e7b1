// The GPU's energy counter through NVML (src/backends/cudnn/nvml.cpp) and the energy policies on
// it (Note [energy policies] in src/tune/select.cpp): the counter is found and moves, a loop of
// real convolutions adds energy over idle at a plausible power, min_energy measures its
// contenders and keeps the least, and a profile with profile_energy measures every timed row. The
// meter's arithmetic is tested without a GPU (tests/tune/energy_test.cpp); this is the real
// counter. Label gpu: skipped without a usable GPU, but for the loader's answer without one.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>

#include "backends/cudnn/nvml.hpp"
#include "core/backend.hpp"
#include "ops/context_state.hpp"
#include "support/gpu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

namespace dnnx {
namespace {

// ResNet-50's 14x14 256->256 3x3 convolution at batch 32, f16 NHWC: tenths of a millisecond a
// call, tens of watts over idle.
ConvDesc busy_conv() {
  return ConvDesc::from_shapes({32, 256, 14, 14}, {256, 256, 3, 3}, {1}, {1}, {1}, 1, DType::f16,
                               Layout::channels_last);
}

// Without a GPU (the CI machines) the loader still runs: it finds no NVML, or NVML finds no
// GPU, and says which instead of handing out a counter.
TEST(CudnnEnergy, WithoutAGpuTheLoaderSaysWhyThereIsNoCounter) {
  std::string unavailable;
  if (backend_available(BackendKind::cudnn, &unavailable))
    GTEST_SKIP() << "a usable GPU is present: NvmlCounterIsFoundAndMoves checks its counter";
  std::string why;
  EXPECT_EQ(cudnn::nvml_energy_counter(0, why), nullptr);
  const bool no_nvml = why.find("NVML (libnvidia-ml.so.1") != std::string::npos;
  const bool no_bus_id =
      why.find("the PCI bus id of CUDA device 0 is unknown") != std::string::npos;
  EXPECT_TRUE(no_nvml || no_bus_id) << why;
  // Asked again: the same answer (NVML is loaded once per process).
  std::string again;
  EXPECT_EQ(cudnn::nvml_energy_counter(0, again), nullptr);
  EXPECT_EQ(again, why);
}

TEST(CudnnEnergy, NvmlCounterIsFoundAndMoves) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  std::string why;
  auto counter = detail::state_of(context).backend().energy_counter(why);
  if (counter == nullptr) GTEST_SKIP() << "no energy counter on this GPU: " << why;
  EXPECT_EQ(counter->name().rfind("nvml: ", 0), 0u) << counter->name();
  const double first = counter->joules();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double later = counter->joules();
  EXPECT_GT(later, first) << "the counter did not move in 300 ms";
  // An idle H100/H200 draws 50-150 W: 300 ms of it is 15-45 J; allow any board from 5 W to 1 kW.
  EXPECT_LT(later - first, 300.0);
  const double mhz = counter->clock_mhz();
  EXPECT_TRUE(std::isnan(mhz) || (mhz > 100 && mhz < 5000)) << mhz;
}

TEST(CudnnEnergy, MinEnergyMeasuresItsContendersAndProfilesEveryRow) {
  DNNX_REQUIRE_GPU();
  Context context = test::gpu_test_context();
  std::string why;
  if (detail::state_of(context).backend().energy_counter(why) == nullptr)
    GTEST_SKIP() << "no energy counter on this GPU: " << why;
  context.tune().energy_window_ms = 300;
  context.tune().energy_repeats = 2;
  context.tune().fwd = AlgoPolicy::min_energy();
  const auto choice = conv_select(context, busy_conv(), Direction::fwd);
  ASSERT_NE(choice, nullptr);
  EXPECT_EQ(choice->energy_meter.rfind("nvml: ", 0), 0u) << choice->energy_meter;
  ASSERT_FALSE(std::isnan(choice->energy_j)) << choice->energy_meter;
  // A call of 0.05-5 ms at 10-700 W over idle.
  EXPECT_GT(choice->energy_j, 0.05e-3 * 10);
  EXPECT_LT(choice->energy_j, 5e-3 * 700);
  int measured = 0;
  const double kept_spread = choice->timings.front().energy_spread_j;
  for (const ProfileRow& row : choice->timings) {
    if (std::isnan(row.energy_j)) continue;
    ++measured;
    EXPECT_GT(row.power_w, 20.0) << row.algo.id;
    EXPECT_LT(row.power_w, 1500.0) << row.algo.id;
    // Less energy than the kept choice's only within the noise (Note [energy policies]).
    EXPECT_LE(choice->energy_j, row.energy_j + std::max(kept_spread, row.energy_spread_j))
        << "min_energy kept a candidate using more than " << row.algo.id;
  }
  EXPECT_GE(measured, 1);
  EXPECT_DOUBLE_EQ(choice->timings.front().energy_j, choice->energy_j);

  // Every timed candidate is measured: the shortest window, once, keeps that to a fraction of a
  // second each (a window still spans at least one counter update).
  context.tune().profile_energy = true;
  context.tune().timing_runs = 3;
  context.tune().energy_window_ms = 50;
  context.tune().energy_repeats = 1;
  const ProfileResult profile = conv_profile(context, busy_conv(), Direction::fwd);
  EXPECT_EQ(profile.energy_meter.rfind("nvml: ", 0), 0u) << profile.energy_meter;
  for (const ProfileRow& row : profile.rows) {
    if (row.status != CandidateStatus::ok) continue;
    EXPECT_FALSE(std::isnan(row.energy_j)) << row.algo.id << ": " << row.detail;
  }
  EXPECT_NE(profile.table().find("mJ/call"), std::string::npos) << profile.table();
}

}  // namespace
}  // namespace dnnx
