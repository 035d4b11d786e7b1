// Parity of every listed cpu candidate of activations with the reference backend, forward and
// backward (each desc.saved), out of place and in place, for every case of the activation table
// (STYLE.md "Tests"), through the parity runner (support/parity.hpp).
//
// Per case: src from activation_src() (kinks included), dst its reference forward pass (rounded
// to the dtype, so that candidates reading dst see what a forward pass would have left), diff_dst
// uniform in [-1, 1); outputs are compared with activation_close(). Beyond the runner's checks:
// the in-place run (dst over src, diff_src over diff_dst) must agree bitwise with the
// out-of-place one (within the tolerance for a candidate that does not claim determinism); a
// backward that no saved tensor allows must be refused; every forward case has a oneDNN
// candidate; and the listing follows Note [f32 compute]. Unsupported candidates are counted and
// each must carry one of the reasons of Note [expected unsupported activations].

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "ops/activation_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace dnnx::test {
namespace {

// Note [expected unsupported activations]: the only reasons a listed cpu candidate may be
// unsupported (src/backends/onednn/activation.cpp, Notes [eltwise candidates] and [cpu activation
// candidates]); f32-compute candidates (id suffix ":f32", Note [f32-compute activations]) share
// their algorithm's reasons. None depends on the CPU: where oneDNN has no f16/bf16 eltwise, the
// f32-compute candidates stand in, so "no implementation" is never expected.

const std::vector<ExpectedReason<ActivationDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ActivationDesc>> reasons = {
      {"backward reads src, desc.saved = dst", std::regex("^onednn:"),
       std::regex("reads src in backward, and desc.saved = dst"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.saved == ActivationSaved::dst;
       }},
      {"backward reads dst, desc.saved = src", std::regex("_use_dst_for_bwd(:f32)?$"),
       std::regex("reads dst in backward, and desc.saved = src"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.saved == ActivationSaved::src;
       }},
      {"clip's backward differs from hardtanh's at the ceiling", std::regex(":clip(:f32)?$"),
       std::regex("passes the gradient at x == ceiling"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.kind == ActivationKind::clipped_relu;
       }},
      {"elu from dst needs alpha >= 0", std::regex("elu_use_dst_for_bwd(:f32)?$"),
       std::regex("needs alpha >= 0"),
       [](const ActivationDesc& d, Direction dir) { return dir != Direction::fwd && d.alpha < 0; }},
      // dnnx's loops (Note [cpu activation candidates]).
      {"the kernel's backward reads src, desc.saved = dst", std::regex("^cpu:kernel:act:src$"),
       std::regex("^the kernel reads src in backward, and desc.saved = dst$"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.saved == ActivationSaved::dst;
       }},
      {"the kernel's backward reads dst, desc.saved = src", std::regex("^cpu:kernel:act:dst$"),
       std::regex("^the kernel reads dst in backward, and desc.saved = src$"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.saved == ActivationSaved::src;
       }},
      {"the kernel's elu from dst needs alpha >= 0", std::regex("^cpu:kernel:act:dst$"),
       std::regex("needs alpha >= 0"),
       [](const ActivationDesc& d, Direction dir) { return dir != Direction::fwd && d.alpha < 0; }},
      {"swish has no derivative from dst", std::regex("^cpu:kernel:act:dst$"),
       std::regex("^swish has no derivative as a function of dst"),
       [](const ActivationDesc& d, Direction dir) {
         return dir != Direction::fwd && d.kind == ActivationKind::swish;
       }},
  };
  return reasons;
}

std::string case_name(const ::testing::TestParamInfo<ActivationCase>& info) {
  return info.param.name;
}

// Runs one direction with `context`'s policy; in place when `in_place`.
struct Outcome {
  Tensor output;
  std::shared_ptr<const Choice> choice;
};

Outcome run_fwd(Context& context, const ActivationDesc& desc, const Tensor& src, bool in_place) {
  Outcome run;
  if (in_place) {
    run.output = clone(src);
    run.choice = activation_fwd(context, desc, run.output, run.output);
  } else {
    run.output = nan_tensor(desc.dims, desc.dtype, desc.layout);
    run.choice = activation_fwd(context, desc, src, run.output);
  }
  return run;
}

Outcome run_bwd(Context& context, const ActivationDesc& desc, const Tensor& src, const Tensor& dst,
                const Tensor& diff_dst, bool in_place) {
  const Tensor* saved_src = desc.saved != ActivationSaved::dst ? &src : nullptr;
  const Tensor* saved_dst = desc.saved != ActivationSaved::src ? &dst : nullptr;
  Outcome run;
  if (in_place) {
    run.output = clone(diff_dst);
    run.choice = activation_bwd(context, desc, saved_src, saved_dst, run.output, run.output);
  } else {
    run.output = nan_tensor(desc.dims, desc.dtype, desc.layout);
    run.choice = activation_bwd(context, desc, saved_src, saved_dst, diff_dst, run.output);
  }
  return run;
}

// A row of the activation table with one desc.saved, for the parity runner.
class ActivationParityCase final : public ParityCase {
 public:
  ActivationParityCase(const ActivationCase& c, ActivationSaved saved)
      : name_(c.name), desc_(c.desc) {
    desc_.saved = saved;
    src_ = activation_src(desc_, seed_from(name_));
    dst_ = reference_activation_fwd(desc_, src_);
    diff_dst_ = tensor_from(
        desc_.dims, desc_.dtype, desc_.layout,
        random_uniform(static_cast<std::size_t>(desc_.numel()), seed_from(name_ + "dy")));
  }

  OpKind op_kind() const override { return OpKind::activation; }
  std::string label() const override {
    return name_ + " saved=" + std::string(to_string(desc_.saved));
  }
  std::string where(Direction direction, std::string_view candidate) const override {
    return activation_context(desc_, direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return activation_list(context, desc_, direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    return to_parity(run_direction(context, direction, false));
  }
  bool computable(Direction direction) const override {
    return direction == Direction::fwd || desc_.bwd_computable();
  }
  ::testing::AssertionResult close(Direction direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    return close_to(direction, actual.outputs[0].tensor, expected, where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc_, direction, algo) != nullptr;
  }
  void check_listing(BackendKind, Direction direction,
                     const std::vector<AlgoInfo>& algos) const override {
    // dnnx's kernel runs every computable case, and oneDNN every forward one in every dtype:
    // natively or, where this CPU has no f16/bf16 eltwise, as f32 compute (Note [f32-compute
    // activations]).
    if (direction == Direction::fwd) {
      EXPECT_TRUE(has_supported_onednn(algos))
          << "no oneDNN candidate runs this forward case\n  " << where(direction, "(none)");
    }
    EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc_.dtype));
  }
  // In place (dst over src, diff_src over diff_dst): the same bits as out of place for a
  // deterministic candidate, within the tolerance otherwise.
  void check_candidate(Context& fixed, Direction direction, const AlgoInfo& algo,
                       const ParityRun& first, const ParityExpected& expected,
                       std::string_view where) const override {
    const Outcome in_place = run_direction(fixed, direction, true);
    EXPECT_EQ(in_place.choice->algo.id, algo.id) << where;
    if (algo.deterministic) {
      EXPECT_TRUE(
          bitwise_equal(first.outputs[0].tensor, in_place.output, "in-place output", where));
    } else {
      EXPECT_TRUE(close_to(direction, in_place.output, expected, where, nullptr));
    }
  }

 private:
  Outcome run_direction(Context& context, Direction direction, bool in_place) const {
    return direction == Direction::fwd ? run_fwd(context, desc_, src_, in_place)
                                       : run_bwd(context, desc_, src_, dst_, diff_dst_, in_place);
  }
  static ParityRun to_parity(Outcome outcome) {
    return {{{"output", std::move(outcome.output)}}, std::move(outcome.choice)};
  }
  ::testing::AssertionResult close_to(Direction direction, const Tensor& actual,
                                      const ParityExpected& expected, std::string_view where,
                                      double* worst) const {
    return activation_close(desc_, direction, actual, expected.run.outputs[0].tensor,
                            direction == Direction::fwd ? nullptr : &diff_dst_, where, worst);
  }

  std::string name_;
  ActivationDesc desc_;
  Tensor src_;
  Tensor dst_;
  Tensor diff_dst_;
};

class ActivationParity : public ::testing::TestWithParam<ActivationCase> {
 protected:
  void check(Direction direction, ActivationSaved saved) {
    const ActivationParityCase c(GetParam(), saved);
    SCOPED_TRACE(c.label() + " " + std::string(to_string(direction)));
    check_parity(c, BackendKind::cpu, direction);
  }
};

// One ctest test per case (a process each): forward, then backward with each desc.saved.
TEST_P(ActivationParity, fwd_and_bwd) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  check(Direction::fwd, ActivationSaved::src_and_dst);
  for (const ActivationSaved saved :
       {ActivationSaved::src_and_dst, ActivationSaved::dst, ActivationSaved::src})
    check(Direction::bwd_data, saved);
}

INSTANTIATE_TEST_SUITE_P(Table, ActivationParity, ::testing::ValuesIn(activation_cases()),
                         case_name);

}  // namespace
}  // namespace dnnx::test
