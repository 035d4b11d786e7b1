// Note [probing slow candidates] (src/tune/select.cpp): the batch sizes of the slices a search
// probes convolution on, smallest first, each a quarter of the next, the largest half the batch.

#include "ops/dispatch.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using dnnx::detail::probe_batches;
using Batches = std::vector<std::int64_t>;

TEST(ProbeBatches, SmallestFirstUpToHalfTheBatch) {
  EXPECT_EQ(probe_batches(128), (Batches{1, 4, 16, 64}));
  EXPECT_EQ(probe_batches(64), (Batches{2, 8, 32}));
  EXPECT_EQ(probe_batches(32), (Batches{1, 4, 16}));
  EXPECT_EQ(probe_batches(30), (Batches{3, 15}));  // C3D's batch: rounded down
  EXPECT_EQ(probe_batches(16), (Batches{2, 8}));
  EXPECT_EQ(probe_batches(256), (Batches{2, 8, 32, 128}));
}

TEST(ProbeBatches, NoSlicesUnderSixteen) {
  for (std::int64_t batch : {0, 1, 2, 8, 15}) EXPECT_TRUE(probe_batches(batch).empty()) << batch;
}

// Every slice is a proper prefix of the batch and larger than the one before, and an eighth of
// the batch (what the search study runs) is one of them.
TEST(ProbeBatches, IncreasingProperPrefixesIncludingAnEighth) {
  for (std::int64_t batch = 16; batch <= 4096; ++batch) {
    const Batches batches = probe_batches(batch);
    ASSERT_FALSE(batches.empty()) << batch;
    EXPECT_GE(batches.front(), 1) << batch;
    EXPECT_EQ(batches.back(), batch / 2) << batch;
    for (std::size_t i = 1; i < batches.size(); ++i) EXPECT_GT(batches[i], batches[i - 1]) << batch;
    bool eighth = false;
    for (std::int64_t n : batches) eighth = eighth || n == batch / 8;
    EXPECT_TRUE(eighth) << batch;
  }
}

}  // namespace
