// The DNNX_* environment variables: Context::from_env and apply_tune_env honour every one, and a
// malformed value is an InvalidArgument naming the variable and the value.

#include <dnnx/dnnx.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace {

using dnnx::AlgoPolicy;
using dnnx::BackendKind;
using dnnx::Context;
using dnnx::ErrorKind;
using dnnx::Reuse;
using dnnx::TuneOptions;
using dnnx::TypeConfig;

// Every variable the library reads: the general ones and both spellings of every (op, direction)
// policy of the op table.
std::vector<std::string> all_variables() {
  std::vector<std::string> names = {"DNNX_BACKEND",         "DNNX_TYPE",
                                    "DNNX_DEVICE",          "DNNX_WORKSPACE_LIMIT",
                                    "DNNX_DETERMINISTIC",   "DNNX_FASTEST",
                                    "DNNX_VERBOSE",         "DNNX_BENCHMARK_LIMIT",
                                    "DNNX_VARIANT_FACTOR",  "DNNX_FINAL_LOOP_MS",
                                    "DNNX_HOST_TIE",        "DNNX_SEARCH_BUDGET_MS",
                                    "DNNX_LATE_PLAN_SHARE", "DNNX_ENERGY_WINDOW_MS",
                                    "DNNX_ENERGY_REPEATS",  "DNNX_FINAL_CONTENDERS"};
  for (const dnnx::OpInfo& op : dnnx::op_table()) {
    for (const dnnx::OpDirection& direction : op.directions) {
      for (const std::string& name : op.policy_env_names(direction.direction))
        names.push_back(name);
    }
  }
  return names;
}

using Vars = std::vector<std::pair<std::string, std::string>>;

// Clears every DNNX_* variable, sets the given ones, and restores the caller's environment on
// destruction, so tests neither see the CI's settings nor leak their own.
class ScopedEnv {
 public:
  explicit ScopedEnv(Vars values) {
    for (const std::string& name : all_variables()) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(name.c_str());
    }
    for (const auto& [name, value] : values) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TuneOptions applied(std::vector<std::pair<std::string, std::string>> values,
                    TuneOptions start = {}) {
  ScopedEnv env(std::move(values));
  dnnx::apply_tune_env(start);
  return start;
}

TEST(TuneEnv, EveryVariableSetsItsField) {
  const TuneOptions options = applied({{"DNNX_CONV_FWD_ALGO", "time_once"},
                                       {"DNNX_CONV_BWD_DATA_ALGO", "fixed:reference:direct"},
                                       {"DNNX_CONV_BWD_WEIGHTS_ALGO", "winograd"},
                                       {"DNNX_WORKSPACE_LIMIT", "1048576"},
                                       {"DNNX_DETERMINISTIC", "1"},
                                       {"DNNX_FASTEST", "true"},
                                       {"DNNX_VERBOSE", "yes"},
                                       {"DNNX_BENCHMARK_LIMIT", "3"},
                                       {"DNNX_VARIANT_FACTOR", "1.5"},
                                       {"DNNX_FINAL_LOOP_MS", "4"},
                                       {"DNNX_FINAL_CONTENDERS", "1000"},
                                       {"DNNX_HOST_TIE", "0.05"},
                                       {"DNNX_SEARCH_BUDGET_MS", "1500.5"},
                                       {"DNNX_LATE_PLAN_SHARE", "0.1"},
                                       {"DNNX_ENERGY_WINDOW_MS", "250"},
                                       {"DNNX_ENERGY_REPEATS", "5"}});
  EXPECT_EQ(options.fwd, AlgoPolicy::exhaustive(Reuse::once));
  EXPECT_EQ(options.bwd_data, AlgoPolicy::fixed("reference:direct"));
  EXPECT_EQ(options.bwd_weights, AlgoPolicy::of_family("winograd"));
  ASSERT_TRUE(options.workspace_limit.has_value());
  EXPECT_EQ(*options.workspace_limit, 1048576u);
  EXPECT_TRUE(options.deterministic);
  EXPECT_TRUE(options.fastest);
  EXPECT_TRUE(options.verbose);
  EXPECT_EQ(options.benchmark_limit, 3);
  EXPECT_EQ(options.variant_factor, 1.5);
  EXPECT_EQ(options.final_loop_ms, 4.0);
  EXPECT_EQ(options.final_contenders, 1000);
  EXPECT_EQ(options.host_tie, 0.05);
  EXPECT_EQ(options.search_budget_ms, 1500.5);
  EXPECT_EQ(options.late_plan_share, 0.1);
  EXPECT_EQ(options.energy_window_ms, 250.0);
  EXPECT_EQ(options.energy_repeats, 5);
}

// DNNX_ENERGY_WINDOW_MS: 50 to 60000 ms; DNNX_ENERGY_REPEATS: 1 to 100 (Note [energy per call]).
TEST(TuneEnv, EnergyWindowAndRepeatsTakeTheirRanges) {
  EXPECT_EQ(applied({}).energy_window_ms, 1000.0);
  EXPECT_EQ(applied({}).energy_repeats, 3);
  EXPECT_EQ(applied({{"DNNX_ENERGY_WINDOW_MS", "50"}}).energy_window_ms, 50.0);
  EXPECT_EQ(applied({{"DNNX_ENERGY_WINDOW_MS", "60000"}}).energy_window_ms, 60000.0);
  EXPECT_EQ(applied({{"DNNX_ENERGY_REPEATS", "1"}}).energy_repeats, 1);
  EXPECT_EQ(applied({{"DNNX_ENERGY_REPEATS", "100"}}).energy_repeats, 100);
  EXPECT_EQ(applied({{"DNNX_ALGO_CONV_FWD", "min_energy"}}).fwd, AlgoPolicy::min_energy());
  EXPECT_EQ(applied({{"DNNX_ALGO_POOL_BWD", "energy_delay:once"}})
                .policy(dnnx::OpKind::pool, dnnx::Direction::bwd_data),
            AlgoPolicy::energy_delay(Reuse::once));
}

// DNNX_LATE_PLAN_SHARE: 0 settles every late plan at once; 1 (100%) is the largest.
TEST(TuneEnv, LatePlanShareTakesZeroToOne) {
  EXPECT_EQ(applied({}).late_plan_share, 0.04);
  EXPECT_EQ(applied({{"DNNX_LATE_PLAN_SHARE", "0"}}).late_plan_share, 0.0);
  EXPECT_EQ(applied({{"DNNX_LATE_PLAN_SHARE", "1"}}).late_plan_share, 1.0);
}

// DNNX_HOST_TIE: 0 turns the rule off; 1 (100%) is the largest.
TEST(TuneEnv, HostTieTakesZeroToOne) {
  EXPECT_EQ(applied({}).host_tie, 0.02);
  EXPECT_EQ(applied({{"DNNX_HOST_TIE", "0"}}).host_tie, 0.0);
  EXPECT_EQ(applied({{"DNNX_HOST_TIE", "1"}}).host_tie, 1.0);
}

// DNNX_VARIANT_FACTOR: 0 turns the rule off, inf keeps only the pruning of abandoned seeds.
TEST(TuneEnv, VariantFactorTakesZeroAndInfinity) {
  EXPECT_EQ(applied({}).variant_factor, 2.0);
  EXPECT_EQ(applied({{"DNNX_VARIANT_FACTOR", "0"}}).variant_factor, 0.0);
  EXPECT_EQ(applied({{"DNNX_VARIANT_FACTOR", "1"}}).variant_factor, 1.0);
  EXPECT_TRUE(std::isinf(applied({{"DNNX_VARIANT_FACTOR", "inf"}}).variant_factor));
}

TEST(TuneEnv, EachPolicyVariableOnlyTouchesItsDirection) {
  TuneOptions options = applied({{"DNNX_CONV_BWD_DATA_ALGO", "exhaustive"}});
  EXPECT_EQ(options.fwd, AlgoPolicy::heuristic());
  EXPECT_EQ(options.bwd_data, AlgoPolicy::exhaustive());
  EXPECT_EQ(options.bwd_weights, AlgoPolicy::heuristic());
  options = applied({{"DNNX_CONV_BWD_WEIGHTS_ALGO", "guess_once"}});
  EXPECT_EQ(options.fwd, AlgoPolicy::heuristic());
  EXPECT_EQ(options.bwd_weights, AlgoPolicy::heuristic(Reuse::once));
}

// Every op other than conv has its own fwd and bwd policy variables; each touches only its slot.
// Both spellings of every (op, direction) of the op table set that policy and no other; an op
// selected under another op's policies (the fused convolution) has none of its own.
TEST(TuneEnv, EachOpHasItsOwnPolicyVariables) {
  using dnnx::OpDirection;
  using dnnx::OpInfo;
  for (const OpInfo& op : dnnx::op_table()) {
    if (op.policies != op.kind) continue;
    for (const OpDirection& direction : op.directions) {
      for (const std::string& name : op.policy_env_names(direction.direction)) {
        const TuneOptions options = applied({{name, "time_once"}});
        for (const OpInfo& other : dnnx::op_table()) {
          for (const OpDirection& d : other.directions) {
            const bool set = other.policies == op.kind && d.direction == direction.direction;
            EXPECT_EQ(options.policy(other.kind, d.direction),
                      set ? AlgoPolicy::exhaustive(Reuse::once) : AlgoPolicy::heuristic())
                << name << " -> " << other.name << " " << d.name;
          }
        }
      }
    }
  }
}

TEST(TuneEnv, BothSpellingsOfOnePolicyMustAgree) {
  TuneOptions options =
      applied({{"DNNX_ALGO_POOL_BWD", "exhaustive"}, {"DNNX_POOL_BWD_ALGO", "exhaustive"}});
  EXPECT_EQ(options.policy(dnnx::OpKind::pool, dnnx::Direction::bwd_data),
            AlgoPolicy::exhaustive());
  try {
    applied({{"DNNX_ALGO_CONV_FWD", "exhaustive"}, {"DNNX_CONV_FWD_ALGO", "heuristic"}});
    ADD_FAILURE() << "two spellings with different policies were accepted";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    for (const char* part : {"DNNX_ALGO_CONV_FWD='exhaustive'", "DNNX_CONV_FWD_ALGO='heuristic'"})
      EXPECT_NE(error.message().find(part), std::string::npos) << error.message();
  }
  // A malformed value names the spelling it came from.
  try {
    applied({{"DNNX_ALGO_ACT_BWD", "sideways"}});
    ADD_FAILURE() << "a malformed policy was accepted";
  } catch (const dnnx::Error& error) {
    EXPECT_NE(error.message().find("DNNX_ALGO_ACT_BWD"), std::string::npos) << error.message();
  }
}

TEST(TuneOptionsPolicy, ConvPoliciesAreTheDirectionFields) {
  TuneOptions options;
  options.policy(dnnx::OpKind::conv, dnnx::Direction::bwd_weights) = AlgoPolicy::exhaustive();
  EXPECT_EQ(options.bwd_weights, AlgoPolicy::exhaustive());
  options.policy(dnnx::OpKind::pool, dnnx::Direction::fwd) = AlgoPolicy::fixed("x");
  EXPECT_EQ(options.fwd, AlgoPolicy::heuristic());  // conv's fwd is untouched
}

TEST(TuneOptionsPolicy, SingleBackwardOpsHaveNoBwdWeights) {
  TuneOptions options;
  try {
    (void)options.policy(dnnx::OpKind::batch_norm, dnnx::Direction::bwd_weights);
    ADD_FAILURE() << "bnorm bwd_weights accepted";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("bnorm"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("bwd_weights"), std::string::npos) << error.message();
  }
}

TEST(TuneOptionsPolicy, OpNamesRoundTrip) {
  for (int i = 0; i < dnnx::op_kind_count; ++i) {
    const auto op = static_cast<dnnx::OpKind>(i);
    EXPECT_EQ(dnnx::parse_op_kind(dnnx::to_string(op)), op);
  }
  EXPECT_EQ(dnnx::parse_op_kind("batch_norm"), dnnx::OpKind::batch_norm);
  try {
    (void)dnnx::parse_op_kind("lstm");
    ADD_FAILURE() << "lstm accepted";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(error.message().find("'lstm'"), std::string::npos) << error.message();
  }
}

TEST(TuneEnv, UnsetVariablesLeaveOptionsAlone) {
  TuneOptions start;
  start.fwd = AlgoPolicy::fixed("x");
  start.workspace_limit = 77;
  start.deterministic = true;
  start.fastest = true;
  start.verbose = true;
  start.benchmark_limit = 9;
  EXPECT_EQ(applied({}, start), start);
}

TEST(TuneEnv, FalseValuesTurnFlagsOff) {
  TuneOptions start;
  start.deterministic = start.fastest = start.verbose = true;
  const TuneOptions options = applied(
      {{"DNNX_DETERMINISTIC", "0"}, {"DNNX_FASTEST", "false"}, {"DNNX_VERBOSE", "off"}}, start);
  EXPECT_FALSE(options.deterministic);
  EXPECT_FALSE(options.fastest);
  EXPECT_FALSE(options.verbose);
}

TEST(TuneEnv, WorkspaceLimitZeroAndNoLimit) {
  TuneOptions options = applied({{"DNNX_WORKSPACE_LIMIT", "0"}});
  ASSERT_TRUE(options.workspace_limit.has_value());
  EXPECT_EQ(*options.workspace_limit, 0u);
  TuneOptions start;
  start.workspace_limit = 5;
  options = applied({{"DNNX_WORKSPACE_LIMIT", "-1"}}, start);
  EXPECT_FALSE(options.workspace_limit.has_value());
}

struct BadVariable {
  const char* name;
  const char* value;
};

void PrintTo(const BadVariable& bad, std::ostream* out) { *out << bad.name << '=' << bad.value; }

class TuneEnvMalformed : public testing::TestWithParam<BadVariable> {};

TEST_P(TuneEnvMalformed, IsInvalidArgumentNamingVariableAndValue) {
  const BadVariable& bad = GetParam();
  ScopedEnv env(Vars{{bad.name, bad.value}});
  // Tuning variables through both entry points (the tuning function and the context factory);
  // the context's own variables only through the factory.
  const std::string name = bad.name;
  const bool context_only = name == "DNNX_BACKEND" || name == "DNNX_TYPE" || name == "DNNX_DEVICE";
  for (int entry = context_only ? 1 : 0; entry < 2; ++entry) {
    try {
      if (entry == 0) {
        TuneOptions options;
        dnnx::apply_tune_env(options);
      } else {
        Context::from_env();
      }
      ADD_FAILURE() << bad.name << "=" << bad.value << " was accepted (entry " << entry << ")";
    } catch (const dnnx::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
      EXPECT_NE(error.message().find(bad.name), std::string::npos) << error.message();
      EXPECT_NE(error.message().find(bad.value), std::string::npos) << error.message();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Values, TuneEnvMalformed,
    testing::Values(
        BadVariable{"DNNX_CONV_FWD_ALGO", "fastest"},
        BadVariable{"DNNX_CONV_BWD_DATA_ALGO", "fixed:"},
        BadVariable{"DNNX_CONV_BWD_WEIGHTS_ALGO", "time_twice"},
        BadVariable{"DNNX_WORKSPACE_LIMIT", "lots"}, BadVariable{"DNNX_WORKSPACE_LIMIT", "12abc"},
        BadVariable{"DNNX_WORKSPACE_LIMIT", "-5"},
        BadVariable{"DNNX_WORKSPACE_LIMIT", "99999999999999999999999"},
        BadVariable{"DNNX_DETERMINISTIC", "maybe"}, BadVariable{"DNNX_DETERMINISTIC", "2"},
        BadVariable{"DNNX_FASTEST", "fast"}, BadVariable{"DNNX_VERBOSE", "loud"},
        BadVariable{"DNNX_BENCHMARK_LIMIT", "-1"}, BadVariable{"DNNX_BENCHMARK_LIMIT", "three"},
        BadVariable{"DNNX_VARIANT_FACTOR", "0.5"}, BadVariable{"DNNX_VARIANT_FACTOR", "-2"},
        BadVariable{"DNNX_VARIANT_FACTOR", "nan"}, BadVariable{"DNNX_VARIANT_FACTOR", "2x"},
        BadVariable{"DNNX_FINAL_LOOP_MS", "-1"}, BadVariable{"DNNX_FINAL_LOOP_MS", "nan"},
        BadVariable{"DNNX_FINAL_LOOP_MS", "1001"}, BadVariable{"DNNX_FINAL_LOOP_MS", "4ms"},
        BadVariable{"DNNX_FINAL_CONTENDERS", "-1"}, BadVariable{"DNNX_FINAL_CONTENDERS", "1001"},
        BadVariable{"DNNX_FINAL_CONTENDERS", "ten"}, BadVariable{"DNNX_FINAL_CONTENDERS", "2.5"},
        BadVariable{"DNNX_HOST_TIE", "-0.1"}, BadVariable{"DNNX_HOST_TIE", "1.5"},
        BadVariable{"DNNX_HOST_TIE", "nan"}, BadVariable{"DNNX_HOST_TIE", "2%"},
        BadVariable{"DNNX_SEARCH_BUDGET_MS", "-1"}, BadVariable{"DNNX_SEARCH_BUDGET_MS", "inf"},
        BadVariable{"DNNX_SEARCH_BUDGET_MS", "3600001"}, BadVariable{"DNNX_SEARCH_BUDGET_MS", "2s"},
        BadVariable{"DNNX_LATE_PLAN_SHARE", "-0.1"}, BadVariable{"DNNX_LATE_PLAN_SHARE", "1.5"},
        BadVariable{"DNNX_LATE_PLAN_SHARE", "nan"}, BadVariable{"DNNX_LATE_PLAN_SHARE", "4%"},
        BadVariable{"DNNX_ENERGY_WINDOW_MS", "49"}, BadVariable{"DNNX_ENERGY_WINDOW_MS", "60001"},
        BadVariable{"DNNX_ENERGY_WINDOW_MS", "nan"}, BadVariable{"DNNX_ENERGY_WINDOW_MS", "1s"},
        BadVariable{"DNNX_ENERGY_REPEATS", "0"}, BadVariable{"DNNX_ENERGY_REPEATS", "101"},
        BadVariable{"DNNX_ENERGY_REPEATS", "three"}, BadVariable{"DNNX_BACKEND", "tpu"},
        BadVariable{"DNNX_TYPE", "double"}, BadVariable{"DNNX_DEVICE", "abc"},
        BadVariable{"DNNX_DEVICE", "-1"}, BadVariable{"DNNX_POOL_BWD_ALGO", "quickest"},
        BadVariable{"DNNX_XENT_FWD_ALGO", "fixed:"}),
    [](const testing::TestParamInfo<BadVariable>& info) {
      return std::string(info.param.name).substr(5) + "_" + std::to_string(info.index);
    });

// The context-only variables are not tuning variables: apply_tune_env must ignore them.
TEST(TuneEnv, ContextVariablesAreNotTuningVariables) {
  TuneOptions start;
  EXPECT_EQ(
      applied({{"DNNX_BACKEND", "tpu"}, {"DNNX_TYPE", "double"}, {"DNNX_DEVICE", "x"}}, start),
      start);
}

TEST(ContextFromEnv, DefaultsToAutomatic) {
  ScopedEnv env({});
  const Context context = Context::from_env();
  EXPECT_EQ(context.requested_backend(), BackendKind::automatic);
  EXPECT_EQ(context.backend(), dnnx::resolve_backend(BackendKind::automatic));
  EXPECT_EQ(context.type_config(), TypeConfig::float32);
  EXPECT_EQ(context.device_id(), 0);
  EXPECT_EQ(context.tune(), TuneOptions{});
}

// DNNX_TYPE reaches the descs and tensors a context makes, and an op built from them runs in
// that dtype.
TEST(ContextFromEnv, TypeConfigSetsTheDtypeOfDescsAndTensors) {
  ScopedEnv env({{"DNNX_BACKEND", "reference"}, {"DNNX_TYPE", "bf16"}});
  Context context = Context::from_env();
  auto desc = context.desc<dnnx::SoftmaxDesc>();
  EXPECT_EQ(desc.dtype, dnnx::DType::bf16);
  dnnx::SoftmaxDesc expected;
  expected.dtype = dnnx::DType::bf16;
  EXPECT_EQ(desc, expected);
  EXPECT_EQ(context.desc<dnnx::ConvDesc>().dtype, dnnx::DType::bf16);
  EXPECT_EQ(context.desc<dnnx::ConvFusedDesc>().conv.dtype, dnnx::DType::bf16);
  EXPECT_EQ(context.desc<dnnx::PoolDesc>().dtype, dnnx::DType::bf16);
  EXPECT_EQ(context.desc<dnnx::BatchNormDesc>().dtype, dnnx::DType::bf16);

  desc.dims = dnnx::Dims{2, 3};
  dnnx::Tensor src = context.empty(desc.dims);
  EXPECT_EQ(src.dtype(), dnnx::DType::bf16);
  EXPECT_EQ(src.device(), context.device());
  EXPECT_TRUE(src.is_dense(dnnx::Layout::channels_first));
  EXPECT_TRUE(context.empty(dnnx::Dims{2, 3, 4, 5}, dnnx::Layout::channels_last)
                  .is_dense(dnnx::Layout::channels_last));
  src.copy_from_f32(std::vector<float>{0, 1, 2, 3, 3, 3});
  dnnx::Tensor dst = context.empty(desc.dims);
  dnnx::softmax_fwd(context, desc, src, dst);
  const std::vector<float> values = dst.to_f32();
  EXPECT_NEAR(values[0] + values[1] + values[2], 1.0f, 1e-2f);
  EXPECT_NEAR(values[3], 1.0f / 3.0f, 1e-2f);

  ScopedEnv half({{"DNNX_BACKEND", "reference"}, {"DNNX_TYPE", "half"}});
  EXPECT_EQ(Context::from_env().desc<dnnx::ActivationDesc>().dtype, dnnx::DType::f16);
}

TEST(ContextFromEnv, BackendTypeAndDevice) {
  {
    ScopedEnv env({{"DNNX_BACKEND", "reference"}, {"DNNX_TYPE", "half"}, {"DNNX_DEVICE", "0"}});
    const Context context = Context::from_env();
    EXPECT_EQ(context.requested_backend(), BackendKind::reference);
    EXPECT_EQ(context.backend(), BackendKind::reference);
    EXPECT_EQ(context.type_config(), TypeConfig::half);
    EXPECT_EQ(context.dtype(), dnnx::DType::f16);
  }
  {
    ScopedEnv env({{"DNNX_BACKEND", "auto"}, {"DNNX_TYPE", "bfloat16"}});
    const Context context = Context::from_env();
    EXPECT_EQ(context.requested_backend(), BackendKind::automatic);
    EXPECT_EQ(context.dtype(), dnnx::DType::bf16);
  }
  if (dnnx::backend_available(BackendKind::cpu)) {
    ScopedEnv env({{"DNNX_BACKEND", "cpu"}, {"DNNX_TYPE", "float"}});
    const Context context = Context::from_env();
    EXPECT_EQ(context.backend(), BackendKind::cpu);
    EXPECT_EQ(context.dtype(), dnnx::DType::f32);
  }
}

TEST(ContextFromEnv, AppliesTheTuningVariables) {
  ScopedEnv env({{"DNNX_BACKEND", "reference"},
                 {"DNNX_CONV_FWD_ALGO", "exhaustive"},
                 {"DNNX_CONV_BWD_WEIGHTS_ALGO", "fixed:reference:direct"},
                 {"DNNX_WORKSPACE_LIMIT", "4096"},
                 {"DNNX_DETERMINISTIC", "1"},
                 {"DNNX_BENCHMARK_LIMIT", "2"}});
  const Context context = Context::from_env();
  EXPECT_EQ(context.tune().fwd, AlgoPolicy::exhaustive());
  EXPECT_EQ(context.tune().bwd_data, AlgoPolicy::heuristic());
  EXPECT_EQ(context.tune().bwd_weights, AlgoPolicy::fixed("reference:direct"));
  EXPECT_EQ(context.tune().workspace_limit, std::optional<std::size_t>(4096));
  EXPECT_TRUE(context.tune().deterministic);
  EXPECT_EQ(context.tune().benchmark_limit, 2);
}

TEST(ContextFromEnv, UnavailableBackendRequestedExplicitlyIsUnsupported) {
  std::string why;
  if (dnnx::backend_available(BackendKind::cudnn, &why))
    GTEST_SKIP() << "cudnn is available in this build";
  ScopedEnv env(Vars{{"DNNX_BACKEND", "cudnn"}});
  try {
    Context::from_env();
    FAIL() << "DNNX_BACKEND=cudnn accepted although cudnn is unavailable";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    EXPECT_NE(error.message().find("cudnn"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find(why), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("reference"), std::string::npos) << error.message();
  }
}

TEST(ContextFromEnv, DeviceOtherThanZeroOnAHostBackendIsRejected) {
  ScopedEnv env(Vars{{"DNNX_BACKEND", "reference"}, {"DNNX_DEVICE", "2"}});
  try {
    Context::from_env();
    FAIL() << "device 2 accepted on the reference backend";
  } catch (const dnnx::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::InvalidArgument) << error.what();
    EXPECT_NE(error.message().find("device"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("2"), std::string::npos) << error.message();
  }
}

TEST(ContextFromEnv, VerboseVariablePrintsEachDecision) {
  ScopedEnv env(
      {{"DNNX_BACKEND", "reference"}, {"DNNX_VERBOSE", "1"}, {"DNNX_CONV_FWD_ALGO", "exhaustive"}});
  Context context = Context::from_env();
  context.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
  const auto desc = dnnx::ConvDesc::from_shapes({1, 2, 6, 6}, {3, 2, 3, 3});
  testing::internal::CaptureStderr();
  const auto choice = dnnx::conv_select(context, desc, dnnx::Direction::fwd);
  dnnx::conv_select(context, desc, dnnx::Direction::bwd_data);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_NE(err.find("conv fwd"), std::string::npos) << err;
  EXPECT_NE(err.find("conv bwd_data"), std::string::npos) << err;
  EXPECT_NE(err.find(choice->algo.id), std::string::npos) << err;
}

}  // namespace
