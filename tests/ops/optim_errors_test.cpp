// Bad inputs of sgd, adam, unscale and update_scale (STYLE.md "Tests"): each case asserts the
// error kind and that the message names the argument and the value — descs (empty lists, rank 0,
// negative sizes, dtypes, nesterov without momentum), hyperparameters (negative rates, betas,
// momentum against the desc), tensor lists (lengths, dtypes, dims, devices, missing or extra
// scalars, a found_inf of the wrong dtype) and overlap (an output sharing memory with another
// tensor); plus the semantics of a skipped step and of the scaler, worked out by hand.

#include <dnnx/dnnx.hpp>

#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <vector>

namespace dnnx::test {
namespace {

constexpr Layout rows = Layout::channels_first;

std::vector<Dims> base_shapes() { return {Dims{4}, Dims{2, 3}}; }

// The tensors of a call on base_shapes(), which `edit` may change.
struct State {
  std::vector<Tensor> params, grads, master, buffers, m, v, v_max, grads_rw;
  Tensor step = Tensor::zeros(Dims{1}, DType::f32);
  Tensor grad_scale = Tensor::zeros(Dims{1}, DType::f32);
  Tensor found_inf = Tensor::zeros(Dims{1}, DType::f32);
  Tensor inv_scale = Tensor::zeros(Dims{1}, DType::f32);
  Tensor scale = Tensor::zeros(Dims{1}, DType::f32);
  Tensor tracker = Tensor::zeros(Dims{1}, DType::i32);
  bool pass_grad_scale = false, pass_found_inf = false;

  explicit State(DType dtype = DType::f32) {
    std::uint64_t seed = 1;
    for (const Dims& dims : base_shapes()) {
      params.push_back(random_tensor(dims, dtype, rows, seed++));
      grads.push_back(random_tensor(dims, dtype, rows, seed++));
      grads_rw.push_back(random_tensor(dims, dtype, rows, seed++));
      master.push_back(random_tensor(dims, DType::f32, rows, seed++));
      buffers.push_back(random_tensor(dims, DType::f32, rows, seed++));
      m.push_back(random_tensor(dims, DType::f32, rows, seed++));
      v.push_back(Tensor::zeros(dims, DType::f32));
      v_max.push_back(Tensor::zeros(dims, DType::f32));
    }
    grad_scale.fill(2);
    inv_scale.fill(0.5f);
    scale.fill(1024);
  }
  SgdTensors sgd(const SgdDesc& d) {
    return {params,
            grads,
            d.master_weights ? std::span<Tensor>(master) : std::span<Tensor>(),
            d.momentum ? std::span<Tensor>(buffers) : std::span<Tensor>(),
            &step,
            d.grad_scale || pass_grad_scale ? &grad_scale : nullptr,
            d.found_inf || pass_found_inf ? &found_inf : nullptr};
  }
  AdamTensors adam(const AdamDesc& d) {
    return {params,
            grads,
            d.master_weights ? std::span<Tensor>(master) : std::span<Tensor>(),
            m,
            v,
            d.amsgrad ? std::span<Tensor>(v_max) : std::span<Tensor>(),
            &step,
            d.grad_scale || pass_grad_scale ? &grad_scale : nullptr,
            d.found_inf || pass_found_inf ? &found_inf : nullptr};
  }
};

SgdDesc sgd_desc() {
  SgdDesc d;
  d.shapes = base_shapes();
  d.momentum = true;
  return d;
}

AdamDesc adam_desc() {
  AdamDesc d;
  d.shapes = base_shapes();
  return d;
}

std::function<void()> sgd_call(std::function<void(SgdDesc&, SgdHyper&, State&)> edit) {
  return [edit] {
    SgdDesc d = sgd_desc();
    SgdHyper h{0.1, 0.9, 0, 0};
    State s;
    edit(d, h, s);
    Context context = reference_context();
    sgd_step(context, d, h, s.sgd(d));
  };
}

std::function<void()> sgd_tensors(std::function<void(SgdTensors&, State&)> edit) {
  return [edit] {
    const SgdDesc d = sgd_desc();
    State s;
    SgdTensors t = s.sgd(d);
    edit(t, s);
    Context context = reference_context();
    sgd_step(context, d, SgdHyper{0.1, 0.9, 0, 0}, t);
  };
}

std::function<void()> adam_call(std::function<void(AdamDesc&, AdamHyper&, State&)> edit) {
  return [edit] {
    AdamDesc d = adam_desc();
    AdamHyper h;
    State s;
    edit(d, h, s);
    Context context = reference_context();
    adam_step(context, d, h, s.adam(d));
  };
}

std::function<void()> adam_tensors(std::function<void(AdamTensors&, State&)> edit) {
  return [edit] {
    const AdamDesc d = adam_desc();
    State s;
    AdamTensors t = s.adam(d);
    edit(t, s);
    Context context = reference_context();
    adam_step(context, d, AdamHyper{}, t);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);
  // descs
  add("sgd_no_tensors", sgd_call([](SgdDesc& d, SgdHyper&, State&) { d.shapes.clear(); }),
      K::InvalidArgument, {"shapes is empty"});
  add("sgd_rank0", sgd_call([](SgdDesc& d, SgdHyper&, State&) { d.shapes[1] = Dims{}; }),
      K::InvalidArgument, {"shapes[1] has rank 0"});
  add("adam_negative_size", adam_call([](AdamDesc& d, AdamHyper&, State&) {
        d.shapes[0] = Dims{2, -3};
      }),
      K::InvalidArgument, {"shapes[0]", "negative size -3"});
  add("sgd_dtype", sgd_call([](SgdDesc& d, SgdHyper&, State&) { d.dtype = DType::i32; }),
      K::InvalidArgument, {"dtype must be f32, f16 or bf16, got i32"});
  add("sgd_nesterov_without_momentum", sgd_call([](SgdDesc& d, SgdHyper& h, State&) {
        d.momentum = false;
        d.nesterov = true;
        h.momentum = 0;
      }),
      K::InvalidArgument, {"nesterov needs momentum buffers"});
  // values
  add("sgd_negative_lr", sgd_call([](SgdDesc&, SgdHyper& h, State&) { h.lr = -0.1; }),
      K::InvalidArgument, {"lr must be finite and >= 0, got -0.1"});
  add("sgd_momentum_zero_with_buffers",
      sgd_call([](SgdDesc&, SgdHyper& h, State&) { h.momentum = 0; }), K::InvalidArgument,
      {"momentum must be > 0 when the desc has momentum buffers, got 0"});
  add("sgd_momentum_without_buffers",
      sgd_call([](SgdDesc& d, SgdHyper&, State&) { d.momentum = false; }), K::InvalidArgument,
      {"momentum is 0.9 but the desc has no momentum buffers"});
  add("sgd_nesterov_dampening", sgd_call([](SgdDesc& d, SgdHyper& h, State&) {
        d.nesterov = true;
        h.dampening = 0.5;
      }),
      K::InvalidArgument, {"nesterov needs dampening 0, got 0.5"});
  add("adam_beta1_one", adam_call([](AdamDesc&, AdamHyper& h, State&) { h.beta1 = 1; }),
      K::InvalidArgument, {"beta1 must be in [0, 1), got 1"});
  add("adam_beta2_nan", adam_call([](AdamDesc&, AdamHyper& h, State&) {
        h.beta2 = std::numeric_limits<double>::quiet_NaN();
      }),
      K::InvalidArgument, {"beta2 must be in [0, 1), got nan"});
  add("adam_negative_eps", adam_call([](AdamDesc&, AdamHyper& h, State&) { h.eps = -1e-8; }),
      K::InvalidArgument, {"eps must be finite and >= 0, got -1e-08"});
  add("adam_weight_decay_inf", adam_call([](AdamDesc&, AdamHyper& h, State&) {
        h.weight_decay = std::numeric_limits<double>::infinity();
      }),
      K::InvalidArgument, {"weight_decay must be finite and >= 0, got inf"});
  // tensor lists
  add("sgd_grads_short", sgd_tensors([](SgdTensors& t, State&) { t.grads = t.grads.first(1); }),
      K::InvalidArgument, {"grads has 1 tensors but the desc has 2 shapes"});
  add("adam_params_long", adam_tensors([](AdamTensors& t, State& s) {
        s.params.push_back(s.params[0]);
        t.params = s.params;
      }),
      K::InvalidArgument, {"params has 3 tensors but the desc has 2 shapes"});
  add("sgd_master_extra", sgd_tensors([](SgdTensors& t, State& s) { t.master = s.master; }),
      K::InvalidArgument, {"master has 2 tensors but master_weights is not set"});
  add("adam_state_missing", adam_tensors([](AdamTensors& t, State&) { t.exp_avg_sq = {}; }),
      K::InvalidArgument, {"exp_avg_sq has 0 tensors but the desc has 2 shapes"});
  add("adam_max_without_amsgrad",
      adam_tensors([](AdamTensors& t, State& s) { t.max_exp_avg_sq = s.v_max; }),
      K::InvalidArgument, {"max_exp_avg_sq has 2 tensors but amsgrad is not set"});
  add("sgd_grad_dtype", sgd_tensors([](SgdTensors&, State& s) {
        s.grads[1] = random_tensor(Dims{2, 3}, DType::f16, rows, 9);
      }),
      K::InvalidArgument, {"dtype mix: grads[1] is f16"});
  add("adam_state_dtype", adam_tensors([](AdamTensors&, State& s) {
        s.m[0] = random_tensor(Dims{4}, DType::bf16, rows, 9);
      }),
      K::InvalidArgument, {"dtype mix: exp_avg[0] is bf16", "f32"});
  add("sgd_param_dims", sgd_tensors([](SgdTensors&, State& s) {
        s.params[1] = random_tensor(Dims{3, 2}, DType::f32, rows, 9);
      }),
      K::InvalidArgument, {"params[1] dims 3x2 do not match the desc, which expects 2x3"});
  add("adam_strided_param", adam_tensors([](AdamTensors&, State& s) {
        s.params[1] = Tensor::view(s.params[1].data(), Dims{2, 3}, DType::f32, Dims{1, 2});
      }),
      K::InvalidArgument, {"layout mismatch: params[1]"});
  add("sgd_step_missing", sgd_tensors([](SgdTensors& t, State&) { t.step = nullptr; }),
      K::InvalidArgument, {"step is missing"});
  add("sgd_step_dtype", sgd_tensors([](SgdTensors& t, State& s) {
        s.tracker = Tensor::zeros(Dims{1}, DType::i32);
        t.step = &s.tracker;
      }),
      K::InvalidArgument, {"dtype mix: step is i32"});
  add("sgd_found_inf_not_in_desc",
      sgd_call([](SgdDesc&, SgdHyper&, State& s) { s.pass_found_inf = true; }), K::InvalidArgument,
      {"found_inf was given but found_inf is not set in the desc"});
  add("adam_grad_scale_missing",
      [] {
        AdamDesc d = adam_desc();
        d.grad_scale = true;
        State s;
        AdamTensors t = s.adam(d);
        t.grad_scale = nullptr;
        Context context = reference_context();
        adam_step(context, d, AdamHyper{}, t);
      },
      K::InvalidArgument, {"grad_scale is missing"});
  add("adam_found_inf_dtype", adam_call([](AdamDesc& d, AdamHyper&, State& s) {
        d.found_inf = true;
        s.found_inf = Tensor::zeros(Dims{1}, DType::f16);
      }),
      K::InvalidArgument, {"dtype mix: found_inf is f16"});
  add("adam_found_inf_dims", adam_call([](AdamDesc& d, AdamHyper&, State& s) {
        d.found_inf = true;
        s.found_inf = Tensor::zeros(Dims{2}, DType::f32);
      }),
      K::InvalidArgument, {"found_inf dims 2 do not match"});
  add("sgd_found_inf_on_gpu", sgd_call([](SgdDesc& d, SgdHyper&, State& s) {
        d.found_inf = true;
        s.found_inf = Tensor::view(s.inv_scale.data(), Dims{1}, DType::f32, Layout::channels_first,
                                   Device::cuda(0));
      }),
      K::InvalidArgument, {"found_inf is on cuda:0 but the context runs on cpu"});
  // overlap
  add("sgd_param_is_buffer", sgd_tensors([](SgdTensors&, State& s) { s.buffers[1] = s.params[1]; }),
      K::InvalidArgument, {"overlaps", "momentum_buffers[1]", "params[1]"});
  add("adam_param_is_grad", adam_tensors([](AdamTensors&, State& s) { s.grads[0] = s.params[0]; }),
      K::InvalidArgument, {"params[0] overlaps grads[0] in memory"});
  add("adam_two_params_share", adam_tensors([](AdamTensors&, State& s) {
        s.params[0] = Tensor::view(s.params[1].data(), Dims{4}, DType::f32);
      }),
      K::InvalidArgument, {"params[", "overlaps params["});
  add("adam_step_in_state", adam_tensors([](AdamTensors& t, State& s) {
        s.step = Tensor::view(s.v[0].data(), Dims{1}, DType::f32);
        t.step = &s.step;
      }),
      K::InvalidArgument, {"overlaps", "step", "exp_avg_sq[0]"});
  // unscale and update_scale
  add("unscale_found_inf_i32",
      [] {
        State s;
        UnscaleDesc d;
        d.shapes = base_shapes();
        Context context = reference_context();
        unscale(context, d, s.grads_rw, s.tracker, s.inv_scale);
      },
      K::InvalidArgument, {"dtype mix: found_inf is i32"});
  add("unscale_found_inf_in_grad",
      [] {
        State s;
        UnscaleDesc d;
        d.shapes = base_shapes();
        Tensor inside = Tensor::view(s.grads_rw[1].data(), Dims{1}, DType::f32);
        Context context = reference_context();
        unscale(context, d, s.grads_rw, inside, s.inv_scale);
      },
      K::InvalidArgument, {"overlaps", "found_inf", "grads[1]"});
  add("update_scale_interval",
      [] {
        State s;
        Context context = reference_context();
        update_scale(context, UpdateScaleDesc{}, {2.0, 0.5, 0}, s.scale, s.tracker, s.found_inf);
      },
      K::InvalidArgument, {"growth_interval must be in [1, 2^31 - 1], got 0"});
  add("update_scale_backoff",
      [] {
        State s;
        Context context = reference_context();
        update_scale(context, UpdateScaleDesc{}, {2.0, 1.5, 10}, s.scale, s.tracker, s.found_inf);
      },
      K::InvalidArgument, {"backoff_factor must be in (0, 1), got 1.5"});
  add("update_scale_tracker_f32",
      [] {
        State s;
        Context context = reference_context();
        update_scale(context, UpdateScaleDesc{}, {}, s.scale, s.found_inf, s.found_inf);
      },
      K::InvalidArgument, {"dtype mix: growth_tracker is f32"});
  return cases;
}

class OptimErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(OptimErrors, RaisesWithKindAndMessage) {
  const std::string op = GetParam().name.substr(0, GetParam().name.find('_'));
  expect_raises(GetParam(), op == "update" ? "update_scale" : op);
}

INSTANTIATE_TEST_SUITE_P(Table, OptimErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

// ---- semantics by hand ------------------------------------------------------------------------

float value(const Tensor& t, std::size_t i = 0) { return t.to_f32()[i]; }

// A skipped step leaves everything as it was, the next one is the first (the buffer takes the
// gradient), and the step count moves only when a step runs.
TEST(OptimSemantics, sgd_skip_then_first_step) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    SgdDesc d;
    d.shapes = {Dims{2}};
    d.momentum = d.found_inf = true;
    std::vector<Tensor> p{tensor_from(Dims{2}, DType::f32, rows, {1.0f, -2.0f})};
    std::vector<Tensor> g{tensor_from(Dims{2}, DType::f32, rows, {0.5f, 0.25f})};
    std::vector<Tensor> buf{tensor_from(Dims{2}, DType::f32, rows, {7.0f, 7.0f})};
    Tensor step = Tensor::zeros(Dims{1}, DType::f32);
    Tensor found_inf = Tensor::zeros(Dims{1}, DType::f32);
    found_inf.fill(1);
    const SgdHyper h{0.5, 0.9, 0.0, 0.0};
    sgd_step(context, d, h, {p, g, {}, buf, &step, nullptr, &found_inf});
    EXPECT_EQ(value(step), 0.0f);
    EXPECT_EQ(value(p[0]), 1.0f);
    EXPECT_EQ(value(buf[0]), 7.0f);
    found_inf.fill(0);
    sgd_step(context, d, h, {p, g, {}, buf, &step, nullptr, &found_inf});
    EXPECT_EQ(value(step), 1.0f);
    EXPECT_EQ(value(buf[0]), 0.5f);  // the first step's buffer is the gradient
    EXPECT_EQ(value(p[0]), 0.75f);   // 1 - 0.5 * 0.5
    sgd_step(context, d, h, {p, g, {}, buf, &step, nullptr, &found_inf});
    EXPECT_FLOAT_EQ(value(buf[0], 1), 0.9f * 0.25f + 0.25f);
    EXPECT_FLOAT_EQ(value(p[0], 1), -2.0f - 0.5f * 0.25f - 0.5f * (0.9f * 0.25f + 0.25f));
  }
}

// The scaler's sequence: a non-finite gradient sets found_inf and halves the scale; growth after
// growth_interval clean steps; found_inf reset by the scaler's unscale.
TEST(OptimSemantics, grad_scaler_backoff_and_growth) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    GradScaler scaler(context, 8.0f, {2.0, 0.5, 2});
    std::vector<Tensor> grads{tensor_from(Dims{3}, DType::f16, rows, {8.0f, 16.0f, 4.0f})};
    scaler.unscale(context, grads, DType::f16);
    EXPECT_EQ(value(scaler.found_inf()), 0.0f);
    EXPECT_EQ(value(grads[0], 1), 2.0f);
    scaler.update(context);
    EXPECT_EQ(scaler.scale_value(), 8.0f);
    EXPECT_EQ(value(scaler.growth_tracker()), 1.0f);
    grads[0].copy_from_f32(std::vector<float>{1.0f, std::numeric_limits<float>::infinity(), 2.0f});
    scaler.unscale(context, grads, DType::f16);
    EXPECT_EQ(value(scaler.found_inf()), 1.0f);
    scaler.update(context);
    EXPECT_EQ(scaler.scale_value(), 4.0f);
    EXPECT_EQ(value(scaler.growth_tracker()), 0.0f);
    for (int i = 0; i < 2; ++i) {
      grads[0].copy_from_f32(std::vector<float>{1.0f, 2.0f, 3.0f});
      scaler.unscale(context, grads, DType::f16);
      EXPECT_EQ(value(scaler.found_inf()), 0.0f);
      scaler.update(context);
    }
    EXPECT_EQ(scaler.scale_value(), 8.0f);
    EXPECT_EQ(value(scaler.growth_tracker()), 0.0f);
  }
}

TEST(OptimDesc, repro_and_key) {
  SgdDesc sgd;
  sgd.shapes = {Dims{64, 3, 7, 7}, Dims{0}, Dims{64}};
  sgd.dtype = DType::bf16;
  sgd.momentum = sgd.nesterov = sgd.found_inf = true;
  EXPECT_EQ(sgd.repro(),
            "dnnx profile sgd --sizes 64x3x7x7,0,64 --dtype bf16 --momentum --nesterov "
            "--found-inf --direction fwd");
  const AdamDesc adam = AdamDesc::adamw(resnet50_parameter_shapes());
  EXPECT_EQ(
      adam.repro(),
      "dnnx profile adam --model resnet50 --dtype f32 --decoupled-weight-decay --direction fwd");
  EXPECT_EQ(adam.shapes.size(), 161u);
  EXPECT_EQ(adam.numel(), 25557032);
  AdamDesc other = adam;
  other.amsgrad = true;
  EXPECT_NE(other.key(), adam.key());
  EXPECT_NE(other.hash(), adam.hash());
  EXPECT_EQ(parse_op_kind("adamw"), OpKind::adam);
}

}  // namespace
}  // namespace dnnx::test
