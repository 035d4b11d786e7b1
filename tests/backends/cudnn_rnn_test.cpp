// The cudnn backend's recurrent layer on a GPU (label "gpu"): for every case of the table (plus
// larger hidden sizes, where the persistent kernels apply) in f32, f16 and bf16, every candidate
// the training forward lists as supported runs a whole step — inference forward, training
// forward, backward w.r.t. the data, backward w.r.t. the weights overwriting and accumulating —
// with every direction's policy fixed to it, and each output is compared with the reference
// backend's (NaN/Inf first); forward outputs are compared bitwise across two runs where the
// candidate claims determinism; unsupported candidates must say why in one of the ways Note
// [cudnn rnn candidates] lists, and a standard-algorithm candidate must run f32 and f16
// (standard:fma on f32). The table has cases with dropout between layers, run layer by layer with
// dnnx's masks (Note [cudnn rnn dropout]): the training outputs match the reference's only where
// the masks are the same. Also: an exhaustive search of the training forward followed by backwards
// that select the algorithm of the state it filled, a backward refusing a state of another
// algorithm, and steps with new inputs on the same memory (graph replay, Note [rnn graph
// replay]). The weight conversion (Note [cudnn rnn weights]): bidirectional multi-layer cases
// with and without bias, f16 with odd sizes so that the runs are not multiples of 16 bytes, with
// the caller's weights and weight gradients at the alignment of one element, every direction
// (accumulating bwd_weights included) against the reference, and converted once per (address,
// weights_version) (Note [rnn weights version]); the segment kernels themselves
// (kernels/segments.cu) on ranges of every size and alignment, both ways, checked byte for byte;
// and, without a GPU, the host side of their table (merging and chunking). The GPU tests skip with
// the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>

#include "backends/cudnn/kernels/segments.hpp"
#include "core/backend.hpp"
#include "ops/context_state.hpp"
#include "rnn_cases.hpp"
#include "support/compare.hpp"
#include "support/errors.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

constexpr Direction all_directions[] = {Direction::fwd, Direction::fwd_training,
                                        Direction::bwd_data, Direction::bwd_weights};

Context fixed_context(const std::string& id, bool fwd_supported) {
  Context context = gpu_test_context();
  for (const Direction direction : all_directions) {
    if (direction == Direction::fwd && !fwd_supported) continue;
    context.tune().policy(OpKind::rnn, direction) = AlgoPolicy::fixed(id);
  }
  return context;
}

// Per-dtype tolerance, relative to each element's scale: max(|reference|, the RMS of the
// reference tensor), so that elements that are small by cancellation (gradients summed over steps
// and sequences) are held to the error of the sums they come from. The reference computes in f64
// from the same rounded inputs; cuDNN computes in f32 (every dtype) and rounds each layer's output,
// the states and its saved activations to the dtype, errors growing with the steps.
Tolerance tolerance_of(DType dtype, bool tensor_cores) {
  switch (dtype) {
    case DType::f16: return {2e-2, 1e-4};
    case DType::bf16: return {1e-1, 1e-3};
    default: return tensor_cores ? Tolerance{2e-2, 1e-4} : Tolerance{2e-4, 1e-6};
  }
}

bool expected_unsupported(const AlgoInfo& info) {
  for (const char* reason :
       {"DNNX_ALLOW_TF32", "cudnnGetRNNTempSpaceSizes failed", "cudnnSetRNNDescriptor_v8 failed",
        "cudnnSetRNNDataDescriptor failed", "padded I/O",
        "persistent algorithms take sequences of one length only"}) {
    if (info.reason.find(reason) != std::string::npos) return true;
  }
  return false;
}

// Every output of `step` against the reference's (`expected`), finite first, each element held
// to `tolerance` of its scale (rnn_scale_of). Returns false when an output was not finite.
bool outputs_match(const RnnStep& step, const RnnStep& expected, const Tolerance& tolerance,
                   const std::string& where) {
  for (const auto& [name, want] : expected.outputs) {
    const Tensor& got = step.outputs.at(name);
    if (const ::testing::AssertionResult finite = all_finite(got, name, where); !finite) {
      ADD_FAILURE() << finite.message();
      return false;
    }
    const std::vector<float> w = want.to_f32();
    EXPECT_TRUE(
        close_within_scale(got.to_f32(), w, rnn_scale_of(w), got.dims(), tolerance, name, where));
  }
  return true;
}

// A 2-layer LSTM with hidden size 128: the size where cuDNN's persistent algorithms apply.
RnnDesc persistent_lstm() {
  RnnDesc desc;
  desc.cell = RnnCell::lstm;
  desc.seq_length = 9;
  desc.batch = 8;
  desc.input_size = 64;
  desc.hidden_size = 128;
  desc.layers = 2;
  return desc;
}

std::vector<RnnCase> gpu_cases() {
  std::vector<RnnCase> cases = rnn_cases();
  RnnCase persistent;
  persistent.name = "lstm_h128_2layers";
  persistent.desc = persistent_lstm();
  cases.push_back(persistent);
  RnnCase gru = persistent;
  gru.name = "gru_h256_bi_varlen";
  gru.desc.cell = RnnCell::gru;
  gru.desc.hidden_size = 256;
  gru.desc.layers = 1;
  gru.desc.bidirectional = true;
  gru.desc.variable_lengths = true;
  gru.lengths = {9, 3, 7, 1, 9, 2, 8, 5};
  cases.push_back(gru);
  // Dropout between layers (Note [cudnn rnn dropout]).
  const std::vector<RnnCase> dropout = rnn_dropout_cases();
  cases.insert(cases.end(), dropout.begin(), dropout.end());
  RnnCase wide = persistent;
  wide.name = "rnn_tanh_h128_3layers_dropout";
  wide.desc.cell = RnnCell::rnn_tanh;
  wide.desc.layers = 3;
  wide.desc.dropout = 0.5f;
  cases.push_back(wide);
  return cases;
}

struct GpuCase {
  RnnCase c;
  DType dtype;
};

std::vector<GpuCase> gpu_table() {
  std::vector<GpuCase> out;
  for (const RnnCase& c : gpu_cases())
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) out.push_back({c, dtype});
  return out;
}

class CudnnRnn : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CudnnRnn, EveryCandidateMatchesTheReference) {
  DNNX_REQUIRE_GPU();
  const GpuCase& g = GetParam();
  RnnDesc desc = g.c.desc;
  desc.dtype = g.dtype;
  const RnnInputs inputs = rnn_inputs(desc, g.c.lengths, seed_from(g.c.name));
  Context reference = reference_context();
  const RnnStep expected = run_rnn_step(reference, desc, inputs);
  for (const auto& [name, tensor] : expected.outputs)
    ASSERT_TRUE(all_finite(tensor, "reference " + name, desc.repro()));

  Context base = gpu_test_context();
  const std::vector<AlgoInfo> training = rnn_list(base, desc, Direction::fwd_training);
  const std::vector<AlgoInfo> inference = rnn_list(base, desc, Direction::fwd);
  ASSERT_FALSE(training.empty());
  int ran = 0, unsupported = 0, standard_ran = 0;
  for (const AlgoInfo& info : training) {
    const std::string where = info.id + " | " + desc.repro(Direction::fwd_training);
    if (!info.supported) {
      ++unsupported;
      EXPECT_TRUE(expected_unsupported(info))
          << "unexpected reason: " << info.reason << " | " << where;
      if (info.id == "cudnn:rnn:standard:fma" && desc.dtype == DType::f32)
        ADD_FAILURE() << "the standard algorithm with fma math must run f32: " << info.reason
                      << " | " << where;
      continue;
    }
    const auto fwd = std::find_if(inference.begin(), inference.end(),
                                  [&](const AlgoInfo& a) { return a.id == info.id; });
    const bool fwd_supported = fwd != inference.end() && fwd->supported;
    Context context = fixed_context(info.id, fwd_supported);
    RnnStep step;
    try {
      step = run_rnn_step(context, desc, inputs);
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate failed: " << error.what() << " | " << where;
      continue;
    }
    ++ran;
    if (info.id.rfind("cudnn:rnn:standard:", 0) == 0) ++standard_ran;
    for (const auto& [direction, id] : step.ran) {
      if (direction == "fwd" && !fwd_supported) continue;
      EXPECT_EQ(id, info.id) << direction << " | " << where;
    }
    const bool tf32 =
        std::find(info.notes.begin(), info.notes.end(), "tensor_cores") != info.notes.end();
    ASSERT_TRUE(outputs_match(step, expected, tolerance_of(desc.dtype, tf32), where));
    if (info.deterministic) {
      const RnnStep again = run_rnn_step(context, desc, inputs);
      for (const char* name : {"dst", "hy", "dst_inference"})
        EXPECT_TRUE(bitwise_equal(step.outputs.at(name), again.outputs.at(name), name, where));
    }
  }
  std::cout << "  " << g.c.name << " " << to_string(desc.dtype) << ": " << ran << " ran, "
            << unsupported << " unsupported of " << training.size() << "\n";
  // cuDNN's standard algorithm takes every configuration of f32 and f16 (bf16: where cuDNN has it).
  if (desc.dtype != DType::bf16) {
    EXPECT_GE(standard_ran, 1) << desc.repro(Direction::fwd_training);
  }
  RecordProperty("candidates_run", ran);
  RecordProperty("candidates_unsupported", unsupported);
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnRnn, ::testing::ValuesIn(gpu_table()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           return info.param.c.name + "_" +
                                  std::string(to_string(info.param.dtype));
                         });

// Note [rnn graph replay]: a plan called again on the same memory replays its captured launches,
// and each call must still compute on that call's data. Three steps with different inputs on one
// context (the caching allocator hands each step the memory of the step before, so the later ones
// replay), each against the reference: the standard algorithm and every persistent one that runs
// the desc, on a bidirectional LSTM whose weights are converted; and a variable-length GRU whose
// lengths change between the steps (those calls run directly).
TEST(CudnnRnnReplay, StepsOnTheSameMemoryFollowTheirInputs) {
  DNNX_REQUIRE_GPU();
  RnnDesc lstm = persistent_lstm();
  lstm.bidirectional = true;
  RnnDesc gru = lstm;
  gru.cell = RnnCell::gru;
  gru.layers = 1;
  gru.variable_lengths = true;
  const std::vector<std::vector<std::int32_t>> gru_lengths = {
      {9, 3, 7, 1, 9, 2, 8, 5}, {2, 9, 9, 4, 1, 6, 3, 8}, {9, 9, 9, 9, 9, 9, 9, 9}};
  Context reference = reference_context();
  for (const RnnDesc& desc : {lstm, gru}) {
    Context base = gpu_test_context();
    const std::vector<AlgoInfo> training = rnn_list(base, desc, Direction::fwd_training);
    const std::vector<AlgoInfo> inference = rnn_list(base, desc, Direction::fwd);
    int ran = 0;
    for (const AlgoInfo& info : training) {
      if (!info.supported || !info.id.ends_with(":fma")) continue;
      const auto fwd = std::find_if(inference.begin(), inference.end(),
                                    [&](const AlgoInfo& a) { return a.id == info.id; });
      Context context = fixed_context(info.id, fwd != inference.end() && fwd->supported);
      ++ran;
      for (int round = 0; round < 3; ++round) {
        const std::vector<std::int32_t> lengths = desc.variable_lengths
                                                      ? gru_lengths[static_cast<std::size_t>(round)]
                                                      : std::vector<std::int32_t>{};
        const RnnInputs inputs =
            rnn_inputs(desc, lengths, seed_from("replay") + static_cast<std::uint64_t>(round));
        const RnnStep expected = run_rnn_step(reference, desc, inputs);
        const std::string where = info.id + " round " + std::to_string(round) + " | " +
                                  desc.repro(Direction::fwd_training);
        RnnStep step;
        try {
          step = run_rnn_step(context, desc, inputs);
        } catch (const Error& error) {
          ADD_FAILURE() << "candidate failed: " << error.what() << " | " << where;
          continue;
        }
        ASSERT_TRUE(outputs_match(step, expected, tolerance_of(desc.dtype, false), where));
      }
    }
    EXPECT_GE(ran, 1) << desc.repro(Direction::fwd_training);
  }
}

TEST(CudnnRnnSelection, ExhaustiveTrainingForwardThenBackwardsOfItsAlgorithm) {
  DNNX_REQUIRE_GPU();
  const std::vector<RnnCase> cases = gpu_cases();
  const auto c = std::find_if(cases.begin(), cases.end(),
                              [](const RnnCase& one) { return one.name == "gru_h256_bi_varlen"; });
  ASSERT_NE(c, cases.end());
  RnnDesc desc = c->desc;
  desc.dtype = DType::f16;
  const RnnInputs inputs = rnn_inputs(desc, c->lengths, 77);
  Context context = gpu_test_context();
  for (const Direction direction : all_directions)
    context.tune().policy(OpKind::rnn, direction) = AlgoPolicy::exhaustive();
  const RnnStep step = run_rnn_step(context, desc, inputs);
  EXPECT_EQ(step.ran.at("bwd_data"), step.ran.at("fwd_training"));
  EXPECT_EQ(step.ran.at("bwd_weights"), step.ran.at("fwd_training"));
  Context reference = reference_context();
  const RnnStep expected = run_rnn_step(reference, desc, inputs);
  for (const auto& [name, want] : expected.outputs) {
    const std::vector<float> w = want.to_f32();
    EXPECT_TRUE(close_within_scale(step.outputs.at(name).to_f32(), w, rnn_scale_of(w), want.dims(),
                                   tolerance_of(desc.dtype, true), name, step.ran.at("fwd")));
  }
}

// Note [cudnn rnn dropout]: the training directions of a desc with dropout between layers run
// layer by layer (note layer_by_layer, a state holding every layer's reserve space and the layers'
// outputs), the inference forward at once; the standard algorithm runs them.
TEST(CudnnRnnDropout, TrainingDirectionsRunLayerByLayer) {
  DNNX_REQUIRE_GPU();
  RnnDesc desc;
  desc.cell = RnnCell::gru;
  desc.seq_length = 6;
  desc.batch = 3;
  desc.input_size = 5;
  desc.hidden_size = 8;
  desc.layers = 2;
  desc.dropout = 0.5f;
  Context base = gpu_test_context();
  auto find = [](const std::vector<AlgoInfo>& list, const std::string& id) {
    const auto it =
        std::find_if(list.begin(), list.end(), [&](const AlgoInfo& a) { return a.id == id; });
    return it == list.end() ? AlgoInfo{} : *it;
  };
  const std::string id = "cudnn:rnn:standard:fma";
  auto has = [](const AlgoInfo& info, const char* note) {
    return std::find(info.notes.begin(), info.notes.end(), note) != info.notes.end();
  };
  RnnDesc plain = desc;
  plain.dropout = 0.0f;
  const AlgoInfo without = find(rnn_list(base, plain, Direction::fwd_training), id);
  for (const Direction direction :
       {Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
    const AlgoInfo info = find(rnn_list(base, desc, direction), id);
    ASSERT_TRUE(info.supported) << to_string(direction) << ": " << info.reason;
    EXPECT_TRUE(has(info, "layer_by_layer")) << to_string(direction);
    EXPECT_EQ(info.saved_state_format, id);
  }
  const AlgoInfo training = find(rnn_list(base, desc, Direction::fwd_training), id);
  // Two layer outputs of T x N x H f32 at least besides the reserve spaces.
  EXPECT_GT(training.saved_state_bytes, without.saved_state_bytes);
  const AlgoInfo inference = find(rnn_list(base, desc, Direction::fwd), id);
  ASSERT_TRUE(inference.supported) << inference.reason;
  EXPECT_FALSE(has(inference, "layer_by_layer"));
  // Dropout 0.5 zeroes about half of layer 1's input: the training forward's dst differs from
  // the inference forward's, and matches the reference's.
  const RnnInputs inputs = rnn_inputs(desc, {}, 91);
  Context context = fixed_context(id, true);
  const RnnStep step = run_rnn_step(context, desc, inputs);
  Context reference = reference_context();
  const RnnStep expected = run_rnn_step(reference, desc, inputs);
  const std::vector<float> got = step.outputs.at("dst").to_f32();
  const std::vector<float> inf = step.outputs.at("dst_inference").to_f32();
  double differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    differ = std::max(differ, double{std::fabs(got[i] - inf[i])});
  EXPECT_GT(differ, 1e-3);
  for (const auto& [name, want] : expected.outputs) {
    const std::vector<float> w = want.to_f32();
    EXPECT_TRUE(close_within_scale(step.outputs.at(name).to_f32(), w, rnn_scale_of(w), want.dims(),
                                   tolerance_of(desc.dtype, false), name, id));
  }
}

TEST(CudnnRnnSelection, BackwardRefusesAStateOfAnotherAlgorithm) {
  DNNX_REQUIRE_GPU();
  RnnDesc desc = gpu_cases().front().desc;
  const RnnInputs inputs = rnn_inputs(desc, {}, 5);
  Context base = gpu_test_context();
  std::vector<std::string> supported;
  for (const AlgoInfo& info : rnn_list(base, desc, Direction::fwd_training))
    if (info.supported) supported.push_back(info.id);
  ASSERT_FALSE(supported.empty());
  Context context = gpu_test_context();
  context.tune().policy(OpKind::rnn, Direction::fwd_training) = AlgoPolicy::fixed(supported[0]);
  const std::string other = supported.size() > 1 ? supported[1] : "cudnn:rnn:persist_static:fma";
  context.tune().policy(OpKind::rnn, Direction::bwd_data) = AlgoPolicy::fixed(other);
  const Tensor src = device_copy(inputs.src, context), w = device_copy(inputs.weights, context);
  Tensor dst =
      Tensor::empty(desc.dst_dims(), desc.dtype, Layout::channels_first, context.allocator());
  const Tensor diff_dst = device_copy(inputs.diff_dst, context);
  Tensor diff_src =
      Tensor::empty(desc.src_dims(), desc.dtype, Layout::channels_first, context.allocator());
  SavedState state;
  Generator generator;
  RnnForward f{&src, &w, nullptr, nullptr, nullptr, &dst, nullptr, nullptr};
  rnn_fwd_training(context, desc, generator, f, state);
  EXPECT_EQ(state.format(), supported[0]);
  RnnBackwardData b{&src,      &w,      nullptr, nullptr,   nullptr, &dst,
                    &diff_dst, nullptr, nullptr, &diff_src, nullptr, nullptr};
  try {
    rnn_bwd_data(context, desc, b, state);
    ADD_FAILURE() << "a backward fixed to " << other << " ran on a state of " << supported[0];
  } catch (const Error& error) {
    EXPECT_TRUE(error.kind() == ErrorKind::InvalidArgument ||
                error.kind() == ErrorKind::Unsupported)
        << error.what();
  }
}

// ---- the weight conversion (Note [cudnn rnn weights]) ------------------------------------------

// Cases whose conversion is not one copy: several (layer, direction) blocks, odd sizes so that a
// matrix or bias of f16 is not a multiple of 16 bytes, bias on and off, and dropout (layer by
// layer: each layer's plan converts or stages its slice of the caller's weights).
std::vector<GpuCase> conversion_table() {
  RnnCase dropout = rnn_case("lstm_bi_2layers_h7_dropout", RnnCell::lstm, 4, 3, 5, 7, 2, true);
  dropout.desc.dropout = 0.3f;
  const std::vector<RnnCase> cases = {
      rnn_case("lstm_bi_2layers_h7", RnnCell::lstm, 4, 3, 5, 7, 2, true),
      rnn_case("gru_bi_3layers_h9_no_bias", RnnCell::gru, 3, 2, 3, 9, 3, true, false, {}, false),
      rnn_case("rnn_relu_bi_2layers_h5", RnnCell::rnn_relu, 5, 2, 3, 5, 2, true),
      dropout,
  };
  std::vector<GpuCase> out;
  for (const RnnCase& c : cases)
    for (const DType dtype : {DType::f16, DType::f32}) out.push_back({c, dtype});
  return out;
}

class CudnnRnnConversion : public ::testing::TestWithParam<GpuCase> {};

// The standard algorithm, every direction, against the reference: with the caller's weights and
// weight gradients as allocated, and (where every direction's plan converts or stages them) one
// element past an allocation's start, the alignment of a slice of a larger buffer.
TEST_P(CudnnRnnConversion, EveryDirectionMatchesTheReferenceAtAnyWeightAlignment) {
  DNNX_REQUIRE_GPU();
  const GpuCase& g = GetParam();
  RnnDesc desc = g.c.desc;
  desc.dtype = g.dtype;
  const std::string id = "cudnn:rnn:standard:fma";
  const std::string where = id + " | " + desc.repro(Direction::fwd_training);
  Context context = fixed_context(id, true);
  // The plans' own records say whether they convert (the listing cannot: cuDNN's layout is
  // known once a plan asks where each matrix lies).
  detail::OpBackendOf<OpKind::rnn>& backend = detail::state_of(context).backend().op<OpKind::rnn>();
  bool weights_may_shift = true;
  for (const Direction direction : all_directions) {
    const auto plan = backend.plan(desc, direction, id);
    const AlgoInfo& info = plan->algo();
    const bool converts = info.has_note("weights_converted");
    std::cout << "  " << g.c.name << " " << to_string(desc.dtype) << " " << to_string(direction)
              << ": " << (converts ? "weights converted" : "weights as they are")
              << (info.has_note("layer_by_layer") ? ", layer by layer" : "") << "\n";
    // An unconverted whole-desc plan hands the caller's pointer to cuDNN, which wants it aligned.
    if (!converts && !info.has_note("layer_by_layer")) weights_may_shift = false;
  }
  const RnnInputs inputs = rnn_inputs(desc, {}, seed_from(g.c.name));
  Context reference = reference_context();
  const RnnStep expected = run_rnn_step(reference, desc, inputs);
  std::vector<std::int64_t> shifts = {0};
  if (weights_may_shift) shifts.push_back(1);
  for (const std::int64_t shift : shifts) {
    const std::string at = where + " | weights " + std::to_string(shift) + " element(s) in";
    RnnStep step;
    try {
      step = run_rnn_step(context, desc, inputs, Generator(), shift);
    } catch (const Error& error) {
      ADD_FAILURE() << error.what() << " | " << at;
      continue;
    }
    for (const auto& [direction, ran] : step.ran) EXPECT_EQ(ran, id) << direction << " | " << at;
    ASSERT_TRUE(outputs_match(step, expected, tolerance_of(desc.dtype, false), at));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnRnnConversion, ::testing::ValuesIn(conversion_table()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           return info.param.c.name + "_" +
                                  std::string(to_string(info.param.dtype));
                         });

// Note [rnn weights version]: a plan that converts the weights converts them once per (address,
// version): a call promising unchanged weights that did change gives the previous weights'
// results bit for bit; a new version, or none, follows the weights. A plan that hands the
// caller's weights to cuDNN follows them whatever the version. `lengths` for a desc with
// variable lengths.
void expect_converted_once(const RnnDesc& desc, const std::vector<std::int32_t>& lengths,
                           const std::string& name) {
  const std::string id = "cudnn:rnn:standard:fma";
  Context context = fixed_context(id, true);
  detail::OpBackendOf<OpKind::rnn>& backend = detail::state_of(context).backend().op<OpKind::rnn>();
  std::map<Direction, bool> converts;
  for (const Direction direction : {Direction::fwd, Direction::fwd_training, Direction::bwd_data})
    converts[direction] = backend.plan(desc, direction, id)->algo().has_note("weights_converted");
  const RnnInputs inputs = rnn_inputs(desc, lengths, seed_from(name + " version"));
  const Tensor second = rnn_inputs(desc, lengths, seed_from(name + " second")).weights;
  Context reference = reference_context();
  const auto expected = run_rnn_weight_versions(reference, desc, inputs, inputs.weights, second);
  const std::string where = id + " | " + desc.repro(Direction::fwd_training);
  std::map<std::string, Tensor> got;
  try {
    got = run_rnn_weight_versions(context, desc, inputs, inputs.weights, second);
  } catch (const Error& error) {
    FAIL() << error.what() << " | " << where;
  }
  // What a stale call gives: the first weights' results where every plan of the output keeps
  // converted weights, the second's where none does. diff_src comes from the training forward
  // and the backward w.r.t. the data, each converting (or not) on its own plan, and layer by
  // layer (dropout) each layer's plan on its own: where they differ, a stale call mixes both
  // weights and is not checked.
  enum class Stale { first, second, mixed };
  auto stale_of = [&](std::initializer_list<Direction> directions) {
    const auto n = std::count_if(directions.begin(), directions.end(),
                                 [&](Direction d) { return converts[d]; });
    if (n == 0) return Stale::second;
    if (n < static_cast<std::ptrdiff_t>(directions.size())) return Stale::mixed;
    return desc.dropout > 0 && directions.size() > 1 ? Stale::mixed : Stale::first;
  };
  const std::map<std::string, Stale> stale = {
      {"dst_", stale_of({Direction::fwd})},
      {"diff_src_", stale_of({Direction::fwd_training, Direction::bwd_data})}};
  for (const auto& [prefix, kind] : stale) {
    if (kind == Stale::first) {
      EXPECT_TRUE(bitwise_equal(got.at(prefix + "stale"), got.at(prefix + "first"),
                                prefix + "stale", where))
          << "the same version after a write must reuse the converted weights";
    }
    for (const char* call : {"first", "second", "unknown", "stale"}) {
      if (kind != Stale::second && std::string(call) == "stale") continue;
      const std::string name = prefix + call;
      const std::vector<float> want = expected.at(name).to_f32();
      EXPECT_TRUE(close_within_scale(got.at(name).to_f32(), want, rnn_scale_of(want),
                                     expected.at(name).dims(), tolerance_of(desc.dtype, false),
                                     name, where));
    }
  }
}

// Fixed lengths (replayed graphs, converting and not), layer by layer with dropout.
TEST_P(CudnnRnnConversion, ConvertsOncePerAddressAndVersion) {
  DNNX_REQUIRE_GPU();
  const GpuCase& g = GetParam();
  RnnDesc desc = g.c.desc;
  desc.dtype = g.dtype;
  expect_converted_once(desc, {}, g.c.name);
}

// Variable lengths: the calls run directly, not replayed.
TEST(CudnnRnnConversionVersion, VariableLengthsConvertOncePerAddressAndVersion) {
  DNNX_REQUIRE_GPU();
  RnnDesc desc = rnn_case("lstm_bi_2layers_h7", RnnCell::lstm, 4, 3, 5, 7, 2, true).desc;
  desc.variable_lengths = true;
  for (const DType dtype : {DType::f32, DType::f16}) {
    desc.dtype = dtype;
    expect_converted_once(desc, {4, 1, 3}, "lstm_bi_2layers_h7_varlen");
  }
}

// ---- the segment table (host side, no GPU) ------------------------------------------------------

namespace segments = cudnn::kernels::segments;
using segments::Segment;

void expect_segments(const std::vector<Segment>& got, const std::vector<Segment>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << "segment " << i;
    EXPECT_EQ(got[i].second, want[i].second) << "segment " << i;
    EXPECT_EQ(got[i].bytes, want[i].bytes) << "segment " << i;
  }
}

TEST(CudnnRnnSegments, MergedSortsDropsEmptyAndJoinsRunsContiguousInBothBuffers) {
  const std::vector<Segment> given = {{100, 0, 10}, {0, 50, 20},  {20, 70, 30}, {50, 100, 0},
                                      {110, 10, 5}, {115, 20, 5}, {50, 200, 8}};
  // {0,50,20}+{20,70,30} join; {50,100,0} is empty; {50,200,8} continues the first buffer only;
  // {100,0,10}+{110,10,5} join; {115,20,5} continues the first buffer only.
  expect_segments(segments::merged(given), {{0, 50, 50}, {50, 200, 8}, {100, 0, 15}, {115, 20, 5}});
  EXPECT_TRUE(segments::merged({}).empty());
  EXPECT_TRUE(segments::merged({{7, 9, 0}}).empty());
}

TEST(CudnnRnnSegments, ChunksCutLongRunsAtMultiplesOf16Bytes) {
  const std::uint64_t c = segments::chunk_bytes;
  static_assert(segments::chunk_bytes % 16 == 0);
  expect_segments(
      segments::chunks({{3, 7, 2 * c + 1000}, {90000, 5, c}, {200000, 1, 1}}),
      {{3, 7, c}, {3 + c, 7 + c, c}, {3 + 2 * c, 7 + 2 * c, 1000}, {90000, 5, c}, {200000, 1, 1}});
  EXPECT_TRUE(segments::chunks({}).empty());
}

// A layout of `count` blocks of odd sizes in two orders (runs of blocks in the same order in both,
// so that some merge), as segments in a shuffled order: the table of merged chunks copies exactly
// the bytes the segments name, each once.
TEST(CudnnRnnSegments, TheTableCopiesTheSegmentsBytesEachOnce) {
  std::mt19937_64 random(20261128);
  for (int trial = 0; trial < 20; ++trial) {
    const int count = 1 + static_cast<int>(random() % 40);
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(count));
    for (auto& size : sizes) size = random() % 3 == 0 ? random() % 70000 : random() % 300;
    // The second buffer's order: the blocks cut into runs, the runs reversed.
    std::vector<int> order;
    for (int start = count; start > 0;) {
      const int length = 1 + static_cast<int>(random() % 4);
      const int from = std::max(0, start - length);
      for (int b = from; b < start; ++b) order.push_back(b);
      start = from;
    }
    std::vector<Segment> given(static_cast<std::size_t>(count));
    std::uint64_t first = 0, second = random() % 16;
    for (int b = 0; b < count; ++b) {
      given[static_cast<std::size_t>(b)].first = first;
      given[static_cast<std::size_t>(b)].bytes = sizes[static_cast<std::size_t>(b)];
      first += sizes[static_cast<std::size_t>(b)] + (random() % 5 == 0 ? random() % 32 : 0);
    }
    for (const int b : order) {
      given[static_cast<std::size_t>(b)].second = second;
      second += sizes[static_cast<std::size_t>(b)] + (random() % 5 == 0 ? random() % 32 : 0);
    }
    std::shuffle(given.begin(), given.end(), random);
    const std::vector<Segment> runs = segments::merged(given);
    const std::vector<Segment> table = segments::chunks(runs);
    EXPECT_LE(runs.size(), given.size());
    // Which byte of the first buffer each byte of the second receives, by the segments and by
    // the table; every piece keeps its run's alignment.
    std::vector<std::int64_t> want(second, -1), got(second, -1);
    for (const Segment& s : given)
      for (std::uint64_t i = 0; i < s.bytes; ++i)
        want[s.second + i] = static_cast<std::int64_t>(s.first + i);
    std::uint64_t total = 0, twice = 0;
    for (const Segment& s : table) {
      EXPECT_GT(s.bytes, 0u);
      EXPECT_LE(s.bytes, segments::chunk_bytes);
      total += s.bytes;
      for (std::uint64_t i = 0; i < s.bytes; ++i) {
        if (got[s.second + i] != -1) ++twice;
        got[s.second + i] = static_cast<std::int64_t>(s.first + i);
      }
    }
    EXPECT_EQ(twice, 0u) << "bytes written more than once, trial " << trial;
    for (const Segment& run : runs) {
      const auto piece = std::find_if(table.begin(), table.end(),
                                      [&](const Segment& s) { return s.first == run.first; });
      ASSERT_NE(piece, table.end());
    }
    for (const Segment& s : table) {
      const auto run = std::find_if(runs.begin(), runs.end(), [&](const Segment& r) {
        return r.first <= s.first && s.first < r.first + r.bytes;
      });
      ASSERT_NE(run, runs.end());
      EXPECT_EQ((s.first - run->first) % 16, 0u);
      EXPECT_EQ(s.first - run->first, s.second - run->second);
    }
    EXPECT_EQ(total, std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}));
    EXPECT_TRUE(want == got) << "trial " << trial;
  }
}

// ---- the segment kernels (kernels/segments.cu) on a GPU -----------------------------------------

// Device bytes, freed on scope exit.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBytes() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }
  void upload(const std::vector<unsigned char>& host) const {
    ASSERT_EQ(host.size(), bytes_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

std::vector<unsigned char> pattern(std::size_t bytes, unsigned salt) {
  std::vector<unsigned char> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>((i * 131 + salt) % 251);
  return out;
}

// Sizes around every access width and the chunk size, at offsets of every residue pair modulo 16
// that selects a different width (equal residues: 16 bytes; differing by 8, 4, 2, 1: narrower),
// with gaps between them that must stay untouched.
std::vector<Segment> kernel_segments(std::uint64_t& first_end, std::uint64_t& second_end) {
  const std::uint64_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 31, 33, 100, 4095, 16384, 16385, 40003};
  const std::uint64_t residues[][2] = {{0, 0}, {1, 1}, {2, 2}, {4, 4}, {8, 8}, {0, 8},
                                       {0, 4}, {2, 6}, {1, 0}, {3, 7}, {0, 2}, {14, 6}};
  std::vector<Segment> out;
  std::uint64_t first = 0, second = 0;
  auto place = [](std::uint64_t at, std::uint64_t residue) {
    return (at + 15) / 16 * 16 + residue;
  };
  for (const auto& r : residues) {
    for (const std::uint64_t size : sizes) {
      const Segment s{place(first, r[0]), place(second, r[1]), size};
      out.push_back(s);
      first = s.first + s.bytes + 5;
      second = s.second + s.bytes + 3;
    }
  }
  // A run cut into blocks contiguous in both buffers (merged into one).
  first = place(first, 6);
  second = place(second, 6);
  for (int b = 0; b < 7; ++b) {
    out.push_back({first, second, 7001});
    first += 7001;
    second += 7001;
  }
  first_end = first + 64;
  second_end = second + 64;
  return out;
}

TEST(CudnnSegmentKernels, TableCopiesEveryRangeBothWaysAtAnyAlignment) {
  DNNX_REQUIRE_GPU();
  std::uint64_t first_bytes = 0, second_bytes = 0;
  std::vector<Segment> given = kernel_segments(first_bytes, second_bytes);
  std::shuffle(given.begin(), given.end(), std::mt19937_64(7));
  const std::vector<Segment> table = segments::chunks(segments::merged(given));
  DeviceBytes table_device(table.size() * sizeof(Segment));
  ASSERT_NE(table_device.data(), nullptr);
  ASSERT_EQ(cudaMemcpy(table_device.data(), table.data(), table.size() * sizeof(Segment),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  // The caller's base pointers need not be aligned either.
  const std::uint64_t bases[][2] = {{0, 0}, {3, 0}, {0, 5}, {2, 10}, {8, 8}};
  for (const auto& base : bases) {
    const std::string where = "bases +" + std::to_string(base[0]) + ", +" + std::to_string(base[1]);
    DeviceBytes a(first_bytes + 16), b(second_bytes + 16);
    ASSERT_NE(a.data(), nullptr);
    ASSERT_NE(b.data(), nullptr);
    const std::vector<unsigned char> source = pattern(first_bytes + 16, 1);
    a.upload(source);
    b.upload(std::vector<unsigned char>(second_bytes + 16, 0xEE));
    auto copy_table = [&](bool to_second) {
      ASSERT_EQ(segments::copy_table(reinterpret_cast<const Segment*>(table_device.data()),
                                     static_cast<std::int64_t>(table.size()), a.data() + base[0],
                                     b.data() + base[1], to_second, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
    };
    copy_table(true);
    std::vector<unsigned char> want(second_bytes + 16, 0xEE);
    for (const Segment& s : given)
      for (std::uint64_t i = 0; i < s.bytes; ++i)
        want[base[1] + s.second + i] = source[base[0] + s.first + i];
    EXPECT_TRUE(b.download() == want) << "first -> second, " << where;
    // And back, into a cleared first buffer.
    a.upload(std::vector<unsigned char>(first_bytes + 16, 0x11));
    copy_table(false);
    std::vector<unsigned char> back(first_bytes + 16, 0x11);
    for (const Segment& s : given)
      for (std::uint64_t i = 0; i < s.bytes; ++i)
        back[base[0] + s.first + i] = source[base[0] + s.first + i];
    EXPECT_TRUE(a.download() == back) << "second -> first, " << where;
  }
  EXPECT_EQ(segments::copy_table(nullptr, 0, nullptr, nullptr, true, nullptr), cudaSuccess);
}

TEST(CudnnSegmentKernels, ListCopiesUpToEightRangesInOneLaunch) {
  DNNX_REQUIRE_GPU();
  const std::size_t bytes = 200000;
  DeviceBytes a(bytes), b(bytes);
  ASSERT_NE(a.data(), nullptr);
  ASSERT_NE(b.data(), nullptr);
  const std::vector<unsigned char> source = pattern(bytes, 9);
  a.upload(source);
  b.upload(std::vector<unsigned char>(bytes, 0xEE));
  // {from, to, bytes}: every width, a copy of several chunks, an empty one.
  const std::uint64_t ranges[][3] = {
      {0, 0, 40003},     {50001, 41000, 1},  {50010, 41010, 17},     {60002, 42006, 3001},
      {70000, 46000, 0}, {70100, 46102, 33}, {80000, 47001, 100000}, {190000, 150008, 9000}};
  std::vector<segments::Copy> copies;
  std::vector<unsigned char> want(bytes, 0xEE);
  for (const auto& r : ranges) {
    copies.push_back({a.data() + r[0], b.data() + r[1], r[2]});
    for (std::uint64_t i = 0; i < r[2]; ++i) want[r[1] + i] = source[r[0] + i];
  }
  ASSERT_EQ(copies.size(), static_cast<std::size_t>(segments::max_copies));
  ASSERT_EQ(segments::copy_list(copies.data(), static_cast<int>(copies.size()), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(b.download() == want);
  // Nothing to copy launches nothing; more than max_copies is refused.
  EXPECT_EQ(segments::copy_list(copies.data(), 0, nullptr), cudaSuccess);
  EXPECT_EQ(segments::copy_list(&copies[4], 1, nullptr), cudaSuccess);
  copies.push_back(copies.front());
  EXPECT_EQ(segments::copy_list(copies.data(), static_cast<int>(copies.size()), nullptr),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(b.download() == want);
}

}  // namespace
}  // namespace dnnx::test
