// Parity of every listed candidate of every non-reference backend with the reference backend,
// for every direction of every case of the conv case table (STYLE.md "Tests"), through the
// parity runner (support/parity.hpp).
//
// Per (backend, case, direction): random inputs in [-1, 1) rounded to the dtype; outputs are
// compared elementwise within Note [conv tolerances], relative to the sum of |products| behind
// each element. Unsupported candidates are counted, reported, and each must carry one of the
// reasons of Note [expected unsupported]; anything else fails. The cpu backend must run every
// case; a backend that supports no candidate must refuse the case with Unsupported.

#include <dnnx/dnnx.hpp>

#include "ops/conv_cases.hpp"
#include "support/compare.hpp"
#include "support/conv.hpp"
#include "support/parity.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <regex>
#include <string>

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
const std::vector<ExpectedReason<ConvDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ConvDesc>> reasons = {
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
      // dnnx's depthwise kernels (Note [depthwise candidates] in
      // src/backends/cudnn/conv_depthwise.cpp): every kernel outside depthwise descs, the
      // unrolled one outside 3x3 / 5x5 / 7x7 windows, channel packs outside channels_last with
      // multiplier 1 (and an even channel count for fwd and bwd_data, those windows for
      // bwd_weights), column strips outside channels_first fwd and bwd_data with those windows,
      // no dilation and their strides.
      {"cudnn: not a depthwise convolution", std::regex("^cudnn:kernel:depthwise:"),
       std::regex("^not a depthwise convolution"),
       [](const ConvDesc& desc, Direction) { return desc.groups != desc.in_channels; }},
      {"cudnn: depthwise kernel variant outside its domain",
       std::regex("^cudnn:kernel:depthwise:(unrolled|channel_packs|strips)$"),
       std::regex("^(the unrolled variant runs 2-D 3x3, 5x5 and 7x7 kernels only|channel packs "
                  "need (the channels_last layout|a channel multiplier of 1|an even channel "
                  "count)|channel packs run bwd_weights for 2-D 3x3, 5x5 and 7x7 kernels only|"
                  "column strips (need the channels_first layout|run fwd and bwd_data only|run "
                  "2-D 3x3, 5x5 and 7x7 kernels only|run kernels without dilation only|run fwd "
                  "at a stride of 1 or 2 along H only|run bwd_data at stride 1 along H and W "
                  "only))"),
       [](const ConvDesc&, Direction) { return true; }},
  };
  return reasons;
}

struct ConvParityParam {
  BackendKind backend;
  ConvCase conv;
};

// The backends compared with the reference: cpu always (skipped with a message when not built),
// cudnn where it can run.
std::vector<ConvParityParam> with_backends(const std::vector<ConvCase>& cases) {
  std::vector<ConvParityParam> out;
  for (const BackendKind backend : parity_backends(true)) {
    for (const ConvCase& conv : cases) out.push_back({backend, conv});
  }
  return out;
}

// gtest prints parameters on failure; the default would be a byte dump.
void PrintTo(const ConvParityParam& param, std::ostream* out) {
  *out << to_string(param.backend) << " " << param.conv.name << " (" << param.conv.desc << ")";
}

std::string parity_name(const ::testing::TestParamInfo<ConvParityParam>& info) {
  return std::string(to_string(info.param.backend)) + "_" + info.param.conv.name;
}

// One case of the conv table in one direction, for the parity runner.
class ConvParityCase final : public ParityCase {
 public:
  ConvParityCase(const ConvCase& conv, Direction direction)
      : conv_(conv),
        operands_(random_conv_operands(conv.desc, direction,
                                       seed_from(conv.name + std::string(to_string(direction))))) {}

  OpKind op_kind() const override { return OpKind::conv; }
  std::string label() const override { return conv_.name; }
  std::string where(Direction direction, std::string_view candidate) const override {
    return conv_context(desc(), direction, candidate);
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    return conv_list(context, desc(), direction);
  }
  ParityRun run(Context& context, Direction direction) const override {
    ConvRun run = run_conv(context, desc(), direction, operands_);
    return {{{"output", std::move(run.output)}}, std::move(run.choice)};
  }
  ParityExpected reference(Direction direction) const override {
    ParityExpected expected = ParityCase::reference(direction);
    expected.scale = conv_error_scale(desc(), direction, operands_);
    return expected;
  }
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    const Tensor& output = actual.outputs[0].tensor;
    return close_within_scale(output.to_f32(), expected.run.outputs[0].tensor.to_f32(),
                              expected.scale, output.dims(), conv_tolerance(desc().dtype), "output",
                              where, worst);
  }
  bool expected_unsupported(Direction direction, const AlgoInfo& algo) const override {
    return unsupported_category(expected_reasons(), desc(), direction, algo) != nullptr;
  }
  // The cpu backend runs every case on every CPU: f16/bf16 through f32-compute candidates where
  // oneDNN has no native kernel (Note [f32 compute convolution]). cudnn may support none (the op
  // must then refuse the case, which the runner checks).
  int min_ran(BackendKind backend, Direction, const std::vector<AlgoInfo>&) const override {
    return backend == BackendKind::cpu ? 1 : 0;
  }

 private:
  const ConvDesc& desc() const { return conv_.desc; }

  const ConvCase& conv_;
  ConvOperands operands_;
};

class ConvParity : public ::testing::TestWithParam<ConvParityParam> {
 protected:
  void check(Direction direction) {
    const auto& [backend, conv] = GetParam();
    std::string why;
    if (!backend_available(backend, &why)) {
      GTEST_SKIP() << "backend " << to_string(backend) << " is not available here: " << why;
    }
    SCOPED_TRACE(conv.name + " " + std::string(to_string(direction)));
    check_parity(ConvParityCase(conv, direction), backend, direction);
  }
};

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
        const char* category = unsupported_category(expected_reasons(), conv.desc, direction, algo);
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
