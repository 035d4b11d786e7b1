// Selection through the public API on the real backends (reference always; cpu when oneDNN is
// usable here): the choice cache as ops use it, layer reuse semantics, constraints end to end.

#include <dnnx/dnnx.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace {

using dnnx::AlgoInfo;
using dnnx::AlgoPolicy;
using dnnx::BackendKind;
using dnnx::Choice;
using dnnx::ChoiceCache;
using dnnx::Context;
using dnnx::ConvDesc;
using dnnx::Direction;
using dnnx::DType;
using dnnx::ErrorKind;
using dnnx::PolicyKind;
using dnnx::Reuse;
using dnnx::Tensor;

constexpr Direction directions[] = {Direction::fwd, Direction::bwd_data, Direction::bwd_weights};

// Small enough that exhaustive selection on the reference backend takes milliseconds.
ConvDesc small_desc(std::int64_t size = 8) {
  return ConvDesc::from_shapes({2, 4, size, size}, {8, 4, 3, 3}, {1}, {1});
}

struct Tensors {
  explicit Tensors(const ConvDesc& desc)
      : src(Tensor::zeros(desc.src_dims(), desc.dtype, desc.layout)),
        weights(Tensor::zeros(desc.weights_dims(), desc.dtype, desc.layout)),
        dst(Tensor::zeros(desc.dst_dims(), desc.dtype, desc.layout)) {
    src.fill(0.5f);
    weights.fill(0.25f);
  }
  Tensor src, weights, dst;
};

std::shared_ptr<const Choice> run(dnnx::Convolution& layer, Direction direction,
                                  const ConvDesc& desc, Tensors& t) {
  switch (direction) {
    case Direction::fwd: return layer.fwd(desc, t.src, t.weights, t.dst);
    case Direction::bwd_data: return layer.bwd_data(desc, t.dst, t.weights, t.src);
    case Direction::bwd_weights: return layer.bwd_weights(desc, t.src, t.dst, t.weights);
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return nullptr;
}

}  // namespace

namespace dnnx {
// Readable parameter names in gtest output.
void PrintTo(BackendKind kind, std::ostream* out) { *out << to_string(kind); }
}  // namespace dnnx

namespace {

class SelectionApi : public testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    std::string why;
    if (!dnnx::backend_available(GetParam(), &why)) {
      GTEST_SKIP() << "backend " << dnnx::to_string(GetParam()) << " is not available: " << why;
    }
    context_ = std::make_unique<Context>(GetParam());
    cache_ = std::make_shared<ChoiceCache>();
    context_->set_choice_cache(cache_);
    // Fewer timed runs: these tests check what is selected and cached, not how fast it runs.
    context_->tune().timing_runs = 2;
  }
  Context& context() { return *context_; }
  ChoiceCache& cache() { return *cache_; }

  std::unique_ptr<Context> context_;
  std::shared_ptr<ChoiceCache> cache_;
};

TEST_P(SelectionApi, ContextsUseTheGlobalCacheUnlessGivenOne) {
  Context fresh(GetParam());
  EXPECT_EQ(fresh.choice_cache(), ChoiceCache::global());
  EXPECT_EQ(context().choice_cache(), cache_);
  EXPECT_EQ(context().backend(), GetParam());
}

TEST_P(SelectionApi, ExhaustiveTwiceTheSecondComesFromTheCache) {
  for (Direction direction : directions) {
    context().tune().policy(direction) = AlgoPolicy::exhaustive();
    const std::uint64_t hits = cache().hits();
    const auto first = dnnx::conv_select(context(), small_desc(), direction);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->policy.kind, PolicyKind::exhaustive);
    EXPECT_GE(first->candidates_timed, 1) << to_string(direction);
    EXPECT_FALSE(first->timings.empty());
    EXPECT_EQ(first->direction, direction);
    EXPECT_EQ(cache().hits(), hits);
    const auto second = dnnx::conv_select(context(), small_desc(), direction);
    // The very same record: nothing was timed again.
    EXPECT_EQ(second, first) << to_string(direction);
    EXPECT_EQ(cache().hits(), hits + 1);
  }
  EXPECT_EQ(cache().size(), 3u);
}

TEST_P(SelectionApi, OpsReuseTheChoiceConvSelectCached) {
  context().tune().fwd = AlgoPolicy::exhaustive();
  const ConvDesc desc = small_desc();
  const auto selected = dnnx::conv_select(context(), desc, Direction::fwd);
  Tensors t(desc);
  const auto used = dnnx::conv_fwd(context(), desc, t.src, t.weights, t.dst);
  EXPECT_EQ(used, selected);
  EXPECT_EQ(cache().size(), 1u);
}

// Note [energy policies]: the host backends read no energy counter, so min_energy and
// energy_delay choose as exhaustive does, and say why; a profile asked for energy says the same
// and leaves the energy columns empty. Their choices are cached under their own keys.
TEST_P(SelectionApi, EnergyPoliciesWithoutACounterKeepTheFastestAndSayWhy) {
  const ConvDesc desc = small_desc();
  context().tune().fwd = AlgoPolicy::exhaustive();
  const auto fastest = dnnx::conv_select(context(), desc, Direction::fwd);
  for (const AlgoPolicy& policy : {AlgoPolicy::min_energy(), AlgoPolicy::energy_delay()}) {
    context().tune().fwd = policy;
    const auto choice = dnnx::conv_select(context(), desc, Direction::fwd);
    ASSERT_NE(choice, nullptr);
    EXPECT_EQ(choice->policy, policy);
    EXPECT_NE(choice, fastest) << "an exhaustive entry answered " << policy.to_string();
    EXPECT_GE(choice->candidates_timed, 1);
    EXPECT_TRUE(std::isnan(choice->energy_j));
    EXPECT_EQ(choice->energy_meter, "the " + std::string(dnnx::to_string(GetParam())) +
                                        " backend reads no energy counter");
    EXPECT_NE(choice->key.find("energy_window_ms=1000"), std::string::npos) << choice->key;
    for (const dnnx::ProfileRow& row : choice->timings) EXPECT_TRUE(std::isnan(row.energy_j));
  }
  context().tune().profile_energy = true;
  const dnnx::ProfileResult profile = dnnx::conv_profile(context(), desc, Direction::fwd);
  EXPECT_EQ(profile.energy_meter,
            "the " + std::string(dnnx::to_string(GetParam())) + " backend reads no energy counter");
  EXPECT_NE(profile.table().find("energy: the "), std::string::npos) << profile.table();
  EXPECT_EQ(profile.table().find("mJ/call"), std::string::npos) << profile.table();
  for (const dnnx::ProfileRow& row : profile.rows) EXPECT_TRUE(std::isnan(row.energy_j));
}

TEST_P(SelectionApi, AHeuristicEntryNeverAnswersAnExhaustiveRequest) {
  const ConvDesc desc = small_desc();
  context().tune().fwd = AlgoPolicy::heuristic();
  const auto guess = dnnx::conv_select(context(), desc, Direction::fwd);
  EXPECT_TRUE(guess->timings.empty());
  EXPECT_EQ(guess->candidates_timed, 0);
  context().tune().fwd = AlgoPolicy::exhaustive();
  const std::uint64_t misses = cache().misses();
  const auto timed = dnnx::conv_select(context(), desc, Direction::fwd);
  EXPECT_EQ(cache().misses(), misses + 1);
  EXPECT_NE(timed, guess);
  EXPECT_EQ(timed->policy.kind, PolicyKind::exhaustive);
  EXPECT_FALSE(timed->timings.empty());
  EXPECT_EQ(cache().size(), 2u);
}

TEST_P(SelectionApi, ChangingAConstraintIsACacheMiss) {
  const ConvDesc desc = small_desc();
  context().tune().fwd = AlgoPolicy::heuristic();
  dnnx::conv_select(context(), desc, Direction::fwd);
  // The bf16 desc before the workspace limit: where a CPU has no bf16 convolution, the cpu
  // backend's bf16 candidates are f32-compute ones, which all need workspace for their copies.
  ConvDesc half = desc;
  half.dtype = DType::bf16;
  dnnx::conv_select(context(), half, Direction::fwd);
  context().tune().workspace_limit = 0;
  dnnx::conv_select(context(), desc, Direction::fwd);
  context().tune().deterministic = true;
  dnnx::conv_select(context(), desc, Direction::fwd);
  ConvDesc last = desc;
  last.layout = dnnx::Layout::channels_last;
  dnnx::conv_select(context(), last, Direction::fwd);
  EXPECT_EQ(cache().hits(), 0u);
  EXPECT_EQ(cache().size(), 5u);
}

TEST_P(SelectionApi, ContextsSharingACacheShareChoices) {
  Context other(GetParam());
  other.set_choice_cache(cache_);
  context().tune().fwd = AlgoPolicy::exhaustive();
  other.tune() = context().tune();
  const auto first = dnnx::conv_select(context(), small_desc(), Direction::fwd);
  const auto second = dnnx::conv_select(other, small_desc(), Direction::fwd);
  EXPECT_EQ(second, first);
}

TEST_P(SelectionApi, HeuristicIsTheFirstSupportedListedCandidate) {
  for (Direction direction : directions) {
    const std::vector<AlgoInfo> algos = dnnx::conv_list(context(), small_desc(), direction);
    ASSERT_FALSE(algos.empty());
    const auto first =
        std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
    ASSERT_NE(first, algos.end());
    for (const AlgoInfo& algo : algos) {
      EXPECT_FALSE(algo.id.empty());
      EXPECT_EQ(algo.supported, algo.reason.empty()) << algo.id << ": " << algo.reason;
    }
    EXPECT_EQ(dnnx::conv_select(context(), small_desc(), direction)->algo.id, first->id);
  }
}

TEST_P(SelectionApi, FixedIdIsHonouredForEverySupportedCandidate) {
  const ConvDesc desc = small_desc();
  Tensors t(desc);
  for (const AlgoInfo& algo : dnnx::conv_list(context(), desc, Direction::fwd)) {
    if (!algo.supported) continue;
    context().tune().fwd = AlgoPolicy::fixed(algo.id);
    EXPECT_EQ(dnnx::conv_select(context(), desc, Direction::fwd)->algo.id, algo.id);
    EXPECT_EQ(dnnx::conv_fwd(context(), desc, t.src, t.weights, t.dst)->algo.id, algo.id);
  }
}

TEST_P(SelectionApi, FixedUnsupportedIdIsAnErrorListingValidIds) {
  // A strided 1x1 desc: many specialised implementations decline some configuration; take the
  // first listed candidate that is unsupported for it, if the backend has one.
  const ConvDesc desc = ConvDesc::from_shapes({1, 3, 9, 9}, {5, 3, 1, 1}, {2}, {0});
  const std::vector<AlgoInfo> algos = dnnx::conv_list(context(), desc, Direction::fwd);
  const auto unsupported =
      std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return !a.supported; });
  if (unsupported == algos.end()) {
    GTEST_SKIP() << dnnx::to_string(GetParam()) << " lists no unsupported candidate here";
  }
  context().tune().fwd = AlgoPolicy::fixed(unsupported->id);
  try {
    dnnx::conv_select(context(), desc, Direction::fwd);
    FAIL() << "fixed unsupported id " << unsupported->id << " was accepted";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    EXPECT_NE(error.message().find(unsupported->id), std::string::npos) << error.message();
    EXPECT_NE(error.message().find(unsupported->reason), std::string::npos) << error.message();
    const auto supported =
        std::find_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
    ASSERT_NE(supported, algos.end());
    EXPECT_NE(error.message().find(supported->id), std::string::npos) << error.message();
  }
}

TEST_P(SelectionApi, AZeroWorkspaceCandidateAlwaysExists) {
  for (Direction direction : directions) {
    context().tune().workspace_limit = 0;
    for (const AlgoPolicy& policy : {AlgoPolicy::heuristic(), AlgoPolicy::exhaustive()}) {
      context().tune().policy(direction) = policy;
      const auto choice = dnnx::conv_select(context(), small_desc(), direction);
      EXPECT_EQ(choice->algo.workspace_bytes, 0u) << choice->algo.id;
      for (const auto& row : choice->timings) {
        if (row.algo.supported && row.algo.workspace_bytes > 0) {
          EXPECT_EQ(row.status, dnnx::CandidateStatus::over_workspace_limit) << row.algo.id;
        }
      }
    }
  }
}

TEST_P(SelectionApi, DeterministicChoicesAreDeterministic) {
  context().tune().deterministic = true;
  for (Direction direction : directions) {
    context().tune().policy(direction) = AlgoPolicy::exhaustive();
    const auto choice = dnnx::conv_select(context(), small_desc(), direction);
    EXPECT_TRUE(choice->algo.deterministic) << choice->algo.id;
  }
}

TEST_P(SelectionApi, BenchmarkLimitOne) {
  context().tune().fwd = AlgoPolicy::exhaustive();
  context().tune().benchmark_limit = 1;
  const auto choice = dnnx::conv_select(context(), small_desc(), Direction::fwd);
  EXPECT_EQ(choice->candidates_timed, 1);
  const auto ran = std::count_if(choice->timings.begin(), choice->timings.end(),
                                 [](const dnnx::ProfileRow& row) { return row.runs > 0; });
  EXPECT_EQ(ran, 1);
}

TEST_P(SelectionApi, VerbosePrintsOneLinePerDecision) {
  context().tune().fwd = AlgoPolicy::exhaustive();
  context().tune().verbose = true;
  testing::internal::CaptureStderr();
  const auto choice = dnnx::conv_select(context(), small_desc(), Direction::fwd);
  const std::string first = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 1) << first;
  EXPECT_NE(first.find("conv fwd"), std::string::npos) << first;
  EXPECT_NE(first.find(choice->algo.id), std::string::npos) << first;
  EXPECT_NE(first.find("timed"), std::string::npos) << first;

  testing::internal::CaptureStderr();
  dnnx::conv_select(context(), small_desc(), Direction::fwd);
  const std::string second = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(second.begin(), second.end(), '\n'), 1) << second;
  EXPECT_NE(second.find("cache"), std::string::npos) << second;

  context().tune().verbose = false;
  testing::internal::CaptureStderr();
  dnnx::conv_select(context(), small_desc(10), Direction::fwd);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// ---- layers: Reuse::once vs Reuse::on_shape_change

TEST_P(SelectionApi, OnceKeepsTheFirstChoiceAcrossAShapeChange) {
  for (Direction direction : directions) {
    cache().clear();
    context().tune().policy(direction) = AlgoPolicy::exhaustive(Reuse::once);
    dnnx::Convolution layer(context());
    const ConvDesc a = small_desc(8);
    const ConvDesc b = small_desc(10);
    Tensors ta(a);
    Tensors tb(b);
    const auto first = run(layer, direction, a, ta);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(layer.choice(direction), first);
    EXPECT_EQ(cache().size(), 1u);
    const auto second = run(layer, direction, b, tb);
    EXPECT_EQ(second->algo.id, first->algo.id) << to_string(direction);
    // Nothing was selected for the new shape.
    EXPECT_EQ(cache().size(), 1u) << to_string(direction);
    EXPECT_EQ(cache().misses(), 1u) << to_string(direction);
    // And the same shape again still runs the held choice.
    EXPECT_EQ(run(layer, direction, b, tb)->algo.id, first->algo.id);
    EXPECT_EQ(cache().size(), 1u);
  }
}

TEST_P(SelectionApi, OnShapeChangeSelectsAgain) {
  for (Direction direction : directions) {
    cache().clear();
    context().tune().policy(direction) = AlgoPolicy::exhaustive(Reuse::on_shape_change);
    dnnx::Convolution layer(context());
    const ConvDesc a = small_desc(8);
    const ConvDesc b = small_desc(10);
    Tensors ta(a);
    Tensors tb(b);
    const auto first = run(layer, direction, a, ta);
    const auto second = run(layer, direction, b, tb);
    EXPECT_EQ(cache().size(), 2u) << to_string(direction);
    EXPECT_NE(second, first);
    EXPECT_NE(second->key.find(b.key()), std::string::npos) << second->key;
    EXPECT_EQ(layer.choice(direction), second);
    // Back to the first shape: its choice comes back (from the cache, not re-timed).
    EXPECT_EQ(run(layer, direction, a, ta), first);
  }
}

TEST_P(SelectionApi, OnceReselectsWhenTheHeldChoiceCanNoLongerRun) {
  // Re-validation: the held candidate is excluded for the new shape by a constraint changed in
  // between (the layer's context is the one that is checked), so a new one is selected.
  const ConvDesc a = small_desc(8);
  const ConvDesc b = small_desc(10);
  context().tune().fwd = AlgoPolicy::heuristic(Reuse::once);
  dnnx::Convolution layer(context());
  Tensors ta(a);
  Tensors tb(b);
  const auto first = run(layer, Direction::fwd, a, ta);
  // Exclude the held id for b: everything but it must stay admissible.
  const std::vector<AlgoInfo> algos = dnnx::conv_list(context(), b, Direction::fwd);
  const auto held = std::find_if(algos.begin(), algos.end(),
                                 [&](const AlgoInfo& x) { return x.id == first->algo.id; });
  ASSERT_NE(held, algos.end());
  if (held->deterministic) {
    // Determinism cannot exclude it; a workspace limit can only if it uses workspace.
    if (held->workspace_bytes == 0)
      GTEST_SKIP() << first->algo.id << " is deterministic and uses no workspace: no constraint "
                   << "can exclude it";
    layer.context().tune().workspace_limit = held->workspace_bytes - 1;
  } else {
    layer.context().tune().deterministic = true;
  }
  const auto second = run(layer, Direction::fwd, b, tb);
  EXPECT_NE(second->algo.id, first->algo.id);
  EXPECT_EQ(layer.choice(Direction::fwd), second);
}

INSTANTIATE_TEST_SUITE_P(Backends, SelectionApi,
                         testing::Values(BackendKind::reference, BackendKind::cpu),
                         [](const testing::TestParamInfo<BackendKind>& info) {
                           return std::string(dnnx::to_string(info.param));
                         });

}  // namespace

namespace {

// Only cudnn contexts take a caller's CUDA stream; a host backend rejects one, naming it.
TEST(ContextStream, HostBackendsRejectACudaStream) {
  for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    if (!dnnx::backend_available(kind)) continue;
    const Context context(kind);
    EXPECT_EQ(context.stream(), nullptr);
    EXPECT_EQ(&dnnx::detail::state_of(context.with_stream(nullptr)), &dnnx::detail::state_of(context));
    try {
      (void)context.with_stream(reinterpret_cast<void*>(0x1000));
      ADD_FAILURE() << "a stream was accepted by " << dnnx::to_string(kind);
    } catch (const dnnx::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(error.message().find("stream"), std::string::npos) << error.message();
      EXPECT_NE(error.message().find(std::string(dnnx::to_string(kind))), std::string::npos)
          << error.message();
    }
  }
}

}  // namespace
