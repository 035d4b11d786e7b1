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
// that select the algorithm of the state it filled, and a backward refusing a state of another
// algorithm. Every test skips with the reason when no usable GPU is present.

#include <dnnx/dnnx.hpp>

#include "rnn_cases.hpp"
#include "support/compare.hpp"
#include "support/errors.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
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

std::vector<RnnCase> gpu_cases() {
  std::vector<RnnCase> cases = rnn_cases();
  RnnCase persistent;
  persistent.name = "lstm_h128_2layers";
  persistent.desc.cell = RnnCell::lstm;
  persistent.desc.seq_length = 9;
  persistent.desc.batch = 8;
  persistent.desc.input_size = 64;
  persistent.desc.hidden_size = 128;
  persistent.desc.layers = 2;
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
    const Tolerance tolerance = tolerance_of(desc.dtype, tf32);
    for (const auto& [name, want] : expected.outputs) {
      const Tensor& got = step.outputs.at(name);
      ASSERT_TRUE(all_finite(got, name, where));
      const std::vector<float> w = want.to_f32();
      EXPECT_TRUE(
          close_within_scale(got.to_f32(), w, rnn_scale_of(w), got.dims(), tolerance, name, where));
    }
    if (info.deterministic) {
      const RnnStep again = run_rnn_step(context, desc, inputs);
      for (const char* name : {"dst", "hy", "dst_inference"})
        EXPECT_TRUE(bitwise_equal(step.outputs.at(name), again.outputs.at(name), name, where));
    }
  }
  std::cout << "  " << g.c.name << " " << to_string(desc.dtype) << ": " << ran << " ran, "
            << unsupported << " unsupported of " << training.size() << "\n";
  // cuDNN's standard algorithm takes every configuration of f32 and f16 (bf16: where cuDNN has it).
  if (desc.dtype != DType::bf16) EXPECT_GE(standard_ran, 1) << desc.repro(Direction::fwd_training);
  RecordProperty("candidates_run", ran);
  RecordProperty("candidates_unsupported", unsupported);
}

INSTANTIATE_TEST_SUITE_P(Table, CudnnRnn, ::testing::ValuesIn(gpu_table()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           return info.param.c.name + "_" +
                                  std::string(to_string(info.param.dtype));
                         });

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

}  // namespace
}  // namespace dnnx::test
