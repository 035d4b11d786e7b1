// The recurrent layer on the reference backend (label unit): the desc (weight layout, shapes,
// repro), the reference checked against finite differences of its own forward for every cell,
// semantics that need no oracle (a padded sequence computes what it computes alone, a missing hx
// is zeros, accumulation, dropout masks drawn from the generator and reused by the backward), the
// saved-state protocol, the listing, and bad inputs with their messages. The reference against
// PyTorch is tests/python/torch_rnn_parity.py; the cudnn backend against the reference is
// tests/backends/cudnn_rnn_test.cpp.

#include <dnnx/dnnx.hpp>

#include "rnn_cases.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

RnnDesc small(RnnCell cell, std::int64_t layers = 1, bool bidirectional = false) {
  RnnDesc d;
  d.cell = cell;
  d.seq_length = 4;
  d.batch = 2;
  d.input_size = 3;
  d.hidden_size = 5;
  d.layers = layers;
  d.bidirectional = bidirectional;
  return d;
}

std::vector<float> values(const Tensor& t) { return t.to_f32(); }

TEST(RnnDesc, WeightLayoutIsPyTorchsFlatOrder) {
  RnnDesc d = small(RnnCell::lstm, 2, true);
  const std::int64_t G = 4, H = 5;
  // Layer 0: in = 3; layer 1: in = 2H = 10; each direction w_ih, w_hh, b_ih, b_hh.
  const std::int64_t l0 = G * H * (3 + H + 2), l1 = G * H * (10 + H + 2);
  EXPECT_EQ(d.weights_count(), 2 * l0 + 2 * l1);
  EXPECT_EQ(d.weight_offset(0, 0, RnnWeight::w_ih), 0);
  EXPECT_EQ(d.weight_offset(0, 0, RnnWeight::w_hh), G * H * 3);
  EXPECT_EQ(d.weight_offset(0, 0, RnnWeight::b_ih), G * H * (3 + H));
  EXPECT_EQ(d.weight_offset(0, 0, RnnWeight::b_hh), G * H * (3 + H + 1));
  EXPECT_EQ(d.weight_offset(0, 1, RnnWeight::w_ih), l0);
  EXPECT_EQ(d.weight_offset(1, 0, RnnWeight::w_ih), 2 * l0);
  EXPECT_EQ(d.weight_offset(1, 1, RnnWeight::b_hh), 2 * l0 + l1 + G * H * (10 + H + 1));
  EXPECT_EQ(d.weight_dims(1, 0, RnnWeight::w_ih), (Dims{G * H, 10}));
  EXPECT_EQ(d.weight_dims(0, 1, RnnWeight::b_ih), (Dims{G * H}));
  d.bias = false;
  EXPECT_EQ(d.weights_count(), 2 * G * H * (3 + H) + 2 * G * H * (10 + H));
  expect_error(ErrorKind::InvalidArgument, {"b_ih", "bias = false"},
               [&] { d.weight_offset(0, 0, RnnWeight::b_ih); });
  expect_error(ErrorKind::InvalidArgument, {"layer", "got 2"},
               [&] { d.weight_offset(2, 0, RnnWeight::w_ih); });
  EXPECT_EQ(small(RnnCell::gru).gates(), 3);
  EXPECT_EQ(small(RnnCell::rnn_relu).weights_count(), 5 * (3 + 5 + 2));
}

TEST(RnnDesc, ShapesReproAndViews) {
  RnnDesc d = small(RnnCell::gru, 1, true);
  EXPECT_EQ(d.src_dims(), (Dims{4, 2, 3}));
  EXPECT_EQ(d.dst_dims(), (Dims{4, 2, 10}));
  EXPECT_EQ(d.state_dims(), (Dims{2, 2, 5}));
  d.batch_first = true;
  EXPECT_EQ(d.src_dims(), (Dims{2, 4, 3}));
  d.dtype = DType::f16;
  d.variable_lengths = true;
  EXPECT_EQ(d.repro(Direction::bwd_weights),
            "dnnx profile rnn --cell gru --seq 4 --batch 2 --input 3 --hidden 5 --layers 1 "
            "--bidirectional --batch-first --variable-lengths --dtype f16 --direction bwd_weights");
  const Tensor weights =
      random_tensor(Dims{d.weights_count()}, DType::f16, Layout::channels_first, 1);
  const Tensor view = rnn_weight_view(d, weights, 0, 1, RnnWeight::w_hh);
  EXPECT_EQ(view.dims(), (Dims{15, 5}));
  EXPECT_EQ(
      static_cast<const std::byte*>(view.data()) - static_cast<const std::byte*>(weights.data()),
      d.weight_offset(0, 1, RnnWeight::w_hh) * 2);
  EXPECT_EQ(parse_rnn_cell("tanh"), RnnCell::rnn_tanh);
  expect_error(ErrorKind::InvalidArgument, {"rnn cell", "'elman'", "lstm"},
               [] { parse_rnn_cell("elman"); });
}

TEST(RnnReference, ListsOneCandidateWithItsSavedState) {
  Context context = reference_context();
  const RnnDesc d = small(RnnCell::lstm);
  for (const Direction direction :
       {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
    const std::vector<AlgoInfo> list = rnn_list(context, d, direction);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].id, "reference:direct");
    EXPECT_TRUE(list[0].supported);
    EXPECT_EQ(list[0].saved_state_format.empty(), direction == Direction::fwd);
    EXPECT_EQ(list[0].saved_state_bytes > 0, direction == Direction::fwd_training);
  }
}

// L = sum(dst * diff_dst) + sum(hy * diff_hy) + sum(cy * diff_cy) from an inference forward.
double loss(Context& context, const RnnDesc& d, const RnnInputs& in) {
  const bool lstm = d.cell == RnnCell::lstm;
  Tensor dst = Tensor::empty(d.dst_dims(), d.dtype), hy = Tensor::empty(d.state_dims(), d.dtype);
  Tensor cy = lstm ? Tensor::empty(d.state_dims(), d.dtype) : Tensor();
  const Tensor* lengths = d.variable_lengths ? &in.lengths : nullptr;
  RnnForward f{&in.src, &in.weights, &in.hx, lstm ? &in.cx : nullptr,
               lengths, &dst,        &hy,    lstm ? &cy : nullptr};
  rnn_fwd(context, d, f);
  double sum = 0;
  auto add = [&](const Tensor& a, const Tensor& b) {
    const std::vector<float> x = values(a), y = values(b);
    for (std::size_t i = 0; i < x.size(); ++i) sum += double{x[i]} * y[i];
  };
  add(dst, in.diff_dst);
  add(hy, in.diff_hy);
  if (lstm) add(cy, in.diff_cy);
  return sum;
}

// Central differences of loss() in f64 inputs stored as f32: a handful of coordinates of src,
// hx and the weights per case, each within 2% (+ 1e-3) of the analytic gradient.
class RnnFiniteDifferences : public ::testing::TestWithParam<RnnCase> {};

TEST_P(RnnFiniteDifferences, GradientsMatch) {
  const RnnCase& c = GetParam();
  const RnnDesc& d = c.desc;
  const RnnInputs in = rnn_inputs(d, c.lengths, seed_from(c.name));
  Context context = reference_context();
  const RnnStep step = run_rnn_step(context, d, in);
  struct Probe {
    const char* input;
    const char* gradient;
    Tensor tensor;
  };
  std::vector<Probe> probes = {{"src", "diff_src", in.src},
                               {"hx", "diff_hx", in.hx},
                               {"weights", "diff_weights", in.weights}};
  if (d.cell == RnnCell::lstm) probes.push_back({"cx", "diff_cx", in.cx});
  for (Probe& probe : probes) {
    const std::vector<float> gradient = values(step.outputs.at(probe.gradient));
    const std::int64_t count = probe.tensor.numel();
    for (int k = 0; k < 6; ++k) {
      const std::int64_t i = (k * 7919 + 13) % count;
      std::vector<float> v = values(probe.tensor);
      const float x = v[static_cast<std::size_t>(i)];
      const float h = 1.0f / 128;  // exact in f32: x +- h rounds only where |x| >= 2^17 h
      RnnInputs moved = in;
      Tensor& target = std::string(probe.input) == "src"  ? moved.src
                       : std::string(probe.input) == "hx" ? moved.hx
                       : std::string(probe.input) == "cx" ? moved.cx
                                                          : moved.weights;
      target = Tensor::empty(probe.tensor.dims(), d.dtype);
      v[static_cast<std::size_t>(i)] = x + h;
      target.copy_from_f32(v);
      const double up = loss(context, d, moved);
      v[static_cast<std::size_t>(i)] = x - h;
      target.copy_from_f32(v);
      const double down = loss(context, d, moved);
      const double numeric = (up - down) / (2.0 * h);
      const double analytic = gradient[static_cast<std::size_t>(i)];
      EXPECT_NEAR(analytic, numeric, 0.02 * std::abs(numeric) + 1e-3)
          << c.name << ": d loss / d " << probe.input << "[" << i << "] | " << d.repro();
    }
  }
  // Accumulation adds the same gradient to the previous contents.
  const std::vector<float> set = values(step.outputs.at("diff_weights"));
  const std::vector<float> acc = values(step.outputs.at("diff_weights_acc"));
  const std::vector<float> old = values(in.diff_weights0);
  for (std::size_t i = 0; i < set.size(); ++i)
    ASSERT_NEAR(acc[i], set[i] + old[i], 1e-6 * (std::abs(set[i]) + std::abs(old[i]) + 1)) << i;
  // The inference forward computes what the training forward does (no dropout).
  for (const char* name : {"dst", "hy"}) {
    EXPECT_EQ(values(step.outputs.at(name)),
              values(step.outputs.at(std::string(name) + "_inference")))
        << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, RnnFiniteDifferences, ::testing::ValuesIn(rnn_cases()),
                         [](const ::testing::TestParamInfo<RnnCase>& info) {
                           return info.param.name;
                         });

// A sequence of a padded batch computes what it computes alone (batch 1, T = its length), dst
// past its end is 0, and its final state is taken at its own end.
TEST(RnnReference, PaddedSequenceMatchesItsOwnRun) {
  RnnDesc d = small(RnnCell::gru, 2, true);
  d.batch = 3;
  d.variable_lengths = true;
  const std::vector<std::int32_t> lengths = {2, 4, 1};
  const RnnInputs in = rnn_inputs(d, lengths, 11);
  Context context = reference_context();
  const RnnStep step = run_rnn_step(context, d, in);
  const std::vector<float> dst = values(step.outputs.at("dst"));
  const std::vector<float> hy = values(step.outputs.at("hy"));
  const std::int64_t DH = 2 * d.hidden_size, H = d.hidden_size;
  for (std::int64_t n = 0; n < d.batch; ++n) {
    RnnDesc alone = d;
    alone.batch = 1;
    alone.seq_length = lengths[static_cast<std::size_t>(n)];
    alone.variable_lengths = false;
    auto slice = [&](const Tensor& t, std::int64_t rows, std::int64_t width, bool per_step) {
      const std::vector<float> v = values(t);
      std::vector<float> out;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < width; ++c)
          out.push_back(v[static_cast<std::size_t>((r * d.batch + n) * width + c)]);
      (void)per_step;
      return out;
    };
    RnnInputs one;
    one.src = tensor_from(alone.src_dims(), d.dtype, Layout::channels_first,
                          slice(in.src, alone.seq_length, d.input_size, true));
    one.weights = in.weights;
    one.hx =
        tensor_from(alone.state_dims(), d.dtype, Layout::channels_first, slice(in.hx, 4, H, false));
    Tensor out = Tensor::empty(alone.dst_dims(), d.dtype);
    Tensor out_hy = Tensor::empty(alone.state_dims(), d.dtype);
    RnnForward f{&one.src, &one.weights, &one.hx, nullptr, nullptr, &out, &out_hy, nullptr};
    rnn_fwd(context, alone, f);
    const std::vector<float> want = values(out), want_hy = values(out_hy);
    for (std::int64_t t = 0; t < d.seq_length; ++t) {
      for (std::int64_t c = 0; c < DH; ++c) {
        const float got = dst[static_cast<std::size_t>((t * d.batch + n) * DH + c)];
        if (t < alone.seq_length)
          EXPECT_EQ(got, want[static_cast<std::size_t>(t * DH + c)]) << n << " " << t << " " << c;
        else
          EXPECT_EQ(got, 0.0f) << "dst past the end of sequence " << n << " at step " << t;
      }
    }
    for (std::int64_t ld = 0; ld < 4; ++ld)
      for (std::int64_t j = 0; j < H; ++j)
        EXPECT_EQ(hy[static_cast<std::size_t>((ld * d.batch + n) * H + j)],
                  want_hy[static_cast<std::size_t>(ld * H + j)]);
  }
}

TEST(RnnReference, MissingInitialStatesAreZeros) {
  const RnnDesc d = small(RnnCell::lstm);
  RnnInputs in = rnn_inputs(d, {}, 3);
  Context context = reference_context();
  const Tensor zeros =
      tensor_from(d.state_dims(), d.dtype, Layout::channels_first,
                  std::vector<float>(static_cast<std::size_t>(d.state_dims().product()), 0.0f));
  Tensor a = Tensor::empty(d.dst_dims(), d.dtype), b = Tensor::empty(d.dst_dims(), d.dtype);
  RnnForward with{&in.src, &in.weights, &zeros, &zeros, nullptr, &a, nullptr, nullptr};
  RnnForward without{&in.src, &in.weights, nullptr, nullptr, nullptr, &b, nullptr, nullptr};
  rnn_fwd(context, d, with);
  rnn_fwd(context, d, without);
  EXPECT_EQ(values(a), values(b));
}

// Weights and weight gradients one element into a buffer (run_rnn_step's weight_shift, which the
// cudnn test uses to reach its weight conversion at any alignment) give the same step, bit for bit.
TEST(RnnReference, WeightsAtAnyElementAlignmentGiveTheSameStep) {
  for (const DType dtype : {DType::f32, DType::f16}) {
    RnnDesc d = small(RnnCell::gru, 2, true);
    d.dtype = dtype;
    const RnnInputs in = rnn_inputs(d, {}, 11);
    Context context = reference_context();
    const RnnStep aligned = run_rnn_step(context, d, in);
    const RnnStep shifted = run_rnn_step(context, d, in, Generator(), 1);
    ASSERT_EQ(aligned.outputs.size(), shifted.outputs.size());
    for (const auto& [name, tensor] : aligned.outputs)
      EXPECT_EQ(values(tensor), values(shifted.outputs.at(name)))
          << name << " " << to_string(dtype);
  }
}

// Dropout between layers: the training forward draws its masks from the generator (the same
// state gives the same dst; the generator advances by ceil(draws / 4) blocks), the inference
// forward has none, and the backward reuses the forward's masks (its gradient matches finite
// differences of the training forward run again from the same generator state).
TEST(RnnReference, DropoutMasksComeFromTheGeneratorAndFeedTheBackward) {
  RnnDesc d = small(RnnCell::rnn_tanh, 2);
  d.dropout = 0.5f;
  const RnnInputs in = rnn_inputs(d, {}, 5);
  Context context = reference_context();
  auto training_loss = [&](const Tensor& src, Generator generator, Tensor* dst_out) {
    Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
    SavedState state;
    RnnForward f{&src, &in.weights, &in.hx, nullptr, nullptr, &dst, nullptr, nullptr};
    rnn_fwd_training(context, d, generator, f, state);
    if (dst_out != nullptr) *dst_out = dst;
    double sum = 0;
    const std::vector<float> x = values(dst), y = values(in.diff_dst);
    for (std::size_t i = 0; i < x.size(); ++i) sum += double{x[i]} * y[i];
    return sum;
  };
  Generator generator(42);
  Tensor first, second, inference = Tensor::empty(d.dst_dims(), d.dtype);
  training_loss(in.src, generator, &first);
  training_loss(in.src, generator, &second);
  EXPECT_EQ(values(first), values(second));
  RnnForward f{&in.src, &in.weights, &in.hx, nullptr, nullptr, &inference, nullptr, nullptr};
  rnn_fwd(context, d, f);
  EXPECT_NE(values(first), values(inference));
  Generator advanced(42);
  Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
  SavedState state;
  RnnForward g{&in.src, &in.weights, &in.hx, nullptr, nullptr, &dst, nullptr, nullptr};
  rnn_fwd_training(context, d, advanced, g, state);
  EXPECT_EQ(advanced.offset(), static_cast<std::uint64_t>((d.dropout_draws() + 3) / 4));
  Tensor diff_src = Tensor::empty(d.src_dims(), d.dtype);
  RnnBackwardData b{&in.src,      &in.weights, &in.hx,  nullptr,   nullptr, &dst,
                    &in.diff_dst, nullptr,     nullptr, &diff_src, nullptr, nullptr};
  rnn_bwd_data(context, d, b, state);
  const std::vector<float> gradient = values(diff_src);
  for (std::int64_t i : {0, 7, 17}) {
    std::vector<float> v = values(in.src);
    const float h = 1.0f / 128;
    v[static_cast<std::size_t>(i)] += h;
    const double up = training_loss(tensor_from(d.src_dims(), d.dtype, Layout::channels_first, v),
                                    generator, nullptr);
    v[static_cast<std::size_t>(i)] -= 2 * h;
    const double down = training_loss(tensor_from(d.src_dims(), d.dtype, Layout::channels_first, v),
                                      generator, nullptr);
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(gradient[static_cast<std::size_t>(i)], numeric, 0.02 * std::abs(numeric) + 1e-3);
  }
}

TEST(RnnReference, BackwardWeightsNeedsTheBackwardDataFirst) {
  const RnnDesc d = small(RnnCell::gru);
  const RnnInputs in = rnn_inputs(d, {}, 9);
  Context context = reference_context();
  Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
  Tensor diff_weights = Tensor::empty(Dims{d.weights_count()}, d.dtype);
  SavedState state;
  Generator generator;
  RnnForward f{&in.src, &in.weights, &in.hx, nullptr, nullptr, &dst, nullptr, nullptr};
  rnn_fwd_training(context, d, generator, f, state);
  RnnBackwardWeights w{&in.src, &in.weights, &in.hx, nullptr, nullptr, &dst, &diff_weights, false};
  expect_error(ErrorKind::InvalidArgument, {"rnn_bwd_data", "before rnn_bwd_weights"},
               [&] { rnn_bwd_weights(context, d, w, state); });
  SavedState empty;
  expect_error(ErrorKind::InvalidArgument, {"SavedState"},
               [&] { rnn_bwd_weights(context, d, w, empty); });
  RnnDesc other = d;
  other.hidden_size = 4;
  const RnnInputs other_in = rnn_inputs(other, {}, 9);
  Tensor other_dst = Tensor::empty(other.dst_dims(), other.dtype);
  Tensor other_diff = Tensor::empty(Dims{other.weights_count()}, other.dtype);
  RnnBackwardWeights o{&other_in.src, &other_in.weights, &other_in.hx, nullptr,
                       nullptr,       &other_dst,        &other_diff,  false};
  expect_error(ErrorKind::InvalidArgument, {"saved_state was filled by a forward of another rnn"},
               [&] { rnn_bwd_weights(context, other, o, state); });
}

// An exhaustive selection times an accumulating backward w.r.t. the weights on scratch tensors
// (each timed run would add to the caller's diff_weights again): the caller's tensor receives
// exactly one gradient, as under the heuristic.
TEST(RnnReference, ExhaustiveSelectionAccumulatesOnce) {
  const RnnDesc d = small(RnnCell::lstm, 2);
  const RnnInputs in = rnn_inputs(d, {}, 21);
  auto step = [&](PolicyKind kind) {
    Context context = reference_context();
    for (const Direction direction :
         {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights}) {
      context.tune().policy(OpKind::rnn, direction) =
          kind == PolicyKind::exhaustive ? AlgoPolicy::exhaustive() : AlgoPolicy::heuristic();
    }
    return run_rnn_step(context, d, in);
  };
  const RnnStep timed = step(PolicyKind::exhaustive);
  const RnnStep plain = step(PolicyKind::heuristic);
  for (const auto& [name, tensor] : plain.outputs)
    EXPECT_EQ(values(timed.outputs.at(name)), values(tensor)) << name;
}

// ---- bad inputs ----------------------------------------------------------------------------

std::function<void()> list_with(std::function<void(RnnDesc&)> edit) {
  return list_after(small(RnnCell::lstm), std::move(edit), dnnx::rnn_list);
}

// A forward of small(lstm) (variable lengths when `variable`) after `edit` changed its tensors.
std::function<void()> forward_with(bool variable,
                                   std::function<void(RnnInputs&, RnnForward&)> edit) {
  return [variable, edit] {
    RnnDesc d = small(RnnCell::lstm);
    d.variable_lengths = variable;
    RnnInputs in = rnn_inputs(d, {4, 3}, 1);
    Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
    Tensor hy = Tensor::empty(d.state_dims(), d.dtype);
    RnnForward f{&in.src, &in.weights, &in.hx, &in.cx, variable ? &in.lengths : nullptr,
                 &dst,    &hy,         nullptr};
    edit(in, f);
    Context context = reference_context();
    rnn_fwd(context, d, f);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  BadCaseAdder add(cases);
  add("hidden_size_0", list_with([](RnnDesc& d) { d.hidden_size = 0; }), K::InvalidArgument,
      {"hidden_size", "got 0"});
  add("layers_0", list_with([](RnnDesc& d) { d.layers = 0; }), K::InvalidArgument,
      {"layers", "got 0"});
  add("dropout_1", list_with([](RnnDesc& d) { d.dropout = 1.0f; }), K::InvalidArgument,
      {"dropout", "[0, 1)", "got 1"});
  add("dtype_i32", list_with([](RnnDesc& d) { d.dtype = DType::i32; }), K::InvalidArgument,
      {"dtype", "got i32"});
  add("cell_invalid", list_with([](RnnDesc& d) { d.cell = static_cast<RnnCell>(9); }),
      K::InvalidArgument, {"cell", "9"});
  add("seq_huge", list_with([](RnnDesc& d) { d.seq_length = std::int64_t{1} << 40; }),
      K::InvalidArgument, {"seq_length", "2^31"});
  add("length_longer_than_t",
      forward_with(true, [](RnnInputs& in,
                            RnnForward&) { static_cast<std::int32_t*>(in.lengths.data())[1] = 5; }),
      K::InvalidArgument, {"lengths[1]", "5", "seq_length = 4"});
  add("length_0",
      forward_with(true, [](RnnInputs& in,
                            RnnForward&) { static_cast<std::int32_t*>(in.lengths.data())[0] = 0; }),
      K::InvalidArgument, {"lengths[0]", "is 0"});
  add("lengths_missing", forward_with(true, [](RnnInputs&, RnnForward& f) { f.lengths = nullptr; }),
      K::InvalidArgument, {"lengths is missing", "variable_lengths = true"});
  add("lengths_unexpected",
      forward_with(false,
                   [](RnnInputs& in, RnnForward& f) {
                     in.lengths = Tensor::empty(Dims{2}, DType::i32);
                     f.lengths = &in.lengths;
                   }),
      K::InvalidArgument, {"lengths was given", "variable_lengths = false"});
  add("lengths_i64",
      forward_with(true,
                   [](RnnInputs& in, RnnForward& f) {
                     in.lengths = Tensor::empty(Dims{2}, DType::i64);
                     f.lengths = &in.lengths;
                   }),
      K::InvalidArgument, {"lengths is", "i64", "expected an i32 tensor"});
  add("hx_dims",
      forward_with(false,
                   [](RnnInputs& in, RnnForward&) {
                     in.hx = random_tensor(Dims{1, 3, 5}, DType::f32, Layout::channels_first, 1);
                   }),
      K::InvalidArgument, {"hx dims", "1x3x5", "1x2x5"});
  add("weights_size",
      forward_with(false,
                   [](RnnInputs& in, RnnForward&) {
                     in.weights = random_tensor(Dims{10}, DType::f32, Layout::channels_first, 1);
                   }),
      K::InvalidArgument, {"weights dims", "10"});
  add("weights_dtype",
      forward_with(false,
                   [](RnnInputs& in, RnnForward&) {
                     in.weights = random_tensor(Dims{in.weights.numel()}, DType::f16,
                                                Layout::channels_first, 1);
                   }),
      K::InvalidArgument, {"weights", "f16", "f32"});
  add("src_missing", forward_with(false, [](RnnInputs&, RnnForward& f) { f.src = nullptr; }),
      K::InvalidArgument, {"src is missing"});
  add("dst_overlaps_src",
      forward_with(false,
                   [](RnnInputs& in, RnnForward& f) {
                     // src and dst viewed onto one buffer.
                     static Tensor big;
                     big = Tensor::empty(Dims{64}, DType::f32);
                     in.src = Tensor::view(big.data(), Dims{4, 2, 3}, DType::f32);
                     *f.dst = Tensor::view(big.data(), Dims{4, 2, 5}, DType::f32);
                   }),
      K::InvalidArgument, {"dst overlaps src"});
  add("cx_for_gru",
      [] {
        RnnDesc d = small(RnnCell::gru);
        RnnInputs in = rnn_inputs(d, {}, 1);
        Tensor cx = Tensor::empty(d.state_dims(), d.dtype);
        Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
        RnnForward f{&in.src, &in.weights, &in.hx, &cx, nullptr, &dst, nullptr, nullptr};
        Context context = reference_context();
        rnn_fwd(context, d, f);
      },
      K::InvalidArgument, {"cx was given", "gru"});
  // The cpu backend's variable lengths (Note [cpu rnn variable lengths]): a backward must take
  // the lengths of the training forward that filled its state.
  add("cpu_backward_other_lengths",
      [] {
        RnnDesc d = small(RnnCell::lstm);
        d.variable_lengths = true;
        RnnInputs in = rnn_inputs(d, {4, 3}, 1);
        Tensor dst = Tensor::empty(d.dst_dims(), d.dtype);
        Tensor diff_src = Tensor::empty(d.src_dims(), d.dtype);
        Context context(BackendKind::cpu);
        context.set_choice_cache(std::make_shared<ChoiceCache>());
        Generator generator;
        SavedState state;
        rnn_fwd_training(
            context, d, generator,
            {&in.src, &in.weights, &in.hx, &in.cx, &in.lengths, &dst, nullptr, nullptr}, state);
        static_cast<std::int32_t*>(in.lengths.data())[1] = 2;
        rnn_bwd_data(context, d,
                     {&in.src, &in.weights, &in.hx, &in.cx, &in.lengths, &dst, &in.diff_dst,
                      nullptr, nullptr, &diff_src, nullptr, nullptr},
                     state);
      },
      K::InvalidArgument, {"lengths[1] is 2", "training forward", "ran with 3"});
  return cases;
}

class RnnErrors : public ::testing::TestWithParam<BadCase> {};
TEST_P(RnnErrors, RaisesWithKindAndMessage) { expect_raises(GetParam(), "rnn"); }
INSTANTIATE_TEST_SUITE_P(Table, RnnErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

}  // namespace
}  // namespace dnnx::test
