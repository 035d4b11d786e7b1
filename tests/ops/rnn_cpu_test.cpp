// The cpu backend's recurrent layer against the reference (label parity): for every case of the
// table in f32, bf16 and f16 (and cases with dropout between layers), every candidate the
// training forward lists as supported runs a whole step — inference forward, training forward,
// backward w.r.t. the data, backward w.r.t. the weights overwriting and accumulating — with every
// direction's policy fixed to it, each output compared with the reference backend's (candidates of
// the inference forward alone run it with the other directions left to the heuristic); unsupported
// candidates must say why in one of the ways Note [cpu rnn candidates] lists, and the f32 (or
// f32-compute) candidate must run every case. The cases with variable lengths (Note [cpu rnn
// variable lengths]) have them unsorted, repeated, of 1 and of seq_length, all equal to
// seq_length (one group, the caller's tensors) or all equal and shorter. Also the call orders of
// Note [cpu rnn backward] (weights before data refused, repeated backwards, a later forward
// clearing the gradients), an exhaustive selection whose backwards run the training forward's
// candidate, and with variable lengths: the listing, lengths all seq_length giving the results
// of the desc without lengths bit for bit, a backward with other lengths than its forward's
// refused, calls with other lengths on the same plans. The weights cache (Note [rnn weights
// version]): converted once per (address, version).

#include <dnnx/dnnx.hpp>

#include "rnn_cases.hpp"
#include "support/compare.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

namespace dnnx::test {
namespace {

constexpr Direction all_directions[] = {Direction::fwd, Direction::fwd_training,
                                        Direction::bwd_data, Direction::bwd_weights};

Context cpu_context() {
  Context context(BackendKind::cpu);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  return context;
}

Context fixed_context(const std::string& id) {
  Context context = cpu_context();
  for (const Direction direction : all_directions)
    context.tune().policy(OpKind::rnn, direction) = AlgoPolicy::fixed(id);
  return context;
}

// Relative to each element's scale, max(|reference|, the RMS of the reference tensor) (as the
// cudnn test): oneDNN computes in f32 (native bf16 / f16 candidates round each layer's output,
// the states and their gates to the dtype), the reference in f64 from the same rounded inputs.
Tolerance tolerance_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return {2e-2, 1e-4};
    case DType::bf16: return {1e-1, 1e-3};
    default: return {2e-4, 1e-6};
  }
}

bool expected_unsupported(const AlgoInfo& info) {
  for (const char* reason :
       {"has no implementation of", "but not for one sequence",
        "dropout between layers is applied in f32 only", "has no backward of"}) {
    if (info.reason.find(reason) != std::string::npos) return true;
  }
  return false;
}

std::vector<RnnCase> cpu_cases() {
  std::vector<RnnCase> cases = rnn_cases();
  const std::vector<RnnCase> dropout = rnn_dropout_cases();
  cases.insert(cases.end(), dropout.begin(), dropout.end());
  // Variable lengths (Note [cpu rnn variable lengths]); rnn_cases() has more.
  RnnCase full = dropout[1];
  full.name = "gru_bi_2layers_dropout_varlen_all_full";
  full.desc.bidirectional = true;
  full.desc.variable_lengths = true;
  full.lengths = {4, 4, 4};
  cases.push_back(full);
  RnnCase shorter;
  shorter.name = "rnn_relu_batch_first_varlen_all_2_of_4";
  shorter.desc.cell = RnnCell::rnn_relu;
  shorter.desc.seq_length = 4;
  shorter.desc.batch = 2;
  shorter.desc.input_size = 3;
  shorter.desc.hidden_size = 5;
  shorter.desc.batch_first = true;
  shorter.desc.variable_lengths = true;
  shorter.lengths = {2, 2};
  cases.push_back(shorter);
  return cases;
}

struct CpuCase {
  RnnCase c;
  DType dtype;
};

std::vector<CpuCase> cpu_table() {
  std::vector<CpuCase> out;
  for (const RnnCase& c : cpu_cases())
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) out.push_back({c, dtype});
  return out;
}

void expect_close(const RnnStep& got, const RnnStep& expected, DType dtype,
                  const std::string& where) {
  for (const auto& [name, want] : expected.outputs) {
    const Tensor& have = got.outputs.at(name);
    ASSERT_TRUE(all_finite(have, name, where));
    const std::vector<float> w = want.to_f32();
    EXPECT_TRUE(close_within_scale(have.to_f32(), w, rnn_scale_of(w), have.dims(),
                                   tolerance_of(dtype), name, where));
  }
}

class CpuRnn : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuRnn, EveryCandidateMatchesTheReference) {
  const CpuCase& p = GetParam();
  RnnDesc desc = p.c.desc;
  desc.dtype = p.dtype;
  const RnnInputs inputs = rnn_inputs(desc, p.c.lengths, seed_from(p.c.name));
  Context reference = reference_context();
  const RnnStep expected = run_rnn_step(reference, desc, inputs, Generator(1234));
  for (const auto& [name, tensor] : expected.outputs)
    ASSERT_TRUE(all_finite(tensor, "reference " + name, desc.repro()));

  Context base = cpu_context();
  const std::vector<AlgoInfo> training = rnn_list(base, desc, Direction::fwd_training);
  ASSERT_FALSE(training.empty());
  int ran = 0, unsupported = 0, f32_ran = 0;
  for (const AlgoInfo& info : training) {
    const std::string where = info.id + " | " + desc.repro(Direction::fwd_training);
    if (!info.supported) {
      ++unsupported;
      EXPECT_TRUE(expected_unsupported(info))
          << "unexpected reason: " << info.reason << " | " << where;
      continue;
    }
    EXPECT_GT(info.saved_state_bytes, 0U) << where;
    EXPECT_EQ(info.saved_state_format, info.id) << where;
    Context context = fixed_context(info.id);
    RnnStep step;
    try {
      step = run_rnn_step(context, desc, inputs, Generator(1234));
    } catch (const Error& error) {
      ADD_FAILURE() << "candidate failed: " << error.what() << " | " << where;
      continue;
    }
    ++ran;
    const bool f32_compute =
        std::find(info.notes.begin(), info.notes.end(), "f32_compute") != info.notes.end();
    if (desc.dtype == DType::f32 || f32_compute) ++f32_ran;
    for (const auto& [direction, id] : step.ran)
      EXPECT_EQ(id, info.id) << direction << " | " << where;
    expect_close(step, expected, desc.dtype, where);
    if (info.deterministic) {
      const RnnStep again = run_rnn_step(context, desc, inputs, Generator(1234));
      for (const char* name : {"dst", "hy", "dst_inference", "diff_src", "diff_weights"})
        EXPECT_TRUE(bitwise_equal(step.outputs.at(name), again.outputs.at(name), name, where));
    }
  }
  // Candidates of the inference forward alone (a native bf16 forward whose backward oneDNN lacks):
  // the step runs with the inference forward fixed to them.
  int inference_only = 0;
  for (const AlgoInfo& info : rnn_list(base, desc, Direction::fwd)) {
    if (!info.supported) continue;
    const auto trained = std::find_if(training.begin(), training.end(),
                                      [&](const AlgoInfo& t) { return t.id == info.id; });
    if (trained != training.end() && trained->supported) continue;  // ran above
    const std::string where = info.id + " | " + desc.repro(Direction::fwd);
    Context context = cpu_context();
    context.tune().policy(OpKind::rnn, Direction::fwd) = AlgoPolicy::fixed(info.id);
    const RnnStep step = run_rnn_step(context, desc, inputs, Generator(1234));
    EXPECT_EQ(step.ran.at("fwd"), info.id) << where;
    expect_close(step, expected, desc.dtype, where);
    ++inference_only;
  }
  std::cout << "  " << p.c.name << " " << to_string(desc.dtype) << ": " << inference_only
            << " inference-only ran; " << ran << " ran, " << unsupported << " unsupported of "
            << training.size() << ":";
  for (const AlgoInfo& info : training) std::cout << ' ' << info.id;
  std::cout << "\n";
  EXPECT_GE(f32_ran, 1) << "no f32 or f32-compute candidate ran | " << desc.repro();
}

INSTANTIATE_TEST_SUITE_P(Table, CpuRnn, ::testing::ValuesIn(cpu_table()),
                         [](const ::testing::TestParamInfo<CpuCase>& info) {
                           return info.param.c.name + "_" +
                                  std::string(to_string(info.param.dtype));
                         });

RnnDesc order_desc() {
  RnnDesc desc;
  desc.cell = RnnCell::gru;
  desc.seq_length = 5;
  desc.batch = 3;
  desc.input_size = 4;
  desc.hidden_size = 6;
  desc.layers = 2;
  desc.bidirectional = true;
  return desc;
}

struct Buffers {
  Tensor dst, hy, diff_src, diff_hx, diff_weights;
  explicit Buffers(const RnnDesc& desc)
      : dst(Tensor::empty(desc.dst_dims(), desc.dtype)),
        hy(Tensor::empty(desc.state_dims(), desc.dtype)),
        diff_src(Tensor::empty(desc.src_dims(), desc.dtype)),
        diff_hx(Tensor::empty(desc.state_dims(), desc.dtype)),
        diff_weights(Tensor::empty(Dims{desc.weights_count()}, desc.dtype)) {}
};

// Note [cpu rnn backward]: every call order the op allows gives the gradients of the last
// backward w.r.t. the data since the last training forward, or a clear error.
TEST(CpuRnnOrder, BackwardWeightsReadsTheLastBackwardData) {
  const RnnDesc desc = order_desc();
  const RnnInputs a = rnn_inputs(desc, {}, 11);
  const RnnInputs b = rnn_inputs(desc, {}, 12);  // another diff_dst
  Context context = cpu_context();
  Generator generator;
  Buffers out(desc);
  SavedState state;
  const RnnForward forward{&a.src, &a.weights, &a.hx, nullptr, nullptr, &out.dst, &out.hy, nullptr};
  rnn_fwd_training(context, desc, generator, forward, state);
  RnnBackwardWeights weights{&a.src,   &a.weights,        &a.hx, nullptr, nullptr,
                             &out.dst, &out.diff_weights, false};
  // Before any backward w.r.t. the data: refused.
  expect_error(ErrorKind::InvalidArgument, {"rnn_bwd_data", "no weight gradients"},
               [&] { rnn_bwd_weights(context, desc, weights, state); });
  auto backward_data = [&](const RnnInputs& grads) {
    const RnnBackwardData data{&a.src,  &a.weights,    &a.hx,           nullptr,
                               nullptr, &out.dst,      &grads.diff_dst, &grads.diff_hy,
                               nullptr, &out.diff_src, &out.diff_hx,    nullptr};
    rnn_bwd_data(context, desc, data, state);
  };
  // The reference's gradients for diff_dst of `grads`.
  auto expected_weights = [&](const RnnInputs& grads) {
    RnnInputs mixed = a;
    mixed.diff_dst = grads.diff_dst;
    mixed.diff_hy = grads.diff_hy;
    Context reference = reference_context();
    return run_rnn_step(reference, desc, mixed).outputs.at("diff_weights");
  };
  backward_data(a);
  backward_data(b);  // a second backward replaces the gradients
  rnn_bwd_weights(context, desc, weights, state);
  Tensor first = Tensor::empty(out.diff_weights.dims(), desc.dtype);
  copy(out.diff_weights, first);
  rnn_bwd_weights(context, desc, weights, state);  // repeatable
  EXPECT_TRUE(bitwise_equal(first, out.diff_weights, "diff_weights", "second bwd_weights"));
  const std::vector<float> want = expected_weights(b).to_f32();
  EXPECT_TRUE(close_within_scale(first.to_f32(), want, rnn_scale_of(want), first.dims(),
                                 tolerance_of(DType::f32), "diff_weights", "after two bwd_data"));
  // Accumulating adds the same gradients once more.
  weights.accumulate = true;
  rnn_bwd_weights(context, desc, weights, state);
  const std::vector<float> got = out.diff_weights.to_f32();
  const std::vector<float> once = first.to_f32();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], once[i] + once[i]) << i;
  // A new training forward clears the gradients.
  rnn_fwd_training(context, desc, generator, forward, state);
  expect_error(ErrorKind::InvalidArgument, {"rnn_bwd_data"},
               [&] { rnn_bwd_weights(context, desc, weights, state); });
}

TEST(CpuRnnOrder, BackwardRefusesAStateOfAnotherBackend) {
  const RnnDesc desc = order_desc();
  const RnnInputs a = rnn_inputs(desc, {}, 13);
  Context reference = reference_context();
  Context context = cpu_context();
  Generator generator;
  Buffers out(desc);
  SavedState state;
  const RnnForward forward{&a.src, &a.weights, &a.hx, nullptr, nullptr, &out.dst, &out.hy, nullptr};
  rnn_fwd_training(reference, desc, generator, forward, state);
  const RnnBackwardData data{&a.src,  &a.weights,    &a.hx,        nullptr,
                             nullptr, &out.dst,      &a.diff_dst,  &a.diff_hy,
                             nullptr, &out.diff_src, &out.diff_hx, nullptr};
  try {
    rnn_bwd_data(context, desc, data, state);
    ADD_FAILURE() << "a cpu backward ran on the reference's state";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("rnn_reference"), std::string::npos) << error.what();
  }
}

TEST(CpuRnnSelection, ExhaustiveTrainingForwardThenBackwardsOfItsCandidate) {
  RnnDesc desc = order_desc();
  desc.cell = RnnCell::lstm;
  desc.dtype = DType::bf16;
  const RnnInputs inputs = rnn_inputs(desc, {}, 77);
  Context context = cpu_context();
  for (const Direction direction : all_directions)
    context.tune().policy(OpKind::rnn, direction) = AlgoPolicy::exhaustive();
  const RnnStep step = run_rnn_step(context, desc, inputs);
  EXPECT_EQ(step.ran.at("bwd_data"), step.ran.at("fwd_training"));
  EXPECT_EQ(step.ran.at("bwd_weights"), step.ran.at("fwd_training"));
  Context reference = reference_context();
  expect_close(step, run_rnn_step(reference, desc, inputs), desc.dtype, desc.repro());
}

RnnDesc varlen_desc() {
  RnnDesc desc = order_desc();
  desc.cell = RnnCell::lstm;
  desc.seq_length = 6;
  desc.batch = 5;
  desc.variable_lengths = true;
  return desc;
}

// Note [cpu rnn variable lengths]: the candidates of the desc without lengths, sized for any
// lengths.
TEST(CpuRnnVariableLengths, ListedAsTheDescWithoutLengthsGroupedByLength) {
  const RnnDesc desc = varlen_desc();
  RnnDesc fixed = desc;
  fixed.variable_lengths = false;
  Context context = cpu_context();
  for (const Direction direction : all_directions) {
    const std::vector<AlgoInfo> list = rnn_list(context, desc, direction);
    const std::vector<AlgoInfo> without = rnn_list(context, fixed, direction);
    ASSERT_FALSE(list.empty());
    ASSERT_TRUE(list.front().supported) << list.front().id << ": " << list.front().reason;
    for (const AlgoInfo& info : list) {
      if (!info.supported) continue;
      EXPECT_NE(std::find(info.notes.begin(), info.notes.end(), "grouped_by_length"),
                info.notes.end())
          << info.id;
      const auto same = std::find_if(without.begin(), without.end(),
                                     [&](const AlgoInfo& w) { return w.id == info.id; });
      ASSERT_NE(same, without.end()) << info.id;
      // The gathered tensors come on top of the whole batch's workspace; the groups' states on
      // top of the call's.
      if (direction != Direction::bwd_weights) {
        EXPECT_GT(info.workspace_bytes, same->workspace_bytes) << info.id;
      }
      if (direction == Direction::fwd_training) {
        EXPECT_GT(info.saved_state_bytes, same->saved_state_bytes) << info.id;
      }
    }
  }
}

struct VarlenCall {
  RnnDesc desc;
  RnnInputs in;
  Tensor dst, hy, cy, diff_src, diff_hx, diff_cx, diff_weights;
  VarlenCall(const RnnDesc& d, const std::vector<std::int32_t>& lengths, std::uint64_t seed)
      : desc(d),
        in(rnn_inputs(d, lengths, seed)),
        dst(Tensor::empty(d.dst_dims(), d.dtype)),
        hy(Tensor::empty(d.state_dims(), d.dtype)),
        cy(Tensor::empty(d.state_dims(), d.dtype)),
        diff_src(Tensor::empty(d.src_dims(), d.dtype)),
        diff_hx(Tensor::empty(d.state_dims(), d.dtype)),
        diff_cx(Tensor::empty(d.state_dims(), d.dtype)),
        diff_weights(Tensor::empty(Dims{d.weights_count()}, d.dtype)) {}
  const Tensor* lengths() const { return desc.variable_lengths ? &in.lengths : nullptr; }
  void forward(Context& context, SavedState& state) {
    Generator generator(5);
    const RnnForward f{&in.src, &in.weights, &in.hx, &in.cx, lengths(), &dst, &hy, &cy};
    rnn_fwd_training(context, desc, generator, f, state);
  }
  void backward(Context& context, SavedState& state, const Tensor* other_lengths = nullptr) {
    const Tensor* l = other_lengths != nullptr ? other_lengths : lengths();
    const RnnBackwardData data{&in.src,     &in.weights, &in.hx,       &in.cx,
                               l,           &dst,        &in.diff_dst, &in.diff_hy,
                               &in.diff_cy, &diff_src,   &diff_hx,     &diff_cx};
    rnn_bwd_data(context, desc, data, state);
    const RnnBackwardWeights weights{&in.src, &in.weights, &in.hx,        &in.cx,
                                     l,       &dst,        &diff_weights, false};
    rnn_bwd_weights(context, desc, weights, state);
  }
};

// Lengths all seq_length: one group on the caller's tensors, the results of the desc without
// lengths bit for bit.
TEST(CpuRnnVariableLengths, AllFullLengthIsTheDescWithoutLengths) {
  RnnDesc desc = varlen_desc();
  desc.dropout = 0.3f;
  RnnDesc fixed = desc;
  fixed.variable_lengths = false;
  Context context = cpu_context();
  VarlenCall with(desc, std::vector<std::int32_t>(5, 6), 21);
  VarlenCall without(fixed, {}, 21);
  SavedState a, b;
  with.forward(context, a);
  without.forward(context, b);
  with.backward(context, a);
  without.backward(context, b);
  for (const auto& [name, x, y] :
       {std::tuple{"dst", &with.dst, &without.dst}, std::tuple{"hy", &with.hy, &without.hy},
        std::tuple{"cy", &with.cy, &without.cy},
        std::tuple{"diff_src", &with.diff_src, &without.diff_src},
        std::tuple{"diff_hx", &with.diff_hx, &without.diff_hx},
        std::tuple{"diff_cx", &with.diff_cx, &without.diff_cx},
        std::tuple{"diff_weights", &with.diff_weights, &without.diff_weights}}) {
    EXPECT_TRUE(bitwise_equal(*x, *y, name, desc.repro()));
  }
}

// Sequence n's steps 0 .. steps-1 of a {T, N, C} tensor (or {N, T, C} with batch_first) of
// `from_desc` into sequence m of `to` (of `to_desc`), bytes as they are.
void copy_steps(const Tensor& from, const RnnDesc& from_desc, std::int64_t n, Tensor& to,
                const RnnDesc& to_desc, std::int64_t m, std::int64_t steps, std::int64_t C) {
  const std::size_t row = static_cast<std::size_t>(C) * size_of(from_desc.dtype);
  auto at = [](const RnnDesc& d, std::int64_t t, std::int64_t b) {
    return static_cast<std::size_t>(d.batch_first ? b * d.seq_length + t : t * d.batch + b);
  };
  for (std::int64_t t = 0; t < steps; ++t) {
    std::memcpy(static_cast<std::byte*>(to.data()) + at(to_desc, t, m) * row,
                static_cast<const std::byte*>(from.data()) + at(from_desc, t, n) * row, row);
  }
}
// Sequence n's rows of a {layers * D, N, H} state into sequence m's of `to` (batch to_batch).
void copy_rows(const Tensor& from, const RnnDesc& from_desc, std::int64_t n, Tensor& to,
               std::int64_t to_batch, std::int64_t m) {
  const std::size_t row =
      static_cast<std::size_t>(from_desc.hidden_size) * size_of(from_desc.dtype);
  for (std::int64_t k = 0; k < from_desc.layers * from_desc.directions(); ++k) {
    std::memcpy(
        static_cast<std::byte*>(to.data()) + static_cast<std::size_t>(k * to_batch + m) * row,
        static_cast<const std::byte*>(from.data()) +
            static_cast<std::size_t>(k * from_desc.batch + n) * row,
        row);
  }
}

// Note [cpu rnn variable lengths]: with every length distinct, each group is one sequence run as
// a batch of its own (the groups binding the call's weights, converted once): each sequence's
// outputs and data gradients are, bit for bit, those of the desc of batch 1 and its length.
TEST(CpuRnnVariableLengths, EachSequenceIsItsOwnBatchBitForBit) {
  for (const bool batch_first : {false, true}) {
    RnnDesc desc = varlen_desc();
    desc.batch_first = batch_first;
    const std::vector<std::int32_t> lengths{6, 2, 4, 1, 3};
    Context context = cpu_context();
    VarlenCall call(desc, lengths, 23);
    SavedState state;
    call.forward(context, state);
    call.backward(context, state);
    const std::int64_t C = desc.directions() * desc.hidden_size;
    for (std::int64_t n = 0; n < desc.batch; ++n) {
      RnnDesc one = desc;
      one.variable_lengths = false;
      one.batch = 1;
      one.seq_length = lengths[static_cast<std::size_t>(n)];
      VarlenCall single(one, {}, 24);
      std::memcpy(single.in.weights.data(), call.in.weights.data(), call.in.weights.span_bytes());
      copy_steps(call.in.src, desc, n, single.in.src, one, 0, one.seq_length, desc.input_size);
      copy_steps(call.in.diff_dst, desc, n, single.in.diff_dst, one, 0, one.seq_length, C);
      copy_rows(call.in.hx, desc, n, single.in.hx, 1, 0);
      copy_rows(call.in.cx, desc, n, single.in.cx, 1, 0);
      copy_rows(call.in.diff_hy, desc, n, single.in.diff_hy, 1, 0);
      copy_rows(call.in.diff_cy, desc, n, single.in.diff_cy, 1, 0);
      SavedState alone;
      single.forward(context, alone);
      single.backward(context, alone);
      const std::string where =
          one.repro() + " as sequence " + std::to_string(n) + " of " + desc.repro();
      for (const auto& [name, whole, mine, stepped] :
           {std::tuple{"dst", &call.dst, &single.dst, C},
            std::tuple{"diff_src", &call.diff_src, &single.diff_src, desc.input_size}}) {
        Tensor part = Tensor::empty(mine->dims(), desc.dtype);
        copy_steps(*whole, desc, n, part, one, 0, one.seq_length, stepped);
        EXPECT_TRUE(bitwise_equal(part, *mine, name, where));
      }
      for (const auto& [name, whole, mine] :
           {std::tuple{"hy", &call.hy, &single.hy}, std::tuple{"cy", &call.cy, &single.cy},
            std::tuple{"diff_hx", &call.diff_hx, &single.diff_hx},
            std::tuple{"diff_cx", &call.diff_cx, &single.diff_cx}}) {
        Tensor part = Tensor::empty(mine->dims(), desc.dtype);
        copy_rows(*whole, desc, n, part, 1, 0);
        EXPECT_TRUE(bitwise_equal(part, *mine, name, where));
      }
    }
  }
}

TEST(CpuRnnVariableLengths, BackwardWithOtherLengthsIsRefused) {
  const RnnDesc desc = varlen_desc();
  Context context = cpu_context();
  VarlenCall call(desc, {6, 2, 4, 1, 4}, 22);
  SavedState state;
  call.forward(context, state);
  Tensor other = Tensor::empty(Dims{desc.batch}, DType::i32);
  auto* values = static_cast<std::int32_t*>(other.data());
  for (std::int32_t n = 0; n < 5; ++n)
    values[n] = static_cast<const std::int32_t*>(call.in.lengths.data())[n];
  values[3] = 2;
  expect_error(ErrorKind::InvalidArgument, {"lengths[3] is 2", "ran with 1"},
               [&] { call.backward(context, state, &other); });
}

// One context (one plan per candidate and direction) through calls of other lengths, each
// against the reference.
TEST(CpuRnnVariableLengths, CallsWithOtherLengthsReuseThePlans) {
  RnnDesc desc = varlen_desc();
  desc.bidirectional = true;
  desc.batch_first = true;
  Context context = cpu_context();
  Context reference = reference_context();
  for (const std::vector<std::int32_t>& lengths :
       {std::vector<std::int32_t>{6, 2, 4, 1, 4}, std::vector<std::int32_t>{1, 1, 1, 1, 1},
        std::vector<std::int32_t>{6, 2, 4, 1, 4}, std::vector<std::int32_t>{5, 6, 5, 6, 3}}) {
    const RnnInputs inputs = rnn_inputs(desc, lengths, 30 + lengths[0]);
    const std::string where = desc.repro() + " lengths " + std::to_string(lengths[0]) + "...";
    expect_close(run_rnn_step(context, desc, inputs), run_rnn_step(reference, desc, inputs),
                 desc.dtype, where);
  }
}

// Note [rnn weights version]: every plan converts the weights (Note [cpu rnn weights]); with a
// version it converts once per (address, version), so a call promising unchanged weights that
// did change gives the previous weights' results bit for bit, and a new version or none follows
// the weights. Fixed lengths and grouped variable lengths, f32 and f32 compute.
TEST(CpuRnnWeightsVersion, ConvertsOncePerAddressAndVersion) {
  RnnDesc lstm = order_desc();
  lstm.cell = RnnCell::lstm;
  lstm.bidirectional = true;
  lstm.layers = 2;
  RnnDesc grouped = varlen_desc();
  grouped.dtype = DType::bf16;
  const std::vector<std::int32_t> lengths = {6, 2, 4, 1, 4};
  Context reference = reference_context();
  int ran = 0;
  for (const RnnDesc& desc : {lstm, grouped}) {
    const RnnInputs inputs =
        rnn_inputs(desc, desc.variable_lengths ? lengths : std::vector<std::int32_t>{},
                   seed_from("weights version"));
    const Tensor second = rnn_inputs(desc, {}, seed_from("second weights")).weights;
    const auto expected = run_rnn_weight_versions(reference, desc, inputs, inputs.weights, second);
    Context base = cpu_context();
    for (const AlgoInfo& info : rnn_list(base, desc, Direction::fwd_training)) {
      if (!info.supported) continue;
      const std::string where = info.id + " | " + desc.repro(Direction::fwd_training);
      Context context = fixed_context(info.id);
      const auto got = run_rnn_weight_versions(context, desc, inputs, inputs.weights, second);
      ++ran;
      for (const char* output : {"dst_", "diff_src_"}) {
        const std::string prefix = output;
        EXPECT_TRUE(bitwise_equal(got.at(prefix + "stale"), got.at(prefix + "first"),
                                  prefix + "stale", where))
            << "the same version after a write must reuse the converted weights";
        for (const char* call : {"first", "second", "unknown"}) {
          const std::string name = prefix + call;
          const std::vector<float> want = expected.at(name).to_f32();
          EXPECT_TRUE(close_within_scale(got.at(name).to_f32(), want, rnn_scale_of(want),
                                         expected.at(name).dims(), tolerance_of(desc.dtype), name,
                                         where));
        }
      }
    }
  }
  EXPECT_GE(ran, 2);
}

TEST(CpuRnnListing, CandidatesCarryWorkspaceAndState) {
  RnnDesc desc = order_desc();
  Context context = cpu_context();
  for (const Direction direction : all_directions) {
    const std::vector<AlgoInfo> list = rnn_list(context, desc, direction);
    ASSERT_FALSE(list.empty());
    const AlgoInfo& first = list.front();
    EXPECT_TRUE(first.supported) << first.id << ": " << first.reason;
    EXPECT_EQ(first.id.rfind("onednn:", 0), 0U) << first.id;
    EXPECT_NE(first.id.find(":lbr_gru"), std::string::npos) << first.id;
    // f32 bwd_weights only copies the gradients out of the state: no workspace.
    if (direction != Direction::bwd_weights) {
      EXPECT_GT(first.workspace_bytes, 0U) << first.id;
    }
    if (direction == Direction::fwd) {
      EXPECT_TRUE(first.saved_state_format.empty());
    }
    if (direction != Direction::fwd) {
      EXPECT_EQ(first.saved_state_format, first.id);
    }
  }
}

}  // namespace
}  // namespace dnnx::test
