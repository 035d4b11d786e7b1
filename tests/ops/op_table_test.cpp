// The op table (include/dnnx/op_table.hpp) and what derives from it: op and direction names,
// per-op directions and their checks, TuneOptions' per-(op, direction) policies, and the
// backends' op slots (every backend built here holds exactly the ops the table gives it; asking
// for one it lacks names the backends that have it).

#include <dnnx/dnnx.hpp>

#include "core/backend.hpp"
#include "ops/context_state.hpp"
#include "support/errors.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <string>

namespace {

using namespace dnnx;
using dnnx::test::expect_error;

TEST(OpTable, EveryOpHasItsLineInEnumOrder) {
  ASSERT_EQ(op_table().size(), static_cast<std::size_t>(op_kind_count));
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < op_table().size(); ++i) {
    const OpInfo& op = op_table()[i];
    EXPECT_EQ(static_cast<std::size_t>(op.kind), i);
    EXPECT_EQ(&op_info(op.kind), &op);
    EXPECT_TRUE(names.insert(op.name).second) << "duplicate name " << op.name;
    EXPECT_EQ(to_string(op.kind), op.name);
    EXPECT_EQ(parse_op_kind(op.name), op.kind);
    EXPECT_FALSE(op.directions.empty()) << op.name;
    EXPECT_EQ(op.directions.front().direction, Direction::fwd) << op.name;
    // An op is selected under its own policies or under those of an op with its directions.
    const OpInfo& owner = op_info(op.policies);
    for (const OpDirection& direction : op.directions)
      EXPECT_TRUE(owner.has(direction.direction)) << op.name << " " << direction.name;
  }
}

TEST(OpTable, NamesAndAliasesParse) {
  EXPECT_EQ(parse_op_kind("convolution"), OpKind::conv);
  EXPECT_EQ(parse_op_kind("ACT"), OpKind::activation);
  EXPECT_EQ(parse_op_kind("cross_entropy"), OpKind::cross_entropy);
  EXPECT_EQ(parse_op_kind("batch_norm"), OpKind::batch_norm);
  EXPECT_EQ(parse_op_kind("conv_fused"), OpKind::conv_fused);
  EXPECT_EQ(parse_op_kind("linear"), OpKind::matmul);
  expect_error(ErrorKind::InvalidArgument, {"unknown op 'lstm'", "conv, pool, act", "conv_fused"},
               [] { parse_op_kind("lstm"); });
  expect_error(ErrorKind::InvalidArgument, {"unknown op ''"}, [] { parse_op_kind(""); });
}

TEST(OpTable, DirectionsBelongToTheOp) {
  const OpInfo& conv = op_info(OpKind::conv);
  EXPECT_EQ(conv.directions.size(), 3u);
  EXPECT_EQ(conv.parse_direction("bwd_filter"), Direction::bwd_weights);
  EXPECT_EQ(conv.direction_name(Direction::bwd_data), "bwd_data");

  const OpInfo& pool = op_info(OpKind::pool);
  EXPECT_TRUE(pool.has(Direction::bwd_data));
  EXPECT_FALSE(pool.has(Direction::bwd_weights));
  EXPECT_EQ(pool.direction_name(Direction::bwd_data), "bwd");
  EXPECT_EQ(pool.parse_direction("bwd"), Direction::bwd_data);
  EXPECT_EQ(pool.parse_direction("bwd_data"), Direction::bwd_data);
  expect_error(ErrorKind::InvalidArgument,
               {"pool has no direction bwd_weights", "accepted: fwd, bwd_data (bwd)"},
               [&] { pool.parse_direction("bwd_weights"); });
  expect_error(ErrorKind::InvalidArgument, {"unknown direction 'sideways' for pool", "fwd"},
               [&] { pool.parse_direction("sideways"); });
  // A training forward is a direction only ops that keep state for their backward declare
  // (dropout).
  expect_error(ErrorKind::InvalidArgument, {"softmax has no direction fwd_training"},
               [] { op_info(OpKind::softmax).check(Direction::fwd_training); });

  const OpInfo& fused = op_info(OpKind::conv_fused);
  expect_error(ErrorKind::InvalidArgument,
               {"conv_fused has only the forward direction (fwd); got bwd_data"},
               [&] { fused.check(Direction::bwd_data); });

  const OpInfo& dropout = op_info(OpKind::dropout);
  EXPECT_TRUE(dropout.has(Direction::fwd_training));
  EXPECT_EQ(dropout.direction_name(Direction::bwd_data), "bwd");
  EXPECT_FALSE(dropout.has(Direction::bwd_weights));

  EXPECT_EQ(to_string(Direction::fwd_training), "fwd_training");
  EXPECT_EQ(parse_direction("forward_training"), Direction::fwd_training);
}

TEST(OpTable, PoliciesPerOpAndDirection) {
  TuneOptions options;
  options.policy(OpKind::pool, Direction::bwd_data) = AlgoPolicy::exhaustive();
  options.policy(OpKind::softmax, Direction::fwd) = AlgoPolicy::fixed("some:id");
  EXPECT_EQ(options.policy(OpKind::pool, Direction::bwd_data).kind, PolicyKind::exhaustive);
  EXPECT_EQ(options.policy(OpKind::pool, Direction::fwd).kind, PolicyKind::heuristic);
  EXPECT_EQ(options.policy(OpKind::softmax, Direction::fwd).id, "some:id");
  EXPECT_EQ(options.policy(OpKind::activation, Direction::fwd).kind, PolicyKind::heuristic);
  // Convolution's policies are the named fields, and the fused convolution shares them.
  options.bwd_weights = AlgoPolicy::of_family("winograd");
  options.fwd = AlgoPolicy::exhaustive();
  EXPECT_EQ(&options.policy(OpKind::conv, Direction::bwd_weights), &options.bwd_weights);
  EXPECT_EQ(&options.policy(OpKind::conv_fused, Direction::fwd), &options.fwd);
  expect_error(ErrorKind::InvalidArgument, {"add has no direction bwd_weights"},
               [&] { options.policy(OpKind::add, Direction::bwd_weights); });
  expect_error(ErrorKind::InvalidArgument, {"conv has no direction fwd_training"},
               [&] { options.policy(Direction::fwd_training); });
  expect_error(ErrorKind::InvalidArgument, {"conv_fused has only the forward direction"},
               [&] { options.policy(OpKind::conv_fused, Direction::bwd_data); });
}

TEST(OpTable, PolicyVariableNames) {
  EXPECT_EQ(op_info(OpKind::conv).policy_env_names(Direction::bwd_weights)[0],
            "DNNX_ALGO_CONV_BWD_WEIGHTS");
  EXPECT_EQ(op_info(OpKind::conv).policy_env_names(Direction::fwd)[1], "DNNX_CONV_FWD_ALGO");
  EXPECT_EQ(op_info(OpKind::pool).policy_env_names(Direction::bwd_data)[0], "DNNX_ALGO_POOL_BWD");
  EXPECT_EQ(op_info(OpKind::cross_entropy).policy_env_names(Direction::bwd_data)[1],
            "DNNX_XENT_BWD_ALGO");
}

// Every backend usable here holds the ops the table gives it, and nothing else.
template <OpKind kind>
void expect_slot(detail::Backend& backend) {
  const bool implemented = op_info(kind).implemented_on(backend.kind());
  if (implemented) {
    EXPECT_NO_THROW(backend.op<kind>()) << to_string(kind) << " on " << backend.name();
  } else {
    expect_error(ErrorKind::Unsupported, {"is not implemented by the"},
                 [&] { backend.op<kind>(); });
  }
}

TEST(OpTable, BackendsHoldTheirOps) {
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu, BackendKind::cudnn}) {
    if (!backend_available(kind)) continue;
    Context context(kind);
    detail::Backend& backend = detail::state_of(context).backend();
#define DNNX_EXPECT_SLOT(op, ...) expect_slot<OpKind::op>(backend);
    DNNX_OP_TABLE(DNNX_EXPECT_SLOT)
#undef DNNX_EXPECT_SLOT
  }
}

TEST(OpTable, AMissingOpNamesTheBackendsThatHaveIt) {
  const detail::OpBackends empty;
  EXPECT_EQ(empty.find<OpKind::softmax>(), nullptr);
  expect_error(ErrorKind::Unsupported,
               {"softmax is not implemented by the cpu backend",
                "backends that implement it: reference, cpu, cudnn"},
               [&] { empty.get<OpKind::softmax>(BackendKind::cpu); });
}

}  // namespace

// Note [search workspace]: what a search's timing runs grew the workspace to is given back when
// the search ends; what a call's plan asked for stays.
TEST(ContextWorkspace, TheSearchesShareIsGivenBackTheCallsStays) {
  Context context(BackendKind::reference);
  detail::ContextState& state = detail::state_of(context);
  std::lock_guard lock(state.mutex());
  EXPECT_GE(state.workspace(4096).bytes, 4096u);
  const detail::Workspace searched = state.search_workspace(std::size_t{1} << 20);
  EXPECT_GE(searched.bytes, std::size_t{1} << 20);
  EXPECT_NE(searched.data, nullptr);
  state.end_search();
  EXPECT_EQ(state.search_workspace(0).bytes, 0u);  // freed: the next call allocates its own
  const detail::Workspace call = state.workspace(4096);
  EXPECT_GE(call.bytes, 4096u);
  state.end_search();  // a search that needed no more than the calls leaves the buffer alone
  const detail::Workspace kept = state.search_workspace(0);
  EXPECT_EQ(kept.data, call.data);
  EXPECT_EQ(kept.bytes, call.bytes);
}
