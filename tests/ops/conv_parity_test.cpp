// Parity of every listed candidate of every non-reference backend with the reference backend,
// for every direction of every case of the conv case table (STYLE.md "Tests").
//
// Per (backend, case, direction): random inputs in [-1, 1) rounded to the dtype are computed by
// the reference (the oracle) and then by each candidate of conv_list() individually, through a
// Context whose policy for the direction is AlgoPolicy::fixed(id). Outputs start as NaN and are
// checked for NaN/Inf first; then |candidate - reference| <= tol * scale elementwise, where scale
// is the sum of |products| behind the element. Candidates that claim determinism run twice and
// must agree bitwise. Unsupported candidates are counted, reported, and each must carry one of
// the reasons of Note [expected unsupported]; anything else fails.

#include <dnnx/dnnx.hpp>

#include "ops/conv_cases.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>

namespace dnnx::test {
namespace {

// Seed of the random part of the table: changing it redraws every random case.
constexpr std::uint64_t random_table_seed = 20240611;
constexpr int random_table_size = 40;
// ResNet-50 layers in the default suite: those of at most this many MACs at batch 1, which is
// l1.reduce.first (56x56 64->64 1x1, 12.8 M MACs) alone: oneDNN's ref implementation needs ~16 s
// per direction for the next cheapest (51 M MACs) on 2 cores, and it runs twice (determinism).
// Every layer of bench/shapes/resnet50.txt at batch 2 runs with DNNX_PARITY_RESNET50_ALL=1
// (instantiated as ResNet50All/*; ctest test parity.resnet50_all with -DDNNX_TEST_RESNET50_ALL=ON).
constexpr double resnet50_default_max_macs = 13e6;

std::vector<ConvCase> resnet50_all_cases() {
  const char* all = std::getenv("DNNX_PARITY_RESNET50_ALL");
  if (all == nullptr || std::string_view(all) != "1") return {};
  return conv_resnet50_cases(2, std::numeric_limits<double>::infinity());
}

// Note [expected unsupported]: the only reasons a listed candidate may be unsupported. A reason
// outside this list fails the test, so a backend cannot quietly stop supporting a case.
struct ExpectedReason {
  const char* category;
  std::regex id;      // the candidate ids it applies to
  std::regex reason;  // what the reason must say
  bool (*applies)(const ConvDesc&, Direction);
};
const std::vector<ExpectedReason>& expected_reasons() {
  static const std::vector<ExpectedReason> reasons = {
      // oneDNN implements winograd for few shapes (3x3, stride 1, f32 forward on some ISAs).
      {"onednn: no winograd implementation for the desc",
       std::regex("^onednn:unavailable:winograd$"), std::regex("has no winograd implementation"),
       [](const ConvDesc&, Direction) { return true; }},
      // Native f16/bf16 implementations exist only for some directions on some ISAs (the
      // f32-compute candidates run the rest: Note [f32 compute convolution] in
      // src/backends/onednn/conv_list.cpp); f32 has oneDNN's reference implementations
      // everywhere, so a missing f32 direct algorithm is a bug.
      {"onednn: no native direct implementation for f16/bf16 in this direction",
       std::regex("^onednn:unavailable:direct$"), std::regex("has no direct implementation"),
       [](const ConvDesc& desc, Direction) { return desc.dtype != DType::f32; }},
      // Note [known oneDNN defects] (src/backends/onednn/conv_list.cpp): implementations oneDNN
      // offers that compute wrong results for some descs (all in backward weights); the backend
      // lists them unsupported: jit_bf16 and the AMX kernels (brgconv_bwd_w, jit) with a kernel
      // longer than the input, jit_1x1 on strided nhwc activations with few channels,
      // jit:avx512_core on 3-D strided, front-padded depth; also the f32 implementations inside
      // f32-compute candidates (ids ending in ":f32").
      {"onednn: known oneDNN defect (backward weights)",
       std::regex("^onednn:(jit(_bf16|_1x1)?|brgconv_bwd_w):"), std::regex("known oneDNN defect"),
       [](const ConvDesc&, Direction direction) { return direction == Direction::bwd_weights; }},
  };
  return reasons;
}

const char* unsupported_category(const ConvDesc& desc, Direction direction, const AlgoInfo& algo) {
  for (const ExpectedReason& reason : expected_reasons()) {
    if (std::regex_search(algo.id, reason.id) && std::regex_search(algo.reason, reason.reason) &&
        reason.applies(desc, direction)) {
      return reason.category;
    }
  }
  return nullptr;
}

struct ParityCase {
  BackendKind backend;
  ConvCase conv;
};

// The backends compared with the reference: cpu always (skipped with a message when not built),
// cudnn where it can run.
std::vector<ParityCase> with_backends(const std::vector<ConvCase>& cases) {
  std::vector<BackendKind> backends{BackendKind::cpu};
  if (backend_available(BackendKind::cudnn)) backends.push_back(BackendKind::cudnn);
  std::vector<ParityCase> out;
  for (const BackendKind backend : backends) {
    for (const ConvCase& conv : cases) out.push_back({backend, conv});
  }
  return out;
}

// gtest prints parameters on failure; the default would be a byte dump.
void PrintTo(const ParityCase& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.conv.name << " (" << param.conv.desc << ")";
}

std::string parity_name(const ::testing::TestParamInfo<ParityCase>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.conv.name;
}

class ConvParity : public ::testing::TestWithParam<ParityCase> {
 protected:
  void check(Direction direction);
};

void ConvParity::check(Direction direction) {
  const auto& [backend, conv] = GetParam();
  std::string why;
  if (!backend_available(backend, &why)) {
    GTEST_SKIP() << "backend " << to_string(backend) << " is not available here: " << why;
  }
  const ConvDesc& desc = conv.desc;
  SCOPED_TRACE(conv.name + " " + std::string(to_string(direction)));

  const ConvOperands operands = random_conv_operands(
      desc, direction, seed_from(conv.name + std::string(to_string(direction))));
  Context reference(BackendKind::reference);
  const ConvRun expected = run_conv(reference, desc, direction, operands);
  ASSERT_TRUE(all_finite(expected.output, "reference output",
                         conv_context(desc, direction, expected.choice->algo.id)));
  const std::vector<float> expected_values = expected.output.to_f32();
  const std::vector<float> scale = conv_error_scale(desc, direction, operands);
  const Tolerance tolerance = conv_tolerance(desc.dtype);

  Context base(backend);
  const std::vector<AlgoInfo> algos = conv_list(base, desc, direction);
  ASSERT_FALSE(algos.empty()) << "conv_list returned no candidates at all\n  "
                              << conv_context(desc, direction, "(none)");

  std::ostringstream summary;
  int ran = 0;
  int unsupported = 0;
  const auto listed_supported =
      std::count_if(algos.begin(), algos.end(), [](const AlgoInfo& a) { return a.supported; });
  double worst_ratio = 0;
  for (const AlgoInfo& algo : algos) {
    const std::string context = conv_context(desc, direction, algo.id);
    if (!algo.supported) {
      ++unsupported;
      const char* category = unsupported_category(desc, direction, algo);
      summary << "\n    skip " << algo.id << ": " << algo.reason;
      EXPECT_NE(category, nullptr)
          << "candidate " << algo.id << " is unsupported for a reason not in the expected list "
          << "(Note [expected unsupported]): \"" << algo.reason << "\"\n  " << context;
      EXPECT_FALSE(algo.reason.empty()) << "unsupported candidate without a reason\n  " << context;
      continue;
    }
    Context fixed = base;
    fixed.tune().policy(direction) = AlgoPolicy::fixed(algo.id);
    const auto start = std::chrono::steady_clock::now();
    ConvRun run;
    try {
      run = run_conv(fixed, desc, direction, operands);
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate listed as supported threw " << to_string(error.kind()) << ": "
                    << error.what() << "\n  " << context;
      continue;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++ran;
    ASSERT_NE(run.choice, nullptr) << context;
    EXPECT_EQ(run.choice->algo.id, algo.id)
        << "a fixed policy ran another candidate\n  " << context;
    EXPECT_EQ(run.choice->direction, direction) << context;
    if (!all_finite(run.output, "output", context)) {
      ADD_FAILURE() << all_finite(run.output, "output", context).message();
      continue;
    }
    double ratio = 0;
    EXPECT_TRUE(close_within_scale(run.output.to_f32(), expected_values, scale, run.output.dims(),
                                   tolerance, "output", context, &ratio));
    worst_ratio = std::max(worst_ratio, ratio);
    summary << "\n    ran  " << algo.id << " (" << ms << " ms, error " << ratio << " of the bound"
            << (algo.deterministic ? ", deterministic" : "") << ")";
    if (algo.deterministic) {
      const ConvRun again = run_conv(fixed, desc, direction, operands);
      EXPECT_TRUE(bitwise_equal(run.output, again.output, "output", context));
    }
  }

  // Counted skips: visible in the test output and in the XML report.
  RecordProperty("candidates", static_cast<int>(algos.size()));
  RecordProperty("candidates_run", ran);
  RecordProperty("candidates_unsupported", unsupported);
  std::cout << "[ parity   ] " << to_string(backend) << " " << conv.name << " "
            << to_string(direction) << ": " << ran << " ran, " << unsupported
            << " unsupported, worst error " << worst_ratio << " of the bound" << summary.str()
            << "\n";

  // The cpu backend runs every case on every CPU: f16/bf16 through f32-compute candidates where
  // oneDNN has no native kernel (Note [f32 compute convolution]).
  if (backend == BackendKind::cpu) {
    EXPECT_GT(listed_supported, 0)
        << "no supported cpu candidate\n  " << conv_context(desc, direction, "(none)");
  }
  if (listed_supported == 0) {
    // No candidate: the op itself must then refuse with Unsupported, not run something else.
    Context heuristic(backend);
    try {
      run_conv(heuristic, desc, direction, operands);
      ADD_FAILURE() << "every candidate is unsupported but the op ran anyway\n  "
                    << conv_context(desc, direction, "(heuristic)");
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Unsupported) << error.what();
    }
  }
}

TEST_P(ConvParity, fwd) { check(Direction::fwd); }
TEST_P(ConvParity, bwd_data) { check(Direction::bwd_data); }
TEST_P(ConvParity, bwd_weights) { check(Direction::bwd_weights); }

INSTANTIATE_TEST_SUITE_P(Edge, ConvParity, ::testing::ValuesIn(with_backends(conv_edge_cases())),
                         parity_name);
INSTANTIATE_TEST_SUITE_P(Random, ConvParity,
                         ::testing::ValuesIn(with_backends(conv_random_cases(random_table_seed,
                                                                             random_table_size))),
                         parity_name);
INSTANTIATE_TEST_SUITE_P(
    ResNet50, ConvParity,
    ::testing::ValuesIn(with_backends(conv_resnet50_cases(1, resnet50_default_max_macs))),
    parity_name);
INSTANTIATE_TEST_SUITE_P(ResNet50All, ConvParity,
                         ::testing::ValuesIn(with_backends(resnet50_all_cases())), parity_name);

// The unsupported candidates of the whole table, listed without running anything, tallied by
// reason: every one must fall in an expected category, and the tally is printed so that a change
// in what a backend supports shows up in the log.
TEST(ConvParityBudget, EveryUnsupportedCandidateHasAnExpectedReason) {
  std::string why;
  if (!backend_available(BackendKind::cpu, &why)) {
    GTEST_SKIP() << "backend cpu is not available here: " << why;
  }
  Context cpu(BackendKind::cpu);
  std::vector<ConvCase> cases = conv_edge_cases();
  for (auto& c : conv_random_cases(random_table_seed, random_table_size)) cases.push_back(c);
  for (auto& c : conv_resnet50_cases(1, resnet50_default_max_macs)) cases.push_back(c);

  std::map<std::string, int> by_category;
  std::map<std::string, int> uncovered_by_dtype;
  int total = 0;
  int supported = 0;
  for (const ConvCase& conv : cases) {
    for (const Direction direction :
         {Direction::fwd, Direction::bwd_data, Direction::bwd_weights}) {
      int supported_here = 0;
      for (const AlgoInfo& algo : conv_list(cpu, conv.desc, direction)) {
        ++total;
        if (algo.supported) {
          ++supported;
          ++supported_here;
          continue;
        }
        const char* category = unsupported_category(conv.desc, direction, algo);
        ++by_category[category ? category : "UNEXPECTED"];
        EXPECT_NE(category, nullptr) << "unexpected reason \"" << algo.reason << "\"\n  "
                                     << conv_context(conv.desc, direction, algo.id);
      }
      if (supported_here == 0) {
        ++uncovered_by_dtype[std::string(to_string(conv.desc.dtype))];
        // oneDNN's reference implementations cover every f32 convolution, and f16/bf16 run on
        // f32 copies where oneDNN has no native kernel: every case has a cpu candidate.
        ADD_FAILURE() << "no cpu candidate supports the case\n  "
                      << conv_context(conv.desc, direction, "(none)");
      }
    }
  }
  std::cout << "[ budget   ] " << cases.size() << " cases x 3 directions: " << total
            << " candidates listed, " << supported << " supported\n";
  for (const auto& [category, count] : by_category) {
    std::cout << "[ budget   ]   unsupported (" << category << "): " << count << "\n";
  }
  for (const auto& [dtype, count] : uncovered_by_dtype) {
    std::cout << "[ budget   ]   " << dtype
              << " (case, direction) pairs without any cpu candidate: " << count << "\n";
  }
  EXPECT_GT(supported, 0);
}

}  // namespace
}  // namespace dnnx::test
