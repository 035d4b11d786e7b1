// Note [saved state] (src/ops/dispatch.hpp): a forward fills the SavedState its caller passes,
// sized and tagged by the candidate that ran; the backward checks what filled it and selects only
// among candidates that read its format. Driven through detail::Dispatch with an op of this test's
// own (it borrows add's line of the op table: its name, fwd / bwd directions and policies), whose
// candidates write and read their state in formats "a" and "b", so every expectation is exact.

#include <dnnx/dnnx.hpp>

#include "core/check.hpp"
#include "ops/dispatch.hpp"
#include "support/errors.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using dnnx::test::expect_error;

struct TestDesc {
  std::int64_t size = 8;
  void validate() const { DNNX_CHECK_ARG(size > 0, "size must be positive, got ", size); }
  std::string key() const { return "test size=" + std::to_string(size); }
  std::size_t hash() const { return std::hash<std::int64_t>{}(size); }
  std::string repro(Direction direction) const {
    return "test --size " + std::to_string(size) + " --direction " +
           std::string(to_string(direction));
  }
  bool operator==(const TestDesc&) const = default;
};

// fwd: dst = src, and the state filled with the candidate's format letter; bwd_data: dst = the
// state's first byte, read by a candidate that expects its own format's letter there.
struct TestArgs {
  const Tensor* src = nullptr;
  Tensor* dst = nullptr;
  SavedState* saved = nullptr;
};

AlgoInfo candidate(std::string format, Direction direction, std::size_t bytes) {
  AlgoInfo info;
  info.id = (direction == Direction::fwd ? "test:write_" : "test:read_") + format;
  info.name = info.id;
  info.supported = true;
  info.saved_state_format = format;
  info.saved_state_bytes = direction == Direction::fwd ? bytes : 0;
  return info;
}

class TestPlan final : public detail::OpPlan<TestArgs> {
 public:
  TestPlan(AlgoInfo info, Direction direction) : info_(std::move(info)), direction_(direction) {}
  const AlgoInfo& algo() const override { return info_; }
  void execute(const TestArgs& args, detail::Workspace) override {
    const char letter = info_.saved_state_format[0];
    if (direction_ == Direction::fwd) {
      ++runs;
      if (args.saved != nullptr) {
        // The dispatcher sized the state for this candidate before running it.
        EXPECT_EQ(args.saved->producer(), info_.id);
        EXPECT_EQ(args.saved->bytes(), info_.saved_state_bytes);
        std::memset(args.saved->data(), letter, args.saved->bytes());
      }
      args.dst->copy_from_f32(args.src->to_f32());
      return;
    }
    ASSERT_NE(args.saved, nullptr);
    const char first = *static_cast<const char*>(args.saved->data());
    EXPECT_EQ(first, letter) << info_.id << " ran on a state it cannot read";
    args.dst->fill(static_cast<float>(first));
  }
  int runs = 0;

 private:
  AlgoInfo info_;
  Direction direction_;
};

// Lists "a" before "b" in both directions; "b" keeps more state.
class TestBackend final : public detail::OpBackend<TestDesc, TestArgs> {
 public:
  std::vector<AlgoInfo> list(const TestDesc& desc, Direction direction) override {
    const auto bytes = static_cast<std::size_t>(desc.size);
    return {candidate("a", direction, bytes), candidate("b", direction, 4 * bytes)};
  }
  std::shared_ptr<detail::OpPlan<TestArgs>> plan(const TestDesc& desc, Direction direction,
                                                 const std::string& id) override {
    for (const AlgoInfo& info : list(desc, direction)) {
      if (info.id == id) return std::make_shared<TestPlan>(info, direction);
    }
    throw Error(ErrorKind::InvalidArgument, "not a test candidate: " + id);
  }
};

detail::OpBackend<TestDesc, TestArgs>& test_backend() {
  static TestBackend backend;
  return backend;
}

struct TestOp {
  using Desc = TestDesc;
  using Args = TestArgs;
  static constexpr OpKind kind = OpKind::add;
  static detail::OpBackend<TestDesc, TestArgs>& backend(detail::ContextState&) {
    return test_backend();
  }
  static void check(const Context&, const TestDesc&, Direction, const TestArgs&) {}
  static SavedState* saved_state(const TestArgs& args) { return args.saved; }
  struct Scratch {
    Tensor src, dst;
    SavedState saved;
    TestArgs args(Direction) { return {&src, &dst, &saved}; }
  };
  static Scratch scratch(const Context&, const TestDesc& desc, Direction) {
    return {Tensor::zeros(Dims{desc.size}, DType::f32), Tensor::zeros(Dims{desc.size}, DType::f32),
            {}};
  }
};
using TestDispatch = detail::Dispatch<TestOp>;

class SavedStateTest : public ::testing::Test {
 protected:
  SavedStateTest() : context_(BackendKind::reference) {
    context_.set_choice_cache(std::make_shared<ChoiceCache>());
  }

  std::shared_ptr<const Choice> forward(SavedState& state, const TestDesc& desc = {}) {
    TestArgs args{&src_, &dst_, &state};
    return TestDispatch::run(context_, desc, Direction::fwd, args);
  }
  std::shared_ptr<const Choice> backward(SavedState& state, const TestDesc& desc = {}) {
    TestArgs args{&src_, &dst_, &state};
    return TestDispatch::run(context_, desc, Direction::bwd_data, args);
  }
  AlgoPolicy& policy(Direction direction) { return context_.tune().policy(OpKind::add, direction); }

  Context context_;
  Tensor src_ = Tensor::zeros(Dims{8}, DType::f32);
  Tensor dst_ = Tensor::zeros(Dims{8}, DType::f32);
};

TEST_F(SavedStateTest, TheForwardFillsItAndTheBackwardReadsItsFormat) {
  SavedState state;
  EXPECT_TRUE(state.empty());
  policy(Direction::fwd) = AlgoPolicy::fixed("test:write_b");
  EXPECT_EQ(forward(state)->algo.id, "test:write_b");
  EXPECT_FALSE(state.empty());
  EXPECT_EQ(state.op(), OpKind::add);
  EXPECT_EQ(state.direction(), Direction::fwd);
  EXPECT_EQ(state.desc(), TestDesc{}.key());
  EXPECT_EQ(state.producer(), "test:write_b");
  EXPECT_EQ(state.format(), "b");
  EXPECT_EQ(state.bytes(), 32u);
  EXPECT_EQ(state.device(), Device::cpu());
  ASSERT_NE(state.data(), nullptr);

  // The heuristic's first choice would be test:read_a, which cannot read this state.
  const auto choice = backward(state);
  EXPECT_EQ(choice->algo.id, "test:read_b");
  EXPECT_EQ(dst_.to_f32()[0], static_cast<float>('b'));

  // Another forward through the same object: the smaller state reuses the buffer, and the
  // backward now reads format "a" (a choice of its own in the cache, not the one for "b").
  void* const buffer = state.data();
  policy(Direction::fwd) = AlgoPolicy::heuristic();
  EXPECT_EQ(forward(state)->algo.id, "test:write_a");
  EXPECT_EQ(state.data(), buffer);
  EXPECT_EQ(state.bytes(), 8u);
  EXPECT_EQ(backward(state)->algo.id, "test:read_a");
  EXPECT_EQ(dst_.to_f32()[0], static_cast<float>('a'));
}

TEST_F(SavedStateTest, ExhaustiveSelectionSizesTheStateForEachCandidateItTimes) {
  SavedState state;
  policy(Direction::fwd) = AlgoPolicy::exhaustive();
  policy(Direction::bwd_data) = AlgoPolicy::exhaustive();
  const auto choice = forward(state);
  // Whichever won, the state is the winner's, written by the run that answered the call.
  EXPECT_EQ(state.producer(), choice->algo.id);
  EXPECT_EQ(state.bytes(), choice->algo.saved_state_bytes);
  const auto read = backward(state);
  EXPECT_EQ(read->algo.saved_state_format, state.format());
  for (const ProfileRow& row : read->timings) {
    if (row.algo.saved_state_format != state.format()) {
      EXPECT_EQ(row.status, CandidateStatus::unsupported) << row.algo.id;
    }
  }
}

TEST_F(SavedStateTest, TheBackwardRefusesAStateItCannotUse) {
  SavedState empty;
  expect_error(ErrorKind::InvalidArgument, {"saved_state is empty", "no forward has filled it"},
               [&] { backward(empty); });

  SavedState state;
  forward(state, TestDesc{8});
  expect_error(ErrorKind::InvalidArgument,
               {"filled by a forward of another add", "size=8", "size=4"},
               [&] { backward(state, TestDesc{4}); });

  // A fixed choice of the other format is refused with the reason, before anything runs.
  policy(Direction::bwd_data) = AlgoPolicy::fixed("test:read_b");
  expect_error(ErrorKind::Unsupported,
               {"test:read_b", "reads saved state of format 'b'", "test:write_a wrote 'a'"},
               [&] { backward(state); });
}

TEST_F(SavedStateTest, ALayerHeldChoiceOfAnotherFormatIsRefused) {
  SavedState state;
  forward(state);  // format "a"
  auto held = std::make_shared<Choice>();
  held->algo = candidate("b", Direction::bwd_data, 0);
  TestArgs args{&src_, &dst_, &state};
  expect_error(ErrorKind::InvalidArgument,
               {"candidate test:read_b reads saved state of format 'b'", "wrote 'a'"},
               [&] { TestDispatch::run_choice(context_, TestDesc{}, Direction::bwd_data, args, held); });
}

TEST_F(SavedStateTest, TheListingShowsEveryCandidateWithItsFormat) {
  const std::vector<AlgoInfo> listed = TestDispatch::list(context_, TestDesc{}, Direction::bwd_data);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_TRUE(listed[0].supported);
  EXPECT_TRUE(listed[1].supported);
  EXPECT_EQ(listed[1].saved_state_format, "b");
  const std::vector<AlgoInfo> forward_list =
      TestDispatch::list(context_, TestDesc{}, Direction::fwd);
  EXPECT_EQ(forward_list[1].saved_state_bytes, 32u);
}

}  // namespace
