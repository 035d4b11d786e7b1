// Parity of every listed cpu candidate of activations with the reference backend, forward and
// backward (each desc.saved), out of place and in place, for every case of the activation table
// (STYLE.md "Tests").
//
// Per case: src from activation_src() (kinks included), dst its reference forward pass (rounded
// to the dtype, so that candidates reading dst see what a forward pass would have left), diff_dst
// uniform in [-1, 1). Each candidate runs alone, through a Context whose policy for the direction
// is AlgoPolicy::fixed(id), into outputs that start as NaN; NaN/Inf are checked first, then
// activation_close() against the reference. Candidates that claim determinism run twice and must
// agree bitwise; the in-place run (dst over src, diff_src over diff_dst) must agree bitwise with
// the out-of-place one. Unsupported candidates are counted and each must carry one of the reasons
// of Note [expected unsupported activations]; anything else fails.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>

#include "ops/activation_cases.hpp"
#include "support/compare.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

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

class ActivationParity : public ::testing::TestWithParam<ActivationCase> {
 protected:
  void check(Direction direction, ActivationSaved saved);
};

void ActivationParity::check(Direction direction, ActivationSaved saved) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why))
    GTEST_SKIP() << "cpu backend unavailable: " << why;
  ActivationDesc desc = GetParam().desc;
  desc.saved = saved;
  const std::string label =
      GetParam().name + " " + std::string(to_string(direction)) +
      (direction == Direction::fwd ? "" : " saved=" + std::string(to_string(saved)));
  SCOPED_TRACE(label);

  const Tensor src = activation_src(desc, seed_from(GetParam().name));
  const Tensor dst = reference_activation_fwd(desc, src);
  const Tensor diff_dst = tensor_from(
      desc.dims, desc.dtype, desc.layout,
      random_uniform(static_cast<std::size_t>(desc.numel()), seed_from(GetParam().name + "dy")));
  const bool computable = direction == Direction::fwd || desc.bwd_computable();
  Tensor expected;
  if (computable) {
    expected =
        direction == Direction::fwd ? dst : reference_activation_bwd(desc, src, dst, diff_dst);
  }

  Context base(BackendKind::cpu);
  base.set_choice_cache(std::make_shared<ChoiceCache>());
  const std::vector<AlgoInfo> algos = activation_list(base, desc, direction);
  ASSERT_FALSE(algos.empty()) << activation_context(desc, direction, "(none)");
  int ran = 0, unsupported = 0;
  double worst = 0;
  std::ostringstream summary;
  for (const AlgoInfo& algo : algos) {
    const std::string context = activation_context(desc, direction, algo.id);
    if (!algo.supported) {
      ++unsupported;
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_NE(unsupported_category(expected_reasons(), desc, direction, algo), nullptr)
          << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
          << "(Note [expected unsupported activations]): \"" << algo.reason << "\"\n  " << context;
      continue;
    }
    EXPECT_TRUE(computable) << "a candidate claims support where no derivative exists\n  "
                            << context;
    if (!computable) continue;
    Context fixed = base;
    fixed.tune().policy(OpKind::activation, direction) = AlgoPolicy::fixed(algo.id);
    Outcome out, again, in_place;
    try {
      if (direction == Direction::fwd) {
        out = run_fwd(fixed, desc, src, false);
        again = run_fwd(fixed, desc, src, false);
        in_place = run_fwd(fixed, desc, src, true);
      } else {
        out = run_bwd(fixed, desc, src, dst, diff_dst, false);
        again = run_bwd(fixed, desc, src, dst, diff_dst, false);
        in_place = run_bwd(fixed, desc, src, dst, diff_dst, true);
      }
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    ++ran;
    ASSERT_NE(out.choice, nullptr);
    EXPECT_EQ(out.choice->algo.id, algo.id)
        << "a fixed policy ran another candidate\n  " << context;
    double ratio = 0;
    EXPECT_TRUE(activation_close(desc, direction, out.output, expected,
                                 direction == Direction::fwd ? nullptr : &diff_dst, context,
                                 &ratio));
    worst = std::max(worst, ratio);
    summary << "\n    ran  " << algo.id << " (error " << ratio << " of the bound)";
    EXPECT_EQ(in_place.choice->algo.id, algo.id) << context;
    if (algo.deterministic) {
      EXPECT_TRUE(bitwise_equal(out.output, again.output, "output", context));
      EXPECT_TRUE(bitwise_equal(out.output, in_place.output, "in-place output", context));
    } else {
      EXPECT_TRUE(activation_close(desc, direction, in_place.output, expected,
                                   direction == Direction::fwd ? nullptr : &diff_dst, context));
    }
  }
  RecordProperty("candidates_run", ran);
  RecordProperty("candidates_unsupported", unsupported);
  std::cout << "[ parity   ] cpu " << label << ": " << ran << " ran, " << unsupported
            << " unsupported, worst error " << worst << " of the bound" << summary.str() << "\n";

  if (!computable || ran == 0) {
    // Nothing can run: the op itself must refuse with Unsupported, not run something else.
    Context heuristic(BackendKind::cpu);
    heuristic.set_choice_cache(std::make_shared<ChoiceCache>());
    try {
      run_bwd(heuristic, desc, src, dst, diff_dst, false);
      ADD_FAILURE() << "no candidate is supported but the op ran anyway\n  "
                    << activation_context(desc, direction, "(heuristic)");
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    }
  }
  // dnnx's kernel runs every computable case, and oneDNN every forward one in every dtype: natively
  // or, where this CPU has no f16/bf16 eltwise, as f32 compute (Note [f32-compute activations]).
  if (computable)
    EXPECT_GT(ran, 0) << "no cpu candidate ran\n  "
                      << activation_context(desc, direction, "(none)");
  if (direction == Direction::fwd) {
    EXPECT_TRUE(has_supported_onednn(algos)) << "no oneDNN candidate runs this forward case\n  "
                                             << activation_context(desc, direction, "(none)");
  }
  EXPECT_TRUE(f32_compute_marked_and_ordered(algos, desc.dtype));
}

// One ctest test per case (a process each): forward, then backward with each desc.saved.
TEST_P(ActivationParity, fwd_and_bwd) {
  check(Direction::fwd, ActivationSaved::src_and_dst);
  for (const ActivationSaved saved :
       {ActivationSaved::src_and_dst, ActivationSaved::dst, ActivationSaved::src})
    check(Direction::bwd_data, saved);
}

INSTANTIATE_TEST_SUITE_P(Table, ActivationParity, ::testing::ValuesIn(activation_cases()),
                         case_name);

}  // namespace
}  // namespace dnnx::test
