// Per-layer, per-direction algorithm control: a fixed id set on one layer runs there and shows in
// choice() and in the report, without touching another layer; Reuse::once keeps a layer's
// choice across shapes.

#include "nn/nn_test_util.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace dnnx::test::nn {
namespace {

namespace nn = dnnx::nn;

// The supported candidates of conv (desc, direction) on `context`.
std::vector<std::string> supported(Context& context, const ConvDesc& desc, Direction direction) {
  std::vector<std::string> out;
  for (const AlgoInfo& algo : conv_list(context, desc, direction)) {
    if (algo.supported) out.push_back(algo.id);
  }
  return out;
}

ConvDesc desc_of(const Tensor& x, nn::Conv& conv) {
  return ConvDesc::from_shapes(x.dims(), conv.weight().value.dims(), {1}, {1});
}

TEST(NnPolicy, FixedIdRunsOnItsLayerAndDirectionOnly) {
  for (BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context(backend);
    nn::Sequential model(context);
    auto first = std::make_shared<nn::Conv2d>(context, 3, 4, std::vector<std::int64_t>{3},
                                              nn::ConvOptions{{1}, {1}, {1}, 1, true});
    auto second = std::make_shared<nn::Conv2d>(context, 4, 4, std::vector<std::int64_t>{3},
                                               nn::ConvOptions{{1}, {1}, {1}, 1, true});
    model.push_back(first);
    model.push_back(second);
    const Tensor x = input(Dims{2, 3, 6, 6}, 1);
    const ConvDesc desc = desc_of(x, *first);
    const auto ids = supported(context, desc, Direction::bwd_weights);
    ASSERT_FALSE(ids.empty());
    // The last supported candidate: never the heuristic pick when there are several.
    const std::string fixed = ids.back();
    first->policy(Direction::bwd_weights) = AlgoPolicy::fixed(fixed);
    model.backward(Tensor::zeros(model.forward(x).dims(), DType::f32));
    ASSERT_TRUE(first->choice(Direction::bwd_weights));
    EXPECT_EQ(first->choice(Direction::bwd_weights)->algo.id, fixed) << to_string(backend);
    EXPECT_EQ(second->choice(Direction::bwd_weights)->algo.id,
              second->heuristic_choice(Direction::bwd_weights)->algo.id);
    EXPECT_EQ(first->choice(Direction::fwd)->algo.id,
              first->heuristic_choice(Direction::fwd)->algo.id);
    // The context the model was built from keeps its own policies.
    EXPECT_EQ(context.tune().policy(Direction::bwd_weights), AlgoPolicy());

    const nn::Report report = nn::report(model);
    ASSERT_EQ(report.rows.size(), 6u);  // two convolutions x three directions
    const nn::ReportRow& row = report.rows[2];
    EXPECT_EQ(row.module, "0");
    EXPECT_EQ(row.direction, Direction::bwd_weights);
    EXPECT_EQ(row.id, fixed);
    EXPECT_EQ(row.policy, "fixed:" + fixed);
    EXPECT_EQ(row.heuristic_id, ids.front());
    EXPECT_NE(report.table().find(fixed), std::string::npos);
  }
}

TEST(NnPolicy, ReuseOnceKeepsTheChoiceAcrossShapes) {
  Context context = fast_context();
  nn::Conv2d conv(context, 3, 4, {3}, nn::ConvOptions{{1}, {1}, {1}, 1, true});
  const Tensor small = input(Dims{1, 3, 6, 6}, 1);
  const auto ids = supported(context, desc_of(small, conv), Direction::fwd);
  if (ids.size() < 2) GTEST_SKIP() << "one candidate only on " << to_string(context.backend());
  // A fixed choice first, then a heuristic policy with Reuse::once: the held choice stays for a
  // new shape although the heuristic would pick another.
  conv.policy(Direction::fwd) = AlgoPolicy::fixed(ids.back());
  conv.forward(small);
  conv.policy(Direction::fwd) = AlgoPolicy::heuristic(Reuse::once);
  const Tensor large = input(Dims{2, 3, 9, 9}, 2);
  const auto large_ids = supported(context, desc_of(large, conv), Direction::fwd);
  if (std::find(large_ids.begin(), large_ids.end(), ids.back()) == large_ids.end()) {
    GTEST_SKIP() << ids.back() << " does not run the larger shape";
  }
  conv.forward(large);
  EXPECT_EQ(conv.choice(Direction::fwd)->algo.id, ids.back());
  // on_shape_change selects again: the heuristic pick.
  conv.policy(Direction::fwd) = AlgoPolicy::heuristic();
  conv.forward(large);
  EXPECT_EQ(conv.choice(Direction::fwd)->algo.id, large_ids.front());
}

TEST(NnPolicy, ExhaustiveTimesAndReportsSpeedup) {
  Context context = fast_context();
  nn::Linear linear(context, 16, 8);
  linear.policy(Direction::fwd) = AlgoPolicy::exhaustive();
  linear.forward(input(Dims{4, 16}, 1));
  const nn::Report report = nn::report(linear);
  ASSERT_EQ(report.rows.size(), 1u);
  const nn::ReportRow& row = report.rows[0];
  EXPECT_EQ(row.op, "matmul");
  EXPECT_TRUE(std::isfinite(row.time_ms)) << report.table();
  EXPECT_TRUE(std::isfinite(row.heuristic_ms)) << report.table();
  EXPECT_GE(row.speedup, 1.0 / 1.5) << report.table();
  // With profiling every time is measured, whatever the policy.
  nn::Linear plain(context, 16, 8);
  plain.forward(input(Dims{4, 16}, 1));
  const nn::Report profiled = nn::report(plain, nn::ReportOptions{true});
  EXPECT_TRUE(std::isfinite(profiled.rows[0].time_ms)) << profiled.table();
  EXPECT_DOUBLE_EQ(profiled.rows[0].speedup, 1.0);
}

// Note [energy policies]: under min_energy a row carries what the choice measured; the host
// backends read no counter, so the row says why and its energy stays unmeasured. A profiled
// report asked for energy says the same from the profile.
TEST(NnPolicy, AnEnergyPolicyReportsItsMeterOrWhyNothingWasMeasured) {
  Context context = fast_context();
  nn::Linear linear(context, 16, 8);
  linear.policy(Direction::fwd) = AlgoPolicy::min_energy();
  linear.forward(input(Dims{4, 16}, 1));
  const std::string why =
      "the " + std::string(to_string(context.backend())) + " backend reads no energy counter";
  const nn::Report report = nn::report(linear);
  ASSERT_EQ(report.rows.size(), 1u);
  EXPECT_EQ(report.rows[0].policy, "min_energy");
  EXPECT_TRUE(std::isnan(report.rows[0].energy_j));
  EXPECT_EQ(report.rows[0].energy_meter, why);
  const std::string table = report.table();
  EXPECT_NE(table.find("\nenergy: " + why + "\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("mJ/call"), std::string::npos) << "nothing measured: no column\n" << table;

  nn::Linear plain(context, 16, 8);
  plain.forward(input(Dims{4, 16}, 1));
  EXPECT_EQ(nn::report(plain).table().find("energy"), std::string::npos);
  plain.tune().profile_energy = true;
  const nn::Report profiled = nn::report(plain, nn::ReportOptions{true});
  EXPECT_EQ(profiled.rows[0].energy_meter, why);
  EXPECT_TRUE(std::isnan(profiled.rows[0].energy_j));
}

// The table's energy column, where some row's energy was measured: mJ per call, "-" for the
// rows without, and one line per meter.
TEST(NnPolicy, TheReportTableShowsMeasuredEnergy) {
  nn::Report report;
  nn::ReportRow measured;
  measured.module = "conv1";
  measured.type = "Conv2d";
  measured.op = "conv";
  measured.policy = "min_energy";
  measured.id = "cudnn:engine:1";
  measured.time_ms = 0.25;
  measured.heuristic_id = "cudnn:engine:0";
  measured.heuristic_ms = 0.5;
  measured.speedup = 2;
  measured.energy_j = 0.01234;
  measured.energy_meter = "nvml: a GPU";
  nn::ReportRow unmeasured = measured;
  unmeasured.module = "fc";
  unmeasured.policy = "exhaustive";
  unmeasured.energy_j = std::numeric_limits<double>::quiet_NaN();
  unmeasured.energy_meter.clear();
  report.rows = {measured, unmeasured};
  const std::string table = report.table();
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << table;
  EXPECT_TRUE(lines[0].ends_with("    mJ/call")) << lines[0];
  EXPECT_TRUE(lines[1].ends_with("    12.3400")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with("          -")) << lines[2];
  EXPECT_EQ(lines[3], "energy: nvml: a GPU");
  EXPECT_EQ(lines[0].size(), lines[1].size()) << "the column lines up";
}

}  // namespace
}  // namespace dnnx::test::nn
